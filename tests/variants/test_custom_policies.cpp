// SPDX-License-Identifier: Apache-2.0
//! \file tests/variants/test_custom_policies.cpp
//! \brief The user-written policies of examples/custom/policies.hpp (a per-value-channel decay, Kimi
//! Delta Attention, a fractional delta rule, a sigmoid top-k router with a selection bias), checked exactly as the example
//! program examples/custom/custom.cpp checks them (examples/custom/check_custom.hpp), so that the
//! sanitizer build (which leaves the examples out) sees them too: forward and backward, mask and
//! varlen, B = 2 and packed cu_seqlens with an empty sequence, against the fp64 reference and fp64
//! finite differences (linstate::testing::check_gradients, tolerances in linstate/testing/gradcheck.hpp),
//! and against the shipped scalar decay / gated delta rule where the policies reduce to them.
#include <doctest/doctest.h>

#include "../../examples/custom/check_custom.hpp"

namespace {
const linstate::testing::cpu_runner cpu{};

//! A per-value decay whose adjoint forgets the decay factor of ∂g (a local class may not have member
//! templates, hence here).
struct broken : custom::per_value_decay {
  template <class T, class C>
  LINSTATE_HOST_DEVICE static T step_adjoint(const linstate::token<T>& x, linstate::index_t j, T v,
                                             linstate::column<C> prev, linstate::column<T> ds,
                                             linstate::token_grad<T>& d) {
    const T dg_before = d.dg[j];
    const T dv = custom::per_value_decay::step_adjoint(x, j, v, prev, ds, d);
    d.dg[j] = dg_before + (d.dg[j] - dg_before) / linstate::math::exp(x.g[j]);
    return dv;
  }
};
struct broken_variant : linstate::spec<> { using decay = broken; };

//! A fractional delta rule whose write_strength_backward is the shipped β·w's (what the delta-family
//! backward kernels hard-coded before write_strength_backward existed): ∂β and ∂w are wrong.
struct frac_wrong_adjoint : linstate::delta_transition<true, frac_wrong_adjoint> {
  static constexpr const char* name = "decay::fractional_delta with the shipped adjoint";
  template <class T>
  LINSTATE_HOST_DEVICE static T write_strength(T beta, T w) {
    return custom::fractional_delta<true>::write_strength(beta, w);
  }
  template <class T>
  LINSTATE_HOST_DEVICE static void write_strength_backward(T beta, T w, T db, T& dbeta, T& dw) {
    dbeta = w * db, dw = beta * db;
  }
};
struct frac_wrong_variant : custom_check::sse_frac { using decay = frac_wrong_adjoint; };
}  // namespace

TEST_CASE("custom policy: per-value-channel decay (family::recurrent_only, gate [B,T,HV,V])") {
  const auto o = custom_check::check_per_value_decay(cpu);
  CHECK(o.checks >= 4);
  CHECK_MESSAGE(o.failures == 0, o.log);
}

TEST_CASE("custom policy: Kimi Delta Attention, with and without l2 normalisation") {
  const auto o = custom_check::check_kda(cpu);
  CHECK(o.checks >= 6);
  CHECK_MESSAGE(o.failures == 0, o.log);
}

TEST_CASE("custom policy: fractional delta rule (family::delta with its own write strength; chunked WY kernels)") {
  const auto o = custom_check::check_fractional_delta(cpu);
  CHECK(o.checks >= 7);
  CHECK_MESSAGE(o.failures == 0, o.log);
}

TEST_CASE("linstate::testing::check_gradients reports a wrong write_strength_backward") {
  // the write strength enters β's gradient and, through the write weight, the router logits'
  namespace lt = linstate::testing;
  const auto data = lt::random_inputs<frac_wrong_variant>({.B = 1, .T = 12, .H = 1, .HV = 2, .K = 4, .V = 3}, 9);
  using run = lt::run<linstate::chunked<16>, linstate::varlen>;
  const auto rep = lt::check_gradients<frac_wrong_variant, run>(data.view(), {}, {.samples = 3});
  INFO(rep.str());
  CHECK_FALSE(rep.ok());
  for (const auto& t : rep.tensors)
    if (t.name == "beta" || t.name == "router_logits") CHECK_FALSE(t.ok);
}

TEST_CASE("custom policy: sigmoid top-k router with a selection bias, over GLA (recurrent and chunked<16>)") {
  const auto o = custom_check::check_sigmoid_router(cpu);
  CHECK(o.checks >= 7);
  CHECK_MESSAGE(o.failures == 0, o.log);
}

TEST_CASE("custom policies combined: the sigmoid router over KDA (the write weight scales beta)") {
  const auto o = custom_check::check_router_with_kda(cpu);
  CHECK(o.checks >= 4);
  CHECK_MESSAGE(o.failures == 0, o.log);
}

TEST_CASE("linstate::testing::check_gradients reports a wrong adjoint") {
  // the report must name g, and only g
  namespace lt = linstate::testing;
  const auto data = lt::random_inputs<broken_variant>({.B = 1, .T = 9, .H = 1, .HV = 1, .K = 4, .V = 3}, 7);
  using run = lt::run<linstate::recurrent, linstate::varlen>;
  const auto rep = lt::check_gradients<broken_variant, run>(data.view(), {}, {.samples = 2});
  CHECK_FALSE(rep.ok());
  for (const auto& t : rep.tensors) {
    INFO(rep.str());
    CHECK(t.ok == (t.name != "g"));
  }
}
