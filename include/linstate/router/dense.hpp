// linstate/router/dense.hpp — every partition, weight 1.
#pragma once

#include <string>

namespace linstate::router {

//! \brief Dense routing: every token writes and reads every partition with weight 1. With a single
//! partition this is plain GLA; with `partition::routed<N>` it is N independent heads summed.
//! Takes no router logits. A router that does not route (`routes = false`) has no per-token math:
//! the backends give every partition every token.
//! \code
//! struct gla : linstate::spec<> { using router = linstate::router::dense; };   // the default
//! \endcode
struct dense {
  static constexpr bool routes = false;
  static constexpr const char* name = "router::dense";
  static std::string describe() { return "dense"; }
};

}  // namespace linstate::router
