// examples/mqar/variant_sse_n8k2_cuda.cu — the mqar command's training of variant sse_n8k2 on the GPU
// (--device cuda; mqar_train_cuda.cuh). Built when the CUDA backend is (nvcc found).
#include "mqar_train_cuda.cuh"
#include "variants.hpp"

namespace mqar_cmd {
run_result run_sse_n8k2_cuda(const run_config& c) { return train_variant<variants::sse_n8k2, cuda_trainer<variants::sse_n8k2>>("sse_n8k2", c); }
}  // namespace mqar_cmd
