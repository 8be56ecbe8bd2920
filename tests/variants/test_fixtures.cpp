// SPDX-License-Identifier: Apache-2.0
//! \file tests/variants/test_fixtures.cpp
//! \brief Every golden-data case (shared/fixtures/<case>/) against linstate's forward pass.
//!
//! For each case folder (GLA or SSE-GLA, see shared/fixtures/README.md) this test
//!  1. checks that the fp64 reference (linstate::reference::forward) reproduces the stored `o` and
//!     `ht`: this pins down the name / layout mapping and the reference itself;
//!  2. for SSE, checks the fp32 router's write / read sets (SPEC §4.4, §11 C1, tie rule P8) against
//!     `sel_write.npy` / `sel_read.npy`, exactly;
//!  3. runs linstate::forward with every algorithm (recurrent, chunked<64>, chunked<16>, automatic)
//!     and both SSE strategies (mask, varlen) and checks `o` and the final state against the stored
//!     arrays with the README's tolerance max|a − b| ≤ 1e-5 · max|b| (SPEC §9.3 suggestion);
//!  4. checks that forward never modifies `initial_state` (SPEC §11 C5), and that forward_in_place
//!     (the decode API) started from h0 also lands on `ht`;
//!  5. runs linstate::backward with the cotangent `do.npy` (loss Σ o·do, no gradient into the final
//!     state) with every algorithm and both strategies, and checks every stored gradient `d*.npy` of the
//!     case (dq dk dv dg [dh0] for GLA; dq1 dq2 dk1 dk2 dv dg1 dg2 deta [dh0] for SSE) with the same
//!     tolerance; `deta` must be exactly zero when neither gate uses the router probability (emulq =
//!     emulk = false: SPEC §4.6, the router gradient flows only through the gates).
//! SSE cases are mapped onto one variant whose N, kw, kr and gate use are all run-time values
//! (linstate::dynamic), taken from case.json.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <linstate/linstate.hpp>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "fixture_case.hpp"
#include "fixtures_path.hpp"

