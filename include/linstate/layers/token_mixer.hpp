// linstate/layers/token_mixer.hpp — the token mixer of the SSE layer (SPEC §4.2–4.3, §4.9) as a
// template over a variant: with partition::single and router::dense it is a GLA layer (a GDN layer
// with decay::gated_delta_rule), with partition::routed<N[, shared]> and router::top_k an SSE layer.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "../linstate.hpp"
#include "ops.hpp"
#include "parameter.hpp"

namespace linstate::layers {

namespace layers_detail {

//! The kernel's inputs in double, laid out as linstate::inputs (null: not given).
struct inputs64 {
  const double *q = nullptr, *k = nullptr, *v = nullptr, *g = nullptr, *beta = nullptr;
  const double *sq = nullptr, *sk = nullptr, *sg = nullptr, *sbeta = nullptr, *logits = nullptr;
};

//! \brief The kernel forward of variant `V` entirely in double, on double inputs: the per-token loop
//! of linstate::reference::forward_fp64_router (the function linstate::reference::backward
//! differentiates), with the inputs not rounded to fp32 — so that finite differences of the fp64
//! layer see no fp32 rounding. The write / read sets come from the fp32 router on `in32` (the same
//! inputs rounded; SPEC §11 C1), the router's scores and gate weights from R::weights in double.
//! Returns the balance loss (N/kw)·Σ_n P_n F_n from those scores (0 without routing; SPEC §4.9).
template <class V>
double kernel_forward64(const inputs<float>& in32, const inputs64& in, const options& opt, double* o) {
  using D = typename V::decay;
  using R = typename V::router;
  const auto pb = linstate::detail::make_problem<V>("linstate::layers::token_mixer (fp64 kernel)", in32,
                                                    tensor_view<float>{}, tensor_view<float>{}, "final_state", opt, false);
  const index_t H = pb.H, HV = pb.HV, K = pb.K, Vd = pb.V, N = pb.N, P = pb.P, GW = pb.gate_width(), M = pb.tokens();
  std::vector<std::uint8_t> flags;
  std::vector<double> sc, cw, cr;
  double aux = 0;
  if constexpr (R::routes) {
    linstate::detail::routing rt32;
    linstate::detail::compute_routing(pb, in32, rt32);
    flags = rt32.flags;
    sc.assign(static_cast<std::size_t>(M * N), 0.0), cw = sc, cr = sc;
    std::vector<double> Pn(static_cast<std::size_t>(N), 0.0), Fn = Pn;
    for (index_t t = 0; t < M; ++t) {
      const std::size_t at = static_cast<std::size_t>(t * N);
      R::weights(pb.rcfg(), static_cast<int>(N), in.logits + at, static_cast<const float*>(nullptr), flags.data() + at,
                 sc.data() + at, cw.data() + at, cr.data() + at);
      for (index_t n = 0; n < N; ++n) {
        Pn[static_cast<std::size_t>(n)] += sc[at + static_cast<std::size_t>(n)];
        Fn[static_cast<std::size_t>(n)] += (flags[at + static_cast<std::size_t>(n)] & linstate::detail::route_write) ? 1.0 : 0.0;
      }
    }
    for (index_t n = 0; M > 0 && n < N; ++n)
      aux += Pn[static_cast<std::size_t>(n)] / double(M) * Fn[static_cast<std::size_t>(n)] / double(M);
    aux *= double(N) / double(pb.kw);
  }
  std::fill(o, o + M * HV * Vd, 0.0);
  std::vector<double> h(static_cast<std::size_t>(K * Vd)), q(static_cast<std::size_t>(K)), k(q),
      g(static_cast<std::size_t>(std::max<index_t>(GW, 1)));
  auto load = [&](const double* src, index_t t, index_t hh, std::vector<double>& dst) {
    double ss = 0;
    for (index_t a = 0; a < K; ++a) dst[static_cast<std::size_t>(a)] = src[(t * H + hh) * K + a], ss += dst[static_cast<std::size_t>(a)] * dst[static_cast<std::size_t>(a)];
    if constexpr (D::l2norm_qk) {
      const double r = math::l2_inverse_norm(ss);
      for (double& e : dst) e *= r;
    }
  };
  for (index_t s = 0; s < pb.S; ++s)
    for (index_t hv = 0; hv < HV; ++hv)
      for (index_t p = 0; p < P; ++p) {
        const bool shared = pb.shared && p == 0;
        const index_t n = p - (pb.shared ? 1 : 0), hk = pb.key_head(hv);
        const double *Q = shared ? in.sq : in.q, *Kt = shared ? in.sk : in.k, *G = shared ? in.sg : in.g,
                     *Bt = shared ? in.sbeta : in.beta;
        std::fill(h.begin(), h.end(), 0.0);
        for (index_t t = pb.seq[static_cast<std::size_t>(s)]; t < pb.seq[static_cast<std::size_t>(s + 1)]; ++t) {
          bool w = true, rd = true;
          double gw = 1, gr = 1;
          if (R::routes && !shared) {
            const std::size_t i = static_cast<std::size_t>(t * N + n);
            w = flags[i] & linstate::detail::route_write, rd = flags[i] & linstate::detail::route_read;
            gw = cw[i], gr = cr[i];
          }
          if (w) {
            load(Kt, t, hk, k);
            for (index_t a = 0; a < GW; ++a) g[static_cast<std::size_t>(a)] = G[(t * HV + hv) * GW + a];
            token<double> x;
            x.K = K, x.k = k.data(), x.g = GW ? g.data() : nullptr, x.w = gw;
            if constexpr (D::uses_beta) x.beta = Bt[t * HV + hv];
            for (index_t j = 0; j < Vd; ++j) D::step(x, j, in.v[(t * HV + hv) * Vd + j], column<double>{h.data() + j, Vd});
          }
          if (rd) {
            load(Q, t, hk, q);
            double* ot = o + (t * HV + hv) * Vd;
            for (index_t j = 0; j < Vd; ++j) {
              double acc = 0;
              for (index_t a = 0; a < K; ++a) acc += q[static_cast<std::size_t>(a)] * h[static_cast<std::size_t>(a * Vd + j)];
              ot[j] += static_cast<double>(pb.scale) * gr * acc;
            }
          }
        }
      }
  return aux;
}

}  // namespace layers_detail

//! \brief Sizes and choices of a token_mixer. H query/key heads = H value heads (no GVA yet).
struct mixer_config {
  index_t d_model = 0;    //!< D, the width of x
  index_t num_heads = 0;  //!< H
  index_t head_k = 0;     //!< K, key (and query) width per head
  index_t head_v = 0;     //!< V, value width per head
  index_t gate_rank = 16;         //!< low rank of the log-decay projection (fla's gate_low_rank_dim)
  double gate_normalizer = 16;    //!< τ in g = logsigmoid(z)/τ (fla's gate_logit_normalizer)
  index_t adapter_rank = 0;       //!< r of the shared partition's q/k adapters; 0: head_v (SPEC §4.2)
  feature_map q_map = feature_map::silu;     //!< φ_q (SSE: SiLU)
  feature_map k_map = feature_map::softmax;  //!< φ_k (SSE-GLA: softmax over K; SSE-GDN / GDN: SiLU)
  feature_map v_map = feature_map::silu;     //!< φ_v (SSE: SiLU)
  bool output_gate = true;        //!< y = RMSNorm(o)·w ⊙ SiLU(x W_og); false: y = RMSNorm(o)·w
  index_t output_gate_rank = 0;   //!< 0: W_og [D,H·V] (fla's GLA); r > 0: x W_og1 W_og2, rank r (SSEGLA's g_proj, r = V)
  double norm_eps = 1e-5;         //!< ε of the per-head RMSNorm
  double balance_coefficient = 0.01;  //!< c in loss += c·aux (SPEC §4.9; SSE models use 0.01)
  double init_std = 0.02;         //!< σ of every projection weight (fla's initializer_range)
  index_t short_conv = 0;         //!< W > 0: causal depthwise convolution of width W on x W_q, x W_k, x W_v (fla's
                                  //!< use_short_conv, conv_size 4); 0: none (the SSE authors' default, SPEC §4.1)
  double conv_init_std = -1;      //!< the convolutions' init: N(0, σ²) for σ ≥ 0 (fla's models: σ = init_std);
                                  //!< < 0: PyTorch's Conv1d default U(±1/√W)
  std::uint64_t seed = 0;         //!< the initialisation's seed (with each parameter's name)
  options kernel{};               //!< passed to linstate::forward / backward (scale, dynamic N, kw, kr)
  cpu backend{};                  //!< the CPU backend of the fp32 kernel calls (its thread count)
  //! The fp32 kernel's forward keeps its chunk states for the backward (linstate::saved_states, held by the
  //! layer from forward to backward: HV·K·V·4 / C bytes per token, 8 KiB at H = 8, K = V = 128, C = 64;
  //! only the calls that keep them, see saved_states); false: the backward recomputes them. The same
  //! gradients either way; keeping them made a GLA training step's kernel calls ×0.86–0.93 of the wall
  //! time on 2 threads (docs/benchmarks.md, "Issue 13, session 13").
  bool keep_chunk_states = true;
};

//! \brief The token mixer of one SSE / GLA / GDN layer for variant `V`, forward and backward.
//!
//! For x `[B,T,D]` (M = B·T tokens; every weight is stored `[in, out]`, so a projection is `x W`):
//! \verbatim
//!   q₁ = x W_q, k₁ = x W_k  [M,H·K]      v = φ_v(x W_v)  [M,H·V]                       (SPEC §4.3 step 2)
//!   with short_conv = W > 0:  q₁ = conv_q(x W_q), k₁ = conv_k(x W_k), v = φ_v(conv_v(x W_v)), each a causal
//!                             depthwise convolution along t within each sequence (ops::causal_conv_forward)
//!   with a shared partition:  q₂ = q₁ + (x A_q) B_q,  k₂ = k₁ + (x A_k) B_k  (rank r, no nonlinearity between)
//!   feature maps per head:    q̃ = φ_q(q), k̃ = φ_k(k)   (softmax over K: the paper's k_t = softmax(x_t W_k))
//!   decay, by the policy's gate extent (each partition group — shared / the rest — has its own):
//!     key or value gate (GLA):  g = logsigmoid((x W_g1) W_g2 + b_g) / τ     [M,H·K] or [M,H·V]  (SPEC §4.3 step 6)
//!     head gate (GDN):          g = −exp(A_log) · softplus(x W_a + dt_bias)   [M,H]   (SPEC §4.11)
//!     β (delta rule):           β = σ(x W_b)                                  [M,H]   (SPEC §4.11)
//!   router logits (top_k):     e = x W_r   [M,N]
//!   o = linstate::forward<V>(q̃₂, k̃₂, v, g, β; shared: q̃₁, k̃₁, g_s, β_s; e)    [M,H·V]   (step 8)
//!   per head:  y_h = o_h / sqrt(mean(o_h²) + ε) · w ⊙ SiLU(x W_og)_h               (step 10)
//!              (W_og = W_og1 W_og2 of rank output_gate_rank when it is > 0; no gate when output_gate = false)
//!   out = y W_o   [M,D]
//!   aux = linstate::balance_loss<V>(e)  (top_k routers; SPEC §4.9): the caller adds c·aux to its loss
//! \endverbatim
//! Without a shared partition the routed (or single) partitions read q̃₁, k̃₁ and there are no
//! adapters. The state starts at zero for every sequence (training); no final state is kept.
//!
//! Parameters (fp32 when Real = float; `collect` lists them): W_q, W_k [D,H·K], W_v [D,H·V]; A_q, A_k
//! [D,r], B_q, B_k [r,H·K] (shared only); W_g1 [D,16], W_g2 [16,H·K], b_g [H·K] (key gate) or W_a [D,H],
//! A_log [H], dt_bias [H] (head gate), each again with the suffix `_shared` for the shared partition;
//! W_b [D,H] (β; also W_b_shared); W_r [D,N]; W_og [D,H·V] (or W_og1 [D,r_og], W_og2 [r_og,H·V] with
//! output_gate_rank = r_og); norm_w [V]; W_o [H·V,D]; with short_conv = W: conv_q, conv_k [H·K,W], conv_v [H·V,W].
//!
//! The short convolution follows fla's GLA / GDN layers (q, k and v convolved, no activation of its own:
//! the feature maps follow). It differs from the SSE authors' optional convolution (SPEC §4.3 step 3),
//! which convolves only the shared partition's q₁, k₁ after q₂, k₂ are formed: here the adapters add to
//! the convolved q₁, k₁, so every partition reads convolved keys.
//! Initialisation (as fla's models): weights N(0, init_std²), biases 0, norm_w 1; A_log = log U(0,16),
//! dt_bias = softplus⁻¹(dt), dt log-uniform in [1e-3, 0.1] (clamped ≥ 1e-4).
//!
//! `Real` is float (training: the kernel is linstate::forward / backward on the CPU, the balance loss
//! linstate::balance_loss) or double, for gradient checks: every step in fp64, the kernel forward the
//! per-token loop of linstate::reference::forward_fp64_router on the unrounded double inputs (only
//! the routing *sets* come from the fp32 router), its backward linstate::reference::backward (fp64,
//! on the inputs rounded to fp32: a relative difference of ~1e-7), the balance loss in double from
//! the router's fp64 scores. `Algorithm` and `Strategy` are passed to the fp32 kernel.
//! \code
//!   struct sse_n4k1s : linstate::spec<> { using partition = linstate::partition::routed<4, linstate::partition::shared>;
//!                                         using router = linstate::router::top_k<1>; };
//!   linstate::layers::token_mixer<sse_n4k1s> mix({.d_model = 64, .num_heads = 2, .head_k = 32, .head_v = 32});
//!   float aux = mix.forward(x.view(), y.view());      // x, y [B,T,64]
//!   mix.backward(dy.view(), dx.view());                // adds into every parameter's grad, writes dx
//! \endcode
template <class V, class Real = float, class Algorithm = automatic, class Strategy = varlen>
class token_mixer {
  static_assert(std::is_same_v<Real, float> || std::is_same_v<Real, double>,
                "linstate::layers::token_mixer<V, Real>: Real must be float (training) or double (fp64 gradient checks)");
  static_assert(detail::validate<V>());

