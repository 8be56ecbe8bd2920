// linstate/balance_loss.hpp — the SSE router's balance (auxiliary) loss and its gradient into the
// router logits (SPEC §4.9, §9.1 P9, §11 C11).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "concepts.hpp"
#include "detail/numeric.hpp"
#include "detail/problem.hpp"
#include "detail/router.hpp"
#include "io_types.hpp"
#include "tensor.hpp"

namespace linstate {

//! How balance_loss() stores its gradient: replace the contents of `d_logits`, or add to them (to
//! fold the balance term into the router gradient that linstate::backward already wrote).
enum class gradient_write { overwrite, accumulate };

namespace detail {

//! The router-only part of a problem for the balance loss: N, kw (and kr, gates, rounding, which
//! compute_routing also reads), resolved from the variant and the options with the same rules and
//! messages as make_problem. `logits` must be [B,T,N]; B and T are taken from it. The values are
//! checked for finiteness only when `host_data` is true (device backends pass false: the CUDA
//! balance_loss cannot read them without a round trip).
template <class Spec, class Scalar>
problem_for<typename Spec::router> make_balance_problem(const std::string& api, const tensor_view<const Scalar>& logits, const options& opt,
                             bool host_data = true) {
  using R = typename Spec::router;
  using Pt = typename Spec::partition;
  problem_for<R> pb;
  pb.routed = true;
  pb.shared = Pt::has_shared;

  // N: from the partition policy, or options.num_partitions when it is dynamic.
  if constexpr (Pt::num_routed == dynamic) {
    if (opt.num_partitions == dynamic)
      fail(api, "partition::routed<dynamic> needs options.num_partitions (it is not set)");
    if (opt.num_partitions < 1)
      fail(api, "partition::routed<dynamic> needs options.num_partitions >= 1 (got " + std::to_string(opt.num_partitions) + ")");
    pb.N = opt.num_partitions;
  } else {
    if (opt.num_partitions != dynamic && opt.num_partitions != Pt::num_routed)
      fail(api, "options.num_partitions = " + std::to_string(opt.num_partitions) + " but the variant fixes N = " +
                    std::to_string(Pt::num_routed) + " at compile time");
    pb.N = Pt::num_routed;
  }
  pb.P = pb.N + (pb.shared ? 1 : 0);

  // kw is required (it defines the write mask and the N/kw factor); kr and the gate use do not
  // enter the loss, so they may stay unset, but a value that contradicts the variant is refused.
  pb.router_cfg.value = R::configure(opt, pb.N, api, /*balance=*/true);
  pb.kw = pb.rcfg().kw, pb.kr = pb.rcfg().kr;

  // logits: [B,T,N], finite.
  if (logits.empty()) fail(api, "router_logits is required: [B,T,N] with N = " + std::to_string(pb.N));
  if (logits.rank() != 3 || logits.size(2) != pb.N || logits.size(0) < 0 || logits.size(1) < 0)
    fail(api, "router_logits has shape " + logits.shape.str() + " but must be [B,T,N] with N = " + std::to_string(pb.N));
  pb.B = logits.size(0), pb.T = logits.size(1);
  for (index_t i = 0; host_data && i < logits.numel(); ++i)
    if (!std::isfinite(to_float(logits.data[i])))
      fail(api, "router_logits " + logits.shape.str() + " holds a non-finite value at token " + std::to_string(i / pb.N) +
                    ", partition " + std::to_string(i % pb.N));
  return pb;
}

//! The balance loss's working buffers, kept per thread from call to call while they are small (a
//! training step's router has a few thousand tokens × N), so that a step allocates nothing once the
//! shapes repeat; a larger call uses buffers of its own and leaves nothing large behind.
struct balance_scratch {
  static constexpr std::size_t small = std::size_t{1} << 16;  // floats of [tokens, N] kept per thread
  routing rt;
  std::vector<double> P, F, dp, x, dx;
  std::vector<float> grad;
  static balance_scratch& kept() {
    static thread_local balance_scratch s;
    return s;
  }
  //! the kept buffers for `elements` = tokens·N, or `own` beyond `small`
  static balance_scratch& for_size(std::size_t elements, balance_scratch& own) { return elements <= small ? kept() : own; }
};

//! aux, and (when `grad` is not null) ∂aux/∂logits per token in fp32, [tokens, N], into `*grad`
//! (resized; its storage is the caller's).
template <class R, class Scalar>
double balance_loss_impl(const problem_for<R>& pb, const tensor_view<const Scalar>& logits, std::vector<float>* grad) {
  const index_t M = pb.tokens(), N = pb.N;
  if (grad) grad->assign(static_cast<std::size_t>(M * N), 0.f);
  if (M == 0) return 0.0;  // no token: nothing to balance (and the means are undefined)
  balance_scratch own;
  balance_scratch& sc = balance_scratch::for_size(static_cast<std::size_t>(M * N), own);
  routing& rt = sc.rt;
  compute_routing<R>(pb, pb.rcfg(), logits, nullptr, rt);
  // P_n and F_n: means over every token of the call, accumulated in double.
  std::vector<double>&P = sc.P, &F = sc.F;
  P.assign(static_cast<std::size_t>(N), 0.0), F.assign(static_cast<std::size_t>(N), 0.0);
  for (index_t t = 0; t < M; ++t)
    for (index_t n = 0; n < N; ++n) {
      const std::size_t i = static_cast<std::size_t>(t * N + n);
      P[static_cast<std::size_t>(n)] += rt.prob[i];
      F[static_cast<std::size_t>(n)] += (rt.flags[i] & route_write) ? 1.0 : 0.0;
    }
  const double factor = static_cast<double>(N) / static_cast<double>(pb.kw);
  double aux = 0.0;
  for (std::size_t n = 0; n < P.size(); ++n) {
    P[n] /= static_cast<double>(M);
    F[n] /= static_cast<double>(M);
    aux += P[n] * F[n];
  }
  aux *= factor;
  if (grad) {
    // ∂aux/∂p_t[n] = (N/kw)·F_n/M (the mask is a constant), then the softmax backward
    // dlogit = p ⊙ (dp − ⟨p, dp⟩) per token, as SPEC §4.6 (L355).
    std::vector<double>&dp = sc.dp, &x = sc.x, &dx = sc.dx;
    dp.resize(static_cast<std::size_t>(N)), x.resize(dp.size()), dx.resize(dp.size());
    for (std::size_t n = 0; n < dp.size(); ++n) dp[n] = factor * F[n] / static_cast<double>(M);
    for (index_t t = 0; t < M; ++t) {
      for (index_t n = 0; n < N; ++n) x[static_cast<std::size_t>(n)] = static_cast<double>(to_float(logits.data[t * N + n]));
      R::scores_backward(pb.rcfg(), static_cast<int>(N), x.data(), static_cast<const float*>(nullptr),
                         rt.prob.data() + t * N, dp.data(), dx.data());
      for (index_t n = 0; n < N; ++n)
        (*grad)[static_cast<std::size_t>(t * N + n)] = static_cast<float>(dx[static_cast<std::size_t>(n)]);
    }
  }
  return aux;
}

template <class Spec>
constexpr bool validate_balance() {
  static_assert(validate<Spec>());
  if constexpr (Variant<Spec>) {
    using R = typename Spec::router;
    static_assert(R::routes,
                  "linstate::balance_loss: the balance loss balances the top-k router's write sets (SPEC §4.9); "
                  "the variant's router must be router::top_k<kw, kr> (router::dense writes every partition, so the "
                  "loss would be the constant 1)");
    if constexpr (R::routes) {
      static_assert(requires(const typename R::config& c, const double* x, const float* p, const double* dp, double* dx) {
                      R::scores_backward(c, 1, x, static_cast<const float*>(nullptr), p, dp, dx);
                    },
                    "linstate::balance_loss: the router policy has no `scores_backward(const config&, int N, const T* "
                    "logits, const float* params, const P* scores, const T* dscores, T* dlogits)`: the balance loss "
                    "differentiates its scores (router::top_k: the softmax)");
      static_assert(R::params_per_partition == 0,
                    "linstate::balance_loss: the router takes router_params, which balance_loss has no argument for; "
                    "balance such a router through its parameters (auxiliary-loss-free balancing)");
    }
  }
  return true;
}

}  // namespace detail

//! \brief The balance (auxiliary) loss of Sparse State Expansion (SSE, arXiv 2507.16577; SPEC §4.9,
//! §9.1 P9), computed from the router logits of one call:
//! \verbatim
//!   p_t = softmax(router_logits_t)            fp32, over the N routed partitions (SPEC §4.4)
//!   w_t = 0/1 mask of the kw written partitions (top-kw of p_t, ties to the lowest index)
//!   P_n = (1/M) Σ_t p_t[n]     F_n = (1/M) Σ_t w_t[n]     M = B·T, every token of the call
//!   aux = (N/kw) · Σ_n P_n F_n
//! \endverbatim
//! The router rules are the forward pass's (detail::compute_routing): fp32 softmax, lowest-index
//! ties, and with `top_k_options::round_to_input` the probabilities rounded to the logits' type
//! (the authors' mask path). The gate use (`gates`) and `renormalize` do not enter the loss: P is the
//! mean of the full softmax, F that of the write mask; the read set plays no role ("writer-only").
//! aux = 1 when the routing is uniform (all p_t uniform, or every F_n = kw/N), since Σ_n F_n = kw.
//!
//! The means run over all B·T tokens of the call: with packed sequences (`cu_seqlens`, B = 1) and
//! with B > 1 alike, the loss is over every token of every sequence, not an average of per-sequence
//! losses, as the authors' code (sse.py L294-L298, L367-L371). With no token (B·T = 0) aux = 0.
//! Sums are accumulated in double; the value is returned as float.
//!
//! Options: N comes from the partition policy (or `options.num_partitions`), kw from the router (or
//! `options.num_writer`); the same options object as the forward call works. kr and the gates are not
//! needed. Throws linstate::error (naming the shapes) when the logits are not `[B,T,N]`, hold a
//! non-finite value, or the options are missing or contradict the variant. Only for router::top_k
//! (a static_assert says so otherwise).
//! \code
//! struct sse_n4k1s : linstate::spec<> { using partition = linstate::partition::routed<4, linstate::partition::shared>;
//!                                       using router = linstate::router::top_k<1>; };
//! float aux = linstate::balance_loss<sse_n4k1s>(in.router_logits);
//! \endcode
template <class Spec, InputScalar Scalar>
float balance_loss(const tensor_view<const Scalar>& router_logits, const options& opt = {}) {
  static_assert(detail::validate_balance<Spec>());
  static const std::string api = "linstate::balance_loss";  // static: a training step builds no string
  const auto pb = detail::make_balance_problem<Spec>(api, router_logits, opt);
  return static_cast<float>(detail::balance_loss_impl(pb, router_logits, nullptr));
}

//! Same as above for a view of non-const logits.
template <class Spec, InputScalar Scalar>
float balance_loss(const tensor_view<Scalar>& router_logits, const options& opt = {}) {
  return balance_loss<Spec>(tensor_view<const Scalar>(router_logits), opt);
}

//! \brief The balance loss and its gradient: returns aux (unscaled, as the overload above) and
//! writes `coefficient · ∂aux/∂router_logits` into `d_logits` (`[B,T,N]`, the logits' element type,
//! computed in fp32/double).
//!
//! The gradient flows through P only (the write mask is piecewise constant, SPEC §4.9):
//! `∂aux/∂p_t[n] = (N/kw)·F_n/M`, then the softmax backward `p ⊙ (dp − ⟨p, dp⟩)` per token. With
//! `round_to_input` the rounding is passed through as the identity (as the authors' backward does).
//! `mode` chooses between replacing `d_logits` (gradient_write::overwrite, default) and adding to it
//! (gradient_write::accumulate), e.g. onto the router gradient linstate::backward wrote, which is
//! what a training step `loss = task_loss + coefficient · aux` needs (SSE models use 0.01):
//! \code
//! linstate::backward<sse>(linstate::cpu{}, in, {.o = dO}, grads, linstate::chunked<64>{}, linstate::varlen{}, opt);
//! const float aux = linstate::balance_loss<sse>(in.router_logits, grads.router_logits, 0.01f,
//!                                               linstate::gradient_write::accumulate, opt);
//! total_loss += 0.01f * aux;
//! \endcode
//! `d_logits` is required, must have the logits' shape and must not overlap them; every check is
//! made before anything is written (on error `d_logits` is untouched).
template <class Spec, InputScalar Scalar>
float balance_loss(const tensor_view<const Scalar>& router_logits, const tensor_view<Scalar>& d_logits,
                   float coefficient = 1.f, gradient_write mode = gradient_write::overwrite, const options& opt = {}) {
  static_assert(detail::validate_balance<Spec>());
  static const std::string api = "linstate::balance_loss";  // static: a training step builds no string
  const auto pb = detail::make_balance_problem<Spec>(api, router_logits, opt);
  if (d_logits.empty())
    detail::fail(api, "d_logits is required: expected " + router_logits.shape.str() +
                          " (like router_logits); for the value alone call balance_loss(router_logits, options)");
  if (!(d_logits.shape == router_logits.shape))
    detail::fail(api, "d_logits has shape " + d_logits.shape.str() + " but must be " + router_logits.shape.str() +
                          " (like router_logits)");
  if (!std::isfinite(coefficient)) detail::fail(api, "coefficient must be finite, got " + std::to_string(coefficient));
  {
    const auto bytes = static_cast<std::size_t>(router_logits.numel()) * sizeof(Scalar);
    const auto* a = reinterpret_cast<const unsigned char*>(router_logits.data);
    const auto* b = reinterpret_cast<const unsigned char*>(d_logits.data);
    if (bytes && a < b + bytes && b < a + bytes)
      detail::fail(api, "d_logits " + d_logits.shape.str() + " overlaps router_logits " + router_logits.shape.str());
  }
  detail::balance_scratch own;
  std::vector<float>& grad = detail::balance_scratch::for_size(static_cast<std::size_t>(router_logits.numel()), own).grad;
  const double aux = detail::balance_loss_impl(pb, router_logits, &grad);
  for (std::size_t i = 0; i < grad.size(); ++i) {
    const float add = coefficient * grad[i];
    d_logits.data[i] = mode == gradient_write::accumulate
                           ? detail::from_float<Scalar>(detail::to_float(d_logits.data[i]) + add)
                           : detail::from_float<Scalar>(add);
  }
  return static_cast<float>(aux);
}

//! Same as above for a view of non-const logits.
template <class Spec, InputScalar Scalar>
float balance_loss(const tensor_view<Scalar>& router_logits, const tensor_view<Scalar>& d_logits, float coefficient = 1.f,
                   gradient_write mode = gradient_write::overwrite, const options& opt = {}) {
  return balance_loss<Spec>(tensor_view<const Scalar>(router_logits), d_logits, coefficient, mode, opt);
}

}  // namespace linstate
