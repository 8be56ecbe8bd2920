// linstate/layers/cuda_model.cuh — the model of <linstate/layers/model.hpp> on the GPU (tied head
// only), with AdamW and global-norm clipping on device parameters.
//
// The same model_config, parameter names, order, shapes and initial values as model<V> (built by a
// CPU model of that config and uploaded; the blocks' token mixers are cuda_token_mixer<V>s of the
// configs the CPU model derived), the same loss (mean cross-entropy over the targets that are not
// ignore_index, plus Σ_blocks balance_coefficient · aux) and the same gradients, up to fp32
// summation order. What runs where: the embedding gather and its scatter-add backward, the RMSNorms,
// SwiGLU's elementwise part and the cross-entropy are kernels of this header (one thread per element
// or row, fixed-order sums, no atomics: deterministic); every product is cuBLAS fp32 without TF32, as
// in cuda_token_mixer.cuh.
//
// \code
//   #include <linstate/layers/cuda_model.cuh>                         // .cu file; link -lcublas
//   linstate::layers::cuda_model<gla> m(cfg, stream);
//   std::vector<linstate::layers::parameter_ref<float>> ps;  m.collect(ps);   // DEVICE views, CPU names
//   linstate::layers::cuda_adamw opt(ps, {.weight_decay = 0.1}, stream);
//   for (...) {
//     m.zero_grad();
//     auto r = m.loss(ids, targets, B, T);        // host spans [B,T]; synchronises (returns the loss)
//     m.backward();
//     linstate::layers::cuda_clip_grad_norm(ps, 1.0, stream);   // synchronises (the norm)
//     opt.step(lr(s));
//   }
//   linstate::layers::model<gla> cpu(cfg);  m.copy_to(cpu);      // parameters to the CPU model (copy_from: back)
// \endcode
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <linstate/layers/cuda_token_mixer.cuh>
#include <linstate/layers/model.hpp>
#include <linstate/layers/train.hpp>

