// examples/custom/check_custom.hpp — the checks of the four user policies of policies.hpp, written
// once and templated on the backend runner (linstate::testing::cpu_runner here; a runner that copies
// to and from a GPU makes the same checks run on linstate::cuda). custom.cpp prints them and exits
// non-zero on a mismatch; tests/variants/test_custom_policies.cpp runs them under doctest (and the
// sanitizers).
//
// For each policy, on two layouts — B = 2 batch rows, and B = 1 with packed cu_seqlens {0,0,12,13,24}
// (an empty sequence, a one-token one) — with an initial state and a final-state cotangent:
//  - linstate::testing::check_gradients: reference::backward (the policy's own adjoint in fp64)
//    against fp64 finite differences of reference::forward, and the backend's forward and backward,
//    mask and varlen, against the fp64 reference (tolerances in linstate/testing/gradcheck.hpp);
//  - an independent identity, so the reference is not only compared with itself:
//      per_value_decay with gv_{t,j} = c_t for every j  ≡  decay::scalar with g_t = c_t
//      kda with g_{t,i} = c_t for every i                ≡  decay::gated_delta_rule with g_t = c_t
//      fractional_delta on one partition (w = 1)          ≡  decay::gated_delta_rule (recurrent and chunked)
//    and fractional_delta's write_strength_backward against central differences of its write_strength;
//    (outputs, states and gradients; the gate gradient of the scalar one = the sum over the channels);
//  - the router: its rule on hand-made tokens (bias in the selection, not in the weights, ties to the
//    lowest index, renormalisation), the bias changes the selection of some random tokens, and it runs
//    over GLA under recurrent and chunked<16> (routing is independent of the transition) and over KDA.
#pragma once

#include <linstate/testing/gradcheck.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "policies.hpp"

