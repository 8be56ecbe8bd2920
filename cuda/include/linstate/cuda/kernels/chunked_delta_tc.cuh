// linstate/cuda/kernels/chunked_delta_tc.cuh — the chunked gated delta rule's forward on tensor cores
// for bf16 inputs (issue 11, item 2): the WY form of chunked_delta.cuh (SPEC §3.2, same notation),
// every product by mma.sync m16n8k16 on bf16 fragments (ldmatrix) with fp32 accumulators (WMMA
// 16×16×16 until session 30: the same HMMA instructions on the same fragments); fp32 (and fp16) inputs keep
// the exact fp32 kernels of chunked_delta.cuh. The backward of bf16 inputs recomputes the forward's
// per-chunk quantities with chunked_delta.cuh's delta_prep_kernel (split-bf16, near-fp32) and runs its
// two sequential passes here on plain bf16 operands with fp32 accumulators (since session 21; split-bf16
// before): delta_tc_hstate_kernel (the states entering each chunk) and delta_tc_rscan_kernel (the reverse
// scan), below the forward's kernels. The two read
// only the prep's buffers, so where both grids fit on the GPU at once they run side by side on two
// streams (detail/side_stream.cuh; GDN at B = 1, H = 8: forward + backward 12.0 → 9.7 ms at T = 32768).
// Where they do, the gradient kernels' dO role (dA = dO Vnᵀ, dQg = dO Sᵀ: chunked_delta.cuh,
// delta_grad_products_kernel) follows the states' pass on the side stream, gathering dO itself, so it
// runs while the reverse scan finishes (which then writes no dO32): session 25's branch s25-dA-beside,
// since session 29 only where the scans run side by side.
//
// Per chunk of C = 64 records with entering state S [K,V] (chunked_delta.cuh's header):
//   T = (I + L)⁻¹,  L = strict_lower(diag(b) K̂K̂ᵀ ⊙ Γ)            (1)
//   W = T diag(b e^G) K̂ [C,K],   U = T diag(b) V [C,V]              (2)
//   Vn = U − W S [C,V]                                               (3)
//   S' = e^{G_C} S + Kdᵀ Vn,   Kd = diag(e^{G_C − G}) K̂ [C,K]       (4)
//   O = Qg S + A Vn,   Qg = diag(e^G) Q,   A = lower_incl(Q K̂ᵀ ⊙ Γ)  (5)
// Three kernels (the division of the work follows fla's chunk_gated_delta_rule: the WY pieces per
// chunk, a state pass tiled over V, an output pass):
//   1. delta_tc_prep_kernel   (chunk, value head; three blocks per SM): the k and q rows by cp.async
//      (G, β̃ and G's sum by warp 0 while they land), k̂, q̂ (l2norm in fp32), G (fp64 sum, as the
//      exact path), K̂K̂ᵀ and QK̂ᵀ on tensor cores, L and A in fp32, T by a blocked forward substitution
//      in fp32 (16×16 diagonal blocks inverted one column per thread, then T_ij = −T_ii Σ_{j≤m<i} L_im T_mj
//      block row by block row), W and U on tensor cores with T rounded to bf16 (V's tiles loaded into
//      registers a phase before U's products); writes Qg, Kd, W, A in bf16, Uᵀ [V, C] and G in fp32;
//   2. delta_tc_state_kernel  (stream, value head, 16 value columns; sequential over the chunks): the
//      state held transposed, Sᵀ [16, K], in the mma.sync accumulators of 4 warps (a quarter of K
//      each); per chunk Vnᵀ = Uᵀ − Sᵀ Wᵀ (3) (warp w: chunk rows 16w…16w+15) and
//      Sᵀ ← e^{G_C} Sᵀ + Vnᵀ Kd (4) (warp w: its key columns), the two exchanged between the warps as
//      bf16 tiles in shared memory (S and Vn rounded to bf16 as operands); the chunk's W, Kd and Uᵀ
//      rows come by cp.async through a 3-deep ring, issued by a fifth warp that only copies. Writes
//      Vnᵀ [V, C] and Sᵀ entering each chunk [V, K] (bf16) for kernel 3, the final S in fp32 ([K, V]).
//      Grid: S·P × HV × V/16 blocks of 160 threads; K = 128 a compile-time constant where the grid leaves
//      room beside it (the pipelined forward; session 32);
//   3. delta_tc_output_kernel (chunk, value head, 64-column V tile): O = Qg S + A Vn (5), one
//      accumulator per output tile (S and Vn read as col_major operands from Sᵀ and Vnᵀ).
// Pipelined (delta_tc_pipeline: long streams, and a state kernel of at most half the SMs' blocks, as
// GDN at B = 1, H = 8): the chunks are cut into pieces; the prep of piece i + 1 runs beside the state
// pass over piece i (on a side stream that waits for piece i's prep), and the output of piece i beside
// the pass over piece i + 1. The state kernel stores each stream's state after its piece into `carry`
// and the next piece reloads it (fp32: the same bits as one pass). Ordinary stream dependencies,
// nothing spins: correct with the launches serialised, and capturable into a graph.
// Rounding: the products' operands are bf16 (k̂, q̂, T, b·V, b e^G k̂, S, Vn); G, Γ, the exponentials,
// L and T's solve, the carried state and every accumulation are fp32. The GPU tests check it against
// the exact path at fla's ratio 0.005 (SPEC §9.3).
// Measured (H200, bf16, B = 1, H = 8, K = V = 128, T = 32768; ncu at its locked 1.35 GHz, one
// forward): prep 594 µs, state 658 µs (≈ 1 700 cycles per chunk step), output 215 µs; bench_cuda
// forward 1.16 ms in one pass, 1.02 ms pipelined in 3 pieces (2.47 before session 10; 11.7 for the
// exact kernels; docs/benchmarks.md, "Issue 11, session 10" and "session 11").
// Scratch: the forward's fp32 buffers of chunked_delta.cuh (delta_chunk_floats<Dev>(K, V, false)), the bf16
// arrays laid over the first half of each: Qg over q̂, Kd over k̂, W over W, A over A, Vn over Vn, and
// the entering states over hbuf.
// Requirements (delta_tc_supported): bf16 inputs, K ≤ 128 and K, V multiples of 16, q, k, v (and the
// shared partition's q, k) 16-byte aligned; otherwise chunked_delta.cuh's exact kernels run.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <type_traits>

#include "chunked_delta.cuh"

namespace linstate::cuda_detail {

inline constexpr int dtc_threads = 256;       //!< prep and output kernels: 8 warps
inline constexpr int dtc_scan_tile = 16;      //!< V columns per state-kernel block
//! chunk buffers in the backward's two scans (reverse scan, states' pass): chunk c's tiles are issued
//! dtc_scan_stages − 1 chunks ahead of their use (3: a whole chunk's work and more hides the copy's latency;
//! the reverse scan's three buffers and its single tiles take 208 KB of shared memory at K = 128)
inline constexpr int dtc_scan_stages = 3;
inline constexpr int dtc_out_tile = 64;       //!< V columns per output-kernel block

using dtc_bf16 = __nv_bfloat16;

//! The bf16 views of the forward's scratch (see the header).
template <class Dev>
struct delta_tc_params : delta_params<Dev> {
  dtc_bf16* qg = nullptr;  // [chunks, HV, C, K] Qg = diag(e^G) Q
  dtc_bf16* kd = nullptr;  // [chunks, HV, C, K] Kd = diag(e^{G_C − G}) K̂
  dtc_bf16* w = nullptr;   // [chunks, HV, C, K] W
  dtc_bf16* a = nullptr;   // [chunks, HV, C, C] A
  dtc_bf16* vn = nullptr;  // [chunks, HV, C, V] Vn
  dtc_bf16* h = nullptr;   // [chunks, HV, K, V] S entering the chunk
  // (a pipelined call's piece: delta_params' chunk_lo, chunk_hi and carry)
};

namespace dtc_detail {

__host__ __device__ constexpr std::size_t up128(std::size_t b) { return (b + 127) / 128 * 128; }
__host__ __device__ constexpr int ldb16(int n) { return n + 8; }  //!< bf16 row pitch (16-byte rows, 32-byte tiles)
inline constexpr int ldf = chunk_len + 4;                         //!< fp32 [C][C] pitch
inline constexpr int ldv16 = dtc_out_tile + 8;                    //!< bf16 [*, 64] pitch
inline constexpr int lst = 20;                                    //!< fp32 16-wide staging pitch
inline constexpr int ls16 = dtc_scan_tile + 8;                    //!< bf16 16-wide pitch

// (cp_async16, cp_async_commit, cp_async_wait_all: chunked_delta.cuh, delta_detail)

//! Eight fp32 values → eight bf16 (round to nearest even) packed in 16 bytes.
__device__ __forceinline__ uint4 pack8(const float* x, float s) {
  uint4 u;
  unsigned* w = reinterpret_cast<unsigned*>(&u);
#pragma unroll
  for (int t = 0; t < 4; ++t) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(x[2 * t] * s, x[2 * t + 1] * s);
    w[t] = *reinterpret_cast<const unsigned*>(&h);
  }
  return u;
}

using x3_detail::bf2;  // (x0, x1) → one register of two bf16 (tile_mma.cuh)

//! Eight bf16 packed in 16 bytes → fp32.
__device__ __forceinline__ void unpack8(uint4 u, float* x) {
  const unsigned* w = reinterpret_cast<const unsigned*>(&u);
#pragma unroll
  for (int t = 0; t < 4; ++t) {
    const __nv_bfloat162 h = *reinterpret_cast<const __nv_bfloat162*>(&w[t]);
    const float2 f = __bfloat1622float2(h);
    x[2 * t] = f.x, x[2 * t + 1] = f.y;
  }
}

__device__ __forceinline__ unsigned smem_addr(const void* s) { return static_cast<unsigned>(__cvta_generic_to_shared(s)); }
// (ldsm_x4 and ldsm_x4_trans: tile_mma.cuh)

//! One warp's 16×16 fp32 product tile: mma_detail's accumulators (tile_mma.cuh; lane l holds rows
//! l/4 and l/4 + 8, columns 8h + 2(l%4) and + 1 in d[h]).
using acc16 = float[2][4];

//! One warp: its tile d (through the warp's staging tile `st`, [16][lst]) to bf16 rows of `dst` (pitch
//! ld elements, 16-byte aligned). Lane l writes row l/2, columns 8(l%2)…+7.
__device__ __forceinline__ void store_acc_bf16(dtc_bf16* dst, int ld, const acc16& d, float* st) {
  const int lane = static_cast<int>(threadIdx.x) & 31, r = lane >> 1, h = (lane & 1) * 8;
  mma_detail::store_c(st, lst, 0, 0, d, lane);
  __syncwarp();
  *reinterpret_cast<uint4*>(dst + static_cast<index_t>(r) * ld + h) = pack8(st + r * lst + h, 1.f);
  __syncwarp();
}

//! One warp: its tile d transposed (through `st`) to fp32 rows of `dst` (pitch ld floats, 16-byte
//! aligned): dst[c · ld + r] = d(r, c). Lane l writes row l/2, columns 8(l%2)…+7 (two 16-byte stores).
__device__ __forceinline__ void store_acc_t(float* dst, int ld, const acc16& d, float* st) {
  const int lane = static_cast<int>(threadIdx.x) & 31, g = lane >> 2, t = lane & 3, r = lane >> 1, h = (lane & 1) * 8;
#pragma unroll
  for (int q = 0; q < 2; ++q)
#pragma unroll
    for (int e = 0; e < 4; ++e) st[(8 * q + 2 * t + (e & 1)) * lst + g + 8 * (e >> 1)] = d[q][e];
  __syncwarp();
  const float4* s4 = reinterpret_cast<const float4*>(st + r * lst + h);
  float4* d4 = reinterpret_cast<float4*>(dst + static_cast<index_t>(r) * ld + h);
  d4[0] = s4[0], d4[1] = s4[1];
  __syncwarp();
}

}  // namespace dtc_detail

// --- 1. delta_tc_prep_kernel -------------------------------------------------------------------------

struct delta_tc_prep_smem {
  std::size_t recs, G, b, Kb, Qb, Lm, Am, Dg, T16, Vb, st, bytes;
  __host__ __device__ explicit delta_tc_prep_smem(int K) {
    using namespace dtc_detail;
    (void)K;  // the regions are sized for chunk_max_k (the overlays below need it); rows are ldb16(K) apart
    const std::size_t rowk = up128(static_cast<std::size_t>(chunk_len) * ldb16(chunk_max_k) * sizeof(dtc_bf16));
    const std::size_t cc = up128(static_cast<std::size_t>(chunk_len) * ldf * sizeof(float));
    recs = 0;
    G = up128(chunk_len * sizeof(chunk_record));
    b = G + up128(chunk_len * sizeof(float));
    Kb = b + up128(chunk_len * sizeof(float));
    Qb = Kb + rowk, Lm = Qb + rowk, Am = Lm + cc;
    bytes = Am + cc;
    // laid over regions whose first use is over (three blocks per SM fit): T and Dg over the q rows
    // (free once QK̂ᵀ is formed), b V over L (free once T is in bf16), the staging tiles over QK̂ᵀ's
    // (free after the solve)
    T16 = Qb, Dg = Qb + up128(static_cast<std::size_t>(chunk_len) * ldv16 * sizeof(dtc_bf16));
    Vb = Lm, st = Am;
  }
  static_assert(4 * 16 * 17 * sizeof(float) + chunk_len * dtc_detail::ldv16 * sizeof(dtc_bf16) + 128 <= chunk_len * (chunk_max_k + 8) * sizeof(dtc_bf16) &&
                    chunk_len * dtc_detail::ldv16 * sizeof(dtc_bf16) <= chunk_len * dtc_detail::ldf * sizeof(float) &&
                    dtc_threads / 32 * 16 * dtc_detail::lst * sizeof(float) <= chunk_len * dtc_detail::ldf * sizeof(float),
                "delta_tc_prep_smem's overlays must fit their regions");
};

