// examples/bench/cpu_gla_fp32.cpp — linstate-bench: the gla variants on the CPU, fp32 inputs.
#include "cpu_families.hpp"

template std::vector<linstate_cli::named_runner> linstate_cli::cpu_gla<float>();
