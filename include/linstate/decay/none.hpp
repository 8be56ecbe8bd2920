// linstate/decay/none.hpp — no decay: plain (causal) linear attention.
#pragma once
#include "../detail/kinds.hpp"

namespace linstate::decay {

//! \brief No forgetting: `h_t = h_{t-1} + k_t v_tᵀ`, `o_t = s · h_tᵀ q_t` (Katharopoulos et al. 2020;
//! SPEC §2.1 with g ≡ 0). Takes no gate tensor.
//!
//! \code
//! struct linear_attention : linstate::spec<> { using decay = linstate::decay::none; };
//! auto [o, ht] = linstate::forward<linear_attention>(linstate::cpu{}, in);   // in.g stays empty
//! \endcode
struct none {
  static constexpr detail::decay_kind kind = detail::decay_kind::none;
  static constexpr int gate_rank = 0;       //!< no `g` tensor
  static constexpr bool uses_beta = false;  //!< no `beta` tensor
  static constexpr bool l2norm_qk = false;
  static constexpr const char* name = "decay::none";
};

}  // namespace linstate::decay
