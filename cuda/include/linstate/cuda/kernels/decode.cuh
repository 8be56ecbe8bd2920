// linstate/cuda/kernels/decode.cuh — the decode step in one kernel: for a routed variant (SSE) instead
// of router_kernel → recurrent_kernel → combine_kernel, for one partition without a router (GLA, the
// delta rule) instead of recurrent_kernel; for a step in which every sequence has at most one token
// and the state is updated in place (or not wanted): forward_in_place with T = 1 (SPEC §11 C8), the
// packed form with empty sequences too.
//
// One thread block per (sequence s, value head hv, V tile of 32 columns), blockIdx.x = tile · S·HV +
// s·HV + hv: the blocks that run together share a V tile, as in recurrent_kernel's grid (giving that
// kernel the other order, the V tiles of one (s, hv, p) adjacent, made a B = 128 step 1.8× as long).
// The block holds every partition the token touches: `groups` = (shared ? 1 : 0) + max(kw, kr) groups of ceil(K/32) warps, group u
// holding the K×32 state tile of its partition in registers exactly as recurrent_kernel does (lane j:
// column j; warp w of the group: rows 32w … 32w+31). Group 0 is the shared partition (when there is
// one), groups 1… the routed partitions the token writes or reads, by ascending index — the read
// slots' order (kernels/router.cuh).
//   1. the shared group issues the loads of its state;
//   2. one thread (the first of the last group, whose state is not loaded yet; its warp loads the
//      logits) runs the router policy's own R::route on the token's N logits (the function
//      router_kernel runs; its arrays in shared memory) and lists the touched partitions with their
//      flags and weights; a token whose logits are not finite touches no routed partition;
//   3. each routed group loads its partition's state; every group stages its q, k (times the write
//      weight, except for the delta rule) and e^{g};
//   4. the update and the read of recurrent_kernel, the same arithmetic in the same order;
//   5. each group stores its state if the token wrote it, and its warp 0 forms its partition's output
//      Σ_w (partial sums of the warps, in warp order) · scale · cr;
//   6. warp 0 of the block sums the groups' outputs in read-slot order starting from 0 (what
//      combine_kernel computes from o_part), or writes the single reader's output when a token has
//      one read slot; NaN for a token whose logits are not finite (as router_kernel / combine_kernel).
// So the fused step gives the unfused path's outputs and states (same operations, same order),
// deterministically, without atomics and without scratch memory. Partitions the token does not touch
// are not accessed at all (bit-identical freeze, SPEC §8.5).
//
// The router's work (softmax and the O(N²) top-k rank test of router::top_k) is done by every block
// of the token, and the block's routed loads wait for it: forward.cuh takes this kernel for a routing
// router only for small N and small steps (decode_fused_max_n, decode_fused_max_tasks below), where
// the three launches and the scratch allocation it saves dominate; larger steps keep the three-kernel
// path. Without a router it is used at every size. Since session 12 the diagonal family's steps of
// S·HV ≥ 128 go to kernels/decode_stream.cuh instead (16-byte loads streamed through registers), and
// since session 15 a routing router's diagonal-family steps below that to kernels/decode_split.cuh
// (each state over a cluster of blocks) on devices with thread-block clusters.
#pragma once

#include <cstdint>

#include <linstate/detail/router.hpp>
#include <linstate/tensor.hpp>

#include "../detail/scalar.cuh"
#include "../detail/traits.cuh"
#include "recurrent.cuh"
#include "router.cuh"

