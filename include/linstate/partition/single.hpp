// linstate/partition/single.hpp — one state per (sequence, head).
#pragma once

namespace linstate::partition {

//! \brief One recurrent state per (sequence, head): GLA, RetNet, DeltaNet... State `[S,1,HV,K,V]`.
//! \code
//! struct gla : linstate::spec<> {};   // partition::single is the default
//! \endcode
struct single {
  static constexpr int num_routed = 1;   //!< the single state behaves as one always-selected partition
  static constexpr bool has_shared = false;
  static constexpr bool is_single = true;
  static constexpr const char* name = "partition::single";
};

}  // namespace linstate::partition
