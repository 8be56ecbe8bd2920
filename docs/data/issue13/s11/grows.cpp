// docs/data/issue13/s11/grows.cpp — one chunk of Γ rows (fp64, m = 64, K = 128) in cache: load_log_decay + widening + add ("cur"),
// a plain loop without the call ("fast"), AVX2 by hand as gamma_row ("simd")
//   g++ -std=c++20 -O3 -march=native -fopenmp -DNDEBUG -Iinclude $(pkg-config --cflags eigen3) docs/data/issue13/s11/grows.cpp && ./a.out
#include <linstate/linstate.hpp>
#include <chrono>
#include <cstdio>
using namespace linstate::cpu_detail;
using linstate::index_t;
using D = linstate::decay::gated_key;
int main() {
  const index_t m = 64, K = 128;
  std::vector<float> g(m * K); for (size_t i = 0; i < g.size(); ++i) g[i] = -0.01f * (i % 37);
  RowMatD G(m, K); RowVec grow(K);
  bool floored = false;
  auto cur = [&] {
    for (index_t i = 0; i < m; ++i) {
      auto Gi = G.row(i);
      floored |= load_log_decay<D>(g.data() + i * K, grow.data(), K);
      const float* __restrict gr = grow.data(); double* __restrict gd = Gi.data();
      for (index_t a = 0; a < K; ++a) gd[a] = static_cast<double>(gr[a]);
      if (i > 0) Gi += G.row(i - 1);
    }
  };
  auto fast = [&] {
    int fl = 0;
    for (index_t i = 0; i < m; ++i) {
      const float* __restrict src = g.data() + i * K;
      double* __restrict gd = G.row(i).data();
      const double* __restrict gp = G.row(i > 0 ? i - 1 : 0).data();
      const float F = linstate::detail::chunked_log_decay_floor;
      if (i > 0)
        for (index_t a = 0; a < K; ++a) { const float x = src[a]; fl |= x < F; gd[a] = static_cast<double>(x < F ? F : x) + gp[a]; }
      else
        for (index_t a = 0; a < K; ++a) { const float x = src[a]; fl |= x < F; gd[a] = static_cast<double>(x < F ? F : x); }
    }
    floored |= fl != 0;
  };
  auto simd = [&] {
    const __m256 F = _mm256_set1_ps(linstate::detail::chunked_log_decay_floor);
    int fl = 0;
    for (index_t i = 0; i < m; ++i) {
      const float* __restrict src = g.data() + i * K;
      double* __restrict gd = G.row(i).data();
      const double* __restrict gp = G.row(i > 0 ? i - 1 : 0).data();
      for (index_t a = 0; a < K; a += 8) {
        const __m256 x = _mm256_loadu_ps(src + a), lt = _mm256_cmp_ps(x, F, _CMP_LT_OQ);
        fl |= _mm256_movemask_ps(lt);
        const __m256 y = _mm256_blendv_ps(x, F, lt);
        __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(y)), hi = _mm256_cvtps_pd(_mm256_extractf128_ps(y, 1));
        if (i > 0) lo = _mm256_add_pd(lo, _mm256_loadu_pd(gp + a)), hi = _mm256_add_pd(hi, _mm256_loadu_pd(gp + a + 4));
        _mm256_storeu_pd(gd + a, lo), _mm256_storeu_pd(gd + a + 4, hi);
      }
    }
    floored |= fl != 0;
  };
  for (int r = 0; r < 3; ++r) { auto t0 = std::chrono::steady_clock::now();
    for (int it = 0; it < 5000; ++it) { simd(); asm volatile("" ::: "memory"); }
    std::printf("simd %.2f us\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 5000 * 1e6); }
  for (int r = 0; r < 3; ++r) for (int w = 0; w < 2; ++w) {
    auto t0 = std::chrono::steady_clock::now();
    for (int it = 0; it < 5000; ++it) { if (w) fast(); else cur(); asm volatile("" ::: "memory"); }
    std::printf("%s %.2f us\n", w ? "fast" : "cur ", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 5000 * 1e6);
  }
  std::printf("%d %f\n", (int)floored, G(63, 5));
}
