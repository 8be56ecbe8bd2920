// examples/custom/policies.hpp — four policies written as a user would: one struct each, public
// linstate headers only, no library file touched. Every function is a LINSTATE_HOST_DEVICE template
// on the number type, so the CPU backend runs it in float, the fp64 reference in double, and the
// same file compiles in a .cu translation unit for the GPU. examples/custom/custom.cpp checks them.
#pragma once

#include <linstate/linstate.hpp>

#include <cmath>
#include <cstdint>
#include <string>

namespace custom {

using linstate::column;
using linstate::index_t;
using linstate::token;
using linstate::token_grad;

// ------------------------------------------------------------------------------------------------
//! \brief Per-value-channel decay: the state decays along its value columns instead of its key rows,
//! as fla's value gate `gv` of `fused_recurrent_gla` (SPEC §2.2: "multiplies state columns"). Per
//! token t, value head, column j of the K×V state:
//! \verbatim
//!   s_j ← e^{gv_{t,j}} s_j + w k_t v_{t,j}        gv: [B,T,HV,V] log-decays ≤ 0, w: router write weight
//!   adjoint (ds = ∂L/∂s_j after, P = s_j before, a = e^{gv_j}, kds = ⟨k, ds⟩):
//!     ∂v_j = w kds   ∂k += w v_j ds   ∂w += v_j kds   ∂gv_j += a ⟨ds, P⟩   ds ← a ds
//! \endverbatim
//! Not diagonal over the key rows, so family::recurrent_only (linstate runs it token by token).
//! \code
//! struct gla_v : linstate::spec<> { using decay = custom::per_value_decay; };
//! linstate::inputs<float> in{.q = q.view(), .k = k.view(), .v = v.view(), .g = gv.view()};  // gv [B,T,HV,V]
//! auto [o, ht] = linstate::forward<gla_v>(linstate::cpu{}, in, linstate::recurrent{});
//! \endcode
struct per_value_decay {
  using family = linstate::family::recurrent_only;
  static constexpr linstate::gate_extent gate = linstate::gate_extent::value;
  static constexpr bool uses_beta = false;
  static constexpr bool l2norm_qk = false;
  static constexpr const char* name = "decay::per_value (custom)";

  template <class T>
  LINSTATE_HOST_DEVICE static void step(const token<T>& x, index_t j, T v, column<T> s) {
    using linstate::math::exp;
    const T a = exp(x.g[j]), wv = x.w * v;
    for (index_t i = 0; i < x.K; ++i) s[i] = a * s[i] + x.k[i] * wv;
  }

  template <class T, class C>
  LINSTATE_HOST_DEVICE static T step_adjoint(const token<T>& x, index_t j, T v, column<C> prev, column<T> ds,
                                             token_grad<T>& d) {
    using linstate::math::exp;
    const T a = exp(x.g[j]);
    T kds = T(0), dsp = T(0);
    for (index_t i = 0; i < x.K; ++i) {
      kds += x.k[i] * ds[i];
      dsp += ds[i] * static_cast<T>(prev[i]);
      d.dk[i] += x.w * v * ds[i];
      ds[i] *= a;
    }
    d.dg[j] += a * dsp;
    d.dw += v * kds;
    return x.w * kds;  // ∂L/∂v_j
  }
};

// ------------------------------------------------------------------------------------------------
//! \brief Kimi Delta Attention (KDA; Kimi Team 2025, "Kimi Linear: An Expressive, Efficient Attention
//! Architecture"; fla's `chunk_kda`):
//! the gated delta rule (SPEC §3.1) with a per-key decay. Per token t and value head:
//! \verbatim
//!   S_t = (I − b k̂ k̂ᵀ) diag(e^{g_t}) S_{t−1} + b k̂ v_tᵀ,   b = β_t w (the router's write weight
//!   scales β, as SPEC §11 C9 for the gated delta rule), g: [B,T,HV,K] ≤ 0, β: [B,T,HV]
//!   one column:   P' = e^{g} ⊙ P,  p = ⟨k̂, P'⟩,  u = b (v_j − p),  s_j = P' + k̂ u
//!   adjoint:      du = ⟨k̂, ds⟩   ∂v_j = b du   db = du (v_j − p)   ∂β += w db   ∂w += β db
//!                 dP' = ds − b du k̂   ∂k̂ += u ds − b du P'   ∂g += dP' ⊙ P'   ds ← e^{g} ⊙ dP'
//! \endverbatim
//! With L2Norm, q and k are l2-normalised (k̂ = k/√(Σk² + 1e-6)); the backend chains the norm.
//! \code
//! struct kda_attn : linstate::spec<> { using decay = custom::kda<true>; };
//! linstate::inputs<float> in{.q = q.view(), .k = k.view(), .v = v.view(), .g = g.view(), .beta = beta.view()};
//! auto [o, ht] = linstate::forward<kda_attn>(linstate::cpu{}, in);   // automatic: runs it recurrently
//! \endcode
template <bool L2Norm = true>
struct kda {
  using family = linstate::family::recurrent_only;
  static constexpr linstate::gate_extent gate = linstate::gate_extent::key;
  static constexpr bool uses_beta = true;
  static constexpr bool l2norm_qk = L2Norm;
  static constexpr const char* name = L2Norm ? "decay::kda<l2norm> (custom)" : "decay::kda (custom)";

