// examples/mqar/variant_gdn.cpp — the mqar command's training of variant gdn (see variants.hpp).
#include "variants.hpp"

namespace mqar_cmd {
run_result run_gdn(const run_config& c) { return train_variant<variants::gdn, cpu_trainer<variants::gdn>>("gdn", c); }
}  // namespace mqar_cmd
