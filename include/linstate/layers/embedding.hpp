// linstate/layers/embedding.hpp — a token embedding table, and its transpose as a tied output head.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "linear.hpp"

namespace linstate::layers {

struct embedding_config {
  index_t vocab = 0, d_model = 0;
  double init_std = 0.02;  //!< E ~ N(0, init_std²) (fla's models)
  std::uint64_t seed = 0;
};

//! \brief `y[b,t,:] = E[ids[b,t], :]` with E `[vocab, D]` (parameter "E"); `head` is the tied output
//! projection `logits = h Eᵀ` (`[..., D]` → `[..., vocab]`), whose gradient adds into the same E.
template <class Real = float>
class embedding {
  static_assert(std::is_same_v<Real, float> || std::is_same_v<Real, double>,
                "linstate::layers::embedding<Real>: Real must be float or double");

 public:
  using real = Real;
  explicit embedding(const embedding_config& c) : cfg_(c) {
    if (c.vocab < 1 || c.d_model < 1)
      throw error("linstate::layers::embedding: embedding_config.vocab = " + std::to_string(c.vocab) + ", d_model = " +
                  std::to_string(c.d_model) + ": both must be >= 1");
    E_ = p_.add("E", {c.vocab, c.d_model});
    p_.init_normal(E_, c.init_std, c.seed);
  }
  void collect(std::vector<parameter_ref<Real>>& out, const std::string& prefix = "") { p_.collect(out, prefix); }
  parameter_list<Real>& params() { return p_; }

  //! y `[B,T,D]` from ids `[B,T]` (B·T ids, row-major); every id must be in [0, vocab).
  void forward(std::span<const std::int32_t> ids, const tensor_view<Real>& y) {
    static constexpr const char* api = "linstate::layers::embedding::forward";
    const index_t D = cfg_.d_model;
    if (y.empty() || y.rank() != 3 || y.size(2) != D || y.size(0) * y.size(1) != static_cast<index_t>(ids.size()))
      throw error(std::string(api) + ": y has shape " + (y.empty() ? std::string("(not given)") : y.shape.str()) +
                  " but must be [B,T,D] with D = " + std::to_string(D) + " and B·T = " + std::to_string(ids.size()) +
                  " (the number of ids)");
    for (std::size_t i = 0; i < ids.size(); ++i)
      if (ids[i] < 0 || ids[i] >= cfg_.vocab)
        throw error(std::string(api) + ": ids[" + std::to_string(i) + "] = " + std::to_string(ids[i]) + " is outside [0, vocab = " +
                    std::to_string(cfg_.vocab) + ")");
    ids_.assign(ids.begin(), ids.end());
    shape_ = y.shape;
    const Real* E = p_.value(E_);
    for (std::size_t i = 0; i < ids.size(); ++i) std::copy_n(E + ids[i] * D, D, y.data + static_cast<index_t>(i) * D);
    forwarded_ = true;
  }
  //! Adds dy `[B,T,D]` into the rows of E the last forward read.
  void backward(const tensor_view<const Real>& dy) {
    static constexpr const char* api = "linstate::layers::embedding::backward";
    if (!forwarded_) throw error(std::string(api) + ": no forward call to differentiate (call forward first)");
    ops::require(api, "dy", dy, shape_, "(like the last forward's y)");
    const index_t D = cfg_.d_model;
    Real* dE = p_.grad(E_);
    for (std::size_t i = 0; i < ids_.size(); ++i)
      for (index_t j = 0; j < D; ++j) dE[ids_[i] * D + j] += dy.data[static_cast<index_t>(i) * D + j];
  }

  //! Tied output head: logits `[..., vocab]` = h `[..., D]` · Eᵀ.
  void head(const tensor_view<const Real>& h, const tensor_view<Real>& logits) const {
    static constexpr const char* api = "linstate::layers::embedding::head";
    const index_t M = layers_detail::rows_of(api, "h", h, cfg_.d_model, "D");
    ops::require(api, "logits", logits, layers_detail::with_last(h.shape, cfg_.vocab), "(h's shape with the last extent = vocab)");
    ops::matmul_nt(h.data, p_.value(E_), logits.data, M, cfg_.vocab, cfg_.d_model, false);
  }
  //! Backward of head(): dh (overwritten) = dlogits · E, and dE += dlogitsᵀ · h.
  void head_backward(const tensor_view<const Real>& h, const tensor_view<const Real>& dlogits, const tensor_view<Real>& dh) {
    static constexpr const char* api = "linstate::layers::embedding::head_backward";
    const index_t M = layers_detail::rows_of(api, "h", h, cfg_.d_model, "D");
    ops::require(api, "dlogits", dlogits, layers_detail::with_last(h.shape, cfg_.vocab), "(like head()'s logits)");
    ops::require(api, "dh", dh, h.shape, "(like h)");
    ops::matmul(dlogits.data, p_.value(E_), dh.data, M, cfg_.vocab, cfg_.d_model);
    ops::matmul_tn_acc(dlogits.data, h.data, p_.grad(E_), M, cfg_.vocab, cfg_.d_model);
  }

 private:
  embedding_config cfg_;
  parameter_list<Real> p_;
  int E_ = -1;
  shape_t shape_{};
  bool forwarded_ = false;
  std::vector<std::int32_t> ids_;
};

}  // namespace linstate::layers
