// examples/mqar/variant_sse_n4k1s.cpp — the mqar command's training of variant sse_n4k1s (see variants.hpp).
#include "variants.hpp"

namespace mqar_cmd {
run_result run_sse_n4k1s(const run_config& c) { return train_variant<variants::sse_n4k1s, cpu_trainer<variants::sse_n4k1s>>("sse_n4k1s", c); }
}  // namespace mqar_cmd
