// examples/bench/cuda_gla_bf16.cu — linstate-bench: the gla variants on linstate::cuda, bf16 inputs
// (compiled by nvcc, only in a build with the CUDA backend).
#include "cuda_families.cuh"

template std::vector<linstate_cli::named_runner> linstate_cli::cuda_gla<Eigen::bfloat16>();