namespace {

namespace pt = linstate::partition;
namespace rt = linstate::router;

//! Plain GLA: dense state, gated_key decay (g [B,T,H,K]), one partition (SPEC §2.1).
struct gla : linstate::spec<> {};
//! SSE-GLA with a shared partition; N, kw, kr and the gates (emulq / emulk) come from linstate::options.
struct sse_dynamic : gla {
  using partition = pt::routed<linstate::dynamic, pt::shared>;
  using router = rt::top_k<linstate::dynamic, linstate::dynamic, rt::top_k_options{.dynamic_gates = true}>;
};

//! The README's acceptance threshold for an exact-fp32 implementation.
constexpr double tolerance = 1e-5;

//! All case folders; fails the calling test (REQUIRE) when the folder is missing or holds no case, so
//! a wrong LINSTATE_FIXTURES can never make the suite pass vacuously.
std::vector<std::filesystem::path> all_cases() {
  const std::filesystem::path root = linstate_test::fixtures_dir();
  INFO("fixtures folder: '" << root.string() << "' (set LINSTATE_FIXTURES to shared/fixtures)");
  REQUIRE_MESSAGE(!root.empty(), "the fixtures folder was not found");
  const auto cases = linstate_test::list_fixture_cases(root);
  REQUIRE_MESSAGE(!cases.empty(), "the fixtures folder holds no case folder");
  return cases;
}

//! "recurrent", "chunked<64>", ... for failure messages.
template <class Algorithm>
std::string algorithm_name() {
  if constexpr (requires { Algorithm::chunk_size; })
    return std::string(Algorithm::name) + "<" + std::to_string(Algorithm::chunk_size) + ">";
  else
    return Algorithm::name;
}

//! Runs forward<Spec>(algo, strategy) on the case and checks o, final state and initial_state intact.
template <class Spec, class Algorithm, class Strategy>
void check_forward(const linstate_test::fixture_case& c, const linstate::inputs<float>& in,
                   const linstate::options& opt, Algorithm algo, Strategy strat) {
  INFO("case " << c.name << ", algorithm " << algorithm_name<Algorithm>() << ", strategy " << std::string(Strategy::name));
  // A copy of h0, to prove forward only reads it.
  const std::vector<float> h0_before =
      c.initial_state ? c.at("h0").values : std::vector<float>{};

  linstate::result<float> r;
  try {
    r = linstate::forward<Spec>(linstate::cpu{}, in, algo, strat, opt);
  } catch (const std::exception& e) {
    FAIL_CHECK("forward threw: " << std::string(e.what()));
    return;
  }
  CHECK(r.o.shape() == c.at("o").lshape());
  CHECK(r.final_state.shape() == c.state_shape());

  const double err_o = linstate_test::max_rel_err(r.o.values(), c.at("o").values);
  const double err_ht = linstate_test::max_rel_err(r.final_state.values(), c.at("ht").values);
  CAPTURE(err_o);
  CAPTURE(err_ht);
  CHECK(err_o <= tolerance);
  CHECK(err_ht <= tolerance);
  if (c.initial_state) CHECK_MESSAGE(c.at("h0").values == h0_before, "forward modified in.initial_state");
}

// Algorithms of SPEC §2 (chunked<C> must not depend on C, §9 P2).
template <class Spec, class Strategy>
void check_all_algorithms(const linstate_test::fixture_case& c, const linstate::inputs<float>& in,
                          const linstate::options& opt, Strategy strat) {
  check_forward<Spec>(c, in, opt, linstate::recurrent{}, strat);
  check_forward<Spec>(c, in, opt, linstate::chunked<64>{}, strat);
  check_forward<Spec>(c, in, opt, linstate::chunked<16>{}, strat);
  check_forward<Spec>(c, in, opt, linstate::automatic{}, strat);
}

//! The library's gradient for each gradient file of the fixture (README name mapping, SPEC §4.3):
//! GLA d{q,k,v,g} -> q,k,v,g; SSE d{q,k,g}2 -> q,k,g (routed), d{q,k,g}1 -> shared.{q,k,g},
//! deta -> router_logits; dh0 -> initial_state (GLA [S,H,K,V] is the library's [S,1,H,K,V]).
std::vector<std::pair<std::string, const linstate::tensor<float>*>> gradient_map(const linstate_test::fixture_case& c,
                                                                                 const linstate::gradient_result<float>& g) {
  std::vector<std::pair<std::string, const linstate::tensor<float>*>> m;
  if (c.is_gla()) {
    m = {{"dq", &g.q}, {"dk", &g.k}, {"dv", &g.v}, {"dg", &g.g}};
  } else {
    m = {{"dq2", &g.q},        {"dk2", &g.k},        {"dg2", &g.g}, {"dq1", &g.shared.q},
         {"dk1", &g.shared.k}, {"dg1", &g.shared.g}, {"dv", &g.v},  {"deta", &g.router_logits}};
  }
  if (c.initial_state) m.emplace_back("dh0", &g.initial_state);
  return m;
}

//! The stems of the case's stored gradients: every d*.npy except the cotangent do.npy.
std::vector<std::string> stored_gradients(const linstate_test::fixture_case& c) {
  std::vector<std::string> out;
  for (const auto& [stem, array] : c.arrays)
    if (stem.size() > 1 && stem[0] == 'd' && stem != "do") out.push_back(stem);
  return out;  // std::map: sorted
}

//! Runs backward<Spec>(algo, strategy) with dO = do.npy and checks every stored gradient d*.npy.
template <class Spec, class Algorithm, class Strategy>
void check_backward(const linstate_test::fixture_case& c, const linstate::inputs<float>& in,
                    const linstate::options& opt, Algorithm algo, Strategy strat) {
  INFO("case " << c.name << ", backward, algorithm " << algorithm_name<Algorithm>() << ", strategy "
               << std::string(Strategy::name));
  const std::vector<float> h0_before = c.initial_state ? c.at("h0").values : std::vector<float>{};
  const linstate::cotangents<float> d{.o = c.at("do").view()};  // README: the final state gets no gradient
  linstate::gradient_result<float> g;
  try {
    g = linstate::backward<Spec>(linstate::cpu{}, in, d, algo, strat, opt);
  } catch (const std::exception& e) {
    FAIL_CHECK("backward threw: " << std::string(e.what()));
    return;
  }
  const auto mapped = gradient_map(c, g);
  // Every stored gradient has a counterpart, and every input of the case has a stored gradient.
  std::vector<std::string> mapped_names;
  for (const auto& [name, t] : mapped) mapped_names.push_back(name);
  std::sort(mapped_names.begin(), mapped_names.end());
  CHECK(mapped_names == stored_gradients(c));
  for (const auto& [name, t] : mapped) {
    CAPTURE(name);
    if (!c.has(name)) continue;  // reported by the list check above
    const linstate_test::fixture_array& ref = c.at(name);
    CHECK(t->shape() == (name == "dh0" ? c.state_shape() : ref.lshape()));
    if (static_cast<std::size_t>(t->numel()) != ref.values.size()) continue;
    const double err = linstate_test::max_rel_err(t->values(), ref.values);
    CAPTURE(err);
    CHECK(err <= tolerance);
  }
  if (c.is_sse() && !c.emulq && !c.emulk) {
    // No gate uses p: the router gets no gradient at all, exactly (SPEC §4.6).
    CHECK(std::all_of(g.router_logits.values().begin(), g.router_logits.values().end(), [](float x) { return x == 0.f; }));
  }
  if (c.initial_state) CHECK_MESSAGE(c.at("h0").values == h0_before, "backward modified in.initial_state");
}

//! Backward with every algorithm of SPEC §2 (chunked<C> must not depend on C, §9 P2).
template <class Spec, class Strategy>
void check_all_backward(const linstate_test::fixture_case& c, const linstate::inputs<float>& in,
                        const linstate::options& opt, Strategy strat) {
  check_backward<Spec>(c, in, opt, linstate::recurrent{}, strat);
  check_backward<Spec>(c, in, opt, linstate::chunked<64>{}, strat);
  check_backward<Spec>(c, in, opt, linstate::chunked<16>{}, strat);
  check_backward<Spec>(c, in, opt, linstate::automatic{}, strat);
}

//! The decode API: forward_in_place from a copy of h0 (or zeros) must land on ht, for one strategy.
template <class Spec, class Strategy>
void check_in_place(const linstate_test::fixture_case& c, linstate::inputs<float> in, const linstate::options& opt,
                    Strategy strat) {
  INFO("case " << c.name << ", forward_in_place (recurrent), strategy " << std::string(Strategy::name));
  linstate::tensor<float> state(c.state_shape());  // zeros = no initial state
  if (c.initial_state) state.values() = c.at("h0").values;
  in.initial_state = {};  // forward_in_place takes the initial state through `state`
  linstate::tensor<float> o(c.at("o").lshape());
  try {
    linstate::forward_in_place<Spec>(linstate::cpu{}, in, state.view(), o.view(), linstate::recurrent{}, strat, opt);
  } catch (const std::exception& e) {
    FAIL_CHECK("forward_in_place threw: " << std::string(e.what()));
    return;
  }
  const double err_o = linstate_test::max_rel_err(o.values(), c.at("o").values);
  const double err_ht = linstate_test::max_rel_err(state.values(), c.at("ht").values);
  CAPTURE(err_o);
  CAPTURE(err_ht);
  CHECK(err_o <= tolerance);
  CHECK(err_ht <= tolerance);
}

//! The fp64 reference against the stored arrays (README: the producer agrees with an fp64 recurrence
//! to 6e-7 relative, so this must hold with room to spare).
template <class Spec>
void check_reference(const linstate_test::fixture_case& c, const linstate::inputs<float>& in,
                     const linstate::options& opt) {
  INFO("case " << c.name << ", linstate::reference::forward (fp64)");
  linstate::reference::result ref;
  try {
    ref = linstate::reference::forward<Spec>(in, opt);
  } catch (const std::exception& e) {
    FAIL_CHECK("reference::forward threw: " << std::string(e.what()));
    return;
  }
  const double err_o = linstate_test::max_rel_err(ref.o.values(), c.at("o").values);
  const double err_ht = linstate_test::max_rel_err(ref.final_state.values(), c.at("ht").values);
  CAPTURE(err_o);
  CAPTURE(err_ht);
  CHECK(err_o <= tolerance);
  CHECK(err_ht <= tolerance);
}

//! SSE routing decisions (SPEC §4.4 / §11 C1: fp32 softmax, top-k, lowest index on ties) against the
//! producer's stored selections, token by token and partition by partition, exactly.
void check_routing(const linstate_test::fixture_case& c, const linstate::inputs<float>& in,
                   const linstate::options& opt) {
  INFO("case " << c.name << ", routing vs sel_write.npy / sel_read.npy");
  linstate::detail::routing routing;
  try {
    const auto pb = linstate::detail::make_problem<sse_dynamic>(
        "test_fixtures", in, linstate::tensor_view<float>{}, linstate::tensor_view<float>{}, "final_state", opt,
        /*o_given=*/false);
    CHECK(pb.N == c.N);
    CHECK(pb.kw == c.num_writer);
    CHECK(pb.kr == c.num_reader);
    linstate::detail::compute_routing(pb, in.router_logits, routing);
  } catch (const std::exception& e) {
    FAIL_CHECK("routing threw: " << std::string(e.what()));
    return;
  }
  if (routing.flags.size() != c.sel_write.size()) {  // [B,T,N] flattened
    FAIL_CHECK("routing has " << routing.flags.size() << " flags, sel_write.npy " << c.sel_write.size());
    return;
  }
  int write_mismatches = 0, read_mismatches = 0;
  for (std::size_t i = 0; i < routing.flags.size(); ++i) {
    const bool w = routing.flags[i] & linstate::detail::route_write;
    const bool r = routing.flags[i] & linstate::detail::route_read;
    const auto token = static_cast<std::int64_t>(i) / c.N, part = static_cast<std::int64_t>(i) % c.N;
    if (w != (c.sel_write[i] != 0) && write_mismatches++ < 5)
      FAIL_CHECK("write set differs at flat token " << token << ", partition " << part);
    if (r != (c.sel_read[i] != 0) && read_mismatches++ < 5)
      FAIL_CHECK("read set differs at flat token " << token << ", partition " << part);
  }
  CHECK(write_mismatches == 0);
  CHECK(read_mismatches == 0);
  // The stored masks themselves must select exactly kw / kr partitions per token (sanity of the data).
  for (std::int64_t t = 0; t < c.B * c.T; ++t) {
    int nw = 0, nr = 0;
    for (std::int64_t n = 0; n < c.N; ++n) {
      const auto i = static_cast<std::size_t>(t * c.N + n);
      nw += c.sel_write[i] != 0;
      nr += c.sel_read[i] != 0;
    }
    if (nw != c.num_writer || nr != c.num_reader) {
      FAIL_CHECK("stored selection of flat token " << t << " has " << nw << " writers / " << nr << " readers");
      break;
    }
  }
}

}  // namespace

