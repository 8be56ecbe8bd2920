// linstate/layers/cuda_token_mixer.cuh — the token mixer of <linstate/layers/token_mixer.hpp> on the
// GPU: the same mixer_config, parameter names, shapes and initial values, forward and backward on
// device tensors, fp32 parameters and activations.
//
// What runs where (every step on `stream`, nothing synchronises except the float-returning forward
// and the copies to the host):
//   * projections (x W, the adapters' (x A) B, the low-rank gate, the output gate, W_o) and their
//     backward products: cuBLAS, cublasGemmEx with fp32 data and CUBLAS_COMPUTE_32F under
//     CUBLAS_DEFAULT_MATH — exact fp32 products, never TF32 (TF32 would need CUBLAS_TF32_TENSOR_OP_MATH
//     or CUBLAS_COMPUTE_32F_FAST_TF32, neither is used). Column sums (the biases' and norm weight's
//     gradients) are cublasSgemv with a vector of ones: fixed order, deterministic;
//   * the elementwise parts as small kernels of this header: feature maps φ (identity, SiLU, softmax
//     over K), the low-rank gate g = logsigmoid(z + b)/τ (SPEC §4.3 step 6), GDN's head gate
//     g = −exp(A_log)·softplus(z + dt_bias) and β = σ(x W_b) (SPEC §4.11), the gated per-head RMSNorm
//     (step 10) and the short convolution (when mixer_config::short_conv > 0); every one of them
//     with its backward, one thread per element or per row, no atomics;
//   * the state: linstate::forward / linstate::backward on linstate::cuda{stream} (algorithm
//     `Algorithm`, default automatic: chunked kernels when some sequence is longer than 64 tokens);
//   * the balance loss: linstate::balance_loss on linstate::cuda (SPEC §4.9), its gradient added to
//     the router logits' gradient (gradient_write::accumulate).
//
// The math is the CPU token_mixer's (token_mixer.hpp; docs/layers.md), step for step; results agree
// with it up to fp32 summation order (cuda/tests/test_cuda_layers.cu checks 1e-5 · max|ref| per
// tensor). The parameters are built by a CPU token_mixer<V> of the same config and uploaded, so the
// initial values are the CPU ones bit for bit, and copy_from / copy_to move a parameter set between
// the two (a checkpoint written by either loads into the other).
//
// \code
//   #include <linstate/layers/cuda_token_mixer.cuh>          // a .cu file (nvcc, C++20); link -lcublas
//   linstate::layers::cuda_token_mixer<sse_n4k1s> mix({.d_model = 64, .num_heads = 2, .head_k = 32, .head_v = 32},
//                                                     stream);
//   float aux = mix.forward(x_dev.view({B, T, 64}), y_dev.view({B, T, 64}));  // synchronises for aux
//   mix.forward(x, y, aux_dev);                           // or: aux into a device float, no synchronisation
//   mix.backward(dy_dev.view({B, T, 64}), dx_dev.view({B, T, 64}));           // grads += ∂L/∂θ, dx = ∂L/∂x
//   std::vector<linstate::layers::parameter_ref<float>> ps;  mix.collect(ps, "blocks.0.mixer.");  // DEVICE views
//   linstate::layers::token_mixer<sse_n4k1s> cpu(cfg);  mix.copy_to(cpu);  // or copy_from(cpu): by name and shape
// \endcode
#pragma once

#if !defined(__CUDACC__)
#error "linstate/layers/cuda_token_mixer.cuh is for CUDA translation units (.cu, compiled by nvcc)"
#endif

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <linstate/cuda.cuh>
#include <linstate/layers/token_mixer.hpp>

namespace linstate::layers {
namespace cuda_layers_detail {

//! Throws linstate::cuda_error naming the cuBLAS call and status.
inline void cublas_check(cublasStatus_t s, const char* call, const char* api) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  throw cuda_error(std::string(api) + ": " + call + " failed: " + cublasGetStatusName(s) + " (" + cublasGetStatusString(s) + ")",
                   cudaErrorUnknown);
}

//! An owned cuBLAS handle bound to one stream, math mode CUBLAS_DEFAULT_MATH (no TF32).
class cublas_handle {
 public:
  cublas_handle(cudaStream_t stream, const char* api) {
    cublas_check(cublasCreate(&h_), "cublasCreate", api);
    try {
      cublas_check(cublasSetStream(h_, stream), "cublasSetStream", api);
      cublas_check(cublasSetMathMode(h_, CUBLAS_DEFAULT_MATH), "cublasSetMathMode", api);
    } catch (...) {
      cublasDestroy(h_);
      throw;
    }
  }
  cublas_handle(const cublas_handle&) = delete;
  cublas_handle& operator=(const cublas_handle&) = delete;
  ~cublas_handle() { (void)cublasDestroy(h_); }
  cublasHandle_t get() const { return h_; }

