// SPDX-License-Identifier: Apache-2.0
// The router on its own (SPEC §4.4, §9.1 P7/P8, §11 C1–C3): linstate::detail::softmax, in_top_k and
// compute_routing, checked against independent computations (double-precision softmax, a sort-based
// top-k with the lowest-index tie rule, Eigen's bf16 rounding), plus router::dense end to end.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <linstate/linstate.hpp>
#include <numeric>
#include <random>
#include <set>
#include <vector>

namespace {

using linstate::index_t;
using linstate::detail::in_top_k;
using linstate::detail::problem;
using linstate::detail::routing;
using linstate::router::gate;

//! fp32 softmax through the library (the function under test for the selection checks).
std::vector<float> softmax_f(const std::vector<float>& x) {
  std::vector<float> p(x.size());
  linstate::detail::softmax(x.data(), static_cast<int>(x.size()), p.data());
  return p;
}

//! The top-k set of p under the lowest-index tie rule, from in_top_k.
std::set<int> top_k_set(const std::vector<float>& p, int k) {
  std::set<int> s;
  for (int i = 0; i < static_cast<int>(p.size()); ++i)
    if (in_top_k(p.data(), static_cast<int>(p.size()), k, i)) s.insert(i);
  return s;
}

//! Independent oracle: sort indices by (value descending, index ascending), keep the first k.
std::set<int> top_k_by_sort(const std::vector<float>& p, int k) {
  std::vector<int> idx(p.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return p[a] > p[b]; });  // stable: lower index first
  return {idx.begin(), idx.begin() + std::min<std::size_t>(static_cast<std::size_t>(k), idx.size())};
}

//! A router-only problem: `tokens` tokens of N logits each, for router::top_k with run-time settings.
using any_top_k = linstate::router::top_k<linstate::dynamic, linstate::dynamic>;
using top_k_problem = linstate::detail::problem_for<any_top_k>;
top_k_problem router_problem(index_t tokens, index_t N, int kw, int kr, gate gates = gate::both, bool renormalize = false,
                             bool round_to_input = false) {
  top_k_problem pb;
  pb.B = 1, pb.T = tokens, pb.H = 1, pb.HV = 1, pb.K = 1, pb.V = 1, pb.S = 1;
  pb.N = N, pb.P = N;
  pb.routed = true;
  pb.kw = kw, pb.kr = kr;
  pb.router_cfg.value = {kw, kr, gates, renormalize, round_to_input};
  return pb;
}

template <class Scalar>
routing route(const top_k_problem& pb, const std::vector<Scalar>& logits) {
  REQUIRE(static_cast<index_t>(logits.size()) == pb.tokens() * pb.N);
  routing rt;
  linstate::detail::compute_routing(pb, linstate::tensor_view<const Scalar>{logits.data(), {1, pb.T, pb.N}}, rt);
  return rt;
}

bool writes(const routing& rt, index_t t, index_t n) { return rt.flags[static_cast<std::size_t>(t * rt.N + n)] & linstate::detail::route_write; }
bool reads(const routing& rt, index_t t, index_t n) { return rt.flags[static_cast<std::size_t>(t * rt.N + n)] & linstate::detail::route_read; }
float at(const std::vector<float>& v, index_t t, index_t N, index_t n) { return v[static_cast<std::size_t>(t * N + n)]; }

//! Random logits with frequent exact ties (values from a small set) or continuous values.
std::vector<float> random_logits(std::mt19937& gen, index_t count, bool ties) {
  std::vector<float> x(static_cast<std::size_t>(count));
  std::uniform_int_distribution<int> small(-2, 2);
  std::normal_distribution<float> nd(0.f, 1.5f);
  for (auto& v : x) v = ties ? static_cast<float>(small(gen)) : nd(gen);
  return x;
}

}  // namespace

