// linstate/forward.hpp — the forward pass: one entry point for every variant, backend, algorithm
// and strategy.
#pragma once

#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "algorithm.hpp"
#include "backend/cpu/driver.hpp"
#include "backend/tags.hpp"
#include "concepts.hpp"
#include "detail/numeric.hpp"
#include "detail/problem.hpp"
#include "detail/saved_states.hpp"
#include "io_types.hpp"
#include "saved_states.hpp"

namespace linstate {

namespace detail {

template <class T>
inline constexpr bool dependent_false = false;

template <class Spec, class Algorithm, class Strategy>
constexpr bool validate_call() {
  static_assert(validate<Spec>());
  static_assert(is_algorithm_v<Algorithm>,
                "linstate: the algorithm argument must be linstate::recurrent{}, linstate::chunked<C>{} or "
                "linstate::automatic{}");
  static_assert(is_strategy_v<Strategy>, "linstate: the strategy argument must be linstate::mask{} or linstate::varlen{}");
  if constexpr (Variant<Spec> && requires { Algorithm::chunk_size; }) {
    using D = typename Spec::decay;
    static_assert(!is_family_of<D, family::recurrent_only>,
                  "linstate: chunked<C> needs a chunk-parallel family (diagonal or delta), but the decay policy is "
                  "family::recurrent_only; run it with linstate::recurrent{} or linstate::automatic{} (which runs it "
                  "recurrently), or give the policy a chunk-parallel family");
  }
  return true;
}

//! What linstate::automatic runs on the CPU (docs/design.md §6; measured on the Zen 3 VM
//! of issue 13, docs/benchmarks.md "Issue 13, session 18"):
//! - a forward call alone (prefill, decode, inference): chunks of cpu_auto_chunk = 24 steps, or the recurrence
//!   when no sequence is longer than cpu_auto_recurrent_upto(pb, D): 16 tokens for one partition of the
//!   diagonal family, 7 for the delta family, 48 with routed partitions (whose streams are shorter than the
//!   sequence). Chunks of 24 took 0.85–0.92 of the time of chunks of 64 (GLA and GDN prefill, K = V = 64, 128
//!   and 256, SSE n4k1s; 1 and 2 threads): fewer intra-chunk products (C·(K+V)/2 per token) and no partial
//!   register tile (24 = 4 × 6 rows); chunks that are not a multiple of 8 steps are much slower (×1.15–1.26).
//! - a training step (a forward that keeps its chunk states, linstate::saved_states, and every backward):
//!   chunks of cpu_auto_train_chunk = 64, or the recurrence up to 64 tokens, as before: chunks of 24 made the
//!   GLA training step ×1.03–1.06 slower and keep 64/24 × the states.
//! A decode step (T = 1) always runs the recurrence.
inline constexpr index_t cpu_auto_chunk = 24;
inline constexpr index_t cpu_auto_train_chunk = 64;
template <class D>
index_t cpu_auto_recurrent_upto(const problem& pb, bool training) {
  if (training) return cpu_auto_train_chunk;  // one training chunk or less
  if (pb.routed) return 48;
  return is_family_of<D, family::delta> ? 7 : 16;
}

//! Chunk size the CPU backend uses for `Algorithm` and decay `D` (0 = recurrent); `training`: the call is a
//! forward that keeps its chunk states for the backward, or the backward (see cpu_auto_chunk).
template <class Algorithm, class D>
index_t cpu_chunk(const problem& pb, bool training = false) {
  if constexpr (std::is_same_v<Algorithm, recurrent> || is_family_of<D, family::recurrent_only>) return 0;
  else if constexpr (std::is_same_v<Algorithm, automatic>) {
    index_t longest = 0;
    for (std::size_t s = 0; s + 1 < pb.seq.size(); ++s) longest = std::max(longest, pb.seq[s + 1] - pb.seq[s]);
    if (longest <= cpu_auto_recurrent_upto<D>(pb, training)) return 0;
    return training ? cpu_auto_train_chunk : cpu_auto_chunk;
  } else return Algorithm::chunk_size;
}

//! Whether the SSE strategy gathers tokens (varlen); false for a non-strategy, whose misuse has
//! already been reported by validate_call's static_assert.
template <class Strategy>
constexpr bool gathers() {
  if constexpr (is_strategy_v<Strategy>) return Strategy::gather;
  else return false;
}

inline bool overlaps(const void* a, std::size_t na, const void* b, std::size_t nb) {
  const auto* pa = static_cast<const unsigned char*>(a);
  const auto* pb = static_cast<const unsigned char*>(b);
  return na && nb && pa < pb + nb && pb < pa + na;
}

template <class Scalar>
void check_no_alias(const std::string& api, const inputs<Scalar>& in, const outputs<Scalar>& out, const char* state_name) {
  const std::size_t no = static_cast<std::size_t>(out.o.numel()) * sizeof(Scalar);
  const std::size_t ns = static_cast<std::size_t>(out.final_state.numel()) * sizeof(float);
  const std::size_t ni = static_cast<std::size_t>(in.initial_state.numel()) * sizeof(float);
  // messages are formatted only on failure: this runs on every decode step
  auto st = [&] { return std::string(state_name) + " " + out.final_state.shape.str(); };
  auto o = [&] { return "o " + out.o.shape.str(); };
  if (overlaps(out.final_state.data, ns, in.initial_state.data, ni))
    fail(api, st() + " overlaps initial_state " + in.initial_state.shape.str() +
                  "; to update a state in place use linstate::forward_in_place");
  if (overlaps(out.o.data, no, out.final_state.data, ns)) fail(api, o() + " overlaps " + st());
  if (overlaps(out.o.data, no, in.initial_state.data, ni)) fail(api, o() + " overlaps initial_state " + in.initial_state.shape.str());
  const std::pair<const char*, const tensor_view<const Scalar>*> named[] = {
      {"q", &in.q}, {"k", &in.k}, {"v", &in.v}, {"g", &in.g}, {"beta", &in.beta}, {"shared.q", &in.shared.q},
      {"shared.k", &in.shared.k}, {"shared.g", &in.shared.g}, {"shared.beta", &in.shared.beta},
      {"router_logits", &in.router_logits}};
  {
    const std::size_t nr = static_cast<std::size_t>(in.router_params.numel()) * sizeof(float);
    auto rp = [&] { return "router_params " + in.router_params.shape.str(); };
    if (overlaps(out.o.data, no, in.router_params.data, nr)) fail(api, o() + " overlaps the input " + rp());
    if (overlaps(out.final_state.data, ns, in.router_params.data, nr)) fail(api, st() + " overlaps the input " + rp());
  }
  for (const auto& [name, t] : named) {
    const std::size_t nt = static_cast<std::size_t>(t->numel()) * sizeof(Scalar);
    auto what = [&] { return std::string(name) + " " + t->shape.str(); };
    if (overlaps(out.o.data, no, t->data, nt)) fail(api, o() + " overlaps the input " + what());
    if (overlaps(out.final_state.data, ns, t->data, nt)) fail(api, st() + " overlaps the input " + what());
  }
}

}  // namespace detail

namespace detail {
template <class Spec, class Algorithm, class Strategy, class Scalar>
void forward_cpu(const cpu& be, const inputs<Scalar>& in, const outputs<Scalar>& out, const options& opt, saved_states* keep) {
  static_assert(validate_call<Spec, Algorithm, Strategy>());
  static const std::string api = "linstate::forward";
  const auto pb = make_problem<Spec>(api, in, out.o, out.final_state, "final_state", opt);
  check_no_alias(api, in, out, "final_state");
  std::vector<float> scratch_state;
  float* state = out.final_state.data;
  if (!state) {
    scratch_state.resize(static_cast<std::size_t>(pb.state_numel()));
    state = scratch_state.data();
  }
  // (copy_n, not memcpy: with B = 0 both pointers may be null, and there is nothing to copy)
  if (in.initial_state.empty()) std::fill(state, state + pb.state_numel(), 0.f);
  else std::copy_n(in.initial_state.data, pb.state_numel(), state);
  cpu_detail::run<typename Spec::decay>(be, pb, in, state, out.o.data, cpu_chunk<Algorithm, typename Spec::decay>(pb, keep != nullptr),
                                        gathers<Strategy>(), keep, saved_states_access::tag<Spec>());
}
}  // namespace detail

//! \brief Forward pass of variant `Spec` on backend `be`.
//!
//! Reads `in` (never modified; `in.initial_state` is only read), writes `out.o` `[B,T,HV,V]` and, when
//! given, `out.final_state` `[S,P,HV,K,V]` (fp32). On bad input it throws linstate::error before
//! writing anything.
//! \code
//! linstate::forward<gla>(linstate::cpu{}, in, out);                                   // backend picks
//! linstate::forward<sse_n4k1s>(linstate::cpu{}, in, out, linstate::chunked<64>{}, linstate::mask{});
//! \endcode
template <class Spec, class Algorithm = automatic, class Strategy = varlen, InputScalar Scalar>
void forward(const cpu& be, const inputs<Scalar>& in, const outputs<Scalar>& out, Algorithm = {}, Strategy = {},
             const options& opt = {}) {
  detail::forward_cpu<Spec, Algorithm, Strategy>(be, in, out, opt, nullptr);
}

//! \brief Forward pass of a training step that keeps, in `keep`, the state entering every chunk for the
//! backward of the same inputs (linstate::saved_states: which calls keep them, and their memory, HV·K·V·4 / C
//! bytes per token). Otherwise the same call as above; a call that keeps nothing leaves `keep` empty.
//! \code
//! linstate::saved_states saved;
//! linstate::forward<gla>(linstate::cpu{}, in, out, saved, linstate::chunked<64>{});
//! linstate::backward<gla>(linstate::cpu{}, in, {.o = dO.view()}, grads, saved, linstate::chunked<64>{});
//! \endcode
template <class Spec, class Algorithm = automatic, class Strategy = varlen, InputScalar Scalar>
void forward(const cpu& be, const inputs<Scalar>& in, const outputs<Scalar>& out, saved_states& keep, Algorithm = {},
             Strategy = {}, const options& opt = {}) {
  detail::forward_cpu<Spec, Algorithm, Strategy>(be, in, out, opt, &keep);
}

//! \brief Forward pass that updates `state` `[S,P,HV,K,V]` in place (it is the initial state on entry
//! and the final state on return). This is the decode API: with T = 1 and linstate::recurrent{} it
//! reads and writes only the shared partition and the selected partitions' states (SPEC §11 C8);
//! every other partition is not touched at all. `in.initial_state` must be empty.
template <class Spec, class Algorithm = automatic, class Strategy = varlen, InputScalar Scalar>
void forward_in_place(const cpu& be, const inputs<Scalar>& in, const tensor_view<float>& state,
                      const tensor_view<Scalar>& o, Algorithm = {}, Strategy = {}, const options& opt = {}) {
  static_assert(detail::validate_call<Spec, Algorithm, Strategy>());
  static const std::string api = "linstate::forward_in_place";  // static: a decode step allocates nothing
  if (!in.initial_state.empty())
    detail::fail(api, "in.initial_state must be empty: the state argument is both the initial and the final state");
  if (state.empty()) detail::fail(api, "state is required: [S,P,HV,K,V] fp32");
  const auto pb = detail::make_problem<Spec>(api, in, o, state, "state", opt);
  detail::check_no_alias(api, in, outputs<Scalar>{o, state}, "state");
  cpu_detail::run<typename Spec::decay>(be, pb, in, state.data, o.data, detail::cpu_chunk<Algorithm, typename Spec::decay>(pb),
                                        detail::gathers<Strategy>());
}

//! \brief The state shape `[S, P, HV, K, V]` variant `Spec` uses for these inputs (checks them too).
template <class Spec, InputScalar Scalar>
shape_t state_shape(const inputs<Scalar>& in, const options& opt = {}) {
  static_assert(detail::validate<Spec>());
  static const std::string api = "linstate::state_shape";  // static: a training step's call builds no string
  return detail::make_problem<Spec>(api, in, tensor_view<Scalar>{}, tensor_view<float>{}, "state", opt,
                                    /*o_given=*/false, /*host_data=*/false)
      .state_shape();
}

//! \brief Convenience overload: allocates and returns `o` and the final state.
template <class Spec, class Algorithm = automatic, class Strategy = varlen, InputScalar Scalar>
result<Scalar> forward(const cpu& be, const inputs<Scalar>& in, Algorithm a = {}, Strategy s = {},
                       const options& opt = {}) {
  static_assert(detail::validate_call<Spec, Algorithm, Strategy>());
  const detail::problem pb =
      detail::make_problem<Spec>("linstate::forward", in, tensor_view<Scalar>{}, tensor_view<float>{}, "final_state", opt,
                                 /*o_given=*/false);
  result<Scalar> r{tensor<Scalar>({pb.B, pb.T, pb.HV, pb.V}), tensor<float>(pb.state_shape())};
  forward<Spec>(be, in, outputs<Scalar>{r.o.view(), r.final_state.view()}, a, s, opt);
  return r;
}

//! Any other backend: its header was not included.
template <class Spec, class Backend, class... Args>
  requires(!std::is_same_v<std::remove_cvref_t<Backend>, cpu>)
void forward(const Backend&, Args&&...) {
  static_assert(detail::dependent_false<Backend>,
                "linstate: no forward() for this backend value; for linstate::cuda include <linstate/cuda.cuh> "
                "from a .cu translation unit");
}

}  // namespace linstate
