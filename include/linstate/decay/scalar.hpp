// linstate/decay/scalar.hpp — one log-decay per (token, head).
#pragma once
#include "../detail/kinds.hpp"

namespace linstate::decay {

//! \brief Per-head scalar decay (RetNet/Mamba-2 style):
//! `h_t = e^{g_t} h_{t-1} + k_t v_tᵀ`, `g_t ≤ 0` a scalar per token and value head (SPEC §2.1 with
//! `g_t` broadcast over the K rows; the scalar gate of SPEC §3.1).
//!
//! Gate tensor `g`: `[B,T,HV]`, natural-log retention (≤ 0).
//! \code
//! struct retention : linstate::spec<> { using decay = linstate::decay::scalar; };
//! \endcode
struct scalar {
  static constexpr detail::decay_kind kind = detail::decay_kind::scalar;
  static constexpr int gate_rank = 1;
  static constexpr bool uses_beta = false;
  static constexpr bool l2norm_qk = false;
  static constexpr const char* name = "decay::scalar";
};

}  // namespace linstate::decay
