// linstate/reference/naive_backward.hpp — the slow, obviously-correct fp64 gradient of every variant.
//
// Straightforward reverse mode of the per-token loop of reference/naive.hpp: the forward loop is run
// once in double and *every* state h_t of every (sequence, value head, partition) is kept (a tape of
// (len+1)·K·V doubles per stream), then the loop is walked backwards. No checkpointing, no chunking,
// no fp32 anywhere except the routing *decisions* (which partitions are written / read), which the
// contract defines on fp32 probabilities (SPEC §11 C1) and which are piecewise constant anyway.
// It is a test oracle (tests/variants/test_gradients.cpp checks it against finite differences):
// \code
//   #include <linstate/reference/naive_backward.hpp>
//   auto g = linstate::reference::backward<sse_n4k1s>(in, {.o = dO.view(), .final_state = dht.view()});
//   // g.q, g.k, g.v, g.g, g.shared.{q,k,g}, g.router_logits, g.initial_state: tensor<double>
// \endcode
//
// Loss convention: L = Σ o·dO + Σ h_T·dht (dht empty = 0). Per stream (sequence s, value head hv,
// partition p; key head h = hv / (HV/H); s = read scale; cw, cr = write / read weight of the step,
// 1 for the shared partition and router::dense, 0 where the token does not write / read), with the
// adjoint Dh = ∂L/∂h_t carried backwards from Dh = dht:
//
//   read  (o_t += s·cr·h_tᵀ q̂_t):
//       dq̂_t += s·cr·h_t dO_t          dcr_t += s·⟨q̂_t, h_t dO_t⟩          Dh += s·cr·q̂_t dO_tᵀ
//   write, gated family (h_t = diag(a) P + cw·k_t v_tᵀ, P = h_{t−1}, a_i = e^{g_i} or e^{g} or 1):
//       dk_t += cw·Dh v_t               dv_t += cw·Dhᵀ k_t                 dcw_t += k_tᵀ Dh v_t
//       dg_i += a_i Σ_j Dh_ij P_ij      (scalar decay: dg += Σ_i of that)   Dh ← diag(a) Dh
//   write, gated delta rule (SPEC §3.1, §11 C9: b = β·cw, a = e^g, pk = Pᵀk̂, u = b (v − a·pk),
//   h_t = a P + k̂ uᵀ):
//       du = Dhᵀ k̂                      dv_t += b·du                       db = ⟨du, v − a·pk⟩
//       dβ_t += cw·db                   dcw_t += β·db
//       dk̂ += Dh u − a·b·P du           da = ⟨Dh, P⟩ − b·⟨du, pk⟩          dg_t += a·da
//       Dh ← a·Dh − a·b·k̂ duᵀ
//   l2norm (x̂ = x / n, n = sqrt(Σx² + 1e-6), delta rule with L2Norm only):
//       dx = dx̂ / n − x ⟨x, dx̂⟩ / n³
//   after the first step: dh0 = Dh.
// Gradients of q, k (per key head) sum over the value heads of the group and over the routed
// partitions; g and β of the routed partitions are shared by all N of them (summed); v is shared by
// every partition, the shared one included (summed).
//
// Router (SPEC §4.6): p = softmax(logits) — here in fp64 — and the gate values are
//   c_n = p_n (gate on), or c_n = p_n / S with S = Σ_{m∈sel} p_m (renormalize), or 1 (gate off),
// for n in the write (read) set. dc is summed over value heads, then
//   dp_n = Σ_{sides with the gate on, n ∈ sel} (dc_n            without renormalisation
//                                               dc_n / S − Σ_{m∈sel} dc_m p_m / S²   with it)
//   dlogit = p ⊙ (dp − ⟨p, dp⟩).
// With both gates off the logits' gradient is exactly 0 (SPEC §11 C2). Rounding of p to the input
// type (router option round_to_input) is treated as the identity here: the gate *values* this oracle
// uses are the unrounded fp64 probabilities (the selection still follows the fp32/rounded router).
//
// forward_fp64_router() is the forward pass this function differentiates: reference::forward with the
// router probabilities (and hence the gate values) computed in fp64. It differs from
// reference::forward only by the fp32 rounding of the gate values (~1e-7 relative); finite
// differences with respect to the router logits need it, since fp32 gates would add noise of
// ~1e-7 / step to the quotient.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "../concepts.hpp"
#include "../detail/numeric.hpp"
#include "../detail/problem.hpp"
#include "../detail/router.hpp"
#include "../io_types.hpp"
#include "naive.hpp"

