// linstate/cuda/detail/traits.cuh — what the CUDA kernels ask of a decay policy: its family and the
// extent of its gate (traits only, never which policy it is), and the compile-time refusal of a
// policy the backend has no kernel for.
//
// The kernels are templated on the decay policy D itself and read every per-token quantity through
// it (D::log_decay for the gates, D::write_strength for β, D::step / D::step_adjoint for a
// family::recurrent_only transition); they branch on these traits only:
//   is_delta<D>     family::delta             (kernels/recurrent*.cuh, kernels/chunked_delta.cuh)
//   decay_key<D>    family::diagonal, gate per key  [B,T,HV,K]  (kernels/recurrent*.cuh, chunked*.cuh)
//   decay_head<D>   family::diagonal, gate per head [B,T,HV]
//   decay_none<D>   family::diagonal, no gate
//   is_generic<D>   family::recurrent_only    (kernels/generic.cuh, from the policy's step / step_adjoint)
#pragma once

#include <linstate/concepts.hpp>
#include <linstate/transition.hpp>

namespace linstate::cuda_detail {

using detail::decay_head;
using detail::decay_key;
using detail::decay_none;
using detail::is_delta;
using detail::is_diagonal;
using detail::is_generic;

//! One static_assert naming the family (or trait) the CUDA backend has no kernel for, and the fix.
//! Called by every host entry point before a kernel is chosen: a policy never falls back to another
//! family's kernel.
template <class D>
constexpr bool check_decay() {
  static_assert(is_diagonal<D> || is_delta<D> || is_generic<D>,
                "linstate (cuda): the CUDA backend has kernels for family::diagonal, family::delta and "
                "family::recurrent_only only; declare the decay policy's family as one of them "
                "(family::recurrent_only runs any transition from its step / step_adjoint)");
  if constexpr (is_diagonal<D>)
    static_assert(D::gate == gate_extent::none || D::gate == gate_extent::head || D::gate == gate_extent::key,
                  "linstate (cuda): the family::diagonal kernels decay along the key rows (gate none, head or key); a "
                  "per-value-channel gate needs family::recurrent_only");
  if constexpr (is_delta<D>)
    static_assert(D::gate == gate_extent::head && D::uses_beta,
                  "linstate (cuda): the family::delta kernels are the gated delta rule (gate = gate_extent::head, "
                  "uses_beta = true); derive the policy from linstate::delta_transition<L2Norm>, or declare it "
                  "family::recurrent_only");
  return true;
}

}  // namespace linstate::cuda_detail
