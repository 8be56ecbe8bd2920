// linstate/router/dense.hpp — every partition, weight 1.
#pragma once
#include "../detail/kinds.hpp"

namespace linstate::router {

//! \brief Dense routing: every token writes and reads every partition with weight 1. With a single
//! partition this is plain GLA; with `partition::routed<N>` it is N independent heads summed.
//! Takes no router logits.
//! \code
//! struct gla : linstate::spec<> { using router = linstate::router::dense; };   // the default
//! \endcode
struct dense {
  static constexpr detail::router_kind kind = detail::router_kind::dense;
  static constexpr const char* name = "router::dense";
};

}  // namespace linstate::router