TEST_CASE("fixtures: the golden-data folder is present and every case loads") {
  const auto cases = all_cases();
  int gla_cases = 0, sse_cases = 0;
  for (const auto& dir : cases) {
    INFO("case folder " << dir.string());
    linstate_test::fixture_case c;
    try {
      c = linstate_test::load_fixture_case(dir);
    } catch (const std::exception& e) {
      FAIL_CHECK("cannot load the case: " << std::string(e.what()));
      continue;
    }
    (c.is_gla() ? gla_cases : sse_cases)++;
    // The library's default scale is K^-1/2; every fixture states that rule too.
    CHECK(c.scale == doctest::Approx(1.0 / std::sqrt(static_cast<double>(c.K))).epsilon(1e-7));
  }
  MESSAGE(cases.size() << " fixture cases: " << gla_cases << " GLA, " << sse_cases << " SSE");
  CHECK(gla_cases + sse_cases == static_cast<int>(cases.size()));
}

TEST_CASE("fixtures: forward (every algorithm and strategy) and the fp64 reference match o and ht") {
  for (const auto& dir : all_cases()) {
    INFO("case folder " << dir.string());
    linstate_test::fixture_case c;
    try {
      c = linstate_test::load_fixture_case(dir);
    } catch (const std::exception& e) {
      FAIL_CHECK("cannot load the case: " << std::string(e.what()));
      continue;
    }
    const linstate::inputs<float> in = c.make_inputs();
    const linstate::options opt = c.make_options();
    if (c.is_gla()) {
      check_reference<gla>(c, in, opt);
      // GLA has one partition, so the strategy must not matter; run both anyway.
      check_all_algorithms<gla>(c, in, opt, linstate::mask{});
      check_all_algorithms<gla>(c, in, opt, linstate::varlen{});
      check_in_place<gla>(c, in, opt, linstate::varlen{});
    } else {
      check_reference<sse_dynamic>(c, in, opt);
      check_routing(c, in, opt);
      check_all_algorithms<sse_dynamic>(c, in, opt, linstate::mask{});
      check_all_algorithms<sse_dynamic>(c, in, opt, linstate::varlen{});
      check_in_place<sse_dynamic>(c, in, opt, linstate::mask{});
      check_in_place<sse_dynamic>(c, in, opt, linstate::varlen{});
    }
  }
}

