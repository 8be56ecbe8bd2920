// linstate/decay/scalar.hpp — one log-decay per (token, head).
#pragma once
#include "../transition.hpp"

namespace linstate::decay {

//! \brief Per-head scalar decay (RetNet/Mamba-2 style):
//! `h_t = e^{g_t} h_{t-1} + k_t v_tᵀ`, `g_t ≤ 0` a scalar per token and value head (SPEC §2.1 with
//! `g_t` broadcast over the K rows; the scalar gate of SPEC §3.1). Family diagonal, gate per head.
//!
//! Gate tensor `g`: `[B,T,HV]`, natural-log retention (≤ 0).
//! \code
//! struct retention : linstate::spec<> { using decay = linstate::decay::scalar; };
//! linstate::inputs<float> in{.q = q, .k = k, .v = v, .g = g};   // g [B,T,HV]
//! auto [o, ht] = linstate::forward<retention>(linstate::cpu{}, in);
//! \endcode
struct scalar : diagonal_transition<gate_extent::head> {
  static constexpr const char* name = "decay::scalar";
};

}  // namespace linstate::decay
