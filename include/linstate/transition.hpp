// linstate/transition.hpp — what a decay (transition) policy is made of: its family, the gate it
// takes, and the per-token math of one value column of the state with its adjoint.
//
// The backends own the loops and the memory; a decay policy owns the math (STYLE: Eigen's functors
// evaluated by someone else's loops, CUTLASS's epilogue functors). Every transition linstate knows
// acts on the K rows of each value column of a K×V state separately:
// \verbatim
//   s_j ← T_t(s_j) + k_t · w_{t,j}        one value column j of the state, s_j ∈ R^K
//   o_t[j] = scale · r_t · q̂_tᵀ s_j        the read is the same for every transition
// \endverbatim
// so a policy writes `step` (what token t does to one column) and `step_adjoint` (its reverse mode),
// templated on the number type: the backends evaluate them in float, the fp64 reference in double,
// on the host and on the device (LINSTATE_HOST_DEVICE). How the columns are vectorised or spread
// over threads is the backend's business.
//
// The *family* says which chunk-parallel algebra a kernel may exploit for the policy:
//   family::diagonal       T_t = diag(e^{λ_t}) with λ_t = the gate per key row, per head or absent
//                          (decay::gated_key, decay::scalar, decay::none): the GLA chunked kernels.
//   family::delta          T_t = e^{λ_t}(I − β_t w_t k̂_t k̂_tᵀ), λ_t the per-head gate (decay::gated_delta_rule):
//                          the WY-form chunked kernels (SPEC §3.2).
//   family::recurrent_only everything else: run token by token from `step` / `step_adjoint` on
//                          every backend; `chunked<C>` with such a policy does not compile.
// A family's kernels read every per-token quantity they need (λ from `log_decay`, β, the l2
// normalisation trait) from the policy, never from which policy it is.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "config.hpp"
#include "tensor.hpp"

