// linstate/cuda/kernels/gradient_combine.cuh — the deterministic second half of the backward pass:
// per-slot fp32 partial gradients → the user's gradient tensors, and the router's gradient (SPEC §4.6).
//
//  * slot_sum_kernel: out[t, g, e] = Σ_{hv ∈ group g} Σ_{r ∈ [r0, r1)} Σ_{z < Z} part[z, t, hv, r, e], in
//    that order (value heads, then slots ascending, then V groups), rounded once to the element type.
//    One thread per output element (per four when E % 4 == 0: slot_sum4_kernel), no atomics. A token
//    whose router logits are not finite gets NaN.
//  * router_bwd_kernel: one thread per token: the scores and flags again from the router policy's
//    R::route (with the router_kernel's rounding: its own numbers), ∂L/∂(write weight) and ∂L/∂(read
//    weight) of each selected partition summed over value heads (and V groups), then the policy's
//    R::weights_backward — the function the CPU backend runs (router::top_k: through the
//    renormalisation when it is on, zero for an unused gate side, then the softmax backward;
//    rounding to the input type passes the gradient through unchanged).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include <linstate/detail/router.hpp>
#include <linstate/tensor.hpp>

#include "../check.cuh"
#include "../detail/scalar.cuh"
#include "router.cuh"

