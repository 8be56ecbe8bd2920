// SPDX-License-Identifier: Apache-2.0
//! \file tests/pch/linstate_tests_pch.hpp
//! \brief Precompiled header of the test programs made of several translation units (test_variants,
//! test_unit; meson's cpp_pch, tests/variants/meson.build and tests/unit/meson.build). Parsing doctest,
//! Eigen and <linstate/linstate.hpp> is 6.5–8 s of g++ 12's CPU per translation unit that includes them
//! (docs/benchmarks.md, "Issue 13, session 14"); a program's .gch is
//! made once (with that program's flags, so also under the sanitizers) and given to each of its files
//! with -include. Each test file still includes what it uses: without precompiled headers
//! (-Db_pch=false) every file compiles as it is.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <linstate/linstate.hpp>
