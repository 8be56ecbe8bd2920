// linstate/layers/linear.hpp — y = x W (+ b), forward and backward.
#pragma once

#include <string>
#include <type_traits>
#include <vector>

#include "ops.hpp"
#include "parameter.hpp"

namespace linstate::layers {

namespace layers_detail {
//! rows of x [..., width] (every leading dimension flattened); throws unless x is given, of rank >= 1
//! and its last extent is `width`.
template <class T>
index_t rows_of(const char* api, const char* name, const tensor_view<T>& x, index_t width, const char* dim) {
  if (x.empty() || x.rank() < 1 || x.size(x.rank() - 1) != width)
    throw error(std::string(api) + ": " + name + " has shape " + (x.empty() ? std::string("(not given)") : x.shape.str()) +
                " but must be [...," + dim + "] with " + dim + " = " + std::to_string(width));
  return width ? x.numel() / width : 0;
}
//! the shape of x with its last extent replaced by `width`
inline shape_t with_last(shape_t s, index_t width) {
  s[s.rank() - 1] = width;
  return s;
}
}  // namespace layers_detail

struct linear_config {
  index_t in = 0, out = 0;
  bool bias = false;
  double init_std = 0.02;  //!< W ~ N(0, init_std²), b = 0 (fla's models)
  std::uint64_t seed = 0;
};

//! \brief A dense projection `y = x W + b` over the last dimension: x `[..., in]`, W `[in, out]`,
//! b `[out]`, y `[..., out]`. Parameters "W" (and "b", no weight decay).
template <class Real = float>
class linear {
  static_assert(std::is_same_v<Real, float> || std::is_same_v<Real, double>,
                "linstate::layers::linear<Real>: Real must be float or double");

 public:
  using real = Real;
  explicit linear(const linear_config& c) : cfg_(c) {
    if (c.in < 1 || c.out < 1)
      throw error("linstate::layers::linear: linear_config.in = " + std::to_string(c.in) + ", out = " +
                  std::to_string(c.out) + ": both must be >= 1");
    W_ = p_.add("W", {c.in, c.out});
    p_.init_normal(W_, c.init_std, c.seed);
    if (c.bias) b_ = p_.add("b", {c.out}, false);
  }
  void collect(std::vector<parameter_ref<Real>>& out, const std::string& prefix = "") { p_.collect(out, prefix); }
  parameter_list<Real>& params() { return p_; }

  //! y `[..., out]` from x `[..., in]`; keeps a copy of x for backward.
  void forward(const tensor_view<const Real>& x, const tensor_view<Real>& y) {
    static constexpr const char* api = "linstate::layers::linear::forward";
    M_ = layers_detail::rows_of(api, "x", x, cfg_.in, "in");
    ops::require(api, "y", y, layers_detail::with_last(x.shape, cfg_.out), "(x's shape with the last extent = out)");
    shape_ = x.shape;
    x_.assign(x.data, x.data + x.numel());
    ops::matmul(x_.data(), p_.value(W_), y.data, M_, cfg_.in, cfg_.out);
    if (b_ >= 0)
      for (index_t m = 0; m < M_; ++m)
        for (index_t j = 0; j < cfg_.out; ++j) y.data[m * cfg_.out + j] += p_.value(b_)[j];
    forwarded_ = true;
  }
  //! dx `[..., in]` (overwritten) from dy `[..., out]`; adds into the gradients of W and b.
  void backward(const tensor_view<const Real>& dy, const tensor_view<Real>& dx) {
    static constexpr const char* api = "linstate::layers::linear::backward";
    if (!forwarded_) throw error(std::string(api) + ": no forward call to differentiate (call forward first)");
    ops::require(api, "dy", dy, layers_detail::with_last(shape_, cfg_.out), "(like the last forward's y)");
    ops::require(api, "dx", dx, shape_, "(like the last forward's x)");
    ops::matmul_tn_acc(x_.data(), dy.data, p_.grad(W_), M_, cfg_.in, cfg_.out);
    if (b_ >= 0)
      for (index_t m = 0; m < M_; ++m)
        for (index_t j = 0; j < cfg_.out; ++j) p_.grad(b_)[j] += dy.data[m * cfg_.out + j];
    ops::matmul_nt(dy.data, p_.value(W_), dx.data, M_, cfg_.in, cfg_.out, false);
  }

 private:
  linear_config cfg_;
  parameter_list<Real> p_;
  int W_ = -1, b_ = -1;
  index_t M_ = 0;
  shape_t shape_{};
  bool forwarded_ = false;
  std::vector<Real> x_;
};

}  // namespace linstate::layers