namespace linstate::layers {
namespace cuda_layers_detail {

#define LINSTATE_LAYERS_FOR(i, n) \
  for (index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x; i < (n); i += static_cast<index_t>(blockDim.x) * gridDim.x)

//! y[m,:] = E[ids[m],:]
static __global__ void gather_kernel(const float* __restrict__ E, const std::int32_t* __restrict__ ids, float* __restrict__ y, index_t M,
                              index_t D) {
  LINSTATE_LAYERS_FOR(i, M * D) y[i] = E[static_cast<index_t>(ids[i / D]) * D + i % D];
}
//! dE[v,d] += Σ_{m: ids[m] = v} dy[m,d], tokens in order (one thread per entry of E)
static __global__ void scatter_add_kernel(const float* __restrict__ dy, const std::int32_t* __restrict__ ids, float* __restrict__ dE,
                                   index_t M, index_t vocab, index_t D) {
  LINSTATE_LAYERS_FOR(i, vocab * D) {
    const index_t v = i / D, d = i % D;
    float acc = 0;
    bool any = false;
    for (index_t m = 0; m < M; ++m)
      if (ids[m] == v) acc += dy[m * D + d], any = true;
    if (any) dE[i] += acc;
  }
}
//! h_i = silu(a_i) u_i
static __global__ void swiglu_fwd_kernel(const float* __restrict__ a, const float* __restrict__ u, float* __restrict__ h, index_t n) {
  LINSTATE_LAYERS_FOR(i, n) h[i] = a[i] * sigmoid_d(a[i]) * u[i];
}
//! da = dh u silu'(a), du = dh silu(a)
static __global__ void swiglu_bwd_kernel(const float* __restrict__ a, const float* __restrict__ u, const float* __restrict__ dh,
                                  float* __restrict__ da, float* __restrict__ du, index_t n) {
  LINSTATE_LAYERS_FOR(i, n) {
    const float s = sigmoid_d(a[i]);
    da[i] = dh[i] * u[i] * s * (1.f + a[i] * (1.f - s));
    du[i] = dh[i] * a[i] * s;
  }
}
static __global__ void add_kernel(float* __restrict__ a, const float* __restrict__ b, index_t n) {
  LINSTATE_LAYERS_FOR(i, n) a[i] += b[i];
}
//! per row: loss_m = logsumexp(l) − l[t] (double), dl = (softmax − onehot)·inv; ignored rows: 0
static __global__ void cross_entropy_kernel(const float* __restrict__ logits, const std::int32_t* __restrict__ targets,
                                     float* __restrict__ dl, double* __restrict__ row, index_t M, index_t C, double inv) {
  LINSTATE_LAYERS_FOR(m, M) {
    const float* l = logits + m * C;
    float* d = dl + m * C;
    const std::int32_t t = targets[m];
    if (t == ignore_index) {
      for (index_t c = 0; c < C; ++c) d[c] = 0.f;
      row[m] = 0;
      continue;
    }
    float mx = l[0];
    for (index_t c = 1; c < C; ++c) mx = fmaxf(mx, l[c]);
    double s = 0;
    for (index_t c = 0; c < C; ++c) s += static_cast<double>(expf(l[c] - mx));
    row[m] = log(s) - static_cast<double>(l[t] - mx);
    for (index_t c = 0; c < C; ++c) d[c] = static_cast<float>(static_cast<double>(expf(l[c] - mx)) / s * inv);
    d[t] -= static_cast<float>(inv);
  }
}
//! AdamW (train.hpp's adamw::step), in double per element
static __global__ void adamw_kernel(float* __restrict__ w, const float* __restrict__ g, float* __restrict__ m, float* __restrict__ v,
                             index_t n, double b1, double b2, double c1, double c2, double lr, double decay, double eps) {
  LINSTATE_LAYERS_FOR(j, n) {
    const double gj = static_cast<double>(g[j]);
    const double mj = b1 * static_cast<double>(m[j]) + (1.0 - b1) * gj;
    const double vj = b2 * static_cast<double>(v[j]) + (1.0 - b2) * gj * gj;
    m[j] = static_cast<float>(mj), v[j] = static_cast<float>(vj);
    const double th = static_cast<double>(w[j]) * decay;
    w[j] = static_cast<float>(th - lr * (mj / c1) / (sqrt(vj / c2) + eps));
  }
}
//! one block: out += Σ x_i² in double, a fixed order (per-thread strided sums, then a tree)
static __global__ void sumsq_kernel(const float* __restrict__ x, index_t n, double* __restrict__ out) {
  __shared__ double part[256];
  double s = 0;
  for (index_t i = threadIdx.x; i < n; i += blockDim.x) s += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  part[threadIdx.x] = s;
  __syncthreads();
  for (int w = 128; w > 0; w >>= 1) {
    if (static_cast<int>(threadIdx.x) < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) *out += part[0];
}
static __global__ void scale_kernel(float* __restrict__ x, float s, index_t n) {
  LINSTATE_LAYERS_FOR(i, n) x[i] *= s;
}
#undef LINSTATE_LAYERS_FOR

}  // namespace cuda_layers_detail

//! \brief AdamW over DEVICE parameters (collect() of cuda_model / cuda_token_mixer): train.hpp's adamw,
//! the same formula per element (moments fp32, the update in double), on `stream`, no synchronisation.
class cuda_adamw {
 public:
  cuda_adamw(std::vector<parameter_ref<float>> ps, const adamw_config& c = {}, cudaStream_t stream = nullptr)
      : ps_(std::move(ps)), cfg_(c), stream_(stream) {
    adamw<float> check(std::vector<parameter_ref<float>>{}, c);  // the CPU optimiser's checks and messages
    for (const auto& p : ps_) {
      const std::size_t n = static_cast<std::size_t>(p.value.numel());
      m_.emplace_back(n), v_.emplace_back(n);
      if (n) {
        cuda_detail::check(cudaMemsetAsync(m_.back().data(), 0, n * sizeof(float), stream_), "cudaMemsetAsync", "linstate::layers::cuda_adamw");
        cuda_detail::check(cudaMemsetAsync(v_.back().data(), 0, n * sizeof(float), stream_), "cudaMemsetAsync", "linstate::layers::cuda_adamw");
      }
    }
  }
  std::int64_t steps() const { return t_; }
  //! One update with learning rate `lr` from the gradients now in the parameters.
  void step(double lr) {
    ++t_;
    const double b1 = cfg_.beta1, b2 = cfg_.beta2;
    const double c1 = 1.0 - std::pow(b1, static_cast<double>(t_)), c2 = 1.0 - std::pow(b2, static_cast<double>(t_));
    for (std::size_t i = 0; i < ps_.size(); ++i) {
      const auto& p = ps_[i];
      const index_t n = p.value.numel();
      if (!n) continue;
      const double decay = p.weight_decay ? 1.0 - lr * cfg_.weight_decay : 1.0;
      cuda_layers_detail::adamw_kernel<<<cuda_layers_detail::grid_for(n), cuda_layers_detail::block, 0, stream_>>>(
          p.value.data, p.grad.data, m_[i].data(), v_[i].data(), n, b1, b2, c1, c2, lr, decay, cfg_.eps);
      cuda_detail::check_launch("adamw_kernel", "linstate::layers::cuda_adamw");
    }
  }
  //! The moments of parameter i (device); writable, with set_steps, to restore a checkpoint's state.
  const device_buffer<float>& first_moment(std::size_t i) const { return m_.at(i); }
  const device_buffer<float>& second_moment(std::size_t i) const { return v_.at(i); }
  device_buffer<float>& first_moment(std::size_t i) { return m_.at(i); }
  device_buffer<float>& second_moment(std::size_t i) { return v_.at(i); }
  void set_steps(std::int64_t t) { t_ = t; }
  //! \brief The state of a CPU adamw<float> over the same parameter list (a checkpoint's, say): its
  //! moments and step count uploaded. Throws when the lists differ in length or sizes.
  void load_state(const adamw<float>& host) {
    const char* api = "linstate::layers::cuda_adamw::load_state";
    if (host.params().size() != ps_.size())
      throw error(std::string(api) + ": the CPU optimiser has " + std::to_string(host.params().size()) + " parameters, this one " +
                  std::to_string(ps_.size()));
    for (std::size_t i = 0; i < ps_.size(); ++i) {
      if (host.first_moment(i).size() != m_[i].size())
        throw error(std::string(api) + ": parameter " + std::to_string(i) + " (" + ps_[i].name + ") holds " + std::to_string(m_[i].size()) +
                    " values here but " + std::to_string(host.first_moment(i).size()) + " on the CPU");
      m_[i].upload(host.first_moment(i).data(), stream_), v_[i].upload(host.second_moment(i).data(), stream_);
    }
    cuda_detail::check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize", api);
    t_ = host.steps();
  }
  //! \brief This state into a CPU adamw<float> over the same parameter list (to save a checkpoint).
  void store_state(adamw<float>& host) const {
    const char* api = "linstate::layers::cuda_adamw::store_state";
    if (host.params().size() != ps_.size())
      throw error(std::string(api) + ": the CPU optimiser has " + std::to_string(host.params().size()) + " parameters, this one " +
                  std::to_string(ps_.size()));
    for (std::size_t i = 0; i < ps_.size(); ++i) {
      if (host.first_moment(i).size() != m_[i].size())
        throw error(std::string(api) + ": parameter " + std::to_string(i) + " (" + ps_[i].name + ") holds " + std::to_string(m_[i].size()) +
                    " values here but " + std::to_string(host.first_moment(i).size()) + " on the CPU");
      m_[i].download(host.first_moment(i).data(), stream_), v_[i].download(host.second_moment(i).data(), stream_);
    }
    cuda_detail::check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize", api);
    host.set_steps(t_);
  }

