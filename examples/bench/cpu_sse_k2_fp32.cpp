// examples/bench/cpu_sse_k2_fp32.cpp — linstate-bench: the sse_k2 variants on the CPU, fp32 inputs.
#include "cpu_families.hpp"

template std::vector<linstate_cli::named_runner> linstate_cli::cpu_sse_k2<float>();