TEST_CASE("router: softmax is the max-subtracted fp32 softmax (SPEC §4.4)") {
  std::mt19937 gen(11);
  for (int N : {1, 2, 3, 4, 8, 16}) {
    for (int rep = 0; rep < 50; ++rep) {
      const auto x = random_logits(gen, N, false);
      const auto p = softmax_f(x);
      double m = *std::max_element(x.begin(), x.end()), s = 0;
      for (float v : x) s += std::exp(static_cast<double>(v) - m);
      float total = 0.f;
      for (int i = 0; i < N; ++i) {
        const double ref = std::exp(static_cast<double>(x[i]) - m) / s;
        // fp32: rounding of x - m (relative error ~ ulp · |x - m|), exp, sum and division
        CHECK(std::abs(p[i] - ref) <= 2e-6 * ref);
        CHECK(p[i] > 0.f);
        total += p[i];
      }
      CHECK(std::abs(total - 1.f) <= N * 1.2e-7f);
    }
  }
  SUBCASE("large logits do not overflow") {
    const auto p = softmax_f({1000.f, 1001.f, 999.f});
    for (float v : p) CHECK(std::isfinite(v));
    CHECK(p[1] > p[0]);
    CHECK(p[0] > p[2]);
    CHECK(p[1] == doctest::Approx(1.0 / (1.0 + std::exp(-1.0) + std::exp(-2.0))).epsilon(1e-6));
  }
  SUBCASE("equal logits give bit-identical probabilities (the precondition of the tie rule)") {
    const auto p = softmax_f({0.3f, -1.f, 0.3f, 0.3f, 2.f});
    CHECK(std::bit_cast<std::uint32_t>(p[0]) == std::bit_cast<std::uint32_t>(p[2]));
    CHECK(std::bit_cast<std::uint32_t>(p[0]) == std::bit_cast<std::uint32_t>(p[3]));
  }
  SUBCASE("N = 1 gives p = 1 exactly (SPEC §10: N = 1 kernel)") {
    CHECK(softmax_f({-7.5f})[0] == 1.f);
  }
}

TEST_CASE("router: P8 tie rule, the exact cases of SPEC §9.1") {
  struct tie_case {
    std::vector<float> logits;
    int k;
    std::set<int> expected;
  };
  const std::vector<tie_case> cases = {
      {{0, 1, 1, 0}, 1, {1}},    {{0, 1, 1, 0}, 2, {1, 2}},    {{1, 1, 1, 1}, 2, {0, 1}},
      {{5, 0, 5, 5}, 1, {0}},    {{5, 0, 5, 5}, 2, {0, 2}},    {{5, 0, 5, 5}, 3, {0, 2, 3}},
  };
  for (const auto& c : cases) {
    INFO("logits " << c.logits[0] << "," << c.logits[1] << "," << c.logits[2] << "," << c.logits[3] << " k = " << c.k);
    CHECK(top_k_set(softmax_f(c.logits), c.k) == c.expected);
    // the same through compute_routing, as the write set (kw = k) and as the read set (kr = k)
    const auto rt = route(router_problem(1, 4, c.k, c.k), c.logits);
    std::set<int> w, r;
    for (int n = 0; n < 4; ++n) {
      if (writes(rt, 0, n)) w.insert(n);
      if (reads(rt, 0, n)) r.insert(n);
    }
    CHECK(w == c.expected);
    CHECK(r == c.expected);
  }
}

TEST_CASE("router: in_top_k equals a sort-based selection with the lowest-index tie rule (property)") {
  std::mt19937 gen(2024);
  int checked = 0;
  for (int N : {1, 2, 3, 4, 5, 8, 16}) {
    for (int rep = 0; rep < 300; ++rep) {
      const bool ties = rep % 2 == 0;
      const auto p = softmax_f(random_logits(gen, N, ties));
      for (int k = 1; k <= N + 1; ++k) {  // k > N selects everything
        const auto got = top_k_set(p, k);
        CHECK(got == top_k_by_sort(p, k));
        CHECK(static_cast<int>(got.size()) == std::min(k, N));
        ++checked;
      }
    }
  }
  CHECK(checked > 1000);
}

TEST_CASE("router: P7 gate mass 0 < sum over the write set <= 1, and = 1 iff kw = N (SPEC §9.1)") {
  std::mt19937 gen(7);
  for (index_t N : {1, 2, 4, 8}) {
    const index_t T = 64;
    std::uniform_real_distribution<float> ud(-2.f, 2.f);  // range < 4: every p >= e^-4 / N, well above fp32 noise
    std::vector<float> logits(static_cast<std::size_t>(T * N));
    for (auto& x : logits) x = ud(gen);
    for (int kw = 1; kw <= N; ++kw) {
      // gate::write and no renormalisation: cw is the unrenormalised probability (SPEC §4.4, D8)
      const auto rt = route(router_problem(T, N, kw, 1, gate::write), logits);
      for (index_t t = 0; t < T; ++t) {
        double mass = 0, unselected = 0;
        for (index_t n = 0; n < N; ++n) {
          mass += at(rt.cw, t, N, n);
          if (!writes(rt, t, n)) unselected += at(rt.prob, t, N, n);
        }
        CHECK(mass > 0);
        CHECK(mass <= 1 + 1e-6);
        if (kw == N) {
          CHECK(mass == doctest::Approx(1).epsilon(1e-6));
        } else {
          REQUIRE(unselected > 1e-3);
          CHECK(mass < 1 - 0.5 * unselected);
          CHECK(mass + unselected == doctest::Approx(1).epsilon(1e-6));
        }
      }
    }
  }
}

