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
// The write's adjoint is the decay policy's own `step_adjoint`, evaluated in double per value column,
// and the router's is its `weights_backward` in double: the formulas below are those of the shipped
// policies (linstate/transition.hpp, router/top_k.hpp); a user's policy brings its own.
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

using linstate::detail::problem;

//! Routing in fp64: the write/read sets of the fp32 router (SPEC §11 C1), and the scores and gate
//! values recomputed in double from the same logits by the router policy (R::weights<double>).
struct routing64 {
  bool on = false;
  std::vector<std::uint8_t> flags;  // [tokens, N]
  std::vector<double> x, p, cw, cr;  // [tokens, N]: logits, scores, write / read weights
};

template <class R, class Scalar>
routing64 route(const linstate::detail::problem_for<R>& pb, const inputs<Scalar>& in) {
  routing64 r;
  if constexpr (R::routes) {
    r.on = true;
    linstate::detail::routing rt32;
    linstate::detail::compute_routing(pb, in, rt32);
    const index_t n_tok = pb.tokens(), N = pb.N;
    r.flags = rt32.flags;
    r.x.assign(static_cast<std::size_t>(n_tok * N), 0.0);
    r.p = r.x, r.cw = r.x, r.cr = r.x;
    for (index_t i = 0; i < n_tok * N; ++i) r.x[static_cast<std::size_t>(i)] = linstate::detail::to_float(in.router_logits.data[i]);
    for (index_t t = 0; t < n_tok; ++t) {
      const std::size_t o = static_cast<std::size_t>(t * N);
      R::weights(pb.rcfg(), static_cast<int>(N), r.x.data() + o, in.router_params.data, r.flags.data() + o, r.p.data() + o,
                 r.cw.data() + o, r.cr.data() + o);
    }
  }
  return r;
}

//! One (sequence, value head, partition) stream: its inputs, its per-step weights and its tape.
template <class D, class Scalar>
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
  //! raw key / query row of token t, and its l2-normalised version (a copy without l2norm_qk)
  void load_qk(const tensor_view<const Scalar>& x, index_t t, std::vector<double>& raw, std::vector<double>& hat) const {
    const index_t K = pb->K;
    double ss = 0;
    for (index_t a = 0; a < K; ++a) raw[a] = at(x, (t * pb->H + h) * K + a), ss += raw[a] * raw[a];
    const double inv = D::l2norm_qk ? math::l2_inverse_norm(ss) : 1.0;
    for (index_t a = 0; a < K; ++a) hat[a] = raw[a] * inv;
  }
  //! what token t gives the transition (k̂ must already be in `k`; `g` receives the gate row)
  token<double> token_at(index_t t, const std::vector<double>& k, std::vector<double>& g) const {
    const index_t GW = pb->gate_width();
    for (index_t a = 0; a < GW; ++a) g[static_cast<std::size_t>(a)] = at(G(), (t * pb->HV + hv) * GW + a);
    token<double> x;
    x.K = pb->K, x.k = k.data(), x.g = GW ? g.data() : nullptr, x.w = cw(t);
    if constexpr (D::uses_beta) x.beta = at(Beta(), t * pb->HV + hv);
    return x;
  }
};

