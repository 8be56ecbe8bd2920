// SPDX-License-Identifier: Apache-2.0
// linstate::diagnostics (<linstate/diagnostics.hpp>) against values known by construction or computed
// by independent loops:
//  * singular-value entropy: diagonal and rotated states with known σ (uniform σ over r → ln r, one σ → 0,
//    σ = (3, 1) → H(3/4, 1/4)), zero matrices (0 by convention, counted in zero_states);
//  * row sparsity: states and keys with a known number of entries below the threshold, the threshold
//    honoured as a parameter;
//  * routing load: write / read counts equal to a brute-force top-k (sort by probability, lowest index
//    first) over double-precision softmax, for a variant, a router policy and a user-written router;
//  * decay clock: events and Σλ equal to counts over a constructed routing, with packed sequences, for
//    per-key (GLA), per-head (gated delta rule), dense-router and single-partition variants;
//  * a real SSE forward's final state (the fp64 reference forward): the partition no token is routed to stays zero (sparsity 1,
//    clock 0, zero state), the others not; the summary prints one row per partition;
//  * bad input: linstate::error naming the tensor and its shape.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <linstate/diagnostics.hpp>
#include <linstate/linstate.hpp>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "random_inputs.hpp"

namespace {

namespace dg = linstate::diagnostics;
namespace pt = linstate::partition;
namespace rt = linstate::router;
namespace dc = linstate::decay;
using linstate::index_t;
using linstate::tensor;
using linstate::tensor_view;

struct gla : linstate::spec<> {};
struct sse_n4k1s : gla {
  using partition = pt::routed<4, pt::shared>;
  using router = rt::top_k<1>;
};
struct sse_n4k1r2 : gla {  // writes 1, reads 2: a diagnostic that mixes up the two sets fails
  using partition = pt::routed<4, pt::shared>;
  using router = rt::top_k<1, 2>;
};
struct sse_gdn : sse_n4k1s {
  using decay = dc::gated_delta_rule<true>;
};
struct multi_head_dense : gla {
  using partition = pt::routed<3>;  // router::dense: every partition sees every token
};

//! A user-written router: writes and reads the kw partitions with the *lowest* logits, weight 1.
struct bottom_k {
  static constexpr bool routes = true;
  static constexpr int num_writer = 1, num_reader = 1, params_per_partition = 0;
  static constexpr const char* name = "router::bottom_k (test)";
  struct config {
    int kw = 1, kr = 1;
  };
  template <class Opt>
  static config configure(const Opt&, index_t, const std::string&, bool = false) {
    return {};
  }
  template <class T>
  static void weights(const config&, int N, const T*, const float*, const std::uint8_t* f, T* p, T* cw, T* cr) {
    for (int n = 0; n < N; ++n) p[n] = T(1), cw[n] = cr[n] = f[n] ? T(1) : T(0);
  }
  template <class T, class Round>
  static void route(const config& c, int N, const T* x, const float* b, T* p, T* cw, T* cr, std::uint8_t* f, Round) {
    for (int n = 0; n < N; ++n) p[n] = -x[n];
    for (int n = 0; n < N; ++n)
      f[n] = linstate::detail::in_top_k(p, N, c.kw, n) ? std::uint8_t(linstate::detail::route_write | linstate::detail::route_read)
                                                       : std::uint8_t(0);
    weights(c, N, x, b, f, p, cw, cr);
  }
  template <class T, class P>
  static void weights_backward(const config&, int N, const T*, const float*, const P*, const std::uint8_t*, const T*,
                               const T*, T* dx, T*) {
    for (int n = 0; n < N; ++n) dx[n] = T(0);
  }
};
struct sse_bottom : gla {
  using partition = pt::routed<3, pt::shared>;
  using router = bottom_k;
};

tensor<float> random_tensor(linstate::shape_t s, std::uint64_t seed, float scale = 1.f) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> nd(0.f, scale);
  tensor<float> t(s);
  for (auto& x : t.values()) x = nd(gen);
  return t;
}

