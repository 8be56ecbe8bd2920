// linstate/detail/kinds.hpp — run-time tags the policies resolve to (shared by every backend).
#pragma once

namespace linstate {

//! A policy parameter whose value is given at run time (through linstate::options), as Eigen::Dynamic.
inline constexpr int dynamic = -1;

namespace detail {
enum class decay_kind { none, scalar, diagonal, delta };
enum class router_kind { dense, top_k };
}  // namespace detail
}  // namespace linstate
