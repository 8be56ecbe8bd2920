// linstate/state/dense.hpp — the recurrent state: one fp32 K×V matrix per (sequence, partition, head).
#pragma once
#include <type_traits>

namespace linstate::state {

//! \brief Dense K×V recurrent state in fp32, canonical layout `[S, P, HV, K, V]` (row = key index,
//! column = value index; P = partitions, the shared one first when present). Every algorithm,
//! strategy and backend reads and writes this one layout, so a prefill done one way can be continued
//! by a decode done another (SPEC §11 C5). V ≠ K is allowed.
//! \code
//! struct gla : linstate::spec<> { using state = linstate::state::dense<float>; };
//! \endcode
template <class Accumulator = float>
struct dense {
  static_assert(std::is_same_v<Accumulator, float>,
                "linstate: state::dense<Acc> supports Acc = float only (state and accumulation are fp32; "
                "inputs may be bf16/fp16)");
  using accumulator = Accumulator;
  static constexpr const char* name = "state::dense<float>";
};

}  // namespace linstate::state