 private:
  cublasHandle_t h_ = nullptr;
};

// Row-major products through column-major cuBLAS: a row-major [R,C] matrix is a column-major [C,R] one,
// so y = x W (row-major) is yᵀ = Wᵀ xᵀ (column-major) with the operands swapped.
inline int as_int(index_t n) { return static_cast<int>(n); }

//! y[M,N] = x[M,K] · W[K,N] + beta · y
inline void mm(cublasHandle_t h, const float* x, const float* W, float* y, index_t M, index_t K, index_t N, float beta) {
  if (M == 0 || N == 0) return;
  const float one = 1.f;
  cublas_check(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, as_int(N), as_int(M), as_int(K), &one, W, CUDA_R_32F, as_int(N), x,
                            CUDA_R_32F, as_int(K), &beta, y, CUDA_R_32F, as_int(N), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "cublasGemmEx (x W)", "linstate::layers::cuda_token_mixer");
}
//! dW[K,N] += xᵀ[K,M] · dy[M,N]
inline void mm_tn_acc(cublasHandle_t h, const float* x, const float* dy, float* dW, index_t M, index_t K, index_t N) {
  if (M == 0 || K == 0 || N == 0) return;
  const float one = 1.f;
  cublas_check(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_T, as_int(N), as_int(K), as_int(M), &one, dy, CUDA_R_32F, as_int(N), x,
                            CUDA_R_32F, as_int(K), &one, dW, CUDA_R_32F, as_int(N), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "cublasGemmEx (xᵀ dy)", "linstate::layers::cuda_token_mixer");
}
//! dx[M,K] = dy[M,N] · Wᵀ[N,K] + beta · dx
inline void mm_nt(cublasHandle_t h, const float* dy, const float* W, float* dx, index_t M, index_t K, index_t N, float beta) {
  if (M == 0 || K == 0) return;
  const float one = 1.f;
  cublas_check(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, as_int(K), as_int(M), as_int(N), &one, W, CUDA_R_32F, as_int(N), dy,
                            CUDA_R_32F, as_int(N), &beta, dx, CUDA_R_32F, as_int(K), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "cublasGemmEx (dy Wᵀ)", "linstate::layers::cuda_token_mixer");
}
//! y[N] += Σ_m a[m,N]  (a row-major [M,N]; `ones` holds ≥ M ones)
inline void colsum_acc(cublasHandle_t h, const float* a, const float* ones, float* y, index_t M, index_t N) {
  if (M == 0 || N == 0) return;
  const float one = 1.f;
  cublas_check(cublasSgemv(h, CUBLAS_OP_N, as_int(N), as_int(M), &one, a, as_int(N), ones, 1, &one, y, 1), "cublasSgemv (column sum)",
               "linstate::layers::cuda_token_mixer");
}

// --- elementwise kernels (grid-stride loops; index_t offsets) --------------------------------------

constexpr int block = 256;
inline unsigned grid_for(index_t n) {
  return static_cast<unsigned>(std::max<index_t>(1, std::min<index_t>((n + block - 1) / block, index_t(1) << 16)));
}
#define LINSTATE_LAYERS_FOR(i, n) \
  for (index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x; i < (n); i += static_cast<index_t>(blockDim.x) * gridDim.x)

__device__ inline float sigmoid_d(float x) {
  const float e = expf(-fabsf(x));
  return x >= 0 ? 1.f / (1.f + e) : e / (1.f + e);
}
__device__ inline float softplus_d(float x) { return x > 0 ? x + log1pf(expf(-x)) : log1pf(expf(x)); }

//! y = φ(x) elementwise (identity, SiLU)
static __global__ void feature_fwd_kernel(int map, const float* __restrict__ x, float* __restrict__ y, index_t n) {
  LINSTATE_LAYERS_FOR(i, n) {
    const float a = x[i];
    y[i] = map == static_cast<int>(feature_map::silu) ? a * sigmoid_d(a) : a;
  }
}
//! y = softmax(x) over each row of `width`
static __global__ void softmax_fwd_kernel(const float* __restrict__ x, float* __restrict__ y, index_t rows, int width) {
  LINSTATE_LAYERS_FOR(r, rows) {
    const float* a = x + r * width;
    float* b = y + r * width;
    float m = a[0];
    for (int j = 1; j < width; ++j) m = fmaxf(m, a[j]);
    float s = 0;
    for (int j = 0; j < width; ++j) s += (b[j] = expf(a[j] - m));
    const float inv = 1.f / s;
    for (int j = 0; j < width; ++j) b[j] *= inv;
  }
}
//! dx = φ'(x) dy (+ add), elementwise maps
static __global__ void feature_bwd_kernel(int map, const float* __restrict__ x, const float* __restrict__ dy, float* __restrict__ dx,
                                   const float* __restrict__ add, index_t n) {
  LINSTATE_LAYERS_FOR(i, n) {
    float v = dy[i];
    if (map == static_cast<int>(feature_map::silu)) {
      const float s = sigmoid_d(x[i]);
      v *= s * (1.f + x[i] * (1.f - s));
    }
    dx[i] = add ? v + add[i] : v;
  }
}
//! dx = y ⊙ (dy − ⟨y, dy⟩) per row (+ add)
static __global__ void softmax_bwd_kernel(const float* __restrict__ y, const float* __restrict__ dy, float* __restrict__ dx,
                                   const float* __restrict__ add, index_t rows, int width) {
  LINSTATE_LAYERS_FOR(r, rows) {
    const index_t o = r * width;
    float dot = 0;
    for (int j = 0; j < width; ++j) dot += y[o + j] * dy[o + j];
    for (int j = 0; j < width; ++j) {
      const float v = y[o + j] * (dy[o + j] - dot);
      dx[o + j] = add ? v + add[o + j] : v;
    }
  }
}
//! z += b (per column); g = logsigmoid(z)/τ = (min(z,0) − log1p(e^{−|z|}))/τ      [M,W]
static __global__ void lowrank_gate_fwd_kernel(float* __restrict__ z, const float* __restrict__ b, float* __restrict__ g, index_t M,
                                        int W, float tau) {
  LINSTATE_LAYERS_FOR(i, M * W) {
    const float a = z[i] + b[i % W];
    z[i] = a;
    g[i] = (fminf(a, 0.f) - log1pf(expf(-fabsf(a)))) / tau;
  }
}
//! dz = dg · σ(−z)/τ
static __global__ void lowrank_gate_bwd_kernel(const float* __restrict__ z, const float* __restrict__ dg, float* __restrict__ dz, index_t n,
                                        float tau) {
  LINSTATE_LAYERS_FOR(i, n) dz[i] = dg[i] * sigmoid_d(-z[i]) / tau;
}
//! z += dt_bias; g = −exp(A_log)·softplus(z)      [M,H]
static __global__ void head_gate_fwd_kernel(float* __restrict__ z, const float* __restrict__ A, const float* __restrict__ dt,
                                     float* __restrict__ g, index_t M, int H) {
  LINSTATE_LAYERS_FOR(i, M * H) {
    const int h = static_cast<int>(i % H);
    const float a = z[i] + dt[h];
    z[i] = a;
    g[i] = -expf(A[h]) * softplus_d(a);
  }
}
//! dz = −dg·exp(A_log)·σ(z); dA_part = dg·g (∂g/∂A_log = g; summed over tokens by the caller)
static __global__ void head_gate_bwd_kernel(const float* __restrict__ z, const float* __restrict__ g, const float* __restrict__ dg,
                                     const float* __restrict__ A, float* __restrict__ dz, float* __restrict__ dA_part, index_t M,
                                     int H) {
  LINSTATE_LAYERS_FOR(i, M * H) {
    const int h = static_cast<int>(i % H);
    dA_part[i] = dg[i] * g[i];
    dz[i] = -dg[i] * expf(A[h]) * sigmoid_d(z[i]);
  }
}
//! β = σ(z)
static __global__ void sigmoid_kernel(const float* __restrict__ z, float* __restrict__ y, index_t n) {
  LINSTATE_LAYERS_FOR(i, n) y[i] = sigmoid_d(z[i]);
}
//! dz = dβ · β(1 − β)
static __global__ void sigmoid_bwd_kernel(const float* __restrict__ y, const float* __restrict__ dy, float* __restrict__ dz, index_t n) {
  LINSTATE_LAYERS_FOR(i, n) dz[i] = dy[i] * y[i] * (1.f - y[i]);
}
//! per row r (a token's head): rstd = (mean o² + ε)^(−1/2), y = o·rstd·w ⊙ (z σ(z) or 1)     o, y [rows,width]
static __global__ void rms_fwd_kernel(const float* __restrict__ o, const float* __restrict__ w, const float* __restrict__ z,
                               float* __restrict__ y, float* __restrict__ rstd, index_t rows, int width, float eps) {
  LINSTATE_LAYERS_FOR(r, rows) {
    const index_t b = r * width;
    float ss = 0;
    for (int j = 0; j < width; ++j) ss += o[b + j] * o[b + j];
    const float rs = 1.f / sqrtf(ss / static_cast<float>(width) + eps);
    rstd[r] = rs;
    for (int j = 0; j < width; ++j) y[b + j] = o[b + j] * rs * w[j] * (z ? z[b + j] * sigmoid_d(z[b + j]) : 1.f);
  }
}
//! backward of rms_fwd_kernel: d_o, dz (gated) and dw_part[r,j] = dy n s (summed over rows by the caller)
static __global__ void rms_bwd_kernel(const float* __restrict__ o, const float* __restrict__ w, const float* __restrict__ z,
                               const float* __restrict__ rstd, const float* __restrict__ dy, float* __restrict__ d_o,
                               float* __restrict__ dw_part, float* __restrict__ dz, index_t rows, int width) {
  LINSTATE_LAYERS_FOR(r, rows) {
    const index_t b = r * width;
    const float rs = rstd[r];
    float dot = 0;
    for (int j = 0; j < width; ++j) {
      const index_t i = b + j;
      const float n = o[i] * rs;
      float s = 1.f;
      if (z) {
        const float sg = sigmoid_d(z[i]);
        s = z[i] * sg;
        dz[i] = dy[i] * n * w[j] * sg * (1.f + z[i] * (1.f - sg));
      }
      dw_part[i] = dy[i] * n * s;
      const float dn = dy[i] * w[j] * s;
      d_o[i] = dn;
      dot += dn * n;
    }
    dot /= static_cast<float>(width);
    for (int j = 0; j < width; ++j) d_o[b + j] = rs * (d_o[b + j] - o[b + j] * rs * dot);
  }
}
//! causal depthwise convolution of width W along t within each of the B sequences (ops::causal_conv_forward):
//! y[b,t,c] = Σ_{j<W} w[c,j] · x[b, t−(W−1)+j, c]      x, y [B,T,C], w [C,W]
static __global__ void conv_fwd_kernel(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y, index_t T,
                                index_t C, int W, index_t n) {
  LINSTATE_LAYERS_FOR(i, n) {
    const index_t c = i % C, bt = i / C, t = bt % T;
    float acc = 0;
    for (int j = static_cast<int>(std::max<index_t>(0, W - 1 - t)); j < W; ++j) acc += w[c * W + j] * x[(bt - (W - 1) + j) * C + c];
    y[i] = acc;
  }
}
//! dx[b,s,c] = Σ_j w[c,j] · dy[b, s+(W−1)−j, c] (terms past T drop)
static __global__ void conv_bwd_dx_kernel(const float* __restrict__ w, const float* __restrict__ dy, float* __restrict__ dx, index_t T,
                                   index_t C, int W, index_t n) {
  LINSTATE_LAYERS_FOR(i, n) {
    const index_t c = i % C, bs = i / C, s = bs % T;
    float acc = 0;
    for (int j = 0; j < W; ++j)
      if (s + (W - 1) - j < T) acc += w[c * W + j] * dy[(bs + (W - 1) - j) * C + c];
    dx[i] = acc;
  }
}
//! dw[c,j] += Σ_{b,t} dy[b,t,c] · x[b, t−(W−1)+j, c]: one thread per (c, j), a fixed-order loop over the tokens
static __global__ void conv_bwd_dw_kernel(const float* __restrict__ x, const float* __restrict__ dy, float* __restrict__ dw, index_t M,
                                   index_t T, index_t C, int W) {
  LINSTATE_LAYERS_FOR(i, C * W) {
    const index_t c = i / W;
    const int j = static_cast<int>(i % W);
    float acc = 0;
    for (index_t bt = 0; bt < M; ++bt)
      if (bt % T >= W - 1 - j) acc += dy[bt * C + c] * x[(bt - (W - 1) + j) * C + c];
    dw[i] += acc;
  }
}
static __global__ void fill_kernel(float* __restrict__ y, float v, index_t n) {
  LINSTATE_LAYERS_FOR(i, n) y[i] = v;
}
#undef LINSTATE_LAYERS_FOR

//! the short convolution's width of a config (0 before mixer_config had the field)
template <class C>
index_t short_conv_of(const C& c) {
  if constexpr (requires { c.short_conv; }) return static_cast<index_t>(c.short_conv);
  else return 0;
}

}  // namespace cuda_layers_detail

