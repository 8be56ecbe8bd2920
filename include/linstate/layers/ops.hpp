// linstate/layers/ops.hpp — the dense pieces the layers are built from: row-major GEMMs (Eigen), the
// pointwise functions and their derivatives, row softmax and the (gated) RMSNorm. Templated on the
// element type: float for training, double for the fp64 gradient checks.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <string>

#include "../config.hpp"
#include "../tensor.hpp"

namespace linstate::layers {

//! The feature map applied per head to q, k or v (SPEC §4.3 step 5).
enum class feature_map {
  identity,  //!< φ(x) = x (fla's GLA layer)
  silu,      //!< φ(x) = x σ(x) (SSE's q and v; GDN's q, k, v)
  softmax,   //!< φ(x) = softmax over the head dimension (SSE-GLA's key: k_t = softmax(x_t W_k))
};

inline const char* name(feature_map f) {
  return f == feature_map::identity ? "identity" : f == feature_map::silu ? "silu" : "softmax";
}

namespace ops {

template <class Real>
using matrix = Eigen::Matrix<Real, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class Real>
using map = Eigen::Map<matrix<Real>>;
template <class Real>
using cmap = Eigen::Map<const matrix<Real>>;

// The products are split over the threads by the layers themselves: each thread runs one Eigen
// product on its own block of rows (Eigen runs sequentially inside a parallel region). Eigen's own
// OpenMP GEMM is not used: on these tall, skinny shapes (M = B·T rows, 16–256 columns) it was 17×
// slower than one thread on the loaded 2-core VM (3.3 s instead of 0.2 s for a GLA layer step at
// B = 32, T = 256, D = 64).

// Each Eigen product covers at most gemm_rows rows of x (and matmul_tn_acc at most gemm_rows rows of
// its depth): Eigen then packs its blocks on the stack (they stay under EIGEN_STACK_ALLOCATION_LIMIT,
// 128 KB, for widths up to 256) instead of allocating them on the heap for every product, so a
// training step allocates nothing once its buffers exist (docs/layers.md). Repacking W for every
// 128 rows costs about 1/128 of the product.
inline constexpr index_t gemm_rows = 128;

//! Threads for a product of `flops` multiply-adds: 1 below ~1 M, else OpenMP's maximum.
inline int gemm_threads(index_t flops) {
#if LINSTATE_HAS_OPENMP
  return flops < (index_t(1) << 20) ? 1 : omp_get_max_threads();
#else
  (void)flops;
  return 1;
#endif
}

//! Runs f(first, last) over [0, n) split into one contiguous block per thread. f runs inside an
//! OpenMP region even on one thread, with this thread's team size set to 1 for the region: Eigen's
//! products inside f then stay on their thread (outside a region Eigen would fork its own team for a
//! product of more than ~100 K multiply-adds whenever omp_get_max_threads() > 1, and allocate for it).
//! An application that called Eigen::setNbThreads(n > 1) overrides that; the layers do not need it.
template <class F>
void blocks(index_t n, int threads, const F& f) {
  if (threads <= 1 || n < 2 * threads) threads = 1;
#if LINSTATE_HAS_OPENMP
#pragma omp parallel num_threads(threads)
  {
    omp_set_num_threads(1);  // for the products inside f (local to this region's task)
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const index_t a = n * t / nt, b = n * (t + 1) / nt;
    if (a < b) f(a, b);
  }
#else
  (void)threads;
  f(index_t(0), n);
#endif
}

//! y[M,N] = x[M,K] · W[K,N]  (+ y when accumulate)
template <class Real>
void matmul(const Real* x, const Real* W, Real* y, index_t M, index_t K, index_t N, bool accumulate = false) {
  if (M == 0 || N == 0) return;
  if (K == 0) {
    if (!accumulate) map<Real>(y, M, N).setZero();
    return;
  }
  blocks(M, gemm_threads(M * K * N), [&](index_t a0, index_t b0) {
    for (index_t a = a0; a < b0; a += gemm_rows) {
      const index_t b = std::min(b0, a + gemm_rows);
      map<Real> Y(y + a * N, b - a, N);
      if (accumulate) Y.noalias() += cmap<Real>(x + a * K, b - a, K) * cmap<Real>(W, K, N);
      else Y.noalias() = cmap<Real>(x + a * K, b - a, K) * cmap<Real>(W, K, N);
    }
  });
}

//! dW[K,N] += xᵀ[K,M] · dy[M,N]  (split over the K rows of dW: no reduction between threads)
template <class Real>
void matmul_tn_acc(const Real* x, const Real* dy, Real* dW, index_t M, index_t K, index_t N) {
  if (M == 0 || K == 0 || N == 0) return;
  using strided = Eigen::Map<const matrix<Real>, 0, Eigen::OuterStride<>>;
  blocks(K, gemm_threads(M * K * N), [&](index_t a, index_t b) {
    for (index_t m0 = 0; m0 < M; m0 += gemm_rows) {  // the depth in gemm_rows pieces, in order
      const index_t m = std::min(M - m0, gemm_rows);
      const strided xs(x + m0 * K + a, m, b - a, Eigen::OuterStride<>(K));  // rows [m0, m0+m), columns [a, b) of x
      map<Real>(dW + a * N, b - a, N).noalias() += xs.transpose() * cmap<Real>(dy + m0 * N, m, N);
    }
  });
}

//! dx[M,K] (+)= dy[M,N] · Wᵀ[N,K]
template <class Real>
void matmul_nt(const Real* dy, const Real* W, Real* dx, index_t M, index_t K, index_t N, bool accumulate) {
  if (M == 0 || K == 0) return;
  if (N == 0) {
    if (!accumulate) map<Real>(dx, M, K).setZero();
    return;
  }
  blocks(M, gemm_threads(M * K * N), [&](index_t a0, index_t b0) {
    for (index_t a = a0; a < b0; a += gemm_rows) {
      const index_t b = std::min(b0, a + gemm_rows);
      map<Real> DX(dx + a * K, b - a, K);
      if (accumulate) DX.noalias() += cmap<Real>(dy + a * N, b - a, N) * cmap<Real>(W, K, N).transpose();
      else DX.noalias() = cmap<Real>(dy + a * N, b - a, N) * cmap<Real>(W, K, N).transpose();
    }
  });
}

template <class Real>
Real sigmoid(Real x) {
  return x >= 0 ? Real(1) / (Real(1) + std::exp(-x)) : std::exp(x) / (Real(1) + std::exp(x));
}
//! log σ(x), stable for large |x|
template <class Real>
Real logsigmoid(Real x) {
  return x >= 0 ? -std::log1p(std::exp(-x)) : x - std::log1p(std::exp(x));
}
//! log(1 + eˣ), stable
template <class Real>
Real softplus(Real x) {
  return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}
template <class Real>
Real silu(Real x) {
  return x * sigmoid(x);
}
//! d silu / dx = σ(x)(1 + x(1 − σ(x)))
template <class Real>
Real silu_grad(Real x) {
  const Real s = sigmoid(x);
  return s * (Real(1) + x * (Real(1) - s));
}

//! \brief out[i] = f(a[i]) (or f(a[i], b[i])) for i < n, computed in aligned, fixed-size chunks of
//! 64 with Eigen's packet functions (vectorised exp, logistic). Every element goes through the same
//! instructions whatever the buffers' addresses: Eigen's own loops over a Map peel a scalar head up
//! to the destination's alignment, and its scalar exp differs from the packet one in the last bit,
//! which made two identical layers at different addresses disagree. The tail is padded with zeros.
template <class Real, class F>
void pointwise(index_t n, Real* out, const Real* a, const Real* b, const F& f) {
  constexpr int C = 64;
  using chunk = Eigen::Array<Real, C, 1>;
  alignas(64) Real ba[C];
  alignas(64) Real bb[C];
  alignas(64) Real res[C];
  for (index_t s = 0; s < n; s += C) {
    const index_t len = std::min<index_t>(C, n - s);
    std::copy_n(a + s, len, ba), std::fill(ba + len, ba + C, Real(0));
    if (b) std::copy_n(b + s, len, bb), std::fill(bb + len, bb + C, Real(0));
    const Eigen::Map<const chunk, Eigen::Aligned64> A(ba), B(bb);
    Eigen::Map<chunk, Eigen::Aligned64> R(res);
    R = f(A, B);
    std::copy_n(res, len, out + s);
  }
}

//! y = φ(x) on `rows` rows of `width` entries (softmax: over each row).
template <class Real>
void feature_forward(feature_map f, const Real* x, Real* y, index_t rows, index_t width) {
  const index_t n = rows * width;
  if (n == 0) return;
  if (f == feature_map::identity) std::copy(x, x + n, y);
  else if (f == feature_map::silu)
    pointwise<Real>(n, y, x, nullptr, [](const auto& X, const auto&) { return X * X.logistic(); });
  else {  // shift each row by its max, one vectorised exp over the whole buffer, then normalise rows
    for (index_t r = 0; r < rows; ++r) {
      const Real* a = x + r * width;
      const Real m = *std::max_element(a, a + width);
      for (index_t j = 0; j < width; ++j) y[r * width + j] = a[j] - m;
    }
    pointwise<Real>(n, y, y, nullptr, [](const auto& X, const auto&) { return X.exp(); });
    for (index_t r = 0; r < rows; ++r) {
      Real* b = y + r * width;
      Real sum = 0;
      for (index_t j = 0; j < width; ++j) sum += b[j];
      const Real inv = Real(1) / sum;
      for (index_t j = 0; j < width; ++j) b[j] *= inv;
    }
  }
}

//! dx (+)= J_φ(x)ᵀ dy, given x and y = φ(x). Softmax: dx = y ⊙ (dy − ⟨y, dy⟩) per row.
template <class Real>
void feature_backward(feature_map f, const Real* x, const Real* y, const Real* dy, Real* dx, index_t rows, index_t width,
                      bool accumulate) {
  const index_t n = rows * width;
  if (n == 0) return;
  auto put = [&](index_t i, Real v) { dx[i] = accumulate ? dx[i] + v : v; };
  if (f == feature_map::identity)
    for (index_t i = 0; i < n; ++i) put(i, dy[i]);
  else if (f == feature_map::silu) {
    if (accumulate) throw error("linstate::layers::ops::feature_backward: accumulate is not supported for silu");
    // silu' = σ(x)(1 + x(1 − σ(x)))
    pointwise<Real>(n, dx, x, dy, [](const auto& X, const auto& DY) {
      return DY * X.logistic() * (Real(1) + X * (Real(1) - X.logistic()));
    });
  } else
    for (index_t r = 0; r < rows; ++r) {
      Real dot = 0;
      for (index_t j = 0; j < width; ++j) dot += y[r * width + j] * dy[r * width + j];
      for (index_t j = 0; j < width; ++j) put(r * width + j, y[r * width + j] * (dy[r * width + j] - dot));
    }
}

//! \brief RMSNorm over rows of `width`, optionally gated (fla's FusedRMSNormGated, swish):
//!   r = (mean_j o_j² + eps)^(-1/2),  n_j = o_j r,  y_j = n_j w_j · (gate ? z_j σ(z_j) : 1),
//! given σ(z) in `sig` (null: no gate; see pointwise for why it is computed apart). Stores r per row
//! (`rstd`) for the backward.
template <class Real>
void rms_norm_forward(const Real* o, const Real* w, const Real* z, const Real* sig, Real* y, Real* rstd, index_t rows,
                      index_t width, Real eps) {
  for (index_t r = 0; r < rows; ++r) {
    const Real* a = o + r * width;
    Real ss = 0;
    for (index_t j = 0; j < width; ++j) ss += a[j] * a[j];
    const Real rs = Real(1) / std::sqrt(ss / static_cast<Real>(width) + eps);
    rstd[r] = rs;
    for (index_t j = 0; j < width; ++j) {
      const index_t i = r * width + j;
      y[i] = a[j] * rs * w[j] * (sig ? z[i] * sig[i] : Real(1));
    }
  }
}

//! Backward of rms_norm_forward: do (overwritten), dw (+=), dz (overwritten, when gated).
//! do_j = r (dn_j − n_j · mean_i(dn_i n_i)) with dn_j = dy_j w_j s_j, s = SiLU(z) (or 1).
template <class Real>
void rms_norm_backward(const Real* o, const Real* w, const Real* z, const Real* sig, const Real* rstd, const Real* dy,
                       Real* d_o, Real* dw, Real* dz, index_t rows, index_t width) {
  for (index_t r = 0; r < rows; ++r) {
    const Real rs = rstd[r];
    Real dot = 0;
    for (index_t j = 0; j < width; ++j) {
      const index_t i = r * width + j;
      const Real n = o[i] * rs, s = sig ? z[i] * sig[i] : Real(1);
      dw[j] += dy[i] * n * s;
      if (sig) dz[i] = dy[i] * n * w[j] * sig[i] * (Real(1) + z[i] * (Real(1) - sig[i]));
      const Real dn = dy[i] * w[j] * s;
      d_o[i] = dn;  // dn for now
      dot += dn * n;
    }
    dot /= static_cast<Real>(width);
    for (index_t j = 0; j < width; ++j) {
      const index_t i = r * width + j;
      d_o[i] = rs * (d_o[i] - o[i] * rs * dot);
    }
  }
}

//! \brief Causal depthwise convolution along time of width W, per sequence (fla's ShortConvolution
//! without its activation; PyTorch's `conv1d(x, w, padding = W−1, groups = C)[..., :T]`):
//! \verbatim
//!   y[b,t,c] = Σ_{j<W} w[c,j] · x[b, t−(W−1)+j, c]     (x before t = 0 is zero; w[c,W−1] weighs the token itself)
//! \endverbatim
//! x, y `[B,T,C]` (y must not alias x), w `[C,W]`.
template <class Real>
void causal_conv_forward(const Real* x, const Real* w, Real* y, index_t B, index_t T, index_t C, index_t W) {
  blocks(B * T, gemm_threads(B * T * C * W), [&](index_t first, index_t last) {
    for (index_t bt = first; bt < last; ++bt) {
      const index_t t = bt % T;
      Real* yr = y + bt * C;
      std::fill(yr, yr + C, Real(0));
      for (index_t j = std::max<index_t>(0, W - 1 - t); j < W; ++j) {
        const Real* xr = x + (bt - (W - 1) + j) * C;
        for (index_t c = 0; c < C; ++c) yr[c] += w[c * W + j] * xr[c];
      }
    }
  });
}

//! \brief Backward of causal_conv_forward: dx (overwritten) and dw (+=) from dy, all `[B,T,C]` / `[C,W]`:
//! dx[b,s,c] = Σ_j w[c,j] dy[b, s+(W−1)−j, c] (terms past T drop), dw[c,j] += Σ_{b,t} dy[b,t,c] x[b,t−(W−1)+j,c].
template <class Real>
void causal_conv_backward(const Real* x, const Real* w, const Real* dy, Real* dx, Real* dw, index_t B, index_t T, index_t C,
                          index_t W) {
  for (index_t bt = 0; bt < B * T; ++bt) {
    const index_t s = bt % T;
    Real* dr = dx + bt * C;
    std::fill(dr, dr + C, Real(0));
    for (index_t j = 0; j < W; ++j) {
      const index_t t = s + (W - 1) - j;  // the output that saw x[s] through w[·,j]
      if (t >= T) continue;
      const Real* dyr = dy + (bt + (W - 1) - j) * C;
      for (index_t c = 0; c < C; ++c) dr[c] += w[c * W + j] * dyr[c];
    }
  }
  for (index_t bt = 0; bt < B * T; ++bt) {
    const index_t t = bt % T;
    const Real* dyr = dy + bt * C;
    for (index_t j = std::max<index_t>(0, W - 1 - t); j < W; ++j) {
      const Real* xr = x + (bt - (W - 1) + j) * C;
      for (index_t c = 0; c < C; ++c) dw[c * W + j] += dyr[c] * xr[c];
    }
  }
}

//! Throws linstate::error "api: name has shape [..] but must be want (what)" unless t.shape == want.
//! (`api` is a const char*: nothing is allocated unless it throws.)
template <class T>
void require(const char* api, const char* name, const tensor_view<T>& t, const shape_t& want, const char* what) {
  if (t.empty()) throw error(std::string(api) + ": " + name + " is required: " + want.str() + " " + what);
  if (!(t.shape == want))
    throw error(std::string(api) + ": " + name + " has shape " + t.shape.str() + " but must be " + want.str() + " " + what);
}

}  // namespace ops
}  // namespace linstate::layers
