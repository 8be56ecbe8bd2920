// linstate/concepts.hpp — what a policy must provide to fill a slot, and the cross-slot rules.
//
// The concepts say what a policy is; detail::validate<Spec>() says, at the call, what is missing:
// one static_assert naming the first missing member and the fix (STYLE habit 7), never a template
// wall from inside a backend.
#pragma once

#include <concepts>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "dynamic.hpp"
#include "io_types.hpp"
#include "transition.hpp"

namespace linstate {

namespace detail {
//! A rounding functor that does nothing (for concept checks and for fp32 inputs).
struct no_round {
  template <class T>
  LINSTATE_HOST_DEVICE T operator()(T x) const {
    return x;
  }
};
}  // namespace detail

//! \brief A decay (transition) policy: its family, the gate it takes, whether it takes β, whether q
//! and k are l2-normalised, and the math of one state column, `step` and `step_adjoint`, callable
//! in float and in double (linstate/transition.hpp says what each means).
template <class D>
concept Decay = requires {
  typename D::family;
  { D::gate } -> std::convertible_to<gate_extent>;
  { D::uses_beta } -> std::convertible_to<bool>;
  { D::l2norm_qk } -> std::convertible_to<bool>;
  { D::name } -> std::convertible_to<const char*>;
} && is_family_v<typename D::family> &&
  requires(const token<float>& xf, const token<double>& xd, column<float> cf, column<double> cd,
           token_grad<float>& gf, token_grad<double>& gd, index_t j) {
    D::step(xf, j, 1.f, cf);
    D::step(xd, j, 1.0, cd);
    { D::step_adjoint(xf, j, 1.f, column<const float>{}, cf, gf) } -> std::convertible_to<float>;
    { D::step_adjoint(xd, j, 1.0, column<const double>{}, cd, gd) } -> std::convertible_to<double>;
  };

//! \brief A router policy. `routes = false` (router::dense): every partition sees every token with
//! weight 1. `routes = true`: per token, from the logits row (and the policy's own `router_params`),
//! the write and read sets and weights, their backward, and the scores the balance loss uses.
template <class R>
concept Router = requires {
  { R::routes } -> std::convertible_to<bool>;
  { R::name } -> std::convertible_to<const char*>;
} && (!R::routes || requires(const typename R::config& c, const float* xf, const double* xd, float* pf, double* pd,
                             std::uint8_t* fl, const std::uint8_t* cfl) {
        { R::num_writer } -> std::convertible_to<int>;
        { R::num_reader } -> std::convertible_to<int>;
        { R::params_per_partition } -> std::convertible_to<int>;
        { c.kw } -> std::convertible_to<int>;
        { c.kr } -> std::convertible_to<int>;
        R::route(c, 1, xf, xf, pf, pf, pf, fl, detail::no_round{});
        R::weights(c, 1, xd, xf, cfl, pd, pd, pd);
        R::weights_backward(c, 1, xf, xf, xf, cfl, xf, xf, pf, pf);
        R::weights_backward(c, 1, xd, xf, xd, cfl, xd, xd, pd, pd);
      });

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

//! The decay policy's family is `F`.
template <class D, class F>
inline constexpr bool is_family_of = std::is_same_v<typename D::family, F>;

namespace detail {

template <class T>
inline constexpr bool always_false = false;


//! One static_assert for the first member the decay policy lacks.
//! For family::delta: a policy defines write_strength and write_strength_backward together or
//! inherits both from delta_transition (compared by address: the inherited member is the base's).
template <class D>
constexpr bool delta_write_strength_pair_consistent() {
  constexpr bool L = D::l2norm_qk;
  auto inherited = [](auto base) {
    using Base = typename decltype(base)::type;
    if constexpr (std::is_base_of_v<Base, D>)
      return std::pair{&D::template write_strength<float> == &Base::template write_strength<float>,
                       &D::template write_strength_backward<float> == &Base::template write_strength_backward<float>};
    else
      return std::pair{false, false};
  };
  const auto [ws0, wb0] = inherited(std::type_identity<delta_transition<L, void>>{});
  const auto [ws1, wb1] = inherited(std::type_identity<delta_transition<L, D>>{});
  return (ws0 || ws1) == (wb0 || wb1);
}

template <class D>
constexpr bool validate_decay() {
  if constexpr (!requires { typename D::family; })
    static_assert(always_false<D>, "linstate: the decay policy has no `using family = ...;` (linstate::family::diagonal, "
                                   "family::delta or family::recurrent_only); see docs/adding_a_variant.md");
  else if constexpr (!is_family_v<typename D::family>)
    static_assert(always_false<D>, "linstate: the decay policy's `family` must be linstate::family::diagonal, "
                                   "family::delta or family::recurrent_only");
  else if constexpr (!requires { { D::gate } -> std::convertible_to<gate_extent>; })
    static_assert(always_false<D>, "linstate: the decay policy has no `static constexpr linstate::gate_extent gate` "
                                   "(none, head [B,T,HV], key [B,T,HV,K] or value [B,T,HV,V])");
  else if constexpr (!requires { { D::uses_beta } -> std::convertible_to<bool>; })
    static_assert(always_false<D>, "linstate: the decay policy has no `static constexpr bool uses_beta` (does it take beta [B,T,HV]?)");
  else if constexpr (!requires { { D::l2norm_qk } -> std::convertible_to<bool>; })
    static_assert(always_false<D>, "linstate: the decay policy has no `static constexpr bool l2norm_qk` (are q and k l2-normalised?)");
  else if constexpr (!requires { { D::name } -> std::convertible_to<const char*>; })
    static_assert(always_false<D>, "linstate: the decay policy has no `static constexpr const char* name` (\"decay::...\")");
  else if constexpr (!requires(const token<float>& x, column<float> s, index_t j) { D::step(x, j, 1.f, s); })
    static_assert(always_false<D>, "linstate: the decay policy has no `template <class T> static void step(const "
                                   "linstate::token<T>&, linstate::index_t j, T v, linstate::column<T> s)` callable with T = float");
  else if constexpr (!requires(const token<double>& x, column<double> s, index_t j) { D::step(x, j, 1.0, s); })
    static_assert(always_false<D>, "linstate: the decay policy's `step` is not callable with T = double (the fp64 "
                                   "reference evaluates it in double: make it a template on T)");
  else if constexpr (!requires(const token<float>& x, column<float> s, token_grad<float>& d, index_t j) {
                       { D::step_adjoint(x, j, 1.f, column<const float>{}, s, d) } -> std::convertible_to<float>;
                     })
    static_assert(always_false<D>, "linstate: the decay policy has no `step_adjoint(const token<T>&, index_t j, T v, "
                                   "column<const T> prev, column<T> ds, token_grad<T>& d) -> T` callable with T = float "
                                   "(the backward needs it; see docs/adding_a_variant.md)");
  else if constexpr (!requires(const token<double>& x, column<double> s, token_grad<double>& d, index_t j) {
                       { D::step_adjoint(x, j, 1.0, column<const double>{}, s, d) } -> std::convertible_to<double>;
                     })
    static_assert(always_false<D>, "linstate: the decay policy's `step_adjoint` is not callable with T = double "
                                   "(make it a template on T)");
  else if constexpr (is_family_of<D, family::diagonal>) {
    static_assert(D::gate != gate_extent::value,
                  "linstate: family::diagonal decays along the key rows (gate none, head or key); a per-value-channel "
                  "gate needs family::recurrent_only");
    static_assert(!D::uses_beta && !D::l2norm_qk,
                  "linstate: family::diagonal takes no beta and no l2 normalisation (that is family::delta); set "
                  "uses_beta = l2norm_qk = false or use family::recurrent_only");
    static_assert(requires(const float* g) { { D::log_decay(g, index_t{0}) } -> std::convertible_to<float>; },
                  "linstate: a family::diagonal policy needs `static T log_decay(const T* g, index_t row)` (derive from "
                  "linstate::diagonal_transition<E>)");
  } else if constexpr (is_family_of<D, family::delta>) {
    static_assert(D::gate == gate_extent::head && D::uses_beta,
                  "linstate: family::delta is the gated delta rule: gate = gate_extent::head and uses_beta = true "
                  "(derive from linstate::delta_transition<L2Norm>), or use family::recurrent_only");
    static_assert(requires(const float* g, float b) {
                    { D::log_decay(g, index_t{0}) } -> std::convertible_to<float>;
                    { D::write_strength(b, b) } -> std::convertible_to<float>;
                  },
                  "linstate: a family::delta policy needs `log_decay(const T* g, index_t)` and `write_strength(T beta, "
                  "T w)` (derive from linstate::delta_transition<L2Norm>)");
    constexpr bool has_backward = requires(float b, float& d) { D::write_strength_backward(b, b, b, d, d); } &&
                                  requires(double b, double& d) { D::write_strength_backward(b, b, b, d, d); };
    static_assert(has_backward,
                  "linstate: a family::delta policy needs `write_strength_backward(T beta, T w, T db, T& dbeta, T& dw)`, "
                  "the adjoint of its write_strength, callable with T = float and T = double (derive from "
                  "linstate::delta_transition<L2Norm>, or define it beside your write_strength)");
    // The pair is compared by function address, a constant expression in a plain build; GCC's
    // UBSan instrumentation makes it non-constant, and the check is then skipped (never a false alarm).
    if constexpr (has_backward)
      static_assert(!__builtin_constant_p(delta_write_strength_pair_consistent<D>()) ||
                        delta_write_strength_pair_consistent<D>(),
                    "linstate: this family::delta policy redefines one of write_strength / write_strength_backward and "
                    "inherits the other from delta_transition (b = beta*w): define both, and derive as "
                    "`struct mine : linstate::delta_transition<L2Norm, mine>` so that step / step_adjoint call them");
  }
  return true;
}

//! One static_assert for the first member the router policy lacks.
template <class R>
constexpr bool validate_router() {
  if constexpr (!requires { { R::routes } -> std::convertible_to<bool>; })
    static_assert(always_false<R>, "linstate: the router slot does not model linstate::Router: it has no `static "
                                   "constexpr bool routes` (false: every partition sees every token; true: the policy "
                                   "selects them); use router::dense or router::top_k<k>, or see docs/adding_a_variant.md");
  else if constexpr (!requires { { R::name } -> std::convertible_to<const char*>; })
    static_assert(always_false<R>, "linstate: the router policy has no `static constexpr const char* name` (\"router::...\")");
  else if constexpr (R::routes) {
    if constexpr (!requires { { R::num_writer } -> std::convertible_to<int>; { R::num_reader } -> std::convertible_to<int>; })
      static_assert(always_false<R>, "linstate: a routing router needs `static constexpr int num_writer, num_reader` "
                                     "(at most that many partitions per token, or linstate::dynamic)");
    else if constexpr (!requires { { R::params_per_partition } -> std::convertible_to<int>; })
      static_assert(always_false<R>, "linstate: a routing router needs `static constexpr int params_per_partition` "
                                     "(0: it takes no router_params)");
    else if constexpr (!requires { typename R::config; })
      static_assert(always_false<R>, "linstate: a routing router needs a `struct config { int kw, kr; ... };` (its "
                                     "resolved run-time settings)");
    else if constexpr (!requires(const typename R::config& c) { { c.kw } -> std::convertible_to<int>; { c.kr } -> std::convertible_to<int>; })
      static_assert(always_false<R>, "linstate: the router's config needs `int kw, kr` (partitions written / read per token at most)");
    else if constexpr (!requires(const options& o, const std::string& api) {
                         { R::configure(o, index_t{1}, api, false) } -> std::convertible_to<typename R::config>;
                       })
      static_assert(always_false<R>, "linstate: the router has no `template <class Opt> static config configure(const "
                                     "Opt& options, index_t N, const std::string& api, bool balance)` (host: resolves and "
                                     "checks its run-time settings, throws linstate::error naming the option)");
    else if constexpr (!requires(const float* x, float* p, std::uint8_t* f, const typename R::config& c) {
                         R::route(c, 1, x, x, p, p, p, f, no_round{});
                       })
      static_assert(always_false<R>, "linstate: the router has no `template <class T, class Round> static void route(const "
                                     "config&, int N, const T* logits, const float* params, T* scores, T* cw, T* cr, "
                                     "std::uint8_t* flags, Round)`");
    else if constexpr (!requires(const double* x, const float* prm, double* p, const std::uint8_t* f, const typename R::config& c) {
                         R::weights(c, 1, x, prm, f, p, p, p);
                       })
      static_assert(always_false<R>, "linstate: the router has no `template <class T> static void weights(const config&, "
                                     "int N, const T* logits, const float* params, const std::uint8_t* flags, T* scores, "
                                     "T* cw, T* cr)` callable with T = double (the fp64 reference needs it)");
    else if constexpr (!requires(const float* x, float* d, const std::uint8_t* f, const typename R::config& c) {
                         R::weights_backward(c, 1, x, x, x, f, x, x, d, d);
                       })
      static_assert(always_false<R>, "linstate: the router has no `template <class T, class P> static void weights_backward("
                                     "const config&, int N, const T* logits, const float* params, const P* scores, const "
                                     "std::uint8_t* flags, const T* dcw, const T* dcr, T* dlogits, T* work)`");
  }
  return true;
}

template <class R>
constexpr int router_writers() {
  if constexpr (R::routes) return R::num_writer;
  else return 0;
}
template <class R>
constexpr int router_readers() {
  if constexpr (R::routes) return R::num_reader;
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
    static_assert(validate_decay<typename Spec::decay>());
    static_assert(validate_router<typename Spec::router>());
    static_assert(Partition<typename Spec::partition>,
                  "linstate: the partition slot does not model linstate::Partition (use partition::single or "
                  "partition::routed<N[, partition::shared]>)");
    static_assert(State<typename Spec::state>, "linstate: the state slot does not model linstate::State (use state::dense<float>)");
  }
  if constexpr (Variant<Spec>) {
    using R = typename Spec::router;
    using P = typename Spec::partition;
    static_assert(!(R::routes && P::is_single),
                  "linstate: router::top_k selects partitions per token, but partition::single has one state (so does "
                  "every routing router); use partition::routed<N> (N >= the router's k), or router::dense");
    if constexpr (R::routes && !P::is_single && P::num_routed != dynamic) {
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
