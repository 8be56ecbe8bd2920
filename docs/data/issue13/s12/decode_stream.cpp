// docs/data/issue13/s12/decode_stream.cpp — issue 13 item 2 at B >= 64: one decode step (forward_in_place,
// recurrent, T = 1) of GLA / GDN against STREAM triad measured in the same process, rounds alternating.
//   g++ -std=c++20 -O3 -march=native -fopenmp -DNDEBUG -Iinclude $(pkg-config --cflags eigen3) \
//       docs/data/issue13/s12/decode_stream.cpp -o decode_stream
//   OMP_WAIT_POLICY=passive ./decode_stream --B=64,128 --threads=2 --rounds=5
// Bytes a step must touch: every state read and written once (2 · B·H·K·V·4), plus q, k, v, g read
// and o written (B·H·(3K + V + V)·4; gdn: q, k, v, β, g and o). STREAM triad a[i] = b[i] + s·c[i] over
// three arrays of 2^25 floats (128 MiB each), counted as STREAM does: 3 × 4 bytes per element.
#include <linstate/bench.hpp>
#include <linstate/linstate.hpp>
#include <omp.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
struct gla : linstate::spec<> {};
struct gdn : linstate::spec<> { using decay = linstate::decay::gated_delta_rule<false>; };
using clk = std::chrono::steady_clock;
static double med(std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }
static double loadavg() { double l = 0; if (FILE* f = std::fopen("/proc/loadavg", "r")) { if (std::fscanf(f, "%lf", &l) != 1) l = 0; std::fclose(f); } return l; }
static double triad(int th, float* a, const float* b, const float* c, long n) {
  std::vector<double> t;
  for (int r = 0; r < 5; ++r) {
    auto t0 = clk::now();
#pragma omp parallel for num_threads(th) schedule(static)
    for (long i = 0; i < n; ++i) a[i] = b[i] + 3.f * c[i];
    t.push_back(std::chrono::duration<double>(clk::now() - t0).count());
  }
  return 3.0 * 4.0 * n / med(t) / 1e9;
}
template <class S> static double step_bytes(long B) {
  const double H = 8, K = 128, V = 128;
  const double io = std::is_same_v<S, gla> ? B * H * (3 * K + 2 * V) : B * H * (2 * K + 2 * V + 2);
  return 2 * B * H * K * V * 4 + io * 4;
}
template <class S> static double decode_gbs(long B, int th, double min_time, double* ms) {
  namespace lb = linstate::bench;
  lb::workload<S, float> w(lb::mode::decode, lb::options{.B = B, .T = 1, .H = 8, .K = 128, .V = 128});
  const linstate::cpu be{.threads = th};
  for (int i = 0; i < 3; ++i) w.decode(be, linstate::recurrent{});
  std::vector<double> t;
  auto s0 = clk::now();
  while (std::chrono::duration<double>(clk::now() - s0).count() < min_time || t.size() < 5) {
    auto t0 = clk::now();
    w.decode(be, linstate::recurrent{});
    t.push_back(std::chrono::duration<double>(clk::now() - t0).count());
  }
  *ms = med(t) * 1e3;
  return step_bytes<S>(B) / med(t) / 1e9;
}
int main(int argc, char** argv) {
  std::vector<long> Bs{64, 128};
  int th = 2, rounds = 5;
  double min_time = 0.5;
  bool do_gdn = true;
  for (int i = 1; i < argc; ++i) {
    if (!std::strncmp(argv[i], "--B=", 4)) { Bs.clear(); for (char* p = argv[i] + 4; *p;) { Bs.push_back(std::strtol(p, &p, 10)); if (*p == ',') ++p; } }
    else if (!std::strncmp(argv[i], "--threads=", 10)) th = std::atoi(argv[i] + 10);
    else if (!std::strncmp(argv[i], "--rounds=", 9)) rounds = std::atoi(argv[i] + 9);
    else if (!std::strncmp(argv[i], "--min-time=", 11)) min_time = std::atof(argv[i] + 11);
    else if (!std::strcmp(argv[i], "--no-gdn")) do_gdn = false;
  }
  const long n = 1l << 25;
  std::vector<float> a(n, 0.f), b(n, 1.f), c(n, 2.f);
  std::printf("threads %d, OMP_WAIT_POLICY=%s\n", th, std::getenv("OMP_WAIT_POLICY") ? std::getenv("OMP_WAIT_POLICY") : "(unset)");
  for (int r = 0; r < rounds; ++r) {
    const double tr = triad(th, a.data(), b.data(), c.data(), n);
    std::printf("round %d load %.2f  triad %.2f GB/s", r, loadavg(), tr);
    for (long B : Bs) {
      double ms;
      const double g = decode_gbs<gla>(B, th, min_time, &ms);
      std::printf(" | gla B=%ld %.3f ms %.2f GB/s %.0f%%", B, ms, g, 100 * g / tr);
      if (do_gdn) {
        const double d = decode_gbs<gdn>(B, th, min_time, &ms);
        std::printf(" | gdn B=%ld %.3f ms %.2f GB/s %.0f%%", B, ms, d, 100 * d / tr);
      }
    }
    std::printf("\n");
    std::fflush(stdout);
  }
}