namespace custom_check {

namespace ls = linstate;
namespace lt = linstate::testing;
using ls::index_t;

// --- the variants (one line each, as a user writes them) ----------------------------------------
struct gla_v : ls::spec<> { using decay = custom::per_value_decay; };
struct kda_attn : ls::spec<> { using decay = custom::kda<true>; };
struct kda_raw : ls::spec<> { using decay = custom::kda<false>; };  // no l2 norm (unit-norm keys)
struct sse_sig : ls::spec<> {
  using partition = ls::partition::routed<4, ls::partition::shared>;
  using router = custom::sigmoid_top_k<2>;
};
struct sse_sig_renorm : sse_sig { using router = custom::sigmoid_top_k<2, true>; };
struct sse_sig_kda : sse_sig { using decay = custom::kda<true>; };
struct sse_sig_renorm_kda : sse_sig_renorm { using decay = custom::kda<true>; };
struct frac : ls::spec<> { using decay = custom::fractional_delta<true>; };  // one partition: w = 1
struct sse_frac : ls::spec<> {
  using partition = ls::partition::routed<4, ls::partition::shared>;
  using router = ls::router::top_k<1>;
  using decay = custom::fractional_delta<true>;
};
struct sse_sig_frac : sse_sig { using decay = custom::fractional_delta<true>; };
// the shipped policies the identities compare with
struct retention : ls::spec<> { using decay = ls::decay::scalar; };
struct gdn : ls::spec<> { using decay = ls::decay::gated_delta_rule<true>; };

//! What a group of checks found: counts and a log of one line per check.
struct outcome {
  int checks = 0, failures = 0;
  std::string log;
  void add(bool ok, const std::string& what) {
    ++checks;
    failures += ok ? 0 : 1;
    log += (ok ? "  ok    " : "  FAIL  ") + what + "\n";
  }
  void add(const lt::gradient_report& r, const std::string& what) {
    auto num = [&](double lt::tensor_check::*m) {
      char b[32];
      std::snprintf(b, sizeof b, "%.1e", r.worst(m));
      return r.worst(m) < 0 ? std::string("-") : std::string(b);
    };
    add(r.ok(), what + " (max errors: fd64 " + num(&lt::tensor_check::fd64_err) + ", fd " +
                    num(&lt::tensor_check::fd_err) + ", backend " + num(&lt::tensor_check::backend_err) + ")");
    if (!r.ok() || verbose) log += r.str();
  }
  bool verbose = false;
};

struct layout {
  const char* name;
  lt::sizes dims;
};
inline std::vector<layout> layouts() {
  return {{"B=2 T=24 H=1 HV=2 K=8 V=6", {.B = 2, .T = 24, .H = 1, .HV = 2, .K = 8, .V = 6}},
          {"packed {0,0,12,13,24} H=2 HV=4 K=5 V=7", {.B = 1, .T = 24, .H = 2, .HV = 4, .K = 5, .V = 7,
                                                     .cu_seqlens = {0, 0, 12, 13, 24}}}};
}

template <class A, class B>
double rel_err(const A& a, const B& b) {  // max|a − b| / max|b|
  double e = 0, m = 0;
  for (index_t i = 0; i < b.numel(); ++i)
    e = std::max(e, std::abs(double(a[i]) - double(b[i]))), m = std::max(m, std::abs(double(b[i])));
  return a.numel() != b.numel() ? 1e300 : m > 0 ? e / m : e;
}

//! check_gradients of `Spec` on every layout (the runs: the defaults for its family, or `Runs...`).
//! Router logits for the sigmoid router: closely spaced (gap 0.5) and biases up to ±0.3, so that the
//! bias changes the selection of many tokens.
inline constexpr lt::random_options router_draw{.router_gap = 0.5f, .param_scale = 0.3f};

//! `prep` may reshape the draw (fractional_delta keeps β away from 1, where its derivatives grow as
//! (1 − β)^{w−n} and the finite differences' truncation with them).
struct no_prep {
  void operator()(lt::owned_inputs&) const {}
};
template <class Spec, class... Runs, class Runner, class Prep = no_prep>
void gradients(outcome& out, const Runner& runner, const char* what, std::uint64_t seed, Prep prep = {}) {
  for (const layout& l : layouts()) {
    lt::owned_inputs data = lt::random_inputs<Spec>(l.dims, seed++, router_draw);
    prep(data);
    const lt::gradcheck_settings settings{.samples = 4, .seed = seed, .fd_fp32 = false};
    const auto rep = lt::check_gradients<Spec, Runs...>(data.view(), {}, settings, runner);
    std::string runs;
    for (const auto& r : rep.runs) runs += (runs.empty() ? "" : ", ") + r;
    out.add(rep, std::string(what) + ", " + l.name + ": gradients vs fp64 finite differences, " + runs +
                     " vs fp64 reference");
  }
}

//! `Mine` with its gate row set to one value per (token, head) ≡ `Shipped` with that value as its
//! scalar gate: forward and backward on the backend (recurrent / varlen).
template <class Mine, class Shipped, class Runner>
void identity(outcome& out, const Runner& runner, const char* what, std::uint64_t seed) {
  using A = ls::recurrent;
  using S = ls::varlen;
  for (const layout& l : layouts()) {
    lt::owned_inputs a = lt::random_inputs<Mine>(l.dims, seed++);
    lt::owned_inputs b = a;
    const index_t W = a.g.shape()[3], rows = a.g.numel() / W;
    b.g = ls::tensor<float>({a.g.shape()[0], a.g.shape()[1], a.g.shape()[2]});
    for (index_t r = 0; r < rows; ++r) {
      b.g[r] = a.g[r * W];
      for (index_t c = 0; c < W; ++c) a.g[r * W + c] = b.g[r];
    }
    const auto fa = runner.template forward<Mine, A, S>(a.view(), {});
    const auto fb = runner.template forward<Shipped, A, S>(b.view(), {});
    const ls::tensor<float> dO = lt::random_inputs<Mine>(l.dims, seed++).v;  // any [B,T,HV,V] tensor
    const ls::cotangents<float> cot{.o = dO.view(), .final_state = fa.final_state.view()};
    const auto ga = runner.template backward<Mine, A, S>(a.view(), cot, {});
    const auto gb = runner.template backward<Shipped, A, S>(b.view(), cot, {});
    ls::tensor<float> dg_sum(gb.g.shape());
    for (index_t r = 0; r < rows; ++r)
      for (index_t c = 0; c < W; ++c) dg_sum[r] += ga.g[r * W + c];
    double e = std::max(rel_err(fa.o, fb.o), rel_err(fa.final_state, fb.final_state));
    for (const auto& [x, y] : {std::pair{&ga.q, &gb.q}, {&ga.k, &gb.k}, {&ga.v, &gb.v}, {&ga.beta, &gb.beta},
                               {&dg_sum, &gb.g}, {&ga.initial_state, &gb.initial_state}})
      e = std::max(e, rel_err(*x, *y));
    char b2[64];
    std::snprintf(b2, sizeof b2, " (max rel. diff %.1e)", e);
    out.add(e <= 1e-5, std::string(what) + ", " + l.name + b2);
  }
}

template <class Runner>
outcome check_per_value_decay(const Runner& runner, bool verbose = false) {
  outcome out;
  out.verbose = verbose;
  out.log = "per_value_decay: s_j <- exp(gv_j) s_j + k v_j, gate [B,T,HV,V], family::recurrent_only\n";
  gradients<gla_v>(out, runner, "per_value_decay", 101);
  identity<gla_v, retention>(out, runner, "per_value_decay with gv constant over j == decay::scalar", 111);
  return out;
}

template <class Runner>
outcome check_kda(const Runner& runner, bool verbose = false) {
  outcome out;
  out.verbose = verbose;
  out.log = "kda: S <- (I - b k k^T) diag(exp(g)) S + b k v^T, g [B,T,HV,K], beta [B,T,HV]\n";
  gradients<kda_attn>(out, runner, "kda<l2norm>", 201);
  gradients<kda_raw>(out, runner, "kda (no l2norm, unit keys)", 211);
  identity<kda_attn, gdn>(out, runner, "kda with g constant over i == decay::gated_delta_rule<true>", 221);
  return out;
}

//! `Mine` and `Shipped` on the very same inputs: forward and backward on the backend, every run of
//! the delta family (recurrent, chunked<16>, automatic; varlen).
template <class Mine, class Shipped, class Runner>
void same_function(outcome& out, const Runner& runner, const char* what, std::uint64_t seed) {
  using S = ls::varlen;
  for (const layout& l : layouts()) {
    const lt::owned_inputs a = lt::random_inputs<Mine>(l.dims, seed++);
    const ls::tensor<float> dO = lt::random_inputs<Mine>(l.dims, seed++).v;
    double e = 0;
    auto one = [&]<class A>(A) {
      const auto fa = runner.template forward<Mine, A, S>(a.view(), {});
      const auto fb = runner.template forward<Shipped, A, S>(a.view(), {});
      const ls::cotangents<float> cot{.o = dO.view(), .final_state = fa.final_state.view()};
      const auto ga = runner.template backward<Mine, A, S>(a.view(), cot, {});
      const auto gb = runner.template backward<Shipped, A, S>(a.view(), cot, {});
      e = std::max({e, rel_err(fa.o, fb.o), rel_err(fa.final_state, fb.final_state)});
      for (const auto& [x, y] : {std::pair{&ga.q, &gb.q}, {&ga.k, &gb.k}, {&ga.v, &gb.v}, {&ga.g, &gb.g},
                                 {&ga.beta, &gb.beta}, {&ga.initial_state, &gb.initial_state}})
        e = std::max(e, rel_err(*x, *y));
    };
    one(ls::recurrent{});
    one(ls::chunked<16>{});
    one(ls::automatic{});
    char b2[64];
    std::snprintf(b2, sizeof b2, " (max rel. diff %.1e)", e);
    out.add(e <= 1e-5, std::string(what) + ", " + l.name + b2);
  }
}

template <class Runner>
outcome check_fractional_delta(const Runner& runner, bool verbose = false) {
  outcome out;
  out.verbose = verbose;
  out.log = "fractional_delta: the gated delta rule with write strength b = 1 - (1 - beta)^w, family::delta\n";
  {  // its write_strength_backward against central differences of its write_strength (fp64)
    double worst = 0;
    for (const double beta : {0.05, 0.3, 0.7, 0.95})
      for (const double w : {0.1, 0.5, 1.0}) {
        using F = custom::fractional_delta<true>;
        double db = 0, dw = 0;
        F::write_strength_backward(beta, w, 1.0, db, dw);
        const double h = 1e-6;
        const double fb = (F::write_strength(beta + h, w) - F::write_strength(beta - h, w)) / (2 * h);
        const double fw = (F::write_strength(beta, w + h) - F::write_strength(beta, w - h)) / (2 * h);
        worst = std::max({worst, std::abs(db - fb) / std::max(1.0, std::abs(fb)),
                          std::abs(dw - fw) / std::max(1.0, std::abs(fw))});
      }
    char b2[64];
    std::snprintf(b2, sizeof b2, " (max rel. error %.1e)", worst);
    out.add(worst < 1e-6, std::string("write_strength_backward vs central differences of write_strength") + b2);
  }
  same_function<frac, gdn>(out, runner, "fractional_delta on one partition (w = 1) == decay::gated_delta_rule<true>", 501);
  auto beta_range = [](lt::owned_inputs& d) {  // β = σ(z) ∈ (0, 1) → (0.05, 0.9)
    for (ls::tensor<float>* b : {&d.beta, &d.shared.beta})
      for (float& x : b->values()) x = 0.05f + 0.85f * x;
  };
  gradients<sse_frac>(out, runner, "fractional_delta under top_k<1>, routed<4, shared>", 511, beta_range);
  gradients<sse_sig_frac>(out, runner, "fractional_delta under sigmoid_top_k<2>, routed<4, shared>", 521, beta_range);
  return out;
}

//! The routing rule on hand-made tokens, in float and double (host: the policy is plain code).
template <class T>
void router_rule(outcome& out) {
  using R2 = custom::sigmoid_top_k<2>;
  using R2n = custom::sigmoid_top_k<2, true>;
  auto sig = [](double x) { return 1 / (1 + std::exp(-x)); };
  const T eta[4] = {T(0), T(0.1), T(2), T(-1)};
  const float bias[4] = {0.5f, 0.f, 0.f, 0.f}, zero[4] = {};
  T p[4], cw[4], cr[4];
  std::uint8_t f[4];
  bool ok = true;
  R2::route(R2::config{}, 4, eta, bias, p, cw, cr, f, ls::detail::no_round{});  // σ + b = .5+.5, .52, .88, .27: {0, 2}
  for (int n = 0; n < 4; ++n) {
    const bool sel = n == 0 || n == 2;
    const double want = sel ? sig(double(eta[n])) : 0.0;
    ok = ok && (f[n] != 0) == sel && std::abs(double(cw[n]) - want) < 1e-6 && cw[n] == cr[n];
  }
  R2::route(R2::config{}, 4, eta, zero, p, cw, cr, f, ls::detail::no_round{});  // no bias: {1, 2}
  ok = ok && !f[0] && f[1] && f[2] && !f[3];
  const T tie[4] = {T(1), T(1), T(1), T(1)};
  R2::route(R2::config{}, 4, tie, zero, p, cw, cr, f, ls::detail::no_round{});  // ties: the lowest indices
  ok = ok && f[0] && f[1] && !f[2] && !f[3];
  R2n::route(R2n::config{}, 4, eta, bias, p, cw, cr, f, ls::detail::no_round{});  // renormalised over {0, 2}
  const double s = sig(0.0) + sig(2.0);
  ok = ok && std::abs(double(cw[0]) - sig(0.0) / s) < 1e-6 && std::abs(double(cw[2]) - sig(2.0) / s) < 1e-6 &&
       cw[1] == T(0) && cw[3] == T(0);
  out.add(ok, std::string("sigmoid_top_k rule on hand-made tokens (") + (sizeof(T) == 4 ? "float" : "double") +
                  "): bias selects, weights are sigma(eta), ties to the lowest index, renormalisation");
}

template <class Runner>
outcome check_sigmoid_router(const Runner& runner, bool verbose = false) {
  outcome out;
  out.verbose = verbose;
  out.log = "sigmoid_top_k: scores sigma(eta), selection top-K of sigma(eta) + b (b = router_params [N]), "
            "write set = read set\n";
  router_rule<float>(out);
  router_rule<double>(out);
  {  // the random bias changes the selection of some tokens (so the checks below exercise it)
    lt::owned_inputs d = lt::random_inputs<sse_sig>(layouts()[0].dims, 311, router_draw);  // as below
    const index_t N = 4, tokens = d.router_logits.numel() / N;
    index_t changed = 0;
    const float zero[4] = {};
    for (index_t t = 0; t < tokens; ++t) {
      float p[4], cw[4], cr[4];
      std::uint8_t f0[4], f1[4];
      const float* x = d.router_logits.data() + t * N;
      sse_sig::router::route({}, 4, x, d.router_params.data(), p, cw, cr, f0, ls::detail::no_round{});
      sse_sig::router::route({}, 4, x, zero, p, cw, cr, f1, ls::detail::no_round{});
      changed += !std::equal(f0, f0 + 4, f1);
    }
    out.add(changed > 0, "the random selection bias changes the selected set of " + std::to_string(changed) + " of " +
                             std::to_string(tokens) + " tokens");
  }
  using namespace linstate;
  using lt::run;
  gradients<sse_sig, run<recurrent, mask>, run<recurrent, varlen>, run<chunked<16>, mask>, run<chunked<16>, varlen>,
            run<automatic, varlen>>(out, runner, "sigmoid_top_k<2> over GLA, routed<4, shared>", 311);
  gradients<sse_sig_renorm, run<recurrent, mask>, run<recurrent, varlen>, run<chunked<16>, mask>,
            run<chunked<16>, varlen>>(out, runner, "sigmoid_top_k<2, renormalize> over GLA, routed<4, shared>", 321);
  return out;
}

template <class Runner>
outcome check_router_with_kda(const Runner& runner, bool verbose = false) {
  outcome out;
  out.verbose = verbose;
  out.log = "sigmoid_top_k over kda: the write weight scales beta (SPEC 11 C9)\n";
  gradients<sse_sig_kda>(out, runner, "sigmoid_top_k<2> over kda<l2norm>, routed<4, shared>", 401);
  gradients<sse_sig_renorm_kda>(out, runner, "sigmoid_top_k<2, renormalize> over kda<l2norm>, routed<4, shared>", 411);
  return out;
}

}  // namespace custom_check
