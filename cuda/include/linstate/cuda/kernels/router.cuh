// linstate/cuda/kernels/router.cuh — a routing router policy on the device (SPEC §4.4, §11 C1–C3).
//
// One thread per token: the router policy's own R::route (router/top_k.hpp: fp32 softmax, top-kw
// write set and top-kr read set with the lowest-index tie rule, the gate weights — the very function
// the CPU backend and the reference run; `Round` rounds to the input type), and per (token,
// partition) the write weight, the read weight and a 32-bit word
//   bits 0–1  detail::route_write | detail::route_read
//   bit  2    route_nonfinite: this token's logits hold NaN or ±inf (then no routed partition is
//             written or read, and the token's output row is set to NaN)
//   bits 8–19  the token's READ slot of this partition (when it reads it): (shared ? 1 : 0) + the
//             number of read partitions with a lower index. The recurrent kernel writes a reading
//             partition's contribution into that slot, and the combine pass sums the slots in
//             ascending order. Decode with route_rslot().
//   bits 20–31 the token's WRITE slot of this partition (when it writes it): (shared ? 1 : 0) + the
//             number of written partitions with a lower index. The backward pass (backward.cuh)
//             writes a writing partition's fp32 gradients of k, v, g, β into that slot. Decode with
//             route_wslot(). The shared partition has read and write slot 0.
#pragma once

#include <cstdint>

#include <linstate/detail/router.hpp>
#include <linstate/tensor.hpp>

#include "../detail/scalar.cuh"

namespace linstate::cuda_detail {

inline constexpr std::uint32_t route_nonfinite = 4;
inline constexpr int route_slot_shift = 8;    //!< read slot: bits 8–19
inline constexpr int route_wslot_shift = 20;  //!< write slot: bits 20–31
inline constexpr std::uint32_t route_slot_mask = 0xfffu;

//! The read slot of a meta word (meaningful when it has detail::route_read).
__host__ __device__ __forceinline__ int route_rslot(std::uint32_t f) {
  return static_cast<int>((f >> route_slot_shift) & route_slot_mask);
}
//! The write slot of a meta word (meaningful when it has detail::route_write).
__host__ __device__ __forceinline__ int route_wslot(std::uint32_t f) {
  return static_cast<int>((f >> route_wslot_shift) & route_slot_mask);
}
//! Largest N the device router accepts (it keeps the N logits of a token in thread-local memory).
inline constexpr int max_router_partitions = 256;

//! Rounds an fp32 value to the element type Dev and back: the `Round` functor the router policies
//! take (used with round_to_input).
template <class Dev>
struct round_to_dev {
  __host__ __device__ float operator()(float x) const {
#if defined(__CUDA_ARCH__)
    return to_f32(from_f32<Dev>(x));
#else
    return x;  // never called on the host: the router runs on the device only
#endif
  }
};

template <class R, class Dev>
struct router_params {
  typename R::config cfg{};       // the router policy's resolved configuration (by value)
  index_t tokens = 0;
  int N = 0;
  int first_slot = 0;             // 1 with a shared partition (it owns slot 0)
  const Dev* logits = nullptr;    // [tokens, N]
  const float* params = nullptr;  // the policy's router_params [N] / [N,m] (device), or null
  float* cw = nullptr;            // [tokens, N] write weight (0 where not written)
  float* cr = nullptr;            // [tokens, N] read weight (0 where not read)
  std::uint32_t* meta = nullptr;  // [tokens, N] flags, read slot and write slot (above)
  Dev* o_nan = nullptr;           // output [tokens, row] to fill with NaN for a non-finite token, or null
  index_t row = 0;                // HV·V
};

//! One thread per token: the finiteness check, then the policy's R::route (scores, flags, weights,
//! written straight into cw / cr), then the slot numbering of the meta words. NC > 0: N = NC is known
//! at compile time (forward.cuh's route_static_n) and the token's arrays live in registers (session 17:
//! at N = 16 the arrays of max_router_partitions in local memory cost 97 µs of an SSE n16k1s training
//! step at T = 65536, against 14 at N = 4).
template <class R, class Dev, int NC = 0>
__global__ void router_kernel(const router_params<R, Dev> p) {
  const index_t t = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= p.tokens) return;
  constexpr int M = NC > 0 ? NC : max_router_partitions;
  const int N = NC > 0 ? NC : p.N;
  float x[M], pr[M];
  std::uint8_t fl[M];
  bool finite = true;
  LINSTATE_UNROLL
  for (int n = 0; n < N; ++n) {
    x[n] = to_f32(p.logits[t * N + n]);
    finite &= finite_f32(x[n]);
  }
  const index_t base = t * N;
  if (!finite) {
    LINSTATE_UNROLL
    for (int n = 0; n < N; ++n) p.cw[base + n] = 0.f, p.cr[base + n] = 0.f, p.meta[base + n] = route_nonfinite;
    if (p.o_nan)
      for (index_t i = 0; i < p.row; ++i) p.o_nan[t * p.row + i] = from_f32<Dev>(quiet_nan());
    return;
  }
  R::route(p.cfg, N, x, p.params, pr, p.cw + base, p.cr + base, fl, round_to_dev<Dev>{});
  std::uint32_t slot = static_cast<std::uint32_t>(p.first_slot), wslot = slot;
  LINSTATE_UNROLL
  for (int n = 0; n < N; ++n) {
    std::uint32_t f = fl[n] & (detail::route_write | detail::route_read);
    if (f & detail::route_read) f |= slot++ << route_slot_shift;
    if (f & detail::route_write) f |= wslot++ << route_wslot_shift;
    p.meta[base + n] = f;
  }
}

