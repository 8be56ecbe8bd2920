// examples/mqar/variant_gla_cuda.cu — the mqar command's training of variant gla on the GPU
// (--device cuda; mqar_train_cuda.cuh). Built when the CUDA backend is (nvcc found).
#include "mqar_train_cuda.cuh"
#include "variants.hpp"

namespace mqar_cmd {
run_result run_gla_cuda(const run_config& c) { return train_variant<variants::gla, cuda_trainer<variants::gla>>("gla", c); }
}  // namespace mqar_cmd
