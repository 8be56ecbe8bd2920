// linstate/dynamic.hpp — the marker for a policy parameter given at run time.
#pragma once

namespace linstate {

//! A policy parameter whose value is given at run time (through linstate::options), as Eigen::Dynamic.
inline constexpr int dynamic = -1;

}  // namespace linstate