//! What one routed warp of a decode step takes from the router (decode_stream_kernel,
//! decode_split_kernel): lane 0 runs the router policy's R::route on the token's logits — the same
//! inputs and function in every routed warp, so the same answer — and picks the `want`-th partition
//! the token touches, by ascending index. part (−1: none), flags and cw come back on every lane;
//! cr and finite on lane 0 only (the lane that writes the block's shared copies).
struct warp_route {
  int part = -1;            //!< the partition's index in the state (routed index + first_routed), or −1
  std::uint32_t flags = 0;  //!< detail::route_write | detail::route_read of that partition
  float cw = 0.f;           //!< its write weight
  float cr = 0.f;           //!< its read weight (lane 0)
  bool finite = true;       //!< whether the token's logits are finite (lane 0)
};

//! scratch: 4·N floats (logits, scores, write and read weights) and flags: N bytes, both this warp's
//! own. logits: the token's row [N]. No barrier of the block: one __syncwarp after the logits' loads.
//! publish(r) runs on lane 0 before the warp's shuffles (decode_split_kernel writes its block's shared
//! copies there: written after the shuffles instead, its N = 16 step took 20.3 against 18.3 µs, 75
//! registers against 64, session 16's device call 2); pass a no-op to write them after the call.
//!
//! NC > 0: N is NC, known at compile time (the partition policy's num_routed, forward.cuh:
//! route_static_n). Lane 0 then loads the logits itself and runs R::route on arrays of its own of NC
//! elements, whose loops the compiler unrolls into registers — the same function on the same values in
//! the same order, so the same answer, without the chain of dependent shared-memory accesses (scratch
//! and flags are not used). NC = 0: any N, over scratch.
template <class R, class Dev, int NC = 0, class Cfg, class Publish>
__device__ __forceinline__ warp_route route_in_warp(const Cfg& cfg, int N, const Dev* logits, const float* params, float* scratch,
                                                    std::uint8_t* flags, int want, int first_routed, int lane, Publish publish) {
  warp_route r;
  // lane 0, over the logits rx[0, n): the policy's route, then the want-th partition the token touches
  auto route = [&](float* rx, float* rp, float* rcw, float* rcr, std::uint8_t* fl, int n) {
    LINSTATE_UNROLL
    for (int m = 0; m < n; ++m) r.finite &= finite_f32(rx[m]);
    if (r.finite) {
      R::route(cfg, n, rx, params, rp, rcw, rcr, fl, round_to_dev<Dev>{});
      int left = want;  // by ascending index
      LINSTATE_UNROLL
      for (int m = 0; m < n; ++m) {
        const std::uint32_t fm = fl[m] & (detail::route_write | detail::route_read);
        if (fm) {
          if (left == 0) r.part = m + first_routed, r.flags = fm, r.cw = rcw[m], r.cr = rcr[m];
          --left;
        }
      }
    }
    publish(r);
  };
  if constexpr (NC > 0) {
    (void)N, (void)scratch, (void)flags;
    if (lane == 0) {
      float rx[NC], rp[NC], rcw[NC], rcr[NC];
      std::uint8_t fl[NC];
      LINSTATE_UNROLL
      for (int m = 0; m < NC; ++m) rx[m] = to_f32(logits[m]);
      route(rx, rp, rcw, rcr, fl, NC);
    }
  } else {
    float* rx = scratch;  // logits, scores, write and read weights [N] each
    for (int m = lane; m < N; m += 32) rx[m] = to_f32(logits[m]);
    __syncwarp();
    if (lane == 0) route(rx, rx + N, rx + 2 * N, rx + 3 * N, flags, N);
  }
  r.part = __shfl_sync(0xffffffffu, r.part, 0), r.flags = __shfl_sync(0xffffffffu, r.flags, 0), r.cw = __shfl_sync(0xffffffffu, r.cw, 0);
  return r;
}

//! Finds the first non-finite logit: atomicMin of its flat index into *first (initialised to
//! numel by the caller).
template <class Dev>
__global__ void nonfinite_kernel(const Dev* x, index_t numel, unsigned long long* first) {
  const index_t i = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < numel && !finite_f32(to_f32(x[i]))) atomicMin(first, static_cast<unsigned long long>(i));
}

}  // namespace linstate::cuda_detail
