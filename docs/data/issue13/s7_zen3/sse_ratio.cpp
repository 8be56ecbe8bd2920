// SSE n4k1s prefill against GLA prefill (automatic), T = 4096, B = 1, H = 8, K = V = 128, 2 threads,
// alternating samples in one process; thread-summed process CPU time and wall time per call, medians.
#include <linstate/bench.hpp>
#include <linstate/linstate.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <time.h>
#include <vector>
namespace lb = linstate::bench;
using linstate::index_t;
struct gla : linstate::spec<> {};
struct sse_n4k1s : gla {
  using partition = linstate::partition::routed<4, linstate::partition::shared>;
  using router = linstate::router::top_k<1>;
};
double pcpu() { timespec ts; clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts); return ts.tv_sec + 1e-9 * ts.tv_nsec; }
double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
double med(std::vector<double> v) { std::sort(v.begin(), v.end()); return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]); }
int main(int argc, char** argv) {
  const index_t T = argc > 1 ? std::atol(argv[1]) : 4096;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 5;
  const lb::options o{.B = 1, .T = T, .H = 8, .K = 128, .V = 128};
  lb::workload<gla, float> wg(lb::mode::prefill, o);
  lb::workload<sse_n4k1s, float> ws(lb::mode::prefill, o);
  const linstate::cpu be{.threads = 2};
  std::function<void()> f[2] = {[&] { wg.prefill(be, linstate::automatic{}); }, [&] { ws.prefill(be, linstate::automatic{}); }};
  std::vector<double> c[2], w[2];
  f[0](), f[1]();
  for (int r = 0; r < reps; ++r)
    for (int j = 0; j < 2; ++j) {
      const int s = r % 2 ? 1 - j : j;
      const double t0 = now(), c0 = pcpu();
      int n = 0;
      do { f[s](); ++n; } while (now() - t0 < 0.3);
      w[s].push_back((now() - t0) / n), c[s].push_back((pcpu() - c0) / n);
    }
  std::printf("T = %ld: GLA automatic %.2f ms CPU (%.2f ms wall); SSE n4k1s automatic %.2f ms CPU (%.2f ms wall); SSE / GLA = %.2f by CPU, %.2f by wall\n",
              static_cast<long>(T), med(c[0]) * 1e3, med(w[0]) * 1e3, med(c[1]) * 1e3, med(w[1]) * 1e3, med(c[1]) / med(c[0]), med(w[1]) / med(w[0]));
}
