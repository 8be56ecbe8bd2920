// examples/bench/cuda_delta_fp32.cu — linstate-bench: the delta variants on linstate::cuda, fp32 inputs
// (compiled by nvcc, only in a build with the CUDA backend).
#include "cuda_families.cuh"

template std::vector<linstate_cli::named_runner> linstate_cli::cuda_delta<float>();
