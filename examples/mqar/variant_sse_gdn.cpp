// examples/mqar/variant_sse_gdn.cpp — the mqar command's training of variant sse_gdn (see variants.hpp).
#include "variants.hpp"

namespace mqar_cmd {
run_result run_sse_gdn(const run_config& c) { return train_variant<variants::sse_gdn, cpu_trainer<variants::sse_gdn>>("sse_gdn", c); }
}  // namespace mqar_cmd
