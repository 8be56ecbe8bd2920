// Decode step time (linstate::forward_in_place, T = 1, recurrent) against B and the thread count, in one
// process, rounds alternating between the thread counts (issue 13, item 2, session 8).
//
//   g++ -std=c++20 -O3 -march=native -fopenmp -Iinclude -I/usr/include/eigen3 \
//       docs/data/issue13/s8/decode_team.cpp -o /tmp/decode_team
//   /tmp/decode_team --B=1,2,4,8,16,32 --threads=1,2 --rounds=4 --min-time=0.2 [--variant=gla|gdn]
//
// Per (B, threads) and round: back-to-back steps for ≥ min-time seconds; the figures are the median
// over rounds of the wall time per step and of the process CPU time per step (both threads' running
// time: waits for a core are not in it).
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <linstate/bench.hpp>
#include <linstate/linstate.hpp>

namespace lb = linstate::bench;
using linstate::index_t;

struct gla : linstate::spec<> {};
struct gdn : linstate::spec<> {
  using decay = linstate::decay::gated_delta_rule<false>;
};

static double now(clockid_t c) {
  timespec ts;
  clock_gettime(c, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}
static std::vector<long> ints(const std::string& s) {
  std::vector<long> r;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = s.find(',', i);
    if (j == std::string::npos) j = s.size();
    r.push_back(std::stol(s.substr(i, j - i)));
    i = j + 1;
  }
  return r;
}
static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
static std::string load() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

template <class Spec>
void run(const std::vector<long>& Bs, const std::vector<long>& threads, int rounds, double min_time) {
  for (long B : Bs) {
    lb::workload<Spec, float> w(lb::mode::decode, lb::options{.B = B, .T = 1, .H = 8, .K = 128, .V = 128});
    std::vector<std::vector<double>> wall(threads.size()), cpu(threads.size());
    for (size_t i = 0; i < threads.size(); ++i) w.decode(linstate::cpu{.threads = int(threads[i])}, linstate::recurrent{});
    for (int r = 0; r < rounds; ++r)
      for (size_t k = 0; k < threads.size(); ++k) {
        const size_t i = r % 2 ? threads.size() - 1 - k : k;  // order alternates from round to round
        const linstate::cpu be{.threads = int(threads[i])};
        long n = 0;
        const double w0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_PROCESS_CPUTIME_ID);
        double w1;
        do {
          w.decode(be, linstate::recurrent{});
          ++n;
          w1 = now(CLOCK_MONOTONIC);
        } while (w1 - w0 < min_time);
        const double c1 = now(CLOCK_PROCESS_CPUTIME_ID);
        wall[i].push_back((w1 - w0) / n), cpu[i].push_back((c1 - c0) / n);
      }
    for (size_t i = 0; i < threads.size(); ++i) {
      std::printf("B=%-3ld threads=%ld  work=%.3g  wall/step %9.1f us  cpu/step %9.1f us  rounds wall:", B, threads[i],
                  double(B) * 8 * 128 * 128, 1e6 * median(wall[i]), 1e6 * median(cpu[i]));
      for (double x : wall[i]) std::printf(" %.1f", 1e6 * x);
      std::printf("  cpu:");
      for (double x : cpu[i]) std::printf(" %.1f", 1e6 * x);
      std::printf("  (load %s)\n", load().c_str());
    }
  }
}

int main(int argc, char** argv) {
  std::vector<long> Bs = {1, 2, 4, 8, 16, 32}, threads = {1, 2};
  int rounds = 4;
  double min_time = 0.2;
  std::string variant = "gla";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&](const char* k) { return a.rfind(k, 0) == 0 ? a.substr(std::string(k).size()) : std::string(); };
    if (auto v = val("--B="); !v.empty()) Bs = ints(v);
    else if (auto v = val("--threads="); !v.empty()) threads = ints(v);
    else if (auto v = val("--rounds="); !v.empty()) rounds = std::stoi(v);
    else if (auto v = val("--min-time="); !v.empty()) min_time = std::stod(v);
    else if (auto v = val("--variant="); !v.empty()) variant = v;
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  const char* wp = std::getenv("OMP_WAIT_POLICY");
  std::printf("variant %s, H = 8, K = V = 128, OMP_WAIT_POLICY=%s, load %s\n", variant.c_str(), wp ? wp : "(unset)", load().c_str());
  if (variant == "gdn") run<gdn>(Bs, threads, rounds, min_time);
  else run<gla>(Bs, threads, rounds, min_time);
}
