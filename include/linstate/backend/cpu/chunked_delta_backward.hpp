// linstate/backend/cpu/chunked_delta_backward.hpp — chunk-parallel backward of the gated delta rule
// (SPEC §3.2, WY form), the adjoint of run_chunked_delta (kernels.hpp).
//
// Forward, per chunk of m steps with entering state S [K,V] (notation of run_chunked_delta):
//   Q [m,K]  rows s·cr_i·q̂_i on read steps, 0 elsewhere        (q̂ = l2norm(q) or q)
//   K [m,K]  rows k̂_i on written steps, 0 elsewhere             (k̂ = l2norm(k) or k)
//   V [m,V]  rows v_i on written steps, 0 elsewhere
//   b [m]    β̃_i = β_i·cw_i on written steps, 0 elsewhere
//   G [m]    inclusive local cumsum of g over the written steps (an unwritten step adds 0)
//   Γ_ij = e^{G_i − G_j} (j ≤ i, ≤ 1)
//   Mg = strict_lower(K Kᵀ ⊙ Γ),  L = I + diag(b) Mg
//   L [U | W] = [diag(b) V | diag(b e^G) K]                    (B_U, B_W: the right-hand sides)
//   Vn = U − W S
//   A  = lower_incl(Q Kᵀ ⊙ Γ),  Qg = diag(e^G) Q
//   O  = Qg S + A Vn
//   S' = e^{G_m} S + Kdᵀ Vn,  Kd = diag(e^{G_m − G}) K
//
// Reverse, given dO [m,V] (0 on rows that are not read) and dS' = ∂L/∂S' (the running Dh):
//   dVn = Aᵀ dO + Kd dS'
//   dKd = Vn dS'ᵀ          → dK_i += e^{G_m−G_i} dKd_i ;  c_i = ⟨dKd_i, Kd_i⟩: dG_i −= c_i, dG_m += c_i
//   dG_m += e^{G_m} ⟨dS', S⟩
//   dA  = lower_incl(dO Vnᵀ); P = dA ⊙ Γ
//         → dQ += P K,  dK += Pᵀ Q,  dG_i += Σ_j dA_ij A_ij,  dG_j −= Σ_i dA_ij A_ij
//   dQg = dO Sᵀ            → dQ_i += e^{G_i} dQg_i,  dG_i += ⟨dQg_i, Qg_i⟩
//   dU = dVn, dW = −dVn Sᵀ
//   triangular solve adjoint (L X = B ⇒ dB = L⁻ᵀ dX, dL = −dB Xᵀ):
//     [dB_U | dB_W] = L⁻ᵀ [dU | dW] = Tᵀ [dU | dW],  dL = −[dB_U | dB_W] [U | W]ᵀ (strict lower part)
//     (T = L⁻¹ is formed once per chunk, so the forward solve [U | W] = T [B_U | B_W] and this adjoint
//     solve are both GEMMs: faster than triangular solves with V + K right-hand sides at these sizes)
//   right-hand sides: dV_i = b_i dB_U,i ;  db_i += ⟨dB_U,i, V_i⟩ + e^{G_i} ⟨dB_W,i, K_i⟩
//                     dK_i += b_i e^{G_i} dB_W,i ;  dG_i += b_i e^{G_i} ⟨dB_W,i, K_i⟩
//   L = I + diag(b) Mg:  db_i += Σ_{j<i} dL_ij Mg_ij ;  dMg = diag(b) dL
//   Mg = strict_lower(K Kᵀ ⊙ Γ):  dG_i += Σ_{j<i} dMg_ij Mg_ij,  dG_j −= the same ;
//                                 dM = dMg ⊙ Γ,  dK += (dM + dMᵀ) K
//   dS = e^{G_m} dS' + Qgᵀ dO − Wᵀ dVn                    (the Dh entering the previous chunk)
//   dg_i = Σ_{j ≥ i, j in chunk} dG_j                      (G = cumsum(g): reverse cumsum; written steps only)
//   (G sums the floored gates max(g, −104), detail::chunked_log_decay_floor; dg_i = 0 where g_i is below it)
// Per step: dβ = cw·db, d(write weight) = β·db; dq = s·cr·l2norm_bwd(dQ), d(read weight) = s·⟨q̂, dQ⟩;
// dk = l2norm_bwd(dK)   (l2norm_bwd(d) = d/n − x ⟨x, d⟩/n³, n = sqrt(Σx² + 1e-6)).
// A chunk without writes has G ≡ 0 and S' = S: only O = Q S, so dQ = dO Sᵀ and dS = dS' + Qᵀ dO.
//
// Memory: one forward pass stores only the chunk-entering states S_n ([chunks, K, V]); the reverse
// pass recomputes L, [U | W] and Vn of each chunk from S_n. Every exponent is ≤ 0. All scratch is
// sized in reserve() (and the state store once per stream); the chunk loop allocates nothing.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backward_kernels.hpp"

