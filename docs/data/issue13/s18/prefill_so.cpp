// docs/data/issue13/s18/prefill_so.cpp — session 15's prefill_so.cpp with -DXCHUNK=C (chunked<C>, default 64) and -DXK=K
// (K = V, default 128); s13's header follows. Session 13's prefill_so.cpp added -DVARIANT_GDN (the gated delta rule, l2norm q and k). One build of linstate's prefill (forward, chunked<64>, final state
// written; GLA or, with -DVARIANT_SSE, SSE n4k1s) in a shared object, for prefill_ab.cpp, which loads several
// such objects built against different include trees and alternates their calls in one process (the method of
// docs/data/issue13/s11/train_ab.cpp: the drift of a shared machine falls on every build alike).
//   g++ -std=c++20 -O3 -march=native -fopenmp -DNDEBUG -shared -fPIC -fvisibility=hidden \
//       -I<include tree> $(pkg-config --cflags eigen3) docs/data/issue13/s13/prefill_so.cpp -o X.so
#include <linstate/bench.hpp>
#include <linstate/linstate.hpp>

#include <chrono>
#include <memory>
#include <time.h>

#ifndef XK
#define XK 128
#endif
#ifndef XCHUNK
#define XCHUNK 64
#endif
namespace {
struct gla : linstate::spec<> {};
struct sse : linstate::spec<> {
  using partition = linstate::partition::routed<4, linstate::partition::shared>;
  using router = linstate::router::top_k<1>;
};
struct gdn : linstate::spec<> {
  using decay = linstate::decay::gated_delta_rule<true>;
};
#if defined(VARIANT_SSE)
using variant = sse;
#elif defined(VARIANT_GDN)
using variant = gdn;
#else
using variant = gla;
#endif
namespace lb = linstate::bench;
std::unique_ptr<lb::workload<variant, float>> w;
linstate::cpu be;
double cpu_s() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}
}  // namespace

#define EXPORT extern "C" __attribute__((visibility("default")))
EXPORT void so_init(long T, long H, int threads) {
  w = std::make_unique<lb::workload<variant, float>>(lb::mode::prefill, lb::options{.B = 1, .T = T, .H = H, .K = XK, .V = XK});
  be = linstate::cpu{.threads = threads};
  w->prefill(be, linstate::chunked<XCHUNK>{});
}
//! One forward call; returns process CPU seconds, the wall seconds into *wall.
EXPORT double so_call(double* wall) {
  const double c0 = cpu_s();
  const auto t0 = std::chrono::steady_clock::now();
  w->prefill(be, linstate::chunked<XCHUNK>{});
  *wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return cpu_s() - c0;
}
//! A hash of o and the final state of the last call (the same bits across builds: the same hash).
EXPORT unsigned long long so_hash() {
  unsigned long long h = 1469598103934665603ull;
  auto mix = [&](const void* d, std::size_t n) {
    const unsigned char* p = static_cast<const unsigned char*>(d);
    for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  };
  mix(w->o.data(), static_cast<std::size_t>(w->o.numel()) * sizeof(float));
  mix(w->final_state.data(), static_cast<std::size_t>(w->final_state.numel()) * sizeof(float));
  return h;
}
