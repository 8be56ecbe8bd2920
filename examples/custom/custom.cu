// examples/custom/custom.cu — the same four user policies as custom.cpp (policies.hpp: a per-value-
// channel decay, Kimi Delta Attention, a fractional delta rule, a sigmoid top-k router with a selection bias), run forward and
// backward on the CUDA backend, linstate::cuda{stream}, through linstate::testing::cuda_runner
// (<linstate/testing/cuda_runner.cuh>), and checked by the very checks of
// check_custom.hpp: against the fp64 reference (which evaluates each policy's own math in double) and
// fp64 finite differences, mask and varlen, B > 1 and packed cu_seqlens, the router under recurrent
// and chunked<16>. Nothing of the library is edited for the policies. Prints one line per check;
// exits 1 on any mismatch, 77 (skip) without a GPU.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>

#include <linstate/cuda.cuh>
#include <linstate/testing/cuda_runner.cuh>

#include "check_custom.hpp"

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::puts("no CUDA device: skipped");
    return 77;
  }
  const bool verbose = argc > 1 && std::strcmp(argv[1], "-v") == 0;
  const linstate::testing::cuda_runner gpu{};  // linstate::cuda on the default stream
  int checks = 0, failures = 0;
  auto report = [&](const custom_check::outcome& o) {
    std::fputs(o.log.c_str(), stdout);
    checks += o.checks, failures += o.failures;
  };
  try {
    report(custom_check::check_per_value_decay(gpu, verbose));
    report(custom_check::check_kda(gpu, verbose));
    report(custom_check::check_fractional_delta(gpu, verbose));
    report(custom_check::check_sigmoid_router(gpu, verbose));
    report(custom_check::check_router_with_kda(gpu, verbose));
  } catch (const std::exception& e) {
    std::printf("FAIL: exception: %s\n", e.what());
    return 1;
  }
  std::printf("%d checks, %d failed (linstate::cuda)\n", checks, failures);
  return failures == 0 ? 0 : 1;
}
