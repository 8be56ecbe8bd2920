// linstate/backend/cpu/chunked_backward.hpp — chunk-parallel backward of the gated family (none,
// scalar, diagonal decay; SPEC §2.4) over one stream, the adjoint of run_chunked (kernels.hpp).
//
// Notation (one stream, one chunk n of m ≤ C steps, local rows t, j ∈ [0, m)):
//   q̃_t = s·cr_t·q_t  (0 if step t is not read)        Q̃  [m,K]
//   k̃_j = cw_j·k_j    (0 if step j is not written)     K̃  [m,K]
//   v_j               (0 if not written)               V  [m,V]
//   dO_t = ∂L/∂o_t    (0 if not read)                  dO [m,V]
//   Γ_t  = Σ_{u≤t in chunk} g_u (g_u = 0 if not written; scalar decay: broadcast over K)   Γ [m,K]
//   γ    = Γ_{m−1};  H = H_n (state entering the chunk), D = D_n = ∂L/∂H_{n+1}   [K,V]
// Forward (SPEC §2.3):  o_t = (q̃_t ⊙ e^{Γ_t})ᵀ H + Σ_{j≤t} A_tj v_j,
//                        A_tj = Σ_i q̃_t[i] k̃_j[i] e^{Γ_t[i] − Γ_j[i]}   (j ≤ t),
//                        H_{n+1} = diag(e^{γ}) H + (K̃ ⊙ e^{γ−Γ})ᵀ V.
// Backward (SPEC §2.4), with dA_tj = dO_t·v_j for j ≤ t (the scale lives in q̃):
//   (a) ∂L/∂H_n = diag(e^{γ}) D + (Q̃ ⊙ e^{Γ})ᵀ dO                        → D_{n−1}; dh0 = ∂L/∂H_0
//   (c) dV   = Aᵀ dO + (K̃ ⊙ e^{γ−Γ}) D
//   (d) dQ̃_t = Σ_{j≤t} dA_tj k̃_j ⊙ e^{Γ_t−Γ_j} + e^{Γ_t} ⊙ (H dO_t)
//       dK̃_j = Σ_{t≥j} dA_tj q̃_t ⊙ e^{Γ_t−Γ_j} + e^{γ−Γ_j} ⊙ (D v_j)          [2nd term: dK̃^inter]
//   (e) SPEC: r_t = q̃_t ⊙ dQ̃_t − k̃_t ⊙ dK̃_t,  c_n = e^{γ} ⊙ rowsum(H ⊙ D) + Σ_t k̃_t ⊙ dK̃^inter_t,
//       dg_u = Σ_{t≥u in chunk} r_t + c_n  (written u only). Used here in an equivalent form without
//       the two exact cancellations that cost digits under strong decays (see the code at (e)):
//       dg_u = Σ_{t≥u} [q̃_t⊙(dQ̃^s_t + dQ̃^inter_t) − k̃_t⊙dK̃^s_t] + Σ_{j<u} k̃_j⊙dK̃^inter_j + e^{γ}⊙rowsum(H⊙D),
//       dQ̃^s, dK̃^s: the intra sums without their diagonal (j = t) term.
// Raw-input gradients, identical in meaning to run_recurrent_backward:
//   dq_t += s·cr_t·dQ̃_t,  dcr_t = s·⟨q_t, dQ̃_t⟩;   dk_j += cw_j·dK̃_j,  dcw_j = ⟨k_j, dK̃_j⟩;   dv_j += dV_j;
//   dg (diagonal) [len,K] += dg_u, (scalar) [len] += Σ_i dg_u[i].
//
// Stability (SPEC §8): when the chunk's decay span −min γ ≤ single_gemm_span (same test as the
// forward) the intra terms are single GEMMs with the factors e^{±Γ} (bounded by e^{40}); otherwise
// they are formed on sub-chunks of 16 rows with a reference row between the blocks (first row of the
// later block for A and dQ̃, last row of the earlier block for dK̃) so that every exponent is ≤ 0, and
// diagonal sub-blocks are element-wise for j ≤ t only. Γ sums the floored gates max(g, −104) (as the
// forward, detail::chunked_log_decay_floor), and dg of a floored gate is exactly 0 (floor_gradient).
//
// Memory: the state entering every chunk (H_0ᵀ … H_{NC−1}ᵀ, V×K each): the forward's when it kept them
// (linstate::saved_states, bwd_target::chunk_states), else recomputed into the scratch by the forward's
// chunk step; no allocation inside the chunk loops once the scratch has grown to the longest stream.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backward_kernels.hpp"
#include "exp.hpp"
#include "gemm.hpp"

