// linstate/cuda/kernels/decode_stream.cuh — the decode step of the diagonal family (GLA, SSE with
// GLA-style transitions: gates per key, per head or none) for large steps, in one kernel that streams
// the state through registers with 16-byte loads and stores instead of holding a K×32 tile in them
// (kernels/decode.cuh) — for a step in which every sequence has at most one token and the state is
// updated in place (or not wanted): forward_in_place with T = 1 (SPEC §11 C8), packed with empty
// sequences too. Issue 11, session 12 (docs/benchmarks.md, "Issue 11, session 12: decode"): a B = 128
// SSE n4k1 + shared step (bf16, H = 8, K = V = 128) 96.2 → 73.9 µs as a CUDA-graph step on the H200,
// 87 % of copy bandwidth on the touched bytes (GLA 43.4 → 37.1 µs).
//
// One thread block per (sequence s, value head hv, 128-column V tile), blockIdx.x = s·HV + hv,
// blockIdx.y = the V tile. Like decode_kernel the block holds every partition the token touches:
// `groups` = (shared ? 1 : 0) + max(kw, kr) groups of ceil(K/32) warps, group 0 the shared partition
// (when there is one), groups 1… the routed partitions the token writes or reads by ascending index
// (the read slots' order). Warp w of a group owns the rows 32w … 32w+31 of its partition's state,
// lane l the four columns 4l … 4l+3 of the tile: a warp reads and writes whole 512-byte rows. The
// warp walks its rows in order, RB rows' 16-byte loads in flight while the previous RB rows are
// worked (no K×32 register tile, no spill, a quarter of the memory instructions of 4-byte loads):
//   family::diagonal (gate key / head / none):  h[a,j] = e^{λ_a} h[a,j] + (cw k_a) v_j, stored at once
//   read:                                        acc_j += q_a h[a,j]   (rows in order, one chain per column)
// then per partition the warps' partial sums Σ_w acc (warp order, from 0), times scale · cr (rounded),
// and the read slots summed in slot order from 0 — the operations and the order of recurrent_kernel
// and combine_kernel (and decode_kernel). The roundings are pinned with intrinsics (decay_update,
// __fmaf_rn, __fmul_rn, __fadd_rn) to the form recurrent_kernel compiles to, because this kernel's
// four-column code shape made the compiler fuse differently: first the other product of the update
// (fma(k, v, e^λ·h): states off by an ulp), then the product by scale·cr into the slots' sum.
//
// Routing: lane 0 of every warp of a routed group runs the router policy's own R::route on the
// token's logits (as router_kernel and decode_kernel do; the same inputs and function, so the same
// answer in every warp) and takes its group's partition; nothing waits for it across warps, so the
// shared group streams its partition meanwhile. Each warp stages the q, k, e^{g} of its own rows
// (__syncwarp); one __syncthreads before the output row. Partitions the token does not touch are not
// accessed at all (bit-identical freeze, SPEC §8.5). A token whose logits are not finite touches no
// routed partition and its output row is NaN. No scratch memory, no atomics: deterministic.
//
// Requirements (forward.cuh checks them, else decode_kernel or the three-kernel path runs): the
// diagonal family, V a multiple of 4, the state 16-byte aligned, groups · ceil(K/32) ≤ 32 warps and
// the shared memory ≤ 48 KiB. Not written: the delta rule (hᵀk over every row before any row is
// updated: a second pass over the state).
#pragma once

#include <cstdint>
#include <string>

#include <linstate/detail/problem.hpp>
#include <linstate/detail/router.hpp>
#include <linstate/tensor.hpp>

#include "../check.cuh"
#include "../detail/scalar.cuh"
#include "../detail/traits.cuh"
#include "decode.cuh"
#include "recurrent.cuh"
#include "router.cuh"