//! grid (max_chunks, HV), dtc_threads. The log-decays and β̃ from the policy, as delta_prep_kernel.
template <class D, class Dev>
__global__ void __launch_bounds__(dtc_threads) delta_tc_prep_kernel(const delta_tc_params<Dev> p) {
  static_assert(is_delta<D> && std::is_same_v<Dev, dtc_bf16>, "linstate (cuda): the tensor-core delta kernels take bf16");
  using namespace delta_detail;
  using namespace dtc_detail;
  constexpr int C = chunk_len;
  const index_t c = p.chunk_lo + blockIdx.x;
  if (c >= p.rt.seg_chunk[p.S * p.P]) return;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const int K = p.K, V = p.V, lk = ldb16(K);
  const delta_tc_prep_smem L(K);
  auto* recs = reinterpret_cast<chunk_record*>(smem_raw + L.recs);
  float* G = reinterpret_cast<float*>(smem_raw + L.G);
  float* b = reinterpret_cast<float*>(smem_raw + L.b);
  auto* Kb = reinterpret_cast<dtc_bf16*>(smem_raw + L.Kb);   // [C][lk]  k (raw), then k̂, then b e^G k̂
  auto* Qb = reinterpret_cast<dtc_bf16*>(smem_raw + L.Qb);   // [C][lk]  q (raw), then Q = r q̂
  float* Lm = reinterpret_cast<float*>(smem_raw + L.Lm);     // [C][ldf] K̂K̂ᵀ, then L, then T (blocks below the diagonal)
  float* Am = reinterpret_cast<float*>(smem_raw + L.Am);     // [C][ldf] QK̂ᵀ, then the solve's X blocks
  float* Dg = reinterpret_cast<float*>(smem_raw + L.Dg);     // [4][16][17] T's diagonal blocks
  auto* T16 = reinterpret_cast<dtc_bf16*>(smem_raw + L.T16); // [C][ldv16] T in bf16
  auto* Vb = reinterpret_cast<dtc_bf16*>(smem_raw + L.Vb);   // [C][ldv16] b V, 64 columns
  float* st = reinterpret_cast<float*>(smem_raw + L.st) + (threadIdx.x >> 5) * 16 * lst;  // the warp's staging tile
  const int tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
  const int warp = uniform_warp_index(), lane = tid & 31, nwarps = nt >> 5;
  const chunk_block<Dev> blk = begin_chunk(p, c, recs);
  const at_chunk& o = blk.o;
  const device_source<Dev>& src = blk.src;
  __syncthreads();
  // raw k and q rows by cp.async, 16 bytes each (16 pieces per row of chunk_max_k: shifts, not divisions
  // by K; a row the record does not write / read is zero-filled, nothing read): every copy of the block
  // in flight at once (loaded into registers and stored, four rounds one after another, they were a
  // tenth of the kernel's stall samples before session 32)
  static_assert(chunk_max_k == 128, "the prep kernel's row pieces assume K ≤ 128");
  for (int e = tid; e < C * 16; e += nt) {
    const int i = e >> 4, a = (e & 15) * 8;
    if (a >= K) continue;
    const chunk_record& r = recs[i];
    cp_async16(smem_addr(Kb + i * lk + a), r.wr ? src.k + r.qk + a : src.k, r.wr);
    cp_async16(smem_addr(Qb + i * lk + a), r.rd ? src.q + r.qk + a : src.q, r.rd);
  }
  cp_async_commit();
  if (warp == 0) {  // G and b from the policy, then G's inclusive sum in fp64, while the rows' copies fly
    for (int i = lane; i < C; i += 32) record_gates<D>(recs[i], src, G[i], b[i]);
    __syncwarp();
    if (lane == 0) cumulative_decay_fp64(G);
  }
  cp_async_wait_all();
  __syncthreads();
  // l2norm in fp32 (one warp per row, four adjacent elements per lane: 8-byte accesses); k̂ and
  // Q = r q̂ in place (bf16), Kd and Qg to global. 1/‖x‖ by rsqrtf (≤ 2 ulp; the operands are bf16).
  const float gl = G[C - 1];
  const int a4 = 4 * lane;
  for (int i = warp; i < C; i += nwarps) {
    float kx[4] = {0.f, 0.f, 0.f, 0.f}, qx[4] = {0.f, 0.f, 0.f, 0.f};
    if (a4 < K) {
      const uint2 ku = *reinterpret_cast<const uint2*>(Kb + i * lk + a4), qu = *reinterpret_cast<const uint2*>(Qb + i * lk + a4);
      const float2 k01 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&ku.x));
      const float2 k23 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&ku.y));
      const float2 q01 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&qu.x));
      const float2 q23 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&qu.y));
      kx[0] = k01.x, kx[1] = k01.y, kx[2] = k23.x, kx[3] = k23.y;
      qx[0] = q01.x, qx[1] = q01.y, qx[2] = q23.x, qx[3] = q23.y;
    }
    float sk = 0.f, sq = 0.f;
#pragma unroll
    for (int u = 0; u < 4; ++u) sk = fmaf(kx[u], kx[u], sk), sq = fmaf(qx[u], qx[u], sq);
    sk = warp_sum(sk), sq = warp_sum(sq);
    const float ik = p.l2norm ? rsqrtf(sk + 1e-6f) : 1.f, iq = p.l2norm ? rsqrtf(sq + 1e-6f) : 1.f;
    const float rr = recs[i].r, eg = __expf(G[i]), ed = __expf(gl - G[i]);
    if (a4 < K) {
      float kh[4], qh[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) kh[u] = kx[u] * ik, qh[u] = qx[u] * iq * rr;
      *reinterpret_cast<uint2*>(Kb + i * lk + a4) = make_uint2(bf2(kh[0], kh[1]), bf2(kh[2], kh[3]));
      *reinterpret_cast<uint2*>(Qb + i * lk + a4) = make_uint2(bf2(qh[0], qh[1]), bf2(qh[2], qh[3]));
      *reinterpret_cast<uint2*>(p.kd + o.ck + i * K + a4) = make_uint2(bf2(kh[0] * ed, kh[1] * ed), bf2(kh[2] * ed, kh[3] * ed));
      *reinterpret_cast<uint2*>(p.qg + o.ck + i * K + a4) = make_uint2(bf2(qh[0] * eg, qh[1] * eg), bf2(qh[2] * eg, qh[3] * eg));
    }
  }
  if (tid < C) p.G[o.c + tid] = G[tid];
  __syncthreads();
  // K̂K̂ᵀ and QK̂ᵀ on tensor cores, the 10 tiles on or below the diagonal each (two m16n8k16 products a
  // k-step, k ascending: the products wmma's 16×16×16 form issued)
  for (int t = warp; t < 20; t += nwarps) {
    const int u = t % 10;
    int ti = 0;
    while ((ti + 1) * (ti + 2) / 2 <= u) ++ti;
    const int tj = u - ti * (ti + 1) / 2;
    acc16 d = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
    mma_detail::mma_steps<row_major_t, col_major_t>(d, t < 10 ? Kb : Qb, lk, Kb, lk, ti * 16, tj * 16, K, lane);
    mma_detail::store_c(t < 10 ? Lm : Am, ldf, ti * 16, tj * 16, d, lane);
  }
  __syncthreads();
  // L = strict_lower(diag(b) K̂K̂ᵀ ⊙ Γ) (fp32, in place), A = lower_incl(QK̂ᵀ ⊙ Γ) to global in bf16
  for (int e = tid; e < C * C / 2; e += nt) {
    const int i = e / (C / 2), j = (e % (C / 2)) * 2;
    float a2[2];
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int jj = j + u;
      const float gam = jj <= i ? __expf(G[i] - G[jj]) : 0.f;
      const float l = jj < i ? b[i] * Lm[i * ldf + jj] * gam : 0.f;
      a2[u] = jj <= i ? Am[i * ldf + jj] * gam : 0.f;
      Lm[i * ldf + jj] = l;
    }
    *reinterpret_cast<__nv_bfloat162*>(p.a + o.cc + i * C + j) = __floats2bfloat162_rn(a2[0], a2[1]);
  }
  __syncthreads();
  // (1): T's diagonal blocks, one column per thread: T_rc = −Σ_{c ≤ l < r} L_rl T_lc
  if (tid < 64) {
    const int d = tid / 16, o0 = d * 16;
    unit_lower_inverse_column(Lm + o0 * ldf + o0, ldf, Dg + d * 16 * 17, 17, tid % 16);
  }
  __syncthreads();
  // block rows 1..3: X_ij = Σ_{j ≤ m < i} L_im T_mj (into Am), then T_ij = −T_ii X_ij (into Lm's block)
  for (int bi = 1; bi < 4; ++bi) {
    for (int e = tid; e < bi * 256; e += nt) {
      const int bj = e / 256, r = (e % 256) / 16, col = e % 16;
      float s = 0.f;
      for (int m = bj; m < bi; ++m) {
        const float* Lr = Lm + (bi * 16 + r) * ldf + m * 16;
        if (m == bj) {  // T_jj is lower triangular: the terms l < col are exact zeros (the same sum)
          const float* Td = Dg + m * 16 * 17;
#pragma unroll
          for (int l = 0; l < 16; ++l) s = fmaf(Lr[l], Td[l * 17 + col], s);
        } else {
#pragma unroll
          for (int l = 0; l < 16; ++l) s = fmaf(Lr[l], Lm[(m * 16 + l) * ldf + bj * 16 + col], s);
        }
      }
      Am[bj * 16 * 17 + r * 17 + col] = s;
    }
    __syncthreads();
    for (int e = tid; e < bi * 256; e += nt) {
      const int bj = e / 256, r = (e % 256) / 16, col = e % 16;
      const float* Td = Dg + bi * 16 * 17;
      float s = 0.f;
#pragma unroll
      for (int m = 0; m < 16; ++m) s = fmaf(Td[r * 17 + m], Am[bj * 16 * 17 + m * 17 + col], s);  // Td[r][m > r] = 0
      Lm[(bi * 16 + r) * ldf + bj * 16 + col] = -s;
    }
    __syncthreads();
  }
  // T in bf16; b e^G k̂ in place of k̂
  for (int e = tid; e < C * (C / 8); e += nt) {  // eight columns per piece, one 16-byte store
    const int i = e / (C / 8), j = (e % (C / 8)) * 8, bi = i / 16, bj = j / 16;
    float t[8];
#pragma unroll
    for (int u = 0; u < 8; ++u)
      t[u] = bj > bi ? 0.f : bj == bi ? Dg[bi * 16 * 17 + (i % 16) * 17 + (j + u) % 16] : Lm[i * ldf + j + u];
    *reinterpret_cast<uint4*>(T16 + i * ldv16 + j) = pack8(t, 1.f);
  }
  for (int e = tid; e < C * 16; e += nt) {  // eight elements per piece; the row's scale b e^G once per piece
    const int i = e >> 4, a = (e & 15) * 8;
    if (a >= K) continue;
    float x[8];
    uint4* at = reinterpret_cast<uint4*>(Kb + i * lk + a);
    unpack8(*at, x);
    const float bi = b[i], eg = __expf(G[i]);
#pragma unroll
    for (int u = 0; u < 8; ++u) x[u] = x[u] * bi * eg;  // the same fp32 products as one element at a time
    *at = pack8(x, 1.f);
  }
  __syncthreads();
  // (2): W = T (b e^G k̂) in bf16, through each warp's staging tile; V's first 64-column tile loaded into
  // registers before it, so that the loads fly during W's products (waited for right after a barrier,
  // they were the kernel's most-sampled stall before session 32)
  static_assert(dtc_threads == delta_threads && dtc_out_tile == delta_out_tile, "the prep's V tiles are tile_gather16's");
  tile_gather16<Dev> vg;  // the writing records' v rows (zeros elsewhere), 64 columns a tile
  const auto v_wr = [](const chunk_record& r) { return r.wr; };
  const auto v_row = [V](const chunk_record& r) { return r.hv * V; };
  auto load_v = [&](int j0) { vg.load(p.v + j0, recs, min(dtc_out_tile, V - j0), v_wr, v_row); };
  load_v(0);
  {
    const int tn = K / 16;
    for (int t = warp; t < 4 * tn; t += nwarps) {
      const int ti = t / tn, tj = t % tn;
      acc16 d = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};  // T is lower triangular by blocks: k-steps 0 … ti
      mma_detail::mma_steps<row_major_t, row_major_t>(d, T16, ldv16, Kb, lk, ti * 16, tj * 16, 16 * (ti + 1), lane);
      store_acc_bf16(p.w + o.ck + ti * 16 * K + tj * 16, K, d, st);
    }
  }
  // (2): U = T (b V), 64 columns at a time, fp32 straight to global
  for (int j0 = 0; j0 < V; j0 += dtc_out_tile) {
    const int n = min(dtc_out_tile, V - j0);
    __syncthreads();  // Vb free
    vg.each(n, [&](int i, int jj, const uint4& piece) {  // b V (the record's rows; zeros where it writes nothing)
      float x[8];
      unpack8(piece, x);
      *reinterpret_cast<uint4*>(Vb + i * ldv16 + jj) = pack8(x, b[i]);
    });
    if (j0 + dtc_out_tile < V) load_v(j0 + dtc_out_tile);  // the next tile's loads fly during this one's products
    __syncthreads();
    const int tn = n / 16;
    for (int t = warp; t < 4 * tn; t += nwarps) {
      const int ti = t / tn, tj = t % tn;
      acc16 d = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
      mma_detail::mma_steps<row_major_t, row_major_t>(d, T16, ldv16, Vb, ldv16, ti * 16, tj * 16, 16 * (ti + 1), lane);
      store_acc_t(p.U + o.cv + static_cast<index_t>(j0 + tj * 16) * C + ti * 16, C, d, st);  // Uᵀ [V, C]
    }
  }
}

