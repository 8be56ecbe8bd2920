// linstate/concepts.hpp — what a policy must provide to fill a slot, and the cross-slot rules.
#pragma once

#include <concepts>
#include <type_traits>

#include "detail/kinds.hpp"

namespace linstate {

//! A decay (transition) policy: its kind, the rank of its gate tensor, whether it takes β.
template <class D>
concept Decay = requires {
  { D::kind } -> std::convertible_to<detail::decay_kind>;
  { D::gate_rank } -> std::convertible_to<int>;
  { D::uses_beta } -> std::convertible_to<bool>;
  { D::l2norm_qk } -> std::convertible_to<bool>;
};

//! A router policy: dense or top-k.
template <class R>
concept Router = requires {
  { R::kind } -> std::convertible_to<detail::router_kind>;
};

//! A partition policy: how many routed states, and whether a shared one exists.
template <class P>
concept Partition = requires {
  { P::num_routed } -> std::convertible_to<int>;
  { P::has_shared } -> std::convertible_to<bool>;
  { P::is_single } -> std::convertible_to<bool>;
};

//! A state policy: the accumulator type of one K×V state.
template <class S>
concept State = requires { typename S::accumulator; };

//! A complete variant: four slots that each model their concept.
template <class V>
concept Variant = requires {
  typename V::state;
  typename V::decay;
  typename V::router;
  typename V::partition;
} && State<typename V::state> && Decay<typename V::decay> && Router<typename V::router> &&
                  Partition<typename V::partition>;

namespace detail {

template <class R>
constexpr int router_writers() {
  if constexpr (R::kind == router_kind::top_k) return R::num_writer;
  else return 0;
}
template <class R>
constexpr int router_readers() {
  if constexpr (R::kind == router_kind::top_k) return R::num_reader;
  else return 0;
}

//! Cross-slot rules. Instantiated once at the API boundary (forward, forward_in_place), before any
//! backend code, so a wrong variant gives one readable message instead of a template wall.
template <class Spec>
constexpr bool validate() {
  static_assert(requires {
    typename Spec::state;
    typename Spec::decay;
    typename Spec::router;
    typename Spec::partition;
  }, "linstate: a variant needs the four slots state, decay, router and partition; derive it from linstate::spec<> "
     "and override slots with `using decay = ...;`");
  if constexpr (requires { typename Spec::decay; typename Spec::router; typename Spec::partition; typename Spec::state; }) {
    static_assert(Decay<typename Spec::decay>,
                  "linstate: the decay slot does not model linstate::Decay (it needs static constexpr kind, gate_rank, "
                  "uses_beta, l2norm_qk); see docs/adding_a_variant.md");
    static_assert(Router<typename Spec::router>,
                  "linstate: the router slot does not model linstate::Router (use router::dense or router::top_k<k>)");
    static_assert(Partition<typename Spec::partition>,
                  "linstate: the partition slot does not model linstate::Partition (use partition::single or "
                  "partition::routed<N[, partition::shared]>)");
    static_assert(State<typename Spec::state>, "linstate: the state slot does not model linstate::State (use state::dense<float>)");
  }
  if constexpr (Variant<Spec>) {
    using R = typename Spec::router;
    using P = typename Spec::partition;
    using D = typename Spec::decay;
    static_assert(D::kind != decay_kind::none || D::gate_rank == 0,
                  "linstate: a decay policy of kind none takes no gate: set gate_rank = 0");
    static_assert(D::kind != decay_kind::diagonal || D::gate_rank == 2,
                  "linstate: a decay policy of kind diagonal takes a [B,T,HV,K] gate: set gate_rank = 2");
    static_assert((D::kind != decay_kind::scalar && D::kind != decay_kind::delta) || D::gate_rank == 1,
                  "linstate: a decay policy of kind scalar or delta takes a [B,T,HV] gate: set gate_rank = 1");
    static_assert(D::uses_beta == (D::kind == decay_kind::delta),
                  "linstate: exactly the delta-rule decay kind takes beta: set uses_beta = (kind == delta)");
    static_assert(!D::l2norm_qk || D::kind == decay_kind::delta,
                  "linstate: l2norm_qk is an option of the delta rule only; set l2norm_qk = false");
    static_assert(!(R::kind == router_kind::top_k && P::is_single),
                  "linstate: router::top_k selects partitions per token, but partition::single has one state; "
                  "use partition::routed<N> (N >= the router's k), or router::dense");
    if constexpr (R::kind == router_kind::top_k && !P::is_single && P::num_routed != dynamic) {
      static_assert(router_writers<R>() == dynamic || router_writers<R>() <= P::num_routed,
                    "linstate: router::top_k<kw, kr> writes more partitions per token (kw) than "
                    "partition::routed<N> has (N); use N >= kw or a smaller kw");
      static_assert(router_readers<R>() == dynamic || router_readers<R>() <= P::num_routed,
                    "linstate: router::top_k<kw, kr> reads more partitions per token (kr) than "
                    "partition::routed<N> has (N); use N >= kr or a smaller kr");
    }
  }
  return true;
}

}  // namespace detail
}  // namespace linstate
