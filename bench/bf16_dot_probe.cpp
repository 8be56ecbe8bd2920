// bench/bf16_dot_probe.cpp — latency and throughput of the AVX-512 BF16 dot product (vdpbf16ps) against
// the fp32 fused multiply-add (vfmadd231ps), zmm and ymm, on the machine it runs on (issue 13, item 3).
//
// N independent accumulator chains (N = 1 gives the latency, large N the throughput), each step one
// instruction per chain; the chains start from distinct values so that the compiler cannot merge them.
// Per instruction: vfmadd231ps zmm does 16 multiply-adds, vdpbf16ps zmm 32 (16 lanes × a pair of bf16
// products); the last column compares multiply-adds per second, bf16 over fp32, at each N.
//
//   g++ -std=c++20 -O2 -march=native bench/bf16_dot_probe.cpp -o bf16_dot_probe && ./bf16_dot_probe
#include <algorithm>
#include <chrono>
#include <cstdio>

#if defined(__AVX512BF16__) && defined(__AVX512F__) && defined(__AVX512VL__)
#include <immintrin.h>

namespace {


template <int N, bool Dot>
__attribute__((noinline)) void chains512(long n, __m512 a, __m512 b) {
  __m512 c[N];
  for (int i = 0; i < N; ++i) c[i] = _mm512_set1_ps(static_cast<float>(i));
  const __m512bh ah = (__m512bh)_mm512_castps_si512(a), bh = (__m512bh)_mm512_castps_si512(b);
  for (long s = 0; s < n; ++s) {
#pragma GCC unroll 32
    for (int j = 0; j < N; ++j) {
      if constexpr (Dot) c[j] = _mm512_dpbf16_ps(c[j], ah, bh);
      else c[j] = _mm512_fmadd_ps(a, b, c[j]);
    }
  }
  __m512 t = _mm512_setzero_ps();
  for (int i = 0; i < N; ++i) t = _mm512_add_ps(t, c[i]);
  asm volatile("" : : "v"(t));  // the result is used: the chains are not dead code
}

template <int N, bool Dot>
__attribute__((noinline)) void chains256(long n, __m256 a, __m256 b) {
  __m256 c[N];
  for (int i = 0; i < N; ++i) c[i] = _mm256_set1_ps(static_cast<float>(i));
  const __m256bh ah = (__m256bh)_mm256_castps_si256(a), bh = (__m256bh)_mm256_castps_si256(b);
  for (long s = 0; s < n; ++s) {
#pragma GCC unroll 32
    for (int j = 0; j < N; ++j) {
      if constexpr (Dot) c[j] = _mm256_dpbf16_ps(c[j], ah, bh);
      else c[j] = _mm256_fmadd_ps(a, b, c[j]);
    }
  }
  __m256 t = _mm256_setzero_ps();
  for (int i = 0; i < N; ++i) t = _mm256_add_ps(t, c[i]);
  asm volatile("" : : "v"(t));
}

template <class F>
double ns_per_step(F f, long n) {
  double best = 1e30;
  for (int r = 0; r < 5; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f(n);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e9 / n);
  }
  return best;
}

template <int N>
void row(long n, float x) {
  const __m512 a = _mm512_set1_ps(x), b = _mm512_set1_ps(0.5f);
  const __m256 a8 = _mm256_set1_ps(x), b8 = _mm256_set1_ps(0.5f);
  const double fz = ns_per_step([&](long k) { chains512<N, false>(k, a, b); }, n) / N;
  const double dz = ns_per_step([&](long k) { chains512<N, true>(k, a, b); }, n) / N;
  const double fy = ns_per_step([&](long k) { chains256<N, false>(k, a8, b8); }, n) / N;
  const double dy = ns_per_step([&](long k) { chains256<N, true>(k, a8, b8); }, n) / N;
  std::printf("| %d | %.3f | %.3f | %.2f | %.3f | %.3f | %.2f |\n", N, fz, dz, (32 / dz) / (16 / fz), fy, dy,
              (16 / dy) / (8 / fy));
}

}  // namespace

int main(int argc, char**) {
  const long n = 2000000;
  const float x = 1.0f + static_cast<float>(argc) * 1e-3f;  // not a compile-time constant
  std::printf("ns per instruction, best of 5 runs of %ld steps; ratio = bf16 multiply-adds per ns / fp32's\n", n);
  std::printf("| chains | fma zmm | vdpbf16ps zmm | ratio | fma ymm | vdpbf16ps ymm | ratio |\n|---|---|---|---|---|---|---|\n");
  row<1>(n, x);
  row<2>(n, x);
  row<4>(n, x);
  row<8>(n, x);
  row<12>(n, x);
  row<16>(n, x);
  row<24>(n, x);
  return 0;
}
#else
int main() {
  std::printf("bf16_dot_probe: this build does not target AVX-512 BF16 (try -march=native on a CPU that has it)\n");
  return 0;
}
#endif