namespace linstate::cpu_detail {

using RowMatD = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

struct chunk_bwd_scratch {
  // per-chunk inputs: raw q, raw k (for dcr/dcw), q̃, k̃, v, dO
  RowMat Qr, Kr, Q, Kt, Vc, dO;
  // Γ in fp64: every exponent Γ_t − Γ_j (and γ − Γ_j, ±Γ_t) is formed in fp64 and rounded once, so its
  // error is relative to the difference, not to |Γ| (which reaches ~500 in a chunk of 64 strong decays)
  RowMatD G;
  RowVec grow;
  // decay factors e^{Γ}, e^{−Γ}, e^{γ−Γ}; Q̃ ⊙ e^{Γ}; K̃ ⊙ e^{−Γ} (or sub-chunk keys); K̃ ⊙ e^{γ−Γ}
  RowMat E, Ei, Egd, Qg, Kinv, Kd;
  RowMat A, dA;                        // [C,C]
  RowMat dQi, dQs, dKi, dKs, dV, DG;   // gradient parts (inter / strictly intra), dV, dg rows
  RowMat T, X;                         // temporaries of the sub-chunked path
  Eigen::VectorXf adiag;               // [C] dA_tt
  RowVec gamma, egamma, acc, ex, rq, rk;
  RowMat D;                    // [K,V] ∂L/∂(state leaving the current chunk)
  RowMat DT;                   // [V,K] Dᵀ
  RowMat VT, KT;               // [V,C] Vᵀ, [K,C] (K̃ ⊙ e^{−Γ})ᵀ or K̃ᵀ: the right operands of dA and A
  std::vector<float> states;   // [NC, V, K] the states entering the chunks, transposed, H_0ᵀ … H_{NC−1}ᵀ, when recomputed
  std::vector<float> H;        // [K,V] the running state of their recomputation
  chunk_scratch fwd;           // the forward's chunk step, which recomputes them (kernels.hpp)
  void reserve(index_t C, index_t K, index_t V) {
    G.resize(C, K), grow.resize(K);
    for (RowMat* x : {&Qr, &Kr, &Q, &Kt, &E, &Ei, &Egd, &Qg, &Kinv, &Kd, &dQi, &dQs, &dKi, &dKs, &DG, &T, &X})
      x->resize(C, K);
    adiag.resize(C), rq.resize(K), rk.resize(K);
    Vc.resize(C, V), dO.resize(C, V), dV.resize(C, V);
    A.resize(C, C), dA.resize(C, C);
    gamma.resize(K), egamma.resize(K), acc.resize(K), ex.resize(K);
    D.resize(K, V), DT.resize(V, K), VT.resize(V, C), KT.resize(K, C);
    H.resize(static_cast<std::size_t>(K * V)), fwd.reserve(C, K, V);
  }
};

//! dst(i,:) = exp(float(sa·A(i,:) + sr·ref)) for fp64 exponents (ref: one row, or null): each exponent
//! is formed in fp64 and rounded once, then the vectorised fp32 exp runs. Row-major operands; plain
//! loops because Eigen 3.4 has no vectorised double→float cast.
template <class Dst, class A>
inline void exp_into(Dst&& dst, const A& a, double sa, const double* ref = nullptr, double sr = 0.) {
  const index_t rows = a.rows(), cols = a.cols();
  for (index_t i = 0; i < rows; ++i) {
    float* __restrict d = dst.row(i).data();
    const double* __restrict x = a.row(i).data();
    if (ref)
      for (index_t j = 0; j < cols; ++j) d[j] = static_cast<float>(sa * x[j] + sr * ref[j]);
    else
      for (index_t j = 0; j < cols; ++j) d[j] = static_cast<float>(sa * x[j]);
  }
  dst = dst.array().exp().matrix();
}

//! One row of the decay factors (K a multiple of Eigen's float packet): egd = e^{γ−Γ}, kd = k̃ ⊙ egd; where e is
//! given, e = e^{Γ} and, where q is given too, qg = q̃ ⊙ e; where ei is given, ei = e^{−Γ} and kinv = k̃ ⊙ ei. Every
//! exponent formed in fp64 from g = Γ (and gl = γ) and rounded once, then Eigen's packet exp: per element the
//! operations of exp_into on whole matrices (whose packets, rows starting aligned, are the same; exp8 = Eigen's packet exp,
//! exp.hpp), so the same bits.
inline void exp_row(index_t K, const double* __restrict g, const double* __restrict gl, const float* __restrict kt,
                    const float* __restrict q, float* __restrict e, float* __restrict egd, float* __restrict ei,
                    float* __restrict kd, float* __restrict qg, float* __restrict kinv) {
  namespace ei_ = Eigen::internal;
  using P = ei_::packet_traits<float>::type;
  constexpr index_t n = ei_::packet_traits<float>::size;
  alignas(64) float x[n], y[n];
  for (index_t a = 0; a < K; a += n) {
    for (index_t l = 0; l < n; ++l)  // the fp64 exponents, rounded once (vectorised conversions)
      x[l] = static_cast<float>(g[a + l]), y[l] = static_cast<float>(gl[a + l] - g[a + l]);
    const P px = ei_::pload<P>(x), py = exp8(ei_::pload<P>(y)), pk = ei_::ploadu<P>(kt + a);
    ei_::pstoreu(egd + a, py), ei_::pstoreu(kd + a, ei_::pmul(pk, py));
    if (e) {
      const P pe = exp8(px);
      ei_::pstoreu(e + a, pe);
      if (q) ei_::pstoreu(qg + a, ei_::pmul(ei_::ploadu<P>(q + a), pe));
    }
    if (ei) {
      const P pi = exp8(ei_::pnegate(px));  // float(−Γ) = −float(Γ)
      ei_::pstoreu(ei + a, pi), ei_::pstoreu(kinv + a, ei_::pmul(pk, pi));
    }
  }
}

//! Intra-chunk terms for strong decays (span > single_gemm_span), SPEC §2.4(d) with the sub-chunk
//! trick of §2.3 / §8 rules 2–3. Inputs Q̃, K̃, Γ ([m,K]) and the masked dA ([m,m], zero above the
//! diagonal; the caller passes it strictly lower); outputs A (lower incl. diagonal, [m,m], overwritten)
//! and dQ̃ += Σ_{j≤t} dA_tj k̃_j e^{Γ_t−Γ_j}, dK̃ += Σ_{t≥j} dA_tj q̃_t e^{Γ_t−Γ_j}.
//! Temporaries P/QI/T are scratch matrices with ≥ m rows.
template <int = 0>  // a template, so that a TU that never calls it does not instantiate it
inline void intra_bwd_subchunked(const Eigen::Ref<const RowMat>& Q, const Eigen::Ref<const RowMat>& Kt,
                                 const Eigen::Ref<const RowMatD>& G, const Eigen::Ref<const RowMat>& dA,
                                 Eigen::Ref<RowMat> A, Eigen::Ref<RowMat> dQ, Eigen::Ref<RowMat> dK, RowMat& P,
                                 RowMat& QI, RowMat& T, RowVec& ex, index_t m) {
  A.setZero();
  for (index_t i0 = 0; i0 < m; i0 += sub_chunk) {
    const index_t ni = std::min(sub_chunk, m - i0);
    if (i0 > 0) {
      // rows I = [i0, i0+ni) against every earlier row j < i0, reference r = i0 (first row of I):
      //   P  = K̃_{<r} ⊙ e^{Γ_r − Γ_{<r}} ≤ 1,  QI-factor F = e^{Γ_I − Γ_r} ≤ 1
      //   A_{I,<r} = (Q̃_I ⊙ F) Pᵀ,   dQ̃_I += F ⊙ (dA_{I,<r} P)
      auto Pj = P.topRows(i0);
      exp_into(Pj, G.topRows(i0), -1., G.row(i0).data(), 1.);
      Pj.array() *= Kt.topRows(i0).array();
      auto F = QI.topRows(ni);
      exp_into(F, G.middleRows(i0, ni), 1., G.row(i0).data(), -1.);
      auto Ti = T.topRows(ni);
      Ti = Q.middleRows(i0, ni).cwiseProduct(F);
      A.block(i0, 0, ni, i0).noalias() = Ti * Pj.transpose();
      Ti.noalias() = dA.block(i0, 0, ni, i0) * Pj;
      dQ.middleRows(i0, ni) += Ti.cwiseProduct(F);
    }
    // diagonal block, element-wise, j ≤ t only (exponents Γ_t − Γ_j ≤ 0)
    for (index_t t = i0; t < i0 + ni; ++t)
      for (index_t j = i0; j <= t; ++j) {
        exp_into(ex, G.row(t), 1., G.row(j).data(), -1.);
        A(t, j) = (Q.row(t).array() * Kt.row(j).array() * ex.array()).sum();
        const float d = dA(t, j);
        if (d != 0.f) {
          dQ.row(t).array() += d * Kt.row(j).array() * ex.array();
          dK.row(j).array() += d * Q.row(t).array() * ex.array();
        }
      }
  }
  // dK̃ of sub-chunk J = [j0, j0+nj) from every later row t ≥ j1 = j0+nj, reference r = j1 − 1 (last
  // row of J):  dK̃_J += e^{Γ_r − Γ_J} ⊙ (dA_{≥j1,J}ᵀ (Q̃_{≥j1} ⊙ e^{Γ_{≥j1} − Γ_r}))
  for (index_t j0 = 0; j0 < m; j0 += sub_chunk) {
    const index_t nj = std::min(sub_chunk, m - j0), j1 = j0 + nj;
    if (j1 >= m) break;
    const index_t r = j1 - 1, nt = m - j1;
    auto Qs = P.topRows(nt);
    exp_into(Qs, G.middleRows(j1, nt), 1., G.row(r).data(), -1.);
    Qs.array() *= Q.middleRows(j1, nt).array();
    auto Tj = T.topRows(nj);
    Tj.noalias() = dA.block(j1, j0, nt, nj).transpose() * Qs;
    auto Fj = QI.topRows(nj);
    exp_into(Fj, G.middleRows(j0, nj), -1., G.row(r).data(), 1.);
    dK.middleRows(j0, nj) += Tj.cwiseProduct(Fj);
  }
}

//! Row i of Γ (fp64) for a written step: gd = prev + λ (prev: row i − 1, null for row 0), λ = the floored log-decay
//! of the step's gate row (load_log_decay<D>, `tmp` [K] scratch); returns whether a λ was floored. With fp32 gates
//! of a per-key decay on AVX2, 8 keys at a time by hand: compare, blend, widen, add — the operations of the plain
//! form, which GCC 12 does not vectorise (the floor's select and the flag), so the same bits, ~5× faster.
template <class D, class Scalar>
inline bool gamma_row(const Scalar* g_row, const double* prev, double* __restrict gd, float* __restrict tmp, index_t K) {
#if LINSTATE_GEMM_KERNEL
  if constexpr (decay_key<D> && std::is_same_v<Scalar, float>) {
    if (K % 8 == 0) {
      const __m256 F = _mm256_set1_ps(detail::chunked_log_decay_floor);
      int fl = 0;
      for (index_t a = 0; a < K; a += 8) {
        const __m256 x = _mm256_loadu_ps(g_row + a), lt = _mm256_cmp_ps(x, F, _CMP_LT_OQ);  // λ < floor (NaN: false)
        fl |= _mm256_movemask_ps(lt);
        const __m256 y = _mm256_blendv_ps(x, F, lt);  // max(λ, floor) as detail::chunked_log_decay: NaN stays NaN
        __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(y)), hi = _mm256_cvtps_pd(_mm256_extractf128_ps(y, 1));
        if (prev) lo = _mm256_add_pd(lo, _mm256_loadu_pd(prev + a)), hi = _mm256_add_pd(hi, _mm256_loadu_pd(prev + a + 4));
        _mm256_storeu_pd(gd + a, lo), _mm256_storeu_pd(gd + a + 4, hi);
      }
      return fl != 0;
    }
  }
#endif
  const bool floored = load_log_decay<D>(g_row, tmp, K);
  for (index_t a = 0; a < K; ++a) gd[a] = static_cast<double>(tmp[a]);
  if (prev)
    for (index_t a = 0; a < K; ++a) gd[a] += prev[a];
  return floored;
}