namespace linstate::reference {

//! fp64 gradients of the shared partition's inputs (empty where the variant has none).
struct shared_gradient {
  tensor<double> q, k, g, beta;
};

//! fp64 gradient of L = Σ o·dO + Σ h_T·dht with respect to every input. A tensor is empty iff the
//! corresponding input does not exist for the variant (g for decay::none, beta outside the delta rule,
//! shared.* without a shared partition, router_logits without router::top_k); initial_state is always
//! there (`[S,P,HV,K,V]`), since a zero initial state is still an input.
struct gradient {
  tensor<double> q, k, v, g, beta;
  shared_gradient shared;
  tensor<double> router_logits;
  tensor<double> initial_state;
};

namespace naive_bwd {

using linstate::detail::decay_kind;
using linstate::detail::problem;

//! Routing in fp64: the write/read sets of the fp32 router (SPEC §11 C1), and the gate values and
//! probabilities recomputed in double from the same logits.
struct routing64 {
  bool on = false;
  std::vector<std::uint8_t> flags;  // [tokens, N]
  std::vector<double> p, cw, cr;    // [tokens, N]
  std::vector<double> sw, sr;       // [tokens] selected mass of the write / read set
};

template <class Scalar>
routing64 route(const problem& pb, const tensor_view<const Scalar>& logits) {
  routing64 r;
  if (pb.router != linstate::detail::router_kind::top_k) return r;
  r.on = true;
  linstate::detail::routing rt32;
  linstate::detail::compute_routing(pb, logits, rt32);
  const index_t n_tok = pb.tokens(), N = pb.N;
  r.flags = rt32.flags;
  r.p.assign(static_cast<std::size_t>(n_tok * N), 0.0);
  r.cw = r.p, r.cr = r.p;
  r.sw.assign(static_cast<std::size_t>(n_tok), 0.0), r.sr = r.sw;
  const bool gw = router::has(pb.gates, router::gate::write), gr = router::has(pb.gates, router::gate::read);
  for (index_t t = 0; t < n_tok; ++t) {
    double* p = r.p.data() + t * N;
    double m = -std::numeric_limits<double>::infinity(), z = 0.0;
    for (index_t n = 0; n < N; ++n) m = std::max(m, static_cast<double>(linstate::detail::to_float(logits.data[t * N + n])));
    for (index_t n = 0; n < N; ++n) z += p[n] = std::exp(static_cast<double>(linstate::detail::to_float(logits.data[t * N + n])) - m);
    for (index_t n = 0; n < N; ++n) p[n] /= z;
    double sw = 0, sr = 0;
    for (index_t n = 0; n < N; ++n) {
      const std::uint8_t f = r.flags[static_cast<std::size_t>(t * N + n)];
      if (f & linstate::detail::route_write) sw += p[n];
      if (f & linstate::detail::route_read) sr += p[n];
    }
    r.sw[static_cast<std::size_t>(t)] = sw, r.sr[static_cast<std::size_t>(t)] = sr;
    for (index_t n = 0; n < N; ++n) {
      const std::size_t i = static_cast<std::size_t>(t * N + n);
      const double pw = pb.renormalize ? p[n] / sw : p[n], pr = pb.renormalize ? p[n] / sr : p[n];
      r.cw[i] = (r.flags[i] & linstate::detail::route_write) ? (gw ? pw : 1.0) : 0.0;
      r.cr[i] = (r.flags[i] & linstate::detail::route_read) ? (gr ? pr : 1.0) : 0.0;
    }
  }
  return r;
}

//! One (sequence, value head, partition) stream: its inputs, its per-step weights and its tape.
template <class Scalar>
struct stream64 {
  const problem* pb = nullptr;
  const inputs<Scalar>* in = nullptr;
  const routing64* rt = nullptr;
  index_t s = 0, hv = 0, h = 0, p = 0, n = 0;  // n: routed index (−1 for the shared partition)
  bool is_shared = false;
  index_t t0 = 0, t1 = 0;                       // flat tokens [t0, t1)
  std::vector<double> hist;                     // [(t1−t0)+1, K, V]: h before the first step, after each step

