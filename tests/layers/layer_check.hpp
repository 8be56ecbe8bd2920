// tests/layers/layer_check.hpp — finite-difference checks of a layer's backward, shared by the
// layer tests. A layer here is any type with
//   Real forward(tensor_view<const Real> x, tensor_view<Real> out)   (returns aux, added with `coef`)
//   void backward(tensor_view<const Real> dout, tensor_view<Real> dx)
//   void collect(std::vector<parameter_ref<Real>>&, prefix)
// and the loss L = Σ out·dout + coef·aux for a fixed random dout.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <linstate/layers/parameter.hpp>  // only: a TU of the small layers need not compile the kernels
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace layer_check {

using linstate::index_t;
using linstate::shape_t;
using linstate::tensor;
namespace ly = linstate::layers;

struct row {
  std::string name;
  shape_t shape;
  double max_g = 0, err = 0;  // max |analytic|, max |fd − analytic| / max |analytic|
  int points = 0, skipped = 0;
};

struct report {
  std::vector<row> rows;
  double tol = 0;
  bool ok() const {
    for (const auto& r : rows)
      if (!(r.err <= tol) || r.points == 0) return false;
    return !rows.empty();
  }
  std::string str() const {
    std::string s;
    char b[256];
    for (const auto& r : rows) {
      std::snprintf(b, sizeof b, "  %-16s %-10s max|g| %9.3e  fd err %9.2e  (%d pts, %d skipped)%s\n", r.name.c_str(),
                    r.shape.str().c_str(), r.max_g, r.err, r.points, r.skipped, r.err <= tol && r.points ? "" : "  FAILED");
      s += b;
    }
    return s;
  }
};

//! The write and read sets (top-kw and top-kr of the logits, lowest index first on ties) of every
//! token, or nothing for a layer without a routing router: a finite-difference step that changes
//! them crosses a discontinuity and is skipped.
template <class Layer>
std::vector<int> selection(const Layer& L) {
  std::vector<int> sel;
  if constexpr (requires { L.kernel_inputs(); }) {
    using R = typename Layer::router;
    if constexpr (R::routes) {
      const auto& lg = L.kernel_inputs().router_logits;
      const index_t N = lg.shape[2], M = lg.shape[0] * lg.shape[1];
      const auto cfg = R::configure(L.config().kernel, static_cast<int>(N), "layer_check");
      std::vector<int> idx(static_cast<std::size_t>(N));
      for (index_t m = 0; m < M; ++m) {
        const float* x = lg.data + m * N;
        for (int n = 0; n < N; ++n) idx[static_cast<std::size_t>(n)] = n;
        std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return x[a] > x[b]; });
        for (int k : {cfg.kw, cfg.kr}) {
          std::vector<int> s(idx.begin(), idx.begin() + k);
          std::sort(s.begin(), s.end());
          sel.insert(sel.end(), s.begin(), s.end());
        }
      }
    }
  }
  return sel;
}

inline tensor<double> normal(shape_t s, std::mt19937_64& g, double sd = 1.0) {
  std::normal_distribution<double> nd(0.0, sd);
  tensor<double> t(s);
  for (double& v : t.values()) v = nd(g);
  return t;
}

