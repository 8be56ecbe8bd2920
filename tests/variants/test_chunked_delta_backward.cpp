// SPDX-License-Identifier: Apache-2.0
//! \file tests/variants/test_chunked_delta_backward.cpp
//! \brief The chunk-parallel backward of the gated delta rule (WY form, SPEC §3.2) against the
//! checkpointed recurrent backward, and the recurrent backward itself against central finite
//! differences of the fp64 reference (SPEC §3.1, §11 C9).
//!
//! Tolerances: chunked vs recurrent (two fp32 paths) `max|a − b| ≤ 1e-5 · max|recurrent|` per
//! gradient tensor; recurrent vs finite differences of the fp64 reference `≤ 1e-4 · max|fd|` (the
//! analytic gradient is fp32, the difference quotient has O(h²) truncation with h = 2⁻¹³).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <random>
#include <type_traits>
#include <linstate/linstate.hpp>
#include <string>
#include <utility>
#include <vector>

#include "random_inputs.hpp"

namespace {
namespace cdb {

namespace dc = linstate::decay;
namespace pt = linstate::partition;
namespace rt = linstate::router;
using linstate::index_t;
using linstate::tensor;
using namespace linstate_test;

struct gdn : linstate::spec<> { using decay = dc::gated_delta_rule<true>; };
struct delta_nol2 : linstate::spec<> { using decay = dc::gated_delta_rule<false>; };
struct sse_gdn_k1 : gdn {
  using partition = pt::routed<4, pt::shared>;
  using router = rt::top_k<1>;
};
struct sse_gdn_w2r1 : sse_gdn_k1 { using router = rt::top_k<2, 1>; };
struct sse_gdn_w1r2 : sse_gdn_k1 { using router = rt::top_k<1, 2>; };
struct sse_delta_nol2_k1 : sse_gdn_k1 { using decay = dc::gated_delta_rule<false>; };
struct sse_gdn_n3_w1r2 : gdn {  // no shared partition: tokens that select nothing leave every state frozen
  using partition = pt::routed<3>;
  using router = rt::top_k<1, 2>;
};

//! Every gradient tensor of a gradient_result, by name (absent ones are skipped by the callers).
template <class R>
std::vector<std::pair<std::string, const tensor<float>*>> grads_of(const R& r) {
  return {{"q", &r.q},
          {"k", &r.k},
          {"v", &r.v},
          {"g", &r.g},
          {"beta", &r.beta},
          {"shared.q", &r.shared.q},
          {"shared.k", &r.shared.k},
          {"shared.g", &r.shared.g},
          {"shared.beta", &r.shared.beta},
          {"router_logits", &r.router_logits},
          {"initial_state", &r.initial_state}};
}

//! f(name, a.x, b.x) for every gradient tensor x of two gradient_results (any element type).
template <class R, class F>
void for_each_grad(const R& a, const R& b, F f) {
  f("q", a.q, b.q), f("k", a.k, b.k), f("v", a.v, b.v), f("g", a.g, b.g), f("beta", a.beta, b.beta);
  f("shared.q", a.shared.q, b.shared.q), f("shared.k", a.shared.k, b.shared.k);
  f("shared.g", a.shared.g, b.shared.g), f("shared.beta", a.shared.beta, b.shared.beta);
  f("router_logits", a.router_logits, b.router_logits), f("initial_state", a.initial_state, b.initial_state);
}

tensor<float> random_like(const linstate::shape_t& s, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> nd;
  tensor<float> t(s);
  for (float& x : t.values()) x = nd(gen);
  return t;
}

//! A problem: random inputs, dO and dht.
struct problem_data {
  random_inputs data;
  tensor<float> dO, dht;
  problem_data(const config& c, std::uint64_t seed)
      : data(c, seed), dO(random_like(data.output_shape(), seed + 101)), dht(random_like(data.state_shape(), seed + 202)) {}
  linstate::cotangents<float> cot() const { return {.o = dO.view(), .final_state = dht.view()}; }
};

template <class Spec, class Strategy, index_t C>
void compare_chunked(const problem_data& p, const std::string& what) {
  const auto in = p.data.view();
  const auto ref = linstate::backward<Spec>(linstate::cpu{}, in, p.cot(), linstate::recurrent{}, Strategy{});
  const auto got = linstate::backward<Spec>(linstate::cpu{}, in, p.cot(), linstate::chunked<C>{}, Strategy{});
  const auto a = grads_of(got), b = grads_of(ref);
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (b[i].second->empty()) continue;
    const double m = max_abs(*b[i].second);
    const double e = max_rel_err(*a[i].second, *b[i].second);
    INFO(what, " C=", C, " ", std::string(Strategy::name), " gradient ", b[i].first, " max|rec|=", m, " rel err=", e);
    if (std::getenv("CDB_VERBOSE")) MESSAGE(what, " C=", C, " ", std::string(Strategy::name), " ", b[i].first, " rel err=", e);
    CHECK(m > 0);
    CHECK(e <= 1e-5);
  }
}

template <class Spec, class Strategy>
void compare_all_chunks(const problem_data& p, const std::string& what) {
  compare_chunked<Spec, Strategy, 16>(p, what);
  compare_chunked<Spec, Strategy, 32>(p, what);
  compare_chunked<Spec, Strategy, 64>(p, what);
}

template <class Spec>
void compare_both_strategies(const problem_data& p, const std::string& what) {
  compare_all_chunks<Spec, linstate::mask>(p, what);
  compare_all_chunks<Spec, linstate::varlen>(p, what);
}

//! Batched (B = 2, T = 75: not a multiple of any C), GVA (HV = 2H), K ≠ V, initial state and dht.
template <class Spec>
problem_data batched(std::uint64_t seed, float gate_normalizer = 16.f, float key_norm = -1.f) {
  auto c = config_for<Spec>({.B = 2, .T = 75, .H = 2, .HV = 4, .K = 16, .V = 24});
  c.initial_state = true;
  c.gate_normalizer = gate_normalizer;
  if (key_norm >= 0.f) c.key_norm = key_norm;
  return problem_data(c, seed);
}

//! Packed sequences with an empty one: lengths 40, 0, 70, 9, 33.
template <class Spec>
problem_data packed(std::uint64_t seed) {
  auto c = config_for<Spec>({.B = 1, .T = 152, .H = 2, .HV = 2, .K = 16, .V = 8});
  c.cu_seqlens = {0, 40, 40, 110, 119, 152};
  c.initial_state = true;
  return problem_data(c, seed);
}

TEST_CASE("chunked delta backward == recurrent backward: gdn (l2norm)") {
  compare_both_strategies<gdn>(batched<gdn>(1), "gdn batched");
  compare_both_strategies<gdn>(packed<gdn>(2), "gdn packed");
  compare_both_strategies<gdn>(batched<gdn>(3, 1.f), "gdn strong decay");
}

TEST_CASE("chunked delta backward == recurrent backward: delta rule without l2norm") {
  // raw keys scaled by 0.2 (|k| ≈ 0.8, so β|k|² < 2 and the recurrence is a contraction)
  auto p = batched<delta_nol2>(4, 16.f, 0.f);
  for (float& x : p.data.k.values()) x *= 0.2f;
  compare_both_strategies<delta_nol2>(p, "delta_nol2 batched (0.2·k)");
  compare_both_strategies<delta_nol2>(packed<delta_nol2>(5), "delta_nol2 packed (|k| = 1)");
}

TEST_CASE("chunked delta backward == recurrent backward: SSE over the gated delta rule") {
  compare_both_strategies<sse_gdn_k1>(batched<sse_gdn_k1>(6), "sse top_k<1>");
  compare_both_strategies<sse_gdn_w2r1>(batched<sse_gdn_w2r1>(7), "sse top_k<2,1>");
  compare_both_strategies<sse_gdn_w1r2>(batched<sse_gdn_w1r2>(8), "sse top_k<1,2>");
  compare_both_strategies<sse_gdn_k1>(packed<sse_gdn_k1>(9), "sse top_k<1> packed");
  compare_both_strategies<sse_gdn_w1r2>(packed<sse_gdn_w1r2>(10), "sse top_k<1,2> packed");
  compare_both_strategies<sse_gdn_n3_w1r2>(batched<sse_gdn_n3_w1r2>(11), "sse n3 top_k<1,2> no shared");
  compare_both_strategies<sse_delta_nol2_k1>(batched<sse_delta_nol2_k1>(12), "sse delta_nol2 top_k<1>");
}

TEST_CASE("chunked delta backward: chunk sizes that do not divide the stream, and C = 1") {
  const auto p = batched<sse_gdn_w1r2>(13);
  compare_chunked<sse_gdn_w1r2, linstate::varlen, 7>(p, "sse top_k<1,2> C=7");
  compare_chunked<sse_gdn_w1r2, linstate::mask, 1>(p, "sse top_k<1,2> C=1");
  compare_chunked<gdn, linstate::varlen, 128>(batched<gdn>(14), "gdn C=128 > T");
}

TEST_CASE("chunked delta backward: whole chunks that only read, or do nothing (frozen partitions)") {
  // top_k<1,2> over 4 partitions: on tokens [10, 60) of every row partition 0 is written and read,
  // partition 2 only read, partitions 1 and 3 untouched — so chunks of 16 inside that range are
  // read-only (partition 2) or empty (1, 3) in the mask stream, and read-only in the varlen one.
  auto p = batched<sse_gdn_w1r2>(15);
  const index_t T = p.data.cfg.dims.T, N = p.data.cfg.dims.N;
  for (index_t b = 0; b < p.data.cfg.dims.B; ++b)
    for (index_t t = 10; t < 60; ++t)
      for (index_t n = 0; n < N; ++n) p.data.router_logits[(b * T + t) * N + n] = n == 0 ? 4.f : n == 2 ? 2.f : 0.f;
  compare_chunked<sse_gdn_w1r2, linstate::mask, 16>(p, "frozen mask");
  compare_chunked<sse_gdn_w1r2, linstate::varlen, 16>(p, "frozen varlen");
}

TEST_CASE("chunked delta backward == recurrent backward: bf16 inputs") {
  // Both paths compute in fp32 from the same bf16 inputs and round the gradients to bf16: they may
  // differ by a unit in the last place of bf16 (2⁻⁸ relative) where fp32 rounding tips it.
  auto run = [](auto spec_tag, std::uint64_t seed, const std::string& what) {
    using Spec = typename decltype(spec_tag)::type;
    auto p = batched<Spec>(seed);
    p.data.template round_to<Eigen::bfloat16>();
    const cast_inputs<Eigen::bfloat16> low(p.data);
    tensor<Eigen::bfloat16> dO(p.dO.shape());
    for (index_t i = 0; i < dO.numel(); ++i) dO[i] = static_cast<Eigen::bfloat16>(p.dO[i]);
    const linstate::cotangents<Eigen::bfloat16> cot{.o = dO.view(), .final_state = p.dht.view()};
    const auto ref = linstate::backward<Spec>(linstate::cpu{}, low.view(), cot, linstate::recurrent{}, linstate::mask{});
    const auto got = linstate::backward<Spec>(linstate::cpu{}, low.view(), cot, linstate::chunked<32>{}, linstate::mask{});
    for_each_grad(got, ref, [&](const char* name, const auto& x, const auto& y) {
      if (y.empty()) return;
      const double e = max_rel_err(x, y);
      INFO(what, " bf16 gradient ", std::string(name), " rel err=", e);
      if (std::getenv("CDB_VERBOSE")) MESSAGE(what, " bf16 ", std::string(name), " rel err=", e);
      CHECK(max_abs(y) > 0);
      CHECK(e <= 1e-2);
    });
  };
  run(std::type_identity<gdn>{}, 31, "gdn");
  run(std::type_identity<sse_gdn_w1r2>{}, 32, "sse top_k<1,2>");
}

// ------------------------------------------------------------------------------------------------
// Finite differences of the fp64 reference: L = Σ o·dO + Σ final·dht.

template <class Spec>
double loss(const random_inputs& d, const problem_data& p) {
  const auto r = linstate::reference::forward<Spec>(d.view());
  double l = 0;
  for (index_t i = 0; i < r.o.numel(); ++i) l += r.o[i] * static_cast<double>(p.dO[i]);
  for (index_t i = 0; i < r.final_state.numel(); ++i) l += r.final_state[i] * static_cast<double>(p.dht[i]);
  return l;
}

//! Central differences with h = 2⁻¹³ of every input element,
//! against the recurrent backward (and the chunked one).
template <class Spec, class Strategy = linstate::varlen>
void finite_differences(problem_data& p, const std::string& what) {
  const auto in = p.data.view();
  const auto rec = linstate::backward<Spec>(linstate::cpu{}, in, p.cot(), linstate::recurrent{}, Strategy{});
  const auto chk = linstate::backward<Spec>(linstate::cpu{}, in, p.cot(), linstate::chunked<4>{}, Strategy{});
  const auto an = grads_of(rec), an_c = grads_of(chk);
  std::vector<tensor<float>*> inputs = {&p.data.q,        &p.data.k,        &p.data.v,           &p.data.g,
                                        &p.data.beta,     &p.data.shared_q, &p.data.shared_k,    &p.data.shared_g,
                                        &p.data.shared_beta, &p.data.router_logits, &p.data.initial_state};
  const double h = 0x1p-13;  // x ± h exact in fp32 for |x| < 2¹¹
  for (std::size_t ti = 0; ti < inputs.size(); ++ti) {
    tensor<float>& x = *inputs[ti];
    if (x.empty()) continue;
    REQUIRE(!an[ti].second->empty());
    tensor<double> fd(x.shape());
    // The router's probabilities are fp32 (SPEC §11 C1), so the loss is a function of the logits only
    // to fp32 precision: a larger step with Richardson extrapolation keeps that noise (~ε/h) small.
    const bool logits = inputs[ti] == &p.data.router_logits;
    const double hx = logits ? 0x1p-4 : h;
    for (index_t i = 0; i < x.numel(); ++i) {
      const float x0 = x[i];
      auto central = [&](double step) {
        x[i] = static_cast<float>(x0 + step);
        const double lp = loss<Spec>(p.data, p);
        x[i] = static_cast<float>(x0 - step);
        const double lm = loss<Spec>(p.data, p);
        x[i] = x0;
        return (lp - lm) / (2 * step);
      };
      fd[i] = logits ? (4 * central(hx / 2) - central(hx)) / 3 : central(hx);
    }
    const double m = max_abs(fd);
    const double e = max_abs_diff(*an[ti].second, fd) / m;
    const double ec = max_abs_diff(*an_c[ti].second, fd) / m;
    INFO(what, " gradient ", an[ti].first, " max|fd|=", m, " recurrent rel err=", e, " chunked rel err=", ec);
    if (std::getenv("CDB_VERBOSE")) MESSAGE(what, " ", an[ti].first, " rec rel err=", e, " chunked rel err=", ec);
    CHECK(m > 0);
    CHECK(e <= 1e-4);
    CHECK(ec <= 1e-4);
  }
}

template <class Spec>
problem_data tiny(std::uint64_t seed, index_t H, index_t HV) {
  auto c = config_for<Spec>({.B = 1, .T = 9, .H = H, .HV = HV, .K = 4, .V = 4, .N = 2});
  c.initial_state = true;
  c.gate_normalizer = 2.f;  // decays well away from 1 so that dg is tested
  return problem_data(c, seed);
}

struct sse_gdn_n2 : gdn {
  using partition = pt::routed<2, pt::shared>;
  using router = rt::top_k<1, 2>;
};

TEST_CASE("recurrent delta-rule backward == finite differences of the fp64 reference") {
  {
    auto p = tiny<gdn>(21, 1, 1);
    finite_differences<gdn>(p, "gdn H=HV=1");
  }
  {
    auto p = tiny<gdn>(22, 1, 2);
    finite_differences<gdn>(p, "gdn H=1 HV=2");
  }
  {
    auto p = tiny<delta_nol2>(23, 1, 2);
    finite_differences<delta_nol2>(p, "delta_nol2 H=1 HV=2");
  }
  {
    auto p = tiny<sse_gdn_n2>(24, 1, 1);
    finite_differences<sse_gdn_n2, linstate::varlen>(p, "sse gdn n2 top_k<1,2> varlen");
    finite_differences<sse_gdn_n2, linstate::mask>(p, "sse gdn n2 top_k<1,2> mask");
  }
}

}  // namespace cdb
}  // namespace
