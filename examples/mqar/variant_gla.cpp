// examples/mqar/variant_gla.cpp — the mqar command's training of variant gla (see variants.hpp).
#include "variants.hpp"

namespace mqar_cmd {
run_result run_gla(const run_config& c) { return train_variant<variants::gla, cpu_trainer<variants::gla>>("gla", c); }
}  // namespace mqar_cmd