//! Checks ∂L/∂θ for every parameter (its largest-|g| entry and `samples` random ones) and ∂L/∂x
//! against the 4-point central difference (8(L(+h) − L(−h)) − (L(+2h) − L(−2h)))/12h of the fp64
//! forward.
template <class Layer>
report check_layer(Layer& L, shape_t xs, double coef, std::uint64_t seed, double h = 1e-3, double tol = 1e-6,
                   int samples = 3, shape_t ys = {}) {
  if (ys.rank() == 0) ys = xs;
  std::mt19937_64 gen(seed);
  tensor<double> x = normal(xs, gen), dout = normal(ys, gen), out(ys), dx(xs);
  auto loss = [&] {
    double s = 0;
    if constexpr (std::is_void_v<decltype(L.forward(x.view(), out.view()))>) L.forward(x.view(), out.view());
    else s = coef * L.forward(x.view(), out.view());
    for (index_t i = 0; i < out.numel(); ++i) s += out[i] * dout[i];
    return s;
  };
  std::vector<ly::parameter_ref<double>> ps;
  L.collect(ps);
  ly::zero_grad(ps);
  loss();
  const std::vector<int> sel0 = selection(L);
  L.backward(dout.view(), dx.view());
  report rep;
  rep.tol = tol;
  auto check = [&](const std::string& name, linstate::tensor_view<double> value, const double* grad) {
    row r;
    r.name = name, r.shape = value.shape;
    const index_t n = value.numel();
    std::vector<double> g(grad, grad + n);  // the analytic gradient (grad may be overwritten by later calls)
    index_t arg = 0;
    for (index_t i = 0; i < n; ++i) {
      r.max_g = std::max(r.max_g, std::abs(g[static_cast<std::size_t>(i)]));
      if (std::abs(g[static_cast<std::size_t>(i)]) > std::abs(g[static_cast<std::size_t>(arg)])) arg = i;
    }
    std::vector<index_t> coords{arg};
    std::uniform_int_distribution<index_t> pick(0, n - 1);
    for (int s = 0; s < samples; ++s) coords.push_back(pick(gen));
    double worst = 0;
    for (const index_t i : coords) {
      double& v = value.data[i];
      const double v0 = v;
      bool moved = false;
      auto at = [&](double off) {
        v = v0 + off;
        const double l = loss();
        moved = moved || selection(L) != sel0;
        return l;
      };
      const double fd = (8 * (at(h) - at(-h)) - (at(2 * h) - at(-2 * h))) / (12 * h);
      v = v0;
      if (moved) {
        ++r.skipped;
        continue;
      }
      ++r.points;
      worst = std::max(worst, std::abs(fd - g[static_cast<std::size_t>(i)]));
    }
    r.err = r.max_g > 0 ? worst / r.max_g : worst;
    rep.rows.push_back(r);
  };
  for (auto& p : ps) check(p.name, p.value, p.grad.data);
  const std::vector<double> dx0 = dx.values();
  check("dx", x.view(), dx0.data());
  loss();  // leave the layer at the unperturbed point
  return rep;
}

struct precision_report {
  std::vector<std::pair<std::string, double>> rel;  // max |fp32 − fp64| / max |fp64| per tensor
  bool ok(double tol) const {
    for (const auto& [n, e] : rel)
      if (!(e <= tol)) return false;
    return !rel.empty();
  }
  std::string str() const {
    std::string s = "fp32 layer vs fp64 layer:";
    char b[96];
    for (const auto& [n, e] : rel) std::snprintf(b, sizeof b, " %s %.1e", n.c_str(), e), s += b;
    return s;
  }
};

//! Copies every parameter value of `from` into `to` (same layer type, other precision).
template <class A, class B>
void copy_params(A& from, B& to) {
  std::vector<ly::parameter_ref<typename A::real>> pa;
  std::vector<ly::parameter_ref<typename B::real>> pb;
  from.collect(pa), to.collect(pb);
  for (std::size_t i = 0; i < pa.size(); ++i)
    for (index_t j = 0; j < pa[i].value.numel(); ++j) pb[i].value.data[j] = static_cast<typename B::real>(pa[i].value.data[j]);
}

template <class L64, class L32>
precision_report compare_precisions(L64& a, L32& b, shape_t xs, double coef, std::uint64_t seed) {
  std::mt19937_64 gen(seed + 1000);
  tensor<double> x = normal(xs, gen), dout = normal(xs, gen), out(xs), dx(xs);
  tensor<float> xf(xs), doutf(xs), outf(xs), dxf(xs);
  for (index_t i = 0; i < x.numel(); ++i) xf[i] = static_cast<float>(x[i]), doutf[i] = static_cast<float>(dout[i]);
  for (index_t i = 0; i < x.numel(); ++i) x[i] = xf[i], dout[i] = doutf[i];  // the same inputs exactly
  std::vector<ly::parameter_ref<double>> pa;
  std::vector<ly::parameter_ref<float>> pb;
  a.collect(pa), b.collect(pb);
  ly::zero_grad(pa), ly::zero_grad(pb);
  precision_report rep;
  auto rel = [&](const std::string& n, const auto* u, const double* ref, index_t cnt) {
    double m = 0, e = 0;
    for (index_t i = 0; i < cnt; ++i) m = std::max(m, std::abs(ref[i])), e = std::max(e, std::abs(double(u[i]) - ref[i]));
    rep.rel.push_back({n, m > 0 ? e / m : e});
  };
  const double aux64 = a.forward(x.view(), out.view());
  const double aux32 = b.forward(xf.view(), outf.view());
  rel("out", outf.data(), out.data(), out.numel());
  rep.rel.push_back({"aux", std::abs(aux32 - aux64) / std::max(1.0, std::abs(aux64))});
  a.backward(dout.view(), dx.view()), b.backward(doutf.view(), dxf.view());
  rel("dx", dxf.data(), dx.data(), dx.numel());
  for (std::size_t i = 0; i < pa.size(); ++i) rel(pa[i].name, pb[i].grad.data, pa[i].grad.data, pa[i].grad.numel());
  (void)coef;
  return rep;
}

}  // namespace layer_check