 private:
  std::vector<parameter_ref<float>> ps_;
  adamw_config cfg_;
  cudaStream_t stream_;
  std::vector<device_buffer<float>> m_, v_;
  std::int64_t t_ = 0;
};

//! \brief train.hpp's clip_grad_norm on DEVICE gradients: the global L2 norm (double, list order, a
//! fixed order within each tensor), every gradient scaled by max_norm / norm when the norm exceeds it.
//! Returns the norm before clipping; synchronises `stream` to read it.
inline double cuda_clip_grad_norm(const std::vector<parameter_ref<float>>& ps, double max_norm, cudaStream_t stream = nullptr) {
  const char* api = "linstate::layers::cuda_clip_grad_norm";
  if (!(max_norm > 0)) throw error(std::string(api) + ": max_norm must be > 0");
  device_buffer<double> acc(1, stream);
  cuda_detail::check(cudaMemsetAsync(acc.data(), 0, sizeof(double), stream), "cudaMemsetAsync", api);
  for (const auto& p : ps)
    if (p.grad.numel()) {
      cuda_layers_detail::sumsq_kernel<<<1, 256, 0, stream>>>(p.grad.data, p.grad.numel(), acc.data());
      cuda_detail::check_launch("sumsq_kernel", api);
    }
  double ss = 0;
  cuda_detail::check(cudaMemcpyAsync(&ss, acc.data(), sizeof(double), cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync", api);
  cuda_detail::check(cudaStreamSynchronize(stream), "cudaStreamSynchronize", api);
  const double n = std::sqrt(ss);
  if (std::isfinite(n) && n > max_norm) {
    const float s = static_cast<float>(max_norm / n);
    for (const auto& p : ps)
      if (p.grad.numel()) {
        cuda_layers_detail::scale_kernel<<<cuda_layers_detail::grid_for(p.grad.numel()), cuda_layers_detail::block, 0, stream>>>(
            p.grad.data, s, p.grad.numel());
        cuda_detail::check_launch("scale_kernel", api);
      }
  }
  return n;
}

//! \brief model<V>'s forward, cross-entropy and backward on the GPU (see the top of this header).
template <class V, class Algorithm = automatic, class Strategy = varlen>
class cuda_model {
 public:
  using host_model = model<V, float, Algorithm, Strategy>;
  using mixer_type = cuda_token_mixer<V, Algorithm, Strategy>;

  explicit cuda_model(const model_config& c, cudaStream_t stream = nullptr)
      : cfg_(c), stream_(stream), blas_(stream, "linstate::layers::cuda_model") {
    if (!c.tied_head)
      throw error("linstate::layers::cuda_model: model_config.tied_head = false (a linear head) is not implemented on the GPU");
    host_model h(c);  // the CPU model's checks, names, shapes and initial values
    F_ = h.mlp_hidden(), L_ = h.num_layers();
    std::vector<parameter_ref<float>> ps;
    h.collect(ps);
    for (auto& p : ps) {
      if (p.name.find(".mixer.") != std::string::npos) continue;
      dparam d{p.name, p.value.shape, p.weight_decay, device_buffer<float>(static_cast<std::size_t>(p.value.numel())),
               device_buffer<float>(static_cast<std::size_t>(p.value.numel()))};
      d.value.upload(p.value.data, stream_);
      check(cudaMemsetAsync(d.grad.data(), 0, d.grad.size() * sizeof(float), stream_), "cudaMemsetAsync");
      own_.push_back(std::move(d));
    }
    for (index_t i = 0; i < L_; ++i) mixers_.push_back(std::make_unique<mixer_type>(h.layer(i).mixer.config(), stream_));
    E_ = find("embed.E"), nf_ = find("norm_f.w");
    for (index_t i = 0; i < L_; ++i) {
      const std::string b = "blocks." + std::to_string(i) + ".";
      blocks_.push_back({find(b + "norm1.w"), find(b + "norm2.w"), find(b + "mlp.W_gate"), find(b + "mlp.W_up"), find(b + "mlp.W_down")});
    }
    auxd_ = device_buffer<float>(static_cast<std::size_t>(L_));
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

  const model_config& config() const { return cfg_; }
  index_t num_layers() const { return L_; }
  mixer_type& mixer(index_t i) { return *mixers_.at(static_cast<std::size_t>(i)); }

  //! Appends a named DEVICE view of every parameter, in model<V>::collect's order and names.
  void collect(std::vector<parameter_ref<float>>& out, const std::string& prefix = "") {
    auto put = [&](int i) {
      auto& p = own_[static_cast<std::size_t>(i)];
      out.push_back({prefix + p.name, p.value.view(p.shape), p.grad.view(p.shape), p.weight_decay});
    };
    put(E_);
    for (index_t i = 0; i < L_; ++i) {
      const auto& b = blocks_[static_cast<std::size_t>(i)];
      put(b.n1);
      mixers_[static_cast<std::size_t>(i)]->collect(out, prefix + "blocks." + std::to_string(i) + ".mixer.");
      put(b.n2), put(b.Wg), put(b.Wu), put(b.Wd);
    }
    put(nf_);
  }
  std::vector<parameter_ref<float>> parameters() {
    std::vector<parameter_ref<float>> ps;
    collect(ps);
    return ps;
  }
  void zero_grad() {
    for (auto& p : own_) check(cudaMemsetAsync(p.grad.data(), 0, p.grad.size() * sizeof(float), stream_), "cudaMemsetAsync");
    for (auto& m : mixers_) m->zero_grad();
  }
  //! Values (and, with `grads`, gradients) to / from a CPU model of the same config, by name and shape.
  template <class A, class S>
  void copy_to(model<V, float, A, S>& cpu, bool grads = false) {
    std::vector<parameter_ref<float>> host, dev;
    cpu.collect(host), collect(dev);
    transfer(host, dev, false, grads);
  }
  template <class A, class S>
  void copy_from(model<V, float, A, S>& cpu) {
    std::vector<parameter_ref<float>> host, dev;
    cpu.collect(host), collect(dev);
    transfer(host, dev, true, false);
  }

  //! \brief forward and cross-entropy of ids / targets `[B,T]` (HOST spans; ignore_index skipped); keeps
  //! the gradient at the logits for backward(). Synchronises (returns the loss).
  loss_result loss(std::span<const std::int32_t> ids, std::span<const std::int32_t> targets, index_t B, index_t T) {
    const std::string api = "linstate::layers::cuda_model::loss";
    if (B < 0 || T < 0 || static_cast<index_t>(ids.size()) != B * T)
      throw error(api + ": ids hold " + std::to_string(ids.size()) + " tokens but [B,T] = [" + std::to_string(B) + "," +
                  std::to_string(T) + "]");
    if (targets.size() != ids.size())
      throw error(api + ": targets hold " + std::to_string(targets.size()) + " entries but ids hold " + std::to_string(ids.size()));
    std::int64_t count = 0;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] < 0 || ids[i] >= cfg_.vocab)
        throw error(api + ": ids[" + std::to_string(i) + "] = " + std::to_string(ids[i]) + " is outside [0, vocab = " +
                    std::to_string(cfg_.vocab) + ")");
      const std::int32_t t = targets[i];
      if (t == ignore_index) continue;
      if (t < 0 || t >= cfg_.vocab)
        throw error(api + ": targets[" + std::to_string(i) + "] = " + std::to_string(t) + " is outside [0, vocab = " +
                    std::to_string(cfg_.vocab) + ") and is not ignore_index (" + std::to_string(ignore_index) + ")");
      ++count;
    }
    B_ = B, T_ = T;
    const index_t M = B * T, D = cfg_.d_model, C = cfg_.vocab;
    if (ids_.size() < ids.size()) ids_ = device_buffer<std::int32_t>(ids.size(), stream_), tg_ = device_buffer<std::int32_t>(ids.size(), stream_);
    check(cudaMemcpyAsync(ids_.data(), ids.data(), ids.size() * 4, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync(ids)");
    check(cudaMemcpyAsync(tg_.data(), targets.data(), ids.size() * 4, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync(targets)");
    act_.resize(static_cast<std::size_t>(L_));
    ws(ones_, M), fill_ones(M);
    float* h = ws(h0_, M * D);
    cuda_layers_detail::gather_kernel<<<grid(M * D), cuda_layers_detail::block, 0, stream_>>>(val(E_), ids_.data(), h, M, D);
    launched("gather_kernel");
    const shape_t xs{B, T, D};
    for (index_t i = 0; i < L_; ++i) {
      auto& b = blocks_[static_cast<std::size_t>(i)];
      auto& a = act_[static_cast<std::size_t>(i)];
      float* hin = ws(a.h_in, M * D);
      copy(hin, h, M * D);
      rms_forward(hin, val(b.n1), ws(a.a1, M * D), ws(a.r1, M), M);
      mixers_[static_cast<std::size_t>(i)]->forward({a.a1.data(), xs}, {ws(m_, M * D), xs}, auxd_.data() + i);
      float* hmid = ws(a.h_mid, M * D);
      copy(hmid, hin, M * D), add(hmid, m_.data(), M * D);
      rms_forward(hmid, val(b.n2), ws(a.a2, M * D), ws(a.r2, M), M);
      cuda_layers_detail::mm(blas(), a.a2.data(), val(b.Wg), ws(a.g, M * F_), M, D, F_, 0.f);
      cuda_layers_detail::mm(blas(), a.a2.data(), val(b.Wu), ws(a.u, M * F_), M, D, F_, 0.f);
      cuda_layers_detail::swiglu_fwd_kernel<<<grid(M * F_), cuda_layers_detail::block, 0, stream_>>>(a.g.data(), a.u.data(),
                                                                                                      ws(a.hh, M * F_), M * F_);
      launched("swiglu_fwd_kernel");
      cuda_layers_detail::mm(blas(), a.hh.data(), val(b.Wd), m_.data(), M, F_, D, 0.f);
      copy(h, hmid, M * D), add(h, m_.data(), M * D);
    }
    rms_forward(h, val(nf_), ws(hf_, M * D), ws(rf_, M), M);
    // tied head: logits = hf Eᵀ
    cuda_layers_detail::mm_nt(blas(), hf_.data(), val(E_), ws(logits_, M * C), M, C, D, 0.f);
    const double inv = count ? 1.0 / static_cast<double>(count) : 0.0;
    if (rows_.size() < static_cast<std::size_t>(M)) rows_ = device_buffer<double>(static_cast<std::size_t>(M), stream_);
    cuda_layers_detail::cross_entropy_kernel<<<grid(M), cuda_layers_detail::block, 0, stream_>>>(logits_.data(), tg_.data(),
                                                                                                ws(dlogits_, M * C), rows_.data(), M, C, inv);
    launched("cross_entropy_kernel");
    std::vector<double> row(static_cast<std::size_t>(M));
    std::vector<float> ax(static_cast<std::size_t>(L_));
    check(cudaMemcpyAsync(row.data(), rows_.data(), row.size() * sizeof(double), cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync(loss)");
    check(cudaMemcpyAsync(ax.data(), auxd_.data(), ax.size() * sizeof(float), cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync(aux)");
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    loss_result r;
    for (double v : row) r.ce += v;  // row order, as the CPU
    r.count = count;
    r.ce = count ? r.ce / static_cast<double>(count) : 0.0;
    for (index_t i = 0; i < L_; ++i)
      r.aux += mixers_[static_cast<std::size_t>(i)]->config().balance_coefficient * static_cast<double>(ax[static_cast<std::size_t>(i)]);
    r.total = r.ce + r.aux;
    forwarded_ = true;
    return r;
  }

  //! \brief The logits `[B,T,vocab]` of the last loss(), copied into `out` (resized; synchronises).
  void logits(std::vector<float>& out) const {
    if (!forwarded_) throw error("linstate::layers::cuda_model::logits: call loss() first");
    out.resize(static_cast<std::size_t>(B_ * T_ * cfg_.vocab));
    if (out.empty()) return;
    check(cudaMemcpyAsync(out.data(), logits_.data(), out.size() * sizeof(float), cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync(logits)");
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

  //! Backward of the last loss(): adds ∂total/∂θ into every (device) gradient. No synchronisation.
  void backward() {
    if (!forwarded_) throw error("linstate::layers::cuda_model::backward: call loss() first (it keeps the gradient at the logits)");
    const index_t M = B_ * T_, D = cfg_.d_model, C = cfg_.vocab;
    const shape_t xs{B_, T_, D};
    float* dm = ws(dm_, M * D);
    float* dh = ws(dh_, M * D);
    float* da = ws(da_, M * D);
    // tied head: dhf = dlogits E, dE += dlogitsᵀ hf
    cuda_layers_detail::mm(blas(), dlogits_.data(), val(E_), dm, M, C, D, 0.f);
    cuda_layers_detail::mm_tn_acc(blas(), dlogits_.data(), hf_.data(), grd(E_), M, C, D);
    rms_backward(h0_.data(), val(nf_), grd(nf_), rf_.data(), dm, dh, M);
    for (index_t i = L_ - 1; i >= 0; --i) {
      auto& b = blocks_[static_cast<std::size_t>(i)];
      auto& a = act_[static_cast<std::size_t>(i)];
      // the MLP: y = (silu(a2 W_gate) ⊙ a2 W_up) W_down
      float* dhh = ws(dhh_, M * F_);
      cuda_layers_detail::mm_tn_acc(blas(), a.hh.data(), dh, grd(b.Wd), M, F_, D);
      cuda_layers_detail::mm_nt(blas(), dh, val(b.Wd), dhh, M, F_, D, 0.f);
      cuda_layers_detail::swiglu_bwd_kernel<<<grid(M * F_), cuda_layers_detail::block, 0, stream_>>>(a.g.data(), a.u.data(), dhh,
                                                                                                      ws(dg_, M * F_), ws(du_, M * F_), M * F_);
      launched("swiglu_bwd_kernel");
      cuda_layers_detail::mm_tn_acc(blas(), a.a2.data(), dg_.data(), grd(b.Wg), M, D, F_);
      cuda_layers_detail::mm_tn_acc(blas(), a.a2.data(), du_.data(), grd(b.Wu), M, D, F_);
      cuda_layers_detail::mm_nt(blas(), dg_.data(), val(b.Wg), da, M, D, F_, 0.f);
      cuda_layers_detail::mm_nt(blas(), du_.data(), val(b.Wu), da, M, D, F_, 1.f);
      rms_backward(a.h_mid.data(), val(b.n2), grd(b.n2), a.r2.data(), da, dm, M);
      add(dh, dm, M * D);
      mixers_[static_cast<std::size_t>(i)]->backward({dh, xs}, {da, xs});
      rms_backward(a.h_in.data(), val(b.n1), grd(b.n1), a.r1.data(), da, dm, M);
      add(dh, dm, M * D);
    }
    cuda_layers_detail::scatter_add_kernel<<<grid(cfg_.vocab * D), cuda_layers_detail::block, 0, stream_>>>(dh, ids_.data(), grd(E_), M,
                                                                                                          cfg_.vocab, D);
    launched("scatter_add_kernel");
  }

 private:
  struct dparam {
    std::string name;
    shape_t shape;
    bool weight_decay = true;
    device_buffer<float> value, grad;
  };
  struct block_params {
    int n1 = -1, n2 = -1, Wg = -1, Wu = -1, Wd = -1;
  };
  struct block_acts {
    device_buffer<float> h_in, a1, r1, h_mid, a2, r2, g, u, hh;
  };

  static void check(cudaError_t e, const char* call) { cuda_detail::check(e, call, "linstate::layers::cuda_model"); }
  static void launched(const char* k) { cuda_detail::check_launch(k, "linstate::layers::cuda_model"); }
  static unsigned grid(index_t n) { return cuda_layers_detail::grid_for(n); }
  cublasHandle_t blas() const { return blas_.get(); }
  int find(const std::string& n) const {
    for (std::size_t i = 0; i < own_.size(); ++i)
      if (own_[i].name == n) return static_cast<int>(i);
    throw error("linstate::layers::cuda_model: the CPU model has no parameter " + n + " (internal error)");
  }
  float* val(int i) { return own_[static_cast<std::size_t>(i)].value.data(); }
  float* grd(int i) { return own_[static_cast<std::size_t>(i)].grad.data(); }
  float* ws(device_buffer<float>& b, index_t n) {
    if (b.size() < static_cast<std::size_t>(n)) b = device_buffer<float>(static_cast<std::size_t>(n), stream_);
    return b.data();
  }
  void copy(float* d, const float* s, index_t n) {
    check(cudaMemcpyAsync(d, s, static_cast<std::size_t>(n) * sizeof(float), cudaMemcpyDeviceToDevice, stream_), "cudaMemcpyAsync");
  }
  void add(float* a, const float* b, index_t n) {
    cuda_layers_detail::add_kernel<<<grid(n), cuda_layers_detail::block, 0, stream_>>>(a, b, n);
    launched("add_kernel");
  }
  void fill_ones(index_t n) {
    cuda_layers_detail::fill_kernel<<<grid(n), cuda_layers_detail::block, 0, stream_>>>(ones_.data(), 1.f, n);
    launched("fill_kernel");
  }
  //! y = x / sqrt(mean(x²) + ε) ⊙ w over rows of D
  void rms_forward(const float* x, const float* w, float* y, float* rstd, index_t M) {
    cuda_layers_detail::rms_fwd_kernel<<<grid(M), cuda_layers_detail::block, 0, stream_>>>(
        x, w, nullptr, y, rstd, M, static_cast<int>(cfg_.d_model), static_cast<float>(cfg_.norm_eps));
    launched("rms_fwd_kernel");
  }
  //! dx (overwritten) from dy; dw += Σ_rows dy ⊙ x·rstd
  void rms_backward(const float* x, const float* w, float* dw, const float* rstd, const float* dy, float* dx, index_t M) {
    const index_t D = cfg_.d_model;
    cuda_layers_detail::rms_bwd_kernel<<<grid(M), cuda_layers_detail::block, 0, stream_>>>(x, w, nullptr, rstd, dy, dx, ws(part_, M * D),
                                                                                           nullptr, M, static_cast<int>(D));
    launched("rms_bwd_kernel");
    cuda_layers_detail::colsum_acc(blas(), part_.data(), ones_.data(), dw, M, D);
  }
  void transfer(std::vector<parameter_ref<float>>& host, std::vector<parameter_ref<float>>& dev, bool up, bool grads) {
    const std::string api = std::string("linstate::layers::cuda_model::") + (up ? "copy_from" : "copy_to");
    if (host.size() != dev.size()) throw error(api + ": the CPU model has " + std::to_string(host.size()) + " parameter tensors, this one " + std::to_string(dev.size()));
    for (std::size_t i = 0; i < host.size(); ++i)
      if (host[i].name != dev[i].name || !(host[i].value.shape == dev[i].value.shape))
        throw error(api + ": parameter " + std::to_string(i) + " is " + host[i].name + " " + host[i].value.shape.str() + " on the CPU but " +
                    dev[i].name + " " + dev[i].value.shape.str() + " here");
    for (std::size_t i = 0; i < host.size(); ++i) {
      const std::size_t n = static_cast<std::size_t>(host[i].value.numel()) * sizeof(float);
      if (!n) continue;
      if (up) check(cudaMemcpyAsync(dev[i].value.data, host[i].value.data, n, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync");
      else {
        check(cudaMemcpyAsync(host[i].value.data, dev[i].value.data, n, cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync");
        if (grads) check(cudaMemcpyAsync(host[i].grad.data, dev[i].grad.data, n, cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync");
      }
    }
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

  model_config cfg_;
  cudaStream_t stream_;
  cuda_layers_detail::cublas_handle blas_;
  index_t F_ = 0, L_ = 0, B_ = 0, T_ = 0;
  std::vector<dparam> own_;
  std::vector<std::unique_ptr<mixer_type>> mixers_;
  std::vector<block_params> blocks_;
  std::vector<block_acts> act_;
  int E_ = -1, nf_ = -1;
  bool forwarded_ = false;
  device_buffer<std::int32_t> ids_, tg_;
  device_buffer<double> rows_;
  device_buffer<float> auxd_, ones_, h0_, m_, hf_, rf_, logits_, dlogits_, dm_, dh_, da_, dhh_, dg_, du_, part_;
};

}  // namespace linstate::layers
