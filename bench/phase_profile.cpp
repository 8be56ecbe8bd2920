// bench/phase_profile.cpp — where the CPU chunked forward spends its time (issue 13, item 5).
//
// Compiled with LINSTATE_PHASE_TIMERS=1 (bench/profile.sh does it), which turns on the lap timers of
// <linstate/detail/phase_timer.hpp> inside run_chunked (GLA) and run_chunked_delta (GDN, WY form).
// For each row: one untimed call, then calls until `--min-time` seconds have passed, `--samples`
// times; per sample the wall time and the process CPU time per call, and each phase's thread CPU time
// per call (summed over threads). On a shared machine the CPU times are the figures to read: they do
// not count the time the threads waited for a core.
// Prints medians over the samples, the GEMM rate (the products' FLOPs, counted as 2·m·n·k for every
// product the kernel forms, over the GEMM phase's time) and the FMA peak of the same thread count
// of one thread (<linstate/bench.hpp>'s 12 chains of packet multiply-adds, by thread CPU time).
//
//   bench/profile.sh BUILD_DIR            # builds and runs this and bench/gemm_shapes.cpp
//   BUILD_DIR/phase_profile [--T=4096] [--H=8] [--threads=1,2] [--samples=5] [--min-time=0.5] [--bf16|--bf16-only]
//   (--bf16: also GLA with bf16 inputs, exact and with linstate::cpu::bf16_products; --bf16-only: those two)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <time.h>

#if !defined(LINSTATE_PHASE_TIMERS) || !LINSTATE_PHASE_TIMERS
#error "bench/phase_profile.cpp needs -DLINSTATE_PHASE_TIMERS=1 (bench/profile.sh)"
#endif
#include <linstate/bench.hpp>
#include <linstate/linstate.hpp>

#include "profile_util.hpp"

