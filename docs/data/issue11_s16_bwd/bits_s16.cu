// bits_s16.cu — docs/data/issue11_s12/bits_cuda.cu cut to the train calls of GLA, SSE-n4k1s and GDN (the
// chunked backward's gradient stores are all session 16 touched).
// Original header:
// bits_cuda.cu — FNV-1a hashes of every output, final state and gradient of the GLA family's and the
// delta rule's chunked bf16 calls on the GPU, for "same bits" claims of a refactor: build it against
// two include trees (before / after) and compare the printed lines (identical lines = identical bits).
//   nvcc -std=c++20 -O3 -gencode arch=compute_90,code=sm_90 --expt-relaxed-constexpr -Xcompiler=-fopenmp \
//        -isystem /usr/include/eigen3 -I<tree>/include -I<tree>/cuda/include bits_cuda.cu -o bits_cuda
// Inputs: linstate::bench's device_workload (seeded draws), initial and final state on, B = 2.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <linstate/cuda/bench.cuh>
#include <vector>

namespace lb = linstate::bench;
namespace pt = linstate::partition;
namespace rt = linstate::router;
using linstate::index_t;

struct gla : linstate::spec<> {};
template <int N>
struct sse_k1s : linstate::spec<> {
  using partition = pt::routed<N, pt::shared>;
  using router = rt::top_k<1>;
};
struct gdn : linstate::spec<> { using decay = linstate::decay::gated_delta_rule<true>; };

template <class T>
std::uint64_t fnv(const lb::gpu::slot<T>& s) {
  if (!s.given()) return 0;
  std::vector<T> h(s.numel_all());
  lb::gpu::check(cudaMemcpy(h.data(), s.data(), h.size() * sizeof(T), cudaMemcpyDeviceToHost), "copy");
  std::uint64_t x = 1469598103934665603ull;
  const auto* b = reinterpret_cast<const unsigned char*>(h.data());
  for (std::size_t i = 0; i < h.size() * sizeof(T); ++i) x = (x ^ b[i]) * 1099511628211ull;
  return x;
}

template <class Spec>
void run(const char* name, lb::mode m, index_t T) {
  lb::options o{.B = 2, .T = T, .H = 8, .K = 128, .V = 128, .dtype = lb::scalar_type::bf16};
  o.initial_state = true, o.final_state = true;
  const auto r = lb::detail::resolve<Spec>(m, o, "bits_cuda", true);
  lb::gpu::device_workload<Spec, Eigen::bfloat16> w(r, o, 1, nullptr);
  const linstate::cuda be{};
  if (m == lb::mode::prefill) w.prefill(be, linstate::chunked<64>{}, linstate::varlen{});
  else w.train(be, linstate::chunked<64>{}, linstate::varlen{});
  lb::gpu::check(cudaDeviceSynchronize(), "sync");
  std::printf("%-10s %-7s T=%-6lld o %016llx ht %016llx", name, m == lb::mode::prefill ? "prefill" : "train",
              static_cast<long long>(T), (unsigned long long)fnv(w.o), (unsigned long long)fnv(w.ht));
  if (m == lb::mode::train)
    std::printf(" dq %016llx dk %016llx dv %016llx dg %016llx dbeta %016llx dsq %016llx dsk %016llx dsg %016llx dlogits %016llx dh0 %016llx",
                (unsigned long long)fnv(w.dq), (unsigned long long)fnv(w.dk), (unsigned long long)fnv(w.dv),
                (unsigned long long)fnv(w.dg), (unsigned long long)fnv(w.dbeta), (unsigned long long)fnv(w.dsq),
                (unsigned long long)fnv(w.dsk), (unsigned long long)fnv(w.dsg), (unsigned long long)fnv(w.dlogits),
                (unsigned long long)fnv(w.dh0));
  std::printf("\n");
}

int main() {
  for (index_t T : {index_t{1000}, index_t{4096}}) {
    run<gla>("gla", lb::mode::train, T);
    run<sse_k1s<4>>("sse_n4k1s", lb::mode::train, T);
    run<gdn>("gdn", lb::mode::train, T);
  }
}