  template <class T>
  LINSTATE_HOST_DEVICE static void step(const token<T>& x, index_t /*j*/, T v, column<T> s) {
    using linstate::math::exp;
    const T b = x.beta * x.w;
    T p = T(0);
    for (index_t i = 0; i < x.K; ++i) s[i] = exp(x.g[i]) * s[i], p += x.k[i] * s[i];
    const T u = b * (v - p);
    for (index_t i = 0; i < x.K; ++i) s[i] += x.k[i] * u;
  }

  template <class T, class C>
  LINSTATE_HOST_DEVICE static T step_adjoint(const token<T>& x, index_t /*j*/, T v, column<C> prev, column<T> ds,
                                             token_grad<T>& d) {
    using linstate::math::exp;
    const T b = x.beta * x.w;
    T p = T(0), du = T(0);
    for (index_t i = 0; i < x.K; ++i) p += x.k[i] * exp(x.g[i]) * static_cast<T>(prev[i]), du += x.k[i] * ds[i];
    const T u = b * (v - p), db = du * (v - p);
    d.dbeta += x.w * db;
    d.dw += x.beta * db;
    for (index_t i = 0; i < x.K; ++i) {
      const T a = exp(x.g[i]), Pd = a * static_cast<T>(prev[i]), dPd = ds[i] - b * du * x.k[i];
      d.dk[i] += u * ds[i] - b * du * Pd;
      d.dg[i] += dPd * Pd;
      ds[i] = a * dPd;
    }
    return b * du;  // ∂L/∂v_j
  }
};

// ------------------------------------------------------------------------------------------------
//! \brief Fractional delta rule: under a routed partition, a write of weight w applies the delta
//! rule's contraction w times. For a unit key, (I − β k̂k̂ᵀ)^w = I − (1 − (1 − β)^w) k̂k̂ᵀ, so it is
//! the gated delta rule (SPEC §3.1) with another write strength in place of the shipped β·w (§11 C9):
//! \verbatim
//!   b(β, w) = 1 − (1 − β)^w        b(β, 1) = β (one partition, or a dense router: plain GDN)
//!   ∂b/∂β = w (1 − β)^{w−1}        ∂b/∂w = −(1 − β)^w ln(1 − β)           β ∈ [0, 1) (a sigmoid)
//! \endverbatim
//! family::delta, so the chunked WY kernels run it: a delta policy varies only in its write strength,
//! and deriving with itself as `Self` makes the inherited step / step_adjoint and every kernel call
//! this pair.
//! \code
//! struct sse_frac : linstate::spec<> { using partition = linstate::partition::routed<4, linstate::partition::shared>;
//!                                      using router = linstate::router::top_k<1>; using decay = custom::fractional_delta<>; };
//! auto [o, ht] = linstate::forward<sse_frac>(linstate::cpu{}, in);   // in.beta = sigmoid(...) [B,T,HV]
//! \endcode
template <bool L2Norm = true>
struct fractional_delta : linstate::delta_transition<L2Norm, fractional_delta<L2Norm>> {
  static constexpr const char* name = L2Norm ? "decay::fractional_delta<l2norm> (custom)" : "decay::fractional_delta (custom)";

