// examples/bench/cpu_sse_k2_bf16.cpp — linstate-bench: the sse_k2 variants on the CPU, bf16 inputs.
#include "cpu_families.hpp"

template std::vector<linstate_cli::named_runner> linstate_cli::cpu_sse_k2<Eigen::bfloat16>();