namespace linstate::cpu_detail {

struct delta_bwd_scratch {
  RowMat Q, Qraw, Kraw, Kc, Vc, Gam, Mg, L, A, dA, X, B, UW, Vn, dO, dVn, dUW, dQ, dK, Y, Kd;
  RowMat Dh;
  RowVec trow;
  std::vector<float> G, beta, dG, dbeta;
  std::vector<float> states;  // [chunks, K, V] chunk-entering states of the current stream
  void reserve(index_t C, index_t K, index_t V) {
    for (RowMat* x : {&Q, &Qraw, &Kraw, &Kc, &dQ, &dK, &Y, &Kd}) x->resize(C, K);
    for (RowMat* x : {&Vc, &Vn, &dO, &dVn}) x->resize(C, V);
    for (RowMat* x : {&Gam, &Mg, &L, &A, &dA, &X}) x->resize(C, C);
    for (RowMat* x : {&B, &UW, &dUW}) x->resize(C, V + K);
    Dh.resize(K, V), trow.resize(C);
    const auto c = static_cast<std::size_t>(C);
    G.resize(c), beta.resize(c), dG.resize(c), dbeta.resize(c);
  }
};

namespace delta_bwd {

//! x ← x / sqrt(Σx² + 1e-6) (as kernels.hpp's l2normalize, with a vectorised sum)
inline void normalize(float* x, index_t n) {
  Eigen::Map<Eigen::VectorXf> xv(x, n);
  xv *= 1.f / std::sqrt(xv.squaredNorm() + 1e-6f);
}

//! dx += mul·l2norm_bwd(x, d) (or mul·d without the norm); returns ⟨x̂, d⟩.
//! l2norm_bwd(x, d) = d/n − x ⟨x, d⟩/n³,  n = sqrt(Σx² + 1e-6).
inline float norm_backward(bool l2, const float* x, const float* d, float* dx, index_t n, float mul) {
  const Eigen::Map<const Eigen::VectorXf> xv(x, n), dv(d, n);
  Eigen::Map<Eigen::VectorXf> out(dx, n);
  const float dot = xv.dot(dv);
  if (!l2) {
    out += mul * dv;
    return dot;
  }
  const float inv = 1.f / std::sqrt(xv.squaredNorm() + 1e-6f), c = dot * inv * inv * inv;
  out += (mul * inv) * dv - (mul * c) * xv;
  return dot * inv;
}

//! Loads the rows of one chunk, β̃ and the local cumulative log-decay G; `bwd`: also Q and the raw
//! q, k rows (for the l2norm backward).
template <class D, class Scalar>
inline void load_chunk(const problem& pb, const source<Scalar>& src, const stream& st, index_t h, index_t hv, index_t c0,
                       index_t m, bool bwd, delta_bwd_scratch& sc, bool& any_w, bool& any_r) {
  const index_t K = pb.K, V = pb.V, H = pb.H, HV = pb.HV;
  any_w = false, any_r = false;
  double gsum = 0.;  // G: the floored log-decays summed in fp64, each G_i rounded once (as the forward)
  for (index_t i = 0; i < m; ++i) {
    const index_t s = c0 + i, t = st.tok(s);
    const std::uint8_t f = st.flag(s);
    const bool w = f & detail::route_write, r = f & detail::route_read;
    any_w |= w, any_r |= r;
    if (bwd) {
      float* qrow = sc.Q.row(i).data();
      if (r) {
        float* raw = sc.Qraw.row(i).data();
        load(src.q + (t * H + h) * K, raw, K);
        std::copy(raw, raw + K, qrow);
        if (D::l2norm_qk) normalize(qrow, K);
        const float mul = pb.scale * st.wgt_r(s);
        for (index_t a = 0; a < K; ++a) qrow[a] *= mul;
      } else {
        std::fill(qrow, qrow + K, 0.f);
      }
    }
    float* krow = sc.Kc.row(i).data();
    float* vrow = sc.Vc.row(i).data();
    if (w) {
      load(src.k + (t * H + h) * K, krow, K);
      if (bwd) std::copy(krow, krow + K, sc.Kraw.row(i).data());
      if (D::l2norm_qk) normalize(krow, K);
      load(src.v + (t * HV + hv) * V, vrow, V);
      gsum += detail::chunked_log_decay(detail::to_float(D::log_decay(src.g + t * HV + hv, 0)));
      sc.beta[static_cast<std::size_t>(i)] = D::write_strength(detail::to_float(src.beta[t * HV + hv]), st.wgt_w(s));
    } else {
      std::fill(krow, krow + K, 0.f);
      std::fill(vrow, vrow + V, 0.f);
      sc.beta[static_cast<std::size_t>(i)] = 0.f;
    }
    sc.G[static_cast<std::size_t>(i)] = static_cast<float>(gsum);
  }
}

//! The WY quantities of a written chunk with entering state S: Γ (lower incl.), Mg, T = L⁻¹ (in L's
//! storage, zero above the diagonal), [U | W] = T [B_U | B_W] and Vn. L is unit lower triangular, so
//! T is too; its rows come by forward substitution, T_i,:i = −L_i,:i T_:i,:i (m³/3 flops, small next to
//! the m²(V+K) of the products), and then both the forward solve and the adjoint solve are GEMMs.
template <int = 0>  // a template, so that a TU that never calls it does not instantiate it
inline void wy(index_t m, index_t K, index_t V, const Eigen::Map<const RowMat>& S, delta_bwd_scratch& sc) {
  const float* G = sc.G.data();
  const float* b = sc.beta.data();
  auto Kc = sc.Kc.topRows(m);
  auto Vc = sc.Vc.topRows(m);
  auto Gam = sc.Gam.topLeftCorner(m, m);
  auto Mg = sc.Mg.topLeftCorner(m, m);
  auto L = sc.L.topLeftCorner(m, m);
  auto UW = sc.UW.topRows(m);
  auto B = sc.B.topRows(m);
  auto Vn = sc.Vn.topRows(m);
  const Eigen::Map<const Eigen::ArrayXf> Gv(G, m);
  const Eigen::Map<const Eigen::VectorXf> bv(b, m);
  for (index_t i = 0; i < m; ++i) {  // Γ, zero above the diagonal (so ⊙Γ also masks)
    Gam.row(i).head(i + 1) = (G[i] - Gv.head(i + 1)).exp().matrix().transpose();
    Gam.row(i).tail(m - i - 1).setZero();
  }
  Mg.noalias() = Kc * Kc.transpose();
  Mg.array() *= Gam.array();
  Mg.diagonal().setZero();  // strict lower
  L.noalias() = bv.asDiagonal() * Mg;
  L.diagonal().setOnes();
  for (index_t i = 0; i < m; ++i) {
    B.row(i).head(V) = b[i] * Vc.row(i);
    B.row(i).tail(K) = (b[i] * std::exp(G[i])) * Kc.row(i);
  }
  for (index_t i = 1; i < m; ++i) {  // L → T = L⁻¹ in place (rows < i already hold T)
    auto t = sc.trow.head(i);
    t.noalias() = -L.row(i).head(i) * L.topLeftCorner(i, i);
    L.row(i).head(i) = t;
  }
  UW.noalias() = L * B;  // [U | W]
  Vn.noalias() = UW.leftCols(V);
  Vn.noalias() -= UW.rightCols(K) * S;
}

}  // namespace delta_bwd

template <class D, class Scalar>
void run_chunked_delta_backward(const problem& pb, const source<Scalar>& src, const stream& st,
                                const bwd_target<Scalar>& tg, index_t C, delta_bwd_scratch& sc) {
  using delta_bwd::load_chunk;
  const index_t K = pb.K, V = pb.V, HV = pb.HV, KV = K * V;
  const index_t nch = (st.n + C - 1) / C;
  sc.states.resize(static_cast<std::size_t>(std::max<index_t>(nch, 1) * KV));
  Eigen::Map<RowMat> Dh(sc.Dh.data(), K, V);
  bool any_w = false, any_r = false;
  float* G = sc.G.data();
  float* b = sc.beta.data();

  // ---- forward: the chunk-entering states S_n (Dh's storage holds the running state) -------------
  if (tg.h0) std::memcpy(Dh.data(), tg.h0, static_cast<std::size_t>(KV) * sizeof(float));
  else Dh.setZero();
  for (index_t n = 0; n < nch; ++n) {
    std::memcpy(sc.states.data() + n * KV, Dh.data(), static_cast<std::size_t>(KV) * sizeof(float));
    if (n + 1 == nch) break;  // the last chunk's exit state is not needed
    const index_t c0 = n * C, m = std::min(C, st.n - c0);
    load_chunk<D>(pb, src, st, tg.h, tg.hv, c0, m, false, sc, any_w, any_r);
    if (!any_w) continue;  // frozen
    const Eigen::Map<const RowMat> S(sc.states.data() + n * KV, K, V);
    delta_bwd::wy(m, K, V, S, sc);
    const float Gm = G[m - 1];
    auto Kd = sc.Kd.topRows(m);
    for (index_t i = 0; i < m; ++i) Kd.row(i) = std::exp(Gm - G[i]) * sc.Kc.row(i);
    Dh *= std::exp(Gm);
    Dh.noalias() += Kd.transpose() * sc.Vn.topRows(m);
  }

  // ---- reverse -----------------------------------------------------------------------------------
  if (tg.dht) std::memcpy(Dh.data(), tg.dht, static_cast<std::size_t>(KV) * sizeof(float));
  else Dh.setZero();
  float* dG = sc.dG.data();
  float* db = sc.dbeta.data();

  for (index_t n = nch - 1; n >= 0; --n) {
    const index_t c0 = n * C, m = std::min(C, st.n - c0);
    load_chunk<D>(pb, src, st, tg.h, tg.hv, c0, m, true, sc, any_w, any_r);
    if (!any_w && !any_r) {
      if (tg.dcw) std::fill(tg.dcw + c0, tg.dcw + c0 + m, 0.f);
      if (tg.dcr) std::fill(tg.dcr + c0, tg.dcr + c0 + m, 0.f);
      continue;
    }
    const Eigen::Map<const RowMat> S(sc.states.data() + n * KV, K, V);
    auto Q = sc.Q.topRows(m);
    auto Kc = sc.Kc.topRows(m);
    auto Vc = sc.Vc.topRows(m);
    auto dO = sc.dO.topRows(m);
    auto dQ = sc.dQ.topRows(m);
    auto dK = sc.dK.topRows(m);
    auto dUW = sc.dUW.topRows(m);
    if (any_r)
      for (index_t i = 0; i < m; ++i) {
        const index_t s = c0 + i;
        float* row = dO.row(i).data();
        if (st.flag(s) & detail::route_read) load(tg.dO + (st.tok(s) * HV + tg.hv) * V, row, V);
        else std::fill(row, row + V, 0.f);
      }

    if (!any_w) {  // read only (G ≡ 0, S' = S): O = Q S
      dQ.noalias() = dO * S.transpose();
      Dh.noalias() += Q.transpose() * dO;
    } else {
      delta_bwd::wy(m, K, V, S, sc);
      auto Gam = sc.Gam.topLeftCorner(m, m);
      auto Mg = sc.Mg.topLeftCorner(m, m);
      auto L = sc.L.topLeftCorner(m, m);
      auto UW = sc.UW.topRows(m);
      auto Vn = sc.Vn.topRows(m);
      auto dVn = sc.dVn.topRows(m);
      auto Kd = sc.Kd.topRows(m);
      auto A = sc.A.topLeftCorner(m, m);
      auto dA = sc.dA.topLeftCorner(m, m);
      auto X = sc.X.topLeftCorner(m, m);
      Eigen::Map<Eigen::VectorXf> dGv(dG, m), dbv(db, m);
      const Eigen::Map<const Eigen::VectorXf> bv(b, m);
      const float Gm = G[m - 1], eGm = std::exp(Gm);
      std::fill(dG, dG + m, 0.f);
      std::fill(db, db + m, 0.f);
      float dGm = 0.f;

      // S' = e^{G_m} S + Kdᵀ Vn
      for (index_t i = 0; i < m; ++i) Kd.row(i) = std::exp(Gm - G[i]) * Kc.row(i);
      dVn.noalias() = Kd * Dh;
      dK.noalias() = Vn * Dh.transpose();  // dKd
      for (index_t i = 0; i < m; ++i) {
        const float c = dK.row(i).dot(Kd.row(i));
        dG[i] -= c, dGm += c;
        dK.row(i) *= std::exp(Gm - G[i]);
      }
      dGm += eGm * Dh.cwiseProduct(S).sum();
      Dh *= eGm;  // dS' consumed: Dh now accumulates dS

      // O = Qg S + A Vn
      if (any_r) {
        A.noalias() = Q * Kc.transpose();
        A.array() *= Gam.array();  // lower incl. (Γ is zero above the diagonal)
        dVn.noalias() += A.transpose() * dO;
        dA.noalias() = dO * Vn.transpose();
        X.array() = dA.array() * A.array();  // dG from Γ inside A (the diagonal cancels)
        dGv += X.rowwise().sum() - X.colwise().sum().transpose();
        dA.array() *= Gam.array();  // P = lower_incl(dA) ⊙ Γ
        dQ.noalias() = dA * Kc;
        dK.noalias() += dA.transpose() * Q;
        auto Y = sc.Y.topRows(m);
        Y.noalias() = dO * S.transpose();  // dQg
        for (index_t i = 0; i < m; ++i) {
          const float e = std::exp(G[i]);
          dG[i] += e * Y.row(i).dot(Q.row(i));
          dQ.row(i) += e * Y.row(i);
          Q.row(i) *= e;  // Q → Qg
        }
        Dh.noalias() += Q.transpose() * dO;
      }

      // Vn = U − W S ;  L [U | W] = [B_U | B_W]
      dUW.leftCols(V) = dVn;
      dUW.rightCols(K).noalias() = -dVn * S.transpose();
      Dh.noalias() -= UW.rightCols(K).transpose() * dVn;
      auto dB = sc.B.topRows(m);
      dB.noalias() = L.transpose() * dUW;  // [dB_U | dB_W] = Tᵀ [dU | dW]
      for (index_t i = 0; i < m; ++i) {  // (rows not written: K_i = V_i = 0, b_i = 0 → all zero)
        const float e = std::exp(G[i]);
        const float kb = dB.row(i).tail(K).dot(Kc.row(i));
        db[i] += dB.row(i).head(V).dot(Vc.row(i)) + e * kb;
        dG[i] += b[i] * e * kb;
        dK.row(i) += (b[i] * e) * dB.row(i).tail(K);
      }
      auto dL = sc.dA.topLeftCorner(m, m);
      dL.noalias() = -dB * UW.transpose();
      X.array() = dL.array() * Mg.array();  // strict lower (Mg is)
      dbv += X.rowwise().sum();
      X.array().colwise() *= bv.array();  // dMg ⊙ Mg
      dGv += X.rowwise().sum() - X.colwise().sum().transpose();
      dL.array().colwise() *= bv.array();  // dMg = diag(b) dL
      dL.array() *= Gam.array();  // dM = strict_lower(dMg) ⊙ Γ: Γ masks the upper part,
      dL.diagonal().setZero();    // and the diagonal of L is constant
      X.noalias() = dL + dL.transpose();
      dK.noalias() += X * Kc;
      dG[m - 1] += dGm;
    }

    // ---- per-step gradients ----
    float acc = 0.f;  // reverse cumsum of dG
    for (index_t i = m - 1; i >= 0; --i) {
      const index_t s = c0 + i, t = st.tok(s), row = t - tg.tok0;
      const std::uint8_t f = st.flag(s);
      const bool w = f & detail::route_write, r = f & detail::route_read;
      if (any_w) acc += dG[i];
      if (tg.dcr) tg.dcr[s] = 0.f;
      if (tg.dcw) tg.dcw[s] = 0.f;
      if (r) {
        const float dot = delta_bwd::norm_backward(D::l2norm_qk, sc.Qraw.row(i).data(), dQ.row(i).data(), tg.dq + row * K, K,
                                                   pb.scale * st.wgt_r(s));
        if (tg.dcr) tg.dcr[s] = pb.scale * dot;
      }
      if (w) {
        delta_bwd::norm_backward(D::l2norm_qk, sc.Kraw.row(i).data(), dK.row(i).data(), tg.dk + row * K, K, 1.f);
        float* __restrict dv = tg.dv + row * V;
        const float* __restrict dbu = sc.B.row(i).data();
        for (index_t j = 0; j < V; ++j) dv[j] += b[i] * dbu[j];
        float dbeta = 0.f, dcw = 0.f;  // the policy's adjoint of b(β, w)
        D::write_strength_backward(detail::to_float(src.beta[t * HV + tg.hv]), st.wgt_w(s), db[i], dbeta, dcw);
        tg.dbeta[row] += dbeta;
        if (tg.dcw) tg.dcw[s] = dcw;
        // G sums the floored gates: ∂L/∂g is 0 below the floor (detail::chunked_log_decay_floor)
        if (!detail::below_log_decay_floor(detail::to_float(D::log_decay(src.g + t * HV + tg.hv, 0)))) tg.dg[row] += acc;
      }
    }
  }
  if (tg.dh0) std::memcpy(tg.dh0, Dh.data(), static_cast<std::size_t>(KV) * sizeof(float));
}

}  // namespace linstate::cpu_detail
