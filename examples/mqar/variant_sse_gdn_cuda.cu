// examples/mqar/variant_sse_gdn_cuda.cu — the mqar command's training of variant sse_gdn on the GPU
// (--device cuda; mqar_train_cuda.cuh). Built when the CUDA backend is (nvcc found).
#include "mqar_train_cuda.cuh"
#include "variants.hpp"

namespace mqar_cmd {
run_result run_sse_gdn_cuda(const run_config& c) { return train_variant<variants::sse_gdn, cuda_trainer<variants::sse_gdn>>("sse_gdn", c); }
}  // namespace mqar_cmd
