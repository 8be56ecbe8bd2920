// SPDX-License-Identifier: Apache-2.0
// The SSE balance (aux) loss, linstate::balance_loss (SPEC §4.9, §9.1 P9), against an independent
// double-precision computation: softmax in double, a sort-based top-kw write set with the
// lowest-index tie rule, the means P_n and F_n over every token, aux = (N/kw) Σ_n P_n F_n, and
// central finite differences of aux with the write mask held fixed for the gradient.
//  * P9: the value equals (N/kw) Σ mean(p)·mean(w) for N ∈ {4, 8}, kw ∈ {1, 2}, B ∈ {1, 3};
//    exactly 1 for uniform p (all logits equal) and ≈ 1 for a balanced assignment or kw = N;
//  * the gradient equals finite differences of the fixed-mask loss, which equal those of the full loss
//    (the mask term contributes nothing), sums to zero per token, ignores the read set;
//  * the loss is over all B·T tokens (batch rows and packed sequences alike), not a per-row mean;
//  * coefficient, overwrite / accumulate, dynamic options, bf16 with round_to_input;
//  * bad shapes, non-finite values, missing or contradicting options throw linstate::error and write
//    nothing.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <linstate/balance_loss.hpp>
#include <linstate/linstate.hpp>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace {

namespace pt = linstate::partition;
namespace rt = linstate::router;
using linstate::index_t;
using linstate::tensor_view;

template <int N, int KW, int KR = KW, rt::top_k_options O = rt::top_k_options{}>
struct sse : linstate::spec<> {
  using partition = pt::routed<N, pt::shared>;
  using router = rt::top_k<KW, KR, O>;
};
//! N, kw, kr and the gates all from linstate::options (as linstate-run and the fixture tests use).
struct sse_dynamic : linstate::spec<> {
  using partition = pt::routed<linstate::dynamic, pt::shared>;
  using router = rt::top_k<linstate::dynamic, linstate::dynamic, rt::top_k_options{.dynamic_gates = true}>;
};
//! No shared partition: the loss only looks at the routed ones, so it must not matter.
struct sse_n4k1_plain : linstate::spec<> {
  using partition = pt::routed<4>;
  using router = rt::top_k<1>;
};

// ---------------------------------------------------------------------------------------------
// Independent oracle (double)
// ---------------------------------------------------------------------------------------------

std::vector<double> softmax_d(const double* x, int n) {
  const double m = *std::max_element(x, x + n);
  std::vector<double> p(static_cast<std::size_t>(n));
  double s = 0;
  for (int i = 0; i < n; ++i) s += (p[static_cast<std::size_t>(i)] = std::exp(x[i] - m));
  for (auto& v : p) v /= s;
  return p;
}

//! Write mask [M, N] (0/1): per token, the kw largest p, equal values in increasing index (stable sort).
std::vector<int> write_mask(const std::vector<double>& logits, int N, int kw) {
  const std::size_t M = logits.size() / static_cast<std::size_t>(N);
  std::vector<int> w(logits.size(), 0);
  for (std::size_t t = 0; t < M; ++t) {
    const auto p = softmax_d(logits.data() + t * static_cast<std::size_t>(N), N);
    std::vector<int> idx(static_cast<std::size_t>(N));
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return p[static_cast<std::size_t>(a)] > p[static_cast<std::size_t>(b)]; });
    for (int j = 0; j < kw; ++j) w[t * static_cast<std::size_t>(N) + static_cast<std::size_t>(idx[static_cast<std::size_t>(j)])] = 1;
  }
  return w;
}

//! aux = (N/kw) Σ_n mean_t(p_t[n]) · mean_t(w_t[n]) with a given mask (SPEC §4.9).
double aux_with_mask(const std::vector<double>& logits, int N, int kw, const std::vector<int>& w) {
  const std::size_t M = logits.size() / static_cast<std::size_t>(N);
  std::vector<double> P(static_cast<std::size_t>(N), 0.0), F(static_cast<std::size_t>(N), 0.0);
  for (std::size_t t = 0; t < M; ++t) {
    const auto p = softmax_d(logits.data() + t * static_cast<std::size_t>(N), N);
    for (std::size_t n = 0; n < static_cast<std::size_t>(N); ++n) {
      P[n] += p[n];
      F[n] += w[t * static_cast<std::size_t>(N) + n];
    }
  }
  double s = 0;
  for (std::size_t n = 0; n < static_cast<std::size_t>(N); ++n) s += (P[n] / static_cast<double>(M)) * (F[n] / static_cast<double>(M));
  return static_cast<double>(N) / kw * s;
}

