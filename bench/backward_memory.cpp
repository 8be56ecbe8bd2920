// bench/backward_memory.cpp — peak memory of the backward pass against T (issue 3, item 6).
//
// Runs, in a fresh child process per T, one backward pass of GLA and SSE-n4k1s (chunked<64>, B = 1,
// H = 8, K = V = 128, fp32) and reports the peak resident set size of that process next to the bytes
// the caller itself owns (inputs, dO, gradients). The difference is what the library adds: per-chunk
// states and per-thread scratch, which must not grow with T faster than the per-chunk states
// (T/64 · K·V·4 bytes per (head, partition) being processed at once).
//
//   ./backward_memory [T ...]     (default T = 1024 4096 16384 65536)
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <linstate/linstate.hpp>

namespace {

using linstate::index_t;
namespace pt = linstate::partition;
namespace rt = linstate::router;
struct gla : linstate::spec<> {};
struct sse_n4k1s : gla {
  using partition = pt::routed<4, pt::shared>;
  using router = rt::top_k<1>;
};
constexpr index_t H = 8, K = 128, V = 128;

long peak_kib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;  // KiB on Linux
}

//! The caller's own bytes: inputs, dO and one gradient per input.
template <class Spec>
double caller_bytes(index_t T) {
  const bool sse = Spec::partition::has_shared;
  const double per_token = 4.0 * (H * K * (sse ? 6 : 3) + H * V + (sse ? 4 : 0));  // q k g (+q1 k1 g1) v logits
  return 2.0 * per_token * T + 4.0 * H * V * T;                                    // inputs + grads + dO
}

template <class Spec>
void child(index_t T) {
  using linstate::tensor;
  auto fill = [](tensor<float>& t, float x) { std::fill(t.values().begin(), t.values().end(), x); };
  const bool sse = Spec::partition::has_shared;
  tensor<float> q({1, T, H, K}), k({1, T, H, K}), g({1, T, H, K}), v({1, T, H, V}), d_o({1, T, H, V});
  tensor<float> q1, k1, g1, eta;
  fill(q, 0.1f), fill(k, 0.1f), fill(g, -0.05f), fill(v, 0.1f), fill(d_o, 0.01f);
  linstate::inputs<float> in{.q = q.view(), .k = k.view(), .v = v.view(), .g = g.view()};
  if (sse) {
    q1 = tensor<float>({1, T, H, K}), k1 = tensor<float>({1, T, H, K}), g1 = tensor<float>({1, T, H, K});
    eta = tensor<float>({1, T, 4});
    fill(q1, 0.1f), fill(k1, 0.1f), fill(g1, -0.05f);
    for (index_t i = 0; i < eta.numel(); ++i) eta[i] = static_cast<float>((i * 7919) % 13) * 0.1f;
    in.shared = {q1.view(), k1.view(), g1.view(), {}};
    in.router_logits = eta.view();
  }
  const long before = peak_kib();
  auto gr = linstate::backward<Spec>(linstate::cpu{}, in, linstate::cotangents<float>{.o = d_o.cview()},
                                     linstate::chunked<64>{}, linstate::varlen{});
  const long after = peak_kib();
  std::printf("%-10s %8lld %12.1f %12.1f %14.1f %12.1f\n", sse ? "sse_n4k1s" : "gla", static_cast<long long>(T),
              after / 1024.0, caller_bytes<Spec>(T) / (1 << 20), (after - before) / 1024.0,
              (after / 1024.0) - caller_bytes<Spec>(T) / (1 << 20));
  std::fflush(stdout);
  (void)gr;
}

template <class Spec>
void measure(index_t T) {
  const pid_t pid = fork();
  if (pid == 0) {
    child<Spec>(T);
    std::_Exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<index_t> Ts;
  for (int i = 1; i < argc; ++i) Ts.push_back(std::atoll(argv[i]));
  if (Ts.empty()) Ts = {1024, 4096, 16384, 65536};
  std::printf("%-10s %8s %12s %12s %14s %12s\n", "variant", "T", "peak MiB", "caller MiB", "bwd growth MiB",
              "peak-caller");
  std::fflush(stdout);  // else each forked child repeats the buffered header
  for (index_t T : Ts) measure<gla>(T);
  for (index_t T : Ts) measure<sse_n4k1s>(T);
}
