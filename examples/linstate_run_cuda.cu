// SPDX-License-Identifier: Apache-2.0
//! \file examples/linstate_run_cuda.cu
//! \brief The GPU half of `linstate-run --backend cuda`: the same linstate_run::run_case as the CPU
//! path, over linstate::testing::cuda_runner (host tensors copied to the first GPU, linstate::forward
//! and linstate::backward on linstate::cuda{}, the results copied back). Compiled by nvcc and linked
//! into linstate-run when linstate is built with CUDA; reading the case and writing the outputs stay
//! in linstate_run.cpp (compiled by the C++ compiler).
#include <cuda_runtime.h>

#include <string>

#include <linstate/cuda.cuh>
#include <linstate/testing/cuda_runner.cuh>

#include "linstate_run.hpp"

namespace linstate_run {

case_outputs run_case_cuda(const case_config& c, const case_inputs& ci, algorithm algo, strategy strat) {
  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices == 0)
    throw linstate::error(std::string("--backend cuda: no usable CUDA device (") +
                          (e != cudaSuccess ? cudaGetErrorString(e) : "none found") + ")");
  return run_case(linstate::testing::cuda_runner{}, c, ci, algo, strat);
}

}  // namespace linstate_run
