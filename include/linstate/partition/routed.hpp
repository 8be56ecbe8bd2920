// linstate/partition/routed.hpp — N routed state partitions, optionally plus a shared one (SSE).
#pragma once
#include <type_traits>
#include "../dynamic.hpp"

namespace linstate::partition {

//! Tag for `routed<N, shared>`: add the always-active shared partition with its own q, k, decay gate
//! (and β for the delta rule) — inputs `in.shared.{q,k,g,beta}` (SPEC §4.3, §4.5).
struct shared {};
//! Tag for `routed<N, no_shared>` (the default).
struct no_shared {};

//! \brief N routed state partitions per head (Sparse State Expansion, arXiv 2507.16577, §4.1).
//! All N partitions share the routed inputs `q, k, g, beta`; a router picks per token which
//! partitions are written and read. With `routed<N, shared>` partition 0 of the state is the shared
//! one and partition 1+n is routed partition n: state `[S, N+1, HV, K, V]` (else `[S, N, HV, K, V]`).
//! N may be linstate::dynamic (taken from linstate::options at run time).
//! \code
//! using n4s = linstate::partition::routed<4, linstate::partition::shared>;   // SSE-n4k1 with shared
//! using n8  = linstate::partition::routed<8>;                                // no shared partition
//! \endcode
template <int N, class Shared = no_shared>
struct routed {
  static_assert(N == dynamic || N >= 1, "linstate: partition::routed<N> needs N >= 1 (or linstate::dynamic)");
  static_assert(std::is_same_v<Shared, shared> || std::is_same_v<Shared, no_shared>,
                "linstate: the second argument of partition::routed<N, X> must be partition::shared or "
                "partition::no_shared");
  static constexpr int num_routed = N;
  static constexpr bool has_shared = std::is_same_v<Shared, shared>;
  static constexpr bool is_single = false;
  static constexpr const char* name = "partition::routed";
};

}  // namespace linstate::partition
