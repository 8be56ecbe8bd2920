// SPDX-License-Identifier: Apache-2.0
//! \file tests/variants/test_extreme_gates.cpp
//! \brief Very negative, finite or infinite log-decays (issue 10, part 5): the chunked forms must give
//! what the recurrence and the fp64 reference give. The chunked kernels floor each log-decay at −104
//! (linstate::detail::chunked_log_decay_floor, transition.hpp): without the floor one gate of −1e4
//! costs the later gates their precision, −1e30 swallows them (no decay at all), −inf gives NaN.
//!
//! Covered: the repro (GLA, B = H = 1, T = 64, K = V = 1, q = k = v = 1, scale 1, g = −0.1 but
//! one gate G ∈ {−1e4, −1e30, −inf}, first step of the sequence or mid-chunk for C = 16, 32, 64), with
//! the controls G = −104 and −103 (not floored); the same for the scalar decay and the gated delta
//! rule; random inputs with such gates on a few steps (every key row, or every other one) for GLA,
//! the scalar decay, the gated delta rule and SSE (mask and varlen, shared and routed gates), forward
//! against the recurrence and the fp64 reference, backward against the recurrent backward and the
//! fp64 reference backward: every value finite, and ∂L/∂g exactly 0 at a floored gate in every form.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <limits>
#include <linstate/linstate.hpp>
#include <linstate/reference/naive_backward.hpp>
#include <random>
#include <string>
#include <vector>

#include "random_inputs.hpp"