//! \brief The token mixer of token_mixer.hpp for variant `V` on the GPU, fp32 (see the top of this header).
//!
//! Same formulas, parameters (names, shapes, initialisation: built by a CPU token_mixer<V> of the same
//! config), aux and gradient semantics as token_mixer<V, float>; every tensor argument is device memory
//! (`cudaMalloc`, linstate::device_buffer). All work is enqueued on the constructor's stream.
//! Bad input throws linstate::error naming the tensor and shapes before anything is launched; CUDA and
//! cuBLAS failures throw linstate::cuda_error.
template <class V, class Algorithm = automatic, class Strategy = varlen>
class cuda_token_mixer {
  static_assert(detail::validate<V>());

 public:
  using variant = V;
  using real = float;
  using decay = typename V::decay;
  using router = typename V::router;
  using partition = typename V::partition;
  using host_mixer = token_mixer<V, float, Algorithm, Strategy>;  //!< the CPU layer with the same parameters
  static constexpr bool has_shared = host_mixer::has_shared;
  static constexpr bool routes = host_mixer::routes;
  static constexpr gate_extent gate = host_mixer::gate;
  static constexpr bool uses_beta = host_mixer::uses_beta;
  static constexpr bool low_rank_gate = host_mixer::low_rank_gate;

  //! Builds the parameters as token_mixer<V>(c) does (same checks and messages), uploads them on `stream`.
  explicit cuda_token_mixer(const mixer_config& c, cudaStream_t stream = nullptr)
      : cfg_(c), stream_(stream), blas_(stream, "linstate::layers::cuda_token_mixer") {
    host_mixer h(c);
    D_ = c.d_model, H_ = c.num_heads, K_ = c.head_k, V_ = c.head_v, N_ = h.num_partitions();
    r_ = c.adapter_rank ? c.adapter_rank : V_;
    GW_ = gate_width(gate, K_, V_);
    conv_w_ = cuda_layers_detail::short_conv_of(c);
    q_.phi = c.q_map, k_.phi = c.k_map;
    auto& pl = h.params();
    params_.reserve(pl.size());
    for (std::size_t i = 0; i < pl.size(); ++i) {
      const auto& p = pl[static_cast<int>(i)];
      dparam d{p.name, p.value.shape(), p.weight_decay, device_buffer<float>(static_cast<std::size_t>(p.value.numel())),
               device_buffer<float>(static_cast<std::size_t>(p.value.numel()))};
      d.value.upload(p.value.data(), stream_);  // pageable source: staged before the call returns
      if (!d.grad.empty()) check(cudaMemsetAsync(d.grad.data(), 0, d.grad.size() * sizeof(float), stream_), "cudaMemsetAsync");
      params_.push_back(std::move(d));
    }
    q_.W = find("W_q"), k_.W = find("W_k"), Wv_ = find("W_v"), Wo_ = find("W_o"), norm_w_ = find("norm_w");
    if constexpr (has_shared) q_.A = find("A_q"), q_.Bm = find("B_q"), k_.A = find("A_k"), k_.Bm = find("B_k");
    if (conv_w_) q_.C = find("conv_q"), k_.C = find("conv_k"), Cv_ = find("conv_v");
    auto gates = [&](gate_group& gg, const std::string& sfx) {
      if constexpr (low_rank_gate) gg.W1 = find("W_g1" + sfx), gg.W2 = find("W_g2" + sfx), gg.b = find("b_g" + sfx);
      else if constexpr (gate == gate_extent::head) gg.Wa = find("W_a" + sfx), gg.A_log = find("A_log" + sfx), gg.dt = find("dt_bias" + sfx);
      if constexpr (uses_beta) gg.Wb = find("W_b" + sfx);
    };
    gates(main_, "");
    if constexpr (has_shared) gates(shared_, "_shared");
    if constexpr (routes) Wr_ = find("W_r");
    if (cfg_.output_gate && cfg_.output_gate_rank) Wog_ = find("W_og1"), Wog2_ = find("W_og2");
    else if (cfg_.output_gate) Wog_ = find("W_og");
    aux_ = device_buffer<float>(1);
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");  // the host mixer's memory goes away here
  }

