// SPDX-License-Identifier: Apache-2.0
//! \file tests/variants/test_gradients.cpp
//! \brief The backward pass: the fp64 oracle `reference::backward` against finite differences, and
//! the CPU backward (every algorithm and strategy) against the oracle, for every decay (none, scalar,
//! gated_key, gated delta rule with and without l2norm), router (dense; top_k with kw = kr, kw > kr,
//! kw < kr, gates none / write / read / both, renormalize, round_to_input, run-time parameters) and
//! partition (single, routed<N>, routed<N, shared>).
//!
//! Loss: L = Σ o·dO + Σ h_T·dht (SPEC §2.4: dO and dht are the upstream gradients).
//! Tolerances:
//!  - finite differences: 4-point central stencil in fp64 on inputs quantised to multiples of 2⁻¹²,
//!    step 2⁻⁹, so every perturbed input is exact in fp32 and the truncation error is ≲1e-9:
//!    |fd − analytic| ≤ 1e-6 · max|analytic of the tensor| on reference::forward (whose gate values
//!    are fp32, the oracle's fp64: ~1e-7 relative), ≤ 1e-8 · max on forward_fp64_router (the same
//!    loop with fp64 gate values, i.e. exactly the function the oracle differentiates);
//!  - CPU (fp32) against the fp64 oracle: max|a − ref| ≤ 1e-5 · max|ref| per tensor (SPEC §9.3's
//!    suggestion for fp32 vs fp64);
//!  - two fp32 paths of the same math: mask vs varlen 2e-6, chunked vs recurrent 5e-6 (SPEC §9.1 P1–P3);
//!  - bf16 inputs against the fp32 run on the same rounded values: fla's ratio metric (SPEC §9.2) with
//!    §9.3's tolerances (GLA 0.005; GDN dq/dk/dv/dh0 0.008, dg/dβ 0.02).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <linstate/linstate.hpp>
#include <linstate/reference/naive_backward.hpp>
#include <map>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "random_inputs.hpp"

namespace {
namespace gradt {

namespace dc = linstate::decay;
namespace pt = linstate::partition;
namespace rt = linstate::router;
using linstate::index_t;
using linstate::tensor;
using namespace linstate_test;

// ------------------------------------------------------------------------------------------------
// Variants.

struct gla : linstate::spec<> {};
struct linear_attn : gla { using decay = dc::none; };
struct retention : gla { using decay = dc::scalar; };
struct delta_rule : gla { using decay = dc::gated_delta_rule<false>; };
struct gdn : gla { using decay = dc::gated_delta_rule<true>; };
struct dense_n3 : gla { using partition = pt::routed<3>; };  // router::dense over 3 partitions
struct sse_n4k1s : gla {
  using partition = pt::routed<4, pt::shared>;
  using router = rt::top_k<1>;
};
struct sse_n4w2r1s : sse_n4k1s { using router = rt::top_k<2, 1>; };  // kw > kr
struct sse_n4w1r3 : gla {                                               // kw < kr, no shared partition
  using partition = pt::routed<4>;
  using router = rt::top_k<1, 3>;
};
struct sse_gates_none : sse_n4k1s { using router = rt::top_k<2, 2, rt::top_k_options{.gates = rt::gate::none}>; };
struct sse_gates_write : sse_n4w1r3 { using router = rt::top_k<2, 3, rt::top_k_options{.gates = rt::gate::write}>; };
struct sse_gates_read : sse_n4w1r3 { using router = rt::top_k<2, 1, rt::top_k_options{.gates = rt::gate::read}>; };
struct sse_renorm : sse_n4k1s { using router = rt::top_k<2, 3, rt::top_k_options{.renormalize = true}>; };
struct sse_round : sse_n4k1s { using router = rt::top_k<1, 1, rt::top_k_options{.round_to_input = true}>; };
struct sse_none_n4k1s : sse_n4k1s { using decay = dc::none; };
struct sse_scalar_n4w2r1 : sse_n4w1r3 {
  using decay = dc::scalar;
  using router = rt::top_k<2, 1>;
};
struct sse_gdn_n4k1s : sse_n4k1s { using decay = dc::gated_delta_rule<true>; };
struct sse_gdn_n4w2r1s : sse_n4w2r1s { using decay = dc::gated_delta_rule<true>; };  // kw > kr (C9: β frozen by W)
struct sse_gdn_n4w1r2 : sse_n4w1r3 {                                                // kw < kr
  using decay = dc::gated_delta_rule<true>;
  using router = rt::top_k<1, 2>;
};
struct sse_delta_n3w1r2 : gla {  // delta rule without l2norm, kw < kr
  using decay = dc::gated_delta_rule<false>;
  using partition = pt::routed<3>;
  using router = rt::top_k<1, 2>;
};
struct sse_delta_n3w2r1s : gla {  // delta rule without l2norm, kw > kr, shared partition
  using decay = dc::gated_delta_rule<false>;
  using partition = pt::routed<3, pt::shared>;
  using router = rt::top_k<2, 1>;
};
//! delta rule with a renormalised write gate only (β·p/Σp)
struct sse_delta_renorm_write : sse_gdn_n4k1s {
  using router = rt::top_k<2, 2, rt::top_k_options{.gates = rt::gate::write, .renormalize = true}>;
};
struct sse_delta_gates_read : sse_gdn_n4k1s { using router = rt::top_k<1, 2, rt::top_k_options{.gates = rt::gate::read}>; };
struct sse_delta_gates_none : sse_delta_n3w1r2 { using router = rt::top_k<1, 2, rt::top_k_options{.gates = rt::gate::none}>; };
//! Everything at run time: N = 5, kw = 2, kr = 1, read gate only.
struct sse_dynamic : gla {
  using partition = pt::routed<linstate::dynamic, pt::shared>;
  using router = rt::top_k<linstate::dynamic, linstate::dynamic, rt::top_k_options{.dynamic_gates = true}>;
  static linstate::options test_options() {
    return {.num_partitions = 5, .num_writer = 2, .num_reader = 1, .gates = rt::gate::read};
  }
};

#if LINSTATE_TEST_SANITIZED  // the sanitized subset; the rule: tests/variants/invariants_support.hpp
using all_variants = std::tuple<gla, linear_attn, retention, delta_rule, gdn, dense_n3, sse_n4w2r1s, sse_n4w1r3,
                                sse_gates_none, sse_gates_read, sse_renorm, sse_gdn_n4w2r1s, sse_gdn_n4w1r2,
                                sse_delta_n3w2r1s, sse_delta_renorm_write, sse_delta_gates_none, sse_dynamic>;
#else
using all_variants =
    std::tuple<gla, linear_attn, retention, delta_rule, gdn, dense_n3, sse_n4k1s, sse_n4w2r1s, sse_n4w1r3, sse_gates_none,
               sse_gates_write, sse_gates_read, sse_renorm, sse_round, sse_none_n4k1s, sse_scalar_n4w2r1, sse_gdn_n4k1s,
               sse_gdn_n4w2r1s, sse_gdn_n4w1r2, sse_delta_n3w1r2, sse_delta_n3w2r1s, sse_delta_renorm_write,
               sse_delta_gates_read, sse_delta_gates_none, sse_dynamic>;
#endif

}  // namespace gradt
}  // namespace

