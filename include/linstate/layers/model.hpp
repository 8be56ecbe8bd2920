// linstate/layers/model.hpp — a tiny language model over a variant V, forward and backward: token
// embedding, N pre-norm blocks (RMSNorm → token mixer → residual; RMSNorm → SwiGLU MLP → residual),
// a final RMSNorm and a tied (the embedding's transpose) or untied output head, and the
// cross-entropy with an ignore index. Not included by <linstate/layers.hpp> (it is the consumer of
// the layers, not one of them); include <linstate/layers/model.hpp>.
//
// \code
//   struct gla : linstate::spec<> {};
//   linstate::layers::model_config c{.vocab = 64, .d_model = 64, .num_layers = 2, .seed = 1};
//   c.mixer = {.num_heads = 2, .head_k = 32, .head_v = 32, .k_map = linstate::layers::feature_map::identity};
//   linstate::layers::model<gla> m(c);
//   std::vector<linstate::layers::parameter_ref<float>> ps;  m.collect(ps);   // "embed.E", "blocks.0.mixer.W_q", ...
//   auto r = m.loss(ids, targets, B, T);   // forward + cross-entropy (+ balance losses); keeps what backward needs
//   linstate::layers::zero_grad(ps);  m.backward();                          // gradients of r.total
// \endcode
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "../linstate.hpp"
#include "embedding.hpp"
#include "linear.hpp"
#include "parameter.hpp"
#include "rms_norm.hpp"
#include "swiglu.hpp"
#include "token_mixer.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace linstate::layers {

//! The target of a position that takes no part in the loss (PyTorch's default, as Zoology's MQAR).
inline constexpr std::int32_t ignore_index = -100;

//! \brief Sizes of a model. `mixer` configures every block's token mixer; its d_model, seed and
//! init_std are set by the model (d_model, a seed derived from `seed` and the block, init_std).
struct model_config {
  index_t vocab = 0;        //!< output classes = input ids, [0, vocab)
  index_t d_model = 0;      //!< D
  index_t num_layers = 1;   //!< blocks
  index_t mlp_hidden = 0;   //!< F of the SwiGLU MLP; 0: 8/3·D rounded up to a multiple of 8
  bool tied_head = true;    //!< logits = h Eᵀ (the embedding's table); false: a linear head W_out [D, vocab]
  double init_std = 0.02;   //!< σ of every weight (fla's initializer_range)
  double norm_eps = 1e-6;   //!< ε of the block and final RMSNorms
  std::uint64_t seed = 0;   //!< initialisation seed; each layer gets its own stream from (seed, layer)
  mixer_config mixer{};     //!< the token mixer of every block
};

//! The loss of one forward: `total = ce + aux` is what backward() differentiates.
struct loss_result {
  double ce = 0;          //!< mean cross-entropy over the positions whose target is not ignore_index
  double aux = 0;         //!< Σ_blocks balance_coefficient · balance loss (0 without a routing router)
  double total = 0;       //!< ce + aux
  std::int64_t count = 0; //!< positions that count (target != ignore_index)
};

