// linstate/decay/none.hpp — no decay: plain (causal) linear attention.
#pragma once
#include "../transition.hpp"

namespace linstate::decay {

//! \brief No forgetting: `h_t = h_{t-1} + k_t v_tᵀ`, `o_t = s · h_tᵀ q_t` (Katharopoulos et al. 2020;
//! SPEC §2.1 with g ≡ 0). Family diagonal with no gate: takes no `g` tensor.
//!
//! \code
//! struct linear_attention : linstate::spec<> { using decay = linstate::decay::none; };
//! auto [o, ht] = linstate::forward<linear_attention>(linstate::cpu{}, in);   // in.g stays empty
//! \endcode
struct none : diagonal_transition<gate_extent::none> {
  static constexpr const char* name = "decay::none";
};

}  // namespace linstate::decay
