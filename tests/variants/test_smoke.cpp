// Smallest end-to-end check: GLA recurrent and chunked against the fp64 reference.
#include <doctest/doctest.h>

#include <cmath>
#include <linstate/linstate.hpp>
#include <random>

namespace {
struct gla : linstate::spec<> {};
}

TEST_CASE("smoke: GLA recurrent and chunked match the fp64 reference") {
  std::mt19937 gen(7);
  std::normal_distribution<float> nd;
  const linstate::index_t B = 1, T = 70, H = 2, K = 16, V = 24;
  auto fill = [&](linstate::tensor<float>& t, bool gate) {
    for (auto& x : t.values()) x = gate ? -std::log1p(std::exp(-nd(gen))) / 16.f : nd(gen);
  };
  linstate::tensor<float> q({B, T, H, K}), k({B, T, H, K}), v({B, T, H, V}), g({B, T, H, K});
  fill(q, false), fill(k, false), fill(v, false), fill(g, true);
  const linstate::inputs<float> in{.q = q.view(), .k = k.view(), .v = v.view(), .g = g.view()};
  const auto ref = linstate::reference::forward<gla>(in);
  for (int algo = 0; algo < 2; ++algo) {
    const auto r = algo ? linstate::forward<gla>(linstate::cpu{}, in, linstate::chunked<16>{})
                        : linstate::forward<gla>(linstate::cpu{}, in, linstate::recurrent{});
    double err = 0, mx = 0;
    for (linstate::index_t i = 0; i < ref.o.numel(); ++i)
      err = std::max(err, std::abs(r.o[i] - ref.o[i])), mx = std::max(mx, std::abs(ref.o[i]));
    CHECK(err <= 1e-5 * mx);
  }
}
