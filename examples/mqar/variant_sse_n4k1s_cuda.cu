// examples/mqar/variant_sse_n4k1s_cuda.cu — the mqar command's training of variant sse_n4k1s on the GPU
// (--device cuda; mqar_train_cuda.cuh). Built when the CUDA backend is (nvcc found).
#include "mqar_train_cuda.cuh"
#include "variants.hpp"

namespace mqar_cmd {
run_result run_sse_n4k1s_cuda(const run_config& c) { return train_variant<variants::sse_n4k1s, cuda_trainer<variants::sse_n4k1s>>("sse_n4k1s", c); }
}  // namespace mqar_cmd