namespace {

using namespace linstate_profile;

using linstate::index_t;
namespace lb = linstate::bench;
namespace ph = linstate::detail::phase;

struct gla : linstate::spec<> {};
struct gdn : linstate::spec<> {
  using decay = linstate::decay::gated_delta_rule<true>;
};
constexpr index_t K = 128, V = 128, C = 64;
index_t H = 8;  // --H: heads (the rows of one head lie H·K floats apart)

//! FLOPs of the products one chunk of m rows forms (2·m·n·k each; the triangular solve m²(V+K)).
//! Counted whole: since issue 13's session 8 the AVX2 kernel forms only about half of the causal
//! products (A, A·V; GDN's L, A, A·V_new: gemm.hpp's shapes), so on AVX2 builds the printed rate is a
//! nominal one, above what the multiply-adds actually issued run at.
double gemm_flops_gla(index_t m) { return 2.0 * m * K * V + 2.0 * m * m * K + 2.0 * m * m * V + 2.0 * K * m * V; }
double gemm_flops_gdn(index_t m) {
  // L = K Kᵀ, V_new −= W S, A = Q Kᵀ, O = Q S, O += A V_new, S += Kᵀ V_new
  return 2.0 * m * m * K + 2.0 * m * K * V + 2.0 * m * m * K + 2.0 * m * K * V + 2.0 * m * m * V + 2.0 * K * m * V;
}
double solve_flops(index_t m) { return 1.0 * m * m * (V + K); }

template <class Spec, class Scalar = float>
void profile(const char* name, index_t T, int threads, int samples, double min_time, double peak, bool bf16_products = false) {
  lb::workload<Spec, Scalar> w(lb::mode::prefill, lb::options{.B = 1, .T = T, .H = H, .K = K, .V = V});
  const linstate::cpu be{.threads = threads, .bf16_products = bf16_products};
  w.prefill(be, linstate::chunked<C>{});
  std::vector<double> wall, cpu;
  std::vector<std::vector<double>> per(ph::count);
  for (int s = 0; s < samples; ++s) {
    ph::reset();
    const double c0 = process_cpu_s();
    const auto t0 = std::chrono::steady_clock::now();
    int n = 0;
    double el = 0;
    do {
      w.prefill(be, linstate::chunked<C>{});
      ++n;
      el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    } while (el < min_time);
    wall.push_back(el / n);
    cpu.push_back((process_cpu_s() - c0) / n);
    for (int p = 0; p < ph::count; ++p) per[p].push_back(ph::seconds(static_cast<ph::id>(p)) / n);
  }
  const index_t chunks = (T + C - 1) / C;
  double flops = 0, sflops = 0;
  for (index_t c = 0; c < chunks; ++c) {
    const index_t m = std::min(C, T - c * C);
    flops += (linstate::detail::is_delta<typename Spec::decay> ? gemm_flops_gdn(m) : gemm_flops_gla(m)) * H;
    sflops += solve_flops(m) * H;
  }
  const double tw = median(wall), tc = median(cpu);
  double tsum = 0;
  for (int p = 0; p < ph::count; ++p) tsum += median(per[p]);
  std::printf("\n%s chunked<%ld>, T = %ld, H = %ld, threads = %d (medians of %d samples): wall %.3f ms per call (%.1f k tokens/s), "
              "process CPU %.3f ms per call; phases (thread CPU time, summed over threads) %.3f ms = %.2f x process CPU\n",
              name, static_cast<long>(C), static_cast<long>(T), static_cast<long>(H), threads, samples, tw * 1e3, T / tw / 1e3, tc * 1e3, tsum * 1e3,
              tsum / tc);
  std::printf("| phase | CPU ms per call (thread-summed) | share of the phases |\n|---|---|---|\n");
  for (int p = 0; p < ph::count; ++p) {
    const double t = median(per[p]);
    if (t == 0) continue;
    std::printf("| %s | %.3f | %.1f %% |\n", ph::names[p], t * 1e3, 100 * t / tsum);
  }
  const double tg = median(per[ph::gemm]);
  std::printf("GEMM: %.1f MFLOP per call, %.1f GFLOP/s per thread = %.1f %% of the %.1f GFLOP/s FMA peak of one thread\n",
              flops / 1e6, flops / tg / 1e9, 100 * flops / tg / peak, peak / 1e9);
  if (linstate::detail::is_delta<typename Spec::decay>) {
    const double ts = median(per[ph::solve]);
    std::printf("triangular solve: %.1f MFLOP per call, %.1f GFLOP/s per thread\n", sflops / 1e6, sflops / ts / 1e9);
  }
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  index_t T = 4096;
  std::vector<int> threads = {1, 2};
  bool bf16 = false, fp32 = true;
  int samples = 5;
  double min_time = 0.5;
  for (int i = 1; i < argc; ++i) {
    if (!std::strncmp(argv[i], "--T=", 4)) T = std::atol(argv[i] + 4);
    else if (!std::strncmp(argv[i], "--H=", 4)) H = std::atol(argv[i] + 4);
    else if (!std::strncmp(argv[i], "--threads=", 10)) threads = ints(argv[i] + 10);
    else if (!std::strncmp(argv[i], "--samples=", 10)) samples = std::atoi(argv[i] + 10);
    else if (!std::strncmp(argv[i], "--min-time=", 11)) min_time = std::atof(argv[i] + 11);
    else if (!std::strcmp(argv[i], "--bf16")) bf16 = true;
    else if (!std::strcmp(argv[i], "--bf16-only")) bf16 = true, fp32 = false;
    else {
      std::fprintf(stderr, "usage: phase_profile [--T=4096] [--H=8] [--threads=1,2] [--samples=5] [--min-time=0.5] [--bf16|--bf16-only]\n");
      return 2;
    }
  }
  const double peak = fma_peak_one_thread();
  std::printf("# phase_profile: %s; FMA peak of one thread: %.1f GFLOP/s (12 chains of %d-lane packet multiply-adds, "
              "thread CPU time, best of 7)\n",
              lb::detail::cpu_model().c_str(), peak / 1e9, static_cast<int>(Eigen::internal::packet_traits<float>::size));
  for (int t : threads) {
    if (fp32) {
      profile<gla>("GLA", T, t, samples, min_time, peak);
      profile<gdn>("GDN (l2norm q, k; WY form)", T, t, samples, min_time, peak);
    }
    if (bf16) {  // bf16 inputs: the exact path (fp32 products), then cpu::bf16_products (vdpbf16ps where built in)
      profile<gla, Eigen::bfloat16>("GLA, bf16 inputs", T, t, samples, min_time, peak);
      profile<gla, Eigen::bfloat16>(linstate::cpu_bf16_dot ? "GLA, bf16 inputs, cpu::bf16_products (vdpbf16ps)"
                                                           : "GLA, bf16 inputs, cpu::bf16_products (not built in: the exact path)",
                                    T, t, samples, min_time, peak, true);
    }
  }
  return 0;
}