namespace layers_detail {
inline std::uint64_t mix_seed(std::uint64_t seed, std::uint64_t a, std::uint64_t b) {
  std::uint64_t z = seed ^ (0x9E3779B97F4A7C15ull * (a + 1)) ^ (0xD1B54A32D192ED03ull * (b + 1));
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
}  // namespace layers_detail

//! \brief Mean cross-entropy of logits `[M, C]` against targets `[M]` (ignore_index: skipped), and
//! its gradient: dlogits (overwritten) = (softmax − onehot) · scale / count, zero on ignored rows.
//! Log-softmax with the row maximum subtracted (stable for any logit range), exponentials in Real,
//! sums in double; rows in parallel (OpenMP), the total summed in row order (deterministic).
//! Throws linstate::error for a target outside [0, C) that is not ignore_index.
template <class Real>
loss_result cross_entropy(const Real* logits, std::span<const std::int32_t> targets, index_t C, Real* dlogits,
                          double scale = 1.0) {
  const index_t M = static_cast<index_t>(targets.size());
  std::int64_t count = 0;
  for (index_t m = 0; m < M; ++m) {
    const std::int32_t t = targets[static_cast<std::size_t>(m)];
    if (t == ignore_index) continue;
    if (t < 0 || t >= C)
      throw error("linstate::layers::cross_entropy: targets[" + std::to_string(m) + "] = " + std::to_string(t) +
                  " is outside [0, vocab = " + std::to_string(C) + ") and is not ignore_index (" +
                  std::to_string(ignore_index) + ")");
    ++count;
  }
  // the per-row losses, kept per calling thread from call to call (a training step allocates
  // nothing); `row` is a plain reference, so the OpenMP threads below all write the caller's vector
  static thread_local std::vector<double> kept_rows;
  std::vector<double>& row = kept_rows;
  row.assign(static_cast<std::size_t>(M), 0.0);
  const double inv = count ? scale / static_cast<double>(count) : 0.0;
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) if (M * C > 32768)
#endif
  for (index_t m = 0; m < M; ++m) {
    const Real* l = logits + m * C;
    Real* d = dlogits ? dlogits + m * C : nullptr;
    const std::int32_t t = targets[static_cast<std::size_t>(m)];
    if (t == ignore_index) {
      if (d) std::fill(d, d + C, Real(0));
      continue;
    }
    Real mx = l[0];
    for (index_t c = 1; c < C; ++c) mx = std::max(mx, l[c]);
    double s = 0;
    for (index_t c = 0; c < C; ++c) s += static_cast<double>(std::exp(l[c] - mx));
    const double lse = std::log(s);
    row[static_cast<std::size_t>(m)] = lse - static_cast<double>(l[t] - mx);
    if (d) {
      for (index_t c = 0; c < C; ++c) d[c] = static_cast<Real>(static_cast<double>(std::exp(l[c] - mx)) / s * inv);
      d[t] -= static_cast<Real>(inv);
    }
  }
  loss_result r;
  for (double v : row) r.ce += v;
  r.count = count;
  r.ce = count ? r.ce / static_cast<double>(count) : 0.0;
  r.total = r.ce;
  return r;
}

//! \brief Embedding → N blocks → final RMSNorm → head, for variant V (see the file's comment).
//! Parameter names: "embed.E"; "blocks.<i>.norm1.w", "blocks.<i>.mixer.<mixer's names>",
//! "blocks.<i>.norm2.w", "blocks.<i>.mlp.W_gate|W_up|W_down"; "norm_f.w"; "head.W" when untied.
//! `Real` = double gives the fp64 model of the gradient checks (the token mixer's fp64 path).
template <class V, class Real = float, class Algorithm = automatic, class Strategy = varlen>
class model {
  static_assert(std::is_same_v<Real, float> || std::is_same_v<Real, double>,
                "linstate::layers::model<V, Real>: Real must be float or double");

 public:
  using variant = V;
  using real = Real;
  using mixer_type = token_mixer<V, Real, Algorithm, Strategy>;

  struct block {
    rms_norm<Real> norm1, norm2;
    mixer_type mixer;
    swiglu<Real> mlp;
  };

  explicit model(const model_config& c) : cfg_(c) {
    const std::string api = "linstate::layers::model";
    if (c.vocab < 1) throw error(api + ": model_config.vocab = " + std::to_string(c.vocab) + ": must be >= 1");
    if (c.d_model < 1) throw error(api + ": model_config.d_model = " + std::to_string(c.d_model) + ": must be >= 1");
    if (c.num_layers < 1)
      throw error(api + ": model_config.num_layers = " + std::to_string(c.num_layers) + ": must be >= 1");
    if (c.mlp_hidden < 0) throw error(api + ": model_config.mlp_hidden must be >= 0 (0: 8/3 d_model)");
    F_ = c.mlp_hidden ? c.mlp_hidden : ((8 * c.d_model + 2) / 3 + 7) / 8 * 8;
    using layers_detail::mix_seed;
    emb_ = std::make_unique<embedding<Real>>(
        embedding_config{.vocab = c.vocab, .d_model = c.d_model, .init_std = c.init_std, .seed = mix_seed(c.seed, 0, 0)});
    for (index_t i = 0; i < c.num_layers; ++i) {
      mixer_config mc = c.mixer;
      mc.d_model = c.d_model, mc.init_std = c.init_std, mc.seed = mix_seed(c.seed, 1, static_cast<std::uint64_t>(i));
      blocks_.push_back(std::unique_ptr<block>(new block{
          rms_norm<Real>(c.d_model, c.norm_eps), rms_norm<Real>(c.d_model, c.norm_eps), mixer_type(mc),
          swiglu<Real>(swiglu_config{.d_model = c.d_model, .hidden = F_, .init_std = c.init_std,
                                     .seed = mix_seed(c.seed, 2, static_cast<std::uint64_t>(i))})}));
    }
    norm_f_ = std::make_unique<rms_norm<Real>>(c.d_model, c.norm_eps);
    if (!c.tied_head)
      head_ = std::make_unique<linear<Real>>(
          linear_config{.in = c.d_model, .out = c.vocab, .init_std = c.init_std, .seed = mix_seed(c.seed, 3, 0)});
  }
  model(const model&) = delete;
  model& operator=(const model&) = delete;