 public:
  using variant = V;
  using real = Real;
  using decay = typename V::decay;
  using router = typename V::router;
  using partition = typename V::partition;
  static constexpr bool has_shared = partition::has_shared;
  static constexpr bool routes = router::routes;
  static constexpr gate_extent gate = decay::gate;
  static constexpr bool uses_beta = decay::uses_beta;
  static constexpr bool low_rank_gate = gate == gate_extent::key || gate == gate_extent::value;
  static constexpr bool router_takes_params = [] {
    if constexpr (routes) return router::params_per_partition != 0;
    else return false;
  }();
  static_assert(!router_takes_params,
                "linstate::layers::token_mixer: the router takes router_params, which the layer does not own yet; "
                "use router::top_k (no parameters) or pass the parameters through a router of your own without them");

  explicit token_mixer(const mixer_config& c) : cfg_(c) {
    const std::string api = "linstate::layers::token_mixer";
    auto positive = [&](const char* what, index_t v) {
      if (v < 1) throw error(std::string(api) + ": mixer_config." + what + " = " + std::to_string(v) + ": must be >= 1");
    };
    positive("d_model", c.d_model), positive("num_heads", c.num_heads), positive("head_k", c.head_k);
    positive("head_v", c.head_v);
    if (low_rank_gate) positive("gate_rank", c.gate_rank);
    if (!(c.gate_normalizer > 0)) throw error(std::string(api) + ": mixer_config.gate_normalizer must be > 0");
    if (!(c.norm_eps > 0)) throw error(std::string(api) + ": mixer_config.norm_eps must be > 0");
    if (c.adapter_rank < 0) throw error(std::string(api) + ": mixer_config.adapter_rank must be >= 0 (0: head_v)");
    if (c.short_conv < 0) throw error(std::string(api) + ": mixer_config.short_conv must be >= 0 (0: no convolution)");
    if (c.output_gate_rank < 0) throw error(std::string(api) + ": mixer_config.output_gate_rank must be >= 0 (0: full rank)");
    if constexpr (partition::num_routed == dynamic) {
      if (c.kernel.num_partitions == dynamic || c.kernel.num_partitions < 1)
        throw error(std::string(api) + ": partition::routed<dynamic> needs mixer_config.kernel.num_partitions >= 1");
      N_ = c.kernel.num_partitions;
    } else N_ = partition::num_routed;
    D_ = c.d_model, H_ = c.num_heads, K_ = c.head_k, V_ = c.head_v;
    r_ = c.adapter_rank ? c.adapter_rank : V_;
    GW_ = gate_width(gate, K_, V_);
    conv_w_ = c.short_conv;
    build();
  }

