// examples/bench/cpu_delta_bf16.cpp — linstate-bench: the delta variants on the CPU, bf16 inputs.
#include "cpu_families.hpp"

template std::vector<linstate_cli::named_runner> linstate_cli::cpu_delta<Eigen::bfloat16>();