double aux_oracle(const std::vector<double>& logits, int N, int kw) { return aux_with_mask(logits, N, kw, write_mask(logits, N, kw)); }

std::vector<double> to_double(const std::vector<float>& x) { return {x.begin(), x.end()}; }

//! Random logits [M, N] where, per token, the kw-th and (kw+1)-th largest logits differ by at least
//! `gap`: small perturbations cannot change the write set.
std::vector<float> gapped_logits(std::mt19937& gen, index_t M, int N, int kw, float gap = 0.05f) {
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> x(static_cast<std::size_t>(M * N));
  for (index_t t = 0; t < M; ++t) {
    float* row = x.data() + t * N;
    for (;;) {
      for (int n = 0; n < N; ++n) row[n] = nd(gen);
      std::vector<float> s(row, row + N);
      std::sort(s.begin(), s.end(), std::greater<>());
      if (kw >= N || s[static_cast<std::size_t>(kw - 1)] - s[static_cast<std::size_t>(kw)] > gap) break;
    }
  }
  return x;
}

template <class Spec>
float loss_of(const std::vector<float>& x, index_t B, index_t T, index_t N, const linstate::options& opt = {}) {
  return linstate::balance_loss<Spec>(tensor_view<const float>{x.data(), {B, T, N}}, opt);
}

template <class Spec>
std::vector<float> grad_of(const std::vector<float>& x, index_t B, index_t T, index_t N, float* aux = nullptr,
                           const linstate::options& opt = {}) {
  std::vector<float> d(x.size(), std::numeric_limits<float>::quiet_NaN());  // overwrite must replace all
  const float a = linstate::balance_loss<Spec>(tensor_view<const float>{x.data(), {B, T, N}},
                                               tensor_view<float>{d.data(), {B, T, N}}, 1.f,
                                               linstate::gradient_write::overwrite, opt);
  if (aux) *aux = a;
  return d;
}

//! Runs f<Spec>(N, kw) for the four (N, kw) pairs of the task: N ∈ {4, 8}, kw ∈ {1, 2}.
template <class F>
void for_each_config(F&& f) {
  f.template operator()<sse<4, 1>>(4, 1);
  f.template operator()<sse<4, 2>>(4, 2);
  f.template operator()<sse<8, 1>>(8, 1);
  f.template operator()<sse<8, 2>>(8, 2);
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

}  // namespace

TEST_CASE("balance_loss: P9 aux = (N/kw) Σ_n mean(p)·mean(w) over every token (SPEC §4.9, §9.1)") {
  std::mt19937 gen(4242);
  int checked = 0;
  for_each_config([&]<class Spec>(int N, int kw) {
    for (index_t B : {1, 3}) {
      const index_t T = 37;
      INFO("N = " << N << " kw = " << kw << " B = " << B);
      const auto x = gapped_logits(gen, B * T, N, kw);
      const double ref = aux_oracle(to_double(x), N, kw);
      const float got = loss_of<Spec>(x, B, T, N);
      CAPTURE(ref);
      CAPTURE(got);
      CHECK(std::abs(got - ref) <= 1e-6 * ref);
      // random routing is unbalanced: aux is not 1 (so a constant 1 could not pass)
      CHECK(std::abs(ref - 1.0) > 1e-3);
      // the gradient overload returns the same value
      float aux_g = 0;
      (void)grad_of<Spec>(x, B, T, N, &aux_g);
      CHECK(aux_g == got);
      // the same through run-time options, and without a shared partition where the type allows it
      const linstate::options opt{.num_partitions = N, .num_writer = kw};
      CHECK(loss_of<sse_dynamic>(x, B, T, N, opt) == got);
      ++checked;
    }
  });
  CHECK(checked == 8);
  std::mt19937 g2(5);
  const auto x = gapped_logits(g2, 50, 4, 1);
  CHECK(loss_of<sse_n4k1_plain>(x, 1, 50, 4) == loss_of<sse<4, 1>>(x, 1, 50, 4));
}