  const mixer_config& config() const { return cfg_; }
  parameter_list<Real>& params() { return p_; }
  //! Appends a named view of every parameter (see parameter.hpp).
  void collect(std::vector<parameter_ref<Real>>& out, const std::string& prefix = "") { p_.collect(out, prefix); }

  //! \brief out `[B,T,D]` from x `[B,T,D]`; returns aux, the unscaled balance loss (0 without a routing
  //! router). Keeps what backward needs until the next forward.
  Real forward(const tensor_view<const Real>& x, const tensor_view<Real>& out) {
    static constexpr const char* api = "linstate::layers::token_mixer::forward";
    if (x.empty() || x.rank() != 3 || x.size(2) != D_)
      throw error(std::string(api) + ": x has shape " + x.shape.str() + " but must be [B,T,D] with D = d_model = " + std::to_string(D_));
    ops::require(api, "out", out, x.shape, "(like x: [B,T,D])");
    B_ = x.size(0), T_ = x.size(1), M_ = B_ * T_;
    const index_t M = M_, HK = H_ * K_, HV = H_ * V_;
    x_.assign(x.data, x.data + M * D_);
    const Real* X = x_.data();
    // q, k (and the shared partition's adapters), v
    for (branch* b : {&q_, &k_}) {
      const index_t rows = M * H_;
      if (conv_w_) {
        ops::matmul(X, p_.value(b->W), sz(b->raw, M * HK), M, D_, HK);
        ops::causal_conv_forward(b->raw.data(), p_.value(b->C), sz(b->p1, M * HK), B_, T_, HK, conv_w_);
      } else ops::matmul(X, p_.value(b->W), sz(b->p1, M * HK), M, D_, HK);
      ops::feature_forward(b->phi, b->p1.data(), sz(b->f1, M * HK), rows, K_);
      if constexpr (has_shared) {
        ops::matmul(X, p_.value(b->A), sz(b->a, M * r_), M, D_, r_);
        b->p2 = b->p1;
        ops::matmul(b->a.data(), p_.value(b->Bm), b->p2.data(), M, r_, HK, /*accumulate=*/true);
        ops::feature_forward(b->phi, b->p2.data(), sz(b->f2, M * HK), rows, K_);
      }
    }
    if (conv_w_) {
      ops::matmul(X, p_.value(Wv_), sz(vraw_, M * HV), M, D_, HV);
      ops::causal_conv_forward(vraw_.data(), p_.value(Cv_), sz(vp_, M * HV), B_, T_, HV, conv_w_);
    } else ops::matmul(X, p_.value(Wv_), sz(vp_, M * HV), M, D_, HV);
    ops::feature_forward(cfg_.v_map, vp_.data(), sz(vf_, M * HV), M * H_, V_);
    gate_forward(main_);
    if constexpr (has_shared) gate_forward(shared_);
    if constexpr (routes) ops::matmul(X, p_.value(Wr_), sz(logits_, M * N_), M, D_, N_);

    // the kernel
    const shape_t qk{B_, T_, H_, K_}, vs{B_, T_, H_, V_}, gs = gate_shape(), hs{B_, T_, H_};
    kin_ = inputs<float>{};
    branch_view(q_, qk, kin_.q, kin_.shared.q);
    branch_view(k_, qk, kin_.k, kin_.shared.k);
    kin_.v = as_kernel(vf_, vf32_, vs);
    if constexpr (gate != gate_extent::none) kin_.g = as_kernel(main_.g, main_.g32, gs);
    if constexpr (uses_beta) kin_.beta = as_kernel(main_.beta, main_.beta32, hs);
    if constexpr (has_shared) {
      if constexpr (gate != gate_extent::none) kin_.shared.g = as_kernel(shared_.g, shared_.g32, gs);
      if constexpr (uses_beta) kin_.shared.beta = as_kernel(shared_.beta, shared_.beta32, hs);
    }
    if constexpr (routes) kin_.router_logits = as_kernel(logits_, logits32_, {B_, T_, N_});
    sz(o_, M * HV);
    if constexpr (std::is_same_v<Real, float>) {
      const auto t0 = std::chrono::steady_clock::now();
      // the final state goes into a buffer of the layer's (not needed here, but without one the
      // kernel call would make a scratch state [S,P,HV,K,V] on every step)
      const shape_t st = linstate::state_shape<V>(kin_, cfg_.kernel);
      state_.resize(static_cast<std::size_t>(st.numel()));
      const outputs<float> out{{o_.data(), vs}, {state_.data(), st}};
      if (cfg_.keep_chunk_states) linstate::forward<V>(cfg_.backend, kin_, out, saved_, Algorithm{}, Strategy{}, cfg_.kernel);
      else linstate::forward<V>(cfg_.backend, kin_, out, Algorithm{}, Strategy{}, cfg_.kernel);
      kernel_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    } else {
      layers_detail::inputs64 in;
      in.q = (has_shared ? q_.f2 : q_.f1).data(), in.k = (has_shared ? k_.f2 : k_.f1).data(), in.v = vf_.data();
      if constexpr (gate != gate_extent::none) in.g = main_.g.data(), in.sg = shared_.g.data();
      if constexpr (uses_beta) in.beta = main_.beta.data(), in.sbeta = shared_.beta.data();
      if constexpr (has_shared) in.sq = q_.f1.data(), in.sk = k_.f1.data();
      if constexpr (routes) in.logits = logits_.data();
      aux64_ = layers_detail::kernel_forward64<V>(kin_, in, cfg_.kernel, o_.data());
    }

    // output gate, per-head RMSNorm, output projection
    const Real *z = nullptr, *sig = nullptr;
    if (cfg_.output_gate) {
      if (cfg_.output_gate_rank) {
        const index_t R = cfg_.output_gate_rank;
        ops::matmul(X, p_.value(Wog_), sz(hog_, M * R), M, D_, R);
        ops::matmul(hog_.data(), p_.value(Wog2_), sz(z_, M * HV), M, R, HV);
      } else ops::matmul(X, p_.value(Wog_), sz(z_, M * HV), M, D_, HV);
      z = z_.data();
      ops::pointwise<Real>(M * HV, sz(sig_, M * HV), z, nullptr, [](const auto& Z, const auto&) { return Z.logistic(); });
      sig = sig_.data();
    }
    ops::rms_norm_forward(o_.data(), p_.value(norm_w_), z, sig, sz(yn_, M * HV), sz(rstd_, M * H_), M * H_, V_,
                          static_cast<Real>(cfg_.norm_eps));
    ops::matmul(yn_.data(), p_.value(Wo_), out.data, M, HV, D_);
    forwarded_ = true;
    if constexpr (!routes) return Real(0);
    else if constexpr (std::is_same_v<Real, float>) return linstate::balance_loss<V>(kin_.router_logits, cfg_.kernel);
    else return aux64_;
  }

