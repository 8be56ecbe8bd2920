// linstate/cuda/kernels/decode_split.cuh — the decode step of the diagonal family (GLA, SSE with
// GLA-style transitions: gates per key, per head or none) at small batch, in one launch that fills the
// GPU: each (sequence, value head) state is split over a thread-block cluster (sm_90) by K rows as well
// as over V tiles, every block routes the token itself, and the cluster's first block sums the partial
// reads in the fixed order of the three-kernel path — for a step in which every sequence has at most
// one token and the state is updated in place (or not wanted): forward_in_place with T = 1 (SPEC §11
// C8), packed with empty sequences too. Issue 11, session 15 (docs/benchmarks.md, "Issue 11, session
// 15: decode at small batch — one launch").
//
// Why: at B = 1, H = 8 the other one-launch kernels have few blocks (decode_kernel: S·HV × ceil(V/32)
// = 32 blocks, each thread loading 32 rows after the routing; decode_stream_kernel: S·HV = 8 blocks),
// and the three-kernel path (router → recurrent → combine) pays three launches, a scratch allocation
// and two round trips through global memory.
//
// Grid: one cluster of `cluster` blocks per (sequence s, value head hv, V tile of 32 columns); cluster
// index = vtile · S·HV + s·HV + hv (the clusters that run together share a V tile, as in decode_kernel);
// block rank r of the cluster holds the warps r·wpb … r·wpb + wpb − 1 of every group. A group is a
// partition the token touches — `groups` = (shared ? 1 : 0) + max(kw, kr), group 0 the shared partition
// (when there is one), groups 1… the routed partitions the token writes or reads, by ascending index
// (the read slots' order) — and its warp w (of ceil(K/32) in all) owns the rows 32w … 32w+31 of its
// partition's state, lane l the column 32·vtile + l, in registers (recurrent_kernel's tile). So a step
// of SSE n4k1 + shared at B = 1, H = 8, K = V = 128 runs 8 × 4 V tiles × 4 K tiles = 128 blocks of two
// warps, each thread one load per row.
//
// Per block:
//   0. each warp loads the q, k and log-decay of its rows and v of its column (they do not depend on
//      the partition);
//   1. lane 0 of every warp of a routed group runs the router policy's own R::route on the token's
//      logits (as router_kernel, decode_kernel and decode_stream_kernel: the same inputs, the same
//      function, so the same answer in every warp and every block) and takes its group's partition —
//      over registers when N is known at compile time (NC), else over shared memory; the shared
//      group's loads go out meanwhile (nothing waits across warps);
//   2. each warp stages q, k (times the write weight) and e^{g} of its rows and loads its tile;
//   3. family::diagonal update and read, recurrent_kernel's arithmetic in its order, pinned with
//      intrinsics to the form recurrent_kernel compiles to (decay_update: fma(e^{λ}, h, k·v); the read
//      fma(q, h, acc) over the warp's 32 rows in order, from 0; decay::none fma(k, v, h));
//   4. the written tile is stored; each reading warp writes its partial read (one float per column)
//      into the cluster's first block's shared memory (distributed shared memory), then the cluster
//      barrier (release / acquire);
//   5. the first block forms, per reading partition, Σ_w (warp order, from 0) · (scale · cr), rounded,
//      and sums the read slots in slot order from 0 — recurrent_kernel's warp reduction and
//      combine_kernel's sum; one read slot: its output as it is; NaN for a token whose logits are not
//      finite (router_kernel / combine_kernel).
// So outputs and states are bit-identical to the three-kernel path. No scratch memory, no atomics,
// no counter to reset: the cluster barrier orders the partial reads before their sum, and nothing
// survives the launch (concurrent calls on several streams, CUDA-graph replays: nothing shared).
// Partitions the token does not touch are not accessed at all (bit-identical freeze, SPEC §8.5).
//
// Requirements (forward.cuh checks them, else another path runs): the diagonal family, a device of
// compute capability ≥ 9.0 (thread-block clusters), groups · wpb ≤ 8 warps per block, the routing
// router's N ≤ decode_split_max_n (one partition without a router: only with decode_split_single).
// Not written: the delta rule (hᵀk over every row of the partition before any row is updated: a
// second cluster barrier and exchange).
//
// Measured (H200, bf16, H = 8, K = V = 128, B = 1, CUDA-graph step; docs/benchmarks.md, sessions 15
// and 17): SSE n4k1 + shared 8.21 → 7.73 µs (session 15) → 5.10 (session 17: the routing over registers
// when the partition policy fixes N, route_in_warp's NC, and the token's rows loaded before the
// routing), n8 10.92 → 10.53 → 5.88, n16 20.07 → 18.32 → 8.45. With N from the options (NC = 0) the
// routing still runs over shared memory, one dependent access after another (O(N²) for top-k).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include <linstate/detail/problem.hpp>
#include <linstate/detail/router.hpp>
#include <linstate/tensor.hpp>

