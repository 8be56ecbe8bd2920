// linstate/layers/swiglu.hpp — the SwiGLU MLP of a block, forward and backward.
#pragma once

#include <string>
#include <type_traits>
#include <vector>

#include "linear.hpp"

namespace linstate::layers {

struct swiglu_config {
  index_t d_model = 0;   //!< D
  index_t hidden = 0;    //!< F (fla: intermediate_size, e.g. ≈ 8/3 · D rounded)
  double init_std = 0.02;
  std::uint64_t seed = 0;
};

//! \brief `y = (SiLU(x W_gate) ⊙ (x W_up)) W_down` (x, y `[..., D]`; W_gate, W_up `[D, F]`, W_down
//! `[F, D]`; no biases; weights N(0, init_std²) as fla's models; fla's GatedMLP with swish).
template <class Real = float>
class swiglu {
  static_assert(std::is_same_v<Real, float> || std::is_same_v<Real, double>,
                "linstate::layers::swiglu<Real>: Real must be float or double");

 public:
  using real = Real;
  explicit swiglu(const swiglu_config& c) : cfg_(c) {
    if (c.d_model < 1 || c.hidden < 1)
      throw error("linstate::layers::swiglu: swiglu_config.d_model = " + std::to_string(c.d_model) + ", hidden = " +
                  std::to_string(c.hidden) + ": both must be >= 1");
    Wg_ = p_.add("W_gate", {c.d_model, c.hidden}), Wu_ = p_.add("W_up", {c.d_model, c.hidden});
    Wd_ = p_.add("W_down", {c.hidden, c.d_model});
    for (int i : {Wg_, Wu_, Wd_}) p_.init_normal(i, c.init_std, c.seed);
  }
  void collect(std::vector<parameter_ref<Real>>& out, const std::string& prefix = "") { p_.collect(out, prefix); }
  parameter_list<Real>& params() { return p_; }

  void forward(const tensor_view<const Real>& x, const tensor_view<Real>& y) {
    static constexpr const char* api = "linstate::layers::swiglu::forward";
    const index_t D = cfg_.d_model, F = cfg_.hidden;
    M_ = layers_detail::rows_of(api, "x", x, D, "D");
    ops::require(api, "y", y, x.shape, "(like x)");
    shape_ = x.shape;
    x_.assign(x.data, x.data + x.numel());
    a_.resize(static_cast<std::size_t>(M_ * F)), u_.resize(a_.size()), h_.resize(a_.size());
    ops::matmul(x_.data(), p_.value(Wg_), a_.data(), M_, D, F);
    ops::matmul(x_.data(), p_.value(Wu_), u_.data(), M_, D, F);
    for (std::size_t i = 0; i < h_.size(); ++i) h_[i] = ops::silu(a_[i]) * u_[i];
    ops::matmul(h_.data(), p_.value(Wd_), y.data, M_, F, D);
    forwarded_ = true;
  }
  //! dx (overwritten) from dy; adds into the gradients of W_gate, W_up, W_down.
  void backward(const tensor_view<const Real>& dy, const tensor_view<Real>& dx) {
    static constexpr const char* api = "linstate::layers::swiglu::backward";
    if (!forwarded_) throw error(std::string(api) + ": no forward call to differentiate (call forward first)");
    ops::require(api, "dy", dy, shape_, "(like the last forward's x)");
    ops::require(api, "dx", dx, shape_, "(like the last forward's x)");
    const index_t D = cfg_.d_model, F = cfg_.hidden;
    dh_.resize(h_.size()), da_.resize(h_.size()), du_.resize(h_.size());
    ops::matmul_tn_acc(h_.data(), dy.data, p_.grad(Wd_), M_, F, D);
    ops::matmul_nt(dy.data, p_.value(Wd_), dh_.data(), M_, F, D, false);
    for (std::size_t i = 0; i < h_.size(); ++i) {
      da_[i] = dh_[i] * u_[i] * ops::silu_grad(a_[i]);
      du_[i] = dh_[i] * ops::silu(a_[i]);
    }
    ops::matmul_tn_acc(x_.data(), da_.data(), p_.grad(Wg_), M_, D, F);
    ops::matmul_tn_acc(x_.data(), du_.data(), p_.grad(Wu_), M_, D, F);
    ops::matmul_nt(da_.data(), p_.value(Wg_), dx.data, M_, D, F, false);
    ops::matmul_nt(du_.data(), p_.value(Wu_), dx.data, M_, D, F, true);
  }

 private:
  swiglu_config cfg_;
  parameter_list<Real> p_;
  int Wg_ = -1, Wu_ = -1, Wd_ = -1;
  index_t M_ = 0;
  shape_t shape_{};
  bool forwarded_ = false;
  std::vector<Real> x_, a_, u_, h_, dh_, da_, du_;
};

}  // namespace linstate::layers
