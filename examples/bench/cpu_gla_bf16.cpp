// examples/bench/cpu_gla_bf16.cpp — linstate-bench: the gla variants on the CPU, bf16 inputs.
#include "cpu_families.hpp"

template std::vector<linstate_cli::named_runner> linstate_cli::cpu_gla<Eigen::bfloat16>();
