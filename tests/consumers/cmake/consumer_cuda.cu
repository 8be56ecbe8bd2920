// tests/consumers/cmake/consumer_cuda.cu — the CMake consumer's GPU program (built with
// -DCONSUMER_CUDA=ON against linstate::cuda): one GLA forward on linstate::cuda, chunked<64>, checked
// against the fp64 reference (relative error ≤ 1e-5). Exits 77 (skip) without a GPU, 1 on a mismatch.
#include <linstate/cuda.cuh>
#include <linstate/testing/cuda_runner.cuh>
#include <linstate/testing/inputs.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>

struct gla : linstate::spec<> {};

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::puts("consumer_cuda: no CUDA device: skipped");
    return 77;
  }
  const auto data = linstate::testing::random_inputs<gla>({.B = 2, .T = 200, .H = 2, .HV = 2, .K = 64, .V = 64}, 3);
  const auto got = linstate::testing::cuda_runner{}.forward<gla, linstate::chunked<64>, linstate::mask>(data.view(), {});
  const auto want = linstate::reference::forward<gla>(data.view());
  double e = 0, m = 0;
  for (linstate::index_t i = 0; i < want.o.numel(); ++i) {
    e = std::max(e, std::abs(static_cast<double>(got.o.data()[i]) - want.o.data()[i]));
    m = std::max(m, std::abs(want.o.data()[i]));
  }
  std::printf("consumer_cuda: gla chunked<64> on linstate::cuda against the fp64 reference: relative error %.2e: %s\n",
              e / m, e / m <= 1e-5 ? "ok" : "FAILED");
  return e / m <= 1e-5 ? 0 : 1;
}