TEST_CASE("router: kw != kr, the write and read sets are nested (SPEC §4.4, §11 C3)") {
  std::mt19937 gen(99);
  for (index_t N : {2, 3, 4, 8}) {
    const index_t T = 200;
    const auto logits = random_logits(gen, T * N, /*ties=*/true);
    for (int kw = 1; kw <= N; ++kw)
      for (int kr = 1; kr <= N; ++kr) {
        INFO("N = " << N << " kw = " << kw << " kr = " << kr);
        const auto rt = route(router_problem(T, N, kw, kr), logits);
        for (index_t t = 0; t < T; ++t) {
          int nw = 0, nr = 0;
          bool w_in_r = true, r_in_w = true;
          for (index_t n = 0; n < N; ++n) {
            nw += writes(rt, t, n), nr += reads(rt, t, n);
            w_in_r = w_in_r && (!writes(rt, t, n) || reads(rt, t, n));
            r_in_w = r_in_w && (!reads(rt, t, n) || writes(rt, t, n));
          }
          CHECK(nw == kw);
          CHECK(nr == kr);
          if (kr >= kw) CHECK(w_in_r);
          if (kw >= kr) CHECK(r_in_w);
        }
      }
  }
}

TEST_CASE("router: gate use none / write / read / both (SPEC §11 C2)") {
  std::mt19937 gen(5);
  const index_t N = 6, T = 50;
  const auto logits = random_logits(gen, T * N, true);
  for (gate gs : {gate::none, gate::write, gate::read, gate::both}) {
    const bool gw = gs == gate::write || gs == gate::both, gr = gs == gate::read || gs == gate::both;
    INFO("gates = " << static_cast<unsigned>(gs));
    const auto rt = route(router_problem(T, N, 2, 3, gs), logits);
    for (index_t t = 0; t < T; ++t)
      for (index_t n = 0; n < N; ++n) {
        const float p = at(rt.prob, t, N, n);
        CHECK(at(rt.cw, t, N, n) == (writes(rt, t, n) ? (gw ? p : 1.f) : 0.f));
        CHECK(at(rt.cr, t, N, n) == (reads(rt, t, n) ? (gr ? p : 1.f) : 0.f));
      }
    // the probabilities themselves do not depend on the gate option
    const auto p = softmax_f(std::vector<float>(logits.begin(), logits.begin() + N));
    for (index_t n = 0; n < N; ++n) CHECK(at(rt.prob, 0, N, n) == p[static_cast<std::size_t>(n)]);
  }
}

TEST_CASE("router: renormalize makes the selected mass 1, separately for the write and read sets (SPEC §11 C1)") {
  std::mt19937 gen(17);
  const index_t N = 8, T = 100;
  const auto logits = random_logits(gen, T * N, false);
  for (int kw : {1, 2, 5})
    for (int kr : {1, 3, 8}) {
      INFO("kw = " << kw << " kr = " << kr);
      const auto rt = route(router_problem(T, N, kw, kr, gate::both, /*renormalize=*/true), logits);
      for (index_t t = 0; t < T; ++t) {
        double sw = 0, sr = 0, pw = 0, pr = 0;
        for (index_t n = 0; n < N; ++n) {
          sw += at(rt.cw, t, N, n), sr += at(rt.cr, t, N, n);
          if (writes(rt, t, n)) pw += at(rt.prob, t, N, n);
          if (reads(rt, t, n)) pr += at(rt.prob, t, N, n);
        }
        CHECK(sw == doctest::Approx(1).epsilon(1e-6));
        CHECK(sr == doctest::Approx(1).epsilon(1e-6));
        for (index_t n = 0; n < N; ++n) {  // proportional to p within each set
          if (writes(rt, t, n)) CHECK(at(rt.cw, t, N, n) == doctest::Approx(at(rt.prob, t, N, n) / pw).epsilon(1e-6));
          if (reads(rt, t, n)) CHECK(at(rt.cr, t, N, n) == doctest::Approx(at(rt.prob, t, N, n) / pr).epsilon(1e-6));
        }
      }
    }
  SUBCASE("renormalize with gate::none still gives weight 1") {
    const auto rt = route(router_problem(T, N, 2, 2, gate::none, true), logits);
    for (index_t i = 0; i < T * N; ++i) {
      const auto f = rt.flags[static_cast<std::size_t>(i)];
      CHECK(rt.cw[static_cast<std::size_t>(i)] == ((f & linstate::detail::route_write) ? 1.f : 0.f));
    }
  }
}

