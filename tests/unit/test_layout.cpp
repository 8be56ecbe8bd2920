// Converters between the canonical state layout and the authors' mask / varlen layouts (SPEC §4.10).
#include <doctest/doctest.h>

#include <linstate/linstate.hpp>

TEST_CASE("layout: canonical <-> authors' mask and varlen layouts") {
  const linstate::index_t S = 3, N = 4, P = N + 1, HV = 2, K = 3, V = 5, block = HV * K * V;
  linstate::tensor<float> st({S, P, HV, K, V});
  for (linstate::index_t i = 0; i < st.numel(); ++i) st[i] = static_cast<float>(i);

  SUBCASE("mask layout is a reshape with head index p*HV + hv") {
    const auto m = linstate::layout::to_mask(st.view());
    CHECK(m.shape() == linstate::shape_t{S, P * HV, K, V});
    for (linstate::index_t s = 0; s < S; ++s)
      for (linstate::index_t p = 0; p < P; ++p)
        for (linstate::index_t hv = 0; hv < HV; ++hv)
          CHECK(m[((s * P * HV) + p * HV + hv) * K * V] == st[((s * P + p) * HV + hv) * K * V]);
    const auto back = linstate::layout::from_mask(m.view(), HV);
    CHECK(back.values() == st.values());
    CHECK(back.shape() == st.shape());
  }
  SUBCASE("varlen layout: shared rows first, then routed (s, n) at S + s*N + n") {
    const auto v = linstate::layout::to_varlen(st.view());
    CHECK(v.shape() == linstate::shape_t{S * P, HV, K, V});
    for (linstate::index_t s = 0; s < S; ++s) {
      CHECK(v[s * block] == st[(s * P + 0) * block]);
      for (linstate::index_t n = 0; n < N; ++n) CHECK(v[(S + s * N + n) * block] == st[(s * P + 1 + n) * block]);
    }
    const auto back = linstate::layout::from_varlen(v.view(), S);
    CHECK(back.values() == st.values());
  }
  SUBCASE("bad shapes are rejected with the shape in the message") {
    linstate::tensor<float> bad({S, 1, HV, K, V});
    CHECK_THROWS_WITH_AS(linstate::layout::to_varlen(bad.view()), doctest::Contains("[3,1,2,3,5]"), linstate::error);
    linstate::tensor<float> cache({7, HV, K, V});
    CHECK_THROWS_WITH_AS(linstate::layout::from_varlen(cache.view(), 3), doctest::Contains("[7,2,3,5]"), linstate::error);
    CHECK_THROWS_AS(linstate::layout::from_mask(cache.view(), 3), linstate::error);
  }
}