namespace linstate::cuda_detail {

inline constexpr int stream_cols = 128;          //!< state columns per block: 4 per lane
inline constexpr int stream_max_warps = 32;      //!< 1024 threads

//! When forward_in_place takes decode_stream_kernel (forward.cuh): at least decode_stream_min_tasks
//! sequences × value heads (below, the register-tile decode_kernel or the three-kernel path), at most
//! decode_stream_max_n routed partitions (one thread per routed warp routes the token, O(N²) for
//! router::top_k). Measured on the H200 (bf16, H = 8, K = V = 128, CUDA-graph step): faster than the
//! other paths at B = 16 (S·HV = 128) and 128 for GLA and SSE n4/n8/n16, slower at B = 1 for GLA, n8
//! and n16. Settings for comparisons and tests (bench_cuda --decode-path); not thread-safe to change
//! while another thread enqueues a call.
inline index_t decode_stream_min_tasks = 128;
inline int decode_stream_max_n = 16;
inline bool decode_stream_enabled = true;
//! Variant of the kernel for K = V = 128, for measurements: 0 the library's choice (launch_decode_stream),
//! 1 eight rows in flight per warp at 64 registers, 2 sixteen at 128 registers (blocks ≤ 512 threads).
inline int decode_stream_variant = 0;

//! Dynamic shared memory of decode_stream_kernel: per group q, k, e^{g} [32·nw] and the warps' partial
//! outputs [nw][128], then per warp of a routed group (routed_groups · nw of them) the router's x, p,
//! cw, cr [N] floats, then their flags [N].
constexpr std::size_t decode_stream_smem_bytes(int groups, int routed_groups, int nw, int N) {
  return static_cast<std::size_t>(groups) * static_cast<std::size_t>(nw) * (3 * rows_per_warp + stream_cols) * sizeof(float) +
         static_cast<std::size_t>(routed_groups) * static_cast<std::size_t>(nw) * static_cast<std::size_t>(N) * (4 * sizeof(float) + 1);
}

//! e^{λ} h + (cw k) v as recurrent_kernel's `gs[a] * hreg[r] + ks[a] * vj` compiles (nvcc 13, -O3:
//! FMUL of k·v, then FFMA): fma(e^{λ}, h, k·v), written out so that this kernel's different code
//! shape (four columns per thread) cannot make the compiler fuse the other product. The read is
//! fma(q, h, acc) and decay::none's update fma(k, v, h), the only fusions of their expressions.
__device__ __forceinline__ float decay_update(float g, float h, float k, float v) { return __fmaf_rn(g, h, __fmul_rn(k, v)); }

__device__ __forceinline__ float4 ld_stream(const float* p) {
  return __ldcs(reinterpret_cast<const float4*>(p));
}
__device__ __forceinline__ void st_stream(float* p, float4 v) { __stcs(reinterpret_cast<float4*>(p), v); }

//! KV: 0 for any K and V (V a multiple of 4), or K = V = KV known at compile time (immediate row
//! offsets, the row loop unrolled). RB: rows per batch; PIPE: the next batch's loads go out before a
//! batch is worked (2·RB rows in flight at most), else one batch at a time. MAXT, MINB: the launch
//! bounds (1024, 1: 64 registers; 512, 1: 128). NC: 0 for any N, or N = NC known at compile time
//! (route_in_warp routes over registers).
template <class D, class R, class Dev, int KV, int RB, bool PIPE, int MAXT, int MINB, int NC = 0>
__global__ void __launch_bounds__(MAXT, MINB) decode_stream_kernel(const decode_params<R, Dev> dp) {
  static_assert(is_diagonal<D>, "linstate (cuda): decode_stream_kernel runs the diagonal family");
  static_assert(rows_per_warp % RB == 0);
  const recurrent_params<Dev>& p = dp.r;
  extern __shared__ float4 smem4[];
  float* smem = reinterpret_cast<float*>(smem4);
  __shared__ int g_part[stream_max_warps];  // partition of group u (−1: none)
  __shared__ std::uint32_t g_flags[stream_max_warps];
  __shared__ float g_cw[stream_max_warps], g_cr[stream_max_warps];
  __shared__ int g_nonfinite;

  const int groups = dp.groups;
  const int nw = KV ? (KV + rows_per_warp - 1) / rows_per_warp : (p.K + rows_per_warp - 1) / rows_per_warp;  // warps per group
  const int KP = nw * rows_per_warp;
  const int K = KV ? KV : p.K, V = KV ? KV : p.V, HV = p.HV, N = p.N;
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31, warp = tid >> 5;
  const int u = warp / nw, w = warp % nw;
  const int gfloats = nw * (3 * rows_per_warp + stream_cols);
  float* qs = smem + static_cast<std::size_t>(u) * gfloats;  // [KP] this token's query (0 beyond K)
  float* ks = qs + KP;                                       // [KP] key times the write weight
  float* gs = ks + KP;                                       // [KP] e^{g} (gated_key)
  float* red = gs + KP;                                      // [nw][128] the warps' partial outputs

  const index_t task = blockIdx.x;  // s·HV + hv
  const int c0 = static_cast<int>(blockIdx.y) * stream_cols;
  const index_t s = task / HV;
  const index_t t = p.seq ? p.seq[s] : s * p.T;  // the sequence's token (T = 1 without cu_seqlens)
  if (p.seq && p.seq[s + 1] == t) return;         // in place, an empty sequence touches nothing (whole block)
  const int hv = static_cast<int>(task % HV);
  const int h = hv / (HV / p.H);
  const int j = c0 + 4 * lane;  // this thread's first state column (V is a multiple of 4)
  const bool col = j < V;
  // group 0 of a variant with a shared partition, or the single partition of a variant without routing
  const bool shared_group = (p.shared || !R::routes) && u == 0;
  const int first_routed = p.shared ? 1 : 0;

  // 1. routing: lane 0 of every warp of a routed group runs the router policy's R::route on the
  // token's logits (the same inputs, the same function: the same answer in every warp) and takes its
  // group's partition — the (u − first_routed)-th the token touches, by ascending index. No barrier:
  // the shared group streams meanwhile.
  int part = 0;
  std::uint32_t f = detail::route_write | detail::route_read;
  float cw = 1.f;
  if constexpr (R::routes) {
    if (!shared_group) {
      const int rw = warp - first_routed * nw, routed_warps = (groups - first_routed) * nw;
      float* rs = smem + static_cast<std::size_t>(groups) * gfloats + static_cast<std::size_t>(rw) * 4 * N;  // x, p, cw, cr [N]
      auto* rfl = reinterpret_cast<std::uint8_t*>(smem + static_cast<std::size_t>(groups) * gfloats +
                                                  static_cast<std::size_t>(routed_warps) * 4 * N) + rw * N;  // flags [N]
      const warp_route r = route_in_warp<R, Dev, NC>(dp.cfg.value, N, dp.logits + t * N, dp.params, rs, rfl, u - first_routed, first_routed, lane,
                                                 [](const warp_route&) {});
      if (lane == 0 && w == 0) {  // one writer per group (read by the output stage, after the barrier); after the
                                  // shuffles: an N = 16 step at B = 16 took 23.3 against 26.7 µs written before them (call 2)
        g_part[u] = r.part, g_flags[u] = r.flags, g_cw[u] = r.cw, g_cr[u] = r.cr;
        if (u == groups - 1) g_nonfinite = r.finite ? 0 : 1;
      }
      part = r.part, f = r.flags, cw = r.cw;
    }
  }

  // 2. this group's q, k (times the write weight) and e^{g}
  const bool active = part >= 0;
  const bool wr = active && (f & detail::route_write), rd = active && (f & detail::route_read);
  const device_source<Dev> src = p.shared && u == 0 ? p.shr : p.main;  // (a single partition reads main)
  const index_t qk = (t * p.H + h) * K;
  {  // each warp stages the 32 rows it walks (no barrier across warps)
    const int a = w * rows_per_warp + lane;
    const bool in = a < K;
    qs[a] = (rd && in) ? to_f32(src.q[qk + a]) : 0.f;
    ks[a] = (wr && in) ? to_f32(src.k[qk + a]) * cw : 0.f;
    if constexpr (decay_key<D>) gs[a] = (wr && in) ? expf(to_f32(D::log_decay(src.g + (t * HV + hv) * K, a))) : 1.f;
    __syncwarp();
  }

  // 3. the rows of this warp, in order: update, read, store (recurrent_kernel's arithmetic)
  float4 vj = make_float4(0.f, 0.f, 0.f, 0.f);
  if (wr && col) {
    const Dev* vp = p.v + (t * HV + hv) * V + j;
    vj = make_float4(to_f32(vp[0]), to_f32(vp[1]), to_f32(vp[2]), to_f32(vp[3]));
  }
  float decay = 1.f;
  if constexpr (decay_head<D>)
    if (wr) decay = expf(to_f32(D::log_decay(src.g + t * HV + hv, 0)));
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  const int a0 = w * rows_per_warp;
  const int rows = KV ? rows_per_warp : min(rows_per_warp, K - a0);
  if (active && col && rows > 0) {
    const index_t base = ((s * p.P + part) * HV + hv) * static_cast<index_t>(K) * V + static_cast<index_t>(a0) * V + j;
    const float* in = p.state_in ? p.state_in + base : nullptr;
    float* out = wr && p.state_out ? p.state_out + base : nullptr;
    auto walk = [&](auto wr_c, auto rd_c) {
      constexpr bool W = decltype(wr_c)::value, Rd = decltype(rd_c)::value;
      auto load = [&](int r) {
        return in ? ld_stream(in + static_cast<index_t>(r) * V) : make_float4(0.f, 0.f, 0.f, 0.f);
      };
      auto row = [&](int r, float4 hh) {  // row a0 + r: update, store, read
        const int a = a0 + r;
        if constexpr (W) {
          const float kk = ks[a];
          if constexpr (decay_none<D>) {
            hh.x = __fmaf_rn(kk, vj.x, hh.x), hh.y = __fmaf_rn(kk, vj.y, hh.y);
            hh.z = __fmaf_rn(kk, vj.z, hh.z), hh.w = __fmaf_rn(kk, vj.w, hh.w);
          } else {
            const float gg = decay_head<D> ? decay : gs[a];
            hh.x = decay_update(gg, hh.x, kk, vj.x), hh.y = decay_update(gg, hh.y, kk, vj.y);
            hh.z = decay_update(gg, hh.z, kk, vj.z), hh.w = decay_update(gg, hh.w, kk, vj.w);
          }
          if (out) st_stream(out + static_cast<index_t>(r) * V, hh);
        }
        if constexpr (Rd) {
          const float qq = qs[a];
          acc.x = __fmaf_rn(qq, hh.x, acc.x), acc.y = __fmaf_rn(qq, hh.y, acc.y);
          acc.z = __fmaf_rn(qq, hh.z, acc.z), acc.w = __fmaf_rn(qq, hh.w, acc.w);
        }
      };
      if constexpr (KV != 0 && PIPE) {
        // RB rows in flight while the previous RB are worked: two register batches
        float4 cur[RB], nxt[RB];
#pragma unroll
        for (int i = 0; i < RB; ++i) cur[i] = load(i);
#pragma unroll
        for (int r0 = 0; r0 < rows_per_warp; r0 += RB) {
          if (r0 + RB < rows_per_warp) {
#pragma unroll
            for (int i = 0; i < RB; ++i) nxt[i] = load(r0 + RB + i);
          }
#pragma unroll
          for (int i = 0; i < RB; ++i) row(r0 + i, cur[i]);
#pragma unroll
          for (int i = 0; i < RB; ++i) cur[i] = nxt[i];
          asm volatile("" ::: "memory");  // keep later batches' loads after this batch's stores
        }
      } else {
#pragma unroll(KV ? rows_per_warp / RB : 1)
        for (int r0 = 0; r0 < rows_per_warp; r0 += RB) {
          if (!KV && r0 >= rows) break;
          float4 hb[RB];
#pragma unroll
          for (int i = 0; i < RB; ++i) hb[i] = (KV || r0 + i < rows) ? load(r0 + i) : make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
          for (int i = 0; i < RB; ++i)
            if (KV || r0 + i < rows) row(r0 + i, hb[i]);
          asm volatile("" ::: "memory");
        }
      }
    };
    if (wr && rd) walk(std::true_type{}, std::true_type{});
    else if (wr) walk(std::true_type{}, std::false_type{});
    else walk(std::false_type{}, std::true_type{});
  }
  if (rd) reinterpret_cast<float4*>(red)[w * (stream_cols / 4) + lane] = acc;
  __syncthreads();

  // 4. the output row: per reading partition Σ_w (warp order, from 0) · scale · cr, the read slots
  // summed in order (shared, then routed partitions by index) — combine_kernel's sum
  for (int c = tid; c < stream_cols && c0 + c < V && p.R > 0; c += static_cast<int>(blockDim.x)) {
    const int jj = c0 + c;
    auto out_of = [&](int g) {
      const float* rg = smem + static_cast<std::size_t>(g) * gfloats + 3 * KP;
      float o = 0.f;
      for (int ww = 0; ww < nw; ++ww) o = __fadd_rn(o, rg[ww * stream_cols + c]);
      const float cr = ((p.shared || !R::routes) && g == 0) ? 1.f : g_cr[g];
      const float qf = p.scale * cr;
      // rounded here, as recurrent_kernel rounds it into o_part (decode_kernel into g_out) before the
      // slots are summed: the product must not be fused into the sum below (an FMA there changed the
      // bits of every output with two or more read slots, device call 2)
      return __fmul_rn(o, qf);
    };
    const float o = sum_read_slots(p.R, groups, p.shared || !R::routes, g_part, g_flags, R::routes && g_nonfinite, out_of);
    p.o[(t * HV + hv) * V + jj] = from_f32<Dev>(o);
  }
}

//! Enqueues decode_stream_kernel: grid (S·HV, V tiles of 128), groups · nw warps per block.
template <class D, class R, class Dev, int NC = 0>
void launch_decode_stream(const decode_params<R, Dev>& dp, int nw, int N, cudaStream_t stream, const char* api) {
  constexpr int nc = NC > 0 && R::routes ? NC : 0;  // N known at compile time (forward.cuh: route_static_n)
  if (nc > 0 && N != nc) detail::fail(api, "decode_stream_kernel built for N = " + std::to_string(nc) + ", called with N = " + std::to_string(N));
  const std::size_t smem = decode_stream_smem_bytes(dp.groups, R::routes ? dp.groups - (dp.r.shared ? 1 : 0) : 0, nw, N);
  const dim3 grid(static_cast<unsigned>(dp.tasks), static_cast<unsigned>(dp.vtiles));
  const dim3 block(static_cast<unsigned>(32 * nw * dp.groups));
  if (dp.r.K == 128 && dp.r.V == 128) {
    // 16 rows in flight per warp at up to 128 registers (two blocks of 256 threads per multiprocessor),
    // unless routing is long (N > 8 over shared memory: one thread's O(N²) top-k, which the fewer
    // resident warps do not hide) or the block too large: then 8 rows at 64 registers
    // (docs/benchmarks.md, session 12). Routing over registers (nc > 0) is short at any N: SSE n16k1s
    // 14.74 → 12.66 µs at B = 16 and 76.45 → 74.30 at B = 128 on the 128-register variant (session 17)
    int variant = decode_stream_variant;
    if (variant == 0) variant = (R::routes && N > 8 && nc == 0) || block.x > 512 ? 1 : 2;
    if (variant == 2 && block.x <= 512) decode_stream_kernel<D, R, Dev, 128, 8, true, 512, 1, nc><<<grid, block, smem, stream>>>(dp);
    else decode_stream_kernel<D, R, Dev, 128, 8, false, 1024, 1, nc><<<grid, block, smem, stream>>>(dp);
  } else {
    decode_stream_kernel<D, R, Dev, 0, 8, false, 1024, 1, nc><<<grid, block, smem, stream>>>(dp);
  }
  check_launch("decode_stream_kernel", api);
}

}  // namespace linstate::cuda_detail
