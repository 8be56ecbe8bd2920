// examples/bench/pch/linstate_bench_pch.hpp — precompiled header of linstate-bench's C++ translation
// units (examples/meson.build, cpp_pch; not with the CUDA backend, whose build compiles them with nvcc):
// Eigen, <linstate/linstate.hpp> and <linstate/bench.hpp> parsed once for the seven files instead of in
// each. The files still include what they use: with -Db_pch=false they compile as they are.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include <linstate/bench.hpp>
#include <linstate/linstate.hpp>