TEST_CASE("balance_loss: P9 exactly 1 for uniform routing (SPEC §4.9: Σ_n F_n = kw)") {
  SUBCASE("uniform p: all logits equal (the write sets follow the lowest-index rule)") {
    for_each_config([&]<class Spec>(int N, int kw) {
      for (float value : {0.f, -3.25f, 17.f}) {
        INFO("N = " << N << " kw = " << kw << " logit " << value);
        const index_t B = 2, T = 9;
        const std::vector<float> x(static_cast<std::size_t>(B * T * N), value);
        CHECK(loss_of<Spec>(x, B, T, N) == 1.f);
        // The mask is maximally unbalanced (partitions 0..kw-1 always written), so the gradient pushes
        // the written partitions' logits down and the others up; it sums to zero per token.
        const auto d = grad_of<Spec>(x, B, T, N);
        for (index_t t = 0; t < B * T; ++t) {
          double sum = 0;
          for (int n = 0; n < N; ++n) {
            const float v = d[static_cast<std::size_t>(t * N + n)];
            CHECK((n < kw ? v > 0.f : v < 0.f));
            sum += v;
          }
          CHECK(std::abs(sum) <= 1e-8);
        }
      }
    });
  }
  SUBCASE("balanced assignment: every partition written on exactly kw/N of the tokens, any p") {
    std::mt19937 gen(17);
    std::uniform_real_distribution<float> ud(-0.5f, 0.5f);
    for_each_config([&]<class Spec>(int N, int kw) {
      INFO("N = " << N << " kw = " << kw);
      const index_t B = 1, T = 4 * N;  // a multiple of N: F_n = kw/N exactly
      std::vector<float> x(static_cast<std::size_t>(T * N));
      for (index_t t = 0; t < T; ++t)
        for (int n = 0; n < N; ++n) {
          // token t prefers partitions t, t+1, ... (mod N) with a margin of 3 over the rest
          const int rank = static_cast<int>((n - t % N + N) % N);
          x[static_cast<std::size_t>(t * N + n)] = ud(gen) + (rank < kw ? 3.f + static_cast<float>(kw - rank) : 0.f);
        }
      const float got = loss_of<Spec>(x, B, T, N);
      CHECK(got == doctest::Approx(1.0).epsilon(1e-6));
      CHECK(std::abs(aux_oracle(to_double(x), N, kw) - 1.0) <= 1e-12);
    });
  }
  SUBCASE("kw = N: every partition always written, aux = Σ P_n = 1 and the gradient vanishes") {
    std::mt19937 gen(3);
    const index_t B = 2, T = 20;
    const auto x = gapped_logits(gen, B * T, 4, 4);
    float aux = 0;
    const auto d = grad_of<sse<4, 4>>(x, B, T, 4, &aux);
    CHECK(aux == doctest::Approx(1.0).epsilon(1e-6));
    for (float v : d) CHECK(std::abs(v) <= 1e-8f);  // p(c − c·Σp): Σp = 1 up to fp32 rounding
  }
}

TEST_CASE("balance_loss: gradient = finite differences with the mask held fixed; the mask adds nothing") {
  std::mt19937 gen(777);
  for_each_config([&]<class Spec>(int N, int kw) {
    INFO("N = " << N << " kw = " << kw);
    const index_t B = 2, T = 11, M = B * T;
    const auto x = gapped_logits(gen, M, N, kw);
    const auto xd = to_double(x);
    const auto mask = write_mask(xd, N, kw);
    const auto d = grad_of<Spec>(x, B, T, N);

    const double h = 1e-5;
    std::vector<double> fd_fixed(x.size()), fd_full(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      auto xp = xd, xm = xd;
      xp[i] += h, xm[i] -= h;
      fd_fixed[i] = (aux_with_mask(xp, N, kw, mask) - aux_with_mask(xm, N, kw, mask)) / (2 * h);
      // the full loss recomputes the write mask at the perturbed logits: with gapped logits the sets do not
      // move, so the mask term's contribution is zero and both differences agree (SPEC §4.9, P9)
      fd_full[i] = (aux_oracle(xp, N, kw) - aux_oracle(xm, N, kw)) / (2 * h);
    }
    const double scale = max_abs(fd_fixed);
    REQUIRE(scale > 0);
    double err = 0, err_full = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      err = std::max(err, std::abs(d[i] - fd_fixed[i]));
      err_full = std::max(err_full, std::abs(fd_full[i] - fd_fixed[i]));
    }
    CAPTURE(scale);
    CAPTURE(err);
    CHECK(err <= 1e-5 * scale);
    CHECK(err_full <= 1e-9 * scale);
    // softmax backward: every token's gradient sums to zero
    for (index_t t = 0; t < M; ++t) {
      double s = 0;
      for (int n = 0; n < N; ++n) s += d[static_cast<std::size_t>(t * N + n)];
      CHECK(std::abs(s) <= 1e-6 * scale);
    }
  });
}