TEST_CASE("router: round_to_input with bf16 logits uses bf16(softmax_fp32) (SPEC §4.4, §10)") {
  using bf16 = Eigen::bfloat16;
  std::mt19937 gen(3);
  const index_t N = 4, T = 500;
  std::vector<bf16> logits(static_cast<std::size_t>(T * N));
  std::normal_distribution<float> nd(0.f, 0.02f);  // small spread: many near-ties after rounding (SPEC §10)
  for (auto& x : logits) x = bf16(nd(gen));

  const auto rounded = route(router_problem(T, N, 1, 2, gate::both, false, /*round_to_input=*/true), logits);
  const auto plain = route(router_problem(T, N, 1, 2, gate::both, false, false), logits);
  int differ = 0;
  for (index_t t = 0; t < T; ++t) {
    std::vector<float> x(static_cast<std::size_t>(N));
    for (index_t n = 0; n < N; ++n) x[static_cast<std::size_t>(n)] = static_cast<float>(logits[static_cast<std::size_t>(t * N + n)]);
    const auto p32 = softmax_f(x);
    std::vector<float> p16(p32.size());
    for (std::size_t n = 0; n < p32.size(); ++n) p16[n] = static_cast<float>(bf16(p32[n]));
    for (index_t n = 0; n < N; ++n) {
      const float pr = at(rounded.prob, t, N, n);
      CHECK(std::bit_cast<std::uint32_t>(pr) == std::bit_cast<std::uint32_t>(p16[static_cast<std::size_t>(n)]));
      CHECK((std::bit_cast<std::uint32_t>(pr) & 0xFFFFu) == 0u);  // representable in bf16
      CHECK(at(plain.prob, t, N, n) == p32[static_cast<std::size_t>(n)]);  // without the option: fp32
      // the gate values are the rounded probabilities
      if (writes(rounded, t, n)) CHECK(at(rounded.cw, t, N, n) == pr);
    }
    // selection is made on the rounded values, with their ties
    std::set<int> rw, rr, pw;
    for (int n = 0; n < N; ++n) {
      if (writes(rounded, t, n)) rw.insert(n);
      if (reads(rounded, t, n)) rr.insert(n);
      if (writes(plain, t, n)) pw.insert(n);
    }
    CHECK(rw == top_k_by_sort(p16, 1));
    CHECK(rr == top_k_by_sort(p16, 2));
    CHECK(pw == top_k_by_sort(p32, 1));
    differ += top_k_by_sort(p16, 1) != top_k_by_sort(p32, 1);
  }
  // with this spread rounding creates ties that change the top-1 choice on a share of tokens (SPEC §4.8)
  CHECK(differ > 0);

  SUBCASE("a constructed near-tie: fp32 picks partition 1, bf16 rounding ties it and index 0 wins") {
    const std::vector<bf16> l = {bf16(0.f), bf16(0.001953125f)};  // 2^-9, exact in bf16
    const auto p32 = softmax_f({0.f, 0.001953125f});
    REQUIRE(p32[1] > p32[0]);
    REQUIRE(static_cast<float>(bf16(p32[0])) == static_cast<float>(bf16(p32[1])));
    CHECK(writes(route(router_problem(1, 2, 1, 1), l), 0, 1));
    CHECK_FALSE(writes(route(router_problem(1, 2, 1, 1), l), 0, 0));
    const auto r = route(router_problem(1, 2, 1, 1, gate::both, false, true), l);
    CHECK(writes(r, 0, 0));
    CHECK_FALSE(writes(r, 0, 1));
  }
}

namespace {
struct gla_r : linstate::spec<> {};
struct dense_n3_r : gla_r { using partition = linstate::partition::routed<3>; };
struct topk_all_n3_r : gla_r {  // top-3 of 3 without gate use: every partition, weight 1
  using partition = linstate::partition::routed<3>;
  using router = linstate::router::top_k<3, 3, linstate::router::top_k_options{.gates = gate::none}>;
};
}  // namespace