//! The chunked forms use the floored gate max(λ, floor) (detail::chunked_log_decay): its derivative
//! is 0 below the floor, so dg ([K] row of a written step, the gradient with respect to the floored
//! gates) is set to exactly 0 where this step's own gate (`g_row`) is below it. `tmp` [K] is scratch.
template <class D, class Scalar, class Row>
inline void floor_gradient(const Scalar* g_row, Row&& dg, RowVec& tmp) {
  const index_t K = dg.size();
  if constexpr (decay_key<D>) {
    load(g_row, tmp.data(), K);
    for (index_t a = 0; a < K; ++a)
      if (detail::below_log_decay_floor(tmp(a))) dg(a) = 0.f;
  } else if (detail::below_log_decay_floor(detail::to_float(D::log_decay(g_row, 0)))) {
    dg.setZero();
  }
}

//! Chunk-parallel backward of one stream (see the header comment for the math). Gradient outputs
//! follow bwd_target: dq/dk/dv/dg accumulate at (token − tok0); dcw/dcr are written for every step
//! (0 where not written / not read); dh0 is written when non-null.
template <class D, class Scalar>
void run_chunked_backward(const problem& pb, const source<Scalar>& src, const stream& st, const bwd_target<Scalar>& tg,
                          index_t C, chunk_bwd_scratch& sc) {
  static_assert(!is_delta<D>, "chunked delta rule backward: see chunked_delta_backward.hpp");
  constexpr bool decays = !decay_none<D>;
  const index_t K = pb.K, V = pb.V, H = pb.H, HV = pb.HV, KV = K * V, GW = pb.gate_width();
  const index_t NC = (st.n + C - 1) / C;
  // gemm.hpp's products on AVX2 / AVX-512 (Eigen's elsewhere): C (mm×nn) = / += A·B, A through strides, B row-major
#if LINSTATE_GEMM_KERNEL
  auto mul = [](auto md, index_t mm, index_t nn, index_t kk, const float* a, index_t rsa, index_t csa, const float* b,
                index_t ldb, float* c, index_t ldc) {
    gemm::product<decltype(md)::value>(mm, nn, kk, a, rsa, csa, b, ldb, c, ldc);
  };
  // the chunk's causal matrices are triangular (gemm::shape): only the needed tiles and depths are formed
  auto tri = [](auto md, auto sh, index_t mm, index_t nn, index_t kk, const float* a, index_t rsa, index_t csa, const float* b,
                index_t ldb, float* c, index_t ldc) {
    gemm::product<decltype(md)::value, decltype(sh)::value>(mm, nn, kk, a, rsa, csa, b, ldb, c, ldc);
  };
  using set_t = std::integral_constant<int, gemm::set>;
  using add_t = std::integral_constant<int, gemm::add>;
  using c_lower = std::integral_constant<int, gemm::c_lower>;    // only C's lower triangle (diagonal included)
  using a_lower = std::integral_constant<int, gemm::a_lower>;    // A lower triangular
  using a_upper = std::integral_constant<int, gemm::a_upper>;    // A upper triangular
#endif
  if (tg.dcw) std::fill(tg.dcw, tg.dcw + st.n, 0.f);
  if (tg.dcr) std::fill(tg.dcr, tg.dcr + st.n, 0.f);

  // Loads chunk [c0, c0+m) and returns its (any write, any read) flags. Written steps: k (raw k for the
  // reverse pass, then k̃ = cw·k; k̃ directly for the forward pass), v and Γ; read steps (reverse pass
  // only): raw q, q̃ = s·cr·q and dO. Other rows are zero (Γ: carried, no decay). A chunk without
  // writes needs no k, v, g (Γ ≡ 0, frozen state), one without reads no q, dO.
  // One tensor at a time: the rows of one tensor are a constant stride apart (H·K or HV·V elements,
  // i.e. one page each for K = 128), a pattern the hardware stride prefetcher follows; interleaving
  // the tensors row by row defeats it (measured: the loads then cost about as much as the GEMMs).
  // `floored`: whether a written step of the chunk had a gate below detail::chunked_log_decay_floor
  // (Γ sums the floored λ; their gradients are zeroed at the end, see floor_gradient).
  bool floored = false;
  auto load_chunk = [&](index_t c0, index_t m, bool bwd, bool& any_w, bool& any_r) {
    const std::uint8_t W = detail::route_write, R = detail::route_read;
    any_w = any_r = false, floored = false;
    for (index_t i = 0; i < m; ++i) {
      const std::uint8_t f = st.flag(c0 + i);
      any_w |= (f & W) != 0, any_r |= (f & R) != 0;
    }
    auto rows = [&](std::uint8_t bit, auto&& on, auto&& off) {  // on(row, step, token) / off(row)
      for (index_t i = 0; i < m; ++i) {
        const index_t s = c0 + i;
        if (st.flag(s) & bit) on(i, s, st.tok(s));
        else off(i);
      }
    };
    auto none = [](index_t) {};
    if (any_w) {
      // the raw k rows are kept apart only where dcw needs them; k̃ = cw·k rounds the same product either way
      const bool raw_k = bwd && tg.dcw;
      RowMat& Kdst = raw_k ? sc.Kr : sc.Kt;
      rows(W, [&](index_t i, index_t s, index_t t) { load(src.k + (t * H + tg.h) * K, Kdst.row(i).data(), K, raw_k ? 1.f : st.wgt_w(s)); },
           [&](index_t i) { sc.Kt.row(i).setZero(); });
      if (raw_k) rows(W, [&](index_t i, index_t s, index_t) { sc.Kt.row(i) = st.wgt_w(s) * sc.Kr.row(i); }, none);
      rows(W, [&](index_t i, index_t, index_t t) { load(src.v + (t * HV + tg.hv) * V, sc.Vc.row(i).data(), V); },
           [&](index_t i) { sc.Vc.row(i).setZero(); });
      if constexpr (decays) {  // Γ: inclusive cumulative sum of the floored λ inside the chunk (fp64, see the scratch)
        rows(W,
             [&](index_t i, index_t, index_t t) {
               floored |= gamma_row<D>(src.g + (t * HV + tg.hv) * GW, i > 0 ? sc.G.row(i - 1).data() : nullptr, sc.G.row(i).data(),
                                       sc.grow.data(), K);
             },
             [&](index_t i) {  // frozen step: no decay
               if (i > 0) sc.G.row(i) = sc.G.row(i - 1);
               else sc.G.row(i).setZero();
             });
      }
    }
    if (!bwd || !any_r) return;
    if (tg.dcr) {  // the raw q rows too where dcr needs them
      rows(R, [&](index_t i, index_t, index_t t) { load(src.q + (t * H + tg.h) * K, sc.Qr.row(i).data(), K); },
           [&](index_t i) { sc.Q.row(i).setZero(); });
      rows(R, [&](index_t i, index_t s, index_t) { sc.Q.row(i) = (pb.scale * st.wgt_r(s)) * sc.Qr.row(i); }, none);
    } else {
      rows(R, [&](index_t i, index_t s, index_t t) { load(src.q + (t * H + tg.h) * K, sc.Q.row(i).data(), K, pb.scale * st.wgt_r(s)); },
           [&](index_t i) { sc.Q.row(i).setZero(); });
    }
    rows(R, [&](index_t i, index_t, index_t t) { load(tg.dO + (t * HV + tg.hv) * V, sc.dO.row(i).data(), V); },
         [&](index_t i) { sc.dO.row(i).setZero(); });
  };

  // rows_exps: the decay factors formed row by row (exp_row), the same bits as exp_into on whole matrices
  constexpr index_t packet = Eigen::internal::packet_traits<float>::size;
  const bool rows_exps = decays && K % packet == 0;
  // ---- the states entering the chunks, H_0 … H_{NC−1}, transposed (H_nᵀ [V,K]: every product that reads
  //      them then takes row-major operands as they are, gemm.hpp's C = A·B with B row-major; SPEC §2.3
  //      step 1): kept by the forward (tg.chunk_states, linstate::saved_states), or recomputed here by the
  //      forward's own chunk step (chunk_step<D, StatesOnly>: the same operations on the same values, so the
  //      same bits) ----
  const float* states = tg.chunk_states;
  if (!states && NC > 0) {
    if (sc.states.size() < static_cast<std::size_t>(NC * KV)) sc.states.resize(static_cast<std::size_t>(NC * KV));
    float* Hs = sc.states.data();
    float* H = sc.H.data();
    if (tg.h0) std::memcpy(H, tg.h0, sizeof(float) * KV);
    else std::fill(H, H + KV, 0.f);
    gemm::transpose(K, V, H, V, Hs, K);
    for (index_t n = 0; n + 1 < NC; ++n) {
      chunk_step<D, true>(pb, src, st, target{tg.h, tg.hv, H, nullptr, tg.tok0}, n * C, C, sc.fwd);
      gemm::transpose(K, V, H, V, Hs + (n + 1) * KV, K);
    }
    states = Hs;
  }

  // ---- reverse over chunks ----
  auto& Dm = sc.D;
  if (tg.dht) Dm = Eigen::Map<const RowMat>(tg.dht, K, V);
  else Dm.setZero();
  for (index_t n = NC - 1; n >= 0; --n) {
    const index_t c0 = n * C, m = std::min(C, st.n - c0);
    bool any_w, any_r;
    LINSTATE_PHASE_START;
    load_chunk(c0, m, true, any_w, any_r);
    LINSTATE_PHASE(staging);
    if (!any_w && !any_r) continue;  // frozen and unread: D passes through unchanged
    const bool both = any_w && any_r;
    const Eigen::Map<const RowMat> HnT(states + n * KV, V, K);
    auto Q = sc.Q.topRows(m);
    auto Kt = sc.Kt.topRows(m);
    auto Vc = sc.Vc.topRows(m);
    auto dO = sc.dO.topRows(m);
    auto dQi = sc.dQi.topRows(m);  // dQ̃ inter  e^{Γ} ⊙ (dO Hᵀ)
    auto dQs = sc.dQs.topRows(m);  // dQ̃ intra, strictly j < t
    auto dKi = sc.dKi.topRows(m);  // dK̃ inter  e^{γ−Γ} ⊙ (V Dᵀ)
    auto dKs = sc.dKs.topRows(m);  // dK̃ intra, strictly t > j
    auto dV = sc.dV.topRows(m);
    auto A = sc.A.topLeftCorner(m, m);
    auto dA = sc.dA.topLeftCorner(m, m);
    auto adiag = sc.adiag.head(m);  // dA_tt = dO_t·v_t
    auto G = sc.G.topRows(m);
    auto E = sc.E.topRows(m);
    auto Qg = sc.Qg.topRows(m);  // Q̃ ⊙ e^{Γ}
    auto Kd = sc.Kd.topRows(m);  // K̃ ⊙ e^{γ−Γ}
    auto Egd = sc.Egd.topRows(m);
    // decay factors; a chunk without writes has Γ ≡ 0 (every factor is 1)
    const bool decayed = decays && any_w;
    bool one_gemm = true;
    // rows_exps: e^{Γ}, e^{γ−Γ} and (when the scores take one product) e^{−Γ} formed row by row, each row's
    // exponents, exponentials and scaled operands while the row is in L1; the same operations per element as
    // exp_into on the whole matrices (Eigen's packet exp on rows that start packet-aligned: K a multiple of
    // the packet), so the same bits. ei_done: e^{−Γ} and K̃ ⊙ e^{−Γ} are formed here already.
    bool ei_done = false;
    if (decayed) {
      sc.gamma = G.row(m - 1).cast<float>();
      one_gemm = -sc.gamma.minCoeff() <= single_gemm_span;                // the forward's span test
      if (rows_exps) {
        ei_done = both && one_gemm;
        for (index_t i = 0; i < m; ++i)
          exp_row(K, G.row(i).data(), G.row(m - 1).data(), Kt.row(i).data(), any_r ? Q.row(i).data() : nullptr, E.row(i).data(),
                  Egd.row(i).data(), ei_done ? sc.Ei.row(i).data() : nullptr, Kd.row(i).data(), Qg.row(i).data(),
                  sc.Kinv.row(i).data());
      } else {
        exp_into(E, G, 1.);                                   // e^{Γ} ≤ 1
        exp_into(Egd, G, -1., G.row(m - 1).data(), 1.);     // e^{γ−Γ} ≤ 1
        Kd = Kt.cwiseProduct(Egd);
        if (any_r) Qg = Q.cwiseProduct(E);
      }
    }
    LINSTATE_PHASE(exps);
    // Q̃ ⊙ e^{Γ} and K̃ ⊙ e^{γ−Γ} (Q̃ and K̃ themselves when nothing decays)
    const Eigen::Ref<const RowMat> Qx = decayed ? Eigen::Ref<const RowMat>(Qg) : Eigen::Ref<const RowMat>(Q);
    const Eigen::Ref<const RowMat> Kx = decayed ? Eigen::Ref<const RowMat>(Kd) : Eigen::Ref<const RowMat>(Kt);

    // -- (d) inter part of dQ̃: e^{Γ_t} ⊙ (H dO_t) --
    if (any_r) {
#if LINSTATE_GEMM_KERNEL
      mul(set_t{}, m, K, V, dO.data(), dO.outerStride(), 1, HnT.data(), K, dQi.data(), dQi.outerStride());
#else
      dQi.noalias() = dO * HnT;
#endif
      LINSTATE_PHASE(gemm);
      if (decayed) dQi.array() *= E.array();
      LINSTATE_PHASE(exps);
    }
    // -- (b) dA; (d) intra parts of dQ̃, dK̃ with dA strictly lower (the diagonal dA_tt is added
    //    element-wise: it cancels exactly in dg, see (e)); A (lower incl. diagonal) for (c) --
    if (both) {
#if LINSTATE_GEMM_KERNEL
      gemm::transpose(m, V, Vc.data(), Vc.outerStride(), sc.VT.data(), sc.VT.outerStride());  // Vᵀ
      tri(set_t{}, c_lower{}, m, m, V, dO.data(), dO.outerStride(), 1, sc.VT.data(), sc.VT.outerStride(), dA.data(), dA.outerStride());
#else
      dA.noalias() = dO * Vc.transpose();
#endif
      adiag = dA.diagonal();
      dA.template triangularView<Eigen::Upper>().setZero();
      if (!decayed || one_gemm) {
        // without decay:  A = Q̃ K̃ᵀ,  dQ̃^s = dA K̃ = Σ_{j<t} dA_tj k̃_j,  dK̃^s = dAᵀ Q̃ = Σ_{t>j} dA_tj q̃_t;
        // with (one GEMM): the same with K̃ ⊙ e^{−Γ} and Q̃ ⊙ e^{Γ}, the factors e^{Γ_t}, e^{−Γ_j} applied after
        //   A = (Q̃ ⊙ e^{Γ})(K̃ ⊙ e^{−Γ})ᵀ (e^{Γ_t−Γ_j} ≤ 1 where kept, j ≤ t),
        //   dQ̃^s = e^{Γ_t} ⊙ Σ_{j<t} dA_tj k̃_j e^{−Γ_j},  dK̃^s = e^{−Γ_j} ⊙ Σ_{t>j} dA_tj q̃_t e^{Γ_t}
        auto Kinv = sc.Kinv.topRows(m);
        auto Ei = sc.Ei.topRows(m);
        if (decayed && !ei_done) {
          LINSTATE_PHASE(gemm);
          exp_into(Ei, G, -1.);  // e^{−Γ} ≤ e^{span}
          Kinv = Kt.cwiseProduct(Ei);
          LINSTATE_PHASE(exps);
        }
        const auto& Kl = decayed ? sc.Kinv : sc.Kt;  // the left/right key operand, [C,K]
        const auto& Ql = decayed ? sc.Qg : sc.Q;
#if LINSTATE_GEMM_KERNEL
        gemm::transpose(m, K, Kl.data(), Kl.outerStride(), sc.KT.data(), sc.KT.outerStride());
        tri(set_t{}, c_lower{}, m, m, K, Ql.data(), Ql.outerStride(), 1, sc.KT.data(), sc.KT.outerStride(), A.data(), A.outerStride());
        tri(set_t{}, a_lower{}, m, K, m, dA.data(), dA.outerStride(), 1, Kl.data(), Kl.outerStride(), dQs.data(), dQs.outerStride());
        tri(set_t{}, a_upper{}, m, K, m, dA.data(), 1, dA.outerStride(), Ql.data(), Ql.outerStride(), dKs.data(), dKs.outerStride());
#else
        A.noalias() = Ql.topRows(m) * Kl.topRows(m).transpose();
        dQs.noalias() = dA * Kl.topRows(m);
        dKs.noalias() = dA.transpose() * Ql.topRows(m);
#endif
        A.template triangularView<Eigen::StrictlyUpper>().setZero();
        if (decayed) {
          dQs.array() *= E.array();
          dKs.array() *= Ei.array();
        }
      } else {
        dQs.setZero();
        dKs.setZero();
        intra_bwd_subchunked(Q, Kt, G, dA, A, dQs, dKs, sc.Kinv, sc.X, sc.T, sc.ex, m);
      }
    }
    // -- (c) dV = Aᵀ dO + (K̃ ⊙ e^{γ−Γ}) D ;  (d) inter part of dK̃: e^{γ−Γ_j} ⊙ (D v_j) --
    if (any_w) {
      gemm::transpose(K, V, Dm.data(), Dm.outerStride(), sc.DT.data(), sc.DT.outerStride());  // Dᵀ [V,K]
#if LINSTATE_GEMM_KERNEL
      mul(set_t{}, m, V, K, Kx.data(), Kx.outerStride(), 1, Dm.data(), V, dV.data(), dV.outerStride());
      if (any_r) tri(add_t{}, a_upper{}, m, V, m, A.data(), 1, A.outerStride(), dO.data(), dO.outerStride(), dV.data(), dV.outerStride());
      mul(set_t{}, m, K, V, Vc.data(), Vc.outerStride(), 1, sc.DT.data(), K, dKi.data(), dKi.outerStride());
#else
      dV.noalias() = Kx * Dm;
      if (any_r) dV.noalias() += A.transpose() * dO;
      dKi.noalias() = Vc * sc.DT;
#endif
      if (decayed) dKi.array() *= Egd.array();
    }
    // -- (e) dg. SPEC's dg_u = Σ_{t≥u} r_t + c_n with r_t = q̃⊙dQ̃ − k̃⊙dK̃ loses digits when decays are
    //    strong (the true dg_u carries a factor e^{g_u}, the terms do not). Two exact cancellations
    //    are taken out analytically: the diagonal terms q̃_t⊙(dA_tt k̃_t) − k̃_t⊙(dA_tt q̃_t) = 0, and
    //    c_n − Σ_{t≥u} k̃_t⊙dK̃^inter_t = e^{γ}⊙rowsum(H_n⊙D) + Σ_{j<u} k̃_j⊙dK̃^inter_j. Hence
    //      dg_u = Σ_{t≥u} [q̃_t⊙(dQ̃^s_t + dQ̃^i_t) − k̃_t⊙dK̃^s_t] + Σ_{j<u} k̃_j⊙dK̃^i_j + e^{γ}⊙rowsum(H_n⊙D)
    //    (s: strictly intra, i: inter): a reverse and a forward cumulative sum over the chunk. --
    LINSTATE_PHASE(gemm);
    auto DG = sc.DG.topRows(m);
    if (decays && any_w) {
      sc.acc = HnT.cwiseProduct(sc.DT).colwise().sum();  // rowsum(H ⊙ D)
      sc.acc.array() *= sc.gamma.array().exp();
      for (index_t i = 0; i < m; ++i) {  // forward exclusive cumsum of k̃ ⊙ dK̃^i
        DG.row(i) = sc.acc;
        sc.acc += Kt.row(i).cwiseProduct(dKi.row(i));
      }
      sc.acc.setZero();
      for (index_t i = m - 1; i >= 0; --i) {  // reverse inclusive cumsum of r'_t
        if (any_r) {
          sc.rq = dQi.row(i);
          if (any_w) sc.rq += dQs.row(i);
          sc.acc += Q.row(i).cwiseProduct(sc.rq);
          if (any_w) sc.acc -= Kt.row(i).cwiseProduct(dKs.row(i));
        }
        DG.row(i) += sc.acc;
      }
    }
    LINSTATE_PHASE(other);
    // -- raw-input gradients of the chunk's steps: dQ̃ = dQ̃^i + dQ̃^s + dA_tt k̃_t,
    //    dK̃ = dK̃^i + dK̃^s + dA_tt q̃_t --
    const index_t lq = tg.ld_q ? tg.ld_q : K, lk = tg.ld_k ? tg.ld_k : K, lv = tg.ld_v ? tg.ld_v : V;
    const index_t lg = tg.ld_g ? tg.ld_g : (decay_key<D> ? K : 1);
    auto put = [&](float* dst, const auto& x) {  // dst row (+)= x
      if (tg.assign) Eigen::Map<RowVec>(dst, x.size()) = x;
      else Eigen::Map<RowVec>(dst, x.size()) += x;
    };
    for (index_t i = 0; i < m; ++i) {
      const index_t s = c0 + i;
      const std::uint8_t f = st.flag(s);
      const index_t tl = st.tok(s) - tg.tok0;
      if (f & detail::route_read) {
        sc.rq = dQi.row(i);
        if (any_w) sc.rq += dQs.row(i) + adiag(i) * Kt.row(i);
        put(tg.dq + tl * lq, (pb.scale * st.wgt_r(s)) * sc.rq);
        if (tg.dcr) tg.dcr[s] = pb.scale * sc.Qr.row(i).dot(sc.rq);
      }
      if (f & detail::route_write) {
        sc.rk = dKi.row(i);
        if (any_r) sc.rk += dKs.row(i) + adiag(i) * Q.row(i);
        put(tg.dk + tl * lk, st.wgt_w(s) * sc.rk);
        if (tg.dcw) tg.dcw[s] = sc.Kr.row(i).dot(sc.rk);
        put(tg.dv + tl * lv, dV.row(i));
        if constexpr (decays)
          if (floored) floor_gradient<D>(src.g + (st.tok(s) * HV + tg.hv) * GW, DG.row(i), sc.grow);
        if constexpr (decay_key<D>) {
          put(tg.dg + tl * lg, DG.row(i));
        } else if constexpr (decay_head<D>) {
          if (tg.assign) tg.dg[tl * lg] = DG.row(i).sum();
          else tg.dg[tl * lg] += DG.row(i).sum();
        }
      }
    }
    LINSTATE_PHASE(store);
    // -- (a) D_{n−1} = diag(e^{γ}) D + (Q̃ ⊙ e^{Γ})ᵀ dO (with the products by hand: the decay in the product's
    //    store, gemm::scale_add, which rounds the scaling and the sum apart as the two passes would) --
    if (decayed) sc.egamma = sc.gamma.array().exp();
#if LINSTATE_GEMM_KERNEL
    if (any_r) {
      if (decayed)
        gemm::product<gemm::scale_add>(K, V, m, Qx.data(), 1, Qx.outerStride(), dO.data(), dO.outerStride(), Dm.data(), V,
                                       sc.egamma.data());
      else
        mul(add_t{}, K, V, m, Qx.data(), 1, Qx.outerStride(), dO.data(), dO.outerStride(), Dm.data(), V);
    } else if (decayed) {
      for (index_t a = 0; a < K; ++a) Dm.row(a) *= sc.egamma(a);
    }
#else
    if (decayed)
      for (index_t a = 0; a < K; ++a) Dm.row(a) *= sc.egamma(a);
    if (any_r) Dm.noalias() += Qx.transpose() * dO;
#endif
    LINSTATE_PHASE(gemm);
  }
  if (tg.dh0) Eigen::Map<RowMat>(tg.dh0, K, V) = Dm;
}

}  // namespace linstate::cpu_detail
