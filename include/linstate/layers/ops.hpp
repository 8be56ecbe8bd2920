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

//! Threads for a product of `flops` multiply-adds: 1 below ~1 M, else OpenMP's maximum.
inline int gemm_threads(index_t flops) {
#if LINSTATE_HAS_OPENMP
  return flops < (index_t(1) << 20) ? 1 : omp_get_max_threads();
#else
  (void)flops;
  return 1;
#endif
}

//! Runs f(first, last) over [0, n) split into one contiguous block per thread.
template <class F>
void blocks(index_t n, int threads, const F& f) {
  if (threads <= 1 || n < 2 * threads) {
    f(index_t(0), n);
    return;
  }
#if LINSTATE_HAS_OPENMP
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int t = 0; t < threads; ++t) {
    const index_t a = n * t / threads, b = n * (t + 1) / threads;
    if (a < b) f(a, b);
  }
#else
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
  blocks(M, gemm_threads(M * K * N), [&](index_t a, index_t b) {
    map<Real> Y(y + a * N, b - a, N);
    if (accumulate) Y.noalias() += cmap<Real>(x + a * K, b - a, K) * cmap<Real>(W, K, N);
    else Y.noalias() = cmap<Real>(x + a * K, b - a, K) * cmap<Real>(W, K, N);
  });
}

//! dW[K,N] += xᵀ[K,M] · dy[M,N]  (split over the K rows of dW: no reduction between threads)
template <class Real>
void matmul_tn_acc(const Real* x, const Real* dy, Real* dW, index_t M, index_t K, index_t N) {
  if (M == 0 || K == 0 || N == 0) return;
  using strided = Eigen::Map<const matrix<Real>, 0, Eigen::OuterStride<>>;
  blocks(K, gemm_threads(M * K * N), [&](index_t a, index_t b) {
    const strided xs(x + a, M, b - a, Eigen::OuterStride<>(K));  // columns [a, b) of x
    map<Real>(dW + a * N, b - a, N).noalias() += xs.transpose() * cmap<Real>(dy, M, N);
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
  blocks(M, gemm_threads(M * K * N), [&](index_t a, index_t b) {
    map<Real> DX(dx + a * K, b - a, K);
    if (accumulate) DX.noalias() += cmap<Real>(dy + a * N, b - a, N) * cmap<Real>(W, K, N).transpose();
    else DX.noalias() = cmap<Real>(dy + a * N, b - a, N) * cmap<Real>(W, K, N).transpose();
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

template <class Real>
using avec = Eigen::Map<Eigen::Array<Real, Eigen::Dynamic, 1>>;
template <class Real>
using cavec = Eigen::Map<const Eigen::Array<Real, Eigen::Dynamic, 1>>;

// The pointwise passes are Eigen array expressions, so that exp and the logistic function are
// vectorised (a scalar std::exp loop made them slower than the projections' GEMMs).

//! y = φ(x) on `rows` rows of `width` entries (softmax: over each row).
template <class Real>
void feature_forward(feature_map f, const Real* x, Real* y, index_t rows, index_t width) {
  const index_t n = rows * width;
  if (n == 0) return;
  if (f == feature_map::identity) std::copy(x, x + n, y);
  else if (f == feature_map::silu) avec<Real>(y, n) = cavec<Real>(x, n) * cavec<Real>(x, n).logistic();
  else {  // shift each row by its max, one vectorised exp over the whole buffer, then normalise rows
    for (index_t r = 0; r < rows; ++r) {
      const Real* a = x + r * width;
      const Real m = *std::max_element(a, a + width);
      for (index_t j = 0; j < width; ++j) y[r * width + j] = a[j] - m;
    }
    avec<Real>(y, n) = avec<Real>(y, n).exp();
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
  avec<Real> DX(dx, n);
  const cavec<Real> DY(dy, n);
  if (f == feature_map::identity) {
    if (accumulate) DX += DY;
    else DX = DY;
  } else if (f == feature_map::silu) {
    const cavec<Real> X(x, n);
    const auto s = X.logistic();
    const auto g = DY * s * (Real(1) + X * (Real(1) - s));  // silu' = σ(x)(1 + x(1 − σ(x)))
    if (accumulate) DX += g;
    else DX = g;
  } else
    for (index_t r = 0; r < rows; ++r) {
      const cavec<Real> Y(y + r * width, width), G(dy + r * width, width);
      avec<Real> R(dx + r * width, width);
      const Real dot = (Y * G).sum();
      if (accumulate) R += Y * (G - dot);
      else R = Y * (G - dot);
    }
}

//! \brief RMSNorm over rows of `width`, optionally gated (fla's FusedRMSNormGated, swish):
//!   r = (mean_j o_j² + eps)^(-1/2),  n_j = o_j r,  y_j = n_j w_j · (gate ? silu(z_j) : 1).
//! Stores r per row (`rstd`) for the backward.
template <class Real>
void rms_norm_forward(const Real* o, const Real* w, const Real* z, Real* y, Real* rstd, index_t rows, index_t width,
                      Real eps) {
  const cavec<Real> Wt(w, width);
  for (index_t r = 0; r < rows; ++r) {
    const cavec<Real> A(o + r * width, width);
    const Real rs = Real(1) / std::sqrt(A.square().sum() / static_cast<Real>(width) + eps);
    rstd[r] = rs;
    avec<Real> Y(y + r * width, width);
    if (z) {
      const cavec<Real> Z(z + r * width, width);
      Y = A * rs * Wt * (Z * Z.logistic());
    } else Y = A * rs * Wt;
  }
}

//! Backward of rms_norm_forward: do (overwritten), dw (+=), dz (overwritten, when z is given).
//! do_j = r (dn_j − n_j · mean_i(dn_i n_i)) with dn_j = dy_j w_j s_j, s = SiLU(z) (or 1).
template <class Real>
void rms_norm_backward(const Real* o, const Real* w, const Real* z, const Real* rstd, const Real* dy, Real* d_o, Real* dw,
                       Real* dz, index_t rows, index_t width) {
  const cavec<Real> Wt(w, width);
  avec<Real> DW(dw, width);
  for (index_t r = 0; r < rows; ++r) {
    const Real rs = rstd[r];
    const cavec<Real> A(o + r * width, width), DY(dy + r * width, width);
    avec<Real> DO(d_o + r * width, width);
    if (z) {
      const cavec<Real> Z(z + r * width, width);
      avec<Real> DZ(dz + r * width, width);
      DZ = Z.logistic();                               // σ(z) for now
      DO = DY * Wt * Z * DZ;                           // dn = dy w s, s = z σ(z)
      DW += DY * A * rs * Z * DZ;                      // dw += dy n s
      DZ = DY * A * rs * Wt * DZ * (Real(1) + Z * (Real(1) - DZ));  // dy n w silu'(z)
    } else {
      DO = DY * Wt;
      DW += DY * A * rs;
    }
    const Real dot = (DO * A).sum() * rs / static_cast<Real>(width);  // mean(dn n)
    DO = rs * (DO - A * rs * dot);
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
