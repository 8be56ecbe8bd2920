// linstate/cuda/kernels/balance.cuh — the SSE balance loss on the device (SPEC §4.9), the twin of
// detail::balance_loss_impl (include/linstate/balance_loss.hpp), in four deterministic steps:
//   balance_probs_kernel   one thread per token: p_t and the write mask w_t from the router policy's
//                          R::route (router::top_k: the softmax, rounded to the input type with
//                          round_to_input, and the top-kw set)
//   balance_colsum_kernel  per chunk of tokens and partition n: Σ p_t[n], Σ w_t[n] in double
//   balance_final_kernel   one block: P_n, F_n (chunks added in order), aux = (N/kw) Σ_n P_n F_n (added
//                          in n order, as the CPU), written as float; dp_n = (N/kw) F_n / M
//   balance_grad_kernel    one thread per token: d_logits = coefficient · R::scores_backward(dp)
//                          (router::top_k: p ⊙ (dp − ⟨p, dp⟩); overwrite or accumulate in the
//                          logits' element type)
// A token whose logits are not finite gets p = NaN (so the loss and every gradient become NaN).
#pragma once

#include <cstdint>

#include <linstate/detail/router.hpp>
#include <linstate/tensor.hpp>

#include "../detail/scalar.cuh"
#include "router.cuh"

namespace linstate::cuda_detail {

inline constexpr index_t balance_chunk = 1024;  //!< tokens per partial sum

//! One thread per token: the router policy's R::route gives p_t (its scores) and the write flags.
template <class R, class Dev>
__global__ void balance_probs_kernel(const typename R::config cfg, const Dev* logits, index_t M, int N, float* prob,
                                     float* wmask) {
  const index_t t = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= M) return;
  float x[max_router_partitions], pr[max_router_partitions], cw[max_router_partitions], cr[max_router_partitions];
  std::uint8_t fl[max_router_partitions];
  bool finite = true;
  for (int n = 0; n < N; ++n) {
    x[n] = to_f32(logits[t * N + n]);
    finite &= finite_f32(x[n]);
  }
  if (!finite) {
    for (int n = 0; n < N; ++n) prob[t * N + n] = quiet_nan(), wmask[t * N + n] = 0.f;
    return;
  }
  R::route(cfg, N, x, static_cast<const float*>(nullptr), pr, cw, cr, fl, round_to_dev<Dev>{});
  for (int n = 0; n < N; ++n) {
    prob[t * N + n] = pr[n];
    wmask[t * N + n] = (fl[n] & detail::route_write) ? 1.f : 0.f;
  }
}

// (static: a kernel that is not a template has internal linkage, so that several .cu files of one
// program can include this header; each gets its own copy.)
//! partial[chunk][0][n] = Σ p_t[n], partial[chunk][1][n] = Σ w_t[n] over the chunk's tokens (double).
//! Grid: (chunks, ⌈N / blockDim.x⌉).
static __global__ void balance_colsum_kernel(const float* prob, const float* wmask, index_t M, int N, double* partial) {
  const int n = static_cast<int>(blockIdx.y * blockDim.x + threadIdx.x);
  if (n >= N) return;
  const index_t chunk = blockIdx.x, t0 = chunk * balance_chunk;
  const index_t t1 = t0 + balance_chunk < M ? t0 + balance_chunk : M;
  double sp = 0.0, sw = 0.0;
  for (index_t t = t0; t < t1; ++t) sp += static_cast<double>(prob[t * N + n]), sw += static_cast<double>(wmask[t * N + n]);
  partial[(chunk * 2) * N + n] = sp;
  partial[(chunk * 2 + 1) * N + n] = sw;
}

//! One block of max_router_partitions threads.
static __global__ void balance_final_kernel(const double* partial, index_t chunks, index_t M, int N, int kw, float* loss,
                                     double* dp) {
  __shared__ double pf[max_router_partitions];
  const int n = static_cast<int>(threadIdx.x);
  const double factor = static_cast<double>(N) / static_cast<double>(kw);
  if (n < N) {
    double P = 0.0, F = 0.0;
    for (index_t c = 0; c < chunks; ++c) P += partial[(c * 2) * N + n], F += partial[(c * 2 + 1) * N + n];
    P /= static_cast<double>(M);
    F /= static_cast<double>(M);
    pf[n] = P * F;
    dp[n] = factor * F / static_cast<double>(M);
  }
  __syncthreads();
  if (n == 0 && loss) {
    double aux = 0.0;
    for (int m = 0; m < N; ++m) aux += pf[m];
    *loss = static_cast<float>(aux * factor);
  }
}

//! One thread per token: d_logits = coefficient · (the policy's R::scores_backward of dp), in double
//! as the CPU (router::top_k: p ⊙ (dp − ⟨p, dp⟩)).
template <class R, class Dev>
__global__ void balance_grad_kernel(const typename R::config cfg, const Dev* logits, const float* prob, index_t M, int N,
                                    const double* dp, float coefficient, bool accumulate, Dev* d_logits) {
  const index_t t = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= M) return;
  double x[max_router_partitions], dx[max_router_partitions];
  for (int n = 0; n < N; ++n) x[n] = static_cast<double>(to_f32(logits[t * N + n]));
  R::scores_backward(cfg, N, x, static_cast<const float*>(nullptr), prob + t * N, dp, dx);
  for (int n = 0; n < N; ++n) {
    const float g = static_cast<float>(dx[n]);
    const float add = coefficient * g;
    Dev* out = d_logits + t * N + n;
    *out = accumulate ? from_f32<Dev>(to_f32(*out) + add) : from_f32<Dev>(add);
  }
}

}  // namespace linstate::cuda_detail
