// bench/train_profile.cpp — where a CPU training step spends its time (issue 13, item 4): the forward
// (chunked<64>, final state written) and the backward of GLA timed apart, and the backward's kernel
// phases.
//
// Compiled with LINSTATE_PHASE_TIMERS=1 (bench/profile.sh builds it beside phase_profile), which turns
// on the lap timers of <linstate/detail/phase_timer.hpp> in run_chunked (forward) and
// run_chunked_backward. One untimed training step, then `--samples` samples; each sample runs forward
// calls until `--min-time` seconds have passed, then backward calls as long (the two alternate from
// sample to sample, so the machine's drift falls on both). Per call: wall time, process CPU time (both
// threads' running time, waits for a core left out: the figure to read on a shared machine) and each
// phase's thread CPU time (summed over threads). Prints medians over the samples.
//
//   bench/profile.sh BUILD_DIR --threads=2         # builds and runs phase_profile, train_profile, gemm_shapes
//   BUILD_DIR/train_profile [--T=4096] [--H=8] [--threads=1,2] [--samples=5] [--min-time=0.5] [--saved=1]
// --saved=1 (default): the forward keeps its chunk states for the backward (linstate::saved_states); 0: the
// backward recomputes them.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <time.h>

#if !defined(LINSTATE_PHASE_TIMERS) || !LINSTATE_PHASE_TIMERS
#error "bench/train_profile.cpp needs -DLINSTATE_PHASE_TIMERS=1 (bench/profile.sh)"
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
index_t H = 8;       // --H: heads (a head's rows lie H·K floats apart)
bool saved = true;   // --saved=0: the backward recomputes the chunk states (else the forward keeps them)

struct timing {
  std::vector<double> wall, cpu;
  std::vector<std::vector<double>> per = std::vector<std::vector<double>>(ph::count);
};

template <class F>
void sample(F&& f, double min_time, timing& t) {
  ph::reset();
  const double c0 = process_cpu_s();
  const auto t0 = std::chrono::steady_clock::now();
  int n = 0;
  double el = 0;
  do {
    f();
    ++n;
    el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  } while (el < min_time);
  t.wall.push_back(el / n);
  t.cpu.push_back((process_cpu_s() - c0) / n);
  for (int p = 0; p < ph::count; ++p) t.per[p].push_back(ph::seconds(static_cast<ph::id>(p)) / n);
}

void print(const char* what, const timing& t, index_t T) {
  const double tw = median(t.wall), tc = median(t.cpu);
  double tsum = 0;
  for (int p = 0; p < ph::count; ++p) tsum += median(t.per[p]);
  std::printf("%s: wall %.2f ms per call (%.1f k tokens/s), process CPU %.2f ms per call (samples:", what, tw * 1e3, T / tw / 1e3,
              tc * 1e3);
  for (double x : t.cpu) std::printf(" %.1f", x * 1e3);
  std::printf("); phases %.2f ms = %.2f x process CPU\n", tsum * 1e3, tsum / tc);
  for (int p = 0; p < ph::count; ++p) {
    const double x = median(t.per[p]);
    if (x > 0) std::printf("  | %s | %.2f ms | %.1f %% |\n", ph::names[p], x * 1e3, 100 * x / tsum);
  }
}

void profile(index_t T, int threads, int samples, double min_time) {
  lb::workload<gla, float> w(lb::mode::train, lb::options{.B = 1, .T = T, .H = H, .K = 128, .V = 128});
  const linstate::cpu be{.threads = threads};
  const linstate::chunked<64> alg{};
  const linstate::inputs<float> in = w.in();
  const linstate::outputs<float> out{w.o.view(), w.final_state.view()};
  const linstate::cotangents<float> d{.o = w.d_o.cview()};
  auto fwd = [&] {
    if (saved) linstate::forward<gla>(be, in, out, w.saved, alg, linstate::varlen{}, w.call);
    else w.prefill(be, alg);
  };
  auto bwd = [&] {
    if (saved) linstate::backward<gla>(be, in, d, w.grads(), w.saved, alg, linstate::varlen{}, w.call);
    else linstate::backward<gla>(be, in, d, w.grads(), alg, linstate::varlen{}, w.call);
  };
  w.train(be, alg);
  timing f, b;
  for (int s = 0; s < samples; ++s) {
    if (s % 2 == 0) sample(fwd, min_time, f), sample(bwd, min_time, b);
    else sample(bwd, min_time, b), sample(fwd, min_time, f);
  }
  std::printf("\nGLA chunked<64>, B = 1, T = %ld, H = %ld, K = V = 128, threads = %d, chunk states %s, medians of %d samples (load %s)\n",
              static_cast<long>(T), static_cast<long>(H), threads, saved ? "kept by the forward" : "recomputed", samples,
              loadavg().c_str());
  print("forward (final state written)", f, T);
  print("backward", b, T);
  const double fw = median(f.wall), bw = median(b.wall), fc = median(f.cpu), bc = median(b.cpu);
  std::printf("forward + backward: wall %.2f ms (%.1f k tokens/s), process CPU %.2f ms (%.1f k tokens per CPU second); "
              "backward / forward: %.2f (wall), %.2f (CPU)\n",
              (fw + bw) * 1e3, T / (fw + bw) / 1e3, (fc + bc) * 1e3, T / (fc + bc) / 1e3, bw / fw, bc / fc);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  index_t T = 4096;
  std::vector<int> threads = {2};
  int samples = 5;
  double min_time = 0.5;
  for (int i = 1; i < argc; ++i) {
    if (!std::strncmp(argv[i], "--T=", 4)) T = std::atol(argv[i] + 4);
    else if (!std::strncmp(argv[i], "--H=", 4)) H = std::atol(argv[i] + 4);
    else if (!std::strncmp(argv[i], "--threads=", 10)) threads = ints(argv[i] + 10);
    else if (!std::strncmp(argv[i], "--samples=", 10)) samples = std::atoi(argv[i] + 10);
    else if (!std::strncmp(argv[i], "--min-time=", 11)) min_time = std::atof(argv[i] + 11);
    else if (!std::strncmp(argv[i], "--saved=", 8)) saved = std::atoi(argv[i] + 8) != 0;
    else {
      std::fprintf(stderr, "usage: train_profile [--T=4096] [--H=8] [--threads=2] [--samples=5] [--min-time=0.5] [--saved=1]\n");
      return 2;
    }
  }
  std::printf("# train_profile: %s\n", lb::detail::cpu_model().c_str());
  for (int t : threads) profile(T, t, samples, min_time);
  return 0;
}