  //! \brief Backward of the last forward for the loss L whose gradient at `out` is `dout` `[B,T,D]`,
  //! plus balance_coefficient · aux: adds ∂L/∂θ into every parameter's grad and writes ∂L/∂x into dx.
  void backward(const tensor_view<const Real>& dout, const tensor_view<Real>& dx) {
    static constexpr const char* api = "linstate::layers::token_mixer::backward";
    if (!forwarded_) throw error(std::string(api) + ": no forward call to differentiate (call forward first)");
    const shape_t xs{B_, T_, D_};
    ops::require(api, "dout", dout, xs, "(like the last forward's x: [B,T,D])");
    ops::require(api, "dx", dx, xs, "(like the last forward's x: [B,T,D])");
    const index_t M = M_, HK = H_ * K_, HV = H_ * V_;
    const Real* X = x_.data();
    Real* DX = dx.data;
    // out = yn W_o
    ops::matmul_tn_acc(yn_.data(), dout.data, p_.grad(Wo_), M, HV, D_);
    ops::matmul_nt(dout.data, p_.value(Wo_), sz(dyn_, M * HV), M, HV, D_, false);
    const Real* z = cfg_.output_gate ? z_.data() : nullptr;
    const Real* sig = cfg_.output_gate ? sig_.data() : nullptr;
    ops::rms_norm_backward(o_.data(), p_.value(norm_w_), z, sig, rstd_.data(), dyn_.data(), sz(do_, M * HV), p_.grad(norm_w_),
                           cfg_.output_gate ? sz(dz_, M * HV) : nullptr, M * H_, V_);
    if (cfg_.output_gate && cfg_.output_gate_rank) {
      const index_t R = cfg_.output_gate_rank;
      ops::matmul_tn_acc(hog_.data(), dz_.data(), p_.grad(Wog2_), M, R, HV);
      ops::matmul_nt(dz_.data(), p_.value(Wog2_), sz(dhog_, M * R), M, R, HV, false);
      ops::matmul_tn_acc(X, dhog_.data(), p_.grad(Wog_), M, D_, R);
      ops::matmul_nt(dhog_.data(), p_.value(Wog_), DX, M, D_, R, false);
    } else if (cfg_.output_gate) {
      ops::matmul_tn_acc(X, dz_.data(), p_.grad(Wog_), M, D_, HV);
      ops::matmul_nt(dz_.data(), p_.value(Wog_), DX, M, D_, HV, false);
    } else std::fill(DX, DX + M * D_, Real(0));

    // the kernel's backward: gradients of its inputs
    kernel_backward();
    if constexpr (routes) {
      if (cfg_.balance_coefficient != 0) {
        std::vector<float>& d32 = dlogits32_;
        d32.assign(static_cast<std::size_t>(M * N_), 0.f);
        linstate::balance_loss<V>(kin_.router_logits, tensor_view<float>{d32.data(), {B_, T_, N_}},
                                  static_cast<float>(cfg_.balance_coefficient), gradient_write::overwrite, cfg_.kernel);
        for (index_t i = 0; i < M * N_; ++i) dlogits_[static_cast<std::size_t>(i)] += static_cast<Real>(d32[static_cast<std::size_t>(i)]);
      }
      ops::matmul_tn_acc(X, dlogits_.data(), p_.grad(Wr_), M, D_, N_);
      ops::matmul_nt(dlogits_.data(), p_.value(Wr_), DX, M, D_, N_, true);
    }
    // v
    ops::feature_backward(cfg_.v_map, vp_.data(), vf_.data(), dvf_.data(), sz(dvp_, M * HV), M * H_, V_, false);
    if (conv_w_) {  // dvp_ := d(x W_v) through the convolution
      ops::causal_conv_backward(vraw_.data(), p_.value(Cv_), dvp_.data(), sz(dvraw_, M * HV), p_.grad(Cv_), B_, T_, HV, conv_w_);
      std::swap(dvp_, dvraw_);
    }
    ops::matmul_tn_acc(X, dvp_.data(), p_.grad(Wv_), M, D_, HV);
    ops::matmul_nt(dvp_.data(), p_.value(Wv_), DX, M, D_, HV, true);
    // q, k
    for (branch* b : {&q_, &k_}) {
      const index_t rows = M * H_;
      sz(b->dp1, M * HK);
      if constexpr (has_shared) {
        // d(pre of the routed copy) = φ'(q₂) d(routed input); it flows into q₁ and the adapter
        sz(b->dp2, M * HK);
        ops::feature_backward(b->phi, b->p2.data(), b->f2.data(), b->d2.data(), b->dp2.data(), rows, K_, false);
        ops::matmul_tn_acc(b->a.data(), b->dp2.data(), p_.grad(b->Bm), M, r_, HK);
        ops::matmul_nt(b->dp2.data(), p_.value(b->Bm), sz(b->da, M * r_), M, r_, HK, false);
        ops::matmul_tn_acc(X, b->da.data(), p_.grad(b->A), M, D_, r_);
        ops::matmul_nt(b->da.data(), p_.value(b->A), DX, M, D_, r_, true);
        ops::feature_backward(b->phi, b->p1.data(), b->f1.data(), b->d1.data(), b->dp1.data(), rows, K_, false);
        for (index_t i = 0; i < M * HK; ++i) b->dp1[static_cast<std::size_t>(i)] += b->dp2[static_cast<std::size_t>(i)];
      } else {
        ops::feature_backward(b->phi, b->p1.data(), b->f1.data(), b->d1.data(), b->dp1.data(), rows, K_, false);
      }
      if (conv_w_) {  // dp1 := d(x W) through the convolution
        ops::causal_conv_backward(b->raw.data(), p_.value(b->C), b->dp1.data(), sz(b->draw, M * HK), p_.grad(b->C), B_, T_, HK,
                                  conv_w_);
        std::swap(b->dp1, b->draw);
      }
      ops::matmul_tn_acc(X, b->dp1.data(), p_.grad(b->W), M, D_, HK);
      ops::matmul_nt(b->dp1.data(), p_.value(b->W), DX, M, D_, HK, true);
    }
    gate_backward(main_, DX);
    if constexpr (has_shared) gate_backward(shared_, DX);
  }

