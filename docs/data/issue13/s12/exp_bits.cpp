// docs/data/issue13/s12/exp_bits.cpp — cpu_detail::exp8 (backend/cpu/exp.hpp) against Eigen's packet exp on every
// fp32 bit pattern (2^32 inputs, NaNs and infinities included), then both rates on a 64×128 row set in L1.
//   g++ -std=c++20 -O3 -march=native -DNDEBUG -Iinclude $(pkg-config --cflags eigen3) docs/data/issue13/s12/exp_bits.cpp -o exp_bits
#include <linstate/backend/cpu/exp.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace ei = Eigen::internal;
using linstate::cpu_detail::exp_packet;
constexpr int N = linstate::cpu_detail::exp_packet_size;

int main() {
  std::printf("LINSTATE_EXP8 = %d, packet %d floats\n", LINSTATE_EXP8, N);
  std::uint64_t differ = 0, nan_both = 0;
  alignas(64) std::uint32_t in[N];
  alignas(64) float a[N], b[N];
  for (std::uint64_t base = 0; base < (std::getenv("SKIP_ALL") ? 0 : std::uint64_t{1} << 32); base += N) {
    for (int l = 0; l < N; ++l) in[l] = static_cast<std::uint32_t>(base + l);
    exp_packet x;
    std::memcpy(&x, in, sizeof x);
    ei::pstore(a, ei::pexp(x));
    ei::pstore(b, linstate::cpu_detail::exp8(x));
    if (std::memcmp(a, b, sizeof a) != 0)
      for (int l = 0; l < N; ++l) {
        std::uint32_t ua, ub;
        std::memcpy(&ua, a + l, 4), std::memcpy(&ub, b + l, 4);
        if (ua != ub) {
          if (a[l] != a[l] && b[l] != b[l]) ++nan_both;
          else if (differ++ < 5) std::printf("differ at 0x%08x: eigen %a exp8 %a\n", in[l], a[l], b[l]);
        }
      }
  }
  std::printf("every fp32 input: %llu results differ in bits (%llu more NaNs with other payloads)\n",
              static_cast<unsigned long long>(differ), static_cast<unsigned long long>(nan_both));
  // rates: a chunk's e^{Γ} rows, Γ in [-3, 0]
  const int m = 64, K = 128, reps = 5000;
  std::vector<float> g(m * K), q(m * K, 1.5f), d(m * K);
  for (int i = 0; i < m * K; ++i) g[i] = -3.f * static_cast<float>(i % 977) / 977.f;
  for (int r = 0; r < 8; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    for (int it = 0; it < reps; ++it) {
      Eigen::Map<Eigen::ArrayXf>(d.data(), m * K) = Eigen::Map<const Eigen::ArrayXf>(q.data(), m * K) * Eigen::Map<const Eigen::ArrayXf>(g.data(), m * K).exp();
      asm volatile("" ::: "memory");
    }
    const double te = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
    t0 = std::chrono::steady_clock::now();
    for (int it = 0; it < reps; ++it) {
      linstate::cpu_detail::mul_exp_row<1>(g.data(), q.data(), d.data(), m * K);
      asm volatile("" ::: "memory");
    }
    const double tf = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
    std::printf("q * exp(g), 64x128: Eigen %.2f us (%.3f ns/element), exp8 %.2f us (%.3f ns/element)\n", te * 1e6, te * 1e9 / (m * K),
                tf * 1e6, tf * 1e9 / (m * K));
  }
}
