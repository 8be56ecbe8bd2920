// linstate/testing/gradcheck.hpp — checks a variant's gradients against fp64 finite differences in
// one call: the check to run after writing a policy's `step_adjoint` (or a router's `weights_backward`).
//
// \code
//   #include <linstate/testing/gradcheck.hpp>
//   struct my_variant : linstate::spec<> { using decay = my_decay; };
//   auto data = linstate::testing::random_inputs<my_variant>({.B = 2, .T = 20, .H = 1, .HV = 2, .K = 8, .V = 6}, 1);
//   auto rep  = linstate::testing::check_gradients<my_variant>(data.view());
//   std::puts(rep.str().c_str());            // one line per tensor: max |∂|, finite-difference and backend errors
//   return rep.ok() ? 0 : 1;
// \endcode
//
// What it does, on fp32 copies of the inputs (rounded to multiples of 2⁻¹², so that every perturbed
// input x ± h, x ± 2h below is exact in fp32; the gradients are those at the rounded point), with the
// loss L = Σ o·dO + Σ h_T·dht (dO, dht: the given cotangents, or N(0,1) draws):
//  1. g = reference::backward<Spec> — the fp64 reverse mode of the per-token loop, which runs the
//     policies' own `step_adjoint` and `weights_backward` in double;
//  2. for every differentiable input (q, k, v, g, β, shared.*, router_logits, initial_state) at its
//     largest-|g| coordinate and `samples` random ones, the 4-point central difference
//     (8(L(x+h) − L(x−h)) − (L(x+2h) − L(x−2h))) / 12h, h = 2⁻⁹ (truncation ≲ 1e-9), of
//       - reference::forward_fp64_router (the function reference::backward differentiates: fp64
//         router weights):  |fd − g| ≤ fd64_tol · max|g| + fd_abs, default 1e-8;
//       - reference::forward (fp32 router weights, as the backends), inputs other than the logits:
//         |fd − g| ≤ fd_tol · max|g| + fd_abs, default 1e-6 (the weights' fp32 rounding, ~1e-7);
//     (the second only with a routing router, where the two differ, and unless fd_fp32 = false);
//     a router-logit coordinate whose ±2h move changes the token's selection is skipped (counted);
//  3. every run (algorithm × strategy) on the backend: linstate::forward against reference::forward
//     (o, final state) and linstate::backward against g, max|a − ref| ≤ backend_tol · max|ref| per
//     tensor, default 1e-5 (SPEC §9.3's suggestion for fp32 against fp64).
// These are the method and tolerances of tests/variants/test_gradients.cpp. The default runs are
// recurrent, automatic and (unless the decay is family::recurrent_only) chunked<16>, each with mask
// and varlen; name others as check_gradients<Spec, run<chunked<32>, mask>, ...>(...). The backend is
// a runner (cpu_runner by default): any type with the two member templates of cpu_runner, e.g. one
// that copies the inputs to a GPU and the results back.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "../linstate.hpp"
#include "inputs.hpp"

