// docs/data/issue13/s22/decode_time.cpp — decode steps (forward_in_place, recurrent, T = 1) of GLA and GDN, one
// thread, H = 8, K = V = 128, B = 1, 16, 64: median microseconds per call of 15 samples of >= 0.1 s each. Built
// against two include trees (and -march=native / haswell) and run alternately (ABBA) to compare them.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>
#include <linstate/bench.hpp>
#include <linstate/linstate.hpp>
namespace lb = linstate::bench;
struct gla : linstate::spec<> {};
struct gdn : linstate::spec<> { using decay = linstate::decay::gated_delta_rule<false>; };
template <class Spec> double run(linstate::index_t B) {
  lb::workload<Spec, float> w(lb::mode::decode, lb::options{.B = B, .T = 1, .H = 8, .K = 128, .V = 128});
  const linstate::cpu be{.threads = 1};
  std::vector<double> s;
  for (int k = 0; k < 15; ++k) {
    const auto t0 = std::chrono::steady_clock::now();
    long n = 0;
    double dt = 0;
    do { w.decode(be, linstate::recurrent{}); ++n; dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); } while (dt < 0.1);
    s.push_back(dt / n * 1e6);
  }
  std::sort(s.begin(), s.end());
  return s[s.size() / 2];
}
int main() {
  for (linstate::index_t B : {1, 16, 64}) std::printf("gla B=%ld %.2f us\n", (long)B, run<gla>(B));
  for (linstate::index_t B : {1, 16, 64}) std::printf("gdn B=%ld %.2f us\n", (long)B, run<gdn>(B));
}
