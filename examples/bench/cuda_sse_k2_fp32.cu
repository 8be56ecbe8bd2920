// examples/bench/cuda_sse_k2_fp32.cu — linstate-bench: the sse_k2 variants on linstate::cuda, fp32 inputs
// (compiled by nvcc, only in a build with the CUDA backend).
#include "cuda_families.cuh"

template std::vector<linstate_cli::named_runner> linstate_cli::cuda_sse_k2<float>();
