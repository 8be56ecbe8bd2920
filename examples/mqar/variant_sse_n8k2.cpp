// examples/mqar/variant_sse_n8k2.cpp — the mqar command's training of variant sse_n8k2 (see variants.hpp).
#include "variants.hpp"

namespace mqar_cmd {
run_result run_sse_n8k2(const run_config& c) { return train_variant<variants::sse_n8k2, cpu_trainer<variants::sse_n8k2>>("sse_n8k2", c); }
}  // namespace mqar_cmd
