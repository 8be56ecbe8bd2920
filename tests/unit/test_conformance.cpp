// SPDX-License-Identifier: Apache-2.0
// Static conformance (STYLE habit 8): every shipped policy models its concept and exposes the
// documented members; the documented variants are Variants and pass the cross-slot rules; a spec
// with a missing or wrong slot is not a Variant; describe<>() names the resolved slots.
// The checks are static_asserts (a violation stops the build of test_unit); the TEST_CASEs repeat
// the same facts at run time so they show up in the test report.
#include <doctest/doctest.h>

#include <linstate/linstate.hpp>
#include <string>
#include <type_traits>

namespace {

namespace dc = linstate::decay;
namespace pt = linstate::partition;
namespace rt = linstate::router;
namespace st = linstate::state;
using linstate::dynamic;
using linstate::gate_extent;
using linstate::is_family_of;
namespace fm = linstate::family;

// --- the variants of the docs (spec.hpp, linstate.hpp, SPEC §5) --------------------------------------
struct gla : linstate::spec<> {};
struct sse_n4k1s : gla {
  using partition = pt::routed<4, pt::shared>;
  using router = rt::top_k<1>;
};
struct sse_n8k2 : gla {
  using partition = pt::routed<8>;
  using router = rt::top_k<2>;
};
struct sse_delta : sse_n4k1s { using decay = dc::gated_delta_rule<true>; };
struct sse_dyn : gla {
  using partition = pt::routed<dynamic>;
  using router = rt::top_k<dynamic, dynamic, rt::top_k_options{.renormalize = true, .round_to_input = true}>;
};
struct sse_w2r1_read : sse_n4k1s { using router = rt::top_k<2, 1, rt::top_k_options{.gates = rt::gate::read}>; };
struct sse_plain : sse_n4k1s { using router = rt::top_k<1, 1, rt::top_k_options{.gates = rt::gate::none}>; };
struct sse_dyn_gates : sse_n8k2 { using router = rt::top_k<2, 2, rt::top_k_options{.dynamic_gates = true}>; };
struct retention : gla { using decay = dc::scalar; };
struct linear_attn : gla { using decay = dc::none; };

// --- specs that are not variants -----------------------------------------------------------------------
struct no_router {  // written by hand, one slot forgotten
  using state = st::dense<float>;
  using decay = dc::gated_key;
  using partition = pt::single;
};
struct empty_spec {};
struct decay_is_int : gla { using decay = int; };                  // a slot filled with a non-policy
struct router_is_partition : gla { using router = pt::routed<4>; };  // policies in the wrong slots
struct partition_is_router : gla { using partition = rt::dense; };
struct not_a_state {};
struct bad_state : gla { using state = not_a_state; };

// --- policies model their concepts --------------------------------------------------------------------
static_assert(linstate::Decay<dc::none> && linstate::Decay<dc::scalar> && linstate::Decay<dc::gated_key> &&
              linstate::Decay<dc::gated_delta_rule<>> && linstate::Decay<dc::gated_delta_rule<true>>);
static_assert(linstate::Router<rt::dense> && linstate::Router<rt::top_k<1>> && linstate::Router<rt::top_k<2, 3>> &&
              linstate::Router<rt::top_k<dynamic>> &&
              linstate::Router<rt::top_k<1, 1, rt::top_k_options{.gates = rt::gate::none, .renormalize = true}>>);
static_assert(linstate::Partition<pt::single> && linstate::Partition<pt::routed<1>> &&
              linstate::Partition<pt::routed<4, pt::shared>> && linstate::Partition<pt::routed<8, pt::no_shared>> &&
              linstate::Partition<pt::routed<dynamic, pt::shared>>);
static_assert(linstate::State<st::dense<float>> && linstate::State<st::dense<>>);
// ... and not each other's
static_assert(!linstate::Decay<rt::dense> && !linstate::Router<dc::gated_key> && !linstate::Partition<rt::top_k<1>> &&
              !linstate::State<pt::single> && !linstate::Decay<int>);

// --- the documented members (values the backends rely on) --------------------------------------------------
static_assert(is_family_of<dc::none, fm::diagonal> && dc::none::gate == gate_extent::none && !dc::none::uses_beta);
static_assert(is_family_of<dc::scalar, fm::diagonal> && dc::scalar::gate == gate_extent::head && !dc::scalar::uses_beta);
static_assert(is_family_of<dc::gated_key, fm::diagonal> && dc::gated_key::gate == gate_extent::key &&
              !dc::gated_key::uses_beta && !dc::gated_key::l2norm_qk);
static_assert(is_family_of<dc::gated_delta_rule<true>, fm::delta> && dc::gated_delta_rule<true>::gate == gate_extent::head &&
              dc::gated_delta_rule<true>::uses_beta && dc::gated_delta_rule<true>::l2norm_qk &&
              !dc::gated_delta_rule<false>::l2norm_qk);
static_assert(!rt::dense::routes && rt::top_k<2, 3>::routes);
static_assert(rt::top_k<2, 3>::num_writer == 2 && rt::top_k<2, 3>::num_reader == 3 && rt::top_k<2>::num_reader == 2);
static_assert(rt::top_k<1>::options.gates == rt::gate::both && !rt::top_k<1>::options.renormalize &&
              !rt::top_k<1>::options.round_to_input && !rt::top_k<1>::options.dynamic_gates);  // SPEC §11 C1 defaults
static_assert(pt::single::num_routed == 1 && pt::single::is_single && !pt::single::has_shared);
static_assert(pt::routed<4, pt::shared>::num_routed == 4 && pt::routed<4, pt::shared>::has_shared &&
              !pt::routed<4, pt::shared>::is_single && !pt::routed<4>::has_shared);
static_assert(std::is_same_v<st::dense<>::accumulator, float>);
static_assert(std::is_same_v<linstate::spec<>::state, st::dense<float>> && std::is_same_v<linstate::spec<>::decay, dc::gated_key> &&
              std::is_same_v<linstate::spec<>::router, rt::dense> && std::is_same_v<linstate::spec<>::partition, pt::single>);

// --- variants -------------------------------------------------------------------------------------------
static_assert(linstate::Variant<gla> && linstate::Variant<sse_n4k1s> && linstate::Variant<sse_n8k2> &&
              linstate::Variant<sse_delta> && linstate::Variant<sse_dyn> && linstate::Variant<sse_w2r1_read> &&
              linstate::Variant<sse_plain> && linstate::Variant<sse_dyn_gates> && linstate::Variant<retention> &&
              linstate::Variant<linear_attn> && linstate::Variant<linstate::spec<>>);
static_assert(linstate::detail::validate<gla>() && linstate::detail::validate<sse_n4k1s>() &&
              linstate::detail::validate<sse_n8k2>() && linstate::detail::validate<sse_delta>() &&
              linstate::detail::validate<sse_dyn>());
static_assert(!linstate::Variant<no_router> && !linstate::Variant<empty_spec> && !linstate::Variant<decay_is_int> &&
              !linstate::Variant<router_is_partition> && !linstate::Variant<partition_is_router> &&
              !linstate::Variant<bad_state>);
// inheritance overrides exactly one slot
static_assert(std::is_same_v<sse_delta::partition, sse_n4k1s::partition> && std::is_same_v<sse_delta::router, sse_n4k1s::router> &&
              std::is_same_v<sse_delta::decay, dc::gated_delta_rule<true>>);

bool contains(const std::string& s, const char* sub) { return s.find(sub) != std::string::npos; }

}  // namespace