  const mixer_config& config() const { return cfg_; }
  cudaStream_t stream() const { return stream_; }
  index_t num_partitions() const { return N_; }
  //! The number of parameter tensors and their names, in the CPU layer's order.
  std::size_t num_parameter_tensors() const { return params_.size(); }

  //! Appends a named view of every parameter: value and grad are DEVICE views (for a device optimiser).
  void collect(std::vector<parameter_ref<float>>& out, const std::string& prefix = "") {
    for (auto& p : params_)
      out.push_back({prefix + p.name, p.value.view(p.shape), p.grad.view(p.shape), p.weight_decay});
  }
  //! Sets every gradient to zero (on the stream).
  void zero_grad() {
    for (auto& p : params_)
      if (!p.grad.empty()) check(cudaMemsetAsync(p.grad.data(), 0, p.grad.size() * sizeof(float), stream_), "cudaMemsetAsync");
  }

  //! \brief Uploads the values of HOST parameters: every parameter of this layer must appear in `from`
  //! as prefix + name with the same shape (extra entries are ignored). Throws linstate::error naming
  //! the parameter otherwise, before anything is copied. Returns after the copies are staged.
  void copy_from(const std::vector<parameter_ref<float>>& from, const std::string& prefix = "") {
    const auto src = match("copy_from", from, prefix);
    for (std::size_t i = 0; i < params_.size(); ++i) params_[i].value.upload(src[i]->value.data, stream_);
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }
  //! \brief Downloads the values (and, with `grads`, the gradients) into HOST parameters matched by
  //! name and shape as in copy_from. Synchronises the stream.
  void copy_to(const std::vector<parameter_ref<float>>& to, const std::string& prefix = "", bool grads = false) const {
    const auto dst = match("copy_to", to, prefix);
    for (std::size_t i = 0; i < params_.size(); ++i) {
      params_[i].value.download(dst[i]->value.data, stream_);
      if (grads) params_[i].grad.download(dst[i]->grad.data, stream_);
    }
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }
  //! The parameter values of a CPU token_mixer of the same variant and config, onto the GPU.
  template <class A, class S>
  void copy_from(token_mixer<V, float, A, S>& cpu) {
    std::vector<parameter_ref<float>> ps;
    cpu.collect(ps);
    copy_from(ps);
  }
  //! This layer's parameter values (and gradients, with `grads`) into a CPU token_mixer.
  template <class A, class S>
  void copy_to(token_mixer<V, float, A, S>& cpu, bool grads = false) const {
    std::vector<parameter_ref<float>> ps;
    cpu.collect(ps);
    copy_to(ps, "", grads);
  }