TEST_CASE("balance_loss: the read set and the gate use play no role (writer-only, SPEC §4.9)") {
  std::mt19937 gen(8);
  const index_t B = 1, T = 30, N = 4;
  const auto x = gapped_logits(gen, T, N, 1);
  float a1 = 0, a2 = 0, a3 = 0;
  const auto d1 = grad_of<sse<4, 1, 1>>(x, B, T, N, &a1);
  const auto d2 = grad_of<sse<4, 1, 3>>(x, B, T, N, &a2);
  const auto d3 = grad_of<sse<4, 1, 1, rt::top_k_options{.gates = rt::gate::none}>>(x, B, T, N, &a3);
  CHECK(a1 == a2);
  CHECK(a1 == a3);
  CHECK(d1 == d2);
  CHECK(d1 == d3);
  // but kw matters
  CHECK(loss_of<sse<4, 2>>(x, B, T, N) != a1);
}

TEST_CASE("balance_loss: over all B·T tokens — batch rows and packed sequences alike, not a per-row mean") {
  std::mt19937 gen(21);
  const index_t T = 25, N = 4;
  const auto x = gapped_logits(gen, 2 * T, N, 1);
  // [2,T,N] and [1,2T,N] (the same tokens packed into one row, as with cu_seqlens) give the same loss
  // and gradient: the function never looks at sequence boundaries.
  float a_b2 = 0, a_packed = 0;
  const auto d_b2 = grad_of<sse<4, 1>>(x, 2, T, N, &a_b2);
  const auto d_packed = grad_of<sse<4, 1>>(x, 1, 2 * T, N, &a_packed);
  CHECK(a_b2 == a_packed);
  CHECK(d_b2 == d_packed);

  // Row 0 routes every token to partition 0, row 1 to partition 1 (p ≈ 1 there): each row alone is
  // maximally unbalanced (aux ≈ N), the two together use two partitions equally (aux ≈ N/2).
  std::vector<float> y(static_cast<std::size_t>(2 * T * N), 0.f);
  for (index_t t = 0; t < 2 * T; ++t) y[static_cast<std::size_t>(t * N + (t < T ? 0 : 1))] = 20.f;
  const std::vector<float> row0(y.begin(), y.begin() + T * N), row1(y.begin() + T * N, y.end());
  CHECK(loss_of<sse<4, 1>>(row0, 1, T, N) == doctest::Approx(4.0).epsilon(1e-6));
  CHECK(loss_of<sse<4, 1>>(row1, 1, T, N) == doctest::Approx(4.0).epsilon(1e-6));
  CHECK(loss_of<sse<4, 1>>(y, 2, T, N) == doctest::Approx(2.0).epsilon(1e-6));
  CHECK(loss_of<sse<4, 1>>(y, 1, 2 * T, N) == doctest::Approx(2.0).epsilon(1e-6));
}