TYPE_TO_STRING_AS("gla", gradt::gla);
TYPE_TO_STRING_AS("linear_attn(decay::none)", gradt::linear_attn);
TYPE_TO_STRING_AS("retention(decay::scalar)", gradt::retention);
TYPE_TO_STRING_AS("delta_rule(no l2norm)", gradt::delta_rule);
TYPE_TO_STRING_AS("gdn(l2norm)", gradt::gdn);
TYPE_TO_STRING_AS("dense_n3", gradt::dense_n3);
TYPE_TO_STRING_AS("sse_n4k1s", gradt::sse_n4k1s);
TYPE_TO_STRING_AS("sse_n4w2r1s", gradt::sse_n4w2r1s);
TYPE_TO_STRING_AS("sse_n4w1r3", gradt::sse_n4w1r3);
TYPE_TO_STRING_AS("sse_gates_none", gradt::sse_gates_none);
TYPE_TO_STRING_AS("sse_gates_write", gradt::sse_gates_write);
TYPE_TO_STRING_AS("sse_gates_read", gradt::sse_gates_read);
TYPE_TO_STRING_AS("sse_renorm", gradt::sse_renorm);
TYPE_TO_STRING_AS("sse_round", gradt::sse_round);
TYPE_TO_STRING_AS("sse_none_n4k1s", gradt::sse_none_n4k1s);
TYPE_TO_STRING_AS("sse_scalar_n4w2r1", gradt::sse_scalar_n4w2r1);
TYPE_TO_STRING_AS("sse_gdn_n4k1s", gradt::sse_gdn_n4k1s);
TYPE_TO_STRING_AS("sse_gdn_n4w2r1s", gradt::sse_gdn_n4w2r1s);
TYPE_TO_STRING_AS("sse_gdn_n4w1r2", gradt::sse_gdn_n4w1r2);
TYPE_TO_STRING_AS("sse_delta_n3w1r2(no l2norm)", gradt::sse_delta_n3w1r2);
TYPE_TO_STRING_AS("sse_delta_n3w2r1s(no l2norm)", gradt::sse_delta_n3w2r1s);
TYPE_TO_STRING_AS("sse_delta_renorm_write", gradt::sse_delta_renorm_write);
TYPE_TO_STRING_AS("sse_delta_gates_read", gradt::sse_delta_gates_read);
TYPE_TO_STRING_AS("sse_delta_gates_none", gradt::sse_delta_gates_none);
TYPE_TO_STRING_AS("sse_dynamic", gradt::sse_dynamic);