// --- 2. delta_tc_state_kernel ------------------------------------------------------------------------
//
// The state pass, one block per 16 value columns (value columns are independent under the delta
// rule): four compute warps hold the state transposed, Sᵀ [16, K], in their mma.sync accumulators
// (warp q owns the key columns 32q … 32q + 31), a fifth warp only copies. Per chunk (C = 64 records):
//   (3) Vnᵀ = Uᵀ − Sᵀ Wᵀ [16, C]: warp q forms the chunk rows 16q … 16q + 15 over all of K, its A
//       fragments −Sᵀ (bf16) from the tile's exchange tile Sx and Wᵀ's B fragments from W's rows
//       (ldmatrix); the piece goes to the tile's exchange tile Vx (bf16) and to global (Vnᵀ, kernel 3);
//   (4) Sᵀ ← e^{G_C} Sᵀ + Vnᵀ Kd on the warp's key columns, Vnᵀ's A fragments from Vx, Kd's B
//       fragments by ldmatrix.trans; −Sᵀ (bf16) back to Sx and Sᵀ (bf16) to global (the state entering
//       the next chunk, for kernel 3).
// Each product loads all its fragments before its first mma. Two barriers per chunk (Vx complete; Sx
// complete and the next chunk's buffer landed). The producer warp copies the chunk's W and Kd rows,
// the block's 16 Uᵀ rows and G_C by cp.async into a ring of dtc_state_stages buffers (chunk c + 2
// issued while chunk c computes, from pointers advanced by one chunk's stride): the compute warps
// never wait on a copy's address registers. Writes Vnᵀ [V, C] and Sᵀ entering each chunk [V, K]
// (bf16), the final S in fp32 ([K, V]). Rounding as before: Sᵀ and Vnᵀ are bf16 operands, the state
// and every accumulation fp32. Tried and slower (docs/benchmarks.md, session 10): the copies issued by
// every thread (18 cp.async each per chunk), bulk copies by the TMA unit one per row (145 small
// requests per chunk: 3× slower), two value tiles per block of 8 warps.

inline constexpr int dtc_state_threads = 160;  //!< 4 compute warps (a 16-column value tile, K in quarters) + 1 copy warp
inline constexpr int dtc_state_stages = 3;     //!< cp.async ring depth of the state kernel

namespace dtc_detail {
inline constexpr int ldu = chunk_len + 8;             //!< fp32 [16][C] pitch of the staged Uᵀ rows (≡ 8 mod 32 words)
inline constexpr int lks = chunk_max_k + 8;           //!< bf16 pitch of the state kernel's K-wide rows (fixed: immediates)

template <int N>
__device__ __forceinline__ void cp_async_wait_group() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
}  // namespace dtc_detail

struct delta_tc_state_smem {
  std::size_t Wb, Kb, Ub, Gs, per, Sx, Vx, bytes;  // ring buffer: W, Kd [C][lks], Uᵀ [16][ldu], G_{C−4..C−1}
  __host__ __device__ explicit delta_tc_state_smem(int) {
    using namespace dtc_detail;
    const std::size_t rowk = up128(static_cast<std::size_t>(chunk_len) * lks * sizeof(dtc_bf16));
    Wb = 0, Kb = rowk, Ub = 2 * rowk;
    Gs = Ub + up128(static_cast<std::size_t>(16) * ldu * sizeof(float));
    per = Gs + up128(4 * sizeof(float));
    Sx = dtc_state_stages * per;                                              // [16][lks]   −Sᵀ (bf16)
    Vx = Sx + up128(static_cast<std::size_t>(16) * lks * sizeof(dtc_bf16));    // [16][ldv16] Vnᵀ (bf16)
    bytes = Vx + up128(static_cast<std::size_t>(16) * ldv16 * sizeof(dtc_bf16));
  }
};

//! grid (V / 16, HV, S·P), dtc_state_threads. A stream without records keeps its initial state
//! (copied out of place, untouched in place), as delta_state_kernel. FK: K is chunk_max_k (p.K must be),
//! a compile-time constant — the K-long loops lose their run-time bounds checks (and the warp
//! re-convergence the compiler puts before each mma after such a check); the same products in the
//! same order, so the same bits (as the backward scans' FK).
template <class Dev, bool FK = false>
__global__ void __launch_bounds__(dtc_state_threads) delta_tc_state_kernel(const delta_tc_params<Dev> p) {
  static_assert(chunk_len == 64 && chunk_max_k == 128 && dtc_state_threads == 160 && dtc_out_tile == chunk_len,
                "delta_tc_state_kernel's warp map assumes C = 64, K ≤ 128, 4 + 1 warps");
  using namespace delta_detail;
  using namespace dtc_detail;
  using x3_detail::mma_bf16_16816;
  constexpr int C = chunk_len, NS = dtc_state_stages, KS = chunk_max_k / 16, lk = lks;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const int K = FK ? chunk_max_k : p.K, V = p.V, HV = p.HV, nks = K / 16;
  const delta_tc_state_smem L(K);
  const int tid = static_cast<int>(threadIdx.x);
  // FK: the warp index through a shuffle, so that the compiler knows it is the same in every lane of a warp (the
  // branches on it — the copy warp against the compute warps — are then warp-uniform); the run-time-K instance
  // keeps tid / 32 (with the shuffle it took 196 registers and ran SSE-GDN's 320-block grid 5–7 % slower: session 32)
  const int warp = FK ? uniform_warp_index() : tid >> 5, lane = tid & 31, g = lane >> 2, t2 = (lane & 3) * 2;
  const int q = warp;                       // the compute warp's K quarter (warp 4 copies)
  const bool producer = warp == 4;
  const int seg = static_cast<int>(blockIdx.z), hv = static_cast<int>(blockIdx.y);
  const int part = seg / p.S, s = seg % p.S;
  const int v0 = static_cast<int>(blockIdx.x) * 16;
  const bool active = !producer;
  // the stream's chunks [s0, s1); this piece's share [c0, c1): the state comes from state_in at the
  // stream's first chunk, else from the previous piece's carry, and goes to state_out after its last
  // chunk, else to the carry (a call in one piece: c0 = s0, c1 = s1)
  const index_t s0 = p.rt.seg_chunk[seg], s1 = p.rt.seg_chunk[seg + 1];
  const index_t c0 = s0 > p.chunk_lo ? s0 : p.chunk_lo, c1 = s1 < p.chunk_hi ? s1 : p.chunk_hi;
  if (s0 == s1) {
    if (p.in_place || p.chunk_lo != 0) return;  // copied out of place once, by the first piece
  } else if (c0 >= c1) {
    return;
  }
  const bool first = c0 == s0 || s0 == s1, last = c1 == s1 || s0 == s1;
  const float* from = first ? p.state_in : p.carry;
  float* to = last ? p.state_out : p.carry;
  const index_t sbase = ((static_cast<index_t>(s) * p.P + part) * HV + hv) * static_cast<index_t>(K) * V;
  auto* Sx = reinterpret_cast<dtc_bf16*>(smem_raw + L.Sx);
  auto* Vx = reinterpret_cast<dtc_bf16*>(smem_raw + L.Vx);
  // the producer lane's copy pieces, the same every chunk: W and Kd rows pr + 2n (n < 32) at column pa,
  // Uᵀ rows pr + 2n (n < 8) at column pu; the sources advance by one chunk's stride (HV chunk-heads)
  const int pr = lane >> 4, pa = (lane & 15) * 8, pu = (lane & 15) * 4;
  const index_t sk = static_cast<index_t>(HV) * C * K, sv = static_cast<index_t>(HV) * C * V, sg = static_cast<index_t>(HV) * C;
  const dtc_bf16* srcw = p.w + (c0 * HV + hv) * C * K + pr * K + pa;
  const dtc_bf16* srck = p.kd + (c0 * HV + hv) * C * K + pr * K + pa;
  const float* srcu = p.U + (c0 * HV + hv) * C * V + static_cast<index_t>(v0 + pr) * C + pu;
  const float* srcg = p.G + (c0 * HV + hv) * C + C - 4;
  const bool cp_wk = pa < K;
  // producer warp: half h of the next chunk in line into `slot` (h = 0: W and Kd rows < 32 and Uᵀ;
  // h = 1: the other rows and G, then the sources advance): the halves go before and after the
  // chunk's middle barrier, so that the copy warp never holds the compute warps at it
  auto issue = [&](int slot, int h) {
    unsigned char* b = smem_raw + static_cast<std::size_t>(slot) * L.per;
    auto* wd = reinterpret_cast<dtc_bf16*>(b + L.Wb) + (pr + 32 * h) * lk + pa;
    auto* kd = reinterpret_cast<dtc_bf16*>(b + L.Kb) + (pr + 32 * h) * lk + pa;
    const dtc_bf16* sw = srcw + 32 * h * K;
    const dtc_bf16* sd = srck + 32 * h * K;
    if (cp_wk)
#pragma unroll 8
      for (int n = 0; n < C / 4; ++n) cp_async16(wd + 2 * n * lk, sw + 2 * n * K), cp_async16(kd + 2 * n * lk, sd + 2 * n * K);
    if (h == 0) {
      auto* ud = reinterpret_cast<float*>(b + L.Ub) + pr * ldu + pu;
#pragma unroll
      for (int n = 0; n < 8; ++n) cp_async16(ud + 2 * n * ldu, srcu + 2 * n * C);
    } else {
      if (lane == 0) cp_async16(b + L.Gs, srcg);
      srcw += sk, srck += sk, srcu += sv, srcg += sg;
    }
  };
  // the warp's quarter of Sᵀ: S[j][e] = Sᵀ(v0 + g + 8(e ≥ 2), 32q + 8j + t2 + (e & 1)) = S(k, v)
  float S[4][4];
  const int kq = 32 * q;  // the quarter's first key column
#pragma unroll
  for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int v = v0 + g + 8 * (e >> 1), k = kq + 8 * j + t2 + (e & 1);
      S[j][e] = (active && k < K && from) ? from[sbase + static_cast<index_t>(k) * V + v] : 0.f;
    }
  // −Sᵀ (bf16) into Sx, and Sᵀ (bf16) to h as the state entering chunk c
  auto publish = [&](index_t c, bool write_h) {
    const at_chunk o(c, hv, HV, K, V);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int k = kq + 8 * j + t2;
      if (k >= K) break;
      const unsigned r0 = bf2(S[j][0], S[j][1]), r1 = bf2(S[j][2], S[j][3]);
      *reinterpret_cast<unsigned*>(Sx + g * lk + k) = r0 ^ 0x80008000u;
      *reinterpret_cast<unsigned*>(Sx + (g + 8) * lk + k) = r1 ^ 0x80008000u;
      if (write_h) {
        dtc_bf16* h0 = p.h + o.kv + static_cast<index_t>(v0 + g) * K + k;
        *reinterpret_cast<unsigned*>(h0) = r0, *reinterpret_cast<unsigned*>(h0 + 8 * K) = r1;
      }
    }
  };
  if (producer) {
#pragma unroll
    for (int u = 0; u < NS - 1; ++u) {
      if (c0 + u < c1) issue(u, 0), issue(u, 1);
      cp_async_commit();
    }
    cp_async_wait_group<NS - 2>();
  }
  if (c0 < c1 && active) publish(c0, true);
  __syncthreads();  // Sx holds −Sᵀ; chunk c0's buffer landed
  int slot = 0;     // chunk c's ring slot
  float eg = 1.f;   // e^{G_C} of chunk c (phase (3) reads it for phase (4))
  for (index_t c = c0; c < c1; ++c) {
    const int fill = slot == 0 ? NS - 1 : slot - 1;  // chunk c − 1's slot: every warp passed the barrier after reading it
    if (producer && c + NS - 1 < c1) issue(fill, 0);
    const unsigned char* b = smem_raw + static_cast<std::size_t>(slot) * L.per;
    if (active) {  // (3) the warp's chunk rows 16q … 16q + 15: Vnᵀ = Uᵀ − Sᵀ Wᵀ (even and odd k-steps in separate accumulators)
      const auto* Wc = reinterpret_cast<const dtc_bf16*>(b + L.Wb);
      const auto* Uc = reinterpret_cast<const float*>(b + L.Ub);
      unsigned a[KS][4], w4[KS][4];
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) {
        if (ks >= nks) break;
        ldsm_x4(a[ks], Sx + (lane & 15) * lk + 16 * ks + 8 * (lane >> 4));
        ldsm_x4(w4[ks], Wc + (16 * q + (lane & 7) + 8 * (lane >> 4)) * lk + 16 * ks + 8 * ((lane >> 3) & 1));
      }
      float A[2][2][4];
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const float2 u0 = *reinterpret_cast<const float2*>(Uc + g * ldu + 16 * q + 8 * j + t2);
        const float2 u1 = *reinterpret_cast<const float2*>(Uc + (g + 8) * ldu + 16 * q + 8 * j + t2);
        A[0][j][0] = u0.x, A[0][j][1] = u0.y, A[0][j][2] = u1.x, A[0][j][3] = u1.y;
#pragma unroll
        for (int e = 0; e < 4; ++e) A[1][j][e] = 0.f;
      }
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) {
        if (ks >= nks) break;
        const unsigned b0[2] = {w4[ks][0], w4[ks][1]}, b1[2] = {w4[ks][2], w4[ks][3]};
        mma_bf16_16816(A[ks & 1][0], a[ks], b0);
        mma_bf16_16816(A[ks & 1][1], a[ks], b1);
      }
      // FK: e^{G_C} for phase (4), read from the slot here (it landed before this chunk's first barrier) so
      // that the load and the exponential are not on phase (4)'s path to its first product
      if constexpr (FK) eg = __expf(reinterpret_cast<const float*>(b + L.Gs)[3]);
      const at_chunk o(c, hv, HV, K, V);
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int i = 16 * q + 8 * j + t2;
        const unsigned r0 = bf2(A[0][j][0] + A[1][j][0], A[0][j][1] + A[1][j][1]);
        const unsigned r1 = bf2(A[0][j][2] + A[1][j][2], A[0][j][3] + A[1][j][3]);
        *reinterpret_cast<unsigned*>(Vx + g * ldv16 + i) = r0;
        *reinterpret_cast<unsigned*>(Vx + (g + 8) * ldv16 + i) = r1;
        dtc_bf16* n0 = p.vn + o.cv + static_cast<index_t>(v0 + g) * C + i;
        *reinterpret_cast<unsigned*>(n0) = r0, *reinterpret_cast<unsigned*>(n0 + 8 * C) = r1;
      }
    }
    __syncthreads();  // Vx complete; every warp is done reading Sx
    if (producer) {
      if (c + NS - 1 < c1) issue(fill, 1);
      cp_async_commit();
    }
    if (active) {  // (4) Sᵀ ← e^{G_C} Sᵀ + Vnᵀ Kd on the warp's key columns
      const auto* Kc = reinterpret_cast<const dtc_bf16*>(b + L.Kb);
      unsigned a[C / 16][4], k4[C / 16][2][4];
#pragma unroll
      for (int cs = 0; cs < C / 16; ++cs) {
        ldsm_x4(a[cs], Vx + (lane & 15) * ldv16 + 16 * cs + 8 * (lane >> 4));
#pragma unroll
        for (int jp = 0; jp < 2; ++jp)
          if (kq + 16 * jp < K)
            ldsm_x4_trans(k4[cs][jp], Kc + (16 * cs + (lane & 7) + 8 * ((lane >> 3) & 1)) * lk + kq + 16 * jp + 8 * (lane >> 4));
      }
      if constexpr (!FK) eg = __expf(reinterpret_cast<const float*>(b + L.Gs)[3]);
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) S[j][e] *= eg;
#pragma unroll
      for (int cs = 0; cs < C / 16; ++cs)