  //! The kernel's inputs of the last forward (fp32 views into the layer; valid until the next forward).
  const inputs<float>& kernel_inputs() const { return kin_; }
  //! The kernel's output o `[B,T,H,V]` of the last forward.
  tensor_view<const Real> kernel_output() const { return {o_.data(), {B_, T_, H_, V_}}; }
  //! Seconds in the state kernel's fp32 calls (linstate::forward / backward) since construction or reset_timing().
  double kernel_seconds() const { return kernel_s_; }
  void reset_timing() { kernel_s_ = 0; }
  //! N, the number of routed partitions (1 for partition::single).
  index_t num_partitions() const { return N_; }

 private:
  //! q or k: the projection, the shared partition's adapter and their activations.
  struct branch {
    int W = -1, A = -1, Bm = -1, C = -1;  // C: the short convolution's weights
    feature_map phi = feature_map::identity;
    std::vector<Real> raw, draw;          // x W before the short convolution, and its gradient
    std::vector<Real> p1, p2, a, f1, f2;   // pre-maps (q₁, q₂), x A, post-maps
    std::vector<Real> d1, d2, dp1, dp2, da;  // grads: of f1 (shared or only input), of f2 (routed), of p1, p2, a
    std::vector<float> f1_32, f2_32;
  };
  //! the decay (and β) parameters and activations of one partition group: shared, or the others
  struct gate_group {
    int W1 = -1, W2 = -1, b = -1;        // key / value gate
    int Wa = -1, A_log = -1, dt = -1;    // head gate
    int Wb = -1;                         // β
    std::vector<Real> h, z, g, zb, beta, dg, dbeta, dz, dh;
    std::vector<float> g32, beta32;
  };

