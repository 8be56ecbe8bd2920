// linstate/layers/rms_norm.hpp — RMSNorm over the last dimension, forward and backward.
#pragma once

#include <string>
#include <type_traits>
#include <vector>

#include "linear.hpp"

namespace linstate::layers {

//! \brief `y = x / sqrt(mean(x²) + eps) ⊙ w` over the last dimension (x, y `[..., D]`, w `[D]`,
//! initialised to 1, no weight decay): the pre-norm of a block (fla's RMSNorm).
template <class Real = float>
class rms_norm {
  static_assert(std::is_same_v<Real, float> || std::is_same_v<Real, double>,
                "linstate::layers::rms_norm<Real>: Real must be float or double");

 public:
  using real = Real;
  explicit rms_norm(index_t d, double eps = 1e-6) : D_(d), eps_(eps) {
    if (d < 1) throw error("linstate::layers::rms_norm: the width must be >= 1, got " + std::to_string(d));
    if (!(eps > 0)) throw error("linstate::layers::rms_norm: eps must be > 0");
    w_ = p_.add("w", {d}, false);
    p_.fill(w_, Real(1));
  }
  void collect(std::vector<parameter_ref<Real>>& out, const std::string& prefix = "") { p_.collect(out, prefix); }
  parameter_list<Real>& params() { return p_; }

  void forward(const tensor_view<const Real>& x, const tensor_view<Real>& y) {
    static constexpr const char* api = "linstate::layers::rms_norm::forward";
    M_ = layers_detail::rows_of(api, "x", x, D_, "D");
    ops::require(api, "y", y, x.shape, "(like x)");
    shape_ = x.shape;
    x_.assign(x.data, x.data + x.numel());
    rstd_.resize(static_cast<std::size_t>(M_));
    ops::rms_norm_forward(x_.data(), p_.value(w_), static_cast<const Real*>(nullptr), static_cast<const Real*>(nullptr),
                          y.data, rstd_.data(), M_, D_,
                          static_cast<Real>(eps_));
    forwarded_ = true;
  }
  //! dx (overwritten) from dy; adds into the gradient of w.
  void backward(const tensor_view<const Real>& dy, const tensor_view<Real>& dx) {
    static constexpr const char* api = "linstate::layers::rms_norm::backward";
    if (!forwarded_) throw error(std::string(api) + ": no forward call to differentiate (call forward first)");
    ops::require(api, "dy", dy, shape_, "(like the last forward's x)");
    ops::require(api, "dx", dx, shape_, "(like the last forward's x)");
    ops::rms_norm_backward(x_.data(), p_.value(w_), static_cast<const Real*>(nullptr), static_cast<const Real*>(nullptr),
                           rstd_.data(), dy.data, dx.data,
                           p_.grad(w_), static_cast<Real*>(nullptr), M_, D_);
  }

 private:
  index_t D_;
  double eps_;
  parameter_list<Real> p_;
  int w_ = -1;
  index_t M_ = 0;
  shape_t shape_{};
  bool forwarded_ = false;
  std::vector<Real> x_, rstd_;
};

}  // namespace linstate::layers
