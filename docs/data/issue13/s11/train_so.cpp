// docs/data/issue13/s11/train_so.cpp — one build of linstate's GLA training step (chunked<64>) in a shared object,
// for train_ab.cpp, which loads two or more such objects built against different include trees and alternates
// their calls call by call in one process (a finer interleaving than alternating processes: the drift of a
// shared machine falls on every build alike). Each object makes its own workload (the same seed, so the same
// inputs) and reports the process CPU time of one call and its kernel phases (LINSTATE_PHASE_TIMERS).
//   g++ -std=c++20 -O3 -march=native -fopenmp -DNDEBUG -DLINSTATE_PHASE_TIMERS=1 -shared -fPIC -fvisibility=hidden \
//       -I<include tree> $(pkg-config --cflags eigen3) docs/data/issue13/s11/train_so.cpp -o X.so
#include <linstate/bench.hpp>
#include <linstate/linstate.hpp>

#include <memory>
#include <time.h>

namespace {
struct gla : linstate::spec<> {};
namespace lb = linstate::bench;
std::unique_ptr<lb::workload<gla, float>> w;
linstate::cpu be;
double cpu_s() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}
}  // namespace

#define EXPORT extern "C" __attribute__((visibility("default")))
EXPORT void so_init(long T, long H, int threads) {
  w = std::make_unique<lb::workload<gla, float>>(lb::mode::train, lb::options{.B = 1, .T = T, .H = H, .K = 128, .V = 128});
  be = linstate::cpu{.threads = threads};
  w->train(be, linstate::chunked<64>{});
}
//! One forward (bwd = 0: chunked<64>, final state written) or backward (bwd = 1) call; process CPU seconds,
//! the phases' thread CPU seconds (summed over threads) into phases[0 … 6].
EXPORT double so_call(int bwd, double* phases) {
  namespace ph = linstate::detail::phase;
  ph::reset();
  const double c0 = cpu_s();
  if (bwd)
    linstate::backward<gla>(be, w->in(), linstate::cotangents<float>{.o = w->d_o.cview()}, w->grads(), linstate::chunked<64>{},
                            linstate::varlen{}, w->call);
  else
    w->prefill(be, linstate::chunked<64>{});
  const double c = cpu_s() - c0;
  for (int p = 0; p < ph::count; ++p) phases[p] = ph::seconds(static_cast<ph::id>(p));
  return c;
}
//! A hash of the gradients of the last backward call (the same bits across builds: the same hash).
EXPORT unsigned long long so_hash() {
  unsigned long long h = 1469598103934665603ull;
  auto g = w->grads();
  for (auto t : {g.q, g.k, g.v, g.g}) {
    const unsigned char* p = reinterpret_cast<const unsigned char*>(t.data);
    for (std::size_t i = 0; i < static_cast<std::size_t>(t.numel()) * sizeof(float); ++i) h = (h ^ p[i]) * 1099511628211ull;
  }
  return h;
}