  static Real* sz(std::vector<Real>& v, index_t n) {
    v.resize(static_cast<std::size_t>(n));
    return v.data();
  }
  shape_t gate_shape() const {
    if constexpr (gate == gate_extent::head) return {B_, T_, H_};
    else return {B_, T_, H_, GW_};
  }
  //! a fp32 view of a buffer for the kernel (a copy when Real = double)
  static tensor_view<const float> as_kernel(const std::vector<Real>& a, std::vector<float>& f32, shape_t s) {
    if constexpr (std::is_same_v<Real, float>) return {a.data(), s};
    else {
      f32.assign(a.begin(), a.end());
      return {f32.data(), s};
    }
  }
  void branch_view(branch& b, shape_t s, tensor_view<const float>& routed, tensor_view<const float>& shared) {
    if constexpr (has_shared) {
      routed = as_kernel(b.f2, b.f2_32, s);
      shared = as_kernel(b.f1, b.f1_32, s);
    } else routed = as_kernel(b.f1, b.f1_32, s);
  }

  void build() {
    const index_t HK = H_ * K_, HV = H_ * V_;
    const double sd = cfg_.init_std;
    const std::uint64_t seed = cfg_.seed;
    auto weight = [&](const std::string& n, shape_t s) {
      const int i = p_.add(n, s);
      p_.init_normal(i, sd, seed);
      return i;
    };
    q_.phi = cfg_.q_map, k_.phi = cfg_.k_map;
    q_.W = weight("W_q", {D_, HK}), k_.W = weight("W_k", {D_, HK});
    if constexpr (has_shared) {
      q_.A = weight("A_q", {D_, r_}), q_.Bm = weight("B_q", {r_, HK});
      k_.A = weight("A_k", {D_, r_}), k_.Bm = weight("B_k", {r_, HK});
    }
    Wv_ = weight("W_v", {D_, HV});
    if (conv_w_) {
      auto conv = [&](const std::string& n, index_t C) {
        const int i = p_.add(n, {C, conv_w_});
        if (cfg_.conv_init_std >= 0) p_.init_normal(i, cfg_.conv_init_std, seed);
        else p_.init_uniform(i, 1.0 / std::sqrt(static_cast<double>(conv_w_)), seed);
        return i;
      };
      q_.C = conv("conv_q", HK), k_.C = conv("conv_k", HK), Cv_ = conv("conv_v", HV);
    }
    auto gates = [&](gate_group& gg, const std::string& sfx) {
      if constexpr (low_rank_gate) {
        gg.W1 = weight("W_g1" + sfx, {D_, cfg_.gate_rank});
        gg.W2 = weight("W_g2" + sfx, {cfg_.gate_rank, H_ * GW_});
        gg.b = p_.add("b_g" + sfx, {H_ * GW_}, false);
      } else if constexpr (gate == gate_extent::head) {
        gg.Wa = weight("W_a" + sfx, {D_, H_});
        gg.A_log = p_.add("A_log" + sfx, {H_}, false);
        gg.dt = p_.add("dt_bias" + sfx, {H_}, false);
        init_rng ga(seed, "A_log" + sfx), gd(seed, "dt_bias" + sfx);
        for (index_t h = 0; h < H_; ++h) {
          p_.value(gg.A_log)[h] = static_cast<Real>(std::log(16.0 * ga.uniform()));
          const double lo = std::log(1e-3), hi = std::log(0.1);
          const double dt = std::max(std::exp(lo + (hi - lo) * gd.uniform()), 1e-4);
          p_.value(gg.dt)[h] = static_cast<Real>(dt + std::log(-std::expm1(-dt)));  // softplus⁻¹(dt)
        }
      }
      if constexpr (uses_beta) gg.Wb = weight("W_b" + sfx, {D_, H_});
    };
    gates(main_, "");
    if constexpr (has_shared) gates(shared_, "_shared");
    if constexpr (routes) Wr_ = weight("W_r", {D_, N_});
    if (cfg_.output_gate && cfg_.output_gate_rank) {
      Wog_ = weight("W_og1", {D_, cfg_.output_gate_rank});
      Wog2_ = weight("W_og2", {cfg_.output_gate_rank, HV});
    } else if (cfg_.output_gate) Wog_ = weight("W_og", {D_, HV});
    norm_w_ = p_.add("norm_w", {V_}, false);
    p_.fill(norm_w_, Real(1));
    Wo_ = weight("W_o", {HV, D_});
  }