//! Brute-force top-k: indices sorted by (probability descending, index ascending), first k.
std::vector<int> top_k_set(const float* logits, int N, int k) {
  std::vector<double> p(static_cast<std::size_t>(N));
  double m = logits[0];
  for (int n = 1; n < N; ++n) m = std::max(m, static_cast<double>(logits[n]));
  double s = 0;
  for (int n = 0; n < N; ++n) s += p[static_cast<std::size_t>(n)] = std::exp(static_cast<double>(logits[n]) - m);
  for (auto& x : p) x /= s;
  std::vector<int> idx(static_cast<std::size_t>(N));
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return p[static_cast<std::size_t>(a)] > p[static_cast<std::size_t>(b)]; });
  idx.resize(static_cast<std::size_t>(std::min(k, N)));
  return idx;
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const linstate::error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("diagnostics: singular-value entropy of known spectra") {
  const std::vector<double> uniform4{2, 2, 2, 2}, one{5, 0, 0}, zeros{0, 0};
  CHECK(dg::singular_value_entropy(uniform4) == doctest::Approx(std::log(4.0)).epsilon(1e-14));
  CHECK(dg::singular_value_entropy(one) == 0.0);
  CHECK(dg::singular_value_entropy(zeros) == 0.0);
  const std::vector<double> three_one{3, 1};
  CHECK(dg::singular_value_entropy(three_one) == doctest::Approx(-(0.75 * std::log(0.75) + 0.25 * std::log(0.25))));
  const std::vector<double> bad{1, -1};
  CHECK_THROWS_AS(dg::singular_value_entropy(bad), linstate::error);
}

