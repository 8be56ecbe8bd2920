// linstate/spec.hpp — a variant is a struct of four named policy slots.
#pragma once

#include "decay/gated_key.hpp"
#include "partition/single.hpp"
#include "router/dense.hpp"
#include "state/dense.hpp"

namespace linstate {

//! \brief The four slots of a linear-attention variant, with defaults that make plain GLA.
//! A variant inherits from `spec<>` (or from another variant) and overrides slots by name:
//! \code
//! struct gla       : linstate::spec<> {};                                        // GLA
//! struct sse_n4k1s : gla       { using partition = linstate::partition::routed<4, linstate::partition::shared>;
//!                                using router    = linstate::router::top_k<1>; };
//! struct sse_n8k2  : gla       { using partition = linstate::partition::routed<8>;
//!                                using router    = linstate::router::top_k<2>; };
//! struct sse_delta : sse_n4k1s { using decay = linstate::decay::gated_delta_rule<true>; };   // one slot changes
//! \endcode
//! - `state`: how one K×V state is stored (state::dense<float>);
//! - `decay`: the whole transition Λ_t (none, scalar, gated_key = GLA, gated_delta_rule);
//! - `router`: which partitions each token writes and reads, and with which weight;
//! - `partition`: which states exist (single; routed<N>; routed<N, shared>).
template <class State = state::dense<float>, class Decay = decay::gated_key, class Router = router::dense,
          class Partition = partition::single>
struct spec {
  using state = State;
  using decay = Decay;
  using router = Router;
  using partition = Partition;
};

}  // namespace linstate