namespace linstate::testing {

//! One backend run: algorithm × strategy.
template <class Algorithm, class Strategy>
struct run {
  using algorithm = Algorithm;
  using strategy = Strategy;
  static std::string name() {
    if constexpr (requires { Algorithm::chunk_size; })
      return "chunked<" + std::to_string(Algorithm::chunk_size) + ">/" + Strategy::name;
    else return std::string(Algorithm::name) + "/" + Strategy::name;
  }
};

//! Runs linstate::forward / linstate::backward on the CPU (host tensors in, host tensors out).
struct cpu_runner {
  cpu be{.threads = 1};
  template <class Spec, class Algorithm, class Strategy>
  result<float> forward(const inputs<float>& in, const options& opt) const {
    return linstate::forward<Spec>(be, in, Algorithm{}, Strategy{}, opt);
  }
  template <class Spec, class Algorithm, class Strategy>
  gradient_result<float> backward(const inputs<float>& in, const cotangents<float>& d, const options& opt) const {
    return linstate::backward<Spec>(be, in, d, Algorithm{}, Strategy{}, opt);
  }
};

//! Settings of check_gradients (the defaults are those of linstate's own tests).
struct gradcheck_settings {
  int samples = 6;                   //!< random coordinates per tensor, besides the largest-|∂| one
  std::uint64_t seed = 1;            //!< coordinates and the random cotangents
  bool quantise = true;              //!< round the inputs to multiples of 2⁻¹² (exact perturbations)
  bool dht = true;                   //!< random cotangent for the final state too (else only dO)
  bool fd_fp32 = true;               //!< also difference reference::forward (fp32 router weights; 2× the cost)
  tensor_view<const float> dO{};     //!< [B,T,HV,V] cotangent of o (empty: N(0,1))
  tensor_view<const float> d_final{};  //!< [S,P,HV,K,V] cotangent of the final state (empty: see dht)
  double fd_tol = 1e-6, fd64_tol = 1e-8, fd_abs = 1e-10, backend_tol = 1e-5;
  //! absolute slack of the backend comparison: 0 (purely relative, as linstate's tests), or e.g. 1e-6 for
  //! a gradient that is zero analytically, where fp32 leaves rounding noise and fp64 ~1e-16
  double backend_abs = 0;
};

//! What was checked for one tensor (errors relative to max |reference|; −1: not checked).
struct tensor_check {
  std::string name;
  shape_t shape{};
  double max_ref = 0;          //!< max |reference::backward| (or |reference::forward| for o, final_state)
  int points = 0, skipped = 0;  //!< finite-difference coordinates checked / skipped (router selection changed)
  double fd_err = -1;          //!< max |fd − g| / max|g|, fd of reference::forward
  double fd64_err = -1;        //!< the same with reference::forward_fp64_router
  double backend_err = -1;     //!< max over runs of max|backend − reference| / max|reference|
  std::string worst_run;       //!< the run of backend_err
  bool ok = true;
};

//! The result of check_gradients: one row per tensor, and the failures in words.
struct gradient_report {
  std::string variant;
  std::vector<std::string> runs;
  std::vector<tensor_check> tensors;
  std::vector<std::string> failures;
  bool ok() const { return failures.empty(); }
  const tensor_check* find(const std::string& name) const {
    for (const auto& t : tensors)
      if (t.name == name) return &t;
    return nullptr;
  }
  //! max over tensors of a column (fd_err, fd64_err or backend_err); −1 if no tensor was checked so
  double worst(double tensor_check::*what) const {
    double w = -1;
    for (const auto& t : tensors) w = std::max(w, t.*what);
    return w;
  }
  std::string str() const {
    std::string s = variant + "\n  runs:";
    for (const auto& r : runs) s += " " + r;
    s += "\n";
    char line[320];
    auto num = [](double x) {
      char b[32];
      if (x < 0) return std::string("       -");
      std::snprintf(b, sizeof b, "%8.1e", x);
      return std::string(b);
    };
    for (const auto& t : tensors) {
      std::snprintf(line, sizeof line, "  %-16s %-16s max|ref| %8.2e  fd %s  fd64 %s  (%d pts%s)  backend %s %s%s\n",
                    t.name.c_str(), t.shape.str().c_str(), t.max_ref, num(t.fd_err).c_str(), num(t.fd64_err).c_str(),
                    t.points, t.skipped ? (", " + std::to_string(t.skipped) + " skipped").c_str() : "",
                    num(t.backend_err).c_str(), t.worst_run.c_str(), t.ok ? "" : "  FAILED");
      s += line;
    }
    for (const auto& f : failures) s += "  FAILED: " + f + "\n";
    return s;
  }
};

namespace gradcheck_detail {

template <class T>
double max_abs(const T& t) {
  double m = 0;
  for (index_t i = 0; i < t.numel(); ++i) m = std::max(m, std::abs(static_cast<double>(t[i])));
  return m;
}
template <class A, class B>
double max_diff(const A& a, const B& b) {
  double m = 0;
  for (index_t i = 0; i < a.numel(); ++i)
    m = std::max(m, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
  return m;
}
inline tensor<float> normal(const shape_t& s, std::mt19937_64& gen) {
  std::normal_distribution<float> nd;
  tensor<float> t(s);
  for (float& x : t.values()) x = nd(gen);
  return t;
}

template <class... Runs>
struct run_list {};

template <class Spec>
auto default_runs() {
  if constexpr (is_family_of<typename Spec::decay, family::recurrent_only>)
    return run_list<run<recurrent, mask>, run<recurrent, varlen>, run<automatic, mask>, run<automatic, varlen>>{};
  else
    return run_list<run<recurrent, mask>, run<recurrent, varlen>, run<automatic, mask>, run<automatic, varlen>,
                    run<chunked<16>, mask>, run<chunked<16>, varlen>>{};
}

}  // namespace gradcheck_detail

//! \brief Checks variant `Spec`'s gradients at `in` against fp64 finite differences and its backend
//! runs against the fp64 reference (see the file comment). Never throws for a mismatch: read the report.
template <class Spec, class... Runs, class Runner = cpu_runner>
gradient_report check_gradients(const inputs<float>& in, const options& opt = {}, const gradcheck_settings& st = {},
                                const Runner& runner = Runner{}) {
  using namespace gradcheck_detail;
  using R = typename Spec::router;
  static_assert(detail::validate<Spec>());
  gradient_report rep;
  rep.variant = describe<Spec>();
  owned_inputs w(in);
  if (st.quantise)
    for (auto& [name, t] : w.differentiable())
      for (float& x : t->values()) x = std::ldexp(std::round(std::ldexp(x, 12)), -12);
  const shape_t state = state_shape<Spec>(in, opt);
  std::mt19937_64 gen(st.seed);
  tensor<float> dO = st.dO.empty() ? normal(in.v.shape, gen) : owned_inputs(inputs<float>{.q = st.dO}).q;
  tensor<float> dht = !st.d_final.empty() ? owned_inputs(inputs<float>{.q = st.d_final}).q
                      : st.dht            ? normal(state, gen)
                                          : tensor<float>();
  const cotangents<float> cot{.o = dO.view(), .final_state = dht.empty() ? tensor_view<const float>{} : dht.view()};
  auto loss = [&](bool fp64_router) {
    const auto r =
        fp64_router ? reference::forward_fp64_router<Spec>(w.view(), opt) : reference::forward<Spec>(w.view(), opt);
    double L = 0;
    for (index_t i = 0; i < r.o.numel(); ++i) L += r.o[i] * static_cast<double>(dO[i]);
    for (index_t i = 0; i < dht.numel(); ++i) L += r.final_state[i] * static_cast<double>(dht[i]);
    return L;
  };
  auto fail = [&](tensor_check& t, const std::string& why) {
    t.ok = false;
    rep.failures.push_back(t.name + ": " + why);
  };

  // 1–2. reference::backward against finite differences
  const reference::gradient ref = reference::backward<Spec>(w.view(), cot, opt);
  const std::vector<const tensor<double>*> refs = {&ref.q, &ref.k, &ref.v, &ref.g, &ref.beta, &ref.shared.q,
                                                   &ref.shared.k, &ref.shared.g, &ref.shared.beta, &ref.router_logits,
                                                   &ref.initial_state};
  const double h = std::ldexp(1.0, -9);
  auto selection_moves = [&](index_t i, float x0) {  // does moving logit i by ±2h change its token's selection?
    if constexpr (R::routes) {
      const index_t N = w.router_logits.shape()[2], t0 = i / N * N;
      const auto cfg = R::configure(opt, N, "linstate::testing::check_gradients");
      std::vector<float> row(w.router_logits.data() + t0, w.router_logits.data() + t0 + N), p(row.size()), cw(p), cr(p);
      std::vector<std::uint8_t> f0(row.size()), f1(row.size());
      const float* prm = w.router_params.empty() ? nullptr : w.router_params.data();
      row[static_cast<std::size_t>(i - t0)] = x0;
      auto route = [&](std::vector<std::uint8_t>& f) {
        const int n = static_cast<int>(N);
        R::route(cfg, n, row.data(), prm, p.data(), cw.data(), cr.data(), f.data(), detail::no_round{});
      };
      route(f0);
      for (const double off : {-2 * h, -h, h, 2 * h}) {
        row[static_cast<std::size_t>(i - t0)] = static_cast<float>(x0 + off);
        route(f1);
        if (f1 != f0) return true;
      }
    }
    return false;
  };
  auto names = w.differentiable();
  for (std::size_t k = 0; k < names.size(); ++k) {
    const std::string& name = names[k].first;
    tensor<float>* input = names[k].second;
    const tensor<double>& g = *refs[k];
    const bool is_h0 = name == "initial_state", is_router = name == "router_logits";
    if (g.empty() && (input->empty() || !is_h0)) continue;
    tensor_check tc;
    tc.name = name, tc.shape = g.shape(), tc.max_ref = max_abs(g);
    if (!is_h0 && input->empty()) fail(tc, "reference::backward returned a gradient for an input that was not given");
    const bool absent = input->empty();  // a zero initial state: perturb a materialised one
    if (absent) *input = tensor<float>(state);
    std::vector<index_t> coords;
    index_t arg = 0;
    for (index_t i = 0; i < g.numel(); ++i)
      if (std::abs(g[i]) > std::abs(g[arg])) arg = i;
    if (g.numel() > 0) coords.push_back(arg);
    std::uniform_int_distribution<index_t> pick(0, std::max<index_t>(g.numel() - 1, 0));
    for (int s = 0; s < st.samples && g.numel() > 0; ++s) coords.push_back(pick(gen));
    const double scale = tc.max_ref;
    for (const index_t i : coords) {
      float& x = input->values()[static_cast<std::size_t>(i)];
      const float x0 = x;
      if (is_router && selection_moves(i, x0)) {
        ++tc.skipped;
        continue;
      }
      bool exact = true;
      auto fd = [&](bool fp64_router) {
        auto at = [&](double off) {
          x = static_cast<float>(static_cast<double>(x0) + off);
          exact = exact && static_cast<double>(x) == static_cast<double>(x0) + off;
          return loss(fp64_router);
        };
        const double r = (8.0 * (at(h) - at(-h)) - (at(2 * h) - at(-2 * h))) / (12.0 * h);
        x = x0;
        return r;
      };
      const double an = g[i], fd64 = fd(true);
      ++tc.points;
      const double e64 = std::abs(fd64 - an);
      tc.fd64_err = std::max(tc.fd64_err, scale > 0 ? e64 / scale : e64);
      if (e64 > st.fd64_tol * scale + st.fd_abs)
        fail(tc, "at element " + std::to_string(i) + " reference::backward gives " + std::to_string(an) +
                     ", the finite difference of reference::forward_fp64_router " + std::to_string(fd64));
      if (R::routes && !is_router && st.fd_fp32) {  // without a router both forwards are the same fp64 loop
        const double fd32 = fd(false), e32 = std::abs(fd32 - an);
        tc.fd_err = std::max(tc.fd_err, scale > 0 ? e32 / scale : e32);
        if (e32 > st.fd_tol * scale + st.fd_abs)
          fail(tc, "at element " + std::to_string(i) + " reference::backward gives " + std::to_string(an) +
                       ", the finite difference of reference::forward " + std::to_string(fd32));
      }
      if (!exact) fail(tc, "input too large for exact steps of 2^-9 in fp32 at element " + std::to_string(i));
    }
    if (absent) *input = tensor<float>();
    rep.tensors.push_back(tc);
  }

  // 3. the backend runs against the reference
  const reference::result fwd = reference::forward<Spec>(w.view(), opt);
  tensor_check to, tf;
  to.name = "o (forward)", to.shape = fwd.o.shape(), to.max_ref = max_abs(fwd.o);
  tf.name = "final_state (fw)", tf.shape = fwd.final_state.shape(), tf.max_ref = max_abs(fwd.final_state);
  auto compare = [&](tensor_check& tc, const std::string& run, const auto& got, const tensor<double>& want) {
    if (got.empty() != want.empty() || !(got.shape() == want.shape())) {
      fail(tc, run + " returned shape " + got.shape().str() + ", the reference " + want.shape().str());
      return;
    }
    const double e = max_diff(got, want), rel = tc.max_ref > 0 ? e / tc.max_ref : e;
    if (rel > tc.backend_err) tc.backend_err = rel, tc.worst_run = run;
    if (!(e <= st.backend_tol * tc.max_ref + st.backend_abs + 1e-30)) {
      char b[160];
      std::snprintf(b, sizeof b, ": max |backend − reference| = %.3e, max |reference| = %.3e (relative %.2e)", e,
                    tc.max_ref, rel);
      fail(tc, run + b);
    }
  };
  auto one = [&]<class Run>(Run) {
    const std::string rn = Run::name();
    rep.runs.push_back(rn);
    using A = typename Run::algorithm;
    using S = typename Run::strategy;
    const result<float> f = runner.template forward<Spec, A, S>(w.view(), opt);
    compare(to, rn, f.o, fwd.o);
    compare(tf, rn, f.final_state, fwd.final_state);
    const gradient_result<float> b = runner.template backward<Spec, A, S>(w.view(), cot, opt);
    const std::vector<const tensor<float>*> got = {&b.q, &b.k, &b.v, &b.g, &b.beta, &b.shared.q, &b.shared.k,
                                                   &b.shared.g, &b.shared.beta, &b.router_logits, &b.initial_state};
    for (std::size_t k = 0; k < names.size(); ++k)
      for (tensor_check& tc : rep.tensors)
        if (tc.name == names[k].first) compare(tc, rn, *got[k], *refs[k]);
  };
  auto all = [&]<class... Rs>(run_list<Rs...>) { (one(Rs{}), ...); };
  if constexpr (sizeof...(Runs) == 0) all(default_runs<Spec>());
  else all(run_list<Runs...>{});
  rep.tensors.push_back(to);
  rep.tensors.push_back(tf);
  return rep;
}

}  // namespace linstate::testing