  void gate_forward(gate_group& gg) {
    const index_t M = M_;
    const Real* X = x_.data();
    if constexpr (low_rank_gate) {
      const index_t R = cfg_.gate_rank, W = H_ * GW_;
      ops::matmul(X, p_.value(gg.W1), sz(gg.h, M * R), M, D_, R);
      ops::matmul(gg.h.data(), p_.value(gg.W2), sz(gg.z, M * W), M, R, W);
      const Real* b = p_.value(gg.b);
      const Real tau = static_cast<Real>(cfg_.gate_normalizer);
      sz(gg.g, M * W);
      for (index_t m = 0; m < M; ++m)
        for (index_t j = 0; j < W; ++j) gg.z[static_cast<std::size_t>(m * W + j)] += b[j];
      // logsigmoid(z) = min(z, 0) − log1p(e^{−|z|}), vectorised
      ops::pointwise<Real>(M * W, gg.g.data(), gg.z.data(), nullptr, [tau](const auto& Z, const auto&) {
        return (Z.min(Real(0)) - (-Z.abs()).exp().log1p()) / tau;
      });
    } else if constexpr (gate == gate_extent::head) {
      ops::matmul(X, p_.value(gg.Wa), sz(gg.z, M * H_), M, D_, H_);
      const Real *A = p_.value(gg.A_log), *dt = p_.value(gg.dt);
      sz(gg.g, M * H_);
      for (index_t m = 0; m < M; ++m)
        for (index_t h = 0; h < H_; ++h) {
          Real& zz = gg.z[static_cast<std::size_t>(m * H_ + h)];
          zz += dt[h];
          gg.g[static_cast<std::size_t>(m * H_ + h)] = -std::exp(A[h]) * ops::softplus(zz);
        }
    }
    if constexpr (uses_beta) {
      ops::matmul(X, p_.value(gg.Wb), sz(gg.zb, M * H_), M, D_, H_);
      sz(gg.beta, M * H_);
      for (index_t i = 0; i < M * H_; ++i) gg.beta[static_cast<std::size_t>(i)] = ops::sigmoid(gg.zb[static_cast<std::size_t>(i)]);
    }
  }

  void gate_backward(gate_group& gg, Real* DX) {
    const index_t M = M_;
    const Real* X = x_.data();
    if constexpr (low_rank_gate) {
      const index_t R = cfg_.gate_rank, W = H_ * GW_;
      const Real tau = static_cast<Real>(cfg_.gate_normalizer);
      Real* db = p_.grad(gg.b);
      sz(gg.dz, M * W);
      // d logsigmoid(z) / dz = σ(−z)
      ops::pointwise<Real>(M * W, gg.dz.data(), gg.z.data(), gg.dg.data(),
                           [tau](const auto& Z, const auto& DG) { return DG * (-Z).logistic() / tau; });
      for (index_t m = 0; m < M; ++m)
        for (index_t j = 0; j < W; ++j) db[j] += gg.dz[static_cast<std::size_t>(m * W + j)];
      ops::matmul_tn_acc(gg.h.data(), gg.dz.data(), p_.grad(gg.W2), M, R, W);
      ops::matmul_nt(gg.dz.data(), p_.value(gg.W2), sz(gg.dh, M * R), M, R, W, false);
      ops::matmul_tn_acc(X, gg.dh.data(), p_.grad(gg.W1), M, D_, R);
      ops::matmul_nt(gg.dh.data(), p_.value(gg.W1), DX, M, D_, R, true);
    } else if constexpr (gate == gate_extent::head) {
      const Real* A = p_.value(gg.A_log);
      Real *dA = p_.grad(gg.A_log), *ddt = p_.grad(gg.dt);
      sz(gg.dz, M * H_);
      for (index_t m = 0; m < M; ++m)
        for (index_t h = 0; h < H_; ++h) {
          const std::size_t i = static_cast<std::size_t>(m * H_ + h);
          dA[h] += gg.dg[i] * gg.g[i];  // ∂g/∂A_log = g
          gg.dz[i] = -gg.dg[i] * std::exp(A[h]) * ops::sigmoid(gg.z[i]);
          ddt[h] += gg.dz[i];
        }
      ops::matmul_tn_acc(X, gg.dz.data(), p_.grad(gg.Wa), M, D_, H_);
      ops::matmul_nt(gg.dz.data(), p_.value(gg.Wa), DX, M, D_, H_, true);
    }
    if constexpr (uses_beta) {
      std::vector<Real>& dzb = gg.dh;  // reuse
      sz(dzb, M * H_);
      for (index_t i = 0; i < M * H_; ++i) {
        const std::size_t u = static_cast<std::size_t>(i);
        dzb[u] = gg.dbeta[u] * gg.beta[u] * (Real(1) - gg.beta[u]);
      }
      ops::matmul_tn_acc(X, dzb.data(), p_.grad(gg.Wb), M, D_, H_);
      ops::matmul_nt(dzb.data(), p_.value(gg.Wb), DX, M, D_, H_, true);
    }
  }

