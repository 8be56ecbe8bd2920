// SPDX-License-Identifier: Apache-2.0
//! \file cuda/bench/bench_decode_cuda.cu
//! \brief Times one decode step (T = 1, linstate::forward_in_place on linstate::cuda) of SSE-n4k1 +
//! shared in bf16, H = HV = 8, K = V = 128, for B = 1, 16, 128 (sizes on the command line override:
//! `bench_decode_cuda 1 16 128`).
//!
//! Method: 20 warm-up calls, then 100 calls each bracketed by a pair of CUDA events on the call's
//! stream; the median elapsed time is reported (it covers the whole call as the GPU sees it: router,
//! recurrent and combine kernels, plus any gap while the host enqueues them), together with the mean
//! over 100 calls enqueued back to back. The state traffic of a step is what C8 allows: the shared
//! partition and the selected partition of every (sequence, head), each read and written once:
//! bytes = B · H · (1 + kw) · K · V · 4 · 2. The state is updated in place across calls (as in
//! decoding); the inputs stay the same. Also printed: the host's enqueue time per call (and the part
//! spent on the device-pointer checks), and the step captured once into a CUDA graph and replayed
//! (median of 100, each synchronised), which is the GPU's own time for the step.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <linstate/cuda.cuh>
#include <exception>
#include <random>
#include <string>
#include <vector>