namespace linstate::cuda_detail {

//! Layout of a partial buffer [Z, tokens, groups·G, R, E] and the slots [r0, r1) to sum into
//! out [tokens, groups, E].
struct slot_sum_args {
  const float* part = nullptr;
  index_t zstride = 0;  // floats between two V groups
  int Z = 1;
  index_t tokens = 0;
  int groups = 1, G = 1;  // output heads; value heads per output head
  int R = 1, r0 = 0, r1 = 1;
  int E = 1;             // innermost width (K, V, K or 1)
  const std::uint32_t* meta = nullptr;  // [tokens, N] (NaN for a non-finite token), or null
  int N = 1;
};

template <class Dev>
__global__ void slot_sum_kernel(const slot_sum_args a, Dev* out) {
  const index_t i = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const index_t per_token = static_cast<index_t>(a.groups) * a.E;
  if (i >= a.tokens * per_token) return;
  const index_t t = i / per_token;
  const index_t rem = i % per_token;
  const int grp = static_cast<int>(rem / a.E), e = static_cast<int>(rem % a.E);
  float acc = 0.f;
  if (a.meta && (a.meta[t * a.N] & route_nonfinite)) {
    acc = quiet_nan();
  } else {
    const index_t HV = static_cast<index_t>(a.groups) * a.G;
    for (int gg = 0; gg < a.G; ++gg) {
      const index_t base = ((t * HV + grp * a.G + gg) * a.R) * a.E + e;
      for (int r = a.r0; r < a.r1; ++r)
        for (int z = 0; z < a.Z; ++z) acc += a.part[z * a.zstride + base + static_cast<index_t>(r) * a.E];
    }
  }
  out[i] = from_f32<Dev>(acc);
}

//! The tokens whose router logits are not finite get NaN rows in the gradients the backward's kernels
//! stored directly (backward.cuh's direct stores skip the slot sum, which gives them NaN there): up
//! to seven outputs of `row` elements per token. One warp per token; a finite token costs one load.
struct nan_rows_args {
  const std::uint32_t* meta = nullptr;  // [tokens, N]
  index_t tokens = 0;
  int N = 1;
  int count = 0;
  void* out[7] = {};
  index_t row[7] = {};
};

template <class Dev>
__global__ void nan_rows_kernel(const nan_rows_args a) {
  const index_t t = (static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  if (t >= a.tokens || !(a.meta[t * a.N] & route_nonfinite)) return;
  for (int i = 0; i < a.count; ++i) {
    Dev* o = static_cast<Dev*>(a.out[i]) + t * a.row[i];
    for (index_t e = lane; e < a.row[i]; e += 32) o[e] = from_f32<Dev>(quiet_nan());
  }
}

template <class Dev>
void launch_nan_rows(const nan_rows_args& a, cudaStream_t stream, const char* api) {
  if (a.count == 0 || a.tokens == 0) return;
  constexpr int threads = 256;
  const index_t blocks = (a.tokens * 32 + threads - 1) / threads;
  nan_rows_kernel<Dev><<<static_cast<unsigned>(blocks), threads, 0, stream>>>(a);
  check_launch("nan_rows_kernel", api);
}

//! slot_sum_kernel for E % 4 == 0: one thread per four consecutive elements (16-byte loads of the
//! partials, which the scratch layout keeps 16-byte aligned); the same sums in the same order.
template <class Dev>
__global__ void slot_sum4_kernel(const slot_sum_args a, Dev* out) {
  const index_t i = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int E4 = a.E / 4;
  const index_t per_token = static_cast<index_t>(a.groups) * E4;
  if (i >= a.tokens * per_token) return;
  const index_t t = i / per_token;
  const index_t rem = i % per_token;
  const int grp = static_cast<int>(rem / E4), e = static_cast<int>(rem % E4) * 4;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  if (a.meta && (a.meta[t * a.N] & route_nonfinite)) {
    acc = make_float4(quiet_nan(), quiet_nan(), quiet_nan(), quiet_nan());
  } else {
    const index_t HV = static_cast<index_t>(a.groups) * a.G;
    for (int gg = 0; gg < a.G; ++gg) {
      const index_t base = ((t * HV + grp * a.G + gg) * a.R) * a.E + e;
      for (int r = a.r0; r < a.r1; ++r)
        for (int z = 0; z < a.Z; ++z) {
          const float4 x = *reinterpret_cast<const float4*>(a.part + z * a.zstride + base + static_cast<index_t>(r) * a.E);
          acc.x += x.x, acc.y += x.y, acc.z += x.z, acc.w += x.w;
        }
    }
  }
  Dev* o = out + i * 4;
  o[0] = from_f32<Dev>(acc.x), o[1] = from_f32<Dev>(acc.y), o[2] = from_f32<Dev>(acc.z), o[3] = from_f32<Dev>(acc.w);
}

template <class R, class Dev>
struct router_bwd_params {
  typename R::config cfg{};             // the router policy's resolved configuration (by value)
  index_t tokens = 0;
  int N = 1, HV = 1, Z = 1;
  const Dev* logits = nullptr;          // [tokens, N]
  const float* params = nullptr;        // the policy's router_params (device), or null
  const std::uint32_t* meta = nullptr;  // [tokens, N] router_kernel's flags
  const float* dcw = nullptr;           // [Z, tokens, HV, N] (entries of written partitions)
  const float* dcr = nullptr;           // [Z, tokens, HV, N] (entries of read partitions)
  index_t zstride = 0;
  Dev* dlogits = nullptr;               // [tokens, N]
};

//! NC > 0: N = NC is known at compile time (forward.cuh's route_static_n): the token's arrays live in
//! registers (session 17: over arrays of max_router_partitions in local memory this kernel took 114 µs
//! of an SSE n16k1s training step at T = 65536, against 18 at N = 4).
template <class R, class Dev, int NC = 0>
__global__ void router_bwd_kernel(const router_bwd_params<R, Dev> p) {
  const index_t t = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= p.tokens) return;
  constexpr int M = NC > 0 ? NC : max_router_partitions;
  const int N = NC > 0 ? NC : p.N;
  float x[M], pr[M], dw[M], dr[M], dx[M], work[M];
  std::uint8_t fl[M];
  const index_t base = t * N;
  bool finite = true;
  LINSTATE_UNROLL
  for (int n = 0; n < N; ++n) {
    x[n] = to_f32(p.logits[base + n]);
    finite &= finite_f32(x[n]);
  }
  if (!finite) {
    LINSTATE_UNROLL
    for (int n = 0; n < N; ++n) p.dlogits[base + n] = from_f32<Dev>(quiet_nan());
    return;
  }
  // the forward's scores and flags, recomputed by the policy (its weights land in dw / dr, unused)
  R::route(p.cfg, N, x, p.params, pr, dw, dr, fl, round_to_dev<Dev>{});
  // ∂L/∂c_n summed over value heads (and V groups), for the selected partitions of each side
  LINSTATE_UNROLL
  for (int n = 0; n < N; ++n) {
    float aw = 0.f, ar = 0.f;
    const bool wsel = fl[n] & detail::route_write, rsel = fl[n] & detail::route_read;
    for (int hv = 0; hv < p.HV; ++hv) {
      float vw = 0.f, vr = 0.f;
      for (int z = 0; z < p.Z; ++z) {
        const index_t at = z * p.zstride + (t * p.HV + hv) * N + n;
        if (wsel) vw += p.dcw[at];
        if (rsel) vr += p.dcr[at];
      }
      aw += vw, ar += vr;
    }
    dw[n] = aw, dr[n] = ar;
  }
  R::weights_backward(p.cfg, N, x, p.params, pr, fl, dw, dr, dx, work);
  LINSTATE_UNROLL
  for (int n = 0; n < N; ++n) p.dlogits[base + n] = from_f32<Dev>(dx[n]);
}

}  // namespace linstate::cuda_detail
