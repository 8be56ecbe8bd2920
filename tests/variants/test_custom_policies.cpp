// SPDX-License-Identifier: Apache-2.0
//! \file tests/variants/test_custom_policies.cpp
//! \brief The user-written policies of examples/custom/policies.hpp (a per-value-channel decay, Kimi
//! Delta Attention, a sigmoid top-k router with a selection bias), checked exactly as the example
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
