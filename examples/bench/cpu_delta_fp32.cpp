// examples/bench/cpu_delta_fp32.cpp — linstate-bench: the delta variants on the CPU, fp32 inputs.
#include "cpu_families.hpp"

template std::vector<linstate_cli::named_runner> linstate_cli::cpu_delta<float>();
