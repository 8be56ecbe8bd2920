// examples/mqar/variant_gdn_cuda.cu — the mqar command's training of variant gdn on the GPU
// (--device cuda; mqar_train_cuda.cuh). Built when the CUDA backend is (nvcc found).
#include "mqar_train_cuda.cuh"
#include "variants.hpp"

namespace mqar_cmd {
run_result run_gdn_cuda(const run_config& c) { return train_variant<variants::gdn, cuda_trainer<variants::gdn>>("gdn", c); }
}  // namespace mqar_cmd