namespace {

namespace pt = linstate::partition;
namespace rt = linstate::router;
using linstate::index_t;

struct sse_n4k1s : linstate::spec<> {
  using partition = pt::routed<4, pt::shared>;
  using router = rt::top_k<1>;
};
using bf16 = Eigen::bfloat16;

void ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

template <class T>
linstate::device_buffer<T> random_device(index_t n, std::mt19937& gen, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<T> h(static_cast<std::size_t>(n));
  for (auto& x : h) x = static_cast<T>(u(gen));
  linstate::device_buffer<T> d(static_cast<std::size_t>(n));
  d.upload(h.data());
  return d;
}

void run(index_t B) {
  constexpr index_t T = 1, H = 8, K = 128, V = 128, N = 4, P = N + 1, kw = 1;
  std::mt19937 gen(static_cast<unsigned>(B));
  auto q = random_device<bf16>(B * T * H * K, gen, -1, 1), k = random_device<bf16>(B * T * H * K, gen, -0.1f, 0.1f);
  auto sq = random_device<bf16>(B * T * H * K, gen, -1, 1), sk = random_device<bf16>(B * T * H * K, gen, -0.1f, 0.1f);
  auto v = random_device<bf16>(B * T * H * V, gen, -1, 1);
  auto g = random_device<bf16>(B * T * H * K, gen, -0.1f, -0.01f), sg = random_device<bf16>(B * T * H * K, gen, -0.1f, -0.01f);
  auto logits = random_device<bf16>(B * T * N, gen, -2, 2);
  auto state = random_device<float>(B * P * H * K * V, gen, -1, 1);
  linstate::device_buffer<bf16> o(static_cast<std::size_t>(B * T * H * V));

  linstate::inputs<bf16> in;
  in.q = q.view({B, T, H, K}), in.k = k.view({B, T, H, K}), in.v = v.view({B, T, H, V}), in.g = g.view({B, T, H, K});
  in.shared = {sq.view({B, T, H, K}), sk.view({B, T, H, K}), sg.view({B, T, H, K}), {}};
  in.router_logits = logits.view({B, T, N});
  const auto st = state.view({B, P, H, K, V});
  const auto ov = o.view({B, T, H, V});

  ok(cudaDeviceSynchronize(), "uploads");  // they ran on the legacy stream; `stream` does not wait for it
  cudaStream_t stream{};
  ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  const linstate::cuda be{stream};
  auto step = [&] { linstate::forward_in_place<sse_n4k1s>(be, in, st, ov, linstate::recurrent{}); };
  for (int i = 0; i < 20; ++i) step();
  ok(cudaStreamSynchronize(stream), "warm-up");

  constexpr int reps = 100;
  std::vector<cudaEvent_t> ev(2 * reps);
  for (auto& e : ev) ok(cudaEventCreate(&e), "cudaEventCreate");
  for (int i = 0; i < reps; ++i) {
    ok(cudaEventRecord(ev[2 * i], stream), "cudaEventRecord");
    step();
    ok(cudaEventRecord(ev[2 * i + 1], stream), "cudaEventRecord");
    ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize");  // one step at a time: latency
  }
  std::vector<float> ms(reps);
  for (int i = 0; i < reps; ++i) ok(cudaEventElapsedTime(&ms[i], ev[2 * i], ev[2 * i + 1]), "cudaEventElapsedTime");
  std::sort(ms.begin(), ms.end());
  const double median_us = 1e3 * 0.5 * (ms[reps / 2 - 1] + ms[reps / 2]);

  // back to back: 100 steps enqueued without waiting (throughput, host enqueue included)
  const auto w0 = std::chrono::steady_clock::now();
  ok(cudaEventRecord(ev[0], stream), "cudaEventRecord");
  for (int i = 0; i < reps; ++i) step();
  ok(cudaEventRecord(ev[1], stream), "cudaEventRecord");
  ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  const auto w1 = std::chrono::steady_clock::now();
  float total_ms = 0;
  ok(cudaEventElapsedTime(&total_ms, ev[0], ev[1]), "cudaEventElapsedTime");
  const double mean_us = 1e3 * total_ms / reps;
  const double host_us = std::chrono::duration<double, std::micro>(w1 - w0).count() / reps;

  // host side alone: enqueueing 100 steps (the GPU lags behind), and the device-pointer checks in it
  const auto e0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) step();
  const auto e1 = std::chrono::steady_clock::now();
  ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  const double enqueue_us = std::chrono::duration<double, std::micro>(e1 - e0).count() / reps;
  const auto c0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 1000; ++i) {
    linstate::cuda_detail::require_device_inputs("bench", in);
    linstate::cuda_detail::require_device("bench", "o", ov), linstate::cuda_detail::require_device("bench", "state", st);
  }
  const auto c1 = std::chrono::steady_clock::now();
  const double checks_us = std::chrono::duration<double, std::micro>(c1 - c0).count() / 1000;

  const double bytes = static_cast<double>(B * H * (1 + kw) * K * V) * 4.0 * 2.0;
  std::printf("B=%4lld  state bytes/step %9.3f MB  median %8.2f us  -> %8.1f GB/s   back-to-back mean %8.2f us (%8.1f GB/s), "
              "host %6.2f us/call\n",
              static_cast<long long>(B), bytes / 1e6, median_us, bytes / (median_us * 1e-6) / 1e9, mean_us,
              bytes / (mean_us * 1e-6) / 1e9, host_us);
  std::printf("        host enqueue %6.2f us/call, of which device-pointer checks %5.2f us\n", enqueue_us, checks_us);

  // The same step captured once into a CUDA graph and replayed: the GPU's time without the host's
  // per-call work (checks, allocation, three launches).
  std::string note;
  cudaGraph_t graph{};
  ok(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  try {
    step();
  } catch (const std::exception& e) {
    note = e.what();
  }
  const cudaError_t ec = cudaStreamEndCapture(stream, &graph);
  if (note.empty() && ec != cudaSuccess) note = cudaGetErrorString(ec);
  (void)cudaGetLastError();
  if (note.empty()) {
    cudaGraphExec_t exec{};
    ok(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
    for (int i = 0; i < 20; ++i) ok(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
    for (int i = 0; i < reps; ++i) {
      ok(cudaEventRecord(ev[2 * i], stream), "cudaEventRecord");
      ok(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
      ok(cudaEventRecord(ev[2 * i + 1], stream), "cudaEventRecord");
      ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    }
    for (int i = 0; i < reps; ++i) ok(cudaEventElapsedTime(&ms[i], ev[2 * i], ev[2 * i + 1]), "cudaEventElapsedTime");
    std::sort(ms.begin(), ms.end());
    const double g_us = 1e3 * 0.5 * (ms[reps / 2 - 1] + ms[reps / 2]);
    std::printf("        CUDA graph replay: median %8.2f us -> %8.1f GB/s\n", g_us, bytes / (g_us * 1e-6) / 1e9);
    ok(cudaGraphExecDestroy(exec), "cudaGraphExecDestroy");
  } else {
    std::printf("        CUDA graph capture of the step failed: %s\n", note.c_str());
  }
  if (graph) ok(cudaGraphDestroy(graph), "cudaGraphDestroy");

  for (auto& e : ev) ok(cudaEventDestroy(e), "cudaEventDestroy");
  ok(cudaStreamDestroy(stream), "cudaStreamDestroy");
}

}  // namespace

int main(int argc, char** argv) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("no usable CUDA device\n");
    return 77;
  }
  cudaDeviceProp prop{};
  ok(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("decode step, SSE-n4k1 + shared, bf16, H = 8, K = V = 128, forward_in_place on %s\n", prop.name);
  std::vector<index_t> bs;
  for (int i = 1; i < argc; ++i) bs.push_back(std::atoll(argv[i]));
  if (bs.empty()) bs = {1, 16, 128};
  for (index_t B : bs) run(B);
  return 0;
}