#pragma unroll
        for (int jp = 0; jp < 2; ++jp) {
          if (kq + 16 * jp >= K) break;
          const unsigned b0[2] = {k4[cs][jp][0], k4[cs][jp][1]}, b1[2] = {k4[cs][jp][2], k4[cs][jp][3]};
          mma_bf16_16816(S[2 * jp], a[cs], b0);
          mma_bf16_16816(S[2 * jp + 1], a[cs], b1);
        }
      publish(c + 1, c + 1 < c1);
    }
    if (producer) cp_async_wait_group<NS - 2>();
    __syncthreads();  // Sx holds the new −Sᵀ; chunk c + 1's buffer landed; every warp is done reading Vx and chunk c's slot
    if (++slot == NS) slot = 0;
  }
  if (to && active)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int v = v0 + g + 8 * (e >> 1), k = kq + 8 * j + t2 + (e & 1);
        if (k < K) to[sbase + static_cast<index_t>(k) * V + v] = S[j][e];
      }
}

// --- 3. delta_tc_output_kernel -----------------------------------------------------------------------

struct delta_tc_output_smem {
  std::size_t recs, Qs, Hs, As, Vs, O, bytes;
  __host__ __device__ explicit delta_tc_output_smem(int K) {
    using namespace dtc_detail;
    recs = 0;
    Qs = up128(chunk_len * sizeof(chunk_record));
    Hs = Qs + up128(static_cast<std::size_t>(chunk_len) * ldb16(K) * sizeof(dtc_bf16));
    As = Hs + up128(static_cast<std::size_t>(dtc_out_tile) * ldb16(K) * sizeof(dtc_bf16));
    Vs = As + up128(static_cast<std::size_t>(chunk_len) * ldv16 * sizeof(dtc_bf16));
    O = Vs + up128(static_cast<std::size_t>(chunk_len) * ldv16 * sizeof(dtc_bf16));
    bytes = O + static_cast<std::size_t>(chunk_len) * (dtc_out_tile + 4) * sizeof(float);
  }
};

//! grid (max_chunks, HV, ⌈V / 64⌉), dtc_threads: (5).
template <class Dev>
__global__ void __launch_bounds__(dtc_threads) delta_tc_output_kernel(const delta_tc_params<Dev> p) {
  using namespace delta_detail;
  using namespace dtc_detail;
  constexpr int C = chunk_len, TV = dtc_out_tile, lo = dtc_out_tile + 4;
  const index_t c = p.chunk_lo + blockIdx.x;
  if (c >= p.rt.seg_chunk[p.S * p.P]) return;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const int K = p.K, V = p.V, lk = ldb16(K), k8 = K / 8;
  const delta_tc_output_smem L(K);
  auto* recs = reinterpret_cast<chunk_record*>(smem_raw + L.recs);
  auto* Qs = reinterpret_cast<dtc_bf16*>(smem_raw + L.Qs);  // [C][lk]
  auto* Hs = reinterpret_cast<dtc_bf16*>(smem_raw + L.Hs);  // [TV][lk]    Sᵀ rows (S read as col_major)
  auto* As = reinterpret_cast<dtc_bf16*>(smem_raw + L.As);  // [C][ldv16]
  auto* Vs = reinterpret_cast<dtc_bf16*>(smem_raw + L.Vs);  // [TV][ldv16] Vnᵀ rows (Vn read as col_major; C = TV)
  float* O = reinterpret_cast<float*>(smem_raw + L.O);      // [C][lo]
  const int tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
  const int j0 = static_cast<int>(blockIdx.z) * TV, n = min(TV, V - j0);
  const at_chunk o = begin_chunk(p, c, recs).o;
  for (int e = tid; e < C * k8; e += nt) {
    const int i = e / k8, a = (e % k8) * 8;
    cp_async16(Qs + i * lk + a, p.qg + o.ck + i * K + a);
  }
  for (int e = tid; e < n * k8; e += nt) {
    const int jj = e / k8, a = (e % k8) * 8;
    cp_async16(Hs + jj * lk + a, p.h + o.kv + static_cast<index_t>(j0 + jj) * K + a);
  }
  for (int e = tid; e < C * (C / 8); e += nt) {
    const int i = e / (C / 8), j = (e % (C / 8)) * 8;
    cp_async16(As + i * ldv16 + j, p.a + o.cc + i * C + j);
  }
  for (int e = tid; e < n * (C / 8); e += nt) {
    const int jj = e / (C / 8), i = (e % (C / 8)) * 8;
    cp_async16(Vs + jj * ldv16 + i, p.vn + o.cv + static_cast<index_t>(j0 + jj) * C + i);
  }
  cp_async_commit();
  cp_async_wait_all();
  __syncthreads();
  tile_mma2x<row_major_t, col_major_t, row_major_t, col_major_t>(O, lo, Qs, lk, Hs, lk, K, As, ldv16, Vs, ldv16, C, C, n);
  __syncthreads();
  // eight columns per piece (n is a multiple of 16): one 16-byte store of bf16 where o is 16-byte
  // aligned (else element by element), two float4 into the read slots' fp32 scratch
  const bool o16 = (reinterpret_cast<std::uintptr_t>(p.o) & 15u) == 0;
  for (int e = tid; e < C * (TV / 8); e += nt) {
    const int i = e / (TV / 8), jj = (e % (TV / 8)) * 8;
    const chunk_record& r = recs[i];
    if (!r.rd || jj >= n) continue;
    const float* x = O + i * lo + jj;
    if (p.R == 1) {
      Dev* dst = p.o + r.hv * V + j0 + jj;
      if (o16) *reinterpret_cast<uint4*>(dst) = pack8(x, 1.f);
      else
#pragma unroll
        for (int u = 0; u < 8; ++u) dst[u] = from_f32<Dev>(x[u]);
    } else {
      float* dst = p.o_part + (r.hv * p.R + r.slot) * V + j0 + jj;
      reinterpret_cast<float4*>(dst)[0] = reinterpret_cast<const float4*>(x)[0];
      reinterpret_cast<float4*>(dst)[1] = reinterpret_cast<const float4*>(x)[1];
    }
  }
}

// --- 4. delta_tc_rscan_kernel (backward) ---------------------------------------------------------------
//
// The backward's reverse scan (chunked_delta.cuh's kernel 4) for bf16 inputs on tensor cores: per
// chunk, walking the stream backwards with D = ∂L/∂S' of the chunk,
//   dVn = Aᵀ dO + Kd D,             Kd = diag(d) k,  d_i = e^{G_C − G_i}/‖k_i‖ (1 without l2norm)
//   D  ← e^{G_C} D + Qgᵀ dO − Wᵀ dVn, Qg = diag(s) q,  s_i = r_i e^{G_i}/‖q_i‖
// with the raw bf16 rows of q and k as exact operands (the row scales go to the other side: d onto
// the product's rows, s onto dO's rows), A, W (fp32, from the recomputation) and D, diag(s) dO, dVn
// rounded to bf16 as operands (one mma.sync m16n8k16 per product step), fp32 accumulators. Until
// session 21 these operands were split into hi + lo bf16 pairs (two or three products per step, each
// product term within about 1e-5 of fp32); the GPU tests' ratios against the exact path went from
// ~1e-4 to ≤ 0.004 (every gradient; fla's bar and the tests' is 0.005; ≤ 0.0035 with the gradient
// kernel's nine plain products of d524c1b), while the prep's products and three of the gradient
// kernel's stay split (all of them plain gave dg 0.0072: docs/benchmarks.md, "Issue 11, session 21"),
// and each chunk step lost two thirds of its products. The division is
// delta_tc_state_kernel's: one block per (16-column V tile, value head, stream), of 8 warps (16 with
// delta_tc_bscan_warps; 4 before session 13: the per-chunk step is latency-bound, and more warps
// shorten each warp's chain of products), D held in mma accumulator fragments for the whole stream
// (warp w: row tile w % 8 of K, both 8-column halves at 8 warps, half w / 8 at 16), the next
// chunk's W, A, q, k rows, dO tile and G, 1/‖k‖, s copied by cp.async (a ring of three buffers since
// session 28; the dO rows gathered by the tokens the prep wrote, dotok, and s_i = r_i e^{G_i}/‖q_i‖ the
// prep's too, svec: since session 29 the pass reads no record table) while this chunk computes. W, A and
// the q, k rows come from the bf16 copies delta_prep_kernel writes for this pass (delta_params::Wh, Ah, qh, kh: W and A
// rounded there exactly as this kernel rounded its fp32 copies before, the raw rows gathered and
// zeroed there), so every operand fragment is one ldmatrix (.trans for Aᵀ, Wᵀ, qᵀ and dO) and a chunk's
// copies are contiguous 16-byte pieces; before, the fp32 W and A were read transposed 32 bits at a
// time and rounded, and the q, k rows gathered per record (a third of the kernel's instructions:
// docs/benchmarks.md, "Issue 11, session 21"; the same bits either way). Writes what the exact
// kernel writes: D of each chunk (dbuf), the chunk's dO rows in fp32 (dO32), dVn, and the last D
// (∂L/∂h0).