  const model_config& config() const { return cfg_; }
  index_t mlp_hidden() const { return F_; }
  index_t num_layers() const { return static_cast<index_t>(blocks_.size()); }
  block& layer(index_t i) { return *blocks_.at(static_cast<std::size_t>(i)); }
  embedding<Real>& embed() { return *emb_; }

  //! Appends a named view of every parameter, in a fixed order (the order of checkpoints).
  void collect(std::vector<parameter_ref<Real>>& out, const std::string& prefix = "") {
    emb_->collect(out, prefix + "embed.");
    for (std::size_t i = 0; i < blocks_.size(); ++i) {
      const std::string b = prefix + "blocks." + std::to_string(i) + ".";
      blocks_[i]->norm1.collect(out, b + "norm1.");
      blocks_[i]->mixer.collect(out, b + "mixer.");
      blocks_[i]->norm2.collect(out, b + "norm2.");
      blocks_[i]->mlp.collect(out, b + "mlp.");
    }
    norm_f_->collect(out, prefix + "norm_f.");
    if (head_) head_->collect(out, prefix + "head.");
  }
  std::vector<parameter_ref<Real>> parameters() {
    std::vector<parameter_ref<Real>> ps;
    collect(ps);
    return ps;
  }

  //! \brief logits `[B,T,vocab]` (row-major B·T·vocab) of ids `[B,T]`; returns Σ_blocks
  //! balance_coefficient · aux. Keeps what backward needs.
  double forward(std::span<const std::int32_t> ids, index_t B, index_t T) {
    static const std::string api = "linstate::layers::model::forward";  // static: a step builds no string
    if (B < 0 || T < 0 || static_cast<index_t>(ids.size()) != B * T)
      throw error(api + ": ids hold " + std::to_string(ids.size()) + " tokens but [B,T] = [" + std::to_string(B) + "," +
                  std::to_string(T) + "]");
    B_ = B, T_ = T;
    const index_t D = cfg_.d_model, M = B * T;
    const shape_t xs{B, T, D};
    h_.resize(static_cast<std::size_t>(M * D)), a_.resize(h_.size()), m_.resize(h_.size());
    emb_->forward(ids, {h_.data(), xs});
    double aux = 0;
    for (auto& bp : blocks_) {
      block& b = *bp;
      b.norm1.forward({h_.data(), xs}, {a_.data(), xs});
      const auto t0 = timer::now();
      const double ax = static_cast<double>(b.mixer.forward({a_.data(), xs}, {m_.data(), xs}));
      mixer_s_ += seconds(t0);
      aux += b.mixer.config().balance_coefficient * ax;
      add_into(h_, m_);
      b.norm2.forward({h_.data(), xs}, {a_.data(), xs});
      b.mlp.forward({a_.data(), xs}, {m_.data(), xs});
      add_into(h_, m_);
    }
    hf_.resize(h_.size());
    norm_f_->forward({h_.data(), xs}, {hf_.data(), xs});
    logits_.resize(static_cast<std::size_t>(M * cfg_.vocab));
    const tensor_view<Real> lv{logits_.data(), {B, T, cfg_.vocab}};
    if (head_) head_->forward({hf_.data(), xs}, lv);
    else emb_->head({hf_.data(), xs}, lv);
    aux_ = aux;
    forwarded_ = true;
    return aux;
  }

  //! Seconds spent in the blocks' token mixers (forward and backward) since construction or the last
  //! reset_timing(); kernel_seconds() is the part of it inside the state kernel (linstate::forward /
  //! backward). Read around training steps for the split between the token mixer and the rest.
  double mixer_seconds() const { return mixer_s_; }
  double kernel_seconds() const {
    double s = 0;
    for (const auto& b : blocks_) s += b->mixer.kernel_seconds();
    return s;
  }
  void reset_timing() {
    mixer_s_ = 0;
    for (auto& b : blocks_) b->mixer.reset_timing();
  }