//! Forward of one stream: fills the tape and adds the stream's reads into o (double, [B,T,HV,V]).
template <class D, class Scalar>
void forward_stream(stream64<D, Scalar>& st, double* o) {
  const problem& pb = *st.pb;
  const index_t K = pb.K, V = pb.V, HV = pb.HV, KV = K * V, len = st.t1 - st.t0;
  const auto& in = *st.in;
  st.hist.assign(static_cast<std::size_t>((len + 1) * KV), 0.0);
  if (!in.initial_state.empty())
    for (index_t i = 0; i < KV; ++i)
      st.hist[static_cast<std::size_t>(i)] = in.initial_state.data[((st.s * pb.P + st.p) * HV + st.hv) * KV + i];
  std::vector<double> qr(K), q(K), kr(K), k(K), g(static_cast<std::size_t>(std::max<index_t>(pb.gate_width(), 1)));
  const double sc = static_cast<double>(pb.scale);
  for (index_t t = st.t0; t < st.t1; ++t) {
    const double* P = st.hist.data() + (t - st.t0) * KV;
    double* h = st.hist.data() + (t - st.t0 + 1) * KV;
    std::copy(P, P + KV, h);
    if (st.writes(t)) {
      st.load_qk(st.Kt(), t, kr, k);
      const token<double> x = st.token_at(t, k, g);
      for (index_t j = 0; j < V; ++j) D::step(x, j, st.at(in.v, (t * HV + st.hv) * V + j), column<double>{h + j, V});
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

//! Reverse sweep of one stream: the read's adjoint here, the write's from the policy's step_adjoint.
template <class D, class Scalar>
void backward_stream(const stream64<D, Scalar>& st, const cotangents<Scalar>& d, const sinks& out) {
  const problem& pb = *st.pb;
  const auto& in = *st.in;
  const index_t K = pb.K, V = pb.V, H = pb.H, HV = pb.HV, KV = K * V, N = pb.N, GW = pb.gate_width();
  const double sc = static_cast<double>(pb.scale);
  std::vector<double> Dh(static_cast<std::size_t>(KV), 0.0);
  if (!d.final_state.empty())
    for (index_t i = 0; i < KV; ++i) Dh[i] = d.final_state.data[((st.s * pb.P + st.p) * HV + st.hv) * KV + i];
  std::vector<double> qr(K), q(K), kr(K), k(K), dO(V), dqh(K), dkh(K);
  std::vector<double> g(static_cast<std::size_t>(std::max<index_t>(GW, 1))), dg(g.size());
  const bool routed_stream = st.rt->on && !st.is_shared;
  for (index_t t = st.t1 - 1; t >= st.t0; --t) {
    const double* P = st.hist.data() + (t - st.t0) * KV;
    const double* ht = st.hist.data() + (t - st.t0 + 1) * KV;
    if (st.reads(t)) {  // o_t += s·cr·h_tᵀq̂: dq̂ = s·cr·h_t dO, dcr = s·⟨q̂, h_t dO⟩, Dh += s·cr·q̂ dOᵀ
      st.load_qk(st.Q(), t, qr, q);
      for (index_t j = 0; j < V; ++j) dO[j] = static_cast<double>(linstate::detail::to_float(d.o.data[(t * HV + st.hv) * V + j]));
      const double cr = st.cr(t), m = sc * cr;
      double dot = 0;
      for (index_t i = 0; i < K; ++i) {
        double acc = 0;
        for (index_t j = 0; j < V; ++j) acc += ht[i * V + j] * dO[j];
        dot += q[i] * acc, dqh[i] = m * acc;
      }
      if (routed_stream) out.dcr[t * N + st.n] += sc * dot;
      normalize_backward(D::l2norm_qk, qr, dqh, out.dq + (t * H + st.h) * K);
      for (index_t i = 0; i < K; ++i)
        for (index_t j = 0; j < V; ++j) Dh[i * V + j] += m * q[i] * dO[j];
    }
    if (!st.writes(t)) continue;  // frozen step: h_t = h_{t−1}, Dh passes through unchanged
    st.load_qk(st.Kt(), t, kr, k);
    const token<double> x = st.token_at(t, k, g);
    std::fill(dkh.begin(), dkh.end(), 0.0), std::fill(dg.begin(), dg.end(), 0.0);
    token_grad<double> tgd;
    tgd.dk = column<double>{dkh.data(), 1};
    tgd.dg = column<double>{dg.data(), 1};
    double* dv = out.dv + (t * HV + st.hv) * V;
    for (index_t j = 0; j < V; ++j)
      dv[j] += D::step_adjoint(x, j, st.at(in.v, (t * HV + st.hv) * V + j), column<const double>{P + j, V},
                               column<double>{Dh.data() + j, V}, tgd);
    normalize_backward(D::l2norm_qk, kr, dkh, out.dk + (t * H + st.h) * K);
    for (index_t a = 0; a < GW; ++a) out.dg[(t * HV + st.hv) * GW + a] += dg[static_cast<std::size_t>(a)];
    if constexpr (D::uses_beta) out.dbeta[t * HV + st.hv] += tgd.dbeta;
    if (routed_stream) out.dcw[t * N + st.n] += tgd.dw;
  }
  std::copy(Dh.begin(), Dh.end(), out.dh0);
}

//! Builds the stream of (s, hv, p).
template <class D, class Scalar>
stream64<D, Scalar> make_stream(const problem& pb, const inputs<Scalar>& in, const routing64& rt, index_t s, index_t hv,
                                index_t p) {
  stream64<D, Scalar> st;
  st.pb = &pb, st.in = &in, st.rt = &rt;
  st.s = s, st.hv = hv, st.h = pb.key_head(hv), st.p = p;
  st.is_shared = pb.shared && p == 0;
  st.n = st.is_shared ? -1 : p - (pb.shared ? 1 : 0);
  st.t0 = pb.seq[static_cast<std::size_t>(s)], st.t1 = pb.seq[static_cast<std::size_t>(s + 1)];
  return st;
}

template <class Spec, class Scalar>
auto resolve(const char* api, const inputs<Scalar>& in, const options& opt) {
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
  using D = typename Spec::decay;
  const auto pb = naive_bwd::resolve<Spec>("linstate::reference::forward_fp64_router", in, opt);
  const naive_bwd::routing64 rt = naive_bwd::route(pb, in);
  result r{tensor<double>({pb.B, pb.T, pb.HV, pb.V}), tensor<double>(pb.state_shape())};
  const index_t KV = pb.K * pb.V;
  for (index_t s = 0; s < pb.S; ++s)
    for (index_t hv = 0; hv < pb.HV; ++hv)
      for (index_t p = 0; p < pb.P; ++p) {
        auto st = naive_bwd::make_stream<D>(pb, in, rt, s, hv, p);
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
  using D = typename Spec::decay;
  using R = typename Spec::router;
  const auto pb = naive_bwd::resolve<Spec>(api, in, opt);
  detail::require_shape(api, "cotangents.o", d.o, {pb.B, pb.T, pb.HV, pb.V}, "(dO, like o: [B,T,HV,V])");
  if (!d.final_state.empty() && !(d.final_state.shape == pb.state_shape()))
    detail::fail(api, "cotangents.final_state has shape " + d.final_state.shape.str() + " but must be [S,P,HV,K,V] = " +
                          pb.state_shape().str());
  const naive_bwd::routing64 rt = naive_bwd::route(pb, in);

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
        auto st = naive_bwd::make_stream<D>(pb, in, rt, s, hv, p);
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

  if constexpr (R::routes) {  // the router policy's backward in double (SPEC §4.6 for router::top_k)
    const index_t N = pb.N;
    std::vector<double> work(static_cast<std::size_t>(N));
    for (index_t t = 0; t < pb.tokens(); ++t) {
      const std::size_t o = static_cast<std::size_t>(t * N);
      R::weights_backward(pb.rcfg(), static_cast<int>(N), rt.x.data() + o, in.router_params.data, rt.p.data() + o,
                          rt.flags.data() + o, dcw.data() + o, dcr.data() + o, gr.router_logits.data() + o, work.data());
    }
  }
  return gr;
}

}  // namespace linstate::reference