namespace dtc_detail {
inline constexpr int lc16 = chunk_len + 8;  //!< bf16 [16][C] pitch (the transposed operands)

//! Two bf16 → one 32-bit mma operand register (the first in the low half).
__device__ __forceinline__ unsigned pack2(dtc_bf16 x0, dtc_bf16 x1) {
  return static_cast<unsigned>(__bfloat16_as_ushort(x0)) | (static_cast<unsigned>(__bfloat16_as_ushort(x1)) << 16);
}
__device__ __forceinline__ unsigned ld32(const dtc_bf16* x) { return *reinterpret_cast<const unsigned*>(x); }
//! Two B fragments [2][2] as the four registers of one ldmatrix.x4.
__device__ __forceinline__ unsigned (&as4(unsigned (&b)[2][2]))[4] { return *reinterpret_cast<unsigned(*)[4]>(&b[0][0]); }
//! x → bf16(x) (round to nearest even) at dst[at].
__device__ __forceinline__ void store_bf16(float x, dtc_bf16* dst, int at) { dst[at] = __float2bfloat16_rn(x); }
//! A thread's share of a block-wide copy of rows of `per_row` 16-byte pieces: piece `col` of rows
//! row0, row0 + rows, …; the threads past rows · per_row copy nothing (row0 = ∞), so no piece is
//! copied twice. Formed once per kernel; the copies of each chunk then only step a row pointer.
struct copy_map {
  int col, row0, rows;
  __device__ copy_map(int per_row, int tid, int nt) : col(tid % per_row), row0(tid / per_row), rows(nt / per_row) {
    if (row0 >= rows) row0 = 1 << 30;
  }
};

//! The backward scans' bf16 row pitch: ldb16 of chunk_max_k whatever K is, so that every shared
//! offset a row index makes is a compile-time constant (folded into the instructions' immediates).
inline constexpr int lbs = chunk_max_k + 8;

//! A cp.async of 16 bytes to a shared address already converted (smem_addr).
__device__ __forceinline__ void cp_async16_at(unsigned s, const void* gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
}

//! A thread's share of a block-wide copy of a chunk's C rows of PR 16-byte pieces each (row pitch G in
//! global, P in shared): piece tid % PR of rows tid / PR + n·RS, n < C / RS, RS = NT / PR — the row
//! steps compile-time constants, so each copy is one cp.async at an immediate shared offset and a
//! global pointer advanced by a fixed stride. Pieces at or past `width` elements copy nothing.
template <int NT, int PR, int P>
struct row_copy {
  static constexpr int RS = NT / PR, NR = chunk_len / RS;
  static_assert(NT % PR == 0 && chunk_len % RS == 0, "row_copy: the block's threads must tile the rows evenly");
  int col, row;
  bool on;
  __device__ row_copy(int tid, int width) : col(tid % PR), row(tid / PR), on(8 * (tid % PR) < width) {}
  //! rows of `src` ([C][gpitch] bf16, the chunk's first row) into the shared rows at `dst` (pitch P)
  __device__ __forceinline__ void operator()(unsigned dst, const dtc_bf16* src, index_t gpitch) const {
    if (!on) return;
    const dtc_bf16* g = src + static_cast<index_t>(row) * gpitch + 8 * col;
    const unsigned d = dst + static_cast<unsigned>((row * P + 8 * col) * sizeof(dtc_bf16));
    const index_t gs = RS * gpitch;
#pragma unroll
    for (int n = 0; n < NR; ++n) cp_async16_at(d + static_cast<unsigned>(n * RS * P * sizeof(dtc_bf16)), g + n * gs);
  }
};

//! at_chunk's offsets one chunk apart (the same value head): a scan moves an at_chunk from chunk to
//! chunk by them (moved), a 64-bit add per offset it uses, instead of forming it (multiplications) anew
//! for every chunk.
struct chunk_step {
  index_t ck, cv, cc, c, kv;
  __device__ chunk_step(int HV, int K, int V) {
    const index_t u = HV;
    ck = u * chunk_len * K, cv = u * chunk_len * V, cc = u * chunk_len * chunk_len, c = u * chunk_len;
    kv = u * static_cast<index_t>(K) * V;
  }
};
//! o moved n chunks (o's chunk + n).
__device__ __forceinline__ delta_detail::at_chunk moved(delta_detail::at_chunk o, const chunk_step& s, int n) {
  o.ck += n * s.ck, o.cv += n * s.cv, o.cc += n * s.cc, o.c += n * s.c, o.kv += n * s.kv;
  return o;
}

//! A backward scan's state tile in accumulator fragments (the warp's row tile t of K, 8-column halves
//! h0 … h0 + HH − 1; lane: g = lane / 4, t2 = 2 (lane % 4)) to `to` (fp32 [K, V], the tile's first column
//! at `to`), and as NEG ? −X : X in bf16 into `sm` (transposed, [16][lbs]), which the scan's next matrix
//! product reads.
template <bool NEG, int HH>
__device__ __forceinline__ void store_scan_state(const float (&X)[HH][4], float* to, int V, dtc_bf16* sm, int t, int h0, int g,
                                                 int t2) {
#pragma unroll
  for (int x = 0; x < HH; ++x)
#pragma unroll
    for (int e2 = 0; e2 < 2; ++e2) {
      const int a = 16 * t + g + 8 * e2, j = 8 * (h0 + x) + t2;
      const float x0 = X[x][2 * e2], x1 = X[x][2 * e2 + 1];
      *reinterpret_cast<float2*>(to + static_cast<index_t>(a) * V + j) = make_float2(x0, x1);
      store_bf16(NEG ? -x0 : x0, sm, j * lbs + a);
      store_bf16(NEG ? -x1 : x1, sm, (j + 1) * lbs + a);
    }
}

//! acc (one warp's 16 × 8 accumulator tile: rows i0 …, columns 8 hh …) += X Yᵀ over the K columns of
//! both: X [C][lbs] bf16 rows (A fragments by ldmatrix), Y [16][lbs] bf16 (B fragments: Y's rows 8 hh …
//! are the tile's columns). The reverse scan's k D (Y = Dh) and the states' pass's W S (Y = Sh, −S).
//! Two k-steps' B fragments by one ldmatrix (matrix m of lane l: Y's row 8 hh + l % 8, columns
//! k0 + 8m …, which are B's registers b0, b1 of step k0 and b0, b1 of step k0 + 16), one k-step at a
//! time with two 32-bit loads where K leaves a single one at the end; the k-steps in order.
__device__ __forceinline__ void kd_product(float (&acc)[4], const dtc_bf16* X, const dtc_bf16* Y, int i0, int hh, int K, int lane) {
  using x3_detail::mma_bf16_16816;
  const dtc_bf16* xrow = X + (i0 + (lane & 15)) * lbs + 8 * (lane >> 4);  // rows i0 + g (+ 8), columns + t2 (+ 8)
  const dtc_bf16* yrow = Y + (8 * hh + (lane & 7)) * lbs + 8 * (lane >> 3);
  int k0 = 0;
  for (; k0 + 32 <= K; k0 += 32) {
    unsigned xa[4], xb[4], yb[2][2];
    ldsm_x4(xa, xrow + k0);
    ldsm_x4(xb, xrow + k0 + 16);
    ldsm_x4(as4(yb), yrow + k0);
    mma_bf16_16816(acc, xa, yb[0]);
    mma_bf16_16816(acc, xb, yb[1]);
  }
  if (k0 < K) {
    const int g = lane >> 2, t2 = (lane & 3) * 2;
    unsigned xa[4];
    ldsm_x4(xa, xrow + k0);
    const dtc_bf16* y = Y + (8 * hh + g) * lbs + k0 + t2;
    const unsigned yb[2] = {ld32(y), ld32(y + 8)};
    mma_bf16_16816(acc, xa, yb);
  }
}
}  // namespace dtc_detail

struct delta_tc_rscan_smem {
  // one chunk's buffer (dtc_scan_stages of them): W, A, raw k and q rows, the dO tile, G, 1/‖k‖, s
  std::size_t Ws, As, Kr, Qr, dO, G, ki, sv, per;
  // single: D, diag(s) dO and −dVn in bf16 (transposed)
  std::size_t Dh, Sh, Nh, bytes;
  __host__ __device__ explicit delta_tc_rscan_smem(int K) {
    using namespace dtc_detail;
    const std::size_t C = chunk_len;
    Ws = 0;
    (void)K;  // rows at the pitch lbs of chunk_max_k
    As = Ws + up128(C * lbs * sizeof(dtc_bf16));
    Kr = As + up128(C * lc16 * sizeof(dtc_bf16));
    Qr = Kr + up128(C * lbs * sizeof(dtc_bf16));
    dO = Qr + up128(C * lbs * sizeof(dtc_bf16));
    G = dO + up128(C * ls16 * sizeof(dtc_bf16));
    ki = G + up128(C * sizeof(float));
    sv = ki + up128(C * sizeof(float));
    per = sv + up128(C * sizeof(float));
    const std::size_t tk = up128(static_cast<std::size_t>(dtc_scan_tile) * lbs * sizeof(dtc_bf16));
    const std::size_t tc = up128(static_cast<std::size_t>(dtc_scan_tile) * lc16 * sizeof(dtc_bf16));
    Dh = dtc_scan_stages * per, Sh = Dh + tk, Nh = Sh + tc;
    bytes = Nh + tc;
  }
};

//! grid (V / 16, HV, S·P), NW · 32 threads (NW = 8 or 16 warps: delta_tc_bscan_threads).
//! Warp map (the same accumulators, each summed in the same order, at either NW: the same bits):
//! the D update gives warp w row tile w % 8 of K and 16/NW of the tile's two 8-column halves
//! (from (w / 8)·16/NW); dVn gives warps 0–7 one (16-row tile w % 4, half w / 4) each; the
//! per-record dO work takes NW·32/64 threads per record, 16/(NW·32/64) columns each. FK: K is
//! chunk_max_k (p.K must be), a compile-time constant (the K-long loops unrolled whole); the same bits.
template <class Dev, int NW, bool FK = false>
__global__ void __launch_bounds__(NW * 32) delta_tc_rscan_kernel(const delta_params<Dev> p) {
  static_assert(std::is_same_v<Dev, dtc_bf16>, "linstate (cuda): the tensor-core delta kernels take bf16");
  static_assert((NW == 8 || NW == 16) && dtc_scan_tile == 16 && chunk_len == 64 && chunk_max_k == 128,
                "delta_tc_rscan_kernel's warp map assumes these sizes");
  using namespace delta_detail;
  using namespace dtc_detail;
  using x3_detail::mma_bf16_16816;
  constexpr int C = chunk_len, TS = dtc_scan_tile;
  constexpr int HH = 16 / NW;             // 8-column halves per warp in the D update (2 or 1)
  constexpr int NQ = NW * 32 / C, CQ = TS / NQ;  // dO rows: NQ threads per record, CQ columns each
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const int K = FK ? chunk_max_k : p.K, V = p.V, HV = p.HV, nkt = K / 16;
  constexpr int lb = lbs;
  const delta_tc_rscan_smem L(K);
  const int tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
  const int warp = uniform_warp_index(), lane = tid & 31, g = lane >> 2, t2 = (lane & 3) * 2;
  const int tD = warp & 7, hD = (warp >> 3) * HH;  // D update: row tile tD of K, halves hD … hD + HH − 1
  const bool ownD = tD < nkt;
  const int seg = static_cast<int>(blockIdx.z), hv = static_cast<int>(blockIdx.y);
  const int part = seg / p.S, s = seg % p.S;
  const int j0 = static_cast<int>(blockIdx.x) * TS;
  const index_t c0 = p.rt.seg_chunk[seg], c1 = p.rt.seg_chunk[seg + 1];
  const index_t sbase = ((static_cast<index_t>(s) * p.P + part) * HV + hv) * static_cast<index_t>(K) * V;
  auto at_buf = [&](int b, std::size_t off) { return smem_raw + static_cast<std::size_t>(b) * L.per + off; };
  auto* Dh = reinterpret_cast<dtc_bf16*>(smem_raw + L.Dh);  // [16][lb]  D (bf16), transposed
  auto* Sh = reinterpret_cast<dtc_bf16*>(smem_raw + L.Sh);  // [16][lc16] diag(s) dO (bf16), transposed
  auto* Nh = reinterpret_cast<dtc_bf16*>(smem_raw + L.Nh);  // [16][lc16] −dVn (bf16), transposed
  // chunk c's tiles into buffer b, one commit group; rows a record does not read are zeros (plain
  // stores, visible after the barrier that follows the wait). Each thread copies the same columns of the
  // same rows every chunk (row_copy / copy_map, formed once: no division or row arithmetic per chunk, which before
  // session 21 were a third of the kernel's instructions). No record table (since session 29): the prep
  // wrote each record's s_i and its dO row's token (svec, dotok); a dO-copying thread holds its row's
  // token of the chunk it issues next, loaded a step before (one row per thread: mo.rows ≥ C).
  const row_copy<NW * 32, chunk_max_k / 8, lbs> mw(tid, K);
  const row_copy<NW * 32, C / 8, lc16> ma(tid, C);
  const copy_map mo(TS / 8, tid, nt);
  const unsigned sbuf = smem_addr(smem_raw);
  const chunk_step step(HV, K, V);
  static_assert(TS / 8 * chunk_len <= NW * 32, "delta_tc_rscan_kernel: one dO row per copying thread");
  // chunk c's tiles (o: its offsets; tok: the token of this thread's dO row mo.row0) into buffer b
  auto issue = [&](const at_chunk& o, int tok, int b) {
    auto* dO = reinterpret_cast<dtc_bf16*>(at_buf(b, L.dO));
    const uint4 z{0u, 0u, 0u, 0u};
    {  // W, k and q rows: the prep's bf16 copies (k, q gathered and zeroed there), [C][K] each; A [C][C]
      const unsigned sb = sbuf + static_cast<unsigned>(static_cast<std::size_t>(b) * L.per);
      mw(sb + static_cast<unsigned>(L.Ws), p.Wh + o.ck, K);
      mw(sb + static_cast<unsigned>(L.Kr), p.kh + o.ck, K);
      mw(sb + static_cast<unsigned>(L.Qr), p.qh + o.ck, K);
      ma(sb + static_cast<unsigned>(L.As), p.Ah + o.cc, C);
    }
    if (mo.row0 < C) {
      const int i = mo.row0, jj = 8 * mo.col;
      if (tok >= 0) cp_async16(dO + i * ls16 + jj, p.dO + (static_cast<index_t>(tok) * HV + hv) * V + j0 + jj);
      else *reinterpret_cast<uint4*>(dO + i * ls16 + jj) = z;
    }
    if (tid < 3 * (C / 4)) {
      const int v = tid / (C / 4), q4 = (tid % (C / 4)) * 4;
      const float* from = v == 0 ? p.G : v == 1 ? p.kinv : p.svec;
      float* to = reinterpret_cast<float*>(at_buf(b, v == 0 ? L.G : v == 1 ? L.ki : L.sv));
      cp_async16(to + q4, from + o.c + q4);
    }
    cp_async_commit();
  };
  // D in accumulator fragments: warp w owns row tile tD of K and the halves hD + x (x < HH);
  // element e of a fragment: row 16 tD + g (+ 8 for e ≥ 2), column 8(hD + x) + t2 (+ 1 for odd e)
  float Dr[HH][4];
#pragma unroll
  for (int x = 0; x < HH; ++x)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int a = 16 * tD + g + 8 * (e >> 1), j = 8 * (hD + x) + t2 + (e & 1);
      Dr[x][e] = (ownD && p.dht) ? p.dht[sbase + static_cast<index_t>(a) * V + j0 + j] : 0.f;
    }
  // The ring: chunk c1 − 1 − n in buffer n % NB; chunk c's tiles are issued at barrier (Y) of chunk
  // c + NB − 1, one commit group per chunk (an empty one past c0), so that at chunk c the groups of the
  // NB − 2 chunks after it in the order may still be in flight. Two barriers per chunk (since session 28;
  // three before, the per-record work and D's stores between two of them): (X) → dVn and the per-record
  // work → (Y) → D's update and the stores of the D it forms → (X).
  constexpr int NB = dtc_scan_stages, AH = NB - 1;  // buffers; chunks issued ahead
  // D_c (∂L/∂S' of chunk c, in Dr): to dbuf, and in bf16 into Dh (transposed) for k D. Dh is read only by
  // the dVn phase, between barriers (X) and (Y), so D_{c−1} goes there right after the update that forms it.
  auto store_d = [&](index_t kv) {
    if (ownD) store_scan_state<false>(Dr, p.dbuf + kv + j0, V, Dh, tD, hD, g, t2);
  };
  // chunk c's offsets (o, moved a chunk back per step) and those of chunk c − AH (oa), whose tiles the step issues
  at_chunk o(c1 - 1, hv, HV, K, V);
  const bool copies_do = mo.row0 < C;
  auto token = [&](const at_chunk& x) { return p.dotok[x.c + mo.row0]; };  // this thread's dO row's token
  if (c0 < c1) store_d(o.kv);
