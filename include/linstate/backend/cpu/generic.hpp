// linstate/backend/cpu/generic.hpp — the token-by-token forward and backward of ANY transition,
// evaluated from the policy's own `step` and `step_adjoint` (linstate/transition.hpp). This is how
// the CPU backend runs a family::recurrent_only policy: the policy owns the math, this file owns the
// loops, the memory and the checkpoints.
//
// Layout: a stream's K×V state is copied once into a column-major scratch (column j contiguous), so
// the policy's loops over the K rows of a column run on contiguous memory and vectorise; it is
// copied back only if some token wrote it (a partition nobody writes stays bit-identical, SPEC §8.5).
// The backward keeps one state per segment of `segment` steps and recomputes the states inside a
// segment from it, like run_recurrent_backward.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backward_kernels.hpp"
#include "kernels.hpp"

namespace linstate::cpu_detail {

//! Per-thread scratch of the generic kernels (sized once per task).
struct generic_scratch {
  std::vector<float> S;     // [V, K] column-major state
  std::vector<float> q, qraw, k, kraw, g, v, hd, dkh, dgt, dO;
  std::vector<float> ckpt;  // [segments, V, K]
  std::vector<float> seg;   // [segment + 1, V, K]
  std::vector<float> Dh;    // [V, K]
  std::vector<index_t> slot_of;  // [segment] which `seg` slot holds the state after each step
  void reserve(index_t K, index_t V, index_t GW) {
    const auto nk = static_cast<std::size_t>(K), nv = static_cast<std::size_t>(V);
    S.resize(nk * nv), Dh.resize(nk * nv);
    for (std::vector<float>* x : {&q, &qraw, &k, &kraw, &hd, &dkh}) x->resize(nk);
    for (std::vector<float>* x : {&v, &dO}) x->resize(nv);
    g.resize(static_cast<std::size_t>(std::max<index_t>(GW, 1))), dgt.resize(g.size());
  }
};

//! [K,V] row-major ⇄ [V,K] column-major.
inline void to_columns(const float* rm, float* cm, index_t K, index_t V) {
  for (index_t i = 0; i < K; ++i)
    for (index_t j = 0; j < V; ++j) cm[j * K + i] = rm[i * V + j];
}
inline void to_rows(const float* cm, float* rm, index_t K, index_t V) {
  for (index_t i = 0; i < K; ++i)
    for (index_t j = 0; j < V; ++j) rm[i * V + j] = cm[j * K + i];
}

//! Loads what token t gives the transition: k (raw and, with l2norm_qk, normalised), the gate row, β.
template <class D, class Scalar>
inline token<float> load_token(const problem& pb, const source<Scalar>& src, index_t t, index_t h, index_t hv, float w,
                               generic_scratch& sc) {
  const index_t K = pb.K, GW = pb.gate_width();
  load(src.k + (t * pb.H + h) * K, sc.kraw.data(), K);
  std::copy(sc.kraw.begin(), sc.kraw.begin() + K, sc.k.begin());
  if constexpr (D::l2norm_qk) l2normalize(sc.k.data(), K);
  token<float> x;
  x.K = K, x.k = sc.k.data(), x.w = w;
  if constexpr (D::gate != gate_extent::none) {
    load(src.g + (t * pb.HV + hv) * GW, sc.g.data(), GW);
    x.g = sc.g.data();
  }
  if constexpr (D::uses_beta) x.beta = detail::to_float(src.beta[t * pb.HV + hv]);
  return x;
}

//! Forward of one stream from D::step (o_acc += reads; state [K,V] updated in place).
template <class D, class Scalar>
void run_recurrent_generic(const problem& pb, const source<Scalar>& src, const stream& st, const target& tg,
                           generic_scratch& sc) {
  const index_t K = pb.K, V = pb.V;
  float* S = sc.S.data();
  bool loaded = false, wrote = false;
  for (index_t i = 0; i < st.n; ++i) {
    const std::uint8_t f = st.flag(i);
    const bool w = f & detail::route_write, r = f & detail::route_read;
    if (!w && !r) continue;
    if (!loaded) to_columns(tg.state, S, K, V), loaded = true;
    const index_t t = st.tok(i);
    if (w) {
      wrote = true;
      const token<float> x = load_token<D>(pb, src, t, tg.h, tg.hv, st.wgt_w(i), sc);
      load(src.v + (t * pb.HV + tg.hv) * V, sc.v.data(), V);
      for (index_t j = 0; j < V; ++j) D::step(x, j, sc.v[static_cast<std::size_t>(j)], column<float>{S + j * K, 1});
    }
    if (r) {
      float* q = sc.q.data();
      load(src.q + (t * pb.H + tg.h) * K, q, K);
      if constexpr (D::l2norm_qk) l2normalize(q, K);
      const float mul = pb.scale * st.wgt_r(i);
      float* o = tg.o_acc + (t - tg.tok0) * V;
      for (index_t j = 0; j < V; ++j) {
        const float* col = S + j * K;
        float acc = 0.f;
        for (index_t a = 0; a < K; ++a) acc += q[a] * col[a];
        o[j] += mul * acc;
      }
    }
  }
  if (wrote) to_rows(S, tg.state, K, V);
}

//! Backward of one stream from D::step / D::step_adjoint (same contract as run_recurrent_backward).
template <class D, class Scalar>
void run_recurrent_generic_backward(const problem& pb, const source<Scalar>& src, const stream& st,
                                    const bwd_target<Scalar>& tg, index_t segment, generic_scratch& sc) {
  const index_t K = pb.K, V = pb.V, KV = K * V, GW = pb.gate_width();
  const index_t nseg = (st.n + segment - 1) / segment;
  sc.ckpt.resize(static_cast<std::size_t>(std::max<index_t>(nseg, 1) * KV));
  sc.seg.resize(static_cast<std::size_t>((segment + 1) * KV));
  auto update = [&](index_t i, float* Scol) {
    const index_t t = st.tok(i);
    const token<float> x = load_token<D>(pb, src, t, tg.h, tg.hv, st.wgt_w(i), sc);
    load(src.v + (t * pb.HV + tg.hv) * V, sc.v.data(), V);
    for (index_t j = 0; j < V; ++j) D::step(x, j, sc.v[static_cast<std::size_t>(j)], column<float>{Scol + j * K, 1});
  };
  // forward: checkpoints at segment starts (column-major)
  {
    float* hs = sc.S.data();
    if (tg.h0) to_columns(tg.h0, hs, K, V);
    else std::fill(hs, hs + KV, 0.f);
    for (index_t sg = 0; sg < nseg; ++sg) {
      std::memcpy(sc.ckpt.data() + sg * KV, hs, static_cast<std::size_t>(KV) * sizeof(float));
      if (sg + 1 == nseg) break;
      for (index_t i = sg * segment; i < (sg + 1) * segment; ++i)
        if (st.flag(i) & detail::route_write) update(i, hs);
    }
  }
  float* Dh = sc.Dh.data();
  if (tg.dht) to_columns(tg.dht, Dh, K, V);
  else std::fill(Dh, Dh + KV, 0.f);
  std::vector<index_t>& slot_of = sc.slot_of;
  slot_of.resize(static_cast<std::size_t>(segment));
  for (index_t sg = nseg - 1; sg >= 0; --sg) {
    const index_t b = sg * segment, e = std::min(st.n, b + segment);
    std::memcpy(sc.seg.data(), sc.ckpt.data() + sg * KV, static_cast<std::size_t>(KV) * sizeof(float));
    index_t slot = 0;
    for (index_t i = b; i < e; ++i) {  // slot_of[i − b]: the slot holding the state after step i
      if (st.flag(i) & detail::route_write) {
        std::memcpy(sc.seg.data() + (slot + 1) * KV, sc.seg.data() + slot * KV, static_cast<std::size_t>(KV) * sizeof(float));
        ++slot;
        update(i, sc.seg.data() + slot * KV);
      }
      slot_of[static_cast<std::size_t>(i - b)] = slot;
    }
    for (index_t i = e - 1; i >= b; --i) {
      const std::uint8_t f = st.flag(i);
      const bool w = f & detail::route_write, r = f & detail::route_read;
      if (!w && !r) continue;
      const index_t t = st.tok(i), row = t - tg.tok0;
      const index_t after = slot_of[static_cast<std::size_t>(i - b)];
      const float* Safter = sc.seg.data() + after * KV;
      if (r) {  // o_t += s·cr·Sᵀq̂:  dq̂ = s·cr·S dO, dcr = s·⟨q̂, S dO⟩, Dh += s·cr·q̂ dOᵀ
        load(tg.dO + (t * pb.HV + tg.hv) * V, sc.dO.data(), V);
        float* q = sc.q.data();
        load(src.q + (t * pb.H + tg.h) * K, sc.qraw.data(), K);
        std::copy(sc.qraw.begin(), sc.qraw.begin() + K, sc.q.begin());
        if constexpr (D::l2norm_qk) l2normalize(q, K);
        const float cr = st.wgt_r(i), s = pb.scale;
        float* hd = sc.hd.data();  // S dO
        std::fill(hd, hd + K, 0.f);
        for (index_t j = 0; j < V; ++j) {
          const float dj = sc.dO[static_cast<std::size_t>(j)];
          const float* col = Safter + j * K;
          float* dcol = Dh + j * K;
          for (index_t a = 0; a < K; ++a) hd[a] += col[a] * dj, dcol[a] += s * cr * q[a] * dj;
        }
        float dot = 0.f;
        for (index_t a = 0; a < K; ++a) dot += q[a] * hd[a];
        if (tg.dcr) tg.dcr[i] = s * dot;
        if constexpr (D::l2norm_qk) l2normalize_backward(sc.qraw.data(), hd, tg.dq + row * K, K, s * cr);
        else
          for (index_t a = 0; a < K; ++a) tg.dq[row * K + a] += s * cr * hd[a];
      }
      if (w) {
        const float* Sbefore = sc.seg.data() + (after - 1) * KV;
        const token<float> x = load_token<D>(pb, src, t, tg.h, tg.hv, st.wgt_w(i), sc);
        load(src.v + (t * pb.HV + tg.hv) * V, sc.v.data(), V);
        std::fill(sc.dkh.begin(), sc.dkh.begin() + K, 0.f);
        std::fill(sc.dgt.begin(), sc.dgt.end(), 0.f);
        token_grad<float> d;
        d.dk = column<float>{sc.dkh.data(), 1};
        d.dg = column<float>{sc.dgt.data(), 1};
        float* dv = tg.dv + row * V;
        for (index_t j = 0; j < V; ++j)
          dv[j] += D::step_adjoint(x, j, sc.v[static_cast<std::size_t>(j)], column<const float>{Sbefore + j * K, 1},
                                   column<float>{Dh + j * K, 1}, d);
        if constexpr (D::l2norm_qk) l2normalize_backward(sc.kraw.data(), sc.dkh.data(), tg.dk + row * K, K);
        else
          for (index_t a = 0; a < K; ++a) tg.dk[row * K + a] += sc.dkh[static_cast<std::size_t>(a)];
        for (index_t a = 0; a < GW; ++a) tg.dg[row * GW + a] += sc.dgt[static_cast<std::size_t>(a)];
        if constexpr (D::uses_beta) tg.dbeta[row] += d.dbeta;
        if (tg.dcw) tg.dcw[i] = d.dw;
      }
    }
  }
  if (tg.dh0) to_rows(Dh, tg.dh0, K, V);
}

}  // namespace linstate::cpu_detail