TEST_CASE("diagnostics: state_spectrum of diagonal and rotated states") {
  // [S=1, P=3, HV=2, K=4, V=3]: r = 3 singular values per matrix
  const index_t K = 4, V = 3;
  tensor<float> st({1, 3, 2, K, V});
  auto at = [&](index_t p, index_t hv, index_t i, index_t j) -> float& { return st[((p * 2 + hv) * K + i) * V + j]; };
  for (index_t i = 0; i < 3; ++i) at(0, 0, i, i) = 1.5f;  // σ = (1.5, 1.5, 1.5): H = ln 3, erank 3
  at(0, 1, 2, 1) = -2.f;                                   // one σ = 2: H = 0, erank 1
  // partition 1: both matrices zero
  // partition 2, hv 0: a rotation R (K×K, angle θ in rows 0,1) times diag(3, 1, 0) → σ = (3, 1, 0)
  const double th = 0.7;
  const double c = std::cos(th), s = std::sin(th);
  at(2, 0, 0, 0) = static_cast<float>(3 * c), at(2, 0, 1, 0) = static_cast<float>(3 * s);
  at(2, 0, 0, 1) = static_cast<float>(-1 * s), at(2, 0, 1, 1) = static_cast<float>(1 * c);
  // partition 2, hv 1: σ = (1, 1) on a permuted support, third zero: H = ln 2
  at(2, 1, 3, 0) = 1.f, at(2, 1, 1, 2) = -1.f;

  const auto sp = dg::state_spectrum(st.cview());
  REQUIRE(sp.r == 3);
  CHECK(sp.entropy_at(0, 0, 0) == doctest::Approx(std::log(3.0)).epsilon(1e-12));
  CHECK(sp.effective_rank[0] == doctest::Approx(3.0).epsilon(1e-12));
  CHECK(sp.entropy_at(0, 0, 1) == doctest::Approx(0.0));
  CHECK(sp.effective_rank[1] == doctest::Approx(1.0));
  CHECK(sp.entropy_at(0, 1, 0) == 0.0);
  CHECK(sp.effective_rank[2] == 0.0);
  CHECK(sp.zero_states[1] == 2);
  CHECK(sp.zero_states[0] == 0);
  const double h31 = -(0.75 * std::log(0.75) + 0.25 * std::log(0.25));
  CHECK(sp.entropy_at(0, 2, 0) == doctest::Approx(h31).epsilon(1e-6));
  CHECK(sp.singular_values[4 * 3 + 0] == doctest::Approx(3.0).epsilon(1e-6));
  CHECK(sp.singular_values[4 * 3 + 1] == doctest::Approx(1.0).epsilon(1e-6));
  CHECK(std::abs(sp.singular_values[4 * 3 + 2]) < 1e-6);
  CHECK(sp.entropy_at(0, 2, 1) == doctest::Approx(std::log(2.0)).epsilon(1e-12));
  // means over the non-zero matrices of a partition
  CHECK(sp.mean_entropy[0] == doctest::Approx(std::log(3.0) / 2));
  CHECK(sp.mean_effective_rank[0] == doctest::Approx(2.0));
  CHECK(sp.mean_entropy[1] == 0.0);
  CHECK(sp.mean_entropy[2] == doctest::Approx((h31 + std::log(2.0)) / 2).epsilon(1e-6));
  // the spectrum does not depend on the layout of the entries: the transpose-free check of a random
  // matrix against Eigen's JacobiSVD would be circular; instead scale invariance of the entropy
  tensor<float> scaled = st;
  for (auto& x : scaled.values()) x *= 1e-3f;
  const auto sq = dg::state_spectrum(scaled.cview());
  for (std::size_t i = 0; i < sp.entropy.size(); ++i) CHECK(sq.entropy[i] == doctest::Approx(sp.entropy[i]).epsilon(1e-5));

  // one thread or several: the same numbers (one matrix per task)
  const auto one = dg::state_spectrum(st.cview(), linstate::cpu{.threads = 1});
  const auto three = dg::state_spectrum(st.cview(), linstate::cpu{.threads = 3});
  CHECK(one.singular_values == three.singular_values);
  CHECK(one.entropy == sp.entropy);
  CHECK(three.zero_states == sp.zero_states);

  tensor<float> bad = st;
  bad[5] = std::nanf("");
  CHECK(error_of([&] { dg::state_spectrum(bad.cview()); }).find("non-finite") != std::string::npos);
  tensor<float> rank4({2, 3, 4, 4});
  const std::string e = error_of([&] { dg::state_spectrum(rank4.cview()); });
  CHECK(e.find("state has shape [2,3,4,4]") != std::string::npos);
  CHECK(e.find("[S,P,HV,K,V]") != std::string::npos);
}