#pragma unroll
  for (int n = 0; n < AH; ++n) {
    const at_chunk x = moved(o, step, -n);
    if (c1 - 1 - n >= c0) issue(x, copies_do ? token(x) : -1, n);
    else cp_async_commit();
  }
  int b = 0;  // chunk c's buffer
  at_chunk oa = moved(o, step, -AH);
  int tok_ahead = c1 - 1 - AH >= c0 && copies_do ? token(oa) : -1;  // chunk c − AH's, issued in the step of chunk c
  for (index_t c = c1 - 1; c >= c0; --c) {
    const int bn = b == 0 ? NB - 1 : b - 1;  // chunk c − AH's: chunk c + 1's, which every thread is done with after (X)
    cp_async_wait_group<NB - 2>();
    __syncthreads();  // (X) chunk c's tiles landed; Dh holds D_c; every thread is done with chunk c + 1
    const float* Gc = reinterpret_cast<const float*>(at_buf(b, L.G));
    const float* ki = reinterpret_cast<const float*>(at_buf(b, L.ki));
    const auto* dO = reinterpret_cast<const dtc_bf16*>(at_buf(b, L.dO));
    // dVn = Aᵀ dO + diag(d) (k D), d_i = e^{G_C − G_i}/‖k_i‖: rows 16(w % 4) … + 15, half w / 4; its
    // products are issued first, the per-record work below fills their latency, the epilogue follows
    const int i0 = 16 * (warp & 3), hh = warp >> 2;
    float a1[4] = {0.f, 0.f, 0.f, 0.f}, a2[4] = {0.f, 0.f, 0.f, 0.f};
    if (warp < 8) {
      const auto* As = reinterpret_cast<const dtc_bf16*>(at_buf(b, L.As));
      const auto* Kr = reinterpret_cast<const dtc_bf16*>(at_buf(b, L.Kr));
#pragma unroll
      for (int k0 = 0; k0 < C; k0 += 32) {  // Aᵀ(i, t) = A[t][i] by ldmatrix.trans (as qᵀ below), two k-steps
        unsigned ah[2][4], bo[2][2];
#pragma unroll
        for (int s2 = 0; s2 < 2; ++s2)
          ldsm_x4_trans(ah[s2], As + (k0 + 16 * s2 + (lane & 7) + 8 * (lane >> 4)) * lc16 + i0 + 8 * ((lane >> 3) & 1));
        // dO(t, j) [t rows: the inner index]: block l / 8 of lane l is rows k0 + 8(l / 8) …, columns 8 hh …:
        // bo[0] the first k-step's B fragment, bo[1] the second's
        ldsm_x4_trans(as4(bo), dO + (k0 + lane) * ls16 + 8 * hh);
        mma_bf16_16816(a1, ah[0], bo[0]);
        mma_bf16_16816(a1, ah[1], bo[1]);
      }
      kd_product(a2, Kr, Dh, i0, hh, K, lane);  // k D
    }
    {  // per record i (NQ threads, CQ columns each): s_i; the dO row to dO32 (fp32) and diag(s) dO in bf16
       // into Sh (transposed), read by the update after (Y)
      const int i = tid % C, q0 = (tid / C) * CQ;
      const float si = reinterpret_cast<const float*>(at_buf(b, L.sv))[i];  // r_i e^{G_i}/‖q_i‖ (the prep's)
      float x[CQ];
#pragma unroll
      for (int jj = 0; jj < CQ; ++jj) x[jj] = __bfloat162float(dO[i * ls16 + q0 + jj]);
      if (!p.dO32_by_grad) {  // (else the gradient kernels' dO role gathers dO32 itself)
        float* d32 = p.dO32 + o.cv + static_cast<index_t>(i) * V + j0 + q0;
        if constexpr (CQ == 4) *reinterpret_cast<float4*>(d32) = make_float4(x[0], x[1], x[2], x[3]);
        else *reinterpret_cast<float2*>(d32) = make_float2(x[0], x[1]);
      }
#pragma unroll
      for (int jj = 0; jj < CQ; ++jj) store_bf16(si * x[jj], Sh, (q0 + jj) * lc16 + i);
    }
    // the D update's A fragments (qᵀ and Wᵀ by ldmatrix.trans, as kᵀ in delta_tc_hstate_kernel) do not
    // depend on D: taken here, before (Y), so that after it only the tiles (Y) publishes (diag(s) dO,
    // −dVn) are read before the update's products (the same fragments and products: the same bits)
    unsigned qa[C / 16][4], wh[C / 16][4];
    if (ownD) {
      const auto* Ws = reinterpret_cast<const dtc_bf16*>(at_buf(b, L.Ws));
      const auto* Qr = reinterpret_cast<const dtc_bf16*>(at_buf(b, L.Qr));
#pragma unroll
      for (int ks = 0; ks < C / 16; ++ks) {
        const int at_t = (16 * ks + (lane & 7) + 8 * (lane >> 4)) * lb + 16 * tD + 8 * ((lane >> 3) & 1);
        ldsm_x4_trans(qa[ks], Qr + at_t);
        ldsm_x4_trans(wh[ks], Ws + at_t);
      }
    }
    if (warp < 8) {  // dVn's epilogue: to dVn (fp32) and −dVn in bf16 into Nh (transposed)
#pragma unroll
      for (int e2 = 0; e2 < 2; ++e2) {
        const int i = i0 + g + 8 * e2, j = 8 * hh + t2;
        const float di = __expf(Gc[C - 1] - Gc[i]) * ki[i];
        const float x0 = fmaf(di, a2[2 * e2], a1[2 * e2]), x1 = fmaf(di, a2[2 * e2 + 1], a1[2 * e2 + 1]);
        *reinterpret_cast<float2*>(p.dVn + o.cv + static_cast<index_t>(i) * V + j0 + j) = make_float2(x0, x1);
        store_bf16(-x0, Nh, j * lc16 + i);
        store_bf16(-x1, Nh, (j + 1) * lc16 + i);
      }
    }
    __syncthreads();  // (Y) −dVn and diag(s) dO complete
    if (c - AH >= c0) issue(oa, tok_ahead, bn);
    else cp_async_commit();
    if (c - AH - 1 >= c0 && copies_do) tok_ahead = token(moved(oa, step, -1));  // the next step's
    if (ownD) {  // D ← e^{G_C} D + qᵀ (diag(s) dO) − Wᵀ dVn on the warp's tile
      const float eg = __expf(Gc[C - 1]);
#pragma unroll
      for (int x = 0; x < HH; ++x)
#pragma unroll
        for (int e = 0; e < 4; ++e) Dr[x][e] *= eg;
#pragma unroll
      for (int k0 = 0; k0 < C; k0 += 16) {
        // qᵀ(a, i) = q[i][a] and Wᵀ(a, i) = W[i][a]: qa, wh (taken before (Y))
        unsigned sh[HH][2], nh[HH][2];
        if constexpr (HH == 2) {  // both halves' B fragments by one ldmatrix each: block l / 8 of lane l is
                                  // rows 8(hD + l / 16) …, columns k0 + 8((l / 8) % 2) …
          const int at_b = (8 * hD + (lane & 7) + 8 * (lane >> 4)) * lc16 + k0 + 8 * ((lane >> 3) & 1);
          ldsm_x4(as4(sh), Sh + at_b);
          ldsm_x4(as4(nh), Nh + at_b);
        } else {
          const int j = 8 * hD + g, i = k0 + t2;
          sh[0][0] = ld32(Sh + j * lc16 + i), sh[0][1] = ld32(Sh + j * lc16 + i + 8);
          nh[0][0] = ld32(Nh + j * lc16 + i), nh[0][1] = ld32(Nh + j * lc16 + i + 8);
        }
#pragma unroll
        for (int x = 0; x < HH; ++x) {
          mma_bf16_16816(Dr[x], qa[k0 / 16], sh[x]);
          mma_bf16_16816(Dr[x], wh[k0 / 16], nh[x]);
        }
      }
    }
    o = moved(o, step, -1), oa = moved(oa, step, -1);
    if (c > c0) store_d(o.kv);  // D_{c−1}: visible to the dVn phase after (X)
    b = b == NB - 1 ? 0 : b + 1;
  }
  if (p.dh0 && ownD) {
#pragma unroll
    for (int x = 0; x < HH; ++x)
#pragma unroll
      for (int e2 = 0; e2 < 2; ++e2) {
        const int a = 16 * tD + g + 8 * e2, j = 8 * (hD + x) + t2;
        *reinterpret_cast<float2*>(p.dh0 + sbase + static_cast<index_t>(a) * V + j0 + j) = make_float2(Dr[x][2 * e2], Dr[x][2 * e2 + 1]);
      }
  }
}

// --- 2b. delta_tc_hstate_kernel (the backward's recomputation of the states) ----------------------------
//
// delta_state_kernel's pass for the backward of bf16 inputs on tensor cores, plain bf16 operands as
// the reverse scan above: per chunk, with S [K, 16-column tile] entering it,
//   Vn = U − W S,   S ← e^{G_C} S + kᵀ (diag(d) Vn),   d_i = e^{G_C − G_i}/‖k_i‖ (1 without l2norm)
// W and U (fp32) from delta_prep_kernel, the raw bf16 rows of k as the exact operand, W, S and diag(d) Vn
// rounded to bf16 as operands (split into hi + lo pairs before session 21), fp32 accumulators; S held
// in accumulator fragments for the whole stream (the reverse scan's warp map: 8 or 16 warps), the next
// chunks' W, U tile, k rows, G and 1/‖k‖ copied by cp.async (the reverse scan's ring of dtc_scan_stages = 3
// buffers, each chunk issued two chunks ahead; W and the k rows from the prep's bf16 copies, as in the
// reverse scan: no record table here). Writes what the exact
// kernel writes for the backward: S entering each chunk (hbuf, fp32) and Vn (fp32); the final state
// only where state_out is set.