  //! \brief out `[B,T,D]` from x `[B,T,D]` (device); writes aux, the unscaled balance loss (0 without
  //! a routing router), to the device float `*aux_device`. No synchronisation. Keeps what backward
  //! needs (a copy of x included) until the next forward.
  void forward(const tensor_view<const float>& x, const tensor_view<float>& out, float* aux_device) {
    static constexpr const char* api = "linstate::layers::cuda_token_mixer::forward";
    if (x.empty() || x.rank() != 3 || x.size(2) != D_)
      throw error(std::string(api) + ": x has shape " + x.shape.str() + " but must be [B,T,D] with D = d_model = " + std::to_string(D_));
    ops::require(api, "out", out, x.shape, "(like x: [B,T,D])");
    if (!aux_device) throw error(std::string(api) + ": aux_device is null (a device float for the balance loss)");
    cuda_detail::require_device(api, "x", x), cuda_detail::require_device(api, "out", out);
    cuda_detail::require_device(api, "aux_device", tensor_view<float>{aux_device, {1}});
    forwarded_ = false;
    B_ = x.size(0), T_ = x.size(1), M_ = B_ * T_;
    const index_t M = M_, HK = H_ * K_, HV = H_ * V_;
    cublasHandle_t h = blas_.get();
    float* X = ws(x_, M * D_);
    check(cudaMemcpyAsync(X, x.data, static_cast<std::size_t>(M * D_) * sizeof(float), cudaMemcpyDeviceToDevice, stream_),
          "cudaMemcpyAsync(x)");
    ws(ones_, std::max<index_t>(M * H_, 1));
    fill(ones_.data(), 1.f, M * H_);
    // q, k (and the shared partition's adapters), v                                   SPEC §4.3 step 2
    for (branch* b : {&q_, &k_}) {
      if (conv_w_) {
        cuda_layers_detail::mm(h, X, val(b->W), ws(b->raw, M * HK), M, D_, HK, 0.f);
        conv_forward(b->raw.data(), val(b->C), ws(b->p1, M * HK), HK);
      } else cuda_layers_detail::mm(h, X, val(b->W), ws(b->p1, M * HK), M, D_, HK, 0.f);
      feature_forward(b->phi, b->p1.data(), ws(b->f1, M * HK), M * H_, K_);
      if constexpr (has_shared) {
        cuda_layers_detail::mm(h, X, val(b->A), ws(b->a, M * r_), M, D_, r_, 0.f);
        float* p2 = ws(b->p2, M * HK);
        check(cudaMemcpyAsync(p2, b->p1.data(), static_cast<std::size_t>(M * HK) * sizeof(float), cudaMemcpyDeviceToDevice, stream_),
              "cudaMemcpyAsync(q2)");
        cuda_layers_detail::mm(h, b->a.data(), val(b->Bm), p2, M, r_, HK, 1.f);  // q₂ = q₁ + (x A) B
        feature_forward(b->phi, p2, ws(b->f2, M * HK), M * H_, K_);
      }
    }
    if (conv_w_) {
      cuda_layers_detail::mm(h, X, val(Wv_), ws(vraw_, M * HV), M, D_, HV, 0.f);
      conv_forward(vraw_.data(), val(Cv_), ws(vp_, M * HV), HV);
    } else cuda_layers_detail::mm(h, X, val(Wv_), ws(vp_, M * HV), M, D_, HV, 0.f);
    feature_forward(cfg_.v_map, vp_.data(), ws(vf_, M * HV), M * H_, V_);
    gate_forward(main_);
    if constexpr (has_shared) gate_forward(shared_);
    if constexpr (routes) cuda_layers_detail::mm(h, X, val(Wr_), ws(logits_, M * N_), M, D_, N_, 0.f);

    // the kernel                                                                        step 8
    const shape_t qk{B_, T_, H_, K_}, vs{B_, T_, H_, V_}, gs = gate_shape(), hs{B_, T_, H_};
    kin_ = inputs<float>{};
    if constexpr (has_shared) {
      kin_.q = view(q_.f2, qk), kin_.k = view(k_.f2, qk), kin_.shared.q = view(q_.f1, qk), kin_.shared.k = view(k_.f1, qk);
    } else kin_.q = view(q_.f1, qk), kin_.k = view(k_.f1, qk);
    kin_.v = view(vf_, vs);
    if constexpr (gate != gate_extent::none) kin_.g = view(main_.g, gs);
    if constexpr (uses_beta) kin_.beta = view(main_.beta, hs);
    if constexpr (has_shared) {
      if constexpr (gate != gate_extent::none) kin_.shared.g = view(shared_.g, gs);
      if constexpr (uses_beta) kin_.shared.beta = view(shared_.beta, hs);
    }
    if constexpr (routes) kin_.router_logits = view(logits_, {B_, T_, N_});
    float* O = ws(o_, M * HV);
    linstate::forward<V>(linstate::cuda{stream_}, kin_, outputs<float>{{O, vs}, {}}, Algorithm{}, Strategy{}, cfg_.kernel);

    // output gate, per-head RMSNorm, output projection                                  step 10
    const float* z = nullptr;
    if (cfg_.output_gate) {
      if (cfg_.output_gate_rank) {
        const index_t R = cfg_.output_gate_rank;
        cuda_layers_detail::mm(h, X, val(Wog_), ws(hog_, M * R), M, D_, R, 0.f);
        cuda_layers_detail::mm(h, hog_.data(), val(Wog2_), ws(z_, M * HV), M, R, HV, 0.f);
      } else cuda_layers_detail::mm(h, X, val(Wog_), ws(z_, M * HV), M, D_, HV, 0.f);
      z = z_.data();
    }
    launch_rms_fwd(z);
    cuda_layers_detail::mm(h, yn_.data(), val(Wo_), out.data, M, HV, D_, 0.f);
    if constexpr (routes)
      linstate::balance_loss<V>(linstate::cuda{stream_}, tensor_view<const float>(kin_.router_logits), aux_device, cfg_.kernel);
    else check(cudaMemsetAsync(aux_device, 0, sizeof(float), stream_), "cudaMemsetAsync(aux)");
    forwarded_ = true;
  }

