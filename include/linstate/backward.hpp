// linstate/backward.hpp — the backward pass: gradients of a scalar loss with respect to every input,
// for every variant, algorithm and strategy, from ∂L/∂o and optionally ∂L/∂(final state).
#pragma once

#include <string>
#include <type_traits>

#include "backend/cpu/backward_driver.hpp"
#include "forward.hpp"

namespace linstate {

namespace detail {

template <class Scalar, class In>
void check_gradient(const std::string& api, const char* name, const tensor_view<Scalar>& grad, const tensor_view<In>& input) {
  if (grad.empty()) return;
  if (input.empty()) fail(api, std::string("gradient ") + name + " was requested but the input " + name + " was not given");
  if (!(grad.shape == input.shape))
    fail(api, std::string("gradient ") + name + " has shape " + grad.shape.str() + " but the input has shape " +
                  input.shape.str());
}

template <class Scalar>
void check_gradients(const std::string& api, const problem& pb, const inputs<Scalar>& in, const cotangents<Scalar>& d,
                     const gradients<Scalar>& g) {
  require_shape(api, "cotangents.o", d.o, {pb.B, pb.T, pb.HV, pb.V}, "(dO, like o: [B,T,HV,V])");
  if (!d.final_state.empty() && !(d.final_state.shape == pb.state_shape()))
    fail(api, "cotangents.final_state has shape " + d.final_state.shape.str() + " but must be [S,P,HV,K,V] = " +
                  pb.state_shape().str());
  check_gradient(api, "q", g.q, in.q), check_gradient(api, "k", g.k, in.k), check_gradient(api, "v", g.v, in.v);
  check_gradient(api, "g", g.g, in.g), check_gradient(api, "beta", g.beta, in.beta);
  check_gradient(api, "shared.q", g.shared.q, in.shared.q), check_gradient(api, "shared.k", g.shared.k, in.shared.k);
  check_gradient(api, "shared.g", g.shared.g, in.shared.g);
  check_gradient(api, "shared.beta", g.shared.beta, in.shared.beta);
  check_gradient(api, "router_logits", g.router_logits, in.router_logits);
  if (!g.initial_state.empty() && !(g.initial_state.shape == pb.state_shape()))
    fail(api, "gradient initial_state has shape " + g.initial_state.shape.str() + " but must be [S,P,HV,K,V] = " +
                  pb.state_shape().str());
  // no gradient may alias an input, the cotangents or another gradient (a fixed table: this runs on
  // every training step, and builds no string unless it fails)
  struct named_span {
    const char* name;
    const void* data;
    std::size_t bytes;
  };
  named_span all[24];
  std::size_t n = 0;
  auto add = [&](const char* name, const auto& t) {
    using T = std::remove_cvref_t<decltype(*t.data)>;
    if (!t.empty()) all[n++] = {name, t.data, static_cast<std::size_t>(t.numel()) * sizeof(T)};
  };
  add("gradient q", g.q), add("gradient k", g.k), add("gradient v", g.v), add("gradient g", g.g);
  add("gradient beta", g.beta), add("gradient shared.q", g.shared.q), add("gradient shared.k", g.shared.k);
  add("gradient shared.g", g.shared.g), add("gradient shared.beta", g.shared.beta);
  add("gradient router_logits", g.router_logits), add("gradient initial_state", g.initial_state);
  const std::size_t n_out = n;
  add("q", in.q), add("k", in.k), add("v", in.v), add("g", in.g), add("beta", in.beta), add("shared.q", in.shared.q);
  add("shared.k", in.shared.k), add("shared.g", in.shared.g), add("shared.beta", in.shared.beta);
  add("router_logits", in.router_logits), add("initial_state", in.initial_state), add("cotangents.o", d.o);
  add("cotangents.final_state", d.final_state);
  for (std::size_t i = 0; i < n_out; ++i)
    for (std::size_t j = 0; j < n; ++j)
      if (i != j && overlaps(all[i].data, all[i].bytes, all[j].data, all[j].bytes))
        fail(api, std::string(all[i].name) + " overlaps " + all[j].name);
}

}  // namespace detail

namespace detail {
template <class Spec, class Algorithm, class Strategy, class Scalar>
void backward_cpu(const cpu& be, const inputs<Scalar>& in, const cotangents<Scalar>& d, const gradients<Scalar>& grads,
                  const options& opt, const saved_states* saved) {
  static_assert(validate_call<Spec, Algorithm, Strategy>());
  static const std::string api = "linstate::backward";  // static: a training step builds no string
  const auto pb = make_problem<Spec>(api, in, tensor_view<Scalar>{}, tensor_view<float>{}, "final_state", opt, false);
  check_gradients(api, pb, in, d, grads);
  const index_t chunk = cpu_chunk<Algorithm, typename Spec::decay>(pb, /*training=*/true);
  const float* kept = saved ? saved_states_access::check(api, *saved, saved_states_access::tag<Spec>(), pb, in, chunk) : nullptr;
  cpu_detail::run_backward<typename Spec::decay>(be, pb, in, d, grads, chunk, gathers<Strategy>(), kept ? saved : nullptr);
}
}  // namespace detail

//! \brief Backward pass of variant `Spec`: writes ∂L/∂(input) into every non-empty view of `grads`,
//! given ∂L/∂o (`d.o`) and optionally ∂L/∂(final state) (`d.final_state`).
//!
//! It recomputes what it needs from `in` (the same inputs as the forward call), keeping only one
//! state per chunk of every (sequence, head, partition): memory does not grow with T beyond the
//! inputs, gradients and those per-chunk states (the overload below takes them from the forward
//! instead). The router's gradient flows through the write and the read gates only (SPEC §4.6); it is
//! exactly zero when both gate uses are off.
//! \code
//! linstate::backward<sse_n4k1s>(linstate::cpu{}, in, {.o = dO.view()},
//!                               {.q = dq.view(), .k = dk.view(), .v = dv.view(), .g = dg.view(),
//!                                .shared = {dq1.view(), dk1.view(), dg1.view()},
//!                                .router_logits = deta.view(), .initial_state = dh0.view()});
//! \endcode
template <class Spec, class Algorithm = automatic, class Strategy = varlen, InputScalar Scalar>
void backward(const cpu& be, const inputs<Scalar>& in, const cotangents<Scalar>& d, const gradients<Scalar>& grads,
              Algorithm = {}, Strategy = {}, const options& opt = {}) {
  detail::backward_cpu<Spec, Algorithm, Strategy>(be, in, d, grads, opt, nullptr);
}

//! \brief Backward pass that reads the chunk states `saved` kept by linstate::forward(…, saved, …) on the
//! same inputs, instead of recomputing them: the same gradients, bit for bit, in less time (GLA on the
//! CPU: the backward without its first pass over the chunks). An empty `saved` (a forward call that keeps
//! nothing) recomputes them as the overload above; one filled by another call throws linstate::error.
//! \code
//! linstate::saved_states saved;
//! linstate::forward<gla>(linstate::cpu{}, in, out, saved, linstate::chunked<64>{});
//! linstate::backward<gla>(linstate::cpu{}, in, {.o = dO.view()}, grads, saved, linstate::chunked<64>{});
//! \endcode
template <class Spec, class Algorithm = automatic, class Strategy = varlen, InputScalar Scalar>
void backward(const cpu& be, const inputs<Scalar>& in, const cotangents<Scalar>& d, const gradients<Scalar>& grads,
              const saved_states& saved, Algorithm = {}, Strategy = {}, const options& opt = {}) {
  detail::backward_cpu<Spec, Algorithm, Strategy>(be, in, d, grads, opt, &saved);
}

//! \brief Convenience overload: allocates a gradient for every input that was given and returns them.
template <class Spec, class Algorithm = automatic, class Strategy = varlen, InputScalar Scalar>
gradient_result<Scalar> backward(const cpu& be, const inputs<Scalar>& in, const cotangents<Scalar>& d, Algorithm a = {},
                                 Strategy s = {}, const options& opt = {}) {
  gradient_result<Scalar> r;
  auto like = [](const auto& input) {
    using T = std::remove_cvref_t<decltype(*input.data)>;
    return input.empty() ? tensor<T>() : tensor<T>(input.shape);
  };
  r.q = like(in.q), r.k = like(in.k), r.v = like(in.v), r.g = like(in.g), r.beta = like(in.beta);
  r.shared.q = like(in.shared.q), r.shared.k = like(in.shared.k), r.shared.g = like(in.shared.g);
  r.shared.beta = like(in.shared.beta), r.router_logits = like(in.router_logits);
  r.initial_state = tensor<float>(state_shape<Spec>(in, opt));
  auto view = [](auto& t) { return t.empty() ? decltype(t.view()){} : t.view(); };
  gradients<Scalar> g{view(r.q), view(r.k), view(r.v), view(r.g), view(r.beta),
                      {view(r.shared.q), view(r.shared.k), view(r.shared.g), view(r.shared.beta)},
                      view(r.router_logits), view(r.initial_state)};
  backward<Spec>(be, in, d, g, a, s, opt);
  return r;
}

//! Any other backend: its header was not included (linstate::cuda: <linstate/cuda.cuh>, whose
//! backward() is more specialised than this one and wins).
template <class Spec, class Backend, class... Args>
  requires(!std::is_same_v<std::remove_cvref_t<Backend>, cpu>)
void backward(const Backend&, Args&&...) {
  static_assert(detail::dependent_false<Backend>,
                "linstate: no backward() for this backend value; for linstate::cuda include <linstate/cuda.cuh> "
                "from a .cu translation unit");
}

}  // namespace linstate
