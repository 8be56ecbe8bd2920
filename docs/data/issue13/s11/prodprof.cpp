// docs/data/issue13/s11/prodprof.cpp — per-call time of the chunked backward's products (and, built as passprof / stageprof,
// of its two passes and its staging), by rdtsc timers that instrument.py inserts into a copy of include/:
//   python3 docs/data/issue13/s11/instrument.py products|passes|staging OUT_DIR   # copies include/ to OUT_DIR/include, instrumented
//   g++ -std=c++20 -O3 -march=native -fopenmp -DNDEBUG -IOUT_DIR/include $(pkg-config --cflags eigen3) docs/data/issue13/s11/prodprof.cpp
//   OMP_WAIT_POLICY=passive ./a.out 8      # GLA chunked<64>, T = 4096, H = 8, 1 thread, 8 backward calls
// ("alone": the same shapes on small buffers in cache; with the passes / staging instrumentation that column means nothing:
// the raw files passprof / stageprof came from a copy of this program with it zeroed)
// per-product time inside run_chunked_backward (rdtsc at each call site) against the same shapes alone, in cache
#include <linstate/bench.hpp>
#include <linstate/linstate.hpp>
#include <chrono>
#include <cstdio>
#include <vector>
struct gla : linstate::spec<> {};
namespace gm = linstate::cpu_detail::gemm;
using linstate::index_t;
int main(int argc, char** argv) {
  const int calls = argc > 1 ? atoi(argv[1]) : 5;
  namespace lb = linstate::bench;
  lb::workload<gla, float> w(lb::mode::train, lb::options{.B = 1, .T = 4096, .H = 8, .K = 128, .V = 128});
  const linstate::cpu be{.threads = 1};
  const linstate::chunked<64> alg{};
  const linstate::inputs<float> in = w.in();
  auto bwd = [&] { linstate::backward<gla>(be, in, linstate::cotangents<float>{.o = w.d_o.cview()}, w.grads(), alg, linstate::varlen{}, w.call); };
  w.train(be, alg); bwd();
  for (auto& x : prof_ticks) x = 0;
  auto t0 = std::chrono::steady_clock::now(); auto r0 = __rdtsc();
  for (int i = 0; i < calls; ++i) bwd();
  double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); auto r1 = __rdtsc();
  const double tick_ns = sec * 1e9 / double(r1 - r0);
  const double per = 1.0 / calls / 512;  // per chunk and head
  // alone: the same shapes on small in-cache buffers
  const index_t m = 64, K = 128, V = 128;
  std::vector<float> a(128 * 128, 0.5f), b(128 * 128, 0.25f), c(128 * 128), A(64*64, 0.1f);
  auto alone = [&](auto f) { for (int i = 0; i < 200; ++i) f(); auto t = __rdtsc(); for (int i = 0; i < 2000; ++i) { f(); asm volatile("" ::: "memory"); } return (__rdtsc() - t) / 2000.0 * tick_ns / 1e3; };
  double al[11] = {
    alone([&] { gm::product<gm::add>(V, K, m, a.data(), 1, V, b.data(), K, c.data(), K); }),
    alone([&] { gm::product<gm::set>(m, K, V, a.data(), V, 1, b.data(), K, c.data(), K); }),
    alone([&] { gm::product<gm::set, gm::c_lower>(m, m, V, a.data(), V, 1, b.data(), 64, c.data(), 64); }),
    alone([&] { gm::transpose(m, K, a.data(), K, c.data(), 64); }),
    alone([&] { gm::product<gm::set, gm::c_lower>(m, m, K, a.data(), K, 1, b.data(), 64, c.data(), 64); }),
    alone([&] { gm::product<gm::set, gm::a_lower>(m, K, m, A.data(), 64, 1, b.data(), K, c.data(), K); }),
    alone([&] { gm::product<gm::set, gm::a_upper>(m, K, m, A.data(), 1, 64, b.data(), K, c.data(), K); }),
    alone([&] { gm::product<gm::set>(m, V, K, a.data(), K, 1, b.data(), V, c.data(), V); }),
    alone([&] { gm::product<gm::add, gm::a_upper>(m, V, m, A.data(), 1, 64, b.data(), V, c.data(), V); }),
    alone([&] { gm::product<gm::set>(m, K, V, a.data(), V, 1, b.data(), K, c.data(), K); }),
    alone([&] { gm::product<gm::add>(K, V, m, a.data(), 1, K, b.data(), V, c.data(), V); })};
  double tk = 0, ta = 0;
  std::printf("backward %.1f ms per call (1 thread); per chunk and head, µs: in kernel | alone\n", sec / calls * 1e3);
  for (int i = 0; i < prof_n; ++i) {
    const double us = prof_ticks[i] * tick_ns * per / 1e3;
    tk += us, ta += al[i];
    std::printf("%6.2f | %6.2f  %s\n", us, al[i], prof_names[i]);
  }
  std::printf("%6.2f | %6.2f  total\n", tk, ta);
}