struct delta_tc_hstate_smem {
  std::size_t Ws, Ub, Kr, G, ki, per;  // one chunk's buffer (dtc_scan_stages of them)
  std::size_t Sh, Yh, bytes;           // single: −S and diag(d) Vn in bf16 (transposed)
  __host__ __device__ explicit delta_tc_hstate_smem(int K) {
    using namespace dtc_detail;
    const std::size_t C = chunk_len;
    Ws = 0;
    (void)K;  // rows at the pitch lbs of chunk_max_k
    Ub = Ws + up128(C * lbs * sizeof(dtc_bf16));
    Kr = Ub + up128(C * lst * sizeof(float));
    G = Kr + up128(C * lbs * sizeof(dtc_bf16));
    ki = G + up128(C * sizeof(float));
    per = ki + up128(C * sizeof(float));
    const std::size_t tk = up128(static_cast<std::size_t>(dtc_scan_tile) * lbs * sizeof(dtc_bf16));
    const std::size_t tc = up128(static_cast<std::size_t>(dtc_scan_tile) * lc16 * sizeof(dtc_bf16));
    Sh = dtc_scan_stages * per, Yh = Sh + tk;
    bytes = Yh + tc;
  }
};

//! grid (V / 16, HV, S·P), NW · 32 threads (NW = 8 or 16 warps; the warp map of delta_tc_rscan_kernel:
//! the S update as its D update, Vn as its dVn; FK as the reverse scan's).
template <class Dev, int NW, bool FK = false>
__global__ void __launch_bounds__(NW * 32) delta_tc_hstate_kernel(const delta_params<Dev> p) {
  static_assert(std::is_same_v<Dev, dtc_bf16>, "linstate (cuda): the tensor-core delta kernels take bf16");
  static_assert((NW == 8 || NW == 16) && dtc_scan_tile == 16 && chunk_len == 64 && chunk_max_k == 128,
                "delta_tc_hstate_kernel's warp map assumes these sizes");
  using namespace delta_detail;
  using namespace dtc_detail;
  using x3_detail::mma_bf16_16816;
  constexpr int C = chunk_len, TS = dtc_scan_tile;
  constexpr int HH = 16 / NW;  // 8-column halves per warp in the S update (2 or 1)
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const int K = FK ? chunk_max_k : p.K, V = p.V, HV = p.HV, nkt = K / 16;
  constexpr int lb = lbs;
  const delta_tc_hstate_smem L(K);
  const int tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
  const int warp = uniform_warp_index(), lane = tid & 31, g = lane >> 2, t2 = (lane & 3) * 2;
  const int tS = warp & 7, hS = (warp >> 3) * HH;  // S update: row tile tS of K, halves hS … hS + HH − 1
  const bool ownS = tS < nkt;
  const int seg = static_cast<int>(blockIdx.z), hv = static_cast<int>(blockIdx.y);
  const int part = seg / p.S, s = seg % p.S;
  const int j0 = static_cast<int>(blockIdx.x) * TS;
  const index_t c0 = p.rt.seg_chunk[seg], c1 = p.rt.seg_chunk[seg + 1];
  if (c0 == c1 && p.in_place) return;
  const index_t sbase = ((static_cast<index_t>(s) * p.P + part) * HV + hv) * static_cast<index_t>(K) * V;
  auto at_buf = [&](int b, std::size_t off) { return smem_raw + static_cast<std::size_t>(b) * L.per + off; };
  auto* Sh = reinterpret_cast<dtc_bf16*>(smem_raw + L.Sh);  // [16][lb]  −S (bf16), transposed
  auto* Yh = reinterpret_cast<dtc_bf16*>(smem_raw + L.Yh);  // [16][lc16] diag(d) Vn (bf16), transposed
  // no record table: the prep's bf16 copies of W and of the k rows (gathered and zeroed there) are [C][K]
  const row_copy<NW * 32, chunk_max_k / 8, lbs> mw(tid, K);  // as the reverse scan's
  const copy_map mu(TS / 4, tid, nt);
  const unsigned sbuf = smem_addr(smem_raw);
  const chunk_step step(HV, K, V);
  // chunk c's tiles (o: its offsets) into buffer b
  auto issue = [&](const at_chunk& o, int b) {
    auto* Ub = reinterpret_cast<float*>(at_buf(b, L.Ub));
    {
      const unsigned sb = sbuf + static_cast<unsigned>(static_cast<std::size_t>(b) * L.per);
      mw(sb + static_cast<unsigned>(L.Ws), p.Wh + o.ck, K);
      mw(sb + static_cast<unsigned>(L.Kr), p.kh + o.ck, K);
    }
    {
      const float* from = p.U + o.cv + j0 + 4 * mu.col;
      float* to = Ub + 4 * mu.col;
      for (int i = mu.row0; i < C; i += mu.rows) cp_async16(to + i * lst, from + static_cast<index_t>(i) * V);
    }
    if (tid < 2 * (C / 4)) {
      const int v = tid / (C / 4), q4 = (tid % (C / 4)) * 4;
      float* to = reinterpret_cast<float*>(at_buf(b, v == 0 ? L.G : L.ki));
      cp_async16(to + q4, (v == 0 ? p.G : p.kinv) + o.c + q4);
    }
    cp_async_commit();
  };
  // S in accumulator fragments (fragment layout and warp map as delta_tc_rscan_kernel's D)
  float Sr[HH][4];
#pragma unroll
  for (int x = 0; x < HH; ++x)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int a = 16 * tS + g + 8 * (e >> 1), j = 8 * (hS + x) + t2 + (e & 1);
      Sr[x][e] = (ownS && p.state_in) ? p.state_in[sbase + static_cast<index_t>(a) * V + j0 + j] : 0.f;
    }
  // the ring (as the reverse scan's, forward in c): chunk c0 + n in buffer n % NB, issued right after
  // barrier (X) of chunk c − AH, one commit group per chunk (an empty one past the last). Two barriers per
  // chunk (since session 28; three before, S's stores and d between two of them): (X) → Vn → (Y) → S's
  // update and the stores of the S it forms → (X).
  constexpr int NB = dtc_scan_stages, AH = NB - 1;
  // S entering chunk c (in Sr): to hbuf, and −S in bf16 into Sh (transposed), which only the Vn phase
  // reads (between (X) and (Y)), so S_{c+1} goes there right after the update that forms it
  auto store_s = [&](index_t kv) {
    if (ownS) store_scan_state<true>(Sr, p.hbuf + kv + j0, V, Sh, tS, hS, g, t2);
  };
  // chunk c's offsets (o, moved a chunk on per step) and those of chunk c + AH (oa), whose tiles the step issues
  at_chunk o(c0, hv, HV, K, V);
#pragma unroll
  for (int n = 0; n < AH; ++n) {
    if (c0 + n < c1) issue(moved(o, step, n), n);
    else cp_async_commit();
  }
  if (c0 < c1) store_s(o.kv);
  int b = 0;  // chunk c's buffer
  at_chunk oa = moved(o, step, AH);
  for (index_t c = c0; c < c1; ++c) {
    const int bn = b == 0 ? NB - 1 : b - 1;  // chunk c + AH's: chunk c − 1's, which every thread is done with after (X)
    cp_async_wait_group<NB - 2>();
    __syncthreads();  // (X) chunk c's tiles landed; Sh holds −S_c; every thread is done with chunk c − 1
    if (c + AH < c1) issue(oa, bn);
    else cp_async_commit();
    const float* Gc = reinterpret_cast<const float*>(at_buf(b, L.G));
    if (warp < 8) {  // Vn = U − W S: rows 16(w % 4) … + 15, half w / 4
      const auto* Ws = reinterpret_cast<const dtc_bf16*>(at_buf(b, L.Ws));
      const auto* Ub = reinterpret_cast<const float*>(at_buf(b, L.Ub));
      const int i0 = 16 * (warp & 3), hh = warp >> 2;
      float acc[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[e] = Ub[(i0 + g + 8 * (e >> 1)) * lst + 8 * hh + t2 + (e & 1)];
      kd_product(acc, Ws, Sh, i0, hh, K, lane);  // W (−S)
      const float* ki = reinterpret_cast<const float*>(at_buf(b, L.ki));
#pragma unroll
      for (int e2 = 0; e2 < 2; ++e2) {
        const int i = i0 + g + 8 * e2, j = 8 * hh + t2;
        const float di = __expf(Gc[C - 1] - Gc[i]) * ki[i];  // d_i = e^{G_C − G_i}/‖k_i‖
        const float x0 = acc[2 * e2], x1 = acc[2 * e2 + 1];
        *reinterpret_cast<float2*>(p.Vn + o.cv + static_cast<index_t>(i) * V + j0 + j) = make_float2(x0, x1);
        store_bf16(di * x0, Yh, j * lc16 + i);
        store_bf16(di * x1, Yh, (j + 1) * lc16 + i);
      }
    }
    // the S update's A fragments, kᵀ(a, i) = k[i][a] (rows 16 tS …, by ldmatrix.trans: matrix l / 8 of lane
    // l is its row l % 8 of the 8 × 8 block at +8 records if bit 1, +8 keys if bit 0), do not depend on S:
    // taken here, before (Y), so that after it only diag(d) Vn is read before the update's products (the
    // same fragments and products: the same bits)
    unsigned ka[C / 16][4];
    if (ownS) {
      const auto* Kr = reinterpret_cast<const dtc_bf16*>(at_buf(b, L.Kr));
#pragma unroll
      for (int ks = 0; ks < C / 16; ++ks)
        ldsm_x4_trans(ka[ks], Kr + (16 * ks + (lane & 7) + 8 * (lane >> 4)) * lb + 16 * tS + 8 * ((lane >> 3) & 1));
    }
    __syncthreads();  // (Y) diag(d) Vn complete
    if (ownS) {  // S ← e^{G_C} S + kᵀ (diag(d) Vn) on the warp's tile
      const float eg = __expf(Gc[C - 1]);
#pragma unroll
      for (int x = 0; x < HH; ++x)
#pragma unroll
        for (int e = 0; e < 4; ++e) Sr[x][e] *= eg;
#pragma unroll
      for (int k0 = 0; k0 < C; k0 += 16) {
        unsigned yh[HH][2];
        if constexpr (HH == 2) {  // both halves' B fragments by one ldmatrix (as the reverse scan's Sh, Nh)
          ldsm_x4(as4(yh), Yh + (8 * hS + (lane & 7) + 8 * (lane >> 4)) * lc16 + k0 + 8 * ((lane >> 3) & 1));
        } else {
          const int j = 8 * hS + g, i = k0 + t2;
          yh[0][0] = ld32(Yh + j * lc16 + i), yh[0][1] = ld32(Yh + j * lc16 + i + 8);
        }
#pragma unroll
        for (int x = 0; x < HH; ++x) mma_bf16_16816(Sr[x], ka[k0 / 16], yh[x]);
      }
    }
    o = moved(o, step, 1), oa = moved(oa, step, 1);
    if (c + 1 < c1) store_s(o.kv);  // S_{c+1}: visible to the Vn phase after (X)
    b = b == NB - 1 ? 0 : b + 1;
  }
  if (p.state_out && ownS) {
#pragma unroll
    for (int x = 0; x < HH; ++x)
#pragma unroll
      for (int e2 = 0; e2 < 2; ++e2) {
        const int a = 16 * tS + g + 8 * e2, j = 8 * (hS + x) + t2;
        *reinterpret_cast<float2*>(p.state_out + sbase + static_cast<index_t>(a) * V + j0 + j) =
            make_float2(Sr[x][2 * e2], Sr[x][2 * e2 + 1]);
      }
  }
}

// --- host side ---------------------------------------------------------------------------------------

//! Whether the tensor-core forward takes this problem (else chunked_delta.cuh's exact kernels).
template <class Dev>
bool delta_tc_supported(const delta_params<Dev>& p) {
  if constexpr (!std::is_same_v<Dev, dtc_bf16>) {
    (void)p;
    return false;
  } else {
    auto al = [](const void* x) { return reinterpret_cast<std::uintptr_t>(x) % 16 == 0; };
    return p.K <= chunk_max_k && p.K % 16 == 0 && p.V % 16 == 0 && al(p.main.q) && al(p.main.k) && al(p.v) && al(p.shr.q) &&
           al(p.shr.k);
  }
}

//! Into how many pieces the tensor-core forward's chunks are cut when forced (> 0: tests and
//! bench_cuda --pieces); 0: the library's choice (delta_tc_pipeline). Not thread-safe to change while
//! another thread enqueues a call.
inline int delta_tc_pieces_forced = 0;

//! Chunks per stream from which the forward is cut into 2, 3 and 5 pieces (delta_tc_pipeline). The third
//! step was 768 until session 32; with that session's faster prep 3 pieces beat 5 at 1024 chunks a stream
//! (T = 65536 at B = 1, H = 8 on an H100: 1.759–1.765 against 1.785–1.786 ms, 4 pieces 1.775–1.779), so 5
//! now start at 2048 (T = 131072 there), a length no call has measured.
inline constexpr index_t delta_tc_piece_steps[3] = {192, 384, 2048};

//! Whether a forward of `chunks` chunks over `streams` streams may be pipelined (forward.cuh then
//! provides a carry in scratch where the call writes no final state).
inline bool delta_tc_pipeline_possible(index_t chunks, index_t streams) {
  return delta_tc_pieces_forced > 0 || (streams > 0 && chunks / streams >= delta_tc_piece_steps[0]);
}