  //! Gradients of the kernel's inputs into d1/d2 (q, k), dvf_, the groups' dg/dbeta and dlogits_.
  void kernel_backward() {
    const index_t M = M_, HK = H_ * K_, HV = H_ * V_;
    const shape_t qk{B_, T_, H_, K_}, vs{B_, T_, H_, V_}, gs = gate_shape(), hs{B_, T_, H_}, ls{B_, T_, N_};
    auto& qmain = has_shared ? q_.d2 : q_.d1;
    auto& kmain = has_shared ? k_.d2 : k_.d1;
    sz(qmain, M * HK), sz(kmain, M * HK), sz(dvf_, M * HV);
    const index_t gn = gate == gate_extent::none ? 0 : gs.numel();
    sz(main_.dg, gn), sz(shared_.dg, has_shared ? gn : 0);
    sz(main_.dbeta, uses_beta ? M * H_ : 0), sz(shared_.dbeta, has_shared && uses_beta ? M * H_ : 0);
    if constexpr (has_shared) sz(q_.d1, M * HK), sz(k_.d1, M * HK);
    sz(dlogits_, routes ? M * N_ : 0);
    if constexpr (std::is_same_v<Real, float>) {
      gradients<float> gr;
      gr.q = {qmain.data(), qk}, gr.k = {kmain.data(), qk}, gr.v = {dvf_.data(), vs};
      if constexpr (gate != gate_extent::none) gr.g = {main_.dg.data(), gs};
      if constexpr (uses_beta) gr.beta = {main_.dbeta.data(), hs};
      if constexpr (has_shared) {
        gr.shared.q = {q_.d1.data(), qk}, gr.shared.k = {k_.d1.data(), qk};
        if constexpr (gate != gate_extent::none) gr.shared.g = {shared_.dg.data(), gs};
        if constexpr (uses_beta) gr.shared.beta = {shared_.dbeta.data(), hs};
      }
      if constexpr (routes) gr.router_logits = {dlogits_.data(), ls};
      const auto t0 = std::chrono::steady_clock::now();
      const cotangents<float> d{.o = {do_.data(), vs}};
      if (cfg_.keep_chunk_states) linstate::backward<V>(cfg_.backend, kin_, d, gr, saved_, Algorithm{}, Strategy{}, cfg_.kernel);
      else linstate::backward<V>(cfg_.backend, kin_, d, gr, Algorithm{}, Strategy{}, cfg_.kernel);
      kernel_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    } else {
      do32_.assign(do_.begin(), do_.end());
      const reference::gradient r =
          reference::backward<V>(kin_, cotangents<float>{.o = {do32_.data(), vs}}, cfg_.kernel);
      auto put = [](const tensor<double>& from, std::vector<Real>& to) {
        if (!from.empty()) std::copy(from.values().begin(), from.values().end(), to.begin());
      };
      put(r.q, qmain), put(r.k, kmain), put(r.v, dvf_);
      if constexpr (gate != gate_extent::none) put(r.g, main_.dg);
      if constexpr (uses_beta) put(r.beta, main_.dbeta);
      if constexpr (has_shared) {
        put(r.shared.q, q_.d1), put(r.shared.k, k_.d1);
        if constexpr (gate != gate_extent::none) put(r.shared.g, shared_.dg);
        if constexpr (uses_beta) put(r.shared.beta, shared_.dbeta);
      }
      if constexpr (routes) put(r.router_logits, dlogits_);
    }
  }

  mixer_config cfg_;
  parameter_list<Real> p_;
  index_t D_ = 0, H_ = 0, K_ = 0, V_ = 0, N_ = 1, r_ = 0, GW_ = 0, conv_w_ = 0;
  index_t B_ = 0, T_ = 0, M_ = 0;
  bool forwarded_ = false;
  double kernel_s_ = 0;
  double aux64_ = 0;  // Real = double: the balance loss from the fp64 router scores
  branch q_, k_;
  gate_group main_, shared_;
  int Wv_ = -1, Cv_ = -1, Wr_ = -1, Wog_ = -1, Wog2_ = -1, norm_w_ = -1, Wo_ = -1;
  std::vector<Real> vraw_, dvraw_;  // x W_v before the short convolution, and its gradient
  std::vector<Real> x_, vp_, vf_, logits_, o_, hog_, z_, sig_, yn_, rstd_;
  std::vector<Real> dyn_, do_, dhog_, dz_, dvf_, dvp_, dlogits_;
  std::vector<float> vf32_, logits32_, dlogits32_, do32_;
  std::vector<float> state_;  //!< the kernel's final state [S,P,HV,K,V] (fp32 forward; not read)
  saved_states saved_;        //!< the kernel's chunk states, kept for the backward (mixer_config::keep_chunk_states)
  inputs<float> kin_{};
};

}  // namespace linstate::layers