  //! As above, returning aux on the host: SYNCHRONISES the stream (the CPU layer's signature).
  float forward(const tensor_view<const float>& x, const tensor_view<float>& out) {
    forward(x, out, aux_.data());
    float a = 0;
    check(cudaMemcpyAsync(&a, aux_.data(), sizeof(float), cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync(aux)");
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    return a;
  }

  //! \brief Backward of the last forward for the loss L whose gradient at `out` is `dout` `[B,T,D]`
  //! (device), plus balance_coefficient · aux: adds ∂L/∂θ into every parameter's (device) grad and
  //! writes ∂L/∂x into dx (device). No synchronisation.
  void backward(const tensor_view<const float>& dout, const tensor_view<float>& dx) {
    static constexpr const char* api = "linstate::layers::cuda_token_mixer::backward";
    if (!forwarded_) throw error(std::string(api) + ": no forward call to differentiate (call forward first)");
    const shape_t xs{B_, T_, D_};
    ops::require(api, "dout", dout, xs, "(like the last forward's x: [B,T,D])");
    ops::require(api, "dx", dx, xs, "(like the last forward's x: [B,T,D])");
    cuda_detail::require_device(api, "dout", dout), cuda_detail::require_device(api, "dx", dx);
    const index_t M = M_, HK = H_ * K_, HV = H_ * V_;
    cublasHandle_t h = blas_.get();
    const float* X = x_.data();
    float* DX = dx.data;
    // out = yn W_o
    cuda_layers_detail::mm_tn_acc(h, yn_.data(), dout.data, grd(Wo_), M, HV, D_);
    cuda_layers_detail::mm_nt(h, dout.data, val(Wo_), ws(dyn_, M * HV), M, HV, D_, 0.f);
    // the gated RMSNorm: d o, d z, and norm_w's gradient as a column sum over the M·H rows
    const float* z = cfg_.output_gate ? z_.data() : nullptr;
    float* dz = cfg_.output_gate ? ws(dz_, M * HV) : nullptr;
    cuda_layers_detail::rms_bwd_kernel<<<grid(M * H_), cuda_layers_detail::block, 0, stream_>>>(
        o_.data(), val(norm_w_), z, rstd_.data(), dyn_.data(), ws(do_, M * HV), ws(part_, M * HV), dz, M * H_, static_cast<int>(V_));
    launched("rms_bwd_kernel");
    cuda_layers_detail::colsum_acc(h, part_.data(), ones_.data(), grd(norm_w_), M * H_, V_);
    if (cfg_.output_gate && cfg_.output_gate_rank) {
      const index_t R = cfg_.output_gate_rank;
      cuda_layers_detail::mm_tn_acc(h, hog_.data(), dz, grd(Wog2_), M, R, HV);
      cuda_layers_detail::mm_nt(h, dz, val(Wog2_), ws(dhog_, M * R), M, R, HV, 0.f);
      cuda_layers_detail::mm_tn_acc(h, X, dhog_.data(), grd(Wog_), M, D_, R);
      cuda_layers_detail::mm_nt(h, dhog_.data(), val(Wog_), DX, M, D_, R, 0.f);
    } else if (cfg_.output_gate) {
      cuda_layers_detail::mm_tn_acc(h, X, dz, grd(Wog_), M, D_, HV);
      cuda_layers_detail::mm_nt(h, dz, val(Wog_), DX, M, D_, HV, 0.f);
    } else check(cudaMemsetAsync(DX, 0, static_cast<std::size_t>(M * D_) * sizeof(float), stream_), "cudaMemsetAsync(dx)");

    // the kernel's backward: gradients of its inputs
    kernel_backward();
    if constexpr (routes) {
      if (cfg_.balance_coefficient != 0)
        linstate::balance_loss<V>(linstate::cuda{stream_}, tensor_view<const float>(kin_.router_logits), nullptr,
                                  view_mut(dlogits_, {B_, T_, N_}), static_cast<float>(cfg_.balance_coefficient),
                                  gradient_write::accumulate, cfg_.kernel);
      cuda_layers_detail::mm_tn_acc(h, X, dlogits_.data(), grd(Wr_), M, D_, N_);
      cuda_layers_detail::mm_nt(h, dlogits_.data(), val(Wr_), DX, M, D_, N_, 1.f);
    }
    // v
    feature_backward(cfg_.v_map, vp_.data(), vf_.data(), dvf_.data(), ws(dvp_, M * HV), nullptr, M * H_, V_);
    const float* dv = dvp_.data();
    if (conv_w_) dv = conv_backward(vraw_.data(), Cv_, dvp_.data(), ws(dvraw_, M * HV), HV);
    cuda_layers_detail::mm_tn_acc(h, X, dv, grd(Wv_), M, D_, HV);
    cuda_layers_detail::mm_nt(h, dv, val(Wv_), DX, M, D_, HV, 1.f);
    // q, k
    for (branch* b : {&q_, &k_}) {
      float* dp1 = ws(b->dp1, M * HK);
      if constexpr (has_shared) {
        // d(pre-map of the routed copy) = φ'(q₂) d(routed input); it flows into q₁ and the adapter
        float* dp2 = ws(b->dp2, M * HK);
        feature_backward(b->phi, b->p2.data(), b->f2.data(), b->d2.data(), dp2, nullptr, M * H_, K_);
        cuda_layers_detail::mm_tn_acc(h, b->a.data(), dp2, grd(b->Bm), M, r_, HK);
        cuda_layers_detail::mm_nt(h, dp2, val(b->Bm), ws(b->da, M * r_), M, r_, HK, 0.f);
        cuda_layers_detail::mm_tn_acc(h, X, b->da.data(), grd(b->A), M, D_, r_);
        cuda_layers_detail::mm_nt(h, b->da.data(), val(b->A), DX, M, D_, r_, 1.f);
        feature_backward(b->phi, b->p1.data(), b->f1.data(), b->d1.data(), dp1, dp2, M * H_, K_);  // + dp2
      } else {
        feature_backward(b->phi, b->p1.data(), b->f1.data(), b->d1.data(), dp1, nullptr, M * H_, K_);
      }
      const float* dw = dp1;
      if (conv_w_) dw = conv_backward(b->raw.data(), b->C, dp1, ws(b->draw, M * HK), HK);
      cuda_layers_detail::mm_tn_acc(h, X, dw, grd(b->W), M, D_, HK);
      cuda_layers_detail::mm_nt(h, dw, val(b->W), DX, M, D_, HK, 1.f);
    }
    gate_backward(main_, DX);
    if constexpr (has_shared) gate_backward(shared_, DX);
  }

  //! The kernel's inputs of the last forward (device views into the layer; valid until the next forward).
  const inputs<float>& kernel_inputs() const { return kin_; }
  //! The kernel's output o `[B,T,H,V]` (device) of the last forward.
  tensor_view<const float> kernel_output() const { return {o_.data(), {B_, T_, H_, V_}}; }

 private:
  struct dparam {
    std::string name;
    shape_t shape;
    bool weight_decay = true;
    device_buffer<float> value, grad;
  };
  struct branch {
    int W = -1, A = -1, Bm = -1, C = -1;
    feature_map phi = feature_map::identity;
    device_buffer<float> raw, draw, p1, p2, a, f1, f2, d1, d2, dp1, dp2, da;
  };
  struct gate_group {
    int W1 = -1, W2 = -1, b = -1, Wa = -1, A_log = -1, dt = -1, Wb = -1;
    device_buffer<float> h, z, g, zb, beta, dg, dbeta, dz, dh, dzb, part;
  };

  static void check(cudaError_t e, const char* call) { cuda_detail::check(e, call, "linstate::layers::cuda_token_mixer"); }
  static void launched(const char* kernel) { cuda_detail::check_launch(kernel, "linstate::layers::cuda_token_mixer"); }
  static unsigned grid(index_t n) { return cuda_layers_detail::grid_for(n); }

  int find(const std::string& name) const {
    for (std::size_t i = 0; i < params_.size(); ++i)
      if (params_[i].name == name) return static_cast<int>(i);
    throw error("linstate::layers::cuda_token_mixer: the CPU layer has no parameter " + name + " (internal error)");
  }
  float* val(int i) { return params_[static_cast<std::size_t>(i)].value.data(); }
  float* grd(int i) { return params_[static_cast<std::size_t>(i)].grad.data(); }

  std::vector<const parameter_ref<float>*> match(const char* what, const std::vector<parameter_ref<float>>& list,
                                                 const std::string& prefix) const {
    const std::string api = std::string("linstate::layers::cuda_token_mixer::") + what;
    std::vector<const parameter_ref<float>*> r;
    for (const auto& p : params_) {
      const parameter_ref<float>* hit = nullptr;
      for (const auto& q : list)
        if (q.name == prefix + p.name) hit = &q;
      if (!hit) throw error(api + ": no parameter named " + prefix + p.name + " " + p.shape.str() + " in the list");
      if (!(hit->value.shape == p.shape))
        throw error(api + ": parameter " + prefix + p.name + " has shape " + hit->value.shape.str() + " but must be " + p.shape.str());
      if (hit->value.empty()) throw error(api + ": parameter " + prefix + p.name + " has no data");
      r.push_back(hit);
    }
    return r;
  }

  //! a device buffer of at least n floats (stream-ordered reallocation when it grows)
  float* ws(device_buffer<float>& b, index_t n) {
    if (b.size() < static_cast<std::size_t>(n)) b = device_buffer<float>(static_cast<std::size_t>(n), stream_);
    return b.data();
  }
  static tensor_view<const float> view(const device_buffer<float>& b, shape_t s) { return {b.data(), s}; }
  static tensor_view<float> view_mut(const device_buffer<float>& b, shape_t s) { return {b.data(), s}; }
  shape_t gate_shape() const {
    if constexpr (gate == gate_extent::head) return {B_, T_, H_};
    else return {B_, T_, H_, GW_};
  }
  void fill(float* p, float v, index_t n) {
    if (n <= 0) return;
    cuda_layers_detail::fill_kernel<<<grid(n), cuda_layers_detail::block, 0, stream_>>>(p, v, n);
    launched("fill_kernel");
  }

  void feature_forward(feature_map f, const float* x, float* y, index_t rows, index_t width) {
    const index_t n = rows * width;
    if (n == 0) return;
    if (f == feature_map::softmax)
      cuda_layers_detail::softmax_fwd_kernel<<<grid(rows), cuda_layers_detail::block, 0, stream_>>>(x, y, rows, static_cast<int>(width));
    else
      cuda_layers_detail::feature_fwd_kernel<<<grid(n), cuda_layers_detail::block, 0, stream_>>>(static_cast<int>(f), x, y, n);
    launched("feature_fwd_kernel");
  }
  //! dx = J_φ(x)ᵀ dy (+ add)
  void feature_backward(feature_map f, const float* x, const float* y, const float* dy, float* dx, const float* add, index_t rows,
                        index_t width) {
    const index_t n = rows * width;
    if (n == 0) return;
    if (f == feature_map::softmax)
      cuda_layers_detail::softmax_bwd_kernel<<<grid(rows), cuda_layers_detail::block, 0, stream_>>>(y, dy, dx, add, rows,
                                                                                                  static_cast<int>(width));
    else
      cuda_layers_detail::feature_bwd_kernel<<<grid(n), cuda_layers_detail::block, 0, stream_>>>(static_cast<int>(f), x, dy, dx, add, n);
    launched("feature_bwd_kernel");
  }
  void conv_forward(const float* x, const float* w, float* y, index_t C) {
    const index_t n = M_ * C;
    if (n == 0) return;
    cuda_layers_detail::conv_fwd_kernel<<<grid(n), cuda_layers_detail::block, 0, stream_>>>(x, w, y, T_, C,
                                                                                             static_cast<int>(conv_w_), n);
    launched("conv_fwd_kernel");
  }
  //! d(x W) from d(conv output) `dy`, into `dx`; conv weights' gradient += ; returns dx
  const float* conv_backward(const float* x, int wi, const float* dy, float* dx, index_t C) {
    const index_t n = M_ * C;
    if (n == 0) return dx;
    cuda_layers_detail::conv_bwd_dx_kernel<<<grid(n), cuda_layers_detail::block, 0, stream_>>>(val(wi), dy, dx, T_, C,
                                                                                                static_cast<int>(conv_w_), n);
    launched("conv_bwd_dx_kernel");
    cuda_layers_detail::conv_bwd_dw_kernel<<<grid(C * conv_w_), cuda_layers_detail::block, 0, stream_>>>(
        x, dy, grd(wi), M_, T_, C, static_cast<int>(conv_w_));
    launched("conv_bwd_dw_kernel");
    return dx;
  }
  void launch_rms_fwd(const float* z) {
    const index_t M = M_, HV = H_ * V_;
    cuda_layers_detail::rms_fwd_kernel<<<grid(M * H_), cuda_layers_detail::block, 0, stream_>>>(
        o_.data(), val(norm_w_), z, ws(yn_, M * HV), ws(rstd_, M * H_), M * H_, static_cast<int>(V_),
        static_cast<float>(cfg_.norm_eps));
    launched("rms_fwd_kernel");
  }

  void gate_forward(gate_group& gg) {
    const index_t M = M_;
    cublasHandle_t h = blas_.get();
    const float* X = x_.data();
    if constexpr (low_rank_gate) {
      const index_t R = cfg_.gate_rank, W = H_ * GW_;
      cuda_layers_detail::mm(h, X, val(gg.W1), ws(gg.h, M * R), M, D_, R, 0.f);
      cuda_layers_detail::mm(h, gg.h.data(), val(gg.W2), ws(gg.z, M * W), M, R, W, 0.f);
      cuda_layers_detail::lowrank_gate_fwd_kernel<<<grid(M * W), cuda_layers_detail::block, 0, stream_>>>(
          gg.z.data(), val(gg.b), ws(gg.g, M * W), M, static_cast<int>(W), static_cast<float>(cfg_.gate_normalizer));
      launched("lowrank_gate_fwd_kernel");
    } else if constexpr (gate == gate_extent::head) {
      cuda_layers_detail::mm(h, X, val(gg.Wa), ws(gg.z, M * H_), M, D_, H_, 0.f);
      cuda_layers_detail::head_gate_fwd_kernel<<<grid(M * H_), cuda_layers_detail::block, 0, stream_>>>(
          gg.z.data(), val(gg.A_log), val(gg.dt), ws(gg.g, M * H_), M, static_cast<int>(H_));
      launched("head_gate_fwd_kernel");
    }
    if constexpr (uses_beta) {
      cuda_layers_detail::mm(h, X, val(gg.Wb), ws(gg.zb, M * H_), M, D_, H_, 0.f);
      cuda_layers_detail::sigmoid_kernel<<<grid(M * H_), cuda_layers_detail::block, 0, stream_>>>(gg.zb.data(), ws(gg.beta, M * H_),
                                                                                                   M * H_);
      launched("sigmoid_kernel");
    }
  }

  void gate_backward(gate_group& gg, float* DX) {
    const index_t M = M_;
    cublasHandle_t h = blas_.get();
    const float* X = x_.data();
    if constexpr (low_rank_gate) {
      const index_t R = cfg_.gate_rank, W = H_ * GW_;
      float* dz = ws(gg.dz, M * W);
      cuda_layers_detail::lowrank_gate_bwd_kernel<<<grid(M * W), cuda_layers_detail::block, 0, stream_>>>(
          gg.z.data(), gg.dg.data(), dz, M * W, static_cast<float>(cfg_.gate_normalizer));
      launched("lowrank_gate_bwd_kernel");
      cuda_layers_detail::colsum_acc(h, dz, ones_.data(), grd(gg.b), M, W);
      cuda_layers_detail::mm_tn_acc(h, gg.h.data(), dz, grd(gg.W2), M, R, W);
      cuda_layers_detail::mm_nt(h, dz, val(gg.W2), ws(gg.dh, M * R), M, R, W, 0.f);
      cuda_layers_detail::mm_tn_acc(h, X, gg.dh.data(), grd(gg.W1), M, D_, R);
      cuda_layers_detail::mm_nt(h, gg.dh.data(), val(gg.W1), DX, M, D_, R, 1.f);
    } else if constexpr (gate == gate_extent::head) {
      float* dz = ws(gg.dz, M * H_);
      cuda_layers_detail::head_gate_bwd_kernel<<<grid(M * H_), cuda_layers_detail::block, 0, stream_>>>(
          gg.z.data(), gg.g.data(), gg.dg.data(), val(gg.A_log), dz, ws(gg.part, M * H_), M, static_cast<int>(H_));
      launched("head_gate_bwd_kernel");
      cuda_layers_detail::colsum_acc(h, gg.part.data(), ones_.data(), grd(gg.A_log), M, H_);
      cuda_layers_detail::colsum_acc(h, dz, ones_.data(), grd(gg.dt), M, H_);
      cuda_layers_detail::mm_tn_acc(h, X, dz, grd(gg.Wa), M, D_, H_);
      cuda_layers_detail::mm_nt(h, dz, val(gg.Wa), DX, M, D_, H_, 1.f);
    }
    if constexpr (uses_beta) {
      float* dzb = ws(gg.dzb, M * H_);
      cuda_layers_detail::sigmoid_bwd_kernel<<<grid(M * H_), cuda_layers_detail::block, 0, stream_>>>(gg.beta.data(), gg.dbeta.data(),
                                                                                                       dzb, M * H_);
      launched("sigmoid_bwd_kernel");
      cuda_layers_detail::mm_tn_acc(h, X, dzb, grd(gg.Wb), M, D_, H_);
      cuda_layers_detail::mm_nt(h, dzb, val(gg.Wb), DX, M, D_, H_, 1.f);
    }
  }

  //! Gradients of the kernel's inputs (linstate::backward on the GPU) into d1/d2, dvf_, dg/dbeta, dlogits_.
  void kernel_backward() {
    const index_t M = M_, HK = H_ * K_, HV = H_ * V_;
    const shape_t qk{B_, T_, H_, K_}, vs{B_, T_, H_, V_}, gs = gate_shape(), hs{B_, T_, H_}, ls{B_, T_, N_};
    auto& qmain = has_shared ? q_.d2 : q_.d1;
    auto& kmain = has_shared ? k_.d2 : k_.d1;
    ws(qmain, M * HK), ws(kmain, M * HK), ws(dvf_, M * HV);
    if constexpr (has_shared) ws(q_.d1, M * HK), ws(k_.d1, M * HK);
    gradients<float> gr;
    gr.q = view_mut(qmain, qk), gr.k = view_mut(kmain, qk), gr.v = view_mut(dvf_, vs);
    if constexpr (gate != gate_extent::none) gr.g = view_mut(dg_buf(main_, gs.numel()), gs);
    if constexpr (uses_beta) gr.beta = view_mut(db_buf(main_, M * H_), hs);
    if constexpr (has_shared) {
      gr.shared.q = view_mut(q_.d1, qk), gr.shared.k = view_mut(k_.d1, qk);
      if constexpr (gate != gate_extent::none) gr.shared.g = view_mut(dg_buf(shared_, gs.numel()), gs);
      if constexpr (uses_beta) gr.shared.beta = view_mut(db_buf(shared_, M * H_), hs);
    }
    if constexpr (routes) {
      ws(dlogits_, M * N_);
      gr.router_logits = view_mut(dlogits_, ls);
    }
    linstate::backward<V>(linstate::cuda{stream_}, kin_, cotangents<float>{.o = view(do_, vs)}, gr, Algorithm{}, Strategy{},
                          cfg_.kernel);
  }
  device_buffer<float>& dg_buf(gate_group& gg, index_t n) {
    ws(gg.dg, n);
    return gg.dg;
  }
  device_buffer<float>& db_buf(gate_group& gg, index_t n) {
    ws(gg.dbeta, n);
    return gg.dbeta;
  }

  mixer_config cfg_;
  cudaStream_t stream_ = nullptr;
  cuda_layers_detail::cublas_handle blas_;
  std::vector<dparam> params_;
  index_t D_ = 0, H_ = 0, K_ = 0, V_ = 0, N_ = 1, r_ = 0, GW_ = 0, conv_w_ = 0;
  index_t B_ = 0, T_ = 0, M_ = 0;
  bool forwarded_ = false;
  branch q_, k_;
  gate_group main_, shared_;
  int Wv_ = -1, Cv_ = -1, Wr_ = -1, Wog_ = -1, Wog2_ = -1, norm_w_ = -1, Wo_ = -1;
  device_buffer<float> x_, ones_, vraw_, vp_, vf_, logits_, o_, hog_, z_, yn_, rstd_, aux_;
  device_buffer<float> dyn_, do_, dz_, dhog_, part_, dvf_, dvp_, dvraw_, dlogits_;
  inputs<float> kin_{};
};

}  // namespace linstate::layers