TEST_CASE("fixtures: backward (every algorithm and strategy) matches every stored gradient d*.npy") {
  int cases = 0, emul_none_cases = 0;
  for (const auto& dir : all_cases()) {
    INFO("case folder " << dir.string());
    linstate_test::fixture_case c;
    try {
      c = linstate_test::load_fixture_case(dir);
    } catch (const std::exception& e) {
      FAIL_CHECK("cannot load the case: " << std::string(e.what()));
      continue;
    }
    // Every public case carries the cotangent and the gradients (README); a case without them would
    // otherwise pass vacuously.
    REQUIRE_MESSAGE(c.has("do"), "case " << c.name << " has no do.npy");
    CHECK(c.at("do").shape == c.at("o").shape);
    const linstate::inputs<float> in = c.make_inputs();
    const linstate::options opt = c.make_options();
    if (c.is_gla()) {
      check_all_backward<gla>(c, in, opt, linstate::mask{});
      check_all_backward<gla>(c, in, opt, linstate::varlen{});
    } else {
      check_all_backward<sse_dynamic>(c, in, opt, linstate::mask{});
      check_all_backward<sse_dynamic>(c, in, opt, linstate::varlen{});
      emul_none_cases += !c.emulq && !c.emulk;
    }
    ++cases;
  }
  CHECK(cases > 0);
  CHECK(emul_none_cases >= 1);  // the public set has sse_varlen_n4k1_emul_none: the exact-zero deta check ran
}
