// docs/data/issue13/s11/stage.cpp — the staging gather alone: 5 tensors [T = 4096, H = 8, K = 128], one head's 64 rows per chunk
// (each 4 KiB from the next), a 900 KB sweep between chunks (the chunk's other work); prefetch distances 0 … 32 rows.
// HUGE=1: the tensors madvise(MADV_HUGEPAGE)d.   g++ -O2 -march=native docs/data/issue13/s11/stage.cpp && ./a.out
#include <immintrin.h>
#include <chrono>
#include <cstdio>
#include <vector>
#include <cstdlib>
#include <cstring>
#include <sys/mman.h>
int main() {
  const long T = 4096, H = 8, K = 128; const int NTEN = 5;
  std::vector<std::vector<float>> in(NTEN, std::vector<float>(T * H * K, 1.f));
  if (getenv("HUGE")) for (auto& v : in) { madvise((void*)(((unsigned long)v.data() + 4095) & ~4095ul), v.size() * 4 - 8192, MADV_HUGEPAGE); for (auto& x : v) x = 2.f; }
  std::vector<float> dst(NTEN * 64 * K), ws(900 * 256);
  for (int dist : {0, 4, 8, 16, 32}) for (int rep = 0; rep < 2; ++rep) {
    double t_stage = 0; auto T0 = std::chrono::steady_clock::now();
    for (long h = 0; h < H; ++h) for (long c = 0; c < T; c += 64) {
      auto t0 = std::chrono::steady_clock::now();
      for (int o = 0; o < NTEN; ++o) {
        const float* base = in[o].data() + h * K;
        float* d = dst.data() + o * 64 * K;
        for (long i = 0; i < 64; ++i) {
          if (dist && i + dist < 64) { const char* p = (const char*)(base + (c + i + dist) * H * K); for (int l = 0; l < 512; l += 64) _mm_prefetch(p + l, _MM_HINT_T0); }
          const float* s = base + (c + i) * H * K;
          for (int a = 0; a < K; a += 8) _mm256_storeu_ps(d + i * K + a, _mm256_mul_ps(_mm256_loadu_ps(s + a), _mm256_set1_ps(1.0001f)));
        }
      }
      t_stage += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      for (size_t j = 0; j < ws.size(); j += 16) ws[j] += 1.f;  // the chunk's other work sweeping ~900 KB
    }
    double tot = std::chrono::duration<double>(std::chrono::steady_clock::now() - T0).count();
    std::printf("prefetch distance %2d: staging %.2f ms (%.1f us per chunk-head, %.2f GB/s), total %.2f ms\n", dist, t_stage * 1e3, t_stage / (H * T / 64) * 1e6, NTEN * 16.0 * 1.048576e6 / t_stage / 1e9 * 1, tot * 1e3);
  }
}
