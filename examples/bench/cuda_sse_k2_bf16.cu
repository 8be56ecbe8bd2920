// examples/bench/cuda_sse_k2_bf16.cu — linstate-bench: the sse_k2 variants on linstate::cuda, bf16 inputs
// (compiled by nvcc, only in a build with the CUDA backend).
#include "cuda_families.cuh"

template std::vector<linstate_cli::named_runner> linstate_cli::cuda_sse_k2<Eigen::bfloat16>();
