// linstate/testing/inputs.hpp — owned fp32 inputs of one call, and random ones for any variant.
//
// For tests of a user's own policies (and linstate::testing::check_gradients): `owned_inputs` owns a
// copy of every tensor an `inputs<float>` may hold and gives a view of them; `random_inputs<Spec>()`
// draws every input the variant takes — the gate of the decay policy's gate_extent (none, head, key
// or value), β when it uses_beta, the shared partition's own q, k, g, β, router logits and the
// router's `router_params` — with the distributions of linstate's own tests (SPEC §9.3):
// \code
//   #include <linstate/testing/inputs.hpp>
//   auto data = linstate::testing::random_inputs<my_variant>({.B = 2, .T = 20, .H = 1, .HV = 2, .K = 8, .V = 6}, 42);
//   auto r = linstate::forward<my_variant>(linstate::cpu{}, data.view());
// \endcode
// Distributions: q, k, v, the initial state ~ N(0,1); log-decays g = logsigmoid(z)/gate_normalizer
// (z ~ N(0,1)); β = σ(z); router logits per token a random permutation of gap·(n − (N−1)/2) plus
// noise in ±gap/4, redrawn until the router's selection does not change when any one logit moves by
// ±router_margin (so finite differences and other backends see the same sets); router_params
// uniform in ±param_scale. Keys are rescaled to unit norm for a policy with β and without l2
// normalisation (a delta-rule step I − β k kᵀ is a contraction only for β|k|² ≤ 2).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../linstate.hpp"

namespace linstate::testing {

//! \brief Owned copies of the fp32 inputs of one call (an empty tensor = an input not given).
struct owned_inputs {
  tensor<float> q, k, v, g, beta;
  struct {
    tensor<float> q, k, g, beta;
  } shared;
  tensor<float> router_logits, router_params, initial_state;
  std::vector<std::int64_t> cu_seqlens;

  owned_inputs() = default;
  //! Copies every tensor of `in`.
  explicit owned_inputs(const inputs<float>& in) {
    auto copy = [](const auto& t) {
      return t.empty() ? tensor<float>() : tensor<float>(t.shape, std::vector<float>(t.data, t.data + t.numel()));
    };
    q = copy(in.q), k = copy(in.k), v = copy(in.v), g = copy(in.g), beta = copy(in.beta);
    shared.q = copy(in.shared.q), shared.k = copy(in.shared.k), shared.g = copy(in.shared.g);
    shared.beta = copy(in.shared.beta);
    router_logits = copy(in.router_logits), router_params = copy(in.router_params);
    initial_state = copy(in.initial_state);
    cu_seqlens.assign(in.cu_seqlens.begin(), in.cu_seqlens.end());
  }

  //! Views of the owned tensors (valid while *this lives and its tensors are not reassigned).
  inputs<float> view() const {
    auto vw = [](const tensor<float>& t) { return t.empty() ? tensor_view<const float>{} : t.view(); };
    inputs<float> in;
    in.q = vw(q), in.k = vw(k), in.v = vw(v), in.g = vw(g), in.beta = vw(beta);
    in.shared = {vw(shared.q), vw(shared.k), vw(shared.g), vw(shared.beta)};
    in.router_logits = vw(router_logits), in.router_params = vw(router_params);
    in.initial_state = vw(initial_state);
    in.cu_seqlens = std::span<const std::int64_t>(cu_seqlens.data(), cu_seqlens.size());
    return in;
  }

