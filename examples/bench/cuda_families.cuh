// examples/bench/cuda_families.cuh — linstate-bench's runners on linstate::cuda; each
// cuda_<family>_<type>.cu instantiates one family for one element type. The stream is created on
// first use; without a usable GPU the first call fails with one clear message.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include <linstate/cuda/bench.cuh>  // before variants.hpp: run() must see the CUDA overloads

#include "variants.hpp"

namespace linstate_cli {

inline cudaStream_t gpu_stream() {
  static cudaStream_t s = [] {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0)
      throw linstate::error(std::string("--backend cuda: no usable CUDA device (") +
                            (e != cudaSuccess ? cudaGetErrorString(e) : "0 devices") + ")");
    cudaStream_t st{};
    lb::gpu::check(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    return st;
  }();
  return s;
}

template <class V, class Scalar>
lb::result run_gpu(lb::mode m, const std::string& algorithm, const std::string& strategy, const lb::options& o) {
  return run<V, Scalar>(linstate::cuda{gpu_stream()}, m, algorithm, strategy, o);
}

template <class Scalar>
std::vector<named_runner> cuda_gla() {  // GLA and SSE top-1 + shared
  return {{"gla", &run_gpu<gla, Scalar>}, {"sse_n4k1s", &run_gpu<sse_n4k1s, Scalar>},
          {"sse_n8k1s", &run_gpu<sse_n8k1s, Scalar>}, {"sse_n16k1s", &run_gpu<sse_n16k1s, Scalar>}};
}

template <class Scalar>
std::vector<named_runner> cuda_sse_k2() {  // SSE top-2, and N / kw / kr at run time
  return {{"sse_n8k2", &run_gpu<sse_n8k2, Scalar>}, {"sse_n8k2s", &run_gpu<sse_n8k2s, Scalar>},
          {"sse_dynamic", &run_gpu<sse_dynamic, Scalar>}};
}

template <class Scalar>
std::vector<named_runner> cuda_delta() {  // the gated delta rule
  return {{"gdn", &run_gpu<gdn, Scalar>}, {"sse_gdn_n4k1s", &run_gpu<sse_gdn_n4k1s, Scalar>}};
}

}  // namespace linstate_cli