namespace linstate {

//! \brief The chunk-parallel algebra a transition belongs to (see the header comment).
namespace family {
struct diagonal {
  static constexpr const char* name = "diagonal";
};
struct delta {
  static constexpr const char* name = "delta";
};
struct recurrent_only {
  static constexpr const char* name = "recurrent_only";
};
}  // namespace family

template <class F>
inline constexpr bool is_family_v = std::is_same_v<F, family::diagonal> || std::is_same_v<F, family::delta> ||
                                    std::is_same_v<F, family::recurrent_only>;

//! \brief Which gate tensor `g` a transition takes (and its shared partition's `shared.g`):
//! none (no tensor), head `[B,T,HV]`, key `[B,T,HV,K]`, value `[B,T,HV,V]`.
enum class gate_extent : std::uint8_t { none, head, key, value };

//! Entries of the gate per (token, value head).
LINSTATE_HOST_DEVICE constexpr index_t gate_width(gate_extent e, index_t K, index_t V) {
  return e == gate_extent::none ? 0 : e == gate_extent::head ? 1 : e == gate_extent::key ? K : V;
}

//! The family tests every backend branches on (traits only, never which policy it is). The gate
//! tests are true for the diagonal family only.
namespace detail {
template <class D>
inline constexpr bool is_delta = std::is_same_v<typename D::family, family::delta>;
template <class D>
inline constexpr bool is_diagonal = std::is_same_v<typename D::family, family::diagonal>;
template <class D>
inline constexpr bool is_generic = std::is_same_v<typename D::family, family::recurrent_only>;
template <class D>
inline constexpr bool decay_key = is_diagonal<D> && D::gate == gate_extent::key;
template <class D>
inline constexpr bool decay_head = is_diagonal<D> && D::gate == gate_extent::head;
template <class D>
inline constexpr bool decay_none = is_diagonal<D> && D::gate == gate_extent::none;

//! \brief The floor of a log-decay in the chunk-parallel kernels (family::diagonal and family::delta,
//! CPU and CUDA, forward and backward): each per-token λ = D::log_decay(...) is read as max(λ, −104).
//!
//! Why: the chunked forms sum the log-decays of a chunk, Γ_t = Σ_{u ≤ t} λ_u, and form every factor as
//! e^{Γ_t − Γ_j}. One huge but finite λ (−1e4, −1e30) makes |Γ| so large that the small λ after it
//! are lost in its rounding (fp32 Γ = −1e30 absorbs every −0.1: no decay at all after it), and λ = −inf
//! gives Γ_t − Γ_j = −inf − (−inf) = NaN. The recurrence has neither problem: it multiplies by e^{λ}.
//!
//! Why −104: in fp32, e^{x} rounds to 0 for every x < ln(2^{−150}) ≈ −103.97 (below half the smallest
//! subnormal, 2^{−149} = e^{−103.28}). So for every λ below the floor the recurrence's factor e^{λ} is
//! already exactly 0 — the token forgets everything before it — and it stays exactly 0 with λ
//! replaced by the floor: e^{−104} = 0 too, and every chunked factor spanning such a token has an
//! exponent ≤ −104 (the other λ are ≤ 0). Nothing changes where λ ≥ −104, which is where the chunked
//! results were right. The floor keeps |Γ| ≤ 104 per such token, so later gates keep their precision.
//! Its derivative is 0 below the floor (∂L/∂λ = 0 there, as in the recurrence, where e^{λ} = 0 makes
//! every term of ∂L/∂λ vanish): the chunked backward writes exactly 0 for a floored gate.
//! A NaN λ is not floored (it propagates, as in the recurrence).
inline constexpr float chunked_log_decay_floor = -104.f;

//! λ as the chunked kernels use it: max(λ, chunked_log_decay_floor); −inf → the floor; NaN stays NaN.
template <class T>
LINSTATE_HOST_DEVICE constexpr T chunked_log_decay(T lambda) {
  return lambda < T(chunked_log_decay_floor) ? T(chunked_log_decay_floor) : lambda;
}
//! Whether chunked_log_decay replaced λ by the floor (its derivative is then 0).
template <class T>
LINSTATE_HOST_DEVICE constexpr bool below_log_decay_floor(T lambda) {
  return lambda < T(chunked_log_decay_floor);
}
}  // namespace detail

//! \brief One value column of a K×V state (or a K-long accumulator): element i at `p[i·stride]`.
//! The backends choose the stride (row-major state: V; a transposed copy or a per-thread array: 1).
template <class T>
struct column {
  T* p = nullptr;
  index_t stride = 1;
  LINSTATE_HOST_DEVICE T& operator[](index_t i) const { return p[i * stride]; }
};

//! \brief What token t gives a transition (for one value head), in the evaluation type T.
template <class T>
struct token {
  index_t K = 0;
  const T* k = nullptr;  //!< [K] key; l2-normalised when the policy declares l2norm_qk
  const T* g = nullptr;  //!< the gate of this (token, value head): gate_width(gate, K, V) entries; null for none
  T beta = T(1);         //!< β_t when the policy declares uses_beta, else 1
  T w = T(1);            //!< the router's write weight (1 for the shared partition, single partitions, dense)
};

//! \brief Where `step_adjoint` accumulates (+=) the gradients of token t's inputs. A backend may
//! hand every column its own accumulators and sum them, or share one set across columns.
template <class T>
struct token_grad {
  column<T> dk{};  //!< [K] ∂L/∂k (of the normalised key when l2norm_qk; the backend chains the norm)
  column<T> dg{};  //!< [gate_width] ∂L/∂g (unused for gate_extent::none)
  T dbeta = T(0);  //!< ∂L/∂β
  T dw = T(0);     //!< ∂L/∂w (the router's write weight)
};

namespace math {

using std::exp;
using std::sqrt;

//! 1 / sqrt(Σx² + 1e-6): fla's l2norm (SPEC §3.1), in T.
template <class T>
LINSTATE_HOST_DEVICE inline T l2_inverse_norm(T sum_of_squares) {
  return T(1) / sqrt(sum_of_squares + T(1e-6));
}

}  // namespace math

//! \brief The transition of the diagonal family, with λ_t taken from the gate of extent E
//! (key: λ_t[i] = g_t[i]; head: λ_t[i] = g_t for every row; none: λ_t = 0). Derive a policy from
//! it and give it a `name`:
//! \verbatim
//!   s_j ← diag(e^{λ_t}) s_j + w_t k_t v_t[j]                    (SPEC §2.1, §7)
//!   adjoint (ds = ∂L/∂s_j after, P = s_j before):
//!     ∂v_t[j] = w ⟨k, ds⟩   ∂k += w v_t[j] ds   ∂w += v_t[j] ⟨k, ds⟩
//!     ∂λ_i = ds_i e^{λ_i} P_i   ds ← diag(e^{λ}) ds
//! \endverbatim
template <gate_extent E>
struct diagonal_transition {
  static_assert(E != gate_extent::value,
                "linstate: family::diagonal decays along the key rows; a per-value-channel decay is a "
                "family::recurrent_only policy (see examples/custom/policies.hpp)");
  using family = linstate::family::diagonal;
  static constexpr gate_extent gate = E;
  static constexpr bool uses_beta = false;
  static constexpr bool l2norm_qk = false;

  //! λ_t for key row i, from this token's gate row `g` (gate_width entries).
  template <class T>
  LINSTATE_HOST_DEVICE static T log_decay(const T* g, index_t i) {
    if constexpr (E == gate_extent::key) return g[i];
    else if constexpr (E == gate_extent::head) return g[0];
    else return T(0);
  }

  template <class T>
  LINSTATE_HOST_DEVICE static void step(const token<T>& x, index_t /*j*/, T v, column<T> s) {
    using math::exp;
    const T wv = x.w * v;
    for (index_t i = 0; i < x.K; ++i) {
      if constexpr (E == gate_extent::none) s[i] += x.k[i] * wv;
      else s[i] = exp(log_decay(x.g, i)) * s[i] + x.k[i] * wv;
    }
  }