  //! The differentiable inputs by name, in the order of linstate::gradient_result (initial_state last).
  std::vector<std::pair<std::string, tensor<float>*>> differentiable() {
    return {{"q", &q},
            {"k", &k},
            {"v", &v},
            {"g", &g},
            {"beta", &beta},
            {"shared.q", &shared.q},
            {"shared.k", &shared.k},
            {"shared.g", &shared.g},
            {"shared.beta", &shared.beta},
            {"router_logits", &router_logits},
            {"initial_state", &initial_state}};
  }
};

//! Problem sizes (SPEC §1.1). With `cu_seqlens` B must be 1 and T is taken from its last offset.
struct sizes {
  index_t B = 2, T = 16, H = 1, HV = 2, K = 8, V = 6;
  std::vector<std::int64_t> cu_seqlens{};
};

//! How random_inputs draws (see the file comment).
struct random_options {
  bool initial_state = true;
  float gate_normalizer = 2.f;   //!< g = logsigmoid(z) / gate_normalizer (smaller: stronger decays)
  float router_gap = 1.f;        //!< spacing of the router logits of one token
  float router_margin = 0.05f;   //!< the selection must survive moving one logit by ±this (0: no check)
  float param_scale = 0.25f;     //!< router_params ~ U(−param_scale, param_scale)
  float key_norm = -1.f;         //!< > 0: keys rescaled to this norm; 0: never; < 0: automatic (see above)
};

//! \brief Random inputs of variant `Spec` (every tensor it takes, nothing else), reproducible from `seed`.
//! `opt` supplies what a dynamic partition count needs (options.num_partitions) and the router's settings.
template <class Spec>
owned_inputs random_inputs(sizes d, std::uint64_t seed, const random_options& ro = {}, const options& opt = {}) {
  static_assert(detail::validate<Spec>());
  using D = typename Spec::decay;
  using R = typename Spec::router;
  using P = typename Spec::partition;
  if (!d.cu_seqlens.empty()) {
    if (d.B != 1) throw error("linstate::testing::random_inputs: cu_seqlens needs B = 1");
    d.T = static_cast<index_t>(d.cu_seqlens.back());
  }
  index_t N = 1;
  if constexpr (!P::is_single) N = P::num_routed == dynamic ? opt.num_partitions : P::num_routed;
  if (N < 1) throw error("linstate::testing::random_inputs: partition::routed<dynamic> needs options.num_partitions");
  const index_t S = d.cu_seqlens.empty() ? d.B : static_cast<index_t>(d.cu_seqlens.size()) - 1;
  const index_t Pn = N + (P::has_shared ? 1 : 0);

  std::mt19937_64 gen(seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull);
  std::normal_distribution<float> nd;
  auto normal = [&](const shape_t& s) {
    tensor<float> t(s);
    for (float& x : t.values()) x = nd(gen);
    return t;
  };
  const float key_norm = ro.key_norm >= 0.f ? ro.key_norm : (D::uses_beta && !D::l2norm_qk) ? 1.f : 0.f;
  auto keys = [&](const shape_t& s) {
    tensor<float> t = normal(s);
    if (key_norm > 0.f)
      for (index_t r = 0; r < t.numel() / d.K; ++r) {
        double n2 = 0;
        for (index_t a = 0; a < d.K; ++a) n2 += double(t[r * d.K + a]) * t[r * d.K + a];
        for (index_t a = 0; a < d.K; ++a) t.data()[r * d.K + a] *= key_norm / static_cast<float>(std::sqrt(n2) + 1e-12);
      }
    return t;
  };
  const index_t GW = gate_width(D::gate, d.K, d.V);
  auto gates = [&] {
    if constexpr (D::gate == gate_extent::none) return tensor<float>();
    else {
      tensor<float> t(D::gate == gate_extent::head ? shape_t{d.B, d.T, d.HV} : shape_t{d.B, d.T, d.HV, GW});
      for (float& x : t.values()) {
        const double z = nd(gen);  // logsigmoid(z), stable
        x = static_cast<float>((z < 0 ? z - std::log1p(std::exp(z)) : -std::log1p(std::exp(-z))) / ro.gate_normalizer);
      }
      return t;
    }
  };
  auto betas = [&] {
    tensor<float> t({d.B, d.T, d.HV});
    for (float& x : t.values()) x = 1.f / (1.f + std::exp(-nd(gen)));
    return t;
  };

  owned_inputs r;
  r.cu_seqlens = d.cu_seqlens;
  const shape_t qk{d.B, d.T, d.H, d.K};
  r.q = normal(qk), r.k = keys(qk), r.v = normal({d.B, d.T, d.HV, d.V}), r.g = gates();
  if constexpr (D::uses_beta) r.beta = betas();
  if constexpr (P::has_shared) {
    r.shared.q = normal(qk), r.shared.k = keys(qk), r.shared.g = gates();
    if constexpr (D::uses_beta) r.shared.beta = betas();
  }
  if constexpr (R::routes) {
    if constexpr (R::params_per_partition > 0) {
      r.router_params = tensor<float>(R::params_per_partition == 1 ? shape_t{N} : shape_t{N, R::params_per_partition});
      std::uniform_real_distribution<float> ud(-ro.param_scale, ro.param_scale);
      for (float& x : r.router_params.values()) x = ud(gen);
    }
    const auto cfg = R::configure(opt, N, "linstate::testing::random_inputs");
    const float* prm = r.router_params.empty() ? nullptr : r.router_params.data();
    std::vector<float> row(static_cast<std::size_t>(N)), p(row.size()), cw(row.size()), cr(row.size());
    std::vector<std::uint8_t> f0(row.size()), f1(row.size());
    auto flags = [&](std::vector<std::uint8_t>& f) {
      R::route(cfg, static_cast<int>(N), row.data(), prm, p.data(), cw.data(), cr.data(), f.data(), detail::no_round{});
    };
    auto stable = [&] {  // the selection survives moving any one logit by ±margin
      if (ro.router_margin <= 0.f) return true;
      flags(f0);
      for (std::size_t n = 0; n < row.size(); ++n)
        for (const float off : {-ro.router_margin, ro.router_margin}) {
          const float x0 = row[n];
          row[n] = x0 + off, flags(f1), row[n] = x0;
          if (f1 != f0) return false;
        }
      return true;
    };
    r.router_logits = tensor<float>({d.B, d.T, N});
    std::uniform_real_distribution<float> noise(-ro.router_gap / 4, ro.router_gap / 4);
    std::vector<index_t> perm(static_cast<std::size_t>(N));
    for (index_t t = 0; t < d.B * d.T; ++t) {
      for (int attempt = 0; attempt < 1000; ++attempt) {
        for (index_t n = 0; n < N; ++n) perm[static_cast<std::size_t>(n)] = n;
        std::shuffle(perm.begin(), perm.end(), gen);
        const float mid = 0.5f * static_cast<float>(N - 1);
        for (std::size_t n = 0; n < row.size(); ++n)
          row[n] = ro.router_gap * (static_cast<float>(perm[n]) - mid) + noise(gen);
        if (stable()) break;
      }
      std::copy(row.begin(), row.end(), r.router_logits.data() + t * N);
    }
  }
  if (ro.initial_state) r.initial_state = normal({S, Pn, d.HV, d.K, d.V});
  return r;
}

}  // namespace linstate::testing