namespace linstate::cuda_detail {

//! When forward_in_place takes the decode step kernel for a routing router (forward.cuh): at most
//! decode_fused_max_n routed partitions (every block routes its token, O(N²) for router::top_k, in one
//! thread while its loads wait) and at most decode_fused_max_tasks sequences × value heads (a step
//! that fits in about one wave: latency-bound, where one launch instead of three pays). Measured on
//! the H200 (docs/benchmarks.md, "Issue 11, session 9: decode"), bf16, H = 8, K = V = 128, CUDA-graph
//! step: SSE n4k1s 10.2 → 8.8 µs at B = 1 and 18.7 → 16.1 at B = 16, but 96.5 → 107 at B = 128
//! (spilled registers make it L2-bound); n16 at B = 1 20.1 → 23.3. Without a router (GLA) the kernel is
//! used at every size (4.9 → 4.3 µs at B = 1, 46.1 → 43.4 at B = 128). Settings for comparisons and
//! tests (bench_cuda --decode-path); not thread-safe to change while another thread enqueues a call.
inline int decode_fused_max_n = 8;
inline index_t decode_fused_max_tasks = 128;

//! Whether forward_in_place may use the decode step kernel at all (tests switch it off to compare
//! with the three-kernel path; same caveat).
inline bool decode_fused_enabled = true;

template <class R, class Dev>
struct decode_params {
  recurrent_params<Dev> r;        // sizes, sources, state, o (cw, cr, meta, o_part unused); r.R: read slots
  detail::router_config<R> cfg{};  // the router policy's resolved configuration (by value; empty without routing)
  const Dev* logits = nullptr;    // [tokens, N]
  const float* params = nullptr;  // the policy's router_params (device), or null
  int groups = 1;                 // partitions a token touches: (shared ? 1 : 0) + max(kw, kr)
  int vtiles = 1;                 // ceil(V / 32)
  index_t tasks = 1;              // S · HV
};

//! Dynamic shared memory of decode_kernel: per group q, k, e^{g} and the warps' partial outputs and
//! hᵀk (5 · 32 · nw floats, as recurrent_kernel), then the router's x, p, cw, cr [N] floats and flags [N].
constexpr std::size_t decode_smem_bytes(int groups, int nw, int N) {
  return static_cast<std::size_t>(groups) * recurrent_smem_bytes(nw) + static_cast<std::size_t>(N) * (4 * sizeof(float) + 1);
}

//! A decode step's output of one column from its groups' outputs, summed in read-slot order from 0 —
//! what combine_kernel computes from o_part (decode_kernel, decode_stream_kernel, decode_split_kernel):
//! with one read slot the reading group's output as it is (NaN when none reads: router_kernel's NaN
//! row); NaN for a token whose logits are not finite; else Σ out_of(g) over the reading groups by
//! __fadd_rn (out_of's rounded product is never fused into the sum). Group 0 reads when first_reads
//! (a shared partition, or the single partition of a variant without routing); group g otherwise when
//! part[g] ≥ 0 and flags[g] has detail::route_read.
template <class OutOf>
__device__ __forceinline__ float sum_read_slots(int slots, int groups, bool first_reads, const int* part, const std::uint32_t* flags,
                                                bool nonfinite, OutOf out_of) {
  auto reads = [&](int g) { return (first_reads && g == 0) || (part[g] >= 0 && (flags[g] & detail::route_read)); };
  float o = 0.f;
  if (slots == 1) {
    o = quiet_nan();
    for (int g = 0; g < groups; ++g)
      if (reads(g)) o = out_of(g);
  } else if (nonfinite) {
    o = quiet_nan();
  } else {
    for (int g = 0; g < groups; ++g)
      if (reads(g)) o = __fadd_rn(o, out_of(g));
  }
  return o;
}

//! x, through a register move the compiler cannot see through (so it does not reuse values computed from x).
__device__ __forceinline__ int opaque(int x) {
  int y;
  asm volatile("mov.b32 %0, %1;" : "=r"(y) : "r"(x));
  return y;
}

//! KV: 0 for any K and V, or K = V = KV known at compile time (K = V = 128: the 32 state addresses of
//! a thread are one base and immediate offsets, not 32 computed 64-bit addresses held in registers).
//! Two blocks of 512 threads per multiprocessor: 64 registers, as recurrent_kernel, with some spill
//! (ptxas -v: 20–250 bytes). Without the cap (100–112 registers, no spill) an SSE n4k1s step took
//! 120 µs against 103 at B = 128 and 17.7 against 15.6 at B = 16, 7.8 against 8.3 at B = 1 (H200, the
//! same device call, an earlier version of this kernel).
template <class D, class R, class Dev, int KV>
__global__ void __launch_bounds__(tile_v * max_warps, 2) decode_kernel(const decode_params<R, Dev> dp) {
  static_assert(is_diagonal<D> || is_delta<D>, "linstate (cuda): decode_kernel runs the diagonal and delta families");
  const recurrent_params<Dev>& p = dp.r;
  extern __shared__ float smem[];
  __shared__ int g_part[max_warps];  // partition of group u (−1: none)
  __shared__ std::uint32_t g_flags[max_warps];
  __shared__ float g_cw[max_warps], g_cr[max_warps];
  __shared__ float g_out[max_warps][tile_v];  // group u's output of this V tile (when it reads)
  __shared__ int g_nonfinite;

  const int groups = dp.groups;
  const int nw = KV ? (KV + rows_per_warp - 1) / rows_per_warp : static_cast<int>(blockDim.x) / (32 * groups);  // warps per group
  const int KP = nw * rows_per_warp;
  const int K = KV ? KV : p.K, V = KV ? KV : p.V, HV = p.HV, N = p.N;
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int u = warp / nw, w = warp % nw;
  const int gthreads = nw * 32, gtid = static_cast<int>(threadIdx.x) - u * gthreads;
  float* qs = smem + static_cast<std::size_t>(u) * 5 * KP;  // [KP] this token's query (0 beyond K)
  float* ks = qs + KP;                                      // [KP] key (times the write weight, except for the delta rule)
  float* gs = ks + KP;                                      // [KP] e^{g} (gated_key)
  float* red = gs + KP;                                     // [nw][32] per-warp partial outputs
  float* red_hk = red + KP;                                 // [nw][32] per-warp partial hᵀk (delta rule)

  const index_t task = blockIdx.x % dp.tasks;  // s·HV + hv
  const int vtile = static_cast<int>(blockIdx.x / dp.tasks);
  const index_t s = task / HV;
  const index_t t = p.seq ? p.seq[s] : s * p.T;  // the sequence's token (T = 1 without cu_seqlens)
  if (p.seq && p.seq[s + 1] == t) return;         // in place, an empty sequence touches nothing (whole block)
  const int hv = static_cast<int>(task % HV);
  const int h = hv / (HV / p.H);
  const int j = vtile * tile_v + lane;  // this thread's state column
  const bool col = j < V;
  // group 0 of a variant with a shared partition, or the single partition of a variant without routing
  const bool shared_group = (p.shared || !R::routes) && u == 0;
  const int first_routed = p.shared ? 1 : 0;

  float hreg[rows_per_warp];
  // One branch around the 32 loads (stores) of a thread, not one per row: the addresses are then one
  // base plus immediate offsets when K and V are known (KV), and the loads issue back to back.
  auto load_state = [&](int part) {
    const int a0 = w * rows_per_warp;
    const float* in = p.state_in + ((s * p.P + part) * HV + hv) * static_cast<index_t>(K) * V + static_cast<index_t>(a0) * V + j;
    if (p.state_in && col) {
      if (a0 + rows_per_warp <= K) {
#pragma unroll
        for (int r = 0; r < rows_per_warp; ++r) hreg[r] = in[r * V];
      } else {
#pragma unroll
        for (int r = 0; r < rows_per_warp; ++r) hreg[r] = a0 + r < K ? in[static_cast<index_t>(r) * V] : 0.f;
      }
    } else {
#pragma unroll
      for (int r = 0; r < rows_per_warp; ++r) hreg[r] = 0.f;
    }
  };

  // 1, 2: the routing thread (the first of the last group) routes; the shared group's loads go out
  // meanwhile. In different branches, so that no state register is live across the routing code.
  const bool router_warp = R::routes && warp == (groups - 1) * nw;
  const bool router_thread = router_warp && lane == 0;
  const bool early = shared_group && !router_thread;
  if (early) load_state(0);
  if constexpr (R::routes) {
    float* rx = smem + static_cast<std::size_t>(groups) * 5 * KP;  // logits [N]
    if (router_warp) {  // the logits, loaded by the routing thread's warp at once
      for (int m = lane; m < N; m += 32) rx[m] = to_f32(dp.logits[t * N + m]);
      __syncwarp();
    }
    if (router_thread) {
      float* rp = rx + N;                                    // scores [N]
      float* rcw = rp + N;                                   // write weights [N]
      float* rcr = rcw + N;                                  // read weights [N]
      auto* rfl = reinterpret_cast<std::uint8_t*>(rcr + N);  // flags [N]
      bool finite = true;
      for (int m = 0; m < N; ++m) finite &= finite_f32(rx[m]);
      for (int g = first_routed; g < groups; ++g) g_part[g] = -1, g_flags[g] = 0, g_cw[g] = 0.f, g_cr[g] = 0.f;
      g_nonfinite = finite ? 0 : 1;
      if (finite) {
        R::route(dp.cfg.value, N, rx, dp.params, rp, rcw, rcr, rfl, round_to_dev<Dev>{});
        int g = first_routed;
        for (int m = 0; m < N && g < groups; ++m) {
          const std::uint32_t f = rfl[m] & (detail::route_write | detail::route_read);
          if (!f) continue;
          g_part[g] = m + first_routed, g_flags[g] = f, g_cw[g] = rcw[m], g_cr[g] = rcr[m];
          ++g;
        }
      }
    }
  }
  __syncthreads();

  // 3. this group's partition, flags and weights; its state; its q, k, e^{g}
  int part = 0;
  std::uint32_t f = detail::route_write | detail::route_read;
  float cw = 1.f, cr = 1.f;
  if (!shared_group) part = g_part[u], f = g_flags[u], cw = g_cw[u], cr = g_cr[u];
  const bool active = part >= 0;
  const bool wr = active && (f & detail::route_write), rd = active && (f & detail::route_read);
  if (active && !early) load_state(part);
  const device_source<Dev> src = p.shared && u == 0 ? p.shr : p.main;  // (a single partition reads main)
  const index_t qk = (t * p.H + h) * K;
  for (int a = gtid; a < KP; a += gthreads) {
    const bool in = a < K;
    qs[a] = (rd && in) ? to_f32(src.q[qk + a]) : 0.f;
    if constexpr (is_delta<D>) ks[a] = (wr && in) ? to_f32(src.k[qk + a]) : 0.f;
    else ks[a] = (wr && in) ? to_f32(src.k[qk + a]) * cw : 0.f;
    if constexpr (decay_key<D>) gs[a] = (wr && in) ? expf(to_f32(D::log_decay(src.g + (t * HV + hv) * K, a))) : 1.f;
  }
  __syncthreads();

  // 4. update and read (recurrent_kernel's arithmetic)
  const float vj = (wr && col) ? to_f32(p.v[(t * HV + hv) * V + j]) : 0.f;
  float qf = p.scale * cr;  // read factor
  float acc = 0.f;
  if constexpr (is_delta<D>) {
    float rk = 1.f;
    if (p.l2norm) {
      float sq = 0.f, sk = 0.f;
      for (int a = lane; a < KP; a += 32) sq += qs[a] * qs[a], sk += ks[a] * ks[a];
      sq = warp_sum(sq), sk = warp_sum(sk);
      qf *= 1.f / sqrtf(sq + 1e-6f);
      rk = 1.f / sqrtf(sk + 1e-6f);
    }
    float hk = 0.f;
    if (wr) {
#pragma unroll
      for (int r = 0; r < rows_per_warp; ++r) hk += ks[w * rows_per_warp + r] * hreg[r];
      red_hk[w * 32 + lane] = hk;
    }
    __syncthreads();  // every thread: the groups differ in wr
    if (wr) {
      const float decay = expf(to_f32(D::log_decay(src.g + t * HV + hv, 0)));
      const float b = D::write_strength(to_f32(src.beta[t * HV + hv]), cw);  // SPEC §11 C9: the write gate scales β
      hk = 0.f;
      for (int ww = 0; ww < nw; ++ww) hk += red_hk[ww * 32 + lane];
      const float uu = b * (vj - decay * (rk * hk)) * rk;
      if (rd) {
#pragma unroll
        for (int r = 0; r < rows_per_warp; ++r) {
          const int a = w * rows_per_warp + r;
          hreg[r] = decay * hreg[r] + ks[a] * uu;
          acc += qs[a] * hreg[r];
        }
      } else {
#pragma unroll
        for (int r = 0; r < rows_per_warp; ++r) hreg[r] = decay * hreg[r] + ks[w * rows_per_warp + r] * uu;
      }
    } else if (rd) {
#pragma unroll
      for (int r = 0; r < rows_per_warp; ++r) acc += qs[w * rows_per_warp + r] * hreg[r];
    }
  } else {
    float decay = 1.f;
    if constexpr (decay_head<D>)
      if (wr) decay = expf(to_f32(D::log_decay(src.g + t * HV + hv, 0)));
    if (wr && rd) {
#pragma unroll
      for (int r = 0; r < rows_per_warp; ++r) {
        const int a = w * rows_per_warp + r;
        if constexpr (decay_none<D>) hreg[r] += ks[a] * vj;
        else if constexpr (decay_head<D>) hreg[r] = decay * hreg[r] + ks[a] * vj;
        else hreg[r] = gs[a] * hreg[r] + ks[a] * vj;
        acc += qs[a] * hreg[r];
      }
    } else if (wr) {
#pragma unroll
      for (int r = 0; r < rows_per_warp; ++r) {
        const int a = w * rows_per_warp + r;
        if constexpr (decay_none<D>) hreg[r] += ks[a] * vj;
        else if constexpr (decay_head<D>) hreg[r] = decay * hreg[r] + ks[a] * vj;
        else hreg[r] = gs[a] * hreg[r] + ks[a] * vj;
      }
    } else if (rd) {
#pragma unroll
      for (int r = 0; r < rows_per_warp; ++r) acc += qs[w * rows_per_warp + r] * hreg[r];
    }
  }

  // 5. the state (in place: only if written), the warps' partial outputs
  if (wr && p.state_out) {
    // the row stride through an opaque copy: the compiler recomputes the 32 addresses here instead of
    // keeping the loads' addresses live (registers) or spilling them
    const int Vs = KV ? KV : opaque(V);
    const int a0 = w * rows_per_warp;
    float* out = p.state_out + ((s * p.P + part) * HV + hv) * static_cast<index_t>(K) * Vs + static_cast<index_t>(a0) * Vs + j;
    if (col && a0 + rows_per_warp <= K) {
#pragma unroll
      for (int r = 0; r < rows_per_warp; ++r) out[r * Vs] = hreg[r];
    } else if (col) {
#pragma unroll
      for (int r = 0; r < rows_per_warp; ++r)
        if (a0 + r < K) out[static_cast<index_t>(r) * Vs] = hreg[r];
    }
  }
  if (rd) red[w * 32 + lane] = acc;
  __syncthreads();
  if (rd && w == 0) {
    float o = 0.f;
    for (int ww = 0; ww < nw; ++ww) o += red[ww * 32 + lane];
    g_out[u][lane] = o * qf;
  }
  __syncthreads();

  // 6. the output row: the read slots summed in order (shared, then routed partitions by index)
  if (warp == 0 && col && p.R > 0) {
    const float o = sum_read_slots(p.R, groups, p.shared || !R::routes, g_part, g_flags, R::routes && g_nonfinite,
                                   [&](int g) { return g_out[g][lane]; });
    p.o[(t * HV + hv) * V + j] = from_f32<Dev>(o);
  }
}

}  // namespace linstate::cuda_detail
