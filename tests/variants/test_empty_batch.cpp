// SPDX-License-Identifier: Apache-2.0
//! \file tests/variants/test_empty_batch.cpp
//! \brief An empty batch is a valid call (issue 10, part 5): T = 0, B = 0, and packed cu_seqlens whose
//! sequences are all empty. A zero-sized tensor (whose data pointer may be null: an empty std::vector)
//! is a given tensor, not an absent one (tensor_view::empty(), tensor.hpp).
//!
//! Covered, for GLA, the scalar decay, no decay, the gated delta rule, SSE (mask and varlen) and a
//! family::recurrent_only policy, for the recurrence, chunked<16> and automatic: forward (both
//! overloads) returns a zero-sized o of shape [B,T,HV,V] and the initial state bit for bit (zeros
//! without one); forward_in_place leaves the state as it is; backward returns zero-sized gradients of
//! the inputs' shapes and ∂L/∂h0 = ∂L/∂h_T bit for bit (zeros without it), as the fp64 reference does.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <linstate/linstate.hpp>
#include <linstate/reference/naive_backward.hpp>
#include <random>
#include <string>
#include <vector>

#include "random_inputs.hpp"

namespace {
namespace eb {

namespace dc = linstate::decay;
namespace pt = linstate::partition;
namespace rt = linstate::router;
using linstate::index_t;
using linstate::tensor;
using namespace linstate_test;

struct gla : linstate::spec<> {};
struct retention : gla { using decay = dc::scalar; };
struct linear_attn : gla { using decay = dc::none; };
struct gdn : gla { using decay = dc::gated_delta_rule<true>; };
struct sse_n4k1s : gla {
  using partition = pt::routed<4, pt::shared>;
  using router = rt::top_k<1>;
};
struct sse_gdn : sse_n4k1s { using decay = dc::gated_delta_rule<true>; };
//! decay::gated_key declared family::recurrent_only: the generic recurrence (backend/cpu/generic.hpp).
struct gated_key_generic : dc::gated_key {
  using family = linstate::family::recurrent_only;
  static constexpr const char* name = "test::gated_key (recurrent_only)";
};
struct gla_generic : gla { using decay = gated_key_generic; };

//! The empty shapes: T = 0 (B = 2), B = 0 (T = 5), B = T = 0, and two packed empty sequences.
struct empty_case {
  const char* name;
  index_t B, T;
  std::vector<std::int64_t> cu{};
};
const empty_case cases[] = {{"T = 0", 2, 0}, {"B = 0", 0, 5}, {"B = T = 0", 0, 0}, {"cu_seqlens {0, 0, 0}", 1, 0, {0, 0, 0}}};

template <class Spec>
random_inputs empty_inputs(const empty_case& c, bool h0) {
  auto cfg = config_for<Spec>({.B = c.B, .T = c.T, .H = 2, .HV = 4, .K = 8, .V = 6});
  cfg.initial_state = h0;
  cfg.cu_seqlens = c.cu;
  return random_inputs(cfg, 3);
}

tensor<float> normal(const linstate::shape_t& s, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> nd;
  tensor<float> t(s);
  for (float& x : t.values()) x = nd(gen);
  return t;
}

bool same_bits(const tensor<float>& a, const tensor<float>& b) {
  return a.shape() == b.shape() &&
         (a.numel() == 0 || std::memcmp(a.data(), b.data(), static_cast<std::size_t>(a.numel()) * sizeof(float)) == 0);
}

//! `state` is `want` bit for bit, or all zeros when `want` is absent.
void check_state(const tensor<float>& state, const tensor<float>& want, const linstate::shape_t& shape) {
  CHECK(state.shape() == shape);
  if (want.empty()) CHECK(max_abs(state) == 0.0);
  else CHECK(same_bits(state, want));
}

//! A zero-sized gradient of the input's shape (absent for an absent input).
template <class G, class In>
void check_zero_sized(const char* name, const G& grad, const In& input) {
  INFO("gradient: ", std::string(name));
  CHECK(grad.empty() == input.empty());
  if (!input.empty()) {
    CHECK(grad.shape() == input.shape());
    CHECK(grad.numel() == 0);
  }
}

template <class Spec, class Algorithm, class Strategy>
void check_one(const random_inputs& data, const std::string& what) {
  CAPTURE(what);
  const auto in = data.view();
  const linstate::shape_t o_shape = data.output_shape(), s_shape = data.state_shape();
  // forward, allocating overload
  const auto r = linstate::forward<Spec>(linstate::cpu{}, in, Algorithm{}, Strategy{});
  CHECK(r.o.shape() == o_shape);
  CHECK(r.o.numel() == 0);
  check_state(r.final_state, data.initial_state, s_shape);
  // forward into given outputs (zero-sized o; final state prefilled with NaN)
  tensor<float> o(o_shape), st(s_shape);
  st.values().assign(static_cast<std::size_t>(st.numel()), std::numeric_limits<float>::quiet_NaN());
  linstate::forward<Spec>(linstate::cpu{}, in, linstate::outputs<float>{o.view(), st.view()}, Algorithm{}, Strategy{});
  check_state(st, data.initial_state, s_shape);
  // in place: nothing to do
  tensor<float> state = data.initial_state.empty() ? tensor<float>(s_shape) : data.initial_state;
  const tensor<float> before = state;
  linstate::forward_in_place<Spec>(linstate::cpu{}, data.view(false), state.view(), o.view(), Algorithm{}, Strategy{});
  CHECK(same_bits(state, before));
  // backward, with and without ∂L/∂h_T
  const tensor<float> dO(o_shape), dht = normal(s_shape, 7);
  for (bool with_dht : {true, false}) {
    CAPTURE(with_dht);
    linstate::cotangents<float> d{.o = dO.view()};
    if (with_dht) d.final_state = dht.view();
    const auto g = linstate::backward<Spec>(linstate::cpu{}, in, d, Algorithm{}, Strategy{});
    check_zero_sized("dq", g.q, data.q), check_zero_sized("dk", g.k, data.k), check_zero_sized("dv", g.v, data.v);
    check_zero_sized("dg", g.g, data.g), check_zero_sized("dbeta", g.beta, data.beta);
    check_zero_sized("shared.dq", g.shared.q, data.shared_q), check_zero_sized("shared.dk", g.shared.k, data.shared_k);
    check_zero_sized("shared.dg", g.shared.g, data.shared_g);
    check_zero_sized("shared.dbeta", g.shared.beta, data.shared_beta);
    check_zero_sized("dlogits", g.router_logits, data.router_logits);
    check_state(g.initial_state, with_dht ? dht : tensor<float>{}, s_shape);
    const auto gref = linstate::reference::backward<Spec>(in, d);
    CHECK(max_abs_diff(g.initial_state, gref.initial_state) == 0.0);
  }
  const auto ref = linstate::reference::forward<Spec>(in);
  CHECK(max_abs_diff(r.o, ref.o) == 0.0);
  CHECK(max_abs_diff(r.final_state, ref.final_state) == 0.0);
}

//! Every empty shape, with and without an initial state, for the given algorithms and strategy.
template <class Spec, class Strategy = linstate::varlen>
void check_all(const char* name) {
  for (const empty_case& c : cases)
    for (bool h0 : {true, false}) {
      const random_inputs data = empty_inputs<Spec>(c, h0);
      const std::string what = std::string(name) + ", " + c.name + (h0 ? ", h0" : "");
      check_one<Spec, linstate::recurrent, Strategy>(data, what + ", recurrent");
      check_one<Spec, linstate::automatic, Strategy>(data, what + ", automatic");
      if constexpr (!linstate::is_family_of<typename Spec::decay, linstate::family::recurrent_only>)
        check_one<Spec, linstate::chunked<16>, Strategy>(data, what + ", chunked<16>");
    }
}

TEST_CASE("empty batch: a zero-sized view is given, an absent one is not") {
  const tensor<float> zero({2, 0, 3, 4});  // its data pointer may be null (an empty std::vector)
  CHECK_FALSE(zero.empty());
  CHECK_FALSE(zero.view().empty());
  CHECK(zero.view().numel() == 0);
  CHECK(tensor<float>{}.empty());
  CHECK(linstate::tensor_view<const float>{}.empty());
  CHECK(linstate::tensor_view<const float>(nullptr, {2, 3}).empty());  // no data for 6 elements: absent
  CHECK_FALSE(linstate::tensor_view<const float>(nullptr, {2, 0, 3, 4}).empty());  // zero-sized: given
  CHECK(linstate::tensor_view<const float>(nullptr, {2, 0, 3, 4}).numel() == 0);
}

TEST_CASE("empty batch: GLA, scalar decay, no decay, recurrent_only") {
  check_all<gla>("gla");
  check_all<retention>("scalar");
  check_all<linear_attn>("none");
  check_all<gla_generic>("recurrent_only");
}

TEST_CASE("empty batch: gated delta rule") { check_all<gdn>("gdn"); }

TEST_CASE("empty batch: SSE over GLA and over the delta rule, mask and varlen") {
  check_all<sse_n4k1s, linstate::varlen>("sse varlen");
  check_all<sse_n4k1s, linstate::mask>("sse mask");
  check_all<sse_gdn, linstate::varlen>("sse-gdn varlen");
  check_all<sse_gdn, linstate::mask>("sse-gdn mask");
}

TEST_CASE("empty batch: the issue's call, forward<gla>(cpu{}, in) with T = 0") {
  const tensor<float> q({1, 0, 1, 4}), v({1, 0, 1, 4}), g({1, 0, 1, 4});
  const linstate::inputs<float> in{.q = q.view(), .k = q.view(), .v = v.view(), .g = g.view()};
  const auto r = linstate::forward<gla>(linstate::cpu{}, in);
  CHECK(r.o.shape() == linstate::shape_t{1, 0, 1, 4});
  CHECK(r.final_state.shape() == linstate::shape_t{1, 1, 1, 4, 4});
  CHECK(max_abs(r.final_state) == 0.0);
}

}  // namespace eb
}  // namespace
