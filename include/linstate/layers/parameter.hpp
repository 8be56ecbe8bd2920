// linstate/layers/parameter.hpp — the parameters a layer owns, and the named views an optimiser
// iterates over.
//
// Every layer of <linstate/layers.hpp> owns its parameters as `parameter<Real>` objects (value and
// gradient, one dense row-major tensor each) and lists them with `collect(list, prefix)`, appending
// one `parameter_ref` per tensor. A model collects its layers under prefixes; an AdamW then needs
// nothing else:
// \code
//   std::vector<linstate::layers::parameter_ref<float>> ps;
//   mixer.collect(ps, "blocks.0.mixer.");  mlp.collect(ps, "blocks.0.mlp.");
//   for (auto& p : ps)                                  // p.name "blocks.0.mixer.W_q", p.value.shape [D,H*K]
//     for (index_t i = 0; i < p.value.numel(); ++i)
//       p.value.data[i] -= lr * (p.grad.data[i] + (p.weight_decay ? wd * p.value.data[i] : 0.f));
// \endcode
// Gradients accumulate: every backward call adds into `grad`, so a parameter shared by two uses (a
// tied embedding) gets the sum; zero them (`zero_grad(ps)`) once per optimiser step.
//
// Initialisation is deterministic from a seed and portable (the generator is splitmix64 with a
// Box–Muller transform, not std::normal_distribution, whose output differs between standard
// libraries): the stream of each tensor is seeded from (seed, name), so adding a parameter does not
// change the values of the others.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "../tensor.hpp"

namespace linstate::layers {

//! \brief One parameter tensor: its name (relative to its layer), value and gradient, and whether an
//! optimiser should apply weight decay to it (false for norm weights, biases, A_log, dt_bias, as fla).
template <class Real>
struct parameter {
  std::string name;
  tensor<Real> value;
  tensor<Real> grad;
  bool weight_decay = true;
};

//! \brief A named view of one parameter: what an optimiser reads and writes. `name` carries the
//! prefix given to collect(); `value` and `grad` have the same shape and stay valid as long as the
//! layer lives (layers never reallocate their parameters).
template <class Real>
struct parameter_ref {
  std::string name;
  tensor_view<Real> value;
  tensor_view<Real> grad;
  bool weight_decay = true;
};

//! Sets every gradient of `ps` to zero.
template <class Real>
void zero_grad(const std::vector<parameter_ref<Real>>& ps) {
  for (const auto& p : ps)
    for (index_t i = 0; i < p.grad.numel(); ++i) p.grad.data[i] = Real(0);
}

//! Total number of scalars in `ps`.
template <class Real>
index_t count(const std::vector<parameter_ref<Real>>& ps) {
  index_t n = 0;
  for (const auto& p : ps) n += p.value.numel();
  return n;
}

//! \brief The deterministic generator of the initialisations: splitmix64, uniforms in (0, 1) from
//! the top 53 bits, normals by Box–Muller.
class init_rng {
 public:
  init_rng(std::uint64_t seed, std::string_view name) : s_(seed * 0x9E3779B97F4A7C15ull + fnv1a(name)) { next(); }
  std::uint64_t next() {
    std::uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  //! uniform in (0, 1), never 0 or 1
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }
  double normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double u1 = uniform(), u2 = uniform(), r = std::sqrt(-2.0 * std::log(u1));
    const double a = 6.283185307179586476925 * u2;
    spare_ = r * std::sin(a), has_spare_ = true;
    return r * std::cos(a);
  }

 private:
  static std::uint64_t fnv1a(std::string_view s) {
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (const char c : s) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
    return h;
  }
  std::uint64_t s_;
  double spare_ = 0;
  bool has_spare_ = false;
};

//! \brief The parameters of one layer, in a fixed order; `add` returns the index (stable: the storage
//! is reserved by the layer before it adds, and tensors never move after construction).
template <class Real>
class parameter_list {
 public:
  //! Adds a zero-filled parameter of shape `s`; returns its index.
  int add(std::string name, shape_t s, bool weight_decay = true) {
    items_.push_back({std::move(name), tensor<Real>(s), tensor<Real>(s), weight_decay});
    return static_cast<int>(items_.size()) - 1;
  }
  parameter<Real>& operator[](int i) { return items_[static_cast<std::size_t>(i)]; }
  const parameter<Real>& operator[](int i) const { return items_[static_cast<std::size_t>(i)]; }
  Real* value(int i) { return items_[static_cast<std::size_t>(i)].value.data(); }
  const Real* value(int i) const { return items_[static_cast<std::size_t>(i)].value.data(); }
  Real* grad(int i) { return items_[static_cast<std::size_t>(i)].grad.data(); }
  std::size_t size() const { return items_.size(); }
  void reserve(std::size_t n) { items_.reserve(n); }
  //! Appends a view of every parameter, names prefixed by `prefix`.
  void collect(std::vector<parameter_ref<Real>>& out, const std::string& prefix) {
    for (auto& p : items_) out.push_back({prefix + p.name, p.value.view(), p.grad.view(), p.weight_decay});
  }
  //! value ~ N(0, std²), from (seed, name)
  void init_normal(int i, double std, std::uint64_t seed) {
    auto& p = items_[static_cast<std::size_t>(i)];
    init_rng g(seed, p.name);
    for (Real& x : p.value.values()) x = static_cast<Real>(std * g.normal());
  }
  //! value ~ U(−bound, bound), from (seed, name)
  void init_uniform(int i, double bound, std::uint64_t seed) {
    auto& p = items_[static_cast<std::size_t>(i)];
    init_rng g(seed, p.name);
    for (Real& x : p.value.values()) x = static_cast<Real>(bound * (2 * g.uniform() - 1));
  }
  void fill(int i, Real v) {
    for (Real& x : items_[static_cast<std::size_t>(i)].value.values()) x = v;
  }

 private:
  std::vector<parameter<Real>> items_;
};

}  // namespace linstate::layers