TEST_CASE("diagnostics: state and key sparsity with known zeros") {
  // [S=2, P=2, HV=1, K=3, V=4]: 24 entries per partition, 6 rows per partition
  tensor<float> st({2, 2, 1, 3, 4});
  for (auto& x : st.values()) x = 1.f;
  auto at = [&](index_t s, index_t p, index_t i, index_t j) -> float& { return st[((s * 2 + p) * 3 + i) * 4 + j]; };
  // partition 0: one full zero row (4 entries) and two scattered small entries → 6 / 24 entries, 1 / 6 rows
  for (index_t j = 0; j < 4; ++j) at(1, 0, 2, j) = 0.f;
  at(0, 0, 0, 1) = 5e-6f, at(0, 0, 1, 3) = -9e-6f;
  // partition 1: entries at 2e-5 (not below 1e-5, below 1e-4) in three full rows → 0 / 24 (12 / 24 at 1e-4)
  for (index_t s = 0; s < 2; ++s)
    for (index_t j = 0; j < 4; ++j) at(s, 1, 0, j) = 2e-5f;
  for (index_t j = 0; j < 4; ++j) at(1, 1, 1, j) = -2e-5f;
  const auto a = dg::state_sparsity(st.cview());
  CHECK(a.entries[0] == doctest::Approx(6.0 / 24));
  CHECK(a.rows[0] == doctest::Approx(1.0 / 6));
  CHECK(a.entries[1] == 0.0);
  CHECK(a.rows[1] == 0.0);
  CHECK(a.all_entries == doctest::Approx(6.0 / 48));
  const auto b = dg::state_sparsity(st.cview(), 1e-4);
  CHECK(b.entries[1] == doctest::Approx(12.0 / 24));
  CHECK(b.rows[1] == doctest::Approx(3.0 / 6));
  CHECK(b.all_rows == doctest::Approx(4.0 / 12));
  CHECK(error_of([&] { dg::state_sparsity(st.cview(), 0.0); }).find("threshold") != std::string::npos);
  CHECK(error_of([&] { dg::state_sparsity(tensor_view<const float>{}); }).find("state is required") != std::string::npos);

  // keys [B=1, T=5, H=2, K=2]: head 0 has 3 of 10 entries below 1e-5, head 1 has 0
  tensor<float> k({1, 5, 2, 2});
  for (auto& x : k.values()) x = 0.3f;
  k[(0 * 2 + 0) * 2 + 0] = 0.f, k[(2 * 2 + 0) * 2 + 1] = 1e-7f, k[(4 * 2 + 0) * 2 + 0] = -3e-6f;
  const auto ks = dg::key_sparsity(k.cview());
  CHECK(ks.per_head[0] == doctest::Approx(0.3));
  CHECK(ks.per_head[1] == 0.0);
  CHECK(ks.all == doctest::Approx(0.15));
  tensor<float> k3({1, 5, 4});
  CHECK(error_of([&] { dg::key_sparsity(k3.cview()); }).find("k has shape [1,5,4]") != std::string::npos);
}

TEST_CASE("diagnostics: routing load equals a brute-force top-k") {
  const index_t B = 2, T = 13, N = 4;
  const auto logits = random_tensor({B, T, N}, 7);
  std::vector<index_t> w(N, 0), r(N, 0);
  for (index_t t = 0; t < B * T; ++t) {
    for (int n : top_k_set(logits.data() + t * N, N, 1)) ++w[static_cast<std::size_t>(n)];
    for (int n : top_k_set(logits.data() + t * N, N, 2)) ++r[static_cast<std::size_t>(n)];
  }
  SUBCASE("a variant: kw = 1, kr = 2") {
    const auto L = dg::route_load<sse_n4k1r2>(logits.cview());
    CHECK(L.N == N);
    CHECK(L.tokens == B * T);
    CHECK(L.kw == 1);
    CHECK(L.kr == 2);
    CHECK(L.writes == w);
    CHECK(L.reads == r);
    double sw = 0, sr = 0, ss = 0;
    for (index_t n = 0; n < N; ++n) {
      CHECK(L.write_fraction[static_cast<std::size_t>(n)] == doctest::Approx(static_cast<double>(w[static_cast<std::size_t>(n)]) / (B * T)));
      sw += L.write_fraction[static_cast<std::size_t>(n)], sr += L.read_fraction[static_cast<std::size_t>(n)];
      ss += L.mean_score[static_cast<std::size_t>(n)];
      CHECK(L.mean_write_weight[static_cast<std::size_t>(n)] > 0.0);
    }
    CHECK(sw == doctest::Approx(1.0));
    CHECK(sr == doctest::Approx(2.0));
    CHECK(ss == doctest::Approx(1.0));
  }
  SUBCASE("a router policy, N from the logits; dynamic kw from the options") {
    const auto L = dg::route_load<rt::top_k<linstate::dynamic, 2>>(logits.cview(), linstate::options{.num_writer = 1});
    CHECK(L.writes == w);
    CHECK(L.reads == r);
  }
  SUBCASE("a user-written router is measured through its own route()") {
    const auto lg3 = random_tensor({B, T, 3}, 9);
    std::vector<index_t> low(3, 0);
    for (index_t t = 0; t < B * T; ++t) {
      const float* x = lg3.data() + t * 3;
      ++low[static_cast<std::size_t>(std::min_element(x, x + 3) - x)];
    }
    const auto L = dg::route_load<sse_bottom>(lg3.cview());
    CHECK(L.writes == low);
    CHECK(L.reads == low);
  }
  SUBCASE("bad input names the tensor and its shape") {
    const auto wrong = random_tensor({B, T, 5}, 1);
    const std::string e = error_of([&] { dg::route_load<sse_n4k1s>(wrong.cview()); });
    CHECK(e.find("router_logits has shape [2,13,5]") != std::string::npos);
    CHECK(e.find("N = 4") != std::string::npos);
    CHECK(error_of([&] { dg::route_load<rt::top_k<2>>(logits.cview(), linstate::options{.num_partitions = 3}); })
              .find("num_partitions = 3") != std::string::npos);
    tensor<float> params({N});
    CHECK(error_of([&] { dg::route_load<sse_n4k1s>(logits.cview(), {}, params.cview()); }).find("router_params") !=
          std::string::npos);
    auto nan = logits;
    nan[6] = std::nanf("");
    CHECK(error_of([&] { dg::route_load<sse_n4k1s>(nan.cview()); }).find("non-finite value at token 1, partition 2") !=
          std::string::npos);
  }
}

