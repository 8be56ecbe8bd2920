// linstate/backend/cpu/backward_kernels.hpp — backward pass of one (sequence, head, partition) stream.
//
// The stream is the same as in the forward pass (kernels.hpp): the tokens one partition state sees,
// with per-token write/read weights. The backward kernels take ∂L/∂o and ∂L/∂h_T of that partition
// and accumulate the gradients of the raw inputs (q, k, v, g, β) into per-sequence fp32 buffers, write
// the gradient of each step's write/read weight (for the router, SPEC §4.6) and ∂L/∂h_0.
//
// Memory: the recurrent backward keeps one state per segment of `segment` steps (checkpoints) and
// recomputes the states inside a segment when it gets there, so it never holds the whole history.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels.hpp"

namespace linstate::cpu_detail {

//! Where one stream's gradients land. Accumulators are indexed by (token − tok0) like o_acc.
template <class Scalar>
struct bwd_target {
  index_t h = 0, hv = 0;
  const float* h0 = nullptr;    // [K,V] state at the start of the stream (null: zero)
  const float* dht = nullptr;   // [K,V] ∂L/∂(final state) (null: zero)
  float* dh0 = nullptr;         // [K,V] out: ∂L/∂h0 (may be null)
  const Scalar* dO = nullptr;   // [B,T,HV,V]
  float* dq = nullptr;          // [len,K] += ∂L/∂q   (raw q, before l2norm / scale / read weight)
  float* dk = nullptr;          // [len,K] += ∂L/∂k
  float* dv = nullptr;          // [len,V] += ∂L/∂v
  float* dg = nullptr;          // [len,K] (diagonal) or [len] (scalar, delta) += ∂L/∂g
  float* dbeta = nullptr;       // [len] += ∂L/∂β (delta rule)
  float* dcw = nullptr;         // [n] out: ∂L/∂(write weight) of each step (0 where not written)
  float* dcr = nullptr;         // [n] out: ∂L/∂(read weight) of each step (0 where not read)
  index_t tok0 = 0;
  // run_chunked_backward only: the row strides of dq, dk, dv, dg (0: dense rows of K, K, V and the
  // gate width) and `assign`: its rows are written (=) instead of added (+=). The backward driver sets
  // them when it points dq … dg straight into the caller's fp32 gradient tensors (one partition that
  // every step reads and writes: each row is written exactly once).
  index_t ld_q = 0, ld_k = 0, ld_v = 0, ld_g = 0;
  bool assign = false;
  // run_chunked_backward only: the states entering the stream's chunks, transposed, [⌈n / C⌉, V, K], as the
  // forward kept them (linstate::saved_states); null: recomputed from the inputs
  const float* chunk_states = nullptr;
};

//! x̂ = x / sqrt(Σx² + 1e-6):  dx = dx̂ / n − x ⟨x, dx̂⟩ / n³   (into dx, accumulating)
inline void l2normalize_backward(const float* x, const float* dxhat, float* dx, index_t n, float mul = 1.f) {
  float s = 0.f, d = 0.f;
  for (index_t i = 0; i < n; ++i) s += x[i] * x[i], d += x[i] * dxhat[i];
  const float nrm = std::sqrt(s + 1e-6f), inv = 1.f / nrm, inv3 = inv * inv * inv;
  for (index_t i = 0; i < n; ++i) dx[i] += mul * (dxhat[i] * inv - x[i] * d * inv3);
}

struct recurrent_bwd_scratch {
  std::vector<float> ckpt;   // [segments, K, V]
  std::vector<float> seg;    // [segment + 1, K, V] states inside the current segment
  std::vector<index_t> idx;  // [segment] which `seg` slot holds the state after each step
  std::vector<float> Dh;     // [K, V]
  std::vector<float> q, qraw, k, kraw, v, g, hd, dkh, du, w, pk, pdu, tmpK, dO;
  //! ckpt above this many floats is released after the stream (kept per thread, it would otherwise
  //! hold a long sequence's checkpoints from call to call)
  static constexpr std::size_t kept_ckpt = std::size_t{1} << 18;
  void reserve(index_t K, index_t V, index_t segment) {
    const auto nk = static_cast<std::size_t>(K), nv = static_cast<std::size_t>(V);
    seg.resize(static_cast<std::size_t>(segment + 1) * nk * nv), idx.resize(static_cast<std::size_t>(segment));
    Dh.resize(nk * nv);
    for (std::vector<float>* x : {&q, &qraw, &k, &kraw, &g, &hd, &dkh, &pdu, &tmpK}) x->resize(nk);
    for (std::vector<float>* x : {&v, &du, &w, &pk, &dO}) x->resize(nv);
  }
};

//! One forward state update h ← Λ(h) for a written step (no output), as in run_recurrent.
template <class D, class Scalar>
inline void recurrent_update(const problem& pb, const source<Scalar>& src, index_t t, index_t h, index_t hv, float cw,
                             float* __restrict hs, recurrent_bwd_scratch& sc) {
  const index_t K = pb.K, V = pb.V, H = pb.H, HV = pb.HV;
  float* __restrict k = sc.k.data();
  float* __restrict v = sc.v.data();
  load(src.v + (t * HV + hv) * V, v, V);
  if constexpr (is_delta<D>) {
    load(src.k + (t * H + h) * K, k, K);
    if (D::l2norm_qk) l2normalize(k, K);
    const float a = std::exp(detail::to_float(D::log_decay(src.g + t * HV + hv, 0)));
    const float b = D::write_strength(detail::to_float(src.beta[t * HV + hv]), cw);
    float* __restrict pk = sc.pk.data();
    std::fill(pk, pk + V, 0.f);
    for (index_t i = 0; i < K; ++i)
      for (index_t j = 0; j < V; ++j) pk[j] += k[i] * hs[i * V + j];
    for (index_t j = 0; j < V; ++j) pk[j] = b * (v[j] - a * pk[j]);  // u
    for (index_t i = 0; i < K; ++i)
      for (index_t j = 0; j < V; ++j) hs[i * V + j] = a * hs[i * V + j] + k[i] * pk[j];
  } else {
    load(src.k + (t * H + h) * K, k, K, cw);
    for (index_t i = 0; i < K; ++i) {
      float a = 1.f;
      if constexpr (decay_key<D>) a = std::exp(detail::to_float(D::log_decay(src.g + (t * HV + hv) * K, i)));
      if constexpr (decay_head<D>) a = std::exp(detail::to_float(D::log_decay(src.g + t * HV + hv, 0)));
      float* __restrict row = hs + i * V;
      const float ki = k[i];
      for (index_t j = 0; j < V; ++j) row[j] = a * row[j] + ki * v[j];
    }
  }
}

//! Backward of the token-by-token recurrence (SPEC §2.4(f) for the gated family; the delta rule's
//! adjoint for §3.1), over one stream, with checkpoints every `segment` steps.
//!
//! Gated family, per step t in reverse (Dh = ∂L/∂h_t, h_t after the step):
//!   read:  dq̃ = h_t dO_t, Dh += q̃ dO_tᵀ            (q̃ = s·cr·q)
//!   write: dk̃ = Dh v_t, dv += Dhᵀ k̃, dg_i = e^{g_i} Σ_j Dh_ij h_{t−1,ij}, Dh ← diag(e^{g}) Dh   (k̃ = cw·k)
//! Delta rule (a = e^g, β̃ = β·cw, P = h_{t−1}, u = β̃ (v − a Pᵀk̂), h_t = a P + k̂ uᵀ):
//!   du = Dhᵀk̂, dv += β̃ du, dβ̃ = ⟨du, v − a Pᵀk̂⟩, dk̂ = Dh u − β̃ a P du,
//!   da = ⟨Dh, P⟩ − β̃ ⟨du, Pᵀk̂⟩, Dh ← a (Dh − β̃ k̂ duᵀ)
template <class D, class Scalar>
void run_recurrent_backward(const problem& pb, const source<Scalar>& src, const stream& st, const bwd_target<Scalar>& tg,
                            index_t segment, recurrent_bwd_scratch& sc) {
  const index_t K = pb.K, V = pb.V, H = pb.H, HV = pb.HV, KV = K * V;
  const index_t nseg = (st.n + segment - 1) / segment;
  sc.ckpt.resize(static_cast<std::size_t>(std::max<index_t>(nseg, 1) * KV));
  // forward: checkpoints at segment starts
  {
    float* hs = sc.seg.data();
    if (tg.h0) std::memcpy(hs, tg.h0, static_cast<std::size_t>(KV) * sizeof(float));
    else std::fill(hs, hs + KV, 0.f);
    for (index_t sg = 0; sg < nseg; ++sg) {
      std::memcpy(sc.ckpt.data() + sg * KV, hs, static_cast<std::size_t>(KV) * sizeof(float));
      if (sg + 1 == nseg) break;  // the last segment's states are recomputed below anyway
      for (index_t i = sg * segment; i < (sg + 1) * segment; ++i)
        if (st.flag(i) & detail::route_write) recurrent_update<D>(pb, src, st.tok(i), tg.h, tg.hv, st.wgt_w(i), hs, sc);
    }
  }
  float* __restrict Dh = sc.Dh.data();
  if (tg.dht) std::memcpy(Dh, tg.dht, static_cast<std::size_t>(KV) * sizeof(float));
  else std::fill(Dh, Dh + KV, 0.f);
  float* __restrict q = sc.q.data();
  float* __restrict qraw = sc.qraw.data();
  float* __restrict k = sc.k.data();
  float* __restrict kraw = sc.kraw.data();
  float* __restrict v = sc.v.data();
  float* __restrict hd = sc.hd.data();
  float* __restrict dkh = sc.dkh.data();
  std::vector<float>& dO = sc.dO;  // [V] (reserve() sized it)

  for (index_t sg = nseg - 1; sg >= 0; --sg) {
    const index_t b = sg * segment, e = std::min(st.n, b + segment);
    // recompute the states of this segment: slot 0 = entering state; idx[i] = slot after step i
    std::memcpy(sc.seg.data(), sc.ckpt.data() + sg * KV, static_cast<std::size_t>(KV) * sizeof(float));
    index_t slot = 0;
    for (index_t i = b; i < e; ++i) {
      if (st.flag(i) & detail::route_write) {
        std::memcpy(sc.seg.data() + (slot + 1) * KV, sc.seg.data() + slot * KV, static_cast<std::size_t>(KV) * sizeof(float));
        ++slot;
        recurrent_update<D>(pb, src, st.tok(i), tg.h, tg.hv, st.wgt_w(i), sc.seg.data() + slot * KV, sc);
      }
      sc.idx[static_cast<std::size_t>(i - b)] = slot;
    }
    for (index_t i = e - 1; i >= b; --i) {
      const index_t t = st.tok(i);
      const std::uint8_t f = st.flag(i);
      const bool w = f & detail::route_write, r = f & detail::route_read;
      const float cw = st.wgt_w(i), cr = st.wgt_r(i);
      const index_t cur = sc.idx[static_cast<std::size_t>(i - b)];
      const float* __restrict hcur = sc.seg.data() + cur * KV;
      const float* __restrict hprev = w ? sc.seg.data() + (cur - 1) * KV : hcur;
      if (tg.dcw) tg.dcw[i] = 0.f;
      if (tg.dcr) tg.dcr[i] = 0.f;
      if (r) {
        load(tg.dO + (t * HV + tg.hv) * V, dO.data(), V);
        load(src.q + (t * H + tg.h) * K, qraw, K);
        std::copy(qraw, qraw + K, q);
        if constexpr (is_delta<D>)
          if (D::l2norm_qk) l2normalize(q, K);
        // hd = h_t dO ; dq̂ = s·cr·hd ; dcr = s·⟨q̂, hd⟩
        float dot = 0.f;
        for (index_t a = 0; a < K; ++a) {
          float acc = 0.f;
          for (index_t j = 0; j < V; ++j) acc += hcur[a * V + j] * dO[static_cast<std::size_t>(j)];
          hd[a] = acc;
          dot += q[a] * acc;
        }
        if (tg.dcr) tg.dcr[i] = pb.scale * dot;
        float* dq = tg.dq + (t - tg.tok0) * K;
        const float mul = pb.scale * cr;
        if (is_delta<D> && D::l2norm_qk) l2normalize_backward(qraw, hd, dq, K, mul);
        else
          for (index_t a = 0; a < K; ++a) dq[a] += mul * hd[a];
        for (index_t a = 0; a < K; ++a) {
          const float qa = mul * q[a];
          for (index_t j = 0; j < V; ++j) Dh[a * V + j] += qa * dO[static_cast<std::size_t>(j)];
        }
      }
      if (!w) continue;
      load(src.v + (t * HV + tg.hv) * V, v, V);
      float* dv = tg.dv + (t - tg.tok0) * V;
      if constexpr (is_delta<D>) {
        load(src.k + (t * H + tg.h) * K, kraw, K);
        std::copy(kraw, kraw + K, k);
        if (D::l2norm_qk) l2normalize(k, K);
        const float a = std::exp(detail::to_float(D::log_decay(src.g + t * HV + tg.hv, 0)));
        const float beta = detail::to_float(src.beta[t * HV + tg.hv]);
        const float bt = D::write_strength(beta, cw);  // SPEC §11 C9: the write gate scales β
        float* __restrict du = sc.du.data();
        float* __restrict pk = sc.pk.data();
        float* __restrict wv = sc.w.data();
        float* __restrict pdu = sc.pdu.data();
        std::fill(du, du + V, 0.f);
        std::fill(pk, pk + V, 0.f);
        float dP = 0.f;  // ⟨Dh, P⟩
        for (index_t a2 = 0; a2 < K; ++a2)
          for (index_t j = 0; j < V; ++j) {
            du[j] += Dh[a2 * V + j] * k[a2];
            pk[j] += hprev[a2 * V + j] * k[a2];
            dP += Dh[a2 * V + j] * hprev[a2 * V + j];
          }
        float dbt = 0.f, dupk = 0.f;
        for (index_t j = 0; j < V; ++j) {
          wv[j] = v[j] - a * pk[j];
          dbt += du[j] * wv[j];
          dupk += du[j] * pk[j];
          dv[j] += bt * du[j];
        }
        // dk̂ = Dh u − β̃ a P du   (u = β̃ w)
        for (index_t a2 = 0; a2 < K; ++a2) {
          float s1 = 0.f, s2 = 0.f;
          for (index_t j = 0; j < V; ++j) s1 += Dh[a2 * V + j] * wv[j], s2 += hprev[a2 * V + j] * du[j];
          dkh[a2] = bt * s1 - bt * a * s2;
          pdu[a2] = s2;
        }
        float* dk = tg.dk + (t - tg.tok0) * K;
        if (D::l2norm_qk) l2normalize_backward(kraw, dkh, dk, K);
        else
          for (index_t a2 = 0; a2 < K; ++a2) dk[a2] += dkh[a2];
        float dbeta = 0.f, dcw = 0.f;
        D::write_strength_backward(beta, cw, dbt, dbeta, dcw);  // the policy's adjoint of b(β, cw)
        tg.dbeta[t - tg.tok0] += dbeta;
        if (tg.dcw) tg.dcw[i] = dcw;
        const float da = dP - bt * dupk;
        tg.dg[t - tg.tok0] += a * da;
        for (index_t a2 = 0; a2 < K; ++a2)
          for (index_t j = 0; j < V; ++j) Dh[a2 * V + j] = a * (Dh[a2 * V + j] - bt * k[a2] * du[j]);
      } else {
        load(src.k + (t * H + tg.h) * K, kraw, K);
        float* dk = tg.dk + (t - tg.tok0) * K;
        float dcw = 0.f, dgs = 0.f;
        for (index_t a2 = 0; a2 < K; ++a2) {
          float* __restrict row = Dh + a2 * V;
          const float* __restrict prow = hprev + a2 * V;
          float dkv = 0.f, dgp = 0.f;
          const float kk = cw * kraw[a2];
          for (index_t j = 0; j < V; ++j) {
            dkv += row[j] * v[j];
            dv[j] += row[j] * kk;
            dgp += row[j] * prow[j];
          }
          dk[a2] += cw * dkv;
          dcw += kraw[a2] * dkv;
          float ea = 1.f;
          if constexpr (decay_key<D>) {
            ea = std::exp(detail::to_float(D::log_decay(src.g + (t * HV + tg.hv) * K, a2)));
            tg.dg[(t - tg.tok0) * K + a2] += ea * dgp;
          } else if constexpr (decay_head<D>) {
            ea = std::exp(detail::to_float(D::log_decay(src.g + t * HV + tg.hv, 0)));
            dgs += ea * dgp;
          }
          if constexpr (!decay_none<D>)
            for (index_t j = 0; j < V; ++j) row[j] *= ea;
        }
        if constexpr (decay_head<D>) tg.dg[t - tg.tok0] += dgs;
        if (tg.dcw) tg.dcw[i] = dcw;
      }
    }
  }
  if (tg.dh0) std::memcpy(tg.dh0, Dh, static_cast<std::size_t>(KV) * sizeof(float));
  if (sc.ckpt.size() > recurrent_bwd_scratch::kept_ckpt) std::vector<float>().swap(sc.ckpt);
}

}  // namespace linstate::cpu_detail
