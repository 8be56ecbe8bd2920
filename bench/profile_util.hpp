// bench/profile_util.hpp — the small helpers bench/profile.sh's programs share (phase_profile.cpp,
// train_profile.cpp, gemm_shapes.cpp): CPU clocks, the median of samples, the machine's load, and the
// comma-separated integer lists of their options, one thread's FMA peak.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <time.h>

#include <cstdint>

#include <linstate/bench.hpp>

namespace linstate_profile {

//! CPU time of the whole process (every thread's running time; waits for a core left out), seconds.
inline double process_cpu_s() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

//! CPU time of the calling thread, seconds.
inline double thread_cpu_s() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

//! One thread's FMA peak: <linstate/bench.hpp>'s 12 chains of packet multiply-adds, timed by the
//! thread's CPU time (so a shared machine's waits do not lower it), the best of 7 runs of ~20 ms.
inline double fma_peak_one_thread() {
  volatile float sink = 0;
  std::int64_t iters = 1 << 16;
  for (;;) {
    const double t0 = thread_cpu_s();
    linstate::bench::detail::fma_chains(iters, &sink);
    const double s = thread_cpu_s() - t0;
    if (s > 2e-3) {
      iters = static_cast<std::int64_t>(static_cast<double>(iters) * 20e-3 / s) + 1;
      break;
    }
    iters *= 4;
  }
  double best = 0;
  for (int r = 0; r < 7; ++r) {
    const double t0 = thread_cpu_s();
    const double flops = linstate::bench::detail::fma_chains(iters, &sink);
    best = std::max(best, flops / (thread_cpu_s() - t0));
  }
  return best;
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

//! /proc/loadavg's three load averages, as printed beside every figure.
inline std::string loadavg() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

//! "1,2,4" → {1, 2, 4}.
inline std::vector<int> ints(const char* v) {
  std::vector<int> r;
  for (const char* p = v; *p;) {
    r.push_back(std::atoi(p));
    while (*p && *p != ',') ++p;
    if (*p) ++p;
  }
  return r;
}

}  // namespace linstate_profile