TEST_CASE("diagnostics: the decay clock counts the tokens that wrote each partition") {
  // two packed sequences of 5 and 7 tokens; token t (global index) is routed to partition t % 3 of
  // N = 4 (partition 3 never), by a logit of +4 on that partition
  const index_t T = 12, H = 1, HV = 2, K = 3, V = 2, N = 4;
  auto cfg = linstate_test::config_for<sse_n4k1r2>({.B = 1, .T = T, .H = H, .HV = HV, .K = K, .V = V});
  cfg.cu_seqlens = {0, 5, 12};
  linstate_test::random_inputs data(cfg, 3);
  for (index_t t = 0; t < T; ++t)
    for (index_t n = 0; n < N; ++n) data.router_logits[t * N + n] = n == t % 3 ? 4.f : 0.f;
  // gates: g[t, hv, i] = -(t + 1) · (hv + 1) · (i + 1) / 10 (routed), twice that (shared)
  for (index_t t = 0; t < T; ++t)
    for (index_t hv = 0; hv < HV; ++hv)
      for (index_t i = 0; i < K; ++i) {
        const float g = -static_cast<float>((t + 1) * (hv + 1) * (i + 1)) / 10.f;
        data.g[(t * HV + hv) * K + i] = g;
        data.shared_g[(t * HV + hv) * K + i] = 2 * g;
      }
  const auto in = data.view();
  const auto c = dg::decay_clock<sse_n4k1r2>(in);
  REQUIRE(c.S == 2);
  REQUIRE(c.P == 5);
  CHECK(c.has_log_decay);
  CHECK(c.length == std::vector<index_t>{5, 7});
  const index_t seq[3] = {0, 5, 12};
  for (index_t s = 0; s < 2; ++s) {
    CHECK(c.events_at(s, 0) == seq[s + 1] - seq[s]);  // the shared partition: every token
    for (index_t hv = 0; hv < HV; ++hv) {
      double shared = 0;  // mean over i of 2·g = −2 (t+1)(hv+1)·(1+2+3)/3 / 10
      for (index_t t = seq[s]; t < seq[s + 1]; ++t) shared += -2.0 * static_cast<double>((t + 1) * (hv + 1)) * 2.0 / 10.0;
      CHECK(c.log_decay_at(s, 0, hv) == doctest::Approx(shared).epsilon(1e-6));
    }
    for (index_t n = 0; n < N; ++n) {
      index_t count = 0;
      double lam0 = 0;
      for (index_t t = seq[s]; t < seq[s + 1]; ++t)
        if (t % 3 == n) ++count, lam0 += -static_cast<double>(t + 1) * 2.0 / 10.0;
      CHECK(c.events_at(s, 1 + n) == count);
      CHECK(c.log_decay_at(s, 1 + n, 0) == doctest::Approx(lam0).epsilon(1e-6));
      CHECK(c.log_decay_at(s, 1 + n, 1) == doctest::Approx(2 * lam0).epsilon(1e-6));
    }
    CHECK(c.events_at(s, 4) == 0);
    CHECK(c.log_decay_at(s, 4, 1) == 0.0);
  }

  SUBCASE("key sparsity per partition: the keys of the tokens that write it") {
    // routed keys zero on the tokens routed to partition 0; one shared key entry of K zero per token
    for (index_t t = 0; t < T; ++t) {
      if (t % 3 == 0)
        for (index_t i = 0; i < H * K; ++i) data.k[t * H * K + i] = 0.f;
      data.shared_k[t * H * K + 1] = 1e-6f;
    }
    const auto ks = dg::partition_key_sparsity<sse_n4k1r2>(data.view());
    CHECK(ks.entries[0] == T * H * K);
    CHECK(ks.fraction[0] == doctest::Approx(1.0 / 3));
    CHECK(ks.entries[1] == 4 * H * K);  // tokens 0, 3, 6, 9
    CHECK(ks.fraction[1] == 1.0);
    CHECK(ks.fraction[2] == 0.0);
    CHECK(ks.entries[4] == 0);
    CHECK(ks.fraction[4] == 0.0);
    const auto whole = dg::key_sparsity(data.k.cview());
    CHECK(whole.all == doctest::Approx(4.0 / 12));
  }
  SUBCASE("per-head gate of the gated delta rule") {
    auto gcfg = linstate_test::config_for<sse_gdn>({.B = 1, .T = T, .H = H, .HV = HV, .K = K, .V = V});
    gcfg.cu_seqlens = {0, 5, 12};
    linstate_test::random_inputs gd(gcfg, 4);
    gd.router_logits = data.router_logits;
    const auto gc = dg::decay_clock<sse_gdn>(gd.view());
    for (index_t s = 0; s < 2; ++s)
      for (index_t n = 0; n < N; ++n) {
        double lam = 0;
        index_t count = 0;
        for (index_t t = seq[s]; t < seq[s + 1]; ++t)
          if (t % 3 == n) ++count, lam += gd.g[t * HV + 1];
        CHECK(gc.events_at(s, 1 + n) == count);
        CHECK(gc.log_decay_at(s, 1 + n, 1) == doctest::Approx(lam).epsilon(1e-6));
      }
  }
  SUBCASE("dense router and single partition: one decay per token") {
    auto dcfg = linstate_test::config_for<multi_head_dense>({.B = 2, .T = 6, .H = H, .HV = HV, .K = K, .V = V});
    linstate_test::random_inputs dd(dcfg, 5);
    const auto cd = dg::decay_clock<multi_head_dense>(dd.view());
    CHECK(cd.events == std::vector<index_t>(2 * 3, 6));
    const auto cg = dg::decay_clock<gla>(dd.view(), linstate::options{});
    CHECK(cg.events == std::vector<index_t>{6, 6});
    double lam = 0;
    for (index_t t = 6; t < 12; ++t)
      for (index_t i = 0; i < K; ++i) lam += dd.g[(t * HV + 0) * K + i] / static_cast<double>(K);
    CHECK(cg.log_decay_at(1, 0, 0) == doctest::Approx(lam).epsilon(1e-6));
  }
  SUBCASE("the inputs are checked as forward() checks them") {
    auto bad = in;
    bad.router_logits = tensor_view<const float>(data.router_logits.data(), {1, T, 3});
    const std::string e = error_of([&] { dg::decay_clock<sse_n4k1r2>(bad); });
    CHECK(e.find("linstate::diagnostics::decay_clock") != std::string::npos);
    CHECK(e.find("router_logits has shape [1,12,3]") != std::string::npos);
  }
}