TEST_CASE("balance_loss: coefficient, overwrite and accumulate") {
  std::mt19937 gen(31);
  const index_t B = 2, T = 13, N = 8;
  const auto x = gapped_logits(gen, B * T, N, 2);
  const tensor_view<const float> lx{x.data(), {B, T, N}};
  float aux1 = 0;
  const auto g = grad_of<sse<8, 2>>(x, B, T, N, &aux1);
  double gmax = 0;
  for (float v : g) gmax = std::max(gmax, static_cast<double>(std::abs(v)));
  REQUIRE(gmax > 0);

  const float c = 0.01f;
  std::vector<float> d(x.size(), 123.f);
  const float aux2 = linstate::balance_loss<sse<8, 2>>(lx, tensor_view<float>{d.data(), {B, T, N}}, c);
  CHECK(aux2 == aux1);  // the value is unscaled
  for (std::size_t i = 0; i < d.size(); ++i) CHECK(d[i] == c * g[i]);  // overwrite (the default)

  std::vector<float> acc(x.size());
  for (std::size_t i = 0; i < acc.size(); ++i) acc[i] = 0.5f - static_cast<float>(i % 7);
  const std::vector<float> before = acc;
  const float aux3 = linstate::balance_loss<sse<8, 2>>(lx, tensor_view<float>{acc.data(), {B, T, N}}, c,
                                                        linstate::gradient_write::accumulate);
  CHECK(aux3 == aux1);
  // (a tolerance of a few ulp: the addition may or may not be contracted into an fma)
  for (std::size_t i = 0; i < acc.size(); ++i)
    CHECK(std::abs(acc[i] - (before[i] + c * g[i])) <= 4e-7f * std::abs(before[i]) + 1e-12f);

  // non-const views of the logits are accepted too
  std::vector<float> xm = x;
  std::vector<float> d2(x.size());
  CHECK(linstate::balance_loss<sse<8, 2>>(tensor_view<float>{xm.data(), {B, T, N}}) == aux1);
  CHECK(linstate::balance_loss<sse<8, 2>>(tensor_view<float>{xm.data(), {B, T, N}}, tensor_view<float>{d2.data(), {B, T, N}}) ==
        aux1);
  CHECK(d2 == g);
}

TEST_CASE("balance_loss: bf16 logits, with and without round_to_input (SPEC §4.4, §4.9)") {
  std::mt19937 gen(55);
  const index_t B = 1, T = 40, N = 4;
  const auto xf = gapped_logits(gen, T, N, 1, 0.1f);
  std::vector<Eigen::bfloat16> x(xf.size());
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = Eigen::bfloat16(xf[i]);
  const tensor_view<const Eigen::bfloat16> lx{x.data(), {B, T, N}};

  // oracle: the fp32 softmax of the bf16 values, optionally rounded to bf16, then the means in double
  auto oracle = [&](bool round) {
    std::vector<double> P(N, 0.0), F(N, 0.0);
    for (index_t t = 0; t < T; ++t) {
      std::vector<double> row(N);
      for (index_t n = 0; n < N; ++n) row[static_cast<std::size_t>(n)] = static_cast<float>(x[static_cast<std::size_t>(t * N + n)]);
      const auto p = softmax_d(row.data(), static_cast<int>(N));
      const auto w = write_mask(row, static_cast<int>(N), 1);
      for (std::size_t n = 0; n < static_cast<std::size_t>(N); ++n) {
        const float pf = static_cast<float>(p[n]);
        P[n] += round ? static_cast<float>(Eigen::bfloat16(pf)) : pf;
        F[n] += w[n];
      }
    }
    double s = 0;
    for (std::size_t n = 0; n < static_cast<std::size_t>(N); ++n) s += P[n] / T * F[n] / T;
    return static_cast<double>(N) * s;
  };
  const float plain = linstate::balance_loss<sse<4, 1>>(lx);
  const float rounded = linstate::balance_loss<sse<4, 1, 1, rt::top_k_options{.round_to_input = true}>>(lx);
  CHECK(std::abs(plain - oracle(false)) <= 1e-6 * oracle(false));
  CHECK(std::abs(rounded - oracle(true)) <= 1e-6 * oracle(true));
  CHECK(plain != rounded);  // bf16 rounding of p moves P by ~1e-3 relative

  std::vector<Eigen::bfloat16> d(x.size(), Eigen::bfloat16(7.f));
  const float aux = linstate::balance_loss<sse<4, 1>>(lx, tensor_view<Eigen::bfloat16>{d.data(), {B, T, N}});
  CHECK(aux == plain);
  const auto gf = grad_of<sse<4, 1>>(std::vector<float>(x.begin(), x.end()), B, T, N);
  for (std::size_t i = 0; i < d.size(); ++i) CHECK(static_cast<float>(d[i]) == static_cast<float>(Eigen::bfloat16(gf[i])));
}

TEST_CASE("balance_loss: a call with no token gives 0") {
  float dummy = 0.f, ddummy = 5.f;
  CHECK(linstate::balance_loss<sse<4, 1>>(tensor_view<const float>{&dummy, {1, 0, 4}}) == 0.f);
  CHECK(linstate::balance_loss<sse<4, 1>>(tensor_view<const float>{&dummy, {1, 0, 4}}, tensor_view<float>{&ddummy, {1, 0, 4}}) ==
        0.f);
  CHECK(ddummy == 5.f);
}