#include "../check.cuh"
#include "../detail/device.cuh"
#include "../detail/scalar.cuh"
#include "../detail/traits.cuh"
#include "decode.cuh"
#include "decode_stream.cuh"
#include "recurrent.cuh"
#include "router.cuh"

namespace linstate::cuda_detail {

inline constexpr int split_max_cluster = 8;     //!< blocks per cluster (the portable limit)
inline constexpr int split_max_block_warps = 8;  //!< 256 threads: the tile's 32 registers and no cap below 255

//! When forward_in_place takes decode_split_kernel (forward.cuh): the diagonal family on a device with
//! thread-block clusters, at most decode_split_max_tasks sequences × value heads (from
//! decode_stream_min_tasks up the streamed kernel, which moves the bytes of large steps faster), at
//! most decode_split_max_n routed partitions (lane 0 of each routed warp routes the token: O(N²) for
//! router::top_k). Settings for comparisons and tests (bench_cuda --decode-path=split); not
//! thread-safe to change while another thread enqueues a call.
inline bool decode_split_enabled = true;
inline index_t decode_split_max_tasks = 127;
inline int decode_split_max_n = 16;
//! Whether the split kernel also takes one partition without a router (GLA), at most
//! decode_split_single_max_tasks sequences × value heads: since the token's rows load before the
//! routing (session 17) it beats decode_kernel there — CUDA-graph step at H = 8, K = V = 128, bf16:
//! 3.98 / 4.21 / 4.81 µs against 4.36 / 4.58 / 5.09 at B = 1 / 2 / 4, but 7.80 against 6.11 at B = 8
//! (S·HV = 64; device call 2 of session 17). Session 15 had measured 4.30 against 4.26 at B = 1 and
//! left it off. The tests and bench_cuda --decode-path=split switch it on at every size.
inline bool decode_split_single = true;
inline index_t decode_split_single_max_tasks = 32;

//! How a partition's ceil(K/32) warps are spread: `cluster` blocks of `wpb` warps per group.
struct split_shape {
  int cluster = 1, wpb = 1;
};
constexpr split_shape decode_split_shape(int nw) {
  split_shape sh;
  sh.cluster = nw < split_max_cluster ? nw : split_max_cluster;
  sh.wpb = (nw + sh.cluster - 1) / sh.cluster;
  sh.cluster = (nw + sh.wpb - 1) / sh.wpb;
  return sh;
}

//! Dynamic shared memory of decode_split_kernel: per group q, k, e^{g} [32·wpb], the partial reads of
//! every warp of the cluster [groups][nw][32] (used in the cluster's first block), then per warp of a
//! routed group (routed_groups · wpb) the router's x, p, cw, cr [N] floats, then their flags [N].
constexpr std::size_t decode_split_smem_bytes(int groups, int routed_groups, int nw, int wpb, int N) {
  return (static_cast<std::size_t>(groups) * static_cast<std::size_t>(wpb) * 3 * rows_per_warp +
          static_cast<std::size_t>(groups) * static_cast<std::size_t>(nw) * tile_v) * sizeof(float) +
         static_cast<std::size_t>(routed_groups) * static_cast<std::size_t>(wpb) * static_cast<std::size_t>(N) * (4 * sizeof(float) + 1);
}

template <class R, class Dev>
struct split_params {
  decode_params<R, Dev> d;  // d.vtiles: ceil(V / 32); d.tasks: S · HV
  int cluster = 1, wpb = 1;
};

//! KV: 0 for any K and V, or K = V = KV known at compile time (immediate row offsets). NC: 0 for any
//! N, or N = NC known at compile time (route_in_warp routes over registers).
template <class D, class R, class Dev, int KV, int NC>
__global__ void __launch_bounds__(32 * split_max_block_warps) decode_split_kernel(const split_params<R, Dev> sp) {
  static_assert(is_diagonal<D>, "linstate (cuda): decode_split_kernel runs the diagonal family");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const decode_params<R, Dev>& dp = sp.d;
  const recurrent_params<Dev>& p = dp.r;
  extern __shared__ float4 smem4[];
  float* smem = reinterpret_cast<float*>(smem4);
  __shared__ int g_part[split_max_block_warps];  // partition of group u (−1: none)
  __shared__ std::uint32_t g_flags[split_max_block_warps];
  __shared__ float g_cr[split_max_block_warps];
  __shared__ int g_nonfinite;

  const int groups = dp.groups, wpb = sp.wpb, csize = sp.cluster;
  const int nw = KV ? KV / rows_per_warp : (p.K + rows_per_warp - 1) / rows_per_warp;  // warps per group, whole cluster
  const int K = KV ? KV : p.K, V = KV ? KV : p.V, HV = p.HV, N = p.N;
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31, warp = tid >> 5;
  const int u = warp / wpb, wl = warp % wpb;
  const int rank = static_cast<int>(__clusterRelativeBlockRank());  // the cluster is along x: blockIdx.x % csize
  const int w = rank * wpb + wl;                                                  // this warp of its group
  const index_t cid = blockIdx.x / static_cast<unsigned>(csize);
  const index_t task = cid % dp.tasks;  // s·HV + hv
  const int vtile = static_cast<int>(cid / dp.tasks);
  const index_t s = task / HV;
  const index_t t = p.seq ? p.seq[s] : s * p.T;  // the sequence's token (T = 1 without cu_seqlens)
  if (p.seq && p.seq[s + 1] == t) return;         // an empty sequence touches nothing (the whole cluster returns)
  __cluster_barrier_arrive_relaxed();             // this block has started (waited for before the exchange)

  const int hv = static_cast<int>(task % HV);
  const int h = hv / (HV / p.H);
  const int j = vtile * tile_v + lane;  // this thread's state column
  const bool col = j < V;
  const bool shared_group = (p.shared || !R::routes) && u == 0;
  const int first_routed = p.shared ? 1 : 0;
  float* stage = smem + static_cast<std::size_t>(u) * wpb * 3 * rows_per_warp;
  float* qs = stage;                                            // [32·wpb] query (0 beyond K)
  float* ks = qs + wpb * rows_per_warp;                         // [32·wpb] key times the write weight
  float* gs = ks + wpb * rows_per_warp;                         // [32·wpb] e^{g} (gated_key)
  float* red = smem + static_cast<std::size_t>(groups) * wpb * 3 * rows_per_warp;  // [groups][nw][32] (first block)

  // 0. this warp's rows of q, k and the log-decay, and its column of v: they do not depend on the
  // partition, so their loads go out before the routing (session 17; the routing used to wait for
  // them, then they for it)
  const int a0 = w * rows_per_warp;
  const device_source<Dev> src = p.shared && u == 0 ? p.shr : p.main;  // (a single partition reads main)
  const int a_row = a0 + lane;
  const bool in_k = a_row < K;
  const index_t qk = (t * p.H + h) * K;
  const float q_in = in_k ? to_f32(src.q[qk + a_row]) : 0.f;
  const float k_in = in_k ? to_f32(src.k[qk + a_row]) : 0.f;
  float lg_in = 0.f;  // log-decay of this row (gates per key) or of the head (per head)
  if constexpr (decay_key<D>) lg_in = in_k ? to_f32(D::log_decay(src.g + (t * HV + hv) * K, a_row)) : 0.f;
  if constexpr (decay_head<D>) lg_in = to_f32(D::log_decay(src.g + t * HV + hv, 0));
  const float v_in = col ? to_f32(p.v[(t * HV + hv) * V + j]) : 0.f;

  // 1. routing (lane 0 of every warp of a routed group), no barrier
  int part = 0;
  std::uint32_t f = detail::route_write | detail::route_read;
  float cw = 1.f;
  if constexpr (R::routes) {
    if (!shared_group) {
      const int rw = warp - first_routed * wpb, routed_warps = (groups - first_routed) * wpb;
      float* rbase = red + static_cast<std::size_t>(groups) * nw * tile_v;
      float* rs = rbase + static_cast<std::size_t>(rw) * 4 * N;  // x, p, cw, cr [N]
      auto* rfl = reinterpret_cast<std::uint8_t*>(rbase + static_cast<std::size_t>(routed_warps) * 4 * N) + rw * N;  // flags [N]
      const warp_route r = route_in_warp<R, Dev, NC>(dp.cfg.value, N, dp.logits + t * N, dp.params, rs, rfl, u - first_routed, first_routed,
                                                 lane, [&](const warp_route& x) {
                                                   if (wl == 0) {  // one writer per group (read by the first block's output stage, after the barrier)
                                                     g_part[u] = x.part, g_flags[u] = x.flags, g_cr[u] = x.cr;
                                                     if (u == groups - 1) g_nonfinite = x.finite ? 0 : 1;
                                                   }
                                                 });
      part = r.part, f = r.flags, cw = r.cw;
    }
  }

  // 2. this warp's q, k (times the write weight), e^{g}, and its state tile
  const bool active = part >= 0;
  const bool wr = active && (f & detail::route_write), rd = active && (f & detail::route_read);
  float hreg[rows_per_warp];
  const index_t sbase = ((s * p.P + (active ? part : 0)) * HV + hv) * static_cast<index_t>(K) * V + static_cast<index_t>(a0) * V + j;
  if (active && col && p.state_in && a0 < K) {
    const float* in = p.state_in + sbase;
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
  {
    const int la = wl * rows_per_warp + lane;
    qs[la] = (rd && in_k) ? q_in : 0.f;
    ks[la] = (wr && in_k) ? __fmul_rn(k_in, cw) : 0.f;
    if constexpr (decay_key<D>) gs[la] = (wr && in_k) ? expf(lg_in) : 1.f;
    __syncwarp();
  }
  const float vj = (wr && col) ? v_in : 0.f;
  float decay = 1.f;
  if constexpr (decay_head<D>)
    if (wr) decay = expf(lg_in);

  // 3. update and read (recurrent_kernel's arithmetic, pinned)
  const float* qw = qs + wl * rows_per_warp;
  const float* kw = ks + wl * rows_per_warp;
  const float* gw = gs + wl * rows_per_warp;
  float acc = 0.f;
  if (wr) {
#pragma unroll
    for (int r = 0; r < rows_per_warp; ++r) {
      if constexpr (decay_none<D>) hreg[r] = __fmaf_rn(kw[r], vj, hreg[r]);
      else hreg[r] = decay_update(decay_head<D> ? decay : gw[r], hreg[r], kw[r], vj);
      if (rd) acc = __fmaf_rn(qw[r], hreg[r], acc);
    }
  } else if (rd) {
#pragma unroll
    for (int r = 0; r < rows_per_warp; ++r) acc = __fmaf_rn(qw[r], hreg[r], acc);
  }

  // 4. the written tile; the partial read into the first block's shared memory
  if (wr && p.state_out && col && a0 < K) {
    float* out = p.state_out + sbase;
    if (a0 + rows_per_warp <= K) {
#pragma unroll
      for (int r = 0; r < rows_per_warp; ++r) out[r * V] = hreg[r];
    } else {
#pragma unroll
      for (int r = 0; r < rows_per_warp; ++r)
        if (a0 + r < K) out[static_cast<index_t>(r) * V] = hreg[r];
    }
  }
  __cluster_barrier_wait();  // every block of the cluster has started (the relaxed arrive above)
  if (rd && w < nw) {
    float* red0 = static_cast<float*>(__cluster_map_shared_rank(red, 0));
    red0[(static_cast<std::size_t>(u) * nw + w) * tile_v + lane] = acc;
  }
  __cluster_barrier_arrive();  // release: the partial reads (and g_part …) before the first block's sum
  __cluster_barrier_wait();    // acquire
  if (rank != 0) return;
  __syncthreads();  // (the cluster barrier orders them already) g_part … of this block's own warps

  // 5. the output row (first block): per reading partition Σ_w (warp order, from 0) · scale · cr, the
  // read slots summed in order (shared, then routed partitions by index) — combine_kernel's sum
  if (tid < tile_v && vtile * tile_v + tid < V && p.R > 0) {
    const int c = tid, jj = vtile * tile_v + c;
    auto out_of = [&](int g) {
      float o = 0.f;
      for (int ww = 0; ww < nw; ++ww) o = __fadd_rn(o, red[(static_cast<std::size_t>(g) * nw + ww) * tile_v + c]);
      const float cr = ((p.shared || !R::routes) && g == 0) ? 1.f : g_cr[g];
      return __fmul_rn(o, __fmul_rn(p.scale, cr));  // rounded, as recurrent_kernel rounds it into o_part
    };
    const float o = sum_read_slots(p.R, groups, p.shared || !R::routes, g_part, g_flags, R::routes && g_nonfinite, out_of);
    p.o[(t * HV + hv) * V + jj] = from_f32<Dev>(o);
  }
#else
  __trap();  // never launched: forward.cuh takes this kernel only on devices with clusters
#endif
}

//! Enqueues decode_split_kernel: clusters of sh.cluster blocks, one per (s·HV + hv, V tile of 32),
//! groups · sh.wpb warps per block.
template <class D, class R, class Dev, int NC = 0>
void launch_decode_split(const decode_params<R, Dev>& dp, split_shape sh, int N, cudaStream_t stream, const char* api) {
  split_params<R, Dev> sp;
  sp.d = dp, sp.cluster = sh.cluster, sp.wpb = sh.wpb;
  const int nw = (dp.r.K + rows_per_warp - 1) / rows_per_warp;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(dp.tasks * dp.vtiles * sh.cluster));
  cfg.blockDim = dim3(static_cast<unsigned>(32 * sh.wpb * dp.groups));
  cfg.dynamicSmemBytes = decode_split_smem_bytes(dp.groups, R::routes ? dp.groups - (dp.r.shared ? 1 : 0) : 0, nw, sh.wpb, N);
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = static_cast<unsigned>(sh.cluster);
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  cudaError_t e;
  constexpr int nc = NC > 0 && R::routes ? NC : 0;  // N known at compile time (forward.cuh: route_static_n)
  if (nc > 0 && N != nc) detail::fail(api, "decode_split_kernel built for N = " + std::to_string(nc) + ", called with N = " + std::to_string(N));
  if (dp.r.K == 128 && dp.r.V == 128) e = cudaLaunchKernelEx(&cfg, decode_split_kernel<D, R, Dev, 128, nc>, sp);
  else e = cudaLaunchKernelEx(&cfg, decode_split_kernel<D, R, Dev, 0, nc>, sp);
  if (e != cudaSuccess) (void)cudaGetLastError();  // not left behind for the next check_launch
  check(e, "cudaLaunchKernelEx(decode_split_kernel)", api);
}

}  // namespace linstate::cuda_detail