namespace {
namespace gradt {

// ------------------------------------------------------------------------------------------------
// Helpers.

constexpr linstate::cpu be{.threads = 1};
constexpr double tol_fd = 1e-6;     // finite differences of reference::forward (fp32 gate values) vs the oracle
constexpr double tol_fd64 = 1e-8;   // finite differences of forward_fp64_router vs the oracle
constexpr double tol_ref = 1e-5;    // CPU fp32 vs the fp64 oracle (SPEC §9.3)
constexpr double tol_mask = 2e-6;   // mask vs varlen (same fp32 math)
constexpr double tol_chunk = 5e-6;  // chunked vs recurrent (fp32 both)

template <class Spec>
linstate::options options_of() {
  if constexpr (requires { Spec::test_options(); }) return Spec::test_options();
  else return {};
}
template <class Spec>
constexpr bool is_top_k = Spec::router::routes;
template <class Spec>
constexpr bool is_delta = linstate::is_family_of<typename Spec::decay, linstate::family::delta>;

template <class F>
void for_each_algorithm(F&& f) {
  f(linstate::recurrent{});
  f(linstate::chunked<16>{});
  f(linstate::chunked<64>{});
  f(linstate::automatic{});
}
template <class F>
void for_each_strategy(F&& f) {
  f(linstate::mask{});
  f(linstate::varlen{});
}
template <class A>
std::string name_of(A) {
  if constexpr (requires { A::chunk_size; }) return "chunked<" + std::to_string(A::chunk_size) + ">";
  else return A::name;
}

struct layout {
  std::string name;
  sizes dims;
  std::vector<std::int64_t> cu;
};

//! A random problem plus its upstream gradients dO `[B,T,HV,V]` and dht `[S,P,HV,K,V]` (N(0,1)).
struct problem_case {
  random_inputs data;
  tensor<float> dO, dht;
  linstate::options opt;
  linstate::cotangents<float> cot() const {
    return {.o = dO.view(), .final_state = dht.empty() ? linstate::tensor_view<const float>{} : dht.view()};
  }
};

tensor<float> normal_tensor(const linstate::shape_t& s, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> nd;
  tensor<float> t(s);
  for (float& x : t.values()) x = nd(gen);
  return t;
}

template <class Spec>
problem_case make_case(const layout& l, bool h0, bool dht, std::uint64_t seed, float gate_normalizer = 16.f) {
  const linstate::options opt = options_of<Spec>();
  config c = config_for<Spec>(l.dims, opt);
  c.cu_seqlens = l.cu;
  c.initial_state = h0;
  c.gate_normalizer = gate_normalizer;
  random_inputs d(c, seed);
  tensor<float> dO = normal_tensor(d.output_shape(), seed * 7 + 1);
  tensor<float> dh = dht ? normal_tensor(d.state_shape(), seed * 7 + 2) : tensor<float>();
  return {std::move(d), std::move(dO), std::move(dh), opt};
}

//! One named gradient: the input it belongs to (fp32, in the random_inputs), the oracle's gradient
//! and the CPU run's gradient.
struct named_grad {
  std::string name;
  tensor<float>* input;
  const tensor<double>* ref;
  const tensor<float>* cpu;
};

std::vector<named_grad> pair_up(random_inputs& d, const linstate::reference::gradient& ref,
                                const linstate::gradient_result<float>* cpu) {
  auto c = [&](auto member) { return cpu ? &(cpu->*member) : nullptr; };
  using R = linstate::gradient_result<float>;
  return {
      {"q", &d.q, &ref.q, c(&R::q)},
      {"k", &d.k, &ref.k, c(&R::k)},
      {"v", &d.v, &ref.v, c(&R::v)},
      {"g", &d.g, &ref.g, c(&R::g)},
      {"beta", &d.beta, &ref.beta, c(&R::beta)},
      {"shared.q", &d.shared_q, &ref.shared.q, cpu ? &cpu->shared.q : nullptr},
      {"shared.k", &d.shared_k, &ref.shared.k, cpu ? &cpu->shared.k : nullptr},
      {"shared.g", &d.shared_g, &ref.shared.g, cpu ? &cpu->shared.g : nullptr},
      {"shared.beta", &d.shared_beta, &ref.shared.beta, cpu ? &cpu->shared.beta : nullptr},
      {"router_logits", &d.router_logits, &ref.router_logits, c(&R::router_logits)},
      {"initial_state", &d.initial_state, &ref.initial_state, c(&R::initial_state)},
  };
}

//! L = Σ o·dO + Σ h_T·dht on the fp64 reference forward (or on its fp64-router twin).
template <class Spec>
double loss(const problem_case& pc, bool fp64_router) {
  const auto in = pc.data.view();
  const auto r = fp64_router ? linstate::reference::forward_fp64_router<Spec>(in, pc.opt)
                             : linstate::reference::forward<Spec>(in, pc.opt);
  double L = 0;
  for (index_t i = 0; i < r.o.numel(); ++i) L += r.o[i] * static_cast<double>(pc.dO[i]);
  for (index_t i = 0; i < pc.dht.numel(); ++i) L += r.final_state[i] * static_cast<double>(pc.dht[i]);
  return L;
}

//! Rounds every input to a multiple of 2⁻¹² so that x ± 2⁻⁹ and x ± 2⁻⁸ are exact in fp32.
void quantise(random_inputs& d) {
  std::vector<tensor<float>*> all = d.token_tensors();
  all.push_back(&d.initial_state);
  for (tensor<float>* t : all)
    for (float& x : t->values()) x = std::ldexp(std::round(std::ldexp(x, 12)), -12);
}

//! Checks reference::backward against 4-point central differences on `samples` random coordinates
//! of every gradient (plus the one where |gradient| is largest), twice:
//!  - on reference::forward itself (every input but the router logits, whose fp32 gate values would
//!    make the quotient noisy): |fd − analytic| ≤ tol_fd · max|analytic|;
//!  - on forward_fp64_router, the same loop with fp64 gate values, which is exactly the function the
//!    oracle differentiates (every input): ≤ tol_fd64 · max|analytic|.
template <class Spec>
void check_fd(problem_case& pc, int samples, std::uint64_t seed) {
  quantise(pc.data);
  const auto ref = linstate::reference::backward<Spec>(pc.data.view(), pc.cot(), pc.opt);
  std::mt19937_64 gen(seed);
  const double h = std::ldexp(1.0, -9);
  int tensors_checked = 0;
  for (const named_grad& ng : pair_up(pc.data, ref, nullptr)) {
    INFO("gradient ", ng.name);
    // the oracle returns a gradient exactly for the inputs that exist (initial_state always)
    const bool is_h0 = ng.name == "initial_state";
    if (is_h0) CHECK(ng.ref->shape() == pc.data.state_shape());
    else CHECK(ng.ref->empty() == ng.input->empty());
    if (ng.ref->numel() == 0) continue;
    REQUIRE(ng.ref->shape() == (is_h0 ? pc.data.state_shape() : ng.input->shape()));
    REQUIRE(all_finite(*ng.ref));
    const bool is_router = ng.name == "router_logits";
    const double scale = max_abs(*ng.ref);
    // with these shapes every input reaches the loss; the router only through a gate (SPEC §11 C2)
    const bool gates_off = [] {
      if constexpr (is_top_k<Spec>) {
        if (Spec::router::options.dynamic_gates) return *options_of<Spec>().gates == rt::gate::none;
        return Spec::router::options.gates == rt::gate::none;
      } else return false;
    }();
    if (is_router && gates_off) CHECK(scale == 0.0);
    else CHECK(scale > 0.0);
    const bool input_absent = ng.input->empty();  // zero initial state: perturb a materialised one
    if (input_absent) *ng.input = tensor<float>(pc.data.state_shape());
    std::vector<index_t> coords;
    index_t arg = 0;
    for (index_t i = 0; i < ng.ref->numel(); ++i)
      if (std::abs((*ng.ref)[i]) > std::abs((*ng.ref)[arg])) arg = i;
    coords.push_back(arg);
    std::uniform_int_distribution<index_t> pick(0, ng.ref->numel() - 1);
    for (int s = 0; s < samples; ++s) coords.push_back(pick(gen));
    for (const index_t i : coords) {
      float& x = (*ng.input)[i];
      const float x0 = x;
      auto fd = [&](bool fp64_router) {
        auto at = [&](double off) {
          x = static_cast<float>(static_cast<double>(x0) + off);
          REQUIRE(static_cast<double>(x) == static_cast<double>(x0) + off);  // the step is exact in fp32
          return loss<Spec>(pc, fp64_router);
        };
        const double r = (8.0 * (at(h) - at(-h)) - (at(2 * h) - at(-2 * h))) / (12.0 * h);
        x = x0;
        return r;
      };
      const double an = (*ng.ref)[i];
      const double fd64 = fd(true);
      INFO("coordinate ", i, ": reference::backward ", an, ", finite difference (fp64 router) ", fd64, ", max ", scale);
      CHECK(std::abs(fd64 - an) <= tol_fd64 * scale + 1e-13);
      if (!is_router) {
        const double fd32 = fd(false);
        INFO("finite difference of reference::forward ", fd32);
        CHECK(std::abs(fd32 - an) <= tol_fd * scale + 1e-13);
      }
    }
    if (input_absent) *ng.input = tensor<float>();
    ++tensors_checked;
  }
  CHECK(tensors_checked >= 4);  // at least q, k, v, initial_state
}

// ------------------------------------------------------------------------------------------------
// 1. reference::backward against finite differences (fp64).

//! Small problems: B = 2 with HV = 2·H and V ≠ K; packed sequences with an empty one.
std::vector<layout> fd_layouts() {
  return {
      {"batched B=2 H=1 HV=2 K=6 V=5", {.B = 2, .T = 13, .H = 1, .HV = 2, .K = 6, .V = 5}, {}},
      {"packed lengths 0,9,1,11 H=2 HV=4 K=5 V=7", {.B = 1, .T = 21, .H = 2, .HV = 4, .K = 5, .V = 7}, {0, 0, 9, 10, 21}},
  };
}

TEST_CASE_TEMPLATE_DEFINE("reference::backward matches finite differences of the fp64 reference forward", Spec, fd_id) {
  std::uint64_t seed = 1000;
  for (const layout& l : fd_layouts())
    for (const auto& [h0, dht] : {std::pair{true, true}, std::pair{false, false}, std::pair{false, true}}) {
      // strong decays (normaliser 2) so that dg is not negligible next to the other gradients
      INFO("layout: ", l.name, ", initial_state: ", h0, ", dht: ", dht);
      problem_case pc = make_case<Spec>(l, h0, dht, ++seed, 2.f);
      check_fd<Spec>(pc, 6, seed);
    }
}
#if !LINSTATE_TEST_SANITIZED  // math only: finite differences of the fp64 reference (tests/variants/meson.build)
TEST_CASE_TEMPLATE_APPLY(fd_id, all_variants);
#endif

TEST_CASE_TEMPLATE("forward_fp64_router is reference::forward up to the fp32 rounding of the gate values", Spec, gradt::gla,
                   gradt::sse_n4k1s, gradt::sse_renorm, gradt::sse_gdn_n4w2r1s, gradt::sse_dynamic) {
  for (const layout& l : fd_layouts()) {
    INFO("layout: ", l.name);
    problem_case pc = make_case<Spec>(l, true, true, 77);
    const auto a = linstate::reference::forward<Spec>(pc.data.view(), pc.opt);
    const auto b = linstate::reference::forward_fp64_router<Spec>(pc.data.view(), pc.opt);
    CHECK(max_rel_err(b.o, a.o) <= 1e-6);
    CHECK(max_rel_err(b.final_state, a.final_state) <= 1e-6);
    if constexpr (!is_top_k<Spec>) {  // no router: the same loop in double
      CHECK(max_rel_err(b.o, a.o) <= 1e-14);
      CHECK(max_rel_err(b.final_state, a.final_state) <= 1e-14);
    }
  }
}

// ------------------------------------------------------------------------------------------------
// 2. The CPU backward (every algorithm and strategy) against the oracle; mask ≡ varlen; chunked ≡
// recurrent; empty sequences pass dht through to dh0.

std::vector<layout> cpu_layouts() {
  return {
      {"batched B=2 H=1 HV=2 K=16 V=12", {.B = 2, .T = 70, .H = 1, .HV = 2, .K = 16, .V = 12}, {}},
      {"packed lengths 0,63,15,70,1 H=2 HV=4 K=8 V=16",
       {.B = 1, .T = 149, .H = 2, .HV = 4, .K = 8, .V = 16},
       {0, 0, 63, 78, 148, 149}},
  };
}

template <class Spec, class A, class S>
linstate::gradient_result<float> cpu_backward(const problem_case& pc, A a, S s) {
  return linstate::backward<Spec>(be, pc.data.view(), pc.cot(), a, s, pc.opt);
}

TEST_CASE_TEMPLATE_DEFINE("CPU backward: every algorithm and strategy matches reference::backward", Spec, cpu_id) {
  std::uint64_t seed = 2000;
  for (const layout& l : cpu_layouts())
    for (const bool with_state : {true, false}) {
      INFO("layout: ", l.name, ", initial_state and dht: ", with_state);
      problem_case pc = make_case<Spec>(l, with_state, with_state, ++seed);
      const auto ref = linstate::reference::backward<Spec>(pc.data.view(), pc.cot(), pc.opt);
      std::map<std::string, linstate::gradient_result<float>> runs;
      for_each_strategy([&](auto strat) {
        for_each_algorithm([&](auto algo) {
          const std::string run = name_of(algo) + "/" + name_of(strat);
          INFO("run: ", run);
          auto r = cpu_backward<Spec>(pc, algo, strat);
          for (const named_grad& ng : pair_up(pc.data, ref, &r)) {
            INFO("gradient ", ng.name, " (max |ref| = ", max_abs(*ng.ref), ")");
            CHECK(ng.cpu->empty() == ng.ref->empty());
            CHECK(ng.cpu->shape() == ng.ref->shape());
            CHECK(max_rel_err(*ng.cpu, *ng.ref) <= tol_ref);
          }
          runs.emplace(run, std::move(r));
        });
      });
      // SPEC §1.7: an empty sequence's dh0 is its dht (zero without one), in the oracle and every run.
      for (std::size_t s = 0; s + 1 < l.cu.size(); ++s) {
        if (l.cu[s] != l.cu[s + 1]) continue;
        for (index_t p = 0; p < pc.data.cfg.partitions; ++p) {
          const auto want = with_state ? state_block(std::as_const(pc.dht), static_cast<index_t>(s), p) : std::span<const float>{};
          const auto got_ref = state_block(ref.initial_state, static_cast<index_t>(s), p);
          for (std::size_t i = 0; i < got_ref.size(); ++i) CHECK(got_ref[i] == (with_state ? double(want[i]) : 0.0));
          for (const auto& [run, r] : runs) {
            INFO("empty sequence ", s, " partition ", p, " run ", run);
            const auto got = state_block(r.initial_state, static_cast<index_t>(s), p);
            if (with_state) CHECK(bit_equal(got, want));
            else CHECK(std::all_of(got.begin(), got.end(), [](float x) { return x == 0.f; }));
          }
        }
      }
      // SPEC §9.1 P3: mask ≡ varlen gradients; P1/P2: chunked ≡ recurrent.
      auto compare = [&](const std::string& a, const std::string& b, double tol) {
        INFO(a, " vs ", b);
        const auto& x = runs.at(a);
        const auto& y = runs.at(b);
        for (const named_grad& ng : pair_up(pc.data, ref, &x)) {
          const auto yy = pair_up(pc.data, ref, &y);
          const auto it = std::find_if(yy.begin(), yy.end(), [&](const named_grad& o) { return o.name == ng.name; });
          INFO("gradient ", ng.name);
          CHECK(max_rel_err(*ng.cpu, *it->cpu) <= tol);
        }
      };
      for (const std::string algo : {"recurrent", "chunked<16>", "chunked<64>", "automatic"})
        compare(algo + "/mask", algo + "/varlen", tol_mask);
      for (const std::string strat : {"mask", "varlen"})
        for (const std::string algo : {"chunked<16>", "chunked<64>", "automatic"})
          compare(algo + "/" + strat, "recurrent/" + strat, tol_chunk);
    }
}
TEST_CASE_TEMPLATE_APPLY(cpu_id, all_variants);

TEST_CASE_TEMPLATE("CPU backward with strong decays (normaliser 0.1) and the caller-allocated API", Spec, gradt::gla,
                   gradt::retention, gradt::gdn, gradt::sse_n4k1s, gradt::sse_gdn_n4w2r1s) {
  const layout l = cpu_layouts()[1];
  problem_case pc = make_case<Spec>(l, true, true, 31, 0.1f);
  const auto ref = linstate::reference::backward<Spec>(pc.data.view(), pc.cot(), pc.opt);
  // caller-allocated views, pre-filled with NaN: every element must be overwritten
  auto r = linstate::backward<Spec>(be, pc.data.view(), pc.cot(), linstate::chunked<16>{}, linstate::mask{}, pc.opt);
  auto nan_like = [](const auto& t) {
    using T = std::remove_cvref_t<decltype(t[0])>;
    if (t.empty()) return tensor<T>();
    tensor<T> x(t.shape());
    std::fill(x.values().begin(), x.values().end(), static_cast<T>(std::numeric_limits<float>::quiet_NaN()));
    return x;
  };
  linstate::gradient_result<float> mine;
  mine.q = nan_like(r.q), mine.k = nan_like(r.k), mine.v = nan_like(r.v), mine.g = nan_like(r.g);
  mine.beta = nan_like(r.beta), mine.shared.q = nan_like(r.shared.q), mine.shared.k = nan_like(r.shared.k);
  mine.shared.g = nan_like(r.shared.g), mine.shared.beta = nan_like(r.shared.beta);
  mine.router_logits = nan_like(r.router_logits), mine.initial_state = nan_like(r.initial_state);
  auto vw = [](auto& t) { return t.empty() ? decltype(t.view()){} : t.view(); };
  linstate::gradients<float> views{vw(mine.q), vw(mine.k), vw(mine.v), vw(mine.g), vw(mine.beta),
                                   {vw(mine.shared.q), vw(mine.shared.k), vw(mine.shared.g), vw(mine.shared.beta)},
                                   vw(mine.router_logits), vw(mine.initial_state)};
  linstate::backward<Spec>(be, pc.data.view(), pc.cot(), views, linstate::chunked<16>{}, linstate::mask{}, pc.opt);
  for (const named_grad& ng : pair_up(pc.data, ref, &mine)) {
    INFO("gradient ", ng.name);
    CHECK(all_finite(*ng.cpu));
    CHECK(max_rel_err(*ng.cpu, *ng.ref) <= tol_ref);
  }
  for (const named_grad& ng : pair_up(pc.data, ref, &r)) {
    INFO("gradient (allocating overload) ", ng.name);
    CHECK(max_rel_err(*ng.cpu, *ng.ref) <= tol_ref);
  }
}

// ------------------------------------------------------------------------------------------------
// 3. Router gradient: exactly zero without gate use (SPEC §11 C2, §4.6), non-zero with it.

TEST_CASE_TEMPLATE("router gradient is exactly zero with gates none, non-zero with a gate", Spec, gradt::sse_gates_none,
                   gradt::sse_delta_gates_none, gradt::sse_n4k1s, gradt::sse_gates_write, gradt::sse_gates_read,
                   gradt::sse_delta_gates_read) {
  constexpr bool off = Spec::router::options.gates == rt::gate::none;
  problem_case pc = make_case<Spec>(cpu_layouts()[1], true, true, 55);
  const auto ref = linstate::reference::backward<Spec>(pc.data.view(), pc.cot(), pc.opt);
  if (off) CHECK(max_abs(ref.router_logits) == 0.0);
  else CHECK(max_abs(ref.router_logits) > 0.0);
  for_each_strategy([&](auto strat) {
    for_each_algorithm([&](auto algo) {
      INFO("run: ", name_of(algo), "/", name_of(strat));
      const auto r = cpu_backward<Spec>(pc, algo, strat);
      REQUIRE(r.router_logits.shape() == pc.data.router_logits.shape());
      if (off) CHECK(std::all_of(r.router_logits.values().begin(), r.router_logits.values().end(), [](float x) { return x == 0.f; }));
      else CHECK(max_abs(r.router_logits) > 0.0);
      // the softmax backward conserves the sum: Σ_n dlogit_n = 0 for every token (SPEC §4.6)
      const index_t N = r.router_logits.shape()[2];
      double worst = 0;
      for (index_t t = 0; t < r.router_logits.numel() / N; ++t) {
        double s = 0, m = 0;
        for (index_t n = 0; n < N; ++n) s += r.router_logits[t * N + n], m = std::max(m, std::abs(double(r.router_logits[t * N + n])));
        worst = std::max(worst, std::abs(s) / (m + 1e-30));
      }
      CHECK(worst <= 1e-5);
    });
  });
}

// ------------------------------------------------------------------------------------------------
// 4. P13 (SPEC §9.1, §2.4 (e)/(f)): dg_t = revcumsum_t(q⊙dq − k⊙dk) + rowsum(h_T ⊙ dht), per
// sequence, for every partition fed by its own q, k, g (GLA; the shared partition of SSE). For the
// scalar decay the same identity holds summed over the key channels.

//! Checks the identity on one family: q, k, g `[B,T,H,K]` (HV = H), their gradients, h_T and dht of
//! partition p. Returns max|lhs − rhs| / max|dg|.
template <class TG, class TS>
double p13_error(const problem_case& pc, const tensor<float>& q, const tensor<float>& k, const TG& dq, const TG& dk,
                 const TG& dg, const TS& hT, index_t p, bool scalar_gate) {
  const sizes& d = pc.data.cfg.dims;
  const index_t H = d.H, K = d.K, V = d.V, P = pc.data.cfg.partitions;
  const index_t S = pc.data.num_sequences();
  std::vector<std::int64_t> cu = pc.data.cu_seqlens;
  if (cu.empty())
    for (index_t s = 0; s <= S; ++s) cu.push_back(s * d.T);
  double err = 0, scale = 0;
  for (index_t s = 0; s < S; ++s)
    for (index_t h = 0; h < H; ++h) {
      std::vector<double> acc(static_cast<std::size_t>(K), 0.0);
      for (index_t i = 0; i < K; ++i)  // rowsum(h_T ⊙ dht)
        for (index_t j = 0; j < V; ++j) {
          const index_t o = (((s * P + p) * H + h) * K + i) * V + j;
          acc[i] += double(hT[o]) * (pc.dht.empty() ? 0.0 : double(pc.dht[o]));
        }
      for (index_t t = cu[s + 1] - 1; t >= cu[s]; --t) {
        double lhs_sum = 0;
        for (index_t i = 0; i < K; ++i) {
          const index_t o = (t * H + h) * K + i;
          acc[i] += double(q[o]) * double(dq[o]) - double(k[o]) * double(dk[o]);
          if (scalar_gate) lhs_sum += acc[i];
          else err = std::max(err, std::abs(acc[i] - double(dg[o]))), scale = std::max(scale, std::abs(double(dg[o])));
        }
        if (scalar_gate) {
          const double g = double(dg[t * H + h]);
          err = std::max(err, std::abs(lhs_sum - g)), scale = std::max(scale, std::abs(g));
        }
      }
    }
  return scale > 0 ? err / scale : err;
}

TEST_CASE_TEMPLATE("P13: dg identity (GLA, scalar decay, SSE shared partition), oracle and CPU", Spec, gradt::gla,
                   gradt::retention, gradt::sse_n4k1s) {
  constexpr bool shared = Spec::partition::has_shared;
  constexpr bool scalar_gate = (Spec::decay::gate == linstate::gate_extent::head);
  const std::vector<layout> ls = {
      {"batched B=3 H=HV=2 K=8 V=12", {.B = 3, .T = 90, .H = 2, .HV = 2, .K = 8, .V = 12}, {}},
      {"packed lengths 0,70,1,29 H=HV=2 K=16 V=8", {.B = 1, .T = 100, .H = 2, .HV = 2, .K = 16, .V = 8}, {0, 0, 70, 71, 100}},
  };
  for (const layout& l : ls)
    for (const bool with_state : {true, false}) {
      INFO("layout: ", l.name, ", initial_state and dht: ", with_state);
      problem_case pc = make_case<Spec>(l, with_state, with_state, 444, 1.f);
      const random_inputs& d = pc.data;
      const tensor<float>& q = shared ? d.shared_q : d.q;
      const tensor<float>& k = shared ? d.shared_k : d.k;
      {
        const auto ref = linstate::reference::backward<Spec>(d.view(), pc.cot(), pc.opt);
        const auto fwd = linstate::reference::forward_fp64_router<Spec>(d.view(), pc.opt);
        const auto& dq = shared ? ref.shared.q : ref.q;
        const auto& dk = shared ? ref.shared.k : ref.k;
        const auto& dg = shared ? ref.shared.g : ref.g;
        CHECK(p13_error(pc, q, k, dq, dk, dg, fwd.final_state, 0, scalar_gate) <= 1e-11);
      }
      for_each_strategy([&](auto strat) {
        for_each_algorithm([&](auto algo) {
          INFO("run: ", name_of(algo), "/", name_of(strat));
          const auto r = cpu_backward<Spec>(pc, algo, strat);
          const auto fwd = linstate::forward<Spec>(be, d.view(), algo, strat, pc.opt);
          const auto& dq = shared ? r.shared.q : r.q;
          const auto& dk = shared ? r.shared.k : r.k;
          const auto& dg = shared ? r.shared.g : r.g;
          CHECK(p13_error(pc, q, k, dq, dk, dg, fwd.final_state, 0, scalar_gate) <= 1e-5);
        });
      });
    }
}

// ------------------------------------------------------------------------------------------------
// 5. bf16 inputs: gradients against the fp32 run on the same rounded inputs (SPEC §11 C10, §9.3).

TEST_CASE_TEMPLATE("bf16 gradients match the fp32 run on the same rounded inputs (SPEC §9.3 ratios)", Spec, gradt::gla,
                   gradt::retention, gradt::sse_n4k1s, gradt::sse_n4w1r3, gradt::gdn, gradt::sse_gdn_n4w2r1s) {
  using bf16 = Eigen::bfloat16;
  problem_case pc = make_case<Spec>(cpu_layouts()[0], true, true, 909);
  pc.data.round_to<bf16>();
  for (float& x : pc.dO.values()) x = static_cast<float>(static_cast<bf16>(x));
  const cast_inputs<bf16> in16(pc.data);
  tensor<bf16> dO16(pc.dO.shape());
  for (index_t i = 0; i < pc.dO.numel(); ++i) dO16[i] = static_cast<bf16>(pc.dO[i]);
  const linstate::cotangents<bf16> cot16{.o = dO16.view(), .final_state = pc.dht.view()};
  // GDN: dq, dk, dv, dh0 0.008 and dg, dβ 0.02; GLA family 0.005 (router logits likewise)
  const double t_main = is_delta<Spec> ? 0.008 : 0.005, t_gate = is_delta<Spec> ? 0.02 : 0.005;
  auto run = [&](auto algo, auto strat) {
    INFO("run: ", name_of(algo), "/", name_of(strat));
    const auto r32 = cpu_backward<Spec>(pc, algo, strat);
    const auto r16 = linstate::backward<Spec>(be, in16.view(), cot16, algo, strat, pc.opt);
    auto chk = [&](const char* name, const auto& a, const auto& b, double tol) {
      INFO("gradient ", std::string(name), ": ratio ", rms_ratio(a, b));
      CHECK(a.empty() == b.empty());
      if (b.empty()) return;
      CHECK(max_abs(b) > 0.0);
      CHECK(rms_ratio(a, b) < tol);
    };
    chk("q", r16.q, r32.q, t_main), chk("k", r16.k, r32.k, t_main), chk("v", r16.v, r32.v, t_main);
    chk("g", r16.g, r32.g, t_gate), chk("beta", r16.beta, r32.beta, t_gate);
    chk("shared.q", r16.shared.q, r32.shared.q, t_main), chk("shared.k", r16.shared.k, r32.shared.k, t_main);
    chk("shared.g", r16.shared.g, r32.shared.g, t_gate), chk("shared.beta", r16.shared.beta, r32.shared.beta, t_gate);
    chk("router_logits", r16.router_logits, r32.router_logits, t_main);
    // dh0 is fp32 in both runs and sees the same rounded inputs: only accumulation order may differ
    chk("initial_state", r16.initial_state, r32.initial_state, t_main);
    CHECK(max_rel_err(r16.initial_state, r32.initial_state) <= tol_ref);
  };
  run(linstate::recurrent{}, linstate::varlen{});
  run(linstate::chunked<16>{}, linstate::mask{});
  run(linstate::automatic{}, linstate::mask{});
}

// ------------------------------------------------------------------------------------------------
// 6. Gradient views: a gradient for an absent input throws; a view of the wrong shape throws and
// writes nothing (linstate::error is thrown before anything is written, tensor.hpp).

template <class Spec>
struct view_fixture {
  problem_case pc;
  linstate::gradient_result<float> buf;  // every possible gradient, filled with a sentinel
  explicit view_fixture(std::uint64_t seed) : pc(make_case<Spec>(cpu_layouts()[1], true, true, seed)) {
    buf = linstate::backward<Spec>(be, pc.data.view(), pc.cot(), linstate::recurrent{}, linstate::varlen{}, pc.opt);
    for (tensor<float>* t : all()) std::fill(t->values().begin(), t->values().end(), 12345.f);
  }
  std::vector<tensor<float>*> all() {
    return {&buf.q, &buf.k, &buf.v, &buf.g, &buf.beta, &buf.shared.q, &buf.shared.k, &buf.shared.g, &buf.shared.beta,
            &buf.router_logits, &buf.initial_state};
  }
  linstate::gradients<float> views() {
    auto vw = [](tensor<float>& t) { return t.empty() ? linstate::tensor_view<float>{} : t.view(); };
    return {vw(buf.q), vw(buf.k), vw(buf.v), vw(buf.g), vw(buf.beta),
            {vw(buf.shared.q), vw(buf.shared.k), vw(buf.shared.g), vw(buf.shared.beta)},
            vw(buf.router_logits), vw(buf.initial_state)};
  }
  bool untouched() {
    for (tensor<float>* t : all())
      if (!std::all_of(t->values().begin(), t->values().end(), [](float x) { return x == 12345.f; })) return false;
    return true;
  }
  void call(const linstate::gradients<float>& g) {
    linstate::backward<Spec>(be, pc.data.view(), pc.cot(), g, linstate::chunked<16>{}, linstate::mask{}, pc.opt);
  }
};

TEST_CASE("gradient views: a gradient for an input that was not given throws and writes nothing") {
  {  // GLA: no beta, no shared partition, no router
    view_fixture<gradt::gla> f(5);
    tensor<float> extra(f.pc.data.g.shape());
    tensor<float> logits({f.pc.data.cfg.dims.B, f.pc.data.cfg.dims.T, 4});
    auto g = f.views();
    g.beta = extra.view();
    CHECK_THROWS_AS(f.call(g), linstate::error);
    tensor<float> sq(f.pc.data.q.shape());
    g = f.views(), g.shared.q = sq.view();
    CHECK_THROWS_AS(f.call(g), linstate::error);
    g = f.views(), g.router_logits = logits.view();
    CHECK_THROWS_AS(f.call(g), linstate::error);
    CHECK(f.untouched());
    for (const tensor<float>* t : {&extra, &sq, &logits})
      CHECK(std::all_of(t->values().begin(), t->values().end(), [](float x) { return x == 0.f; }));
  }
  {  // decay::none: no g
    view_fixture<gradt::linear_attn> f(6);
    tensor<float> gg({f.pc.data.cfg.dims.B, f.pc.data.cfg.dims.T, f.pc.data.cfg.dims.HV, f.pc.data.cfg.dims.K});
    auto g = f.views();
    g.g = gg.view();
    CHECK_THROWS_AS(f.call(g), linstate::error);
    CHECK(f.untouched());
  }
  {  // SSE with gates: the views are accepted and written (the sentinel disappears)
    view_fixture<gradt::sse_gdn_n4k1s> f(7);
    f.call(f.views());
    CHECK_FALSE(f.untouched());
    for (tensor<float>* t : f.all()) CHECK(std::none_of(t->values().begin(), t->values().end(), [](float x) { return x == 12345.f; }));
  }
}

TEST_CASE_TEMPLATE("gradient views: a view of the wrong shape throws and writes nothing", Spec, gradt::gla, gradt::sse_n4k1s,
                   gradt::sse_gdn_n4w2r1s) {
  view_fixture<Spec> f(8);
  const auto names = std::vector<std::string>{"q", "k", "v", "g", "beta", "shared.q", "shared.k", "shared.g",
                                              "shared.beta", "router_logits", "initial_state"};
  int tried = 0;
  for (std::size_t which = 0; which < names.size(); ++which) {
    if (f.all()[which]->empty()) continue;
    INFO("wrong shape for gradient ", names[which]);
    // one element short in the last dimension, and one extra leading row: both refused
    for (int mode = 0; mode < 2; ++mode) {
      const linstate::shape_t s = f.all()[which]->shape();
      std::vector<index_t> dims(s.begin(), s.end());
      if (mode == 0) dims.back() -= 1;
      else dims.front() += 1;
      tensor<float> wrong(linstate::shape_t::from_range(dims.begin(), dims.end()));
      std::fill(wrong.values().begin(), wrong.values().end(), 12345.f);
      auto g = f.views();
      linstate::tensor_view<float>* slots[] = {&g.q, &g.k, &g.v, &g.g, &g.beta, &g.shared.q, &g.shared.k,
                                               &g.shared.g, &g.shared.beta, &g.router_logits, &g.initial_state};
      *slots[which] = wrong.view();
      CHECK_THROWS_AS(f.call(g), linstate::error);
      CHECK(f.untouched());
      CHECK(std::all_of(wrong.values().begin(), wrong.values().end(), [](float x) { return x == 12345.f; }));
      ++tried;
    }
  }
  CHECK(tried >= 8);
  // a dO of the wrong shape, or a dht of the wrong shape: refused too (and nothing written)
  {
    tensor<float> bad_dO({f.pc.dO.shape()[0], f.pc.dO.shape()[1], f.pc.dO.shape()[2], f.pc.dO.shape()[3] + 1});
    linstate::cotangents<float> c{.o = bad_dO.view(), .final_state = f.pc.dht.view()};
    CHECK_THROWS_AS(linstate::backward<Spec>(be, f.pc.data.view(), c, f.views(), linstate::recurrent{}, linstate::varlen{}, f.pc.opt),
                    linstate::error);
    CHECK_THROWS_AS(linstate::reference::backward<Spec>(f.pc.data.view(), c, f.pc.opt), linstate::error);
    tensor<float> bad_dht({f.pc.dht.shape()[0] + 1, f.pc.dht.shape()[1], f.pc.dht.shape()[2], f.pc.dht.shape()[3],
                           f.pc.dht.shape()[4]});
    linstate::cotangents<float> c2{.o = f.pc.dO.view(), .final_state = bad_dht.view()};
    CHECK_THROWS_AS(linstate::backward<Spec>(be, f.pc.data.view(), c2, f.views(), linstate::recurrent{}, linstate::varlen{}, f.pc.opt),
                    linstate::error);
    CHECK_THROWS_AS(linstate::reference::backward<Spec>(f.pc.data.view(), c2, f.pc.opt), linstate::error);
    CHECK(f.untouched());
  }
}

}  // namespace gradt
}  // namespace