//! Into how many pieces the tensor-core forward is pipelined: the prep of piece i + 1 runs beside the
//! state pass over piece i, and the output of piece i beside the pass over piece i + 1. Only where the
//! state kernel leaves room beside it (`room`: its blocks ≤ half the SMs), by the chunks per stream
//! (H200, GDN at B = 1, H = 8, K = V = 128, docs/benchmarks.md "Issue 11, session 11": best at 1 piece
//! up to T = 8192, 2 at 16384, 3–4 at 32768, 4–6 at 65536; tapered pieces, the first and last half as
//! long, were no better; session 32, H100, with the faster prep: 2–3 at 32768, 3 at 65536). Every piece
//! holds at least one chunk.
inline int delta_tc_pipeline(index_t chunks, index_t streams, bool room) {
  if (chunks <= 0 || streams <= 0) return 1;
  index_t n = 1;
  if (delta_tc_pieces_forced > 0) n = delta_tc_pieces_forced;
  else if (room) {
    const index_t per = chunks / streams;
    const index_t* at = delta_tc_piece_steps;
    n = per < at[0] ? 1 : per < at[1] ? 2 : per < at[2] ? 3 : 5;
  }
  return static_cast<int>(n < chunks ? n : chunks);
}

//! The chunked delta-rule forward: the tensor-core kernels above where they apply, else the exact ones.
template <class D, class Dev>
void enqueue_delta_forward(const delta_params<Dev>& p, cudaStream_t stream, const char* api) {
  if constexpr (std::is_same_v<Dev, dtc_bf16>) {
    if (delta_tc_supported(p)) {
      static const bool once = [api] {
        const int k = chunk_max_k;
        auto set = [api](const void* f, std::size_t bytes, const char* name) {
          check(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)), name, api);
        };
        set(reinterpret_cast<const void*>(delta_tc_prep_kernel<D, Dev>), delta_tc_prep_smem(k).bytes,
            "cudaFuncSetAttribute(delta_tc_prep_kernel)");
        set(reinterpret_cast<const void*>(delta_tc_state_kernel<Dev>), delta_tc_state_smem(k).bytes,
            "cudaFuncSetAttribute(delta_tc_state_kernel)");
        set(reinterpret_cast<const void*>(delta_tc_state_kernel<Dev, true>), delta_tc_state_smem(k).bytes,
            "cudaFuncSetAttribute(delta_tc_state_kernel)");
        set(reinterpret_cast<const void*>(delta_tc_output_kernel<Dev>), delta_tc_output_smem(k).bytes,
            "cudaFuncSetAttribute(delta_tc_output_kernel)");
        return true;
      }();
      (void)once;
      delta_tc_params<Dev> t;
      static_cast<delta_params<Dev>&>(t) = p;
      t.qg = reinterpret_cast<dtc_bf16*>(p.qn), t.kd = reinterpret_cast<dtc_bf16*>(p.kn);
      t.w = reinterpret_cast<dtc_bf16*>(p.W), t.a = reinterpret_cast<dtc_bf16*>(p.A);
      t.vn = reinterpret_cast<dtc_bf16*>(p.Vn), t.h = reinterpret_cast<dtc_bf16*>(p.hbuf);
      const index_t chunks = p.rt.max_chunks;
      const dim3 grid(static_cast<unsigned>(p.V / 16), static_cast<unsigned>(p.HV), static_cast<unsigned>(p.S * p.P));
      const unsigned vt = static_cast<unsigned>((p.V + dtc_out_tile - 1) / dtc_out_tile);
      auto prep = [&](index_t lo, index_t hi, cudaStream_t st) {
        t.chunk_lo = lo, t.chunk_hi = hi;
        delta_tc_prep_kernel<D, Dev><<<dim3(static_cast<unsigned>(hi - lo), static_cast<unsigned>(p.HV)), dtc_threads,
                                       delta_tc_prep_smem(p.K).bytes, st>>>(t);
        check_launch("delta_tc_prep_kernel", api);
      };
      // pipelined where the state kernel leaves room beside it (its blocks ≤ half the SMs: 64 at B = 1,
      // H = 8, V = 128; SSE-GDN n4k1s, 320 blocks, ran 2.09 → 2.13 ms at T = 32768 in 4 pieces)
      const bool room = side_stream::leaves_room(static_cast<index_t>(grid.x) * grid.y * grid.z, api);
      // the compile-time-K instance where K = chunk_max_k and the grid leaves room: with a grid of more
      // blocks than SMs (SSE-GDN n4k1s at B = 1, H = 8: 320) it ran 570 → 640 µs at T = 32768 against the
      // run-time-K instance (H100, ncu: L2 hit rate 83.5 → 81–82 %, DRAM reads +18 %; the cause not found),
      // where GDN's 64 blocks ran 167 → 155 µs a piece (docs/benchmarks.md, "Issue 11, session 32")
      const bool fk = p.K == chunk_max_k && room;
      auto state = [&](index_t lo, index_t hi, cudaStream_t st) {
        t.chunk_lo = lo, t.chunk_hi = hi;
        if (fk) delta_tc_state_kernel<Dev, true><<<grid, dtc_state_threads, delta_tc_state_smem(p.K).bytes, st>>>(t);
        else delta_tc_state_kernel<Dev><<<grid, dtc_state_threads, delta_tc_state_smem(p.K).bytes, st>>>(t);
        check_launch("delta_tc_state_kernel", api);
      };
      auto output = [&](index_t lo, index_t hi, cudaStream_t st) {
        t.chunk_lo = lo, t.chunk_hi = hi;
        delta_tc_output_kernel<Dev><<<dim3(static_cast<unsigned>(hi - lo), static_cast<unsigned>(p.HV), vt), dtc_threads,
                                      delta_tc_output_smem(p.K).bytes, st>>>(t);
        check_launch("delta_tc_output_kernel", api);
      };
      const int pieces = p.carry || p.state_out ? delta_tc_pipeline(chunks, static_cast<index_t>(p.S) * p.P, room) : 1;
      if (pieces <= 1) {
        if (chunks > 0) prep(0, chunks, stream);
        state(0, chunks, stream);
        if (chunks > 0) output(0, chunks, stream);
      } else {
        // pipelined: the prep of piece i + 1 runs beside the state pass over piece i (on the side
        // stream, which waits for piece i's prep), and the output of piece i beside the state pass
        // over piece i + 1; the state crosses from piece to piece through t.carry (fp32, the same
        // bits as one pass: the state kernel stores and reloads the values it holds)
        if (!t.carry) t.carry = p.state_out;
        side_stream::fork f(stream, api);
        auto bound = [&](int i) { return chunks * i / pieces; };
        for (int i = 0; i < pieces; ++i) {
          prep(bound(i), bound(i + 1), stream);
          f.hand_off(static_cast<std::size_t>(i), stream, f.side());
          state(bound(i), bound(i + 1), f.side());
        }
        for (int i = 0; i < pieces; ++i) {
          f.hand_off(static_cast<std::size_t>(pieces + i), f.side(), stream);
          output(bound(i), bound(i + 1), stream);
        }
        f.join();
      }
      return;
    }
  }
  enqueue_chunked_delta<D>(p, stream, api);
}

//! Whether the tensor-core reverse scan takes this backward: delta_tc_supported's shapes and
//! alignment, dO 16-byte aligned (its rows are gathered by cp.async), and the bf16 copies the prep
//! writes for the two scans bound (bind_delta_buffers, delta_bf16_copies).
template <class Dev>
bool delta_tc_rscan_supported(const delta_params<Dev>& p) {
  return delta_tc_supported(p) && reinterpret_cast<std::uintptr_t>(p.dO) % 16 == 0 && p.Wh && p.Ah && p.kh && p.qh && p.svec && p.dotok;
}

//! Warps per block of the backward's two sequential passes (delta_tc_hstate_kernel,
//! delta_tc_rscan_kernel): 8 or 16 (the same bits either way); tests and bench_cuda --bscan-warps
//! change it. Not thread-safe to change while another thread enqueues a call.
inline int delta_tc_bscan_warps = 8;

//! The states entering each chunk and the reverse scan at NW warps per block, side by side where both
//! grids fit (p: the backward's parameters; fwd: the same without state_out); there the gradient
//! kernels' dO role (enqueue_delta_dO_role) follows the states' pass on the side stream, beside the
//! reverse scan, which then leaves dO32 to it. Returns whether the dO role ran. FK: K == chunk_max_k
//! (the kernels' K a compile-time constant).
template <int NW, bool FK, class Dev>
bool enqueue_delta_tc_bscans(const delta_params<Dev>& p, const delta_params<Dev>& fwd, cudaStream_t stream, const char* api) {
  static const bool once = [api] {
    check(cudaFuncSetAttribute(reinterpret_cast<const void*>(delta_tc_rscan_kernel<Dev, NW, FK>),
                               cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(delta_tc_rscan_smem(chunk_max_k).bytes)),
          "cudaFuncSetAttribute(delta_tc_rscan_kernel)", api);
    check(cudaFuncSetAttribute(reinterpret_cast<const void*>(delta_tc_hstate_kernel<Dev, NW, FK>),
                               cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(delta_tc_hstate_smem(chunk_max_k).bytes)),
          "cudaFuncSetAttribute(delta_tc_hstate_kernel)", api);
    return true;
  }();
  (void)once;
  // the states and the reverse scan read only the prep's buffers and write disjoint ones (hbuf, Vn;
  // dbuf, dVn, dh0): side by side on two streams where both grids fit (64 + 64 blocks at B = 1,
  // H = 8, V = 128: GDN forward + backward 11.98 → 9.82 ms at T = 32768)
  const dim3 grid(static_cast<unsigned>(p.V / dtc_scan_tile), static_cast<unsigned>(p.HV), static_cast<unsigned>(p.S * p.P));
  std::optional<side_stream::fork> f;
  if (delta_passes_side_by_side(static_cast<index_t>(grid.x) * grid.y * grid.z, api)) f.emplace(stream, api);
  delta_tc_hstate_kernel<Dev, NW, FK><<<grid, NW * 32, delta_tc_hstate_smem(p.K).bytes, f ? f->side() : stream>>>(fwd);
  check_launch("delta_tc_hstate_kernel", api);
  // side by side: the gradient kernels' dO role (dA = dO Vnᵀ, dQg = dO Sᵀ; S and Vn from the states'
  // pass, dO gathered by the role itself) after the states' pass on the side stream, on the SMs it
  // leaves while the reverse scan runs (H200, GDN at T = 32768: forward + backward 5.53 → 5.48 ms,
  // session 27). Not where the scans run one after the other: there its own launch after them cost
  // SSE-GDN n4k1s 3.6 % (12.06 against 11.64 ms), and it stays the third role of kernel 5a's launch.
  delta_params<Dev> r = p;
  r.dO32_by_grad = f.has_value();
  if (f) {
    // its blocks ask for enough shared memory that none shares an SM with a reverse-scan block (whose
    // chunk-to-chunk latency is the backward's critical path), where the two would fit together
    int per_sm = 0, dev = 0;
    check(cudaGetDevice(&dev), "cudaGetDevice", api);
    check(cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev),
          "cudaDeviceGetAttribute(cudaDevAttrMaxSharedMemoryPerMultiprocessor)", api);
    const std::size_t own = delta_gprod_smem(p.K).bytes, scan = delta_tc_rscan_smem(p.K).bytes, reserved = 1024;
    const std::size_t apart =
        static_cast<std::size_t>(per_sm) > scan + 2 * reserved ? static_cast<std::size_t>(per_sm) - scan - 2 * reserved + 16 : 0;
    enqueue_delta_dO_role(r, std::max(own, std::min(apart, delta_gprod_smem_ceiling)), f->side(), api);
  }
  delta_tc_rscan_kernel<Dev, NW, FK><<<grid, NW * 32, delta_tc_rscan_smem(p.K).bytes, stream>>>(r);
  check_launch("delta_tc_rscan_kernel", api);
  if (f) f->join();
  return r.dO32_by_grad;
}

//! The chunked delta-rule backward: the recomputation (delta_prep_kernel, then the entering states),
//! the reverse scan and the gradient kernel; for bf16 inputs where delta_tc_rscan_supported the
//! states and the reverse scan run on tensor cores (delta_tc_hstate_kernel, delta_tc_rscan_kernel),
//! else chunked_delta.cuh's exact kernels.
template <class D, class Dev>
void enqueue_delta_backward(const delta_params<Dev>& p, cudaStream_t stream, const char* api) {
  if constexpr (std::is_same_v<Dev, dtc_bf16>) {
    if (delta_tc_rscan_supported(p)) {
      delta_params<Dev> fwd = p;
      fwd.state_out = nullptr, fwd.in_place = false;
      enqueue_delta_prep<D>(fwd, stream, api);
      // at 8 warps the kernels for K = chunk_max_k (the common K = 128) with K a compile-time constant
      const bool dO_role_done = delta_tc_bscan_warps == 16 ? enqueue_delta_tc_bscans<16, false>(p, fwd, stream, api)
                                : p.K == chunk_max_k      ? enqueue_delta_tc_bscans<8, true>(p, fwd, stream, api)
                                                          : enqueue_delta_tc_bscans<8, false>(p, fwd, stream, api);
      enqueue_delta_grad<D>(p, stream, api, dO_role_done);
      return;
    }
  }
  enqueue_chunked_delta_backward<D>(p, stream, api);
}

}  // namespace linstate::cuda_detail
