// docs/data/issue13/s18/train_so.cpp — session 13's, with -DXCHUNK=C (chunked<C>, default 64). Session 13's header:
// docs/data/issue13/s13/train_so.cpp — one build of linstate's GLA training step (chunked<64>, B = 1, K = V = 128) in a
// shared object, for train_ab.cpp (session 11's train_so.cpp with wall time, and -DSAVED: the forward keeps its chunk
// states in a linstate::saved_states and the backward reads them). Each object makes its own workload (the same seed,
// so the same inputs) and reports per call the process CPU time, the wall time and the kernel phases.
//   g++ -std=c++20 -O3 -march=native -fopenmp -DNDEBUG -DLINSTATE_PHASE_TIMERS=1 -shared -fPIC -fvisibility=hidden [-DSAVED] \
//       -I<include tree> $(pkg-config --cflags eigen3) docs/data/issue13/s13/train_so.cpp -o X.so
#include <linstate/bench.hpp>
#include <linstate/linstate.hpp>

#include <chrono>
#include <memory>
#include <time.h>

#ifndef XCHUNK
#define XCHUNK 64
#endif
namespace {
struct gla : linstate::spec<> {};
namespace lb = linstate::bench;
std::unique_ptr<lb::workload<gla, float>> w;
linstate::cpu be;
#ifdef SAVED
linstate::saved_states saved;
#endif
double cpu_s() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}
void fwd() {
#ifdef SAVED
  linstate::forward<gla>(be, w->in(), linstate::outputs<float>{w->o.view(), w->final_state.view()}, saved, linstate::chunked<XCHUNK>{});
#else
  w->prefill(be, linstate::chunked<XCHUNK>{});
#endif
}
void bwd() {
#ifdef SAVED
  linstate::backward<gla>(be, w->in(), linstate::cotangents<float>{.o = w->d_o.cview()}, w->grads(), saved, linstate::chunked<XCHUNK>{},
                          linstate::varlen{}, w->call);
#else
  linstate::backward<gla>(be, w->in(), linstate::cotangents<float>{.o = w->d_o.cview()}, w->grads(), linstate::chunked<XCHUNK>{},
                          linstate::varlen{}, w->call);
#endif
}
}  // namespace

#define EXPORT extern "C" __attribute__((visibility("default")))
EXPORT void so_init(long T, long H, int threads) {
  w = std::make_unique<lb::workload<gla, float>>(lb::mode::train, lb::options{.B = 1, .T = T, .H = H, .K = 128, .V = 128});
  be = linstate::cpu{.threads = threads};
  fwd(), bwd();
}
//! One forward (bwd = 0: chunked<64>, final state written) or backward (bwd = 1) call; returns process CPU seconds,
//! writes the wall seconds into *wall and the phases' thread CPU seconds (summed over threads) into phases[0 … 6].
EXPORT double so_call(int b, double* phases, double* wall) {
  namespace ph = linstate::detail::phase;
  ph::reset();
  const double c0 = cpu_s();
  const auto t0 = std::chrono::steady_clock::now();
  if (b) bwd();
  else fwd();
  *wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double c = cpu_s() - c0;
  for (int p = 0; p < ph::count && p < 7; ++p) phases[p] = ph::seconds(static_cast<ph::id>(p));
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
//! A hash of o and the final state of the last forward call.
EXPORT unsigned long long so_hash_fwd() {
  unsigned long long h = 1469598103934665603ull;
  for (const auto* t : {&w->o, &w->final_state}) {
    const unsigned char* p = reinterpret_cast<const unsigned char*>(t->data());
    for (std::size_t i = 0; i < t->values().size() * sizeof(float); ++i) h = (h ^ p[i]) * 1099511628211ull;
  }
  return h;
}