  template <class T, class C>
  LINSTATE_HOST_DEVICE static T step_adjoint(const token<T>& x, index_t /*j*/, T v, column<C> prev, column<T> ds,
                                             token_grad<T>& d) {
    using math::exp;
    T kds = T(0);
    for (index_t i = 0; i < x.K; ++i) {
      kds += x.k[i] * ds[i];
      d.dk[i] += x.w * v * ds[i];
      if constexpr (E != gate_extent::none) {
        const T a = exp(log_decay(x.g, i));
        const T dl = ds[i] * a * static_cast<T>(prev[i]);
        if constexpr (E == gate_extent::key) d.dg[i] += dl;
        else d.dg[0] += dl;
        ds[i] *= a;
      }
    }
    d.dw += v * kds;
    return x.w * kds;
  }
};

//! \brief The gated delta rule (Yang et al. 2024, Gated DeltaNet; SPEC §3.1), the delta family.
//! With a = e^{g_t}, b = write_strength(β_t, w_t) (β_t w_t here: SPEC §11 C9, the write weight scales β),
//! for one column:
//! \verbatim
//!   P = s_j,  p = ⟨k̂, P⟩,  u = b (v_t[j] − a p),  s_j ← a P + k̂ u
//!   adjoint: du = ⟨k̂, ds⟩   ∂v_t[j] = b du   db = du (v_t[j] − a p)   (∂β, ∂w) += write_strength_backward(β, w, db)
//!            ∂k̂ += u ds − a b du P   ∂g += a (⟨ds, P⟩ − b du p)   ds ← a ds − a b du k̂
//! \endverbatim
//! The write strength is the family's one point of variation: a policy that wants another b(β, w)
//! derives as `struct mine : linstate::delta_transition<true, mine>` and defines both
//! `write_strength(β, w)` and `write_strength_backward(β, w, db, dβ, dw)` (static, templates on T,
//! LINSTATE_HOST_DEVICE). `Self` makes this class's step / step_adjoint, and every kernel of the family
//! (CPU and CUDA, forward and backward), call the derived pair; validate_decay refuses a policy that
//! redefines one of the two without the other. Example: examples/custom/policies.hpp, fractional_delta.
template <bool L2Norm, class Self = void>
struct delta_transition {
  using family = linstate::family::delta;
  static constexpr gate_extent gate = gate_extent::head;
  static constexpr bool uses_beta = true;
  static constexpr bool l2norm_qk = L2Norm;
  //! The policy whose write_strength pair step / step_adjoint call: the derived one, or this.
  using self = std::conditional_t<std::is_void_v<Self>, delta_transition, Self>;

  template <class T>
  LINSTATE_HOST_DEVICE static T log_decay(const T* g, index_t /*i*/) {
    return g[0];
  }
  //! The write strength the delta rule applies: β scaled by the router's write weight.
  template <class T>
  LINSTATE_HOST_DEVICE static T write_strength(T beta, T w) {
    return beta * w;
  }
  //! Its adjoint: given db = ∂L/∂b, sets dbeta = ∂L/∂β and dw = ∂L/∂w (the write weight's cotangent).
  template <class T>
  LINSTATE_HOST_DEVICE static void write_strength_backward(T beta, T w, T db, T& dbeta, T& dw) {
    dbeta = w * db;
    dw = beta * db;
  }

  template <class T>
  LINSTATE_HOST_DEVICE static void step(const token<T>& x, index_t /*j*/, T v, column<T> s) {
    using math::exp;
    const T a = exp(x.g[0]), b = self::write_strength(x.beta, x.w);
    T p = T(0);
    for (index_t i = 0; i < x.K; ++i) p += x.k[i] * s[i];
    const T u = b * (v - a * p);
    for (index_t i = 0; i < x.K; ++i) s[i] = a * s[i] + x.k[i] * u;
  }

  template <class T, class C>
  LINSTATE_HOST_DEVICE static T step_adjoint(const token<T>& x, index_t /*j*/, T v, column<C> prev, column<T> ds,
                                             token_grad<T>& d) {
    using math::exp;
    const T a = exp(x.g[0]), b = self::write_strength(x.beta, x.w);
    T p = T(0), du = T(0), dsp = T(0);
    for (index_t i = 0; i < x.K; ++i) {
      const T P = static_cast<T>(prev[i]);
      p += x.k[i] * P, du += x.k[i] * ds[i], dsp += ds[i] * P;
    }
    const T u = b * (v - a * p);
    const T db = du * (v - a * p);
    T dbeta = T(0), dw = T(0);
    self::write_strength_backward(x.beta, x.w, db, dbeta, dw);
    d.dbeta += dbeta;
    d.dw += dw;
    d.dg[0] += a * (dsp - b * du * p);
    for (index_t i = 0; i < x.K; ++i) {
      d.dk[i] += u * ds[i] - a * b * du * static_cast<T>(prev[i]);
      ds[i] = a * ds[i] - a * b * du * x.k[i];
    }
    return b * du;
  }
};

}  // namespace linstate