TEST_CASE("conformance: policies model their concepts, variants are Variants") {
  CHECK(linstate::Decay<dc::gated_key>);
  CHECK(linstate::Decay<dc::gated_delta_rule<true>>);
  CHECK(linstate::Router<rt::top_k<2, 1>>);
  CHECK(linstate::Partition<pt::routed<4, pt::shared>>);
  CHECK(linstate::State<st::dense<float>>);
  CHECK(linstate::Variant<gla>);
  CHECK(linstate::Variant<sse_n4k1s>);
  CHECK(linstate::Variant<sse_n8k2>);
  CHECK(linstate::Variant<sse_delta>);
  CHECK_FALSE(linstate::Variant<no_router>);
  CHECK_FALSE(linstate::Variant<decay_is_int>);
  CHECK_FALSE(linstate::Variant<router_is_partition>);
}

TEST_CASE("conformance: describe<>() names the resolved slots") {
  const std::string g = linstate::describe<gla>();
  INFO("gla: " << g);
  CHECK(contains(g, "state=dense<float>"));
  CHECK(contains(g, "decay=gated_key"));
  CHECK(contains(g, "router=dense"));
  CHECK(contains(g, "partition=single"));
  CHECK_FALSE(contains(g, "top_k"));

  const std::string s = linstate::describe<sse_n4k1s>();
  INFO("sse_n4k1s: " << s);
  CHECK(contains(s, "decay=gated_key"));
  CHECK(contains(s, "router=top_k<1,1>"));
  CHECK(contains(s, "gates=write+read"));
  CHECK(contains(s, "partition=routed<4,shared>"));
  CHECK_FALSE(contains(s, "renormalize"));
  CHECK_FALSE(contains(s, "round_to_input"));

  const std::string e = linstate::describe<sse_n8k2>();
  INFO("sse_n8k2: " << e);
  CHECK(contains(e, "router=top_k<2,2>"));
  CHECK(contains(e, "partition=routed<8>"));
  CHECK_FALSE(contains(e, "shared"));

  const std::string d = linstate::describe<sse_delta>();
  INFO("sse_delta: " << d);
  CHECK(contains(d, "decay=gated_delta_rule<l2norm>"));  // the overridden slot ...
  CHECK(contains(d, "router=top_k<1,1>"));               // ... and the inherited ones
  CHECK(contains(d, "partition=routed<4,shared>"));

  const std::string y = linstate::describe<sse_dyn>();
  INFO("sse_dyn: " << y);
  CHECK(contains(y, "router=top_k<dynamic,dynamic>"));
  CHECK(contains(y, "partition=routed<dynamic>"));
  CHECK(contains(y, "renormalize"));
  CHECK(contains(y, "round_to_input"));

  CHECK(contains(linstate::describe<sse_w2r1_read>(), "router=top_k<2,1> gates=read"));
  CHECK(contains(linstate::describe<sse_plain>(), "gates=none"));
  CHECK(contains(linstate::describe<sse_dyn_gates>(), "gates=dynamic"));
  CHECK(contains(linstate::describe<retention>(), "decay=scalar"));
  CHECK(contains(linstate::describe<linear_attn>(), "decay=none"));
  CHECK(contains(linstate::describe<linstate::spec<st::dense<float>, dc::gated_delta_rule<false>>>(),
                 "decay=gated_delta_rule router=dense"));  // no <l2norm> when L2Norm = false
}