  const tensor_view<const Scalar>& Q() const { return is_shared ? in->shared.q : in->q; }
  const tensor_view<const Scalar>& Kt() const { return is_shared ? in->shared.k : in->k; }
  const tensor_view<const Scalar>& G() const { return is_shared ? in->shared.g : in->g; }
  const tensor_view<const Scalar>& Beta() const { return is_shared ? in->shared.beta : in->beta; }
  static double at(const tensor_view<const Scalar>& x, index_t i) {
    return static_cast<double>(linstate::detail::to_float(x.data[i]));
  }
  bool writes(index_t t) const {
    return is_shared || !rt->on || (rt->flags[static_cast<std::size_t>(t * pb->N + n)] & linstate::detail::route_write);
  }
  bool reads(index_t t) const {
    return is_shared || !rt->on || (rt->flags[static_cast<std::size_t>(t * pb->N + n)] & linstate::detail::route_read);
  }
  double cw(index_t t) const { return is_shared || !rt->on ? 1.0 : rt->cw[static_cast<std::size_t>(t * pb->N + n)]; }
  double cr(index_t t) const { return is_shared || !rt->on ? 1.0 : rt->cr[static_cast<std::size_t>(t * pb->N + n)]; }
  //! raw key / query row of token t, and its l2-normalised version (a copy when no l2norm)
  void load_qk(const tensor_view<const Scalar>& x, index_t t, std::vector<double>& raw, std::vector<double>& hat) const {
    const index_t K = pb->K;
    double ss = 0;
    for (index_t a = 0; a < K; ++a) raw[a] = at(x, (t * pb->H + h) * K + a), ss += raw[a] * raw[a];
    const double inv = pb->l2norm ? 1.0 / std::sqrt(ss + 1e-6) : 1.0;
    for (index_t a = 0; a < K; ++a) hat[a] = raw[a] * inv;
  }
  //! decay factors a_i of token t (K of them; all equal for scalar / delta; 1 for none)
  void decay(index_t t, std::vector<double>& a) const {
    const index_t K = pb->K, HV = pb->HV;
    for (index_t i = 0; i < K; ++i) {
      switch (pb->decay) {
        case decay_kind::none: a[i] = 1.0; break;
        case decay_kind::diagonal: a[i] = std::exp(at(G(), (t * HV + hv) * K + i)); break;
        case decay_kind::scalar:
        case decay_kind::delta: a[i] = std::exp(at(G(), t * HV + hv)); break;
      }
    }
  }
};

//! Forward of one stream: fills the tape and adds the stream's reads into o (double, [B,T,HV,V]).
template <class Scalar>
void forward_stream(stream64<Scalar>& st, double* o) {
  const problem& pb = *st.pb;
  const index_t K = pb.K, V = pb.V, HV = pb.HV, KV = K * V, len = st.t1 - st.t0;
  const auto& in = *st.in;
  st.hist.assign(static_cast<std::size_t>((len + 1) * KV), 0.0);
  if (!in.initial_state.empty())
    for (index_t i = 0; i < KV; ++i)
      st.hist[static_cast<std::size_t>(i)] = in.initial_state.data[((st.s * pb.P + st.p) * HV + st.hv) * KV + i];
  std::vector<double> qr(K), q(K), kr(K), k(K), a(K), pk(V), v(V);
  const double sc = static_cast<double>(pb.scale);
  for (index_t t = st.t0; t < st.t1; ++t) {
    const double* P = st.hist.data() + (t - st.t0) * KV;
    double* h = st.hist.data() + (t - st.t0 + 1) * KV;
    std::copy(P, P + KV, h);
    if (st.writes(t)) {
      st.load_qk(st.Kt(), t, kr, k);
      st.decay(t, a);
      for (index_t j = 0; j < V; ++j) v[j] = st.at(in.v, (t * HV + st.hv) * V + j);
      const double cw = st.cw(t);
      if (pb.decay == decay_kind::delta) {
        // pk = Pᵀk̂ ; u = β·cw (v − a pk) ; h = a P + k̂ uᵀ
        const double b = st.at(st.Beta(), t * HV + st.hv) * cw;
        std::fill(pk.begin(), pk.end(), 0.0);
        for (index_t i = 0; i < K; ++i)
          for (index_t j = 0; j < V; ++j) pk[j] += P[i * V + j] * k[i];
        for (index_t i = 0; i < K; ++i)
          for (index_t j = 0; j < V; ++j) h[i * V + j] = a[0] * P[i * V + j] + k[i] * b * (v[j] - a[0] * pk[j]);
      } else {
        // h = diag(a) P + cw k vᵀ
        for (index_t i = 0; i < K; ++i)
          for (index_t j = 0; j < V; ++j) h[i * V + j] = a[i] * P[i * V + j] + cw * k[i] * v[j];
      }
    }
    if (st.reads(t)) {
      st.load_qk(st.Q(), t, qr, q);
      const double m = sc * st.cr(t);
      double* ot = o + (t * HV + st.hv) * V;
      for (index_t j = 0; j < V; ++j) {
        double acc = 0;
        for (index_t i = 0; i < K; ++i) acc += q[i] * h[i * V + j];
        ot[j] += m * acc;
      }
    }
  }
}

//! dx += dx̂ / n − x ⟨x, dx̂⟩ / n³ with n = sqrt(Σx² + 1e-6) (or dx += dx̂ without l2norm)
inline void normalize_backward(bool l2norm, const std::vector<double>& x, const std::vector<double>& dxhat, double* dx) {
  const std::size_t K = x.size();
  if (!l2norm) {
    for (std::size_t a = 0; a < K; ++a) dx[a] += dxhat[a];
    return;
  }
  double ss = 0, xd = 0;
  for (std::size_t a = 0; a < K; ++a) ss += x[a] * x[a], xd += x[a] * dxhat[a];
  const double n = std::sqrt(ss + 1e-6);
  for (std::size_t a = 0; a < K; ++a) dx[a] += dxhat[a] / n - x[a] * xd / (n * n * n);
}

//! Where the gradient of one stream lands (double accumulators shaped like the inputs).
struct sinks {
  double *dq = nullptr, *dk = nullptr, *dv = nullptr, *dg = nullptr, *dbeta = nullptr;
  double* dh0 = nullptr;           // [K,V] of this stream
  double *dcw = nullptr, *dcr = nullptr;  // [tokens, N] (routed partitions only)
};

//! Reverse sweep of one stream (formulas in the file comment).
template <class Scalar>
void backward_stream(const stream64<Scalar>& st, const cotangents<Scalar>& d, const sinks& out) {
  const problem& pb = *st.pb;
  const auto& in = *st.in;
  const index_t K = pb.K, V = pb.V, H = pb.H, HV = pb.HV, KV = K * V, N = pb.N;
  const double sc = static_cast<double>(pb.scale);
  std::vector<double> Dh(static_cast<std::size_t>(KV), 0.0);
  if (!d.final_state.empty())
    for (index_t i = 0; i < KV; ++i) Dh[i] = d.final_state.data[((st.s * pb.P + st.p) * HV + st.hv) * KV + i];
  std::vector<double> qr(K), q(K), kr(K), k(K), a(K), v(V), dO(V), hd(K), dqh(K), dkh(K), du(V), pk(V), u(V);
  const bool routed_stream = st.rt->on && !st.is_shared;
  for (index_t t = st.t1 - 1; t >= st.t0; --t) {
    const double* P = st.hist.data() + (t - st.t0) * KV;
    const double* ht = st.hist.data() + (t - st.t0 + 1) * KV;
    if (st.reads(t)) {
      st.load_qk(st.Q(), t, qr, q);
      for (index_t j = 0; j < V; ++j) dO[j] = static_cast<double>(linstate::detail::to_float(d.o.data[(t * HV + st.hv) * V + j]));
      const double cr = st.cr(t), m = sc * cr;
      double dot = 0;
      for (index_t i = 0; i < K; ++i) {
        double acc = 0;
        for (index_t j = 0; j < V; ++j) acc += ht[i * V + j] * dO[j];
        hd[i] = acc, dot += q[i] * acc, dqh[i] = m * acc;
      }
      if (routed_stream) out.dcr[t * N + st.n] += sc * dot;
      normalize_backward(pb.l2norm, qr, dqh, out.dq + (t * H + st.h) * K);
      for (index_t i = 0; i < K; ++i)
        for (index_t j = 0; j < V; ++j) Dh[i * V + j] += m * q[i] * dO[j];
    }
    if (!st.writes(t)) continue;  // frozen step: h_t = h_{t−1}, Dh passes through unchanged
    st.load_qk(st.Kt(), t, kr, k);
    st.decay(t, a);
    for (index_t j = 0; j < V; ++j) v[j] = st.at(in.v, (t * HV + st.hv) * V + j);
    const double cw = st.cw(t);
    double* dv = out.dv + (t * HV + st.hv) * V;
    if (pb.decay == decay_kind::delta) {
      const double beta = st.at(st.Beta(), t * HV + st.hv), b = beta * cw, e = a[0];
      std::fill(pk.begin(), pk.end(), 0.0), std::fill(du.begin(), du.end(), 0.0);
      double dP = 0;  // ⟨Dh, P⟩
      for (index_t i = 0; i < K; ++i)
        for (index_t j = 0; j < V; ++j)
          pk[j] += P[i * V + j] * k[i], du[j] += Dh[i * V + j] * k[i], dP += Dh[i * V + j] * P[i * V + j];
      double db = 0, dupk = 0;
      for (index_t j = 0; j < V; ++j) {
        u[j] = b * (v[j] - e * pk[j]);
        db += du[j] * (v[j] - e * pk[j]);
        dupk += du[j] * pk[j];
        dv[j] += b * du[j];
      }
      for (index_t i = 0; i < K; ++i) {
        double s1 = 0, s2 = 0;
        for (index_t j = 0; j < V; ++j) s1 += Dh[i * V + j] * u[j], s2 += P[i * V + j] * du[j];
        dkh[i] = s1 - e * b * s2;
      }
      normalize_backward(pb.l2norm, kr, dkh, out.dk + (t * H + st.h) * K);
      out.dbeta[t * HV + st.hv] += cw * db;
      if (routed_stream) out.dcw[t * N + st.n] += beta * db;
      out.dg[t * HV + st.hv] += e * (dP - b * dupk);
      for (index_t i = 0; i < K; ++i)
        for (index_t j = 0; j < V; ++j) Dh[i * V + j] = e * Dh[i * V + j] - e * b * k[i] * du[j];
    } else {
      double dcw = 0, dgs = 0;
      for (index_t i = 0; i < K; ++i) {
        double dkv = 0, dgi = 0;
        for (index_t j = 0; j < V; ++j) {
          dkv += Dh[i * V + j] * v[j];
          dv[j] += cw * Dh[i * V + j] * k[i];
          dgi += Dh[i * V + j] * P[i * V + j];
        }
        dkh[i] = cw * dkv;
        dcw += k[i] * dkv;
        if (pb.decay == decay_kind::diagonal) out.dg[(t * HV + st.hv) * K + i] += a[i] * dgi;
        if (pb.decay == decay_kind::scalar) dgs += a[i] * dgi;
        for (index_t j = 0; j < V; ++j) Dh[i * V + j] *= a[i];
      }
      if (pb.decay == decay_kind::scalar) out.dg[t * HV + st.hv] += dgs;
      normalize_backward(false, kr, dkh, out.dk + (t * H + st.h) * K);
      if (routed_stream) out.dcw[t * N + st.n] += dcw;
    }
  }
  std::copy(Dh.begin(), Dh.end(), out.dh0);
}

//! Builds the stream of (s, hv, p).
template <class Scalar>
stream64<Scalar> make_stream(const problem& pb, const inputs<Scalar>& in, const routing64& rt, index_t s, index_t hv,
                             index_t p) {
  stream64<Scalar> st;
  st.pb = &pb, st.in = &in, st.rt = &rt;
  st.s = s, st.hv = hv, st.h = pb.key_head(hv), st.p = p;
  st.is_shared = pb.shared && p == 0;
  st.n = st.is_shared ? -1 : p - (pb.shared ? 1 : 0);
  st.t0 = pb.seq[static_cast<std::size_t>(s)], st.t1 = pb.seq[static_cast<std::size_t>(s + 1)];
  return st;
}

template <class Spec, class Scalar>
problem resolve(const char* api, const inputs<Scalar>& in, const options& opt) {
  static_assert(linstate::detail::validate<Spec>());
  return linstate::detail::make_problem<Spec>(api, in, tensor_view<Scalar>{}, tensor_view<float>{}, "final_state", opt,
                                              false);
}

}  // namespace naive_bwd

//! \brief reference::forward with the router probabilities and gate values computed in fp64 (the
//! write/read *sets* still come from the fp32 router). This is the function reference::backward
//! differentiates; it differs from reference::forward by the fp32 rounding of the gate values only.
template <class Spec, InputScalar Scalar>
result forward_fp64_router(const inputs<Scalar>& in, const options& opt = {}) {
  const detail::problem pb = naive_bwd::resolve<Spec>("linstate::reference::forward_fp64_router", in, opt);
  const naive_bwd::routing64 rt = naive_bwd::route(pb, in.router_logits);
  result r{tensor<double>({pb.B, pb.T, pb.HV, pb.V}), tensor<double>(pb.state_shape())};
  const index_t KV = pb.K * pb.V;
  for (index_t s = 0; s < pb.S; ++s)
    for (index_t hv = 0; hv < pb.HV; ++hv)
      for (index_t p = 0; p < pb.P; ++p) {
        auto st = naive_bwd::make_stream(pb, in, rt, s, hv, p);
        naive_bwd::forward_stream(st, r.o.data());
        std::copy_n(st.hist.data() + (st.t1 - st.t0) * KV, KV, r.final_state.data() + ((s * pb.P + p) * pb.HV + hv) * KV);
      }
  return r;
}

//! \brief fp64 gradient of L = Σ o·dO + Σ h_T·dht with respect to every input of variant `Spec`
//! (reverse mode of the per-token loop; formulas in the file comment). `d.o` is required
//! (`[B,T,HV,V]`); `d.final_state` may be empty (zero). Throws linstate::error on bad shapes.
template <class Spec, InputScalar Scalar>
gradient backward(const inputs<Scalar>& in, const cotangents<Scalar>& d, const options& opt = {}) {
  const char* api = "linstate::reference::backward";
  const detail::problem pb = naive_bwd::resolve<Spec>(api, in, opt);
  detail::require_shape(api, "cotangents.o", d.o, {pb.B, pb.T, pb.HV, pb.V}, "(dO, like o: [B,T,HV,V])");
  if (!d.final_state.empty() && !(d.final_state.shape == pb.state_shape()))
    detail::fail(api, "cotangents.final_state has shape " + d.final_state.shape.str() + " but must be [S,P,HV,K,V] = " +
                          pb.state_shape().str());
  const naive_bwd::routing64 rt = naive_bwd::route(pb, in.router_logits);

  auto like = [](const auto& x) { return x.empty() ? tensor<double>() : tensor<double>(x.shape); };
  gradient gr;
  gr.q = like(in.q), gr.k = like(in.k), gr.v = like(in.v), gr.g = like(in.g), gr.beta = like(in.beta);
  gr.shared = {like(in.shared.q), like(in.shared.k), like(in.shared.g), like(in.shared.beta)};
  gr.router_logits = like(in.router_logits);
  gr.initial_state = tensor<double>(pb.state_shape());
  std::vector<double> dcw, dcr;  // [tokens, N], summed over value heads
  if (rt.on) dcw.assign(static_cast<std::size_t>(pb.tokens() * pb.N), 0.0), dcr = dcw;

  const index_t KV = pb.K * pb.V;
  std::vector<double> o_unused(static_cast<std::size_t>(pb.tokens() * pb.HV * pb.V));
  for (index_t s = 0; s < pb.S; ++s)
    for (index_t hv = 0; hv < pb.HV; ++hv)
      for (index_t p = 0; p < pb.P; ++p) {
        auto st = naive_bwd::make_stream(pb, in, rt, s, hv, p);
        naive_bwd::forward_stream(st, o_unused.data());
        naive_bwd::sinks sk;
        sk.dq = st.is_shared ? gr.shared.q.data() : gr.q.data();
        sk.dk = st.is_shared ? gr.shared.k.data() : gr.k.data();
        sk.dg = st.is_shared ? gr.shared.g.data() : gr.g.data();
        sk.dbeta = st.is_shared ? gr.shared.beta.data() : gr.beta.data();
        sk.dv = gr.v.data();
        sk.dh0 = gr.initial_state.data() + ((s * pb.P + p) * pb.HV + hv) * KV;
        sk.dcw = dcw.data(), sk.dcr = dcr.data();
        naive_bwd::backward_stream(st, d, sk);
      }

  if (rt.on) {  // softmax backward (SPEC §4.6)
    const index_t N = pb.N;
    const bool gw = router::has(pb.gates, router::gate::write), gr_on = router::has(pb.gates, router::gate::read);
    std::vector<double> dp(static_cast<std::size_t>(N));
    for (index_t t = 0; t < pb.tokens(); ++t) {
      const double* p = rt.p.data() + t * N;
      const std::uint8_t* f = rt.flags.data() + t * N;
      std::fill(dp.begin(), dp.end(), 0.0);
      for (int side = 0; side < 2; ++side) {
        if (!(side == 0 ? gw : gr_on)) continue;  // gate off: the weight is the constant 1
        const std::uint8_t bit = side == 0 ? detail::route_write : detail::route_read;
        const double* dc = (side == 0 ? dcw : dcr).data() + t * N;
        const double S = (side == 0 ? rt.sw : rt.sr)[static_cast<std::size_t>(t)];
        double cross = 0;  // Σ_{m∈sel} dc_m p_m
        for (index_t m = 0; m < N; ++m)
          if (f[m] & bit) cross += dc[m] * p[m];
        for (index_t m = 0; m < N; ++m)
          if (f[m] & bit) dp[static_cast<std::size_t>(m)] += pb.renormalize ? dc[m] / S - cross / (S * S) : dc[m];
      }
      double pdp = 0;
      for (index_t m = 0; m < N; ++m) pdp += p[m] * dp[static_cast<std::size_t>(m)];
      for (index_t m = 0; m < N; ++m) gr.router_logits[t * N + m] = p[m] * (dp[static_cast<std::size_t>(m)] - pdp);
    }
  }
  return gr;
}

}  // namespace linstate::reference
