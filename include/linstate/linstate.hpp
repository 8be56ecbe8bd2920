// linstate/linstate.hpp — the umbrella header of the CPU library (Eigen backend).
//
// linstate composes linear-attention variants from four policies — state, decay, router, partition —
// and runs them forward on a backend chosen at the call site:
// \code
//   #include <linstate/linstate.hpp>
//   namespace pt = linstate::partition; namespace rt = linstate::router;
//   struct gla       : linstate::spec<> {};
//   struct sse_n4k1s : gla { using partition = pt::routed<4, pt::shared>; using router = rt::top_k<1>; };
//   auto [o, ht] = linstate::forward<sse_n4k1s>(linstate::cpu{}, in);
// \endcode
#pragma once

#include "config.hpp"
#include "tensor.hpp"
#include "dynamic.hpp"
#include "detail/numeric.hpp"

#include "decay/gated_delta_rule.hpp"
#include "decay/gated_key.hpp"
#include "decay/none.hpp"
#include "decay/scalar.hpp"
#include "partition/routed.hpp"
#include "partition/single.hpp"
#include "router/dense.hpp"
#include "router/top_k.hpp"
#include "state/dense.hpp"

#include "algorithm.hpp"
#include "backend/tags.hpp"
#include "concepts.hpp"
#include "describe.hpp"
#include "io_types.hpp"
#include "layout.hpp"
#include "saved_states.hpp"
#include "spec.hpp"

#include "forward.hpp"
#include "backward.hpp"
#include "balance_loss.hpp"
#include "reference/naive.hpp"
#include "reference/naive_backward.hpp"
