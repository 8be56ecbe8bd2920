// docs/data/issue13/s11/nt.cpp — writing 4 × 16 MiB gradient tensors as 512-byte rows 4 KiB apart: stores against
// non-temporal stores.   g++ -O2 -march=native docs/data/issue13/s11/nt.cpp && ./a.out
#include <immintrin.h>
#include <chrono>
#include <cstdio>
#include <vector>
#include <cstring>
int main() {
  const long T = 4096, H = 8, K = 128; const int NT4 = 4;
  std::vector<std::vector<float>> out(NT4, std::vector<float>(T * H * K + 8, 1.f));
  float src[64 * 128]; for (int i = 0; i < 64 * 128; ++i) src[i] = i;
  for (int rep = 0; rep < 4; ++rep) for (int nt = 0; nt < 2; ++nt) {
    auto t0 = std::chrono::steady_clock::now();
    for (long h = 0; h < H; ++h) for (long c = 0; c < T; c += 64) for (int o = 0; o < NT4; ++o) {
      float* base = out[o].data() + 4;  // 16B-aligned like malloc'd data
      for (long i = 0; i < 64; ++i) {
        float* d = base + ((c + i) * H + h) * K;
        const float* s = src + i * 128;
        if (nt) for (int a = 0; a < K; a += 4) _mm_stream_ps(d + a, _mm_loadu_ps(s + a));
        else for (int a = 0; a < K; a += 8) _mm256_storeu_ps(d + a, _mm256_loadu_ps(s + a));
      }
    }
    _mm_sfence();
    std::printf("%s %.2f ms\n", nt ? "stream" : "store ", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e3);
  }
}
