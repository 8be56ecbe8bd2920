// SPDX-License-Identifier: Apache-2.0
//! \file cuda/bench/bench_decode_cuda.cu
//! \brief Times one decode step (T = 1, linstate::forward_in_place on linstate::cuda) of SSE-n4k1 +
//! shared in bf16, H = HV = 8, K = V = 128, for B = 1, 16, 128 (sizes on the command line override:
//! `bench_decode_cuda 1 16 128`), through linstate::bench (<linstate/cuda/bench.cuh>).
//!
//! Method: linstate::bench::decode with 20 warm-up calls and 100 timed calls, each bracketed by a pair
//! of CUDA events on the call's stream and waited for (a latency: router, recurrent and combine
//! kernels, plus any gap while the host enqueues them); the host's enqueue time per call, the calls
//! back to back; and the per-step time inside a CUDA graph of R steps over R state sets (the GPU's
//! own time for the step, no L2 reuse between steps). The state traffic of a step is what C8 allows:
//! the shared partition and the selected partition of every (sequence, head), each read and written
//! once: B · H · (1 + kw) · K · V · 4 · 2 bytes. Also printed: the parts of the host's time per call —
//! the device-pointer checks (cudaPointerGetAttributes per given tensor), the shape and aliasing checks
//! (make_problem, check_no_alias), and for scale the runtime's own costs on this host: one launch of an
//! empty kernel, and one stream-ordered pool allocation and release (what a call with scratch memory
//! makes) — each the mean of 1000 back-to-back repetitions, the stream synchronised every 64.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <linstate/cuda/bench.cuh>
#include <vector>

namespace {

namespace pt = linstate::partition;
namespace rt = linstate::router;
namespace lb = linstate::bench;
using linstate::index_t;

struct sse_n4k1s : linstate::spec<> {
  using partition = pt::routed<4, pt::shared>;
  using router = rt::top_k<1>;
};

__global__ void empty_kernel() {}

//! Mean host time of f() over n calls back to back (the stream synchronised every 64), µs.
template <class F>
double host_us(cudaStream_t stream, F&& f, int n = 1000) {
  lb::gpu::check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  double total = 0;
  for (int i = 0; i < n; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    total += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    if (i % 64 == 63) lb::gpu::check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  }
  lb::gpu::check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  return total / n;
}

void run(const linstate::cuda& be, index_t B) {
  lb::options o{.B = B, .H = 8, .K = 128, .V = 128, .dtype = lb::scalar_type::bf16, .reps = 100, .warmup = 20};
  o.warmup_ms = 1e9, o.roofline = false;
  const lb::result eager = lb::decode<sse_n4k1s, Eigen::bfloat16>(be, o);
  lb::options og = o;
  og.graph = true;
  const lb::result graph = lb::decode<sse_n4k1s, Eigen::bfloat16>(be, og);
  const double bytes = eager.work.state_bytes;
  std::printf("B=%4lld  state bytes/step %9.3f MB  median %8.2f us  -> %8.1f GB/s   host enqueue %6.2f us/call\n",
              static_cast<long long>(B), bytes / 1e6, eager.time.median * 1e6, bytes / eager.time.median / 1e9,
              eager.host.median * 1e6);

  // the device-pointer checks of one call, alone (host time)
  const auto rs = lb::detail::resolve<sse_n4k1s>(lb::mode::decode, o, "bench_decode_cuda", /*cuda_backend=*/true);
  const lb::gpu::device_workload<sse_n4k1s, Eigen::bfloat16> w(rs, o, 1, static_cast<cudaStream_t>(be.stream));
  const auto in = w.in();
  const auto st = w.state.view();
  const auto ov = w.o.view();
  const auto c0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 1000; ++i) {
    linstate::cuda_detail::require_device_inputs("bench", in);
    linstate::cuda_detail::require_device("bench", "o", ov), linstate::cuda_detail::require_device("bench", "state", st);
  }
  const double checks_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - c0).count() / 1000;
  std::printf("        of the host's time, device-pointer checks %5.2f us\n", checks_us);
  const cudaStream_t stream = static_cast<cudaStream_t>(be.stream);
  const char* api = "bench_decode_cuda";
  const double shape_us = host_us(stream, [&] {
    const auto pb = linstate::detail::make_problem<sse_n4k1s>(api, in, ov, st, "state", w.call, /*o_given=*/true, /*host_data=*/false);
    linstate::detail::check_no_alias(api, in, linstate::outputs<Eigen::bfloat16>{ov, st}, "state");
    if (pb.S != B) std::abort();
  });
  const double launch_us = host_us(stream, [&] {
    empty_kernel<<<1, 32, 0, stream>>>();
    lb::gpu::check(cudaGetLastError(), "empty_kernel");
  });
  const cudaMemPool_t pool = linstate::cuda_detail::scratch_pool(api);
  const double pool_us = host_us(stream, [&] {
    void* ptr = nullptr;
    lb::gpu::check(cudaMallocFromPoolAsync(&ptr, 4096, pool, stream), "cudaMallocFromPoolAsync");
    lb::gpu::check(cudaFreeAsync(ptr, stream), "cudaFreeAsync");
  });
  std::printf("        shape and aliasing checks %5.2f us; for scale: an empty kernel's launch %5.2f us, a pool allocation + release %5.2f us\n",
              shape_us, launch_us, pool_us);
  std::printf("        CUDA graph of %d steps: median %8.2f us per step -> %8.1f GB/s\n", graph.graph_steps,
              graph.time.median * 1e6, bytes / graph.time.median / 1e9);
}

}  // namespace

int main(int argc, char** argv) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("no usable CUDA device\n");
    return 77;
  }
  cudaDeviceProp prop{};
  lb::gpu::check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("decode step, SSE-n4k1 + shared, bf16, H = 8, K = V = 128, forward_in_place on %s\n", prop.name);
  std::vector<index_t> bs;
  for (int i = 1; i < argc; ++i) bs.push_back(std::atoll(argv[i]));
  if (bs.empty()) bs = {1, 16, 128};
  cudaStream_t stream{};
  lb::gpu::check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  for (index_t B : bs) run(linstate::cuda{stream}, B);
  (void)cudaStreamDestroy(stream);
  return 0;
}