TEST_CASE("diagnostics: a real SSE forward — the partition no token is routed to stays zero") {
  const index_t B = 2, T = 20, H = 1, HV = 2, K = 8, V = 8, N = 4;
  auto cfg = linstate_test::config_for<sse_n4k1s>({.B = B, .T = T, .H = H, .HV = HV, .K = K, .V = V});
  linstate_test::random_inputs data(cfg, 11);
  for (index_t t = 0; t < B * T; ++t) data.router_logits[t * N + 2] = -30.f;  // routed partition 2: never chosen
  const auto in = data.view(/*with_initial_state=*/false);
  // linstate's fp64 reference forward (reference/naive.hpp; the CPU and CUDA backends are checked equal
  // to it by the variants suites): instantiating the CPU backend's forward here would cost this program
  // ~15 s more to compile under ASan, for the same final state
  const auto ref = linstate::reference::forward<sse_n4k1s>(in);
  tensor<float> state(ref.final_state.shape());
  for (index_t i = 0; i < state.numel(); ++i) state[i] = static_cast<float>(ref.final_state[i]);
  const auto st = state.cview();

  const auto sp = dg::state_sparsity(st);
  CHECK(sp.entries[3] == 1.0);  // slot 1 + 2
  CHECK(sp.rows[3] == 1.0);
  CHECK(sp.entries[0] < 0.5);   // the shared partition saw every token
  const auto sv = dg::state_spectrum(st);
  CHECK(sv.zero_states[3] == B * HV);
  CHECK(sv.zero_states[0] == 0);
  CHECK(sv.mean_effective_rank[0] > 1.0);
  CHECK(sv.mean_effective_rank[0] <= static_cast<double>(K));
  const auto c = dg::decay_clock<sse_n4k1s>(in);
  const auto L = dg::route_load<sse_n4k1s>(in.router_logits);
  CHECK(L.writes[2] == 0);
  for (index_t s = 0; s < B; ++s) CHECK(c.events_at(s, 3) == 0);
  for (index_t n = 0; n < N; ++n) {
    index_t total = 0;
    for (index_t s = 0; s < B; ++s) total += c.events_at(s, 1 + n);
    CHECK(total == L.writes[static_cast<std::size_t>(n)]);
    // a partition written by at least one token has a non-zero state (random keys and values)
    if (L.writes[static_cast<std::size_t>(n)] > 0) CHECK(sp.entries[static_cast<std::size_t>(1 + n)] < 1.0);
  }

  const auto S = dg::summarize<sse_n4k1s>(in, st);
  REQUIRE(S.load);
  REQUIRE(S.spectrum);
  std::ostringstream os;
  os << S;
  const std::string md = os.str();
  CHECK(md.find("| shared |") != std::string::npos);
  CHECK(md.find("| routed 3 |") != std::string::npos);
  CHECK(md.find("SV entropy") != std::string::npos);
  CHECK(md.find("key entries < 1e-05") != std::string::npos);
  CHECK(std::count(md.begin(), md.end(), '\n') >= 2 + 5);  // header, rule, one row per partition
  MESSAGE(md);

  CHECK(S.load->writes == L.writes);
  CHECK(S.clock->events == c.events);
  // the state-only summary of any [S,P,HV,K,V] tensor
  const std::string bare = dg::summarize(st, /*shared=*/true).to_markdown();
  CHECK(bare.find("| shared |") != std::string::npos);
  CHECK(bare.find("| partition 3 |") != std::string::npos);
  CHECK(bare.find("tokens writing") == std::string::npos);

  tensor<float> wrong({B, 4, HV, K, V});
  const std::string e = error_of([&] { dg::summarize<sse_n4k1s>(in, wrong.cview()); });
  CHECK(e.find("final_state has shape [2,4,2,8,8]") != std::string::npos);
  CHECK(e.find("[2,5,2,8,8]") != std::string::npos);
}
