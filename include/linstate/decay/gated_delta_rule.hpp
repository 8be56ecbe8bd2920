// linstate/decay/gated_delta_rule.hpp — the gated delta rule (Gated DeltaNet) transition.
#pragma once
#include "../transition.hpp"

namespace linstate::decay {

//! \brief Gated delta rule (Yang et al. 2024, Gated DeltaNet, Eq. 10; SPEC §3.1). With a scalar log-gate
//! `g_t ≤ 0` and a write strength `β_t`, per token and value head:
//! \verbatim
//!   k̂ = k / sqrt(Σk² + 1e-6), q̂ likewise            (only when L2Norm = true)
//!   h'  = e^{g_t} h_{t-1}
//!   u   = β_t (v_t − h'ᵀ k̂_t)
//!   h_t = h' + k̂_t uᵀ        ⇔  h_t = e^{g_t}(I − β_t k̂ k̂ᵀ) h_{t-1} + β_t k̂ v_tᵀ
//!   o_t = s · h_tᵀ q̂_t
//! \endverbatim
//! Family delta (chunked in the WY form, SPEC §3.2); the math and its adjoint are
//! linstate::delta_transition. Under a routed partition the write gate scales β (β·p), and decay and
//! β are frozen outside the write set (SPEC §11 C9), so the l2 normalisation cannot cancel the router.
//!
//! Tensors: `g` `[B,T,HV]`, `beta` `[B,T,HV]`.
//! \code
//! struct gdn       : linstate::spec<> { using decay = linstate::decay::gated_delta_rule<true>; };
//! struct sse_delta : sse_n4k1s        { using decay = linstate::decay::gated_delta_rule<true>; };
//! \endcode
template <bool L2Norm = false>
struct gated_delta_rule : delta_transition<L2Norm> {
  static constexpr const char* name = L2Norm ? "decay::gated_delta_rule<l2norm>" : "decay::gated_delta_rule";
};

}  // namespace linstate::decay