  template <class T>
  LINSTATE_HOST_DEVICE static T write_strength(T beta, T w) {
    using linstate::math::exp;
    using std::log;
    return T(1) - exp(w * log(T(1) - beta));
  }
  template <class T>
  LINSTATE_HOST_DEVICE static void write_strength_backward(T beta, T w, T db, T& dbeta, T& dw) {
    using linstate::math::exp;
    using std::log;
    const T l = log(T(1) - beta), r = exp(w * l);  // ln(1 − β), (1 − β)^w
    dbeta = db * w * r / (T(1) - beta);
    dw = -db * r * l;
  }
};

// ------------------------------------------------------------------------------------------------
//! \brief Sigmoid top-k router with a selection bias (auxiliary-loss-free load balancing: Wang et al.
//! 2024, arXiv 2408.15664; DeepSeek-V3, arXiv 2412.19437). Per token, over N partitions:
//! \verbatim
//!   p_n = σ(η_n)                      scores (logits η: router_logits [B,T,N])
//!   W = R = top-K of p_n + b_n        b = router_params [N], selection only; ties to the lowest index
//!   c_n = p_n (or p_n / Σ_{m∈W} p_m with Renormalize) for n ∈ W, 0 elsewhere: write and read weight
//!   backward: dp_n = dc_n (renormalised: dc_n/S − Σ_m dc_m p_m/S²), dη_n = dp_n p_n (1 − p_n)
//! \endverbatim
//! b is not differentiated (it is updated outside the gradient, from the observed load).
//! \code
//! struct sse_sig : linstate::spec<> { using partition = linstate::partition::routed<4, linstate::partition::shared>;
//!                                     using router = custom::sigmoid_top_k<1>; };
//! in.router_logits = eta.view(), in.router_params = bias.view();   // bias [N] fp32
//! \endcode
template <int K, bool Renormalize = false>
struct sigmoid_top_k {
  static_assert(K >= 1, "custom::sigmoid_top_k<K> needs K >= 1");
  static constexpr bool routes = true;
  static constexpr int num_writer = K, num_reader = K, params_per_partition = 1;
  static constexpr const char* name = "router::sigmoid_top_k (custom)";
  struct config {
    int kw = K, kr = K;
  };
  template <class Opt>
  static config configure(const Opt& o, index_t N, const std::string& api, bool /*balance*/ = false) {
    const auto fixed = [](int given) { return given == linstate::dynamic || given == K; };
    if (!fixed(o.num_writer) || !fixed(o.num_reader) || o.gates)
      throw linstate::error(api + ": sigmoid_top_k<" + std::to_string(K) + "> fixes kw = kr = K and its gates");
    if (K > N) throw linstate::error(api + ": sigmoid_top_k<" + std::to_string(K) + "> needs N >= K");
    return {};
  }
  //! scores p, and the weights cw = cr of given flags f (the fp64 reference calls it in double)
  template <class T>
  LINSTATE_HOST_DEVICE static void weights(const config&, int N, const T* x, const float* /*b*/, const std::uint8_t* f,
                                           T* p, T* cw, T* cr) {
    using linstate::math::exp;
    T S = T(0);
    for (int n = 0; n < N; ++n) p[n] = T(1) / (T(1) + exp(-x[n])), S += f[n] ? p[n] : T(0);
    for (int n = 0; n < N; ++n) cw[n] = cr[n] = f[n] ? (Renormalize ? p[n] / S : p[n]) : T(0);
  }
  template <class T, class Round>
  LINSTATE_HOST_DEVICE static void route(const config& c, int N, const T* x, const float* b, T* p, T* cw, T* cr,
                                         std::uint8_t* f, Round) {
    using linstate::math::exp;
    constexpr std::uint8_t both = linstate::detail::route_write | linstate::detail::route_read;
    for (int n = 0; n < N; ++n) cw[n] = T(1) / (T(1) + exp(-x[n])) + static_cast<T>(b[n]);  // cw as scratch
    for (int n = 0; n < N; ++n) f[n] = linstate::detail::in_top_k(cw, N, c.kw, n) ? both : std::uint8_t(0);
    weights(c, N, x, b, f, p, cw, cr);
  }
  template <class T, class P>
  LINSTATE_HOST_DEVICE static void weights_backward(const config&, int N, const T* /*x*/, const float* /*b*/,
                                                    const P* p, const std::uint8_t* f, const T* dcw, const T* dcr,
                                                    T* dx, T* /*work*/) {
    T S = T(0), cross = T(0);  // the write and read sets are one set: dc = dcw + dcr
    for (int n = 0; n < N; ++n)
      if (f[n]) S += static_cast<T>(p[n]), cross += (dcw[n] + dcr[n]) * static_cast<T>(p[n]);
    for (int n = 0; n < N; ++n) {
      const T pn = static_cast<T>(p[n]), dc = dcw[n] + dcr[n];
      const T dp = !f[n] ? T(0) : Renormalize ? dc / S - cross / (S * S) : dc;
      dx[n] = dp * pn * (T(1) - pn);
    }
  }
  static std::string describe() {
    return "sigmoid_top_k<" + std::to_string(K) + "> bias" + (Renormalize ? " renormalize" : "");
  }
};

}  // namespace custom