TEST_CASE("balance_loss: bad shapes, values and options throw linstate::error and write nothing") {
  std::mt19937 gen(1);
  const index_t B = 2, T = 5, N = 4;
  auto x = gapped_logits(gen, B * T, N, 1);
  std::vector<float> d(x.size(), 9.f);
  const tensor_view<const float> lx{x.data(), {B, T, N}};
  const tensor_view<float> dx{d.data(), {B, T, N}};

  // message must contain `word`; d must be untouched
  auto expect_error = [&](auto&& call, const std::string& word) {
    INFO("expected an error containing '" << word << "'");
    bool thrown = false;
    try {
      call();
    } catch (const linstate::error& e) {
      thrown = true;
      const std::string msg = e.what();
      CAPTURE(msg);
      CHECK(msg.find("linstate::balance_loss") != std::string::npos);
      CHECK(msg.find(word) != std::string::npos);
    }
    CHECK(thrown);
    CHECK(std::all_of(d.begin(), d.end(), [](float v) { return v == 9.f; }));
  };
  using S = sse<4, 1>;
  expect_error([&] { linstate::balance_loss<S>(tensor_view<const float>{x.data(), {B * T, N}}); }, "[10,4]");
  expect_error([&] { linstate::balance_loss<S>(tensor_view<const float>{x.data(), {B, T * 2, 2}}); }, "N = 4");
  expect_error([&] { linstate::balance_loss<S>(tensor_view<const float>{x.data(), {B, T, N, 1}}, dx); }, "[B,T,N]");
  expect_error([&] { linstate::balance_loss<S>(tensor_view<const float>{}); }, "required");
  expect_error([&] { linstate::balance_loss<S>(lx, tensor_view<float>{d.data(), {B, T - 1, N}}); }, "d_logits has shape [2,4,4]");
  expect_error([&] { linstate::balance_loss<S>(lx, tensor_view<float>{}); }, "d_logits is required");
  expect_error([&] { linstate::balance_loss<S>(lx, dx, std::numeric_limits<float>::infinity()); }, "coefficient");
  {
    // d_logits aliasing the logits (in-place) is refused
    std::vector<float> y = x;
    const std::vector<float> y0 = y;
    expect_error([&] { linstate::balance_loss<S>(tensor_view<const float>{y.data(), {B, T, N}}, tensor_view<float>{y.data() + 2, {B, T, N}}); },
                 "overlaps");
    CHECK(y == y0);
  }
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    auto y = x;
    y[13] = bad;
    expect_error([&] { linstate::balance_loss<S>(tensor_view<const float>{y.data(), {B, T, N}}, dx); },
                 "non-finite value at token 3, partition 1");
  }
  // options
  expect_error([&] { linstate::balance_loss<sse_dynamic>(lx, linstate::options{.num_writer = 1}); }, "num_partitions");
  expect_error([&] { linstate::balance_loss<sse_dynamic>(lx, linstate::options{.num_partitions = 4}); }, "num_writer");
  expect_error([&] { linstate::balance_loss<sse_dynamic>(lx, linstate::options{.num_partitions = 4, .num_writer = 5}); },
               "kw = 5");
  expect_error([&] { linstate::balance_loss<sse_dynamic>(lx, linstate::options{.num_partitions = 4, .num_writer = 0}); },
               "num_writer >= 1");
  expect_error([&] { linstate::balance_loss<S>(lx, linstate::options{.num_partitions = 8}); }, "N = 4");
  expect_error([&] { linstate::balance_loss<S>(lx, dx, 1.f, linstate::gradient_write::accumulate, linstate::options{.num_writer = 2}); },
               "num_writer = 2");
  expect_error([&] { linstate::balance_loss<S>(lx, linstate::options{.gates = rt::gate::read}); }, "gates");
  // the forward's options object works unchanged (kr and gates given, scale ignored)
  const linstate::options fwd{.scale = 0.5f, .num_partitions = 4, .num_writer = 1, .num_reader = 2, .gates = rt::gate::both};
  CHECK(linstate::balance_loss<sse_dynamic>(lx, fwd) == linstate::balance_loss<S>(lx));
}