namespace {
namespace xg {

namespace dc = linstate::decay;
namespace pt = linstate::partition;
namespace rt = linstate::router;
using linstate::index_t;
using linstate::tensor;
using namespace linstate_test;

struct gla : linstate::spec<> {};
struct retention : gla { using decay = dc::scalar; };
struct gdn : gla { using decay = dc::gated_delta_rule<true>; };
struct sse_n4k1s : gla {
  using partition = pt::routed<4, pt::shared>;
  using router = rt::top_k<1>;
};

constexpr float inf = std::numeric_limits<float>::infinity();
//! The gates the floor replaces, with the names.
constexpr float huge_gates[] = {-1e4f, -1e30f, -inf};

std::string gate_name(float G) {
  if (std::isinf(G)) return "-inf";
  char b[32];
  std::snprintf(b, sizeof b, "%g", static_cast<double>(G));
  return b;
}

//! f(algorithm value, name) for the recurrence and the chunked forms of C = 16, 32, 64.
template <class F>
void for_each_algorithm(F&& f) {
  f(linstate::recurrent{}, "recurrent");
  f(linstate::chunked<16>{}, "chunked<16>");
  f(linstate::chunked<32>{}, "chunked<32>");
  f(linstate::chunked<64>{}, "chunked<64>");
}

// --- 1. the repro ------------------------------------------------------------------------

//! The repro's inputs: T = 64, K = V = 1, q = k = v = 1, g = −0.1 but g[at] = G, β = 1/2 (delta rule).
struct repro {
  tensor<float> q{linstate::shape_t{1, 64, 1, 1}}, k{linstate::shape_t{1, 64, 1, 1}}, v{linstate::shape_t{1, 64, 1, 1}}, g,
      beta{linstate::shape_t{1, 64, 1}};
  repro(bool per_key, index_t at, float G) : g(per_key ? linstate::shape_t{1, 64, 1, 1} : linstate::shape_t{1, 64, 1}) {
    for (tensor<float>* t : {&q, &k, &v}) t->values().assign(64, 1.f);
    g.values().assign(64, -0.1f);
    g[at] = G;
    beta.values().assign(64, 0.5f);
  }
  linstate::inputs<float> view(bool with_beta) const {
    linstate::inputs<float> in{.q = q.view(), .k = k.view(), .v = v.view(), .g = g.view()};
    if (with_beta) in.beta = beta.view();
    return in;
  }
};

//! o[63] and the final state of every algorithm against the fp64 reference (and, for GLA, against the
//! closed form Σ_{d ≤ 63 − at} e^{−0.1 d}: the huge gate forgets every earlier step).
template <class Spec>
void check_repro(index_t at, float G) {
  using D = typename Spec::decay;
  const repro r(D::gate == linstate::gate_extent::key, at, G);
  const auto in = r.view(D::uses_beta);
  const linstate::options opt{.scale = 1.f};
  const auto ref = linstate::reference::forward<Spec>(in, opt);
  const double o_ref = ref.o[63];
  CAPTURE(at);
  CAPTURE(gate_name(G));
  CAPTURE(o_ref);
  if constexpr (!D::uses_beta) {
    double closed = 0;
    for (index_t d = 0; d <= 63 - at; ++d) closed += std::exp(static_cast<double>(-0.1f) * static_cast<double>(d));
    if (G < -104.f) CHECK(std::abs(o_ref - closed) <= 1e-12 * closed);  // λ below the floor: exactly forgotten
  }
  for_each_algorithm([&](auto algorithm, const char* name) {
    INFO("algorithm: ", std::string(name));
    const auto got = linstate::forward<Spec>(linstate::cpu{}, in, algorithm, linstate::varlen{}, opt);
    const double o63 = got.o[63];
    CAPTURE(o63);
    CHECK(all_finite(got.o));
    CHECK(all_finite(got.final_state));
    CHECK(std::abs(o63 - o_ref) <= 5e-6 * std::abs(o_ref));
    CHECK(max_rel_err(got.o, ref.o) <= 5e-6);
    CHECK(max_rel_err(got.final_state, ref.final_state) <= 5e-6);
  });
}

TEST_CASE("extreme gates: the issue's repro, GLA (o[63] = 10.4909 in every form)") {
  for (float G : huge_gates) {
    check_repro<gla>(0, G);   // the first step of the sequence (and of every chunk)
    check_repro<gla>(20, G);  // mid-chunk for C = 16, 32 and 64
  }
  for (float G : {-104.f, -103.f}) check_repro<gla>(20, G);  // at and above the floor: unchanged
  SUBCASE("the issue's number") {
    const repro r(true, 0, -1e30f);
    const auto o = linstate::forward<gla>(linstate::cpu{}, r.view(false), linstate::chunked<64>{}, linstate::varlen{},
                                          linstate::options{.scale = 1.f}).o;
    CHECK(o[63] == doctest::Approx(10.4909).epsilon(1e-5));
  }
}

TEST_CASE("extreme gates: the issue's repro, scalar decay and gated delta rule") {
  for (float G : huge_gates) {
    check_repro<retention>(0, G), check_repro<retention>(20, G);
    check_repro<gdn>(0, G), check_repro<gdn>(20, G);
  }
  check_repro<retention>(20, -103.f), check_repro<gdn>(20, -103.f);
}

// --- 2. random inputs with a few huge gates ------------------------------------------------------

//! Random inputs of Spec (B = 2, T = 150, grouped value heads) whose gate is G at steps 0 (a chunk's
//! first row), 37 (mid-chunk for C = 16, 32), 70 (mid-chunk for C = 64) and 149 (the last step);
//! every key row, or every other one.
template <class Spec>
random_inputs huge_gate_inputs(float G, bool even_rows, std::uint64_t seed) {
  auto cfg = config_for<Spec>({.B = 2, .T = 150, .H = 2, .HV = 4, .K = 16, .V = 24});
  cfg.initial_state = true;
  random_inputs data(cfg, seed);
  set_gates(data, G, {0, 37, 70, 149}, even_rows);
  return data;
}

tensor<float> normal(const linstate::shape_t& s, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> nd;
  tensor<float> t(s);
  for (float& x : t.values()) x = nd(gen);
  return t;
}

//! Every gradient of `got` finite and within tol·max|ref| of `ref` (fp32 or fp64 reference).
template <class A, class B>
void check_grad(const char* name, const A& got, const B& ref, double tol) {
  INFO("gradient: ", std::string(name));
  if (ref.empty()) {
    CHECK(got.empty());
    return;
  }
  CHECK(all_finite(got));
  const double e = max_rel_err(got, ref);
  CAPTURE(e);
  CHECK(e <= tol);
}
template <class A, class B>
void check_grads(const A& got, const B& ref, double tol) {
  check_grad("dq", got.q, ref.q, tol), check_grad("dk", got.k, ref.k, tol), check_grad("dv", got.v, ref.v, tol);
  check_grad("dg", got.g, ref.g, tol), check_grad("dbeta", got.beta, ref.beta, tol);
  check_grad("shared.dq", got.shared.q, ref.shared.q, tol), check_grad("shared.dk", got.shared.k, ref.shared.k, tol);
  check_grad("shared.dg", got.shared.g, ref.shared.g, tol), check_grad("shared.dbeta", got.shared.beta, ref.shared.beta, tol);
  check_grad("dlogits", got.router_logits, ref.router_logits, tol);
  check_grad("dh0", got.initial_state, ref.initial_state, tol);
}

//! ∂L/∂g is exactly 0 wherever the gate is below the floor.
void check_floored_zero(const tensor<float>& g, const tensor<float>& dg, const char* name) {
  if (g.empty()) return;
  INFO("gradient: ", std::string(name));
  index_t floored = 0, nonzero = 0;
  for (index_t i = 0; i < g.numel(); ++i)
    if (g[i] < linstate::detail::chunked_log_decay_floor) ++floored, nonzero += dg[i] != 0.f;
  CHECK(floored > 0);
  CHECK(nonzero == 0);
}

//! Tolerance of the random cases, `max|a − b| ≤ tol·max|b|`: after a floored gate a chunk's Γ sits
//! near −104, where fp32 values are 2^−17 ≈ 7.6e-6 apart, so each chunked factor e^{Γ_t − Γ_j} may
//! be off by about that much (as for any legitimate gate of that size). Measured maxima (CPU): forward
//! 7.6e-6 (gated delta rule, chunked<64>), 5.6e-6 (GLA), backward 6.6e-6 (delta rule), 5.7e-7 (GLA
//! family, whose backward forms the Γ differences in fp64); the recurrence 7e-7.
constexpr double extreme_tol = 2e-5;

//! Forward (o, final state) and backward (every gradient) of every algorithm: against the fp64
//! reference at `tol_ref`, and the chunked forms against the recurrence at `tol_rec`.
template <class Spec, class Strategy = linstate::varlen>
void check_random(const random_inputs& data, const std::string& what, double tol_ref = extreme_tol,
                  double tol_rec = extreme_tol) {
  CAPTURE(what);
  const auto in = data.view();
  const auto ref = linstate::reference::forward<Spec>(in);
  const tensor<float> dO = normal(data.output_shape(), 17), dht = normal(data.state_shape(), 19);
  const linstate::cotangents<float> d{.o = dO.view(), .final_state = dht.view()};
  const auto gref = linstate::reference::backward<Spec>(in, d);
  const auto grec = linstate::backward<Spec>(linstate::cpu{}, in, d, linstate::recurrent{}, Strategy{});
  const auto rec = linstate::forward<Spec>(linstate::cpu{}, in, linstate::recurrent{}, Strategy{});
  for_each_algorithm([&](auto algorithm, const char* name) {
    INFO("algorithm: ", std::string(name));
    const auto got = linstate::forward<Spec>(linstate::cpu{}, in, algorithm, Strategy{});
    CHECK(all_finite(got.o));
    CHECK(all_finite(got.final_state));
    const double eo = max_rel_err(got.o, ref.o), es = max_rel_err(got.final_state, ref.final_state);
    CAPTURE(eo);
    CAPTURE(es);
    CHECK(eo <= tol_ref);
    CHECK(es <= tol_ref);
    CHECK(max_rel_err(got.o, rec.o) <= tol_rec);
    CHECK(max_rel_err(got.final_state, rec.final_state) <= tol_rec);
    const auto gr = linstate::backward<Spec>(linstate::cpu{}, in, d, algorithm, Strategy{});
    check_grads(gr, gref, tol_ref);
    check_grads(gr, grec, tol_rec);
    check_floored_zero(data.g, gr.g, "dg");
    check_floored_zero(data.shared_g, gr.shared.g, "shared.dg");
  });
}

TEST_CASE("extreme gates: random inputs, GLA, scalar decay, gated delta rule (forward and backward)") {
  for (float G : huge_gates) {
    const std::string g = " G=" + gate_name(G);
    check_random<gla>(huge_gate_inputs<gla>(G, false, 1), "gla all rows" + g);
    check_random<gla>(huge_gate_inputs<gla>(G, true, 2), "gla even rows" + g);
    check_random<retention>(huge_gate_inputs<retention>(G, false, 3), "scalar" + g);
    check_random<gdn>(huge_gate_inputs<gdn>(G, false, 4), "gdn" + g);
  }
}

TEST_CASE("extreme gates: random inputs, SSE (shared and routed gates), mask and varlen") {
  for (float G : huge_gates) {
    const std::string g = " G=" + gate_name(G);
    const auto data = huge_gate_inputs<sse_n4k1s>(G, true, 5);
    check_random<sse_n4k1s, linstate::varlen>(data, "sse varlen" + g);
    check_random<sse_n4k1s, linstate::mask>(data, "sse mask" + g);
  }
}

}  // namespace xg
}  // namespace