  //! The logits of the last forward, `[B,T,vocab]`.
  std::span<const Real> logits() const { return {logits_.data(), logits_.size()}; }

  //! \brief forward() and the cross-entropy against targets `[B,T]` (ignore_index: skipped); the
  //! gradient of `total` at the logits is kept for backward().
  loss_result loss(std::span<const std::int32_t> ids, std::span<const std::int32_t> targets, index_t B, index_t T) {
    if (targets.size() != ids.size())
      throw error("linstate::layers::model::loss: targets hold " + std::to_string(targets.size()) +
                  " entries but ids hold " + std::to_string(ids.size()));
    const double aux = forward(ids, B, T);
    dlogits_.resize(logits_.size());
    loss_result r = cross_entropy<Real>(logits_.data(), targets, cfg_.vocab, dlogits_.data());
    r.aux = aux, r.total = r.ce + aux;
    have_dlogits_ = true;
    return r;
  }

  //! Backward of the last loss(): adds ∂total/∂θ into every parameter's grad.
  void backward() {
    if (!forwarded_ || !have_dlogits_)
      throw error("linstate::layers::model::backward: call loss() first (it keeps the gradient at the logits)");
    backward(std::span<const Real>(dlogits_.data(), dlogits_.size()));
  }

  //! \brief Backward of the last forward for a loss whose gradient at the logits is `dlogits`
  //! `[B,T,vocab]`, plus the blocks' balance terms: adds into every parameter's grad.
  void backward(std::span<const Real> dlogits) {
    static const std::string api = "linstate::layers::model::backward";
    if (!forwarded_) throw error(api + ": no forward call to differentiate (call forward first)");
    if (dlogits.size() != logits_.size())
      throw error(api + ": dlogits hold " + std::to_string(dlogits.size()) + " values but the last forward's logits [B,T,vocab] hold " +
                  std::to_string(logits_.size()));
    const index_t D = cfg_.d_model, M = B_ * T_;
    const shape_t xs{B_, T_, D};
    const tensor_view<const Real> dl{dlogits.data(), {B_, T_, cfg_.vocab}};
    dh_.resize(static_cast<std::size_t>(M * D)), da_.resize(dh_.size()), dm_.resize(dh_.size());
    // dm_ = ∂/∂hf, then dh_ = ∂/∂h (the last residual stream)
    if (head_) head_->backward(dl, {dm_.data(), xs});
    else emb_->head_backward({hf_.data(), xs}, dl, {dm_.data(), xs});
    norm_f_->backward({dm_.data(), xs}, {dh_.data(), xs});
    for (auto it = blocks_.rbegin(); it != blocks_.rend(); ++it) {
      block& b = **it;
      b.mlp.backward({dh_.data(), xs}, {da_.data(), xs});
      b.norm2.backward({da_.data(), xs}, {dm_.data(), xs});
      add_into(dh_, dm_);
      const auto t0 = timer::now();
      b.mixer.backward({dh_.data(), xs}, {da_.data(), xs});
      mixer_s_ += seconds(t0);
      b.norm1.backward({da_.data(), xs}, {dm_.data(), xs});
      add_into(dh_, dm_);
    }
    emb_->backward({dh_.data(), xs});
  }

 private:
  using timer = std::chrono::steady_clock;
  static double seconds(timer::time_point t0) { return std::chrono::duration<double>(timer::now() - t0).count(); }
  static void add_into(std::vector<Real>& a, const std::vector<Real>& b) {
    for (std::size_t i = 0; i < a.size(); ++i) a[i] += b[i];
  }

  model_config cfg_;
  index_t F_ = 0, B_ = 0, T_ = 0;
  std::unique_ptr<embedding<Real>> emb_;
  std::vector<std::unique_ptr<block>> blocks_;
  std::unique_ptr<rms_norm<Real>> norm_f_;
  std::unique_ptr<linear<Real>> head_;
  std::vector<Real> h_, a_, m_, hf_, logits_, dlogits_, dh_, da_, dm_;
  double aux_ = 0, mixer_s_ = 0;
  bool forwarded_ = false, have_dlogits_ = false;
};

}  // namespace linstate::layers
