// linstate/layers/ops.hpp — the dense pieces the layers are built from: row-major GEMMs (Eigen), the
// pointwise functions and their derivatives, row softmax and the (gated) RMSNorm. Templated on the
// element type: float for training, double for the fp64 gradient checks.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <string>

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

//! y[M,N] = x[M,K] · W[K,N]  (+ y when accumulate)
template <class Real>
void matmul(const Real* x, const Real* W, Real* y, index_t M, index_t K, index_t N, bool accumulate = false) {
  if (M == 0 || N == 0) return;
  map<Real> Y(y, M, N);
  if (K == 0) {
    if (!accumulate) Y.setZero();
    return;
  }
  if (accumulate) Y.noalias() += cmap<Real>(x, M, K) * cmap<Real>(W, K, N);
  else Y.noalias() = cmap<Real>(x, M, K) * cmap<Real>(W, K, N);
}

//! dW[K,N] += xᵀ[K,M] · dy[M,N]
template <class Real>
void matmul_tn_acc(const Real* x, const Real* dy, Real* dW, index_t M, index_t K, index_t N) {
  if (M == 0 || K == 0 || N == 0) return;
  map<Real>(dW, K, N).noalias() += cmap<Real>(x, M, K).transpose() * cmap<Real>(dy, M, N);
}

//! dx[M,K] (+)= dy[M,N] · Wᵀ[N,K]
template <class Real>
void matmul_nt(const Real* dy, const Real* W, Real* dx, index_t M, index_t K, index_t N, bool accumulate) {
  if (M == 0 || K == 0) return;
  map<Real> DX(dx, M, K);
  if (N == 0) {
    if (!accumulate) DX.setZero();
    return;
  }
  if (accumulate) DX.noalias() += cmap<Real>(dy, M, N) * cmap<Real>(W, K, N).transpose();
  else DX.noalias() = cmap<Real>(dy, M, N) * cmap<Real>(W, K, N).transpose();
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

//! y = φ(x) on `rows` rows of `width` entries (softmax: over each row).
template <class Real>
void feature_forward(feature_map f, const Real* x, Real* y, index_t rows, index_t width) {
  const index_t n = rows * width;
  if (f == feature_map::identity) std::copy(x, x + n, y);
  else if (f == feature_map::silu)
    for (index_t i = 0; i < n; ++i) y[i] = silu(x[i]);
  else
    for (index_t r = 0; r < rows; ++r) {
      const Real* a = x + r * width;
      Real* b = y + r * width;
      Real m = a[0], s = 0;
      for (index_t j = 1; j < width; ++j) m = std::max(m, a[j]);
      for (index_t j = 0; j < width; ++j) s += (b[j] = std::exp(a[j] - m));
      for (index_t j = 0; j < width; ++j) b[j] /= s;
    }
}

//! dx (+)= J_φ(x)ᵀ dy, given x and y = φ(x). Softmax: dx = y ⊙ (dy − ⟨y, dy⟩) per row.
template <class Real>
void feature_backward(feature_map f, const Real* x, const Real* y, const Real* dy, Real* dx, index_t rows, index_t width,
                      bool accumulate) {
  const index_t n = rows * width;
  auto put = [&](index_t i, Real v) { dx[i] = accumulate ? dx[i] + v : v; };
  if (f == feature_map::identity)
    for (index_t i = 0; i < n; ++i) put(i, dy[i]);
  else if (f == feature_map::silu)
    for (index_t i = 0; i < n; ++i) put(i, dy[i] * silu_grad(x[i]));
  else
    for (index_t r = 0; r < rows; ++r) {
      Real dot = 0;
      for (index_t j = 0; j < width; ++j) dot += y[r * width + j] * dy[r * width + j];
      for (index_t j = 0; j < width; ++j) put(r * width + j, y[r * width + j] * (dy[r * width + j] - dot));
    }
}

//! \brief RMSNorm over rows of `width`, optionally gated (fla's FusedRMSNormGated, swish):
//!   r = (mean_j o_j² + eps)^(-1/2),  n_j = o_j r,  y_j = n_j w_j · (gate ? silu(z_j) : 1).
//! Stores r per row (`rstd`) for the backward.
template <class Real>
void rms_norm_forward(const Real* o, const Real* w, const Real* z, Real* y, Real* rstd, index_t rows, index_t width,
                      Real eps) {
  for (index_t r = 0; r < rows; ++r) {
    const Real* a = o + r * width;
    Real ss = 0;
    for (index_t j = 0; j < width; ++j) ss += a[j] * a[j];
    const Real rs = Real(1) / std::sqrt(ss / static_cast<Real>(width) + eps);
    rstd[r] = rs;
    for (index_t j = 0; j < width; ++j)
      y[r * width + j] = a[j] * rs * w[j] * (z ? silu(z[r * width + j]) : Real(1));
  }
}

//! Backward of rms_norm_forward: do (overwritten), dw (+=), dz (overwritten, when z is given).
//! do_j = r (dn_j − n_j · mean_i(dn_i n_i)) with dn_j = dy_j w_j s_j.
template <class Real>
void rms_norm_backward(const Real* o, const Real* w, const Real* z, const Real* rstd, const Real* dy, Real* d_o, Real* dw,
                       Real* dz, index_t rows, index_t width) {
  for (index_t r = 0; r < rows; ++r) {
    const Real rs = rstd[r];
    Real dot = 0;
    for (index_t j = 0; j < width; ++j) {
      const index_t i = r * width + j;
      const Real n = o[i] * rs, s = z ? silu(z[i]) : Real(1);
      dw[j] += dy[i] * n * s;
      if (z) dz[i] = dy[i] * n * w[j] * silu_grad(z[i]);
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
