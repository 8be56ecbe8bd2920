// linstate/decay/gated_key.hpp — Gated Linear Attention's per-key diagonal decay.
#pragma once
#include "../transition.hpp"

namespace linstate::decay {

//! \brief GLA (Yang et al. 2023, arXiv 2312.06635, Eq. 3; SPEC §2.1):
//! `h_t = diag(e^{g_t}) h_{t-1} + k_t v_tᵀ`, i.e. `h_t[i,j] = e^{g_t[i]} h_{t-1}[i,j] + k_t[i] v_t[j]`,
//! with a log-gate `g_t ∈ R^K`, `g_t ≤ 0`, per token and value head. Family diagonal, gate per key.
//!
//! Gate tensor `g`: `[B,T,HV,K]` (the same shape as k when HV = H).
//! \code
//! struct gla : linstate::spec<> { using decay = linstate::decay::gated_key; };
//! linstate::inputs<float> in{.q = q.view(), .k = k.view(), .v = v.view(), .g = g.view()};
//! auto [o, ht] = linstate::forward<gla>(linstate::cpu{}, in);
//! \endcode
struct gated_key : diagonal_transition<gate_extent::key> {
  static constexpr const char* name = "decay::gated_key";
};

}  // namespace linstate::decay