TEST_CASE("router: router::dense gives every partition weight 1") {
  const index_t B = 1, T = 40, H = 2, K = 8, V = 8;
  std::mt19937 gen(8);
  std::normal_distribution<float> nd(0.f, 1.f);
  linstate::tensor<float> q({B, T, H, K}), k({B, T, H, K}), v({B, T, H, V}), g({B, T, H, K}), logits({B, T, 3});
  for (auto* t : {&q, &k, &v, &logits})
    for (auto& x : t->values()) x = nd(gen);
  for (auto& x : g.values()) x = -0.1f * std::abs(nd(gen));
  const linstate::inputs<float> in{.q = q.cview(), .k = k.cview(), .v = v.cview(), .g = g.cview()};

  SUBCASE("the resolved problem selects all N partitions for writing and reading") {
    const auto pb = linstate::detail::make_problem<dense_n3_r>("test", in, linstate::tensor_view<float>{},
                                                                linstate::tensor_view<float>{}, "final_state", {}, false);
    CHECK(!pb.routed);
    CHECK(pb.N == 3);
    CHECK(pb.kw == 3);
    CHECK(pb.kr == 3);
  }
  SUBCASE("three identical partitions of weight 1: o = 3 GLA outputs, each state = the GLA state") {
    const auto one = linstate::forward<gla_r>(linstate::cpu{}, in, linstate::recurrent{});
    const auto three = linstate::forward<dense_n3_r>(linstate::cpu{}, in, linstate::recurrent{});
    REQUIRE(three.final_state.shape() == linstate::shape_t{1, 3, H, K, V});
    double mx = 0, err = 0;
    for (index_t i = 0; i < one.o.numel(); ++i)
      mx = std::max<double>(mx, std::abs(one.o[i])), err = std::max<double>(err, std::abs(three.o[i] - 3 * one.o[i]));
    CHECK(mx > 0.1);
    CHECK(err <= 1e-5 * mx);
    const index_t block = H * K * V;
    for (index_t p = 0; p < 3; ++p)
      for (index_t i = 0; i < block; ++i)
        CHECK(three.final_state[p * block + i] == doctest::Approx(one.final_state[i]).epsilon(1e-5));
  }
  SUBCASE("router::dense equals top_k<N, N> without gate use") {
    const auto dense = linstate::forward<dense_n3_r>(linstate::cpu{}, in, linstate::recurrent{});
    auto in2 = in;
    in2.router_logits = logits.cview();
    const auto topk = linstate::forward<topk_all_n3_r>(linstate::cpu{}, in2, linstate::recurrent{});
    for (index_t i = 0; i < dense.o.numel(); ++i) CHECK(topk.o[i] == doctest::Approx(dense.o[i]).epsilon(1e-5));
    for (index_t i = 0; i < dense.final_state.numel(); ++i)
      CHECK(topk.final_state[i] == doctest::Approx(dense.final_state[i]).epsilon(1e-5));
  }
}

TEST_CASE("router: non-finite logits are refused before anything is written (SPEC §4.4 needs finite p)") {
  struct sse : linstate::spec<> {
    using partition = linstate::partition::routed<4>;
    using router = linstate::router::top_k<1>;
  };
  const linstate::index_t T = 3, H = 1, K = 4, V = 4, N = 4;
  linstate::tensor<float> q({1, T, H, K}), k({1, T, H, K}), v({1, T, H, V}), g({1, T, H, K}), eta({1, T, N});
  linstate::tensor<float> o({1, T, H, V}), ht({1, N, H, K, V});
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    eta[1 * N + 2] = bad;
    std::fill(o.values().begin(), o.values().end(), 7.f);
    std::fill(ht.values().begin(), ht.values().end(), 7.f);
    const linstate::inputs<float> in{.q = q.view(), .k = k.view(), .v = v.view(), .g = g.view(), .router_logits = eta.view()};
    CHECK_THROWS_WITH_AS(linstate::forward<sse>(linstate::cpu{}, in, linstate::outputs<float>{o.view(), ht.view()}),
                         doctest::Contains("token 1, partition 2"), linstate::error);
    CHECK(std::all_of(o.values().begin(), o.values().end(), [](float x) { return x == 7.f; }));
    CHECK(std::all_of(ht.values().begin(), ht.values().end(), [](float x) { return x == 7.f; }));
  }
}
