// linstate/cuda/kernels/chunked_delta.cuh — the chunk-parallel delta family (the gated delta rule)
// on the GPU, forward and backward (SPEC §3.2, the WY form; the per-token log-decay and β̃ from the
// policy's D::log_decay and D::write_strength, l2 normalisation by its l2norm_qk trait), over the record table of kernels/records.cuh; the GPU
// counterpart of the CPU's run_chunked_delta / run_chunked_delta_backward (backend/cpu/kernels.hpp,
// chunked_delta_backward.hpp), with the same notation.
//
// Per chunk of C = 64 records of a (sequence, partition) stream, with entering state S [K,V]:
//   Q [C,K]  rows r_i·q̂_i on reading records (r = scale × read weight), 0 elsewhere
//   K̂ [C,K]  rows k̂_i on writing records, 0 elsewhere       (q̂, k̂: l2norm(x) = x/√(Σx²+1e-6), or x)
//   b [C]    β̃_i = β_i·(write weight) on writing records, 0 elsewhere
//   G [C]    inclusive cumulative log-decay over the writing records (a record that does not write adds 0),
//            of the floored gates max(g, −104) (detail::chunked_log_decay_floor; dg = 0 below it)
//   Γ_ij = e^{G_i − G_j} (j ≤ i: every exponent ≤ 0)
//   T = (I + strict_lower(diag(b) K̂K̂ᵀ ⊙ Γ))⁻¹ (unit lower triangular)
//   [U | W] = T [diag(b) V | diag(b e^{G}) K̂],   Vn = U − W S
//   A = lower_incl(Q K̂ᵀ ⊙ Γ),   O = diag(e^{G}) Q S + A Vn
//   S' = e^{G_C} S + (diag(e^{G_C − G}) K̂)ᵀ Vn
// Forward, three kernels:
//   1. delta_prep_kernel   (per chunk, value head): k̂, q̂, b, G, T, A, W, U — everything that does not
//      depend on the state — into per-chunk buffers; two blocks per SM (≈ 105 KB of shared memory at
//      K = 128), the gathered k, q, v rows by 16-byte loads where the inputs allow; in the backward of
//      bf16 inputs also bf16 copies of W, A and the raw k, q rows (delta_params::Wh, Ah, kh, qh) for the
//      two tensor-core scans of chunked_delta_tc.cuh (session 23);
//   2. delta_state_kernel  (per stream, value head, 16-column V tile; sequential over the stream's
//      chunks): stores S entering each chunk, Vn = U − W S, S ← S' ; the last S is the final state;
//   3. delta_output_kernel (per chunk, value head, 64-column V tile): O = diag(e^G) Q S + A Vn.
// Backward (the adjoint, formulas at the top of chunked_delta_backward.hpp; D = ∂L/∂S' of a chunk):
//   kernels 1–2 again (the entering states), then
//   4. delta_rscan_kernel  (per stream, value head, V tile; sequential backwards): stores D of each
//      chunk and the chunk's dO rows, dVn = Aᵀ dO + diag(e^{G_C−G}) K̂ D, and walks
//      D ← e^{G_C} D + (diag(e^G) Q)ᵀ dO − Wᵀ dVn; the last D is ∂L/∂h0;
//   5a. delta_grad_products_kernel (per chunk, value head and one of three roles; 8 warps, two blocks
//      per SM; since session 25): the gradients' V-long products — dK̂ = Vn Dᵀ, dA = dO Vnᵀ, dQg = dO Sᵀ,
//      dB_U = Tᵀ dVn, −dB_W = dB_U Sᵀ, dB_U Uᵀ — into the chunk's workspace (delta_ws). Those products
//      (gemm_abt_staged) stage slabs (16 fp32 columns; for bf16 inputs 32 columns split once into bf16
//      hi / lo halves) with the next slab's float4 loads in flight while the current one is multiplied;
//   5b. delta_grad_kernel   (per chunk, value head; 16 warps, one block per SM at ≈ 217 KiB of shared
//      memory): from them and the [C, C] / [C, K] products, every gradient of the chunk — q, k, v, β,
//      g and the router weights — into the per-slot partials of backward.cuh's contract (Z = 1), or,
//      for a gradient with one slot (backward.cuh's single_slot_gradients), into the user's tensor
//      itself (dq_out … dbeta_out, rounded once from the same fp32 value; the combine pass skips it).
//      For bf16 inputs, since
//      session 21, nine of its twelve products take plain bf16 operands (one mma per k-step: dQg = dO Sᵀ,
//      dQ = P K̂, dK += Pᵀ Q, −dB_W = dB_U Sᵀ, dB_U Uᵀ, −dB_W Wᵀ, K̂K̂ᵀ, dK += dM K̂, dK += dMᵀ K̂); the
//      three whose plain form moved a gradient most in the probes (dK̂ = Vn Dᵀ: dg 0.0045; dA = dO Vnᵀ;
//      dB_U = Tᵀ dVn: dβ 0.0048) stay split, as do the prep's (kernel 1): with the nine plain the
//      GPU tests' ratios are ≤ 0.0035 (docs/benchmarks.md, "Issue 11, session 21").
//      For bf16 inputs with K % 16 == 0 (since session 26) delta_grad_bf16_kernel does 5b instead: 8 warps
//      and ≈ 105 KiB of shared memory at K = 128, two blocks per SM (K̂ and Q kept as the bf16 operands
//      the plain products take, dQ in mma accumulators; its comment has the layout).
// All arithmetic is fp32 (the buffers, the WY solve, the sequential kernels' own row/column dot
// products): the WY solve is sensitive to rounding, and this path is about exactness first. The
// per-chunk products of kernels 1, 3 and 5 (tile_mma_f32, gemm_abt_staged) are exact fp32 on the CUDA
// cores (tile_mma<float>) for fp32 and fp16 inputs; for bf16 inputs they run on tensor cores in the
// split-bf16 form of tile_mma.cuh (tile_mma_x3: three bf16 products per fp32 product, each term within
// about 1e-5 of fp32), where M, N and the inner size are multiples of 16. For bf16 inputs the forward
// runs on tensor cores in plain bf16 instead (chunked_delta_tc.cuh); the backward runs here except
// its two sequential passes (kernels 2 and 4), which for bf16 run on tensor cores there
// (delta_tc_hstate_kernel, delta_tc_rscan_kernel; plain bf16 operands since session 21, split-bf16 before).
// Measured before the split-bf16 products (H200, bf16, B = 1, H = 8, K = V = 128, T = 32768; ncu): the
// backward's recomputation prep 3.79 ms + state 4.43 ms, reverse scan 8.40 ms, gradient kernel 15.65 ms;
// bench_cuda forward + backward 35.0 ms; the figures since: docs/benchmarks.md, "Issue 11, session 7"
// and later ones (session 9: the backward's prep 3.19 → 1.10 ms, gradient kernel 11.6 → 4.06 ms,
// bench_cuda GDN forward + backward 22.6 → 13.2 ms).
//
// Scratch (fp32, per chunk and value head): k̂, q̂, W [C,K]; U, Vn [C,V]; T, A [C,C]; G, b, 1/‖k‖,
// 1/‖q‖ [C]; S [K,V]; the backward adds D [K,V], dO, dVn [C,V] and a workspace [C, 3K + V + 2C] (the
// products of kernel 5a that kernel 5b reads: delta_ws), and for bf16 inputs the bf16
// copies W, k, q [C,K] and A [C,C] (delta_bf16_copies).
// Requirements (delta_chunked_supported): K ≤ 128, K and V multiples of 4 (tile_mma's fp32 tiles and
// the float4 staging); other shapes run the recurrent kernels.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <type_traits>

#include "../detail/side_stream.cuh"
#include "chunked_backward.cuh"

namespace linstate::cuda_detail {

inline constexpr int delta_threads = 256;
inline constexpr int delta_scan_tile = 16;  //!< V columns per block of the sequential kernels 2 and 4
inline constexpr int delta_out_tile = 64;   //!< V columns per block of the output kernel
inline constexpr int delta_grad_threads = 512;  //!< gradient kernel: 16 warps (one block per SM: latency hiding)

template <class Dev>
struct delta_params : chunk_bwd_params<Dev> {
  bool l2norm = false;
  // one piece of a pipelined forward (chunked_delta_tc.cuh, delta_tc_pipeline): the chunks
  // [chunk_lo, chunk_hi) of the record table — the per-chunk kernels' blockIdx.x counts from chunk_lo —
  // and the state handed from piece to piece ([S,P,HV,K,V] fp32: state_out where the call writes one,
  // else scratch)
  index_t chunk_lo = 0, chunk_hi = index_t{1} << 62;
  float* carry = nullptr;
  float* kn = nullptr;     // [chunks, HV, C, K] k̂ (writing records; 0 elsewhere)
  float* qn = nullptr;     // [chunks, HV, C, K] q̂ (reading records; without r)
  float* kinv = nullptr;   // [chunks, HV, C] 1/‖k‖ (1 without l2norm)
  float* qinv = nullptr;   // [chunks, HV, C]
  float* G = nullptr;      // [chunks, HV, C]
  float* b = nullptr;      // [chunks, HV, C] β̃
  float* Tm = nullptr;     // [chunks, HV, C, C]
  float* A = nullptr;      // [chunks, HV, C, C]
  float* W = nullptr;      // [chunks, HV, C, K]
  float* U = nullptr;      // [chunks, HV, C, V]
  float* Vn = nullptr;     // [chunks, HV, C, V]
  // backward (hbuf holds S entering each chunk, dbuf holds D)
  float* dO32 = nullptr;   // [chunks, HV, C, V]
  float* dVn = nullptr;    // [chunks, HV, C, V]
  float* ws = nullptr;     // [chunks, HV, C(3K + V + 2C) + 8] (delta_ws: the gradient kernels' products)
  // kernel 5a's first role forms ⟨D, S⟩ as the 8 warp sums delta_grad_bf16_kernel would (delta_ws::red), and
  // that kernel reads them instead of D and S (enqueue_delta_grad: where it runs)
  bool ds_by_products = false;
  // dO32 is gathered by delta_grad_products_kernel's dO role (from dO, before dA and dQg) instead of by
  // the reverse scan: the tensor-core backward where its dO role runs beside the reverse scan
  // (enqueue_delta_tc_bscans: only where the two scans run side by side)
  bool dO32_by_grad = false;
  // bf16 copies for the backward's tensor-core scans (chunked_delta_tc.cuh), written by delta_prep_kernel
  // where set (bind_delta_buffers, for bf16 inputs: delta_bf16_copies): W and A rounded once (round to nearest even, as the
  // scans rounded them from the fp32 buffers before), the raw k rows of writing records and q rows of
  // reading records (exact; 0 elsewhere) — so the scans copy contiguous 16-byte pieces and take their
  // fragments by ldmatrix, with no record table, conversion or per-row branch per chunk
  __nv_bfloat16* Wh = nullptr;  // [chunks, HV, C, K]
  __nv_bfloat16* Ah = nullptr;  // [chunks, HV, C, C]
  __nv_bfloat16* kh = nullptr;  // [chunks, HV, C, K]
  __nv_bfloat16* qh = nullptr;  // [chunks, HV, C, K]
  // with them, the reverse scan's per-record values, so that it reads no record table: s_i = r_i e^{G_i}/‖q_i‖
  // (the same product it formed from the record) and the flat token of a reading record's dO row (−1 else)
  float* svec = nullptr;  // [chunks, HV, C]
  int* dotok = nullptr;   // [chunks, HV, C]
  float* dbeta = nullptr;  // [tokens, HV, Rw]
  Dev* dbeta_out = nullptr;  // [tokens, HV]: the direct store of dbeta (one slot; as chunk_bwd_params::dq_out)
};

//! Whether the backward of Dev inputs keeps the bf16 copies of the tensor-core scans (Wh, Ah, kh, qh):
//! bf16 inputs, the only ones those scans take. delta_chunk_floats sizes and bind_delta_buffers binds
//! by it, so the two agree.
template <class Dev>
inline constexpr bool delta_bf16_copies = std::is_same_v<Dev, __nv_bfloat16>;

//! Floats of scratch per chunk and value head besides the states (hbuf) and their adjoints (dbuf):
//! forward only, or forward + backward (with the bf16 copies for bf16 inputs: delta_bf16_copies).
template <class Dev>
inline std::size_t delta_chunk_floats(index_t K, index_t V, bool backward) {
  const std::size_t C = chunk_len, k = static_cast<std::size_t>(K), v = static_cast<std::size_t>(V);
  std::size_t f = 3 * C * k + 2 * C * v + 2 * C * C + 4 * C;
  if (backward) f += 2 * C * v + C * (3 * k + v + 2 * C) + 8;  // dO, dVn, the gradient kernels' workspace (delta_ws)
  if (backward && delta_bf16_copies<Dev>) f += (3 * C * k + C * C) / 2 + 2 * C;  // Wh, kh, qh [C,K] and Ah [C,C] in bf16 (C even); s, dO tokens [C]
  return f;
}

//! Points the per-chunk buffers of `d` into `base` (delta_chunk_floats<Dev>(K, V, backward) × chunks ×
//! HV floats; every buffer starts on 16 bytes: its size per chunk is a multiple of 4 floats).
template <class Dev>
void bind_delta_buffers(delta_params<Dev>& d, float* base, index_t chunks, index_t HV, index_t K, index_t V, bool backward) {
  const index_t u = chunks * HV, C = chunk_len;
  auto take = [&](index_t n) { float* x = base; base += u * n; return x; };
  d.kn = take(C * K), d.qn = take(C * K), d.W = take(C * K);
  d.U = take(C * V), d.Vn = take(C * V);
  d.Tm = take(C * C), d.A = take(C * C);
  d.G = take(C), d.b = take(C), d.kinv = take(C), d.qinv = take(C);
  if (backward) d.dO32 = take(C * V), d.dVn = take(C * V), d.ws = take(C * (3 * K + V + 2 * C) + 8);
  if (backward && delta_bf16_copies<Dev>) {
    auto take_h = [&](index_t n) { return reinterpret_cast<__nv_bfloat16*>(take(n / 2)); };  // n even
    d.Wh = take_h(C * K), d.kh = take_h(C * K), d.qh = take_h(C * K), d.Ah = take_h(C * C);
    d.svec = take(C), d.dotok = reinterpret_cast<int*>(take(C));
  }
}

namespace delta_detail {

__host__ __device__ constexpr std::size_t up16(std::size_t b) { return (b + 15) / 16 * 16; }

//! Sums over the 32 lanes of a warp (fixed order: deterministic).
__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

//! Per-(chunk, head) element offsets of the buffers.
struct at_chunk {
  index_t ck, cv, cc, c, kv;
  __device__ at_chunk(index_t chunk, int hv, int HV, int K, int V) {
    const index_t u = chunk * HV + hv;
    ck = u * chunk_len * K, cv = u * chunk_len * V, cc = u * chunk_len * chunk_len, c = u * chunk_len;
    kv = u * static_cast<index_t>(K) * V;
  }
};

//! Padded row pitches of the shared-memory tiles (spread the banks of tile_mma's column reads).
__host__ __device__ constexpr int ldk(int K) { return K + 4; }   // rows read as float4
__host__ __device__ constexpr int ldk1(int K) { return K + 1; }  // rows read as a transposed tile_mma operand
inline constexpr int slab = 16, ldslab = slab + 4;  // the exact fp32 form's slabs (the split form's: slab_h below)

//! The float4 pieces of one slab of gemm_abt_staged (columns [k0, k0 + 16) of A's M rows and B's N
//! rows) that one thread stages: piece e = tid + n·nt (n < slab_pieces) is row e / 4, columns
//! k0 + 4·(e % 4) … + 3 (zeros past Kd; Kd, lda and ldb multiples of 4 and the rows 16-byte aligned,
//! so a piece is wholly inside or outside). M + N ≤ C + max(C, chunk_max_k) rows.
//! NT: the block's threads (blockDim.x == NT; the gradient kernels: delta_grad_threads, delta_gprod_threads).
inline constexpr int slab_rows_max = chunk_len + (chunk_max_k > chunk_len ? chunk_max_k : chunk_len);
template <int NT>
inline constexpr int slab_pieces = (slab_rows_max * 4 + NT - 1) / NT;
//! 16×16 output tiles per warp of the split-bf16 form: a [C, max(C, chunk_max_k)] product over the block's NT / 32 warps.
template <int NT>
inline constexpr int slab_tiles = (chunk_len / 16) * ((slab_rows_max - chunk_len) / 16) / (NT / 32);
template <int NT>
struct slab_regs {
  float4 x[slab_pieces<NT>];
};

//! Global (or shared) → registers: this thread's pieces of the slab at column k0 (all loads issued
//! before any is used, so the slab costs one memory latency, hidden behind the previous slab's products).
template <int NT>
__device__ __forceinline__ void load_slab(slab_regs<NT>& r, const float* A, int lda, const float* B, int ldb, int M, int N, int Kd,
                                          int k0) {
  const int tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
#pragma unroll
  for (int n = 0; n < slab_pieces<NT>; ++n) {
    const int e = tid + n * nt, row = e >> 2, kk = k0 + 4 * (e & 3);
    float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
    if (row < M + N && kk < Kd) {
      const float* src = row < M ? A + static_cast<index_t>(row) * lda : B + static_cast<index_t>(row - M) * ldb;
      x = *reinterpret_cast<const float4*>(src + kk);
    }
    r.x[n] = x;
  }
}

//! Registers → the stage (As [M][ld], Bs [N][ld]).
template <int NT>
__device__ __forceinline__ void store_slab(const slab_regs<NT>& r, float* As, float* Bs, int M, int N, int ld) {
  const int tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
#pragma unroll
  for (int n = 0; n < slab_pieces<NT>; ++n) {
    const int e = tid + n * nt, row = e >> 2;
    if (row < M + N) *reinterpret_cast<float4*>((row < M ? As + row * ld : Bs + (row - M) * ld) + 4 * (e & 3)) = r.x[n];
  }
}

//! The split stage of gemm_abt_staged's split-bf16 form: slabs of slab_h = 32 columns (two k-steps of
//! the products per round of loads and barriers), per staged row (A's M rows, then B's N rows) the hi
//! halves in Hs and the lo halves in Ls (x3_detail::split2, once per element as it is staged, not once
//! per warp that reads it), rows of ldslab_h bf16: 80 bytes, so that ldmatrix's eight row addresses of
//! a phase hit distinct banks. Piece e = tid + n·nt (n < slab_pieces_h) is row e / 8, columns
//! k0 + 4·(e % 8) … + 3.
inline constexpr int slab_h = 32, ldslab_h = slab_h + 8;
template <int NT>
inline constexpr int slab_pieces_h = (slab_rows_max * (slab_h / 4) + NT - 1) / NT;
//! Bytes of gemm_abt_staged's stage for M + N rows (the split form's; the fp32 form's is smaller).
__host__ __device__ constexpr std::size_t slab_stage_bytes(int rows) {
  return static_cast<std::size_t>(rows) * ldslab_h * 2 * sizeof(__nv_bfloat16);
}
static_assert(ldslab * sizeof(float) <= ldslab_h * 2 * sizeof(__nv_bfloat16), "the fp32 stage fits the split one");
template <int NT>
struct slab_regs_h {
  float4 x[slab_pieces_h<NT>];
};

//! load_slab for the split form's 32-column slabs.
template <int NT>
__device__ __forceinline__ void load_slab_h(slab_regs_h<NT>& r, const float* A, int lda, const float* B, int ldb, int M, int N, int Kd,
                                            int k0) {
  const int tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
#pragma unroll
  for (int n = 0; n < slab_pieces_h<NT>; ++n) {
    const int e = tid + n * nt, row = e >> 3, kk = k0 + 4 * (e & 7);
    float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
    if (row < M + N && kk < Kd) {
      const float* src = row < M ? A + static_cast<index_t>(row) * lda : B + static_cast<index_t>(row - M) * ldb;
      x = *reinterpret_cast<const float4*>(src + kk);
    }
    r.x[n] = x;
  }
}

//! Registers → the split stage (Hs, Ls: [M + N][ldslab_h] bf16); `plain`: the hi halves only (Ls untouched).
template <int NT>
__device__ __forceinline__ void store_slab_split(const slab_regs_h<NT>& r, __nv_bfloat16* Hs, __nv_bfloat16* Ls, int rows,
                                                 bool plain) {
  const int tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
#pragma unroll
  for (int n = 0; n < slab_pieces_h<NT>; ++n) {
    const int e = tid + n * nt, row = e >> 3;
    if (row < rows) {
      unsigned h0, l0, h1, l1;
      x3_detail::split2(r.x[n].x, r.x[n].y, h0, l0);
      x3_detail::split2(r.x[n].z, r.x[n].w, h1, l1);
      const int at = row * ldslab_h + 4 * (e & 7);
      *reinterpret_cast<uint2*>(Hs + at) = make_uint2(h0, h1);
      if (!plain) *reinterpret_cast<uint2*>(Ls + at) = make_uint2(l0, l1);
    }
  }
}

//! C[M×N] (+)= A·Bᵀ with A [M×Kd] and B [N×Kd] row-major (global or shared memory; lda, ldb, Kd
//! multiples of 4, rows 16-byte aligned): slabs of both are staged through `stage` (slab_stage_bytes(M + N)
//! of shared memory: 32 columns split into bf16 halves for the split-bf16 form, 16 fp32 columns at pitch ldslab else), each slab's float4 loads issued into registers while the
//! previous slab is multiplied (software pipelining: one memory latency per call, not one per slab).
//! The products: for bf16 inputs (Dev) with M and N multiples of 16 and at most 4 output tiles per
//! warp, the split-bf16 tensor-core form (tile_mma.cuh, tile_mma_x3; each warp keeps the accumulators
//! of its (at most slab_tiles) 16×16 output tiles in registers across the slabs); otherwise tile_mma's exact fp32.
//! a_bf16: every element of A is a bf16 value (its lo halves are zeros), so the split form skips
//! A_lo·B_hi (products of exact zeros: the accumulators come out the same).
//! plain (bf16 inputs only): both operands rounded to bf16 once as they are staged, one product per
//! k-step (A_hi·B_hi) instead of three — for the products whose gradients stay within SPEC §9.3's
//! ratio that way (delta_grad_kernel's choice per product: docs/benchmarks.md, "Issue 11, session 21").
//! Whole block of NT threads (blockDim.x == NT); synchronises before reading the operands (so the
//! caller's writes of A and B are complete) and before each slab is written; the caller synchronises
//! after (C read).
template <class Dev, int NT = delta_grad_threads>
__device__ __forceinline__ void gemm_abt_staged(float* C, int ldc_, const float* A, int lda, const float* B, int ldb, int M,
                                                int N, int Kd, bool accumulate, float* stage, bool a_bf16 = false,
                                                bool plain = false) {
  using x3_detail::mma_bf16_16816;
  const int warp = uniform_warp_index(), nwarps = static_cast<int>(blockDim.x) >> 5;
  bool x3 = false;
  if constexpr (std::is_same_v<Dev, __nv_bfloat16>) x3 = ((M | N) & 15) == 0 && (M / 16) * (N / 16) <= slab_tiles<NT> * nwarps;
  const int ld = ldslab;
  float* As = stage;
  float* Bs = stage + M * ld;
  // the split form's stage (slab_stage_bytes(M + N)): hi halves, then lo halves ((M + N)·ldslab_h bf16 each)
  auto* Hs = reinterpret_cast<__nv_bfloat16*>(stage);
  auto* Ls = Hs + (M + N) * ldslab_h;
  const int lane = static_cast<int>(threadIdx.x) & 31, g = lane >> 2, t2 = (lane & 3) * 2;
  const int tn = N / 16, tiles = (M / 16) * tn;
  float d[slab_tiles<NT>][2][4];
  if (x3) {
#pragma unroll
    for (int u = 0; u < slab_tiles<NT>; ++u) {
      const int tile = warp + u * nwarps;
      const int i0 = (tile / tn) * 16, j0 = (tile % tn) * 16;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const bool ld = accumulate && tile < tiles;
        const float* c0 = C + (i0 + g) * ldc_ + j0 + 8 * h + t2;
        const float* c1 = c0 + 8 * ldc_;
        d[u][h][0] = ld ? c0[0] : 0.f, d[u][h][1] = ld ? c0[1] : 0.f, d[u][h][2] = ld ? c1[0] : 0.f, d[u][h][3] = ld ? c1[1] : 0.f;
      }
    }
  }
  __syncthreads();
  if (!x3) {
    slab_regs<NT> r;
    load_slab(r, A, lda, B, ldb, M, N, Kd, 0);
    for (int k0 = 0; k0 < Kd; k0 += slab) {
      if (k0 > 0) __syncthreads();  // the previous slab's reads are done
      store_slab(r, As, Bs, M, N, ld);
      __syncthreads();
      if (k0 + slab < Kd) load_slab(r, A, lda, B, ldb, M, N, Kd, k0 + slab);  // in flight during the products
      tile_mma_f32<Dev, row_major_t, col_major_t>(C, ldc_, As, ldslab, Bs, ldslab, M, N, slab, accumulate || k0 > 0);
    }
    return;
  }
  // each of the warp's output tiles: its fragments' row offsets in the stage, formed once (a division
  // by the run-time tile count per k-step was 9 % of delta_grad_kernel's instructions: session 21's ncu)
  int aof[slab_tiles<NT>], bof[slab_tiles<NT>];
#pragma unroll
  for (int u = 0; u < slab_tiles<NT>; ++u) {
    const int tile = warp + u * nwarps;
    const int i0 = (tile / tn) * 16, j0 = (tile % tn) * 16;
    // a (rows i0 … + 15): blocks (rows + 0 / + 8, columns 0 / 8) in fragment order a0 … a3;
    // b (staged rows M + j0 … + 15, B(k, j) = row j): blocks (h = 0: k 0 / 8, h = 1: k 0 / 8)
    aof[u] = (i0 + (lane & 7) + 8 * ((lane >> 3) & 1)) * ldslab_h + 8 * (lane >> 4);
    bof[u] = (M + j0 + (lane & 7) + 8 * (lane >> 4)) * ldslab_h + 8 * ((lane >> 3) & 1);
  }
  // the stage's shared-memory addresses, formed once (ldmatrix takes them; a generic → shared
  // conversion per fragment load was 3 % of the kernel's instructions)
  const unsigned hs = static_cast<unsigned>(__cvta_generic_to_shared(Hs)), ls = static_cast<unsigned>(__cvta_generic_to_shared(Ls));
  constexpr unsigned e2 = sizeof(__nv_bfloat16);
  slab_regs_h<NT> r;
  load_slab_h(r, A, lda, B, ldb, M, N, Kd, 0);
  for (int k0 = 0; k0 < Kd; k0 += slab_h) {
    if (k0 > 0) __syncthreads();  // the previous slab's reads are done
    store_slab_split(r, Hs, Ls, M + N, plain);
    __syncthreads();
    if (k0 + slab_h < Kd) load_slab_h(r, A, lda, B, ldb, M, N, Kd, k0 + slab_h);  // in flight during the products
#pragma unroll
    for (int ks = 0; ks < slab_h; ks += 16) {
      if (k0 + ks >= Kd) break;  // the k-steps of the 16-column form: none past Kd
#pragma unroll
      for (int u = 0; u < slab_tiles<NT>; ++u) {
        if (warp + u * nwarps >= tiles) continue;
        const int ao = aof[u] + ks, bo = bof[u] + ks;
        unsigned ah[4], al[4], bh[4], bl[4];
        ldsm_x4(ah, hs + e2 * ao);
        if (!a_bf16 && !plain) ldsm_x4(al, ls + e2 * ao);
        ldsm_x4(bh, hs + e2 * bo);
        if (!plain) ldsm_x4(bl, ls + e2 * bo);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const unsigned bhh[2] = {bh[2 * h], bh[2 * h + 1]}, blh[2] = {bl[2 * h], bl[2 * h + 1]};
          if (!plain) {
            if (!a_bf16) mma_bf16_16816(d[u][h], al, bhh);
            mma_bf16_16816(d[u][h], ah, blh);
          }
          mma_bf16_16816(d[u][h], ah, bhh);
        }
      }
    }
  }
#pragma unroll
  for (int u = 0; u < slab_tiles<NT>; ++u) {
    const int tile = warp + u * nwarps;
    if (tile >= tiles) continue;
    const int i0 = (tile / tn) * 16, j0 = (tile % tn) * 16;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float* c0 = C + (i0 + g) * ldc_ + j0 + 8 * h + t2;
      float* c1 = c0 + 8 * ldc_;
      c0[0] = d[u][h][0], c0[1] = d[u][h][1], c1[0] = d[u][h][2], c1[1] = d[u][h][3];
    }
  }
}
inline constexpr int ldc = chunk_len + 4;
inline constexpr int lds = delta_scan_tile + 4;

//! What every per-chunk kernel of this file knows about its (chunk, value head) block.
template <class Dev>
struct chunk_block {
  int hv, h;
  at_chunk o;
  chunk_where at;
  device_source<Dev> src;
};

//! The block's chunk and head (blockIdx.y = value head), its buffers' offsets, and recs[] filled
//! (threads [0, C); the caller synchronises before reading them).
template <class Dev>
__device__ __forceinline__ chunk_block<Dev> begin_chunk(const delta_params<Dev>& p, index_t c, chunk_record* recs) {
  const int hv = static_cast<int>(blockIdx.y), h = hv / (p.HV / p.H);
  const chunk_where at = locate_chunk(p, c);
  load_records(p, c, at, h, hv, recs);
  return {hv, h, at_chunk(c, hv, p.HV, p.K, p.V), at, at.is_shared ? p.shr : p.main};
}

//! dst[i][a] = use(recs[i]) ? x[row(recs[i]) + a] : 0 as fp32 for i < C, a < width (dst pitch ld, x
//! at 16-byte aligned rows, width a multiple of vec16<Dev> (chunked.cuh)): 16-byte loads, four per thread in flight
//! before their (scalar) stores — the gathered rows of the prep kernel.
template <class Dev, class Use, class Row>
__device__ __forceinline__ void gather_rows16(float* dst, int ld, const Dev* x, const chunk_record* recs, int width, Use use,
                                              Row row, const float* scale = nullptr) {
  constexpr int vw = vec16<Dev>, batch = 4;
  const int tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
  const int per = width / vw, n = chunk_len * per;
  for (int e0 = tid; e0 < n; e0 += batch * nt) {
    uint4 u[batch];
#pragma unroll
    for (int b = 0; b < batch; ++b) {
      const int e = e0 + b * nt;
      u[b] = make_uint4(0u, 0u, 0u, 0u);
      if (e < n) {
        const chunk_record& r = recs[e / per];
        if (use(r)) u[b] = *reinterpret_cast<const uint4*>(x + row(r) + (e % per) * vw);
      }
    }
#pragma unroll
    for (int b = 0; b < batch; ++b) {
      const int e = e0 + b * nt;
      if (e >= n) continue;
      const int i = e / per, a = (e % per) * vw;
      const float f = scale ? scale[i] : 1.f;
      const Dev* v = reinterpret_cast<const Dev*>(&u[b]);
#pragma unroll
      for (int j = 0; j < vw; ++j) dst[i * ld + a + j] = to_f32(v[j]) * f;
    }
  }
}

//! gather_rows16 of one 64-column tile (delta_out_tile) in two halves, for loads issued a phase before their
//! stores: load() takes the thread's pieces into registers (16 bytes each; a tile is one batch at
//! delta_threads), store() writes them as gather_rows16 would (the same values, the same bits), each()
//! hands them to a caller's store (delta_tc_prep_kernel's bf16 b V). Piece m of thread t: row
//! (t + m·delta_threads) / per, columns vw·((t + m·delta_threads) % per) … + vw − 1 of the tile.
template <class Dev>
struct tile_gather16 {
  static constexpr int vw = vec16<Dev>, per = delta_out_tile / vw, pieces = chunk_len * per / delta_threads;
  static_assert(pieces * delta_threads == chunk_len * per, "tile_gather16: a tile's pieces over delta_threads");
  uint4 u[pieces];
  template <class Use, class Row>
  __device__ __forceinline__ void load(const Dev* x, const chunk_record* recs, int width, Use use, Row row) {
    const int tid = static_cast<int>(threadIdx.x);
#pragma unroll
    for (int m = 0; m < pieces; ++m) {
      const int e = tid + m * delta_threads, i = e / per, a = (e % per) * vw;
      const chunk_record& r = recs[i];
      u[m] = a < width && use(r) ? *reinterpret_cast<const uint4*>(x + row(r) + a) : make_uint4(0u, 0u, 0u, 0u);
    }
  }
  //! f(i, a, piece) for each of the thread's pieces inside the tile's first `width` columns (row i, first column a).
  template <class F>
  __device__ __forceinline__ void each(int width, F f) const {
    const int tid = static_cast<int>(threadIdx.x);
#pragma unroll
    for (int m = 0; m < pieces; ++m) {
      const int e = tid + m * delta_threads, i = e / per, a = (e % per) * vw;
      if (a < width) f(i, a, u[m]);
    }
  }
  __device__ __forceinline__ void store(float* dst, int ld, int width, const float* scale) const {
    each(width, [&](int i, int a, const uint4& piece) {
      const float f = scale[i];
      const Dev* v = reinterpret_cast<const Dev*>(&piece);
#pragma unroll
      for (int j = 0; j < vw; ++j) dst[i * ld + a + j] = to_f32(v[j]) * f;
    });
  }
};

// --- split-bf16 products from operands split once, in place (delta_prep_kernel, bf16 inputs) ------------
//
// tile_mma_x3 splits each fp32 operand element into bf16 hi / lo halves as it forms the fragments, once
// per output tile that reads it (8 times for T in W = T K̂', 4 for K̂ in K̂K̂ᵀ): a third of
// delta_prep_kernel's instructions in session 23's profile. Here each element is split once and written
// back over its own fp32 row, which then holds [hi (w) | lo (w)] bf16 in the same bytes (w the row's
// width; the row pitch of K + 4 or C + 4 floats keeps every row's start on 16 bytes and ldmatrix's eight
// row addresses on distinct banks), and the fragments come by ldmatrix. Same split, same products in the
// same order (split_mma): the same bits as tile_mma_x3.

//! Row `row` (fp32, width w ≤ 128) rewritten in place as [hi (w) | lo (w)] bf16 (x3_detail::split2's halves,
//! element by element); one warp, which has finished writing the row. Ends with __syncwarp.
__device__ __forceinline__ void split_row_in_place(float* row, int w) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  float x[4];
#pragma unroll
  for (int u = 0; u < 4; ++u) x[u] = lane + 32 * u < w ? row[lane + 32 * u] : 0.f;
  __syncwarp();
  auto* h = reinterpret_cast<__nv_bfloat16*>(row);
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const int a = lane + 32 * u;
    if (a >= w) continue;
    const __nv_bfloat16 hi = __float2bfloat16_rn(x[u]);
    h[a] = hi, h[w + a] = __float2bfloat16_rn(x[u] - __bfloat162float(hi));
  }
  __syncwarp();
}

//! split_row_in_place's values for four adjacent elements x[0..3] of a row of w elements (the caller's, read
//! before any lane writes): h[a + j] = bf16(x_j), h[w + a + j] = bf16(x_j − hi_j), 8-byte stores.
__device__ __forceinline__ void split4_in_place(__nv_bfloat16* h, int w, int a, const float* x) {
  __nv_bfloat16 hi[4], lo[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) hi[j] = __float2bfloat16_rn(x[j]), lo[j] = __float2bfloat16_rn(x[j] - __bfloat162float(hi[j]));
  *reinterpret_cast<uint2*>(h + a) = *reinterpret_cast<const uint2*>(hi);
  *reinterpret_cast<uint2*>(h + w + a) = *reinterpret_cast<const uint2*>(lo);
}

//! C[M×N] (fp32, row-major ldc; shared or global) = A·B from split rows (split_row_in_place) in shared
//! memory, by tile_mma_x3's terms in its order (per k-step A_lo·B_hi, A_hi·B_lo, A_hi·B_hi): A row-major
//! [M][Kd] (rows of wa elements, pitch lda bf16); B as rows of Bᵀ [N][Kd] (b_rows_t) or row-major [Kd][N]
//! (fragments by ldmatrix.trans), rows of wb elements at pitch ldb. flags: tile_mma_x3's x3_c_lower,
//! x3_a_lower (x3_a_upper and x3_plain are not used here). M, N, Kd multiples of 16. Whole block; no barrier.
__device__ __forceinline__ void split_mma(float* C, int ldc, const __nv_bfloat16* A, int lda, int wa, const __nv_bfloat16* B, int ldb,
                                         int wb, bool b_rows_t, int M, int N, int Kd, unsigned flags) {
  using x3_detail::mma_bf16_16816;
  constexpr unsigned e2 = sizeof(__nv_bfloat16);
  const int warp = uniform_warp_index(), nwarps = static_cast<int>(blockDim.x) >> 5;
  const int lane = static_cast<int>(threadIdx.x) & 31, g = lane >> 2, t2 = (lane & 3) * 2, r = lane & 7, m = lane >> 3;
  const unsigned as = static_cast<unsigned>(__cvta_generic_to_shared(A)), bs = static_cast<unsigned>(__cvta_generic_to_shared(B));
  const int tn = N / 16, tiles = (M / 16) * tn;
  for (int tile = warp; tile < tiles; tile += nwarps) {
    const int i0 = (tile / tn) * 16, j0 = (tile % tn) * 16;
    if ((flags & x3_c_lower) && j0 > i0) continue;
    const int ke = (flags & x3_a_lower) ? min(Kd, i0 + 16) : Kd;
    // this lane's ldmatrix rows: A (rows i0 + r + 8·(m & 1), columns + 8·(m / 2): fragments a0 … a3);
    // B: rows j0 + r + 8·(m / 2), columns + 8·(m & 1) of Bᵀ, or rows k + r + 8·(m & 1), columns j0 + 8·(m / 2)
    const unsigned a_at = as + e2 * ((i0 + r + 8 * (m & 1)) * lda + 8 * (m >> 1));
    const unsigned b_at = b_rows_t ? bs + e2 * ((j0 + r + 8 * (m >> 1)) * ldb + 8 * (m & 1)) : bs + e2 * ((r + 8 * (m & 1)) * ldb + j0 + 8 * (m >> 1));
    float d[2][4] = {};
    for (int k0 = 0; k0 < ke; k0 += 16) {
      unsigned ah[4], al[4], bh[4], bl[4];
      ldsm_x4(ah, a_at + e2 * k0);
      ldsm_x4(al, a_at + e2 * (k0 + wa));
      if (b_rows_t) {
        ldsm_x4(bh, b_at + e2 * k0);
        ldsm_x4(bl, b_at + e2 * (k0 + wb));
      } else {
        ldsm_x4_trans(bh, b_at + e2 * k0 * ldb);
        ldsm_x4_trans(bl, b_at + e2 * (k0 * ldb + wb));
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const unsigned bhh[2] = {bh[2 * h], bh[2 * h + 1]}, blh[2] = {bl[2 * h], bl[2 * h + 1]};
        mma_bf16_16816(d[h], al, bhh);
        mma_bf16_16816(d[h], ah, blh);
        mma_bf16_16816(d[h], ah, bhh);
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float* c0 = C + static_cast<index_t>(i0 + g) * ldc + j0 + 8 * h + t2;
      float* c1 = c0 + static_cast<index_t>(8) * ldc;
      c0[0] = d[h][0], c0[1] = d[h][1], c1[0] = d[h][2], c1[1] = d[h][3];
    }
  }
}

//! Column `col` of T = (I + L)⁻¹ for one 16×16 diagonal block of a strictly lower-triangular L (fp32
//! rows at pitch ldl): T_rc = −Σ_{c ≤ l < r} L_rl T_lc, T_cc = 1, 0 above — forward substitution, one
//! thread per column, written into T (pitch ldt). The column is kept in registers and both loops are
//! unrolled, so the row sums issue their loads of L at once and only the last term of each waits for the
//! row before; the same fmaf in the same order as the loop over l = c … r − 1, so the same bits.
__device__ __forceinline__ void unit_lower_inverse_column(const float* L, int ldl, float* T, int ldt, int col) {
  float t[16];
#pragma unroll
  for (int r = 0; r < 16; ++r) {
    float s = 0.f;
#pragma unroll
    for (int l = 0; l < r; ++l)
      if (l >= col) s = fmaf(L[r * ldl + l], t[l], s);
    t[r] = r < col ? 0.f : r == col ? 1.f : -s;
    T[r * ldt + col] = t[r];
  }
}

//! The delta preps' per-record quantities, from the policy: record r's floored log-decay
//! (detail::chunked_log_decay of D::log_decay) into G and its write strength b(β, w) (D::write_strength)
//! into b; 0 and 0 where the record writes nothing. delta_prep_kernel and delta_tc_prep_kernel.
template <class D, class Dev>
__device__ __forceinline__ void record_gates(const chunk_record& r, const device_source<Dev>& src, float& G, float& b) {
  G = r.wr ? detail::chunked_log_decay(to_f32(D::log_decay(src.g + r.hv, 0))) : 0.f;  // floored λ
  b = r.wr ? D::write_strength(to_f32(src.beta[r.hv]), r.w) : 0.f;
}

//! G[0 … C) replaced by its inclusive sum, accumulated in fp64 and each G_i rounded once (as
//! chunk_cumulative_decay); one thread. delta_prep_kernel and delta_tc_prep_kernel.
__device__ __forceinline__ void cumulative_decay_fp64(float* G) {
  double acc = 0.;
  for (int i = 0; i < chunk_len; ++i) acc += G[i], G[i] = static_cast<float>(acc);
}

}  // namespace delta_detail

// --- 1. delta_prep_kernel --------------------------------------------------------------------------

//! Sized for two blocks per SM at K = 128 (≈ 105 KiB): the V tile of U lives over Qs (used up by
//! then), QK̂ᵀ over Lm after the solve, and the solve's scratch X is the three 16×16 blocks it needs.
struct delta_prep_smem {
  static constexpr int ldx = 17;  //!< pitch of the solve's 16×16 scratch blocks
  std::size_t recs, G, b, Ks, Qs, Lm, Tm, X, Vt, bytes;
  __host__ __device__ explicit delta_prep_smem(int K) {
    using delta_detail::up16;
    // rows of K̂, Q: pitch K + 1 (exact fp32 tile_mma) or K + 4 (split-bf16), sized for the larger
    const std::size_t rowk = static_cast<std::size_t>(chunk_len) * delta_detail::ldk(K) * sizeof(float);
    const std::size_t cc = static_cast<std::size_t>(chunk_len) * delta_detail::ldc * sizeof(float);
    recs = 0;
    G = up16(chunk_len * sizeof(chunk_record));
    b = G + up16(chunk_len * sizeof(float));
    Ks = b + up16(chunk_len * sizeof(float));
    Qs = Ks + rowk, Lm = Qs + rowk, Tm = Lm + cc, X = Tm + cc;
    Vt = Qs;  // [C][delta_out_tile + 4] ≤ rowk: K ≥ delta_out_tile, or else the larger of the two
    bytes = X + up16(static_cast<std::size_t>(chunk_len / 16 - 1) * 16 * ldx * sizeof(float));
    const std::size_t vt = static_cast<std::size_t>(chunk_len) * (delta_out_tile + 4) * sizeof(float);
    if (vt > rowk) bytes += vt - rowk, Lm += vt - rowk, Tm += vt - rowk, X += vt - rowk;
  }
};

//! grid (max_chunks, HV). The log-decays and β̃ come from the policy (D::log_decay, D::write_strength).
template <class D, class Dev>
__global__ void __launch_bounds__(delta_threads, 2) delta_prep_kernel(const delta_params<Dev> p) {
  static_assert(is_delta<D>, "linstate (cuda): the chunked delta-rule kernels run family::delta");
  using namespace delta_detail;
  constexpr int C = chunk_len;
  const index_t c = blockIdx.x;
  if (c >= p.rt.seg_chunk[p.S * p.P]) return;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  // split: bf16 inputs with K and V multiples of 16 — the products' operands split once, in place
  // (split_row_in_place, split_mma), K̂ and Q rows at pitch K + 4 (16-byte row starts); else tile_mma_f32
  // forms them (split-bf16 for bf16 inputs where the sizes allow, exact fp32 otherwise) at pitch K + 1
  const int K = p.K, V = p.V, HV = p.HV;
  const bool split = std::is_same_v<Dev, __nv_bfloat16> && K % 16 == 0 && V % 16 == 0;
  const int lk = split ? ldk(K) : ldk1(K);
  const delta_prep_smem L(K);
  auto* recs = reinterpret_cast<chunk_record*>(smem_raw + L.recs);
  float* G = reinterpret_cast<float*>(smem_raw + L.G);
  float* b = reinterpret_cast<float*>(smem_raw + L.b);
  float* Ks = reinterpret_cast<float*>(smem_raw + L.Ks);
  float* Qs = reinterpret_cast<float*>(smem_raw + L.Qs);
  float* Lm = reinterpret_cast<float*>(smem_raw + L.Lm);
  float* Tm = reinterpret_cast<float*>(smem_raw + L.Tm);
  float* Xs = reinterpret_cast<float*>(smem_raw + L.X);
  float* Vt = reinterpret_cast<float*>(smem_raw + L.Vt);
  constexpr int ldx = delta_prep_smem::ldx;
  const int tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
  const int warp = uniform_warp_index(), lane = tid & 31, nwarps = nt >> 5;
  const chunk_block<Dev> blk = begin_chunk(p, c, recs);
  const at_chunk& o = blk.o;
  const device_source<Dev>& src = blk.src;
  __syncthreads();
  // the gathered k, q (and below v) rows by 16-byte loads where the inputs allow, else element by element
  constexpr int vw = vec16<Dev>;
  const bool vec = K % vw == 0 && V % vw == 0 && aligned16(src.k) && aligned16(src.q) && aligned16(p.v);
  if (vec) {
    gather_rows16(Ks, lk, src.k, recs, K, [](const chunk_record& r) { return r.wr; }, [](const chunk_record& r) { return r.qk; });
    gather_rows16(Qs, lk, src.q, recs, K, [](const chunk_record& r) { return r.rd; }, [](const chunk_record& r) { return r.qk; });
  } else {
    staged_for(
        C * K, [&](int e) { const chunk_record& r = recs[e / K]; return r.wr ? to_f32(src.k[r.qk + e % K]) : 0.f; },
        [&](int e, float x) { Ks[(e / K) * lk + e % K] = x; });
    staged_for(
        C * K, [&](int e) { const chunk_record& r = recs[e / K]; return r.rd ? to_f32(src.q[r.qk + e % K]) : 0.f; },
        [&](int e, float x) { Qs[(e / K) * lk + e % K] = x; });
  }
  if (tid < C) record_gates<D>(recs[tid], src, G[tid], b[tid]);
  __syncthreads();
  if (tid == 0) cumulative_decay_fp64(G);
  // l2norm, the unscaled rows to the buffers, then Q ← r·q̂. split: two rows a warp at once (rows i and
  // i + nwarps), whose dependent chains — the sums, the warp sums, the exact 1/√ — interleave; each row's
  // arithmetic in the order of one row at a time (below), so the same bits. Else one row a warp.
  if (split) {
    // four adjacent elements a lane (K ≤ chunk_max_k = 128, a multiple of 16; rows 16-byte aligned): 8- and
    // 16-byte stores, and the rows as the products' operands, [hi | lo] in place (split_row_in_place's
    // values). The same values as the scalar loop below followed by split_row_in_place, which before
    // session 32 took a third of the kernel's instructions in this loop (docs/data/issue11_s32)
    const int a = 4 * lane;
    const bool on = a < K;
    for (int i = warp; i < C; i += 2 * nwarps) {
      const int rows[2] = {i, i + nwarps};
      const bool two = rows[1] < C;
      float sk[2] = {0.f, 0.f}, sq[2] = {0.f, 0.f};
      for (int x = lane; x < K; x += 32) {
#pragma unroll
        for (int u = 0; u < 2; ++u) {
          if (u == 1 && !two) break;
          const float* kr = Ks + rows[u] * lk + x;
          const float* qr = Qs + rows[u] * lk + x;
          sk[u] += kr[0] * kr[0], sq[u] += qr[0] * qr[0];
        }
      }
      float ik[2], iq[2];
      float4 kv[2], qv[2];
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        sk[u] = warp_sum(sk[u]), sq[u] = warp_sum(sq[u]);
        ik[u] = p.l2norm ? 1.f / sqrtf(sk[u] + 1e-6f) : 1.f, iq[u] = p.l2norm ? 1.f / sqrtf(sq[u] + 1e-6f) : 1.f;
        kv[u] = qv[u] = make_float4(0.f, 0.f, 0.f, 0.f);
        if (on && (u == 0 || two))
          kv[u] = *reinterpret_cast<const float4*>(Ks + rows[u] * lk + a), qv[u] = *reinterpret_cast<const float4*>(Qs + rows[u] * lk + a);
      }
      __syncwarp();  // every lane holds its elements of both rows before the split halves overwrite them
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        if (u == 1 && !two) break;
        const int r = rows[u];
        if (on) {
          const float rr = recs[r].r;
          const float kx[4] = {kv[u].x, kv[u].y, kv[u].z, kv[u].w}, qx[4] = {qv[u].x, qv[u].y, qv[u].z, qv[u].w};
          float kh[4], qh[4], qs[4];
#pragma unroll
          for (int e = 0; e < 4; ++e) kh[e] = kx[e] * ik[u], qh[e] = qx[e] * iq[u], qs[e] = qh[e] * rr;
          if (p.kh) {  // exact
            *reinterpret_cast<uint2*>(p.kh + o.ck + r * K + a) = make_uint2(x3_detail::bf2(kx[0], kx[1]), x3_detail::bf2(kx[2], kx[3]));
            *reinterpret_cast<uint2*>(p.qh + o.ck + r * K + a) = make_uint2(x3_detail::bf2(qx[0], qx[1]), x3_detail::bf2(qx[2], qx[3]));
          }
          *reinterpret_cast<float4*>(p.kn + o.ck + r * K + a) = make_float4(kh[0], kh[1], kh[2], kh[3]);
          *reinterpret_cast<float4*>(p.qn + o.ck + r * K + a) = make_float4(qh[0], qh[1], qh[2], qh[3]);
          split4_in_place(reinterpret_cast<__nv_bfloat16*>(Ks + r * lk), K, a, kh);
          split4_in_place(reinterpret_cast<__nv_bfloat16*>(Qs + r * lk), K, a, qs);
        }
        if (lane == 0) p.kinv[o.c + r] = ik[u], p.qinv[o.c + r] = iq[u];
      }
      __syncwarp();
    }
  } else {
    for (int i = warp; i < C; i += nwarps) {
      float sk = 0.f, sq = 0.f;
      for (int a = lane; a < K; a += 32) sk += Ks[i * lk + a] * Ks[i * lk + a], sq += Qs[i * lk + a] * Qs[i * lk + a];
      sk = warp_sum(sk), sq = warp_sum(sq);
      const float ik = p.l2norm ? 1.f / sqrtf(sk + 1e-6f) : 1.f, iq = p.l2norm ? 1.f / sqrtf(sq + 1e-6f) : 1.f;
      const float rr = recs[i].r;
      for (int a = lane; a < K; a += 32) {
        const float kr = Ks[i * lk + a], qr = Qs[i * lk + a];
        if (p.kh) p.kh[o.ck + i * K + a] = __float2bfloat16_rn(kr), p.qh[o.ck + i * K + a] = __float2bfloat16_rn(qr);  // exact
        const float kh = kr * ik, qh = qr * iq;
        Ks[i * lk + a] = kh, Qs[i * lk + a] = qh * rr;
        p.kn[o.ck + i * K + a] = kh, p.qn[o.ck + i * K + a] = qh;
      }
      if (lane == 0) p.kinv[o.c + i] = ik, p.qinv[o.c + i] = iq;
    }
  }
  __syncthreads();
  if (tid < C) {
    p.G[o.c + tid] = G[tid], p.b[o.c + tid] = b[tid];
    if (p.svec) {  // the reverse scan's per-record values (delta_tc_rscan_kernel): s_i as it formed it, the dO row's token
      const chunk_record& r = recs[tid];
      p.svec[o.c + tid] = r.r * __expf(G[tid]) * p.qinv[o.c + tid];  // (1/‖q_i‖: this block's store, visible after the barrier)
      p.dotok[o.c + tid] = r.rd ? r.tok : -1;
    }
  }
  // split rows: bf16 elements, pitch 2·lk
  const auto* Kh = reinterpret_cast<const __nv_bfloat16*>(Ks);
  const auto* Qh = reinterpret_cast<const __nv_bfloat16*>(Qs);
  if (split) split_mma(Lm, ldc, Kh, 2 * lk, K, Kh, 2 * lk, K, true, C, C, K, x3_c_lower);  // K̂ K̂ᵀ (its lower part)
  else tile_mma_f32<Dev, row_major_t, col_major_t>(Lm, ldc, Ks, lk, Ks, lk, C, C, K, false, x3_c_lower);
  __syncthreads();
  for (int e = tid; e < C * C; e += nt) {
    const int i = e / C, j = e % C;
    const float gam = j < i ? __expf(G[i] - G[j]) : 0.f;
    Lm[i * ldc + j] = j < i ? b[i] * Lm[i * ldc + j] * gam : 0.f;  // strict_lower(diag(b) K̂K̂ᵀ ⊙ Γ)
  }
  __syncthreads();
  // T = (I + L)⁻¹ by a blocked forward substitution in fp32 (as delta_tc_prep_kernel's): the four 16×16
  // diagonal blocks one column per thread, T_rc = −Σ_{c ≤ l < r} L_rl T_lc; then block row by block
  // row X_ij = Σ_{j ≤ m < i} L_im T_mj (into Xs) and T_ij = −T_ii X_ij. (One column per thread over
  // all 64 rows made a 2016-step dependent chain on two warps.)
  if (tid < C) {
    const int o0 = (tid / 16) * 16;
    unit_lower_inverse_column(Lm + o0 * ldc + o0, ldc, Tm + o0 * ldc + o0, ldc, tid % 16);
  }
  for (int e = tid; e < C * C; e += nt) {
    const int i = e / C, j = e % C;
    if (j / 16 > i / 16) Tm[i * ldc + j] = 0.f;
  }
  __syncthreads();
  for (int bi = 1; bi < C / 16; ++bi) {
    for (int e = tid; e < bi * 256; e += nt) {
      const int bj = e / 256, r = (e % 256) / 16, col = e % 16;
      const float* Lr = Lm + (bi * 16 + r) * ldc;
      float s = 0.f;
      for (int l = bj * 16; l < bi * 16; ++l) s = fmaf(Lr[l], Tm[l * ldc + bj * 16 + col], s);
      Xs[bj * 16 * ldx + r * ldx + col] = s;
    }
    __syncthreads();
    for (int e = tid; e < bi * 256; e += nt) {
      const int bj = e / 256, r = (e % 256) / 16, col = e % 16;
      const float* Tr = Tm + (bi * 16 + r) * ldc + bi * 16;
      float s = 0.f;
      for (int m = 0; m <= r; ++m) s = fmaf(Tr[m], Xs[bj * 16 * ldx + m * ldx + col], s);
      Tm[(bi * 16 + r) * ldc + bj * 16 + col] = -s;
    }
    __syncthreads();
  }
  for (int e = tid; e < C * C; e += nt) p.Tm[o.cc + e] = Tm[(e / C) * ldc + e % C];
  // A = lower_incl(Q K̂ᵀ ⊙ Γ), the product over Lm (used up by the solve)
  if (split) split_mma(Lm, ldc, Qh, 2 * lk, K, Kh, 2 * lk, K, true, C, C, K, x3_c_lower);  // Q K̂ᵀ (its lower part)
  else tile_mma_f32<Dev, row_major_t, col_major_t>(Lm, ldc, Qs, lk, Ks, lk, C, C, K, false, x3_c_lower);
  __syncthreads();
  for (int e = tid; e < C * C; e += nt) {
    const int i = e / C, j = e % C;
    const float a = j <= i ? Lm[i * ldc + j] * __expf(G[i] - G[j]) : 0.f;  // (Lm's tiles above the diagonal: not computed)
    p.A[o.cc + e] = a;
    if (p.Ah) p.Ah[o.cc + e] = __float2bfloat16_rn(a);
  }
  // U's first 64-column tile of v rows into registers here (vec), stored after W: the loads fly during W's
  // products (gathered after the barrier that follows them before session 32)
  tile_gather16<Dev> vg;
  const auto v_wr = [](const chunk_record& r) { return r.wr; };
  const auto v_row = [V](const chunk_record& r) { return r.hv * V; };
  if (vec) vg.load(p.v, recs, min(delta_out_tile, V), v_wr, v_row);
  // W = T diag(b e^G) K̂ (split: K̂ read back from this block's p.kn stores, visible after the barrier
  // above; the scaled rows and T's rows split in place)
  if (split) {
    __syncthreads();  // Ks's split rows read (Q K̂ᵀ)
    // the warp's eight rows of K̂ loaded at once (four adjacent values a lane, 16 bytes), scaled and split
    // straight into Ks's row ([hi | lo], split4_in_place: the values split_row_in_place gave the scaled row);
    // element by element, a load waited for before each store, before session 32
    constexpr int rpw = chunk_len / (delta_threads / 32);  // rows a warp
    const int a4 = 4 * lane;
    float4 kx[rpw];
#pragma unroll
    for (int r = 0; r < rpw; ++r)
      kx[r] = a4 < K ? *reinterpret_cast<const float4*>(p.kn + o.ck + (warp + r * (delta_threads / 32)) * K + a4) : make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int r = 0; r < rpw; ++r) {
      const int i = warp + r * (delta_threads / 32);
      const float f = b[i] * __expf(G[i]);
      if (a4 < K) {
        const float v[4] = {kx[r].x * f, kx[r].y * f, kx[r].z * f, kx[r].w * f};
        split4_in_place(reinterpret_cast<__nv_bfloat16*>(Ks + i * lk), K, a4, v);
      }
      split_row_in_place(Tm + i * ldc, C);
    }
  } else {
    for (int e = tid; e < C * K; e += nt) {
      const int i = e / K;
      Ks[i * lk + e % K] *= b[i] * __expf(G[i]);
    }
  }
  __syncthreads();
  const auto* Th = reinterpret_cast<const __nv_bfloat16*>(Tm);  // split rows, pitch 2·ldc
  if (split) split_mma(p.W + o.ck, K, Th, 2 * ldc, C, Kh, 2 * lk, K, false, C, K, C, x3_a_lower);  // T lower triangular
  else tile_mma_f32<Dev, row_major_t, row_major_t>(p.W + o.ck, K, Tm, ldc, Ks, lk, C, K, C, false, x3_a_lower);
  if (p.Wh) {  // W in bf16, read back from the block's own stores (visible after the barrier)
    __syncthreads();
    const auto* w4 = reinterpret_cast<const float4*>(p.W + o.ck);
    auto* wh2 = reinterpret_cast<__nv_bfloat162*>(p.Wh + o.ck);
    constexpr int batch = 4;  // loads in flight before their stores
    for (int e0 = tid; e0 < C * K / 4; e0 += batch * nt) {
      float4 x[batch];
#pragma unroll
      for (int m = 0; m < batch; ++m) x[m] = e0 + m * nt < C * K / 4 ? w4[e0 + m * nt] : make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
      for (int m = 0; m < batch; ++m) {
        const int e = e0 + m * nt;
        if (e < C * K / 4) wh2[2 * e] = __floats2bfloat162_rn(x[m].x, x[m].y), wh2[2 * e + 1] = __floats2bfloat162_rn(x[m].z, x[m].w);
      }
    }
  }
  // U = T diag(b) V, 64 columns at a time
  constexpr int lv = delta_out_tile + 4;
  for (int j0 = 0; j0 < V; j0 += delta_out_tile) {
    const int n = min(delta_out_tile, V - j0);
    __syncthreads();
    if (vec) {  // n is a multiple of vw; columns [n, 64) are not written (read by no product: its N is n)
      vg.store(Vt, lv, n, b);
      if (j0 + delta_out_tile < V) vg.load(p.v + j0 + delta_out_tile, recs, min(delta_out_tile, V - j0 - delta_out_tile), v_wr, v_row);
    } else {
      staged_for(
          C * delta_out_tile,
          [&](int e) {
            const int i = e / delta_out_tile, jj = e % delta_out_tile;
            const chunk_record& r = recs[i];
            return (r.wr && jj < n) ? to_f32(p.v[r.hv * V + j0 + jj]) : 0.f;
          },
          [&](int e, float x) { Vt[(e / delta_out_tile) * lv + e % delta_out_tile] = x * b[e / delta_out_tile]; });
    }
    __syncthreads();
    if (split) {  // the tile's n columns split in place
      for (int i = warp; i < C; i += nwarps) split_row_in_place(Vt + i * lv, n);
      __syncthreads();
      split_mma(p.U + o.cv + j0, V, Th, 2 * ldc, C, reinterpret_cast<const __nv_bfloat16*>(Vt), 2 * lv, n, false, C, n, C, x3_a_lower);
    } else {
      tile_mma_f32<Dev, row_major_t, row_major_t>(p.U + o.cv + j0, V, Tm, ldc, Vt, lv, C, n, C, false, x3_a_lower);
    }
  }
}

// --- 2. delta_state_kernel -------------------------------------------------------------------------
//
// Sequential over a stream's chunks, so the grid is small (streams × value heads × ⌈V/16⌉) and the
// per-chunk latency is what counts: G, W, K̂ and the U tile of the next chunk are copied into shared
// memory by cp.async (double buffered) while this chunk computes, and the two products have their own thread maps with every thread busy — Vn = U − W S: row
// i = tid/4, four columns each (a K-long dot, W's row broadcast to 4 threads, S's row read as a
// float4); S' = e^{G_C} S + Kdᵀ Vn: row a = tid/2, eight columns each (a C-long dot).

struct delta_state_smem {
  std::size_t G, h, Vt, Ut, Ws, Kd, bytes;
  __host__ __device__ explicit delta_state_smem(int K) {
    using delta_detail::up16;
    const std::size_t rowk = static_cast<std::size_t>(chunk_len) * delta_detail::ldk(K) * sizeof(float);
    const std::size_t rowu = static_cast<std::size_t>(chunk_len) * delta_detail::lds * sizeof(float);
    G = 0;  // [2][C], and [2] of the U tile, W and K̂ below: the chunk in use and the next one
    h = up16(2 * chunk_len * sizeof(float));
    Vt = h + static_cast<std::size_t>(chunk_max_k) * delta_detail::lds * sizeof(float);
    Ut = Vt + rowu;
    Ws = Ut + 2 * rowu;
    Kd = Ws + 2 * rowk;
    bytes = Kd + 2 * rowk;
  }
};

namespace delta_detail {
//! 16-byte asynchronous copies global → shared (cp.async, sm_80+): issued, committed as one group,
//! waited for by the issuing thread; a barrier after the wait makes every thread's copies visible.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

//! dst[i][a] = src[i·K + a] for a [C, K] block by cp.async (K a multiple of 4; not committed).
__device__ __forceinline__ void stage_rows_async(float* dst, const float* src, int K) {
  const int tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x), k4 = K / 4, lk = ldk(K);
  for (int e = tid; e < chunk_len * k4; e += nt) {
    const int i = e / k4, a = (e % k4) * 4;
    cp_async16(dst + i * lk + a, src + i * K + a);
  }
}

static_assert(delta_scan_tile == 16 && delta_threads == 256 && chunk_len == 64 && chunk_max_k == 128,
              "the thread maps of delta_state_kernel / delta_rscan_kernel assume these sizes");

//! dst[i][a] = src[i·K + a] (·scale_i) for a [C, K] block, float4 loads (K is a multiple of 4).
__device__ __forceinline__ void stage_rows(float* dst, const float* src, int K) {
  const int tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x), k4 = K / 4, lk = ldk(K);
  for (int e = tid; e < chunk_len * k4; e += nt) {
    const int i = e / k4, a = (e % k4) * 4;
    *reinterpret_cast<float4*>(dst + i * lk + a) = *reinterpret_cast<const float4*>(src + i * K + a);
  }
}

//! acc[0..3] += Σ_k X[row][k] · Y[k][c0 .. c0+3]  (X [*, ldx], Y [*, lds], both shared memory)
__device__ __forceinline__ void dot_row4(float (&acc)[4], const float* X, int ldx, int row, const float* Y, int c0, int n) {
#pragma unroll 4
  for (int k = 0; k < n; ++k) {
    const float x = X[row * ldx + k];
    const float4 y = *reinterpret_cast<const float4*>(Y + k * lds + c0);
    acc[0] = fmaf(x, y.x, acc[0]), acc[1] = fmaf(x, y.y, acc[1]), acc[2] = fmaf(x, y.z, acc[2]), acc[3] = fmaf(x, y.w, acc[3]);
  }
}

//! acc[0..7] += Σ_i X[i][col] · Y[i][c0 .. c0+7]  (X [C, ldx] read down a column, Y [C, lds])
__device__ __forceinline__ void dot_col8(float (&acc)[8], const float* X, int ldx, int col, const float* Y, int c0) {
#pragma unroll 4
  for (int i = 0; i < chunk_len; ++i) {
    const float x = X[i * ldx + col];
    const float4 y0 = *reinterpret_cast<const float4*>(Y + i * lds + c0);
    const float4 y1 = *reinterpret_cast<const float4*>(Y + i * lds + c0 + 4);
    acc[0] = fmaf(x, y0.x, acc[0]), acc[1] = fmaf(x, y0.y, acc[1]), acc[2] = fmaf(x, y0.z, acc[2]), acc[3] = fmaf(x, y0.w, acc[3]);
    acc[4] = fmaf(x, y1.x, acc[4]), acc[5] = fmaf(x, y1.y, acc[5]), acc[6] = fmaf(x, y1.z, acc[6]), acc[7] = fmaf(x, y1.w, acc[7]);
  }
}
}  // namespace delta_detail

//! grid (⌈V / 16⌉, HV, S·P). A stream without records keeps its initial state (copied out of place,
//! untouched in place).
template <class Dev>
__global__ void __launch_bounds__(delta_threads) delta_state_kernel(const delta_params<Dev> p) {
  using namespace delta_detail;
  constexpr int C = chunk_len, TS = delta_scan_tile;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const int K = p.K, V = p.V, HV = p.HV, lk = ldk(K);
  const delta_state_smem L(K);
  float* G2 = reinterpret_cast<float*>(smem_raw + L.G);   // [2][C]
  float* h = reinterpret_cast<float*>(smem_raw + L.h);    // [K][lds]
  float* Vt = reinterpret_cast<float*>(smem_raw + L.Vt);  // [C][lds]
  float* Ut = reinterpret_cast<float*>(smem_raw + L.Ut);  // [2][C][lds]
  float* Ws2 = reinterpret_cast<float*>(smem_raw + L.Ws); // [2][C][lk]
  float* Kd2 = reinterpret_cast<float*>(smem_raw + L.Kd); // [2][C][lk]
  const int tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
  const int seg = static_cast<int>(blockIdx.z), hv = static_cast<int>(blockIdx.y);
  const int part = seg / p.S, s = seg % p.S;
  const int j0 = static_cast<int>(blockIdx.x) * TS, n = min(TS, V - j0);
  const index_t c0 = p.rt.seg_chunk[seg], c1 = p.rt.seg_chunk[seg + 1];
  if (c0 == c1 && p.in_place) return;
  const index_t sbase = ((static_cast<index_t>(s) * p.P + part) * HV + hv) * static_cast<index_t>(K) * V;
  const int vi = tid / 4, vc = (tid % 4) * 4;  // Vn map: row, first column
  const int ha = tid / 2, hc = (tid % 2) * 8;  // state map: row, first column
  // chunk c's G, W, K̂ and U tile into buffer `buf` by cp.async (one group): the next chunk's copies
  // are in flight while this chunk computes
  auto issue = [&](index_t c, int buf) {
    const at_chunk o(c, hv, HV, K, V);
    stage_rows_async(Ws2 + buf * C * lk, p.W + o.ck, K);
    stage_rows_async(Kd2 + buf * C * lk, p.kn + o.ck, K);
    const int n4 = n / 4;
    for (int e = tid; e < C * n4; e += nt) {
      const int i = e / n4, jj = (e % n4) * 4;
      cp_async16(Ut + (buf * C + i) * lds + jj, p.U + o.cv + static_cast<index_t>(i) * V + j0 + jj);
    }
    if (tid < C / 4) cp_async16(G2 + buf * C + tid * 4, p.G + o.c + tid * 4);
    cp_async_commit();
  };
  if (c0 < c1) issue(c0, 0);
  for (int e = tid; e < K * TS; e += nt) {
    const int a = e / TS, jj = e % TS;
    h[a * lds + jj] = (p.state_in && jj < n) ? p.state_in[sbase + static_cast<index_t>(a) * V + j0 + jj] : 0.f;
  }
  for (index_t c = c0; c < c1; ++c) {
    const at_chunk o(c, hv, HV, K, V);
    const int buf = static_cast<int>((c - c0) & 1);
    cp_async_wait_all();
    __syncthreads();  // h complete (previous chunk), chunk c's G, W, K̂, U staged, the other buffer free
    if (c + 1 < c1) issue(c + 1, buf ^ 1);
    const float* G = G2 + buf * C;
    const float* Ws = Ws2 + buf * C * lk;
    float* Kd = Kd2 + buf * C * lk;
    const float* Uc = Ut + buf * C * lds;
    for (int e = tid; e < K * TS; e += nt) {
      const int a = e / TS, jj = e % TS;
      if (jj < n) p.hbuf[o.kv + static_cast<index_t>(a) * V + j0 + jj] = h[a * lds + jj];
    }
    const float gl = G[C - 1];
    for (int e = tid; e < C * K; e += nt) {
      const int i = e / K;
      Kd[i * lk + e % K] *= __expf(gl - G[i]);
    }
    {  // Vn = U − W S
      float acc[4] = {0.f, 0.f, 0.f, 0.f};
      dot_row4(acc, Ws, lk, vi, h, vc, K);
      const index_t row = o.cv + static_cast<index_t>(vi) * V + j0;
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int jj = vc + u;
        float x = 0.f;
        if (jj < n) x = Uc[vi * lds + jj] - acc[u], p.Vn[row + jj] = x;
        Vt[vi * lds + jj] = x;
      }
    }
    __syncthreads();  // Vt, Kd ready; h no longer read
    if (ha < K) {  // S' = e^{G_C} S + Kdᵀ Vn
      const float eg = __expf(gl);
      float acc[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) acc[u] = h[ha * lds + hc + u] * eg;
      dot_col8(acc, Kd, lk, ha, Vt, hc);
#pragma unroll
      for (int u = 0; u < 8; ++u) h[ha * lds + hc + u] = acc[u];
    }
  }
  __syncthreads();
  if (p.state_out)
    for (int e = tid; e < K * TS; e += nt) {
      const int a = e / TS, jj = e % TS;
      if (jj < n) p.state_out[sbase + static_cast<index_t>(a) * V + j0 + jj] = h[a * lds + jj];
    }
}

// --- 3. delta_output_kernel ------------------------------------------------------------------------

struct delta_output_smem {
  std::size_t recs, G, Qg, O, bytes;
  __host__ __device__ explicit delta_output_smem(int K) {
    using delta_detail::up16;
    recs = 0;
    G = up16(chunk_len * sizeof(chunk_record));
    Qg = G + up16(chunk_len * sizeof(float));
    O = Qg + static_cast<std::size_t>(chunk_len) * delta_detail::ldk(K) * sizeof(float);
    bytes = O + static_cast<std::size_t>(chunk_len) * (delta_out_tile + 4) * sizeof(float);
  }
};

//! grid (max_chunks, HV, ⌈V / 64⌉).
template <class Dev>
__global__ void __launch_bounds__(delta_threads) delta_output_kernel(const delta_params<Dev> p) {
  using namespace delta_detail;
  constexpr int C = chunk_len, TV = delta_out_tile, lo = delta_out_tile + 4;
  const index_t c = blockIdx.x;
  if (c >= p.rt.seg_chunk[p.S * p.P]) return;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const int K = p.K, V = p.V, HV = p.HV, lk = ldk(K);
  const delta_output_smem L(K);
  auto* recs = reinterpret_cast<chunk_record*>(smem_raw + L.recs);
  float* G = reinterpret_cast<float*>(smem_raw + L.G);
  float* Qg = reinterpret_cast<float*>(smem_raw + L.Qg);
  float* O = reinterpret_cast<float*>(smem_raw + L.O);
  const int tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
  const int j0 = static_cast<int>(blockIdx.z) * TV, n = min(TV, V - j0);
  const at_chunk o = begin_chunk(p, c, recs).o;
  if (tid < C) G[tid] = p.G[o.c + tid];
  __syncthreads();
  for (int e = tid; e < C * K; e += nt) {
    const int i = e / K;
    Qg[i * lk + e % K] = p.qn[o.ck + e] * recs[i].r * __expf(G[i]);
  }
  __syncthreads();
  tile_mma_f32<Dev, row_major_t, row_major_t>(O, lo, Qg, lk, p.hbuf + o.kv + j0, V, C, n, K, false);      // diag(e^G) Q S
  tile_mma_f32<Dev, row_major_t, row_major_t>(O, lo, p.A + o.cc, C, p.Vn + o.cv + j0, V, C, n, C, true);  // + A Vn
  __syncthreads();
  for (int e = tid; e < C * TV; e += nt) {
    const int i = e / TV, jj = e % TV;
    const chunk_record& r = recs[i];
    if (!r.rd || jj >= n) continue;
    const float val = O[i * lo + jj];
    if (p.R == 1) p.o[r.hv * V + j0 + jj] = from_f32<Dev>(val);
    else p.o_part[(r.hv * p.R + r.slot) * V + j0 + jj] = val;
  }
}

// --- 4. delta_rscan_kernel -------------------------------------------------------------------------

struct delta_rscan_smem {
  std::size_t recs, G, D, dOt, dVt, As, Qg, Kd, Ws, bytes;
  __host__ __device__ explicit delta_rscan_smem(int K) {
    using delta_detail::up16;
    using delta_detail::lds;
    const std::size_t rowk = static_cast<std::size_t>(chunk_len) * delta_detail::ldk(K) * sizeof(float);
    recs = 0;
    G = up16(chunk_len * sizeof(chunk_record));
    D = G + up16(chunk_len * sizeof(float));
    dOt = D + static_cast<std::size_t>(chunk_max_k) * lds * sizeof(float);
    dVt = dOt + static_cast<std::size_t>(chunk_len) * lds * sizeof(float);
    As = dVt + static_cast<std::size_t>(chunk_len) * lds * sizeof(float);
    Qg = As + static_cast<std::size_t>(chunk_len) * delta_detail::ldc * sizeof(float);
    Kd = Qg + rowk, Ws = Kd + rowk;
    bytes = Ws + rowk;
  }
};

//! grid (⌈V / 16⌉, HV, S·P): D walks the stream's chunks backwards (thread maps as delta_state_kernel).
template <class Dev>
__global__ void __launch_bounds__(delta_threads) delta_rscan_kernel(const delta_params<Dev> p) {
  using namespace delta_detail;
  constexpr int C = chunk_len, TS = delta_scan_tile;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const int K = p.K, V = p.V, HV = p.HV, lk = ldk(K);
  const delta_rscan_smem L(K);
  auto* recs = reinterpret_cast<chunk_record*>(smem_raw + L.recs);
  float* G = reinterpret_cast<float*>(smem_raw + L.G);
  float* D = reinterpret_cast<float*>(smem_raw + L.D);      // [K][lds]
  float* dOt = reinterpret_cast<float*>(smem_raw + L.dOt);  // [C][lds]
  float* dVt = reinterpret_cast<float*>(smem_raw + L.dVt);  // [C][lds]
  float* As = reinterpret_cast<float*>(smem_raw + L.As);    // [C][ldc]
  float* Qg = reinterpret_cast<float*>(smem_raw + L.Qg);    // [C][lk]
  float* Kd = reinterpret_cast<float*>(smem_raw + L.Kd);    // [C][lk]
  float* Ws = reinterpret_cast<float*>(smem_raw + L.Ws);    // [C][lk]
  const int tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
  const int seg = static_cast<int>(blockIdx.z), hv = static_cast<int>(blockIdx.y), h = hv / (HV / p.H);
  const int part = seg / p.S, s = seg % p.S;
  const int j0 = static_cast<int>(blockIdx.x) * TS, n = min(TS, V - j0);
  const index_t c0 = p.rt.seg_chunk[seg], c1 = p.rt.seg_chunk[seg + 1];
  const index_t sbase = ((static_cast<index_t>(s) * p.P + part) * HV + hv) * static_cast<index_t>(K) * V;
  const int vi = tid / 4, vc = (tid % 4) * 4;
  const int ha = tid / 2, hc = (tid % 2) * 8;
  for (int e = tid; e < K * TS; e += nt) {
    const int a = e / TS, jj = e % TS;
    D[a * lds + jj] = (p.dht && jj < n) ? p.dht[sbase + static_cast<index_t>(a) * V + j0 + jj] : 0.f;
  }
  for (index_t c = c1 - 1; c >= c0; --c) {
    const at_chunk o(c, hv, HV, K, V);
    const chunk_where at = locate_chunk(p, c);
    __syncthreads();  // D complete, the previous chunk's tiles consumed
    load_records(p, c, at, h, hv, recs);
    // the chunk's tiles in one batch of cp.async (waited for below, after the dO rows)
    if (tid < C / 4) cp_async16(G + tid * 4, p.G + o.c + tid * 4);
    stage_rows_async(Qg, p.qn + o.ck, K);
    stage_rows_async(Kd, p.kn + o.ck, K);
    stage_rows_async(Ws, p.W + o.ck, K);
    for (int e = tid; e < C * C / 4; e += nt) {
      const int i = e / (C / 4), j = (e % (C / 4)) * 4;
      cp_async16(As + i * ldc + j, p.A + o.cc + i * C + j);
    }
    cp_async_commit();
    for (int e = tid; e < K * TS; e += nt) {
      const int a = e / TS, jj = e % TS;
      if (jj < n) p.dbuf[o.kv + static_cast<index_t>(a) * V + j0 + jj] = D[a * lds + jj];
    }
    __syncthreads();
    staged_for(
        C * TS,
        [&](int e) {
          const int i = e / TS, jj = e % TS;
          const chunk_record& r = recs[i];
          return (r.rd && jj < n) ? to_f32(p.dO[r.hv * V + j0 + jj]) : 0.f;
        },
        [&](int e, float x) {
          const int i = e / TS, jj = e % TS;
          dOt[i * lds + jj] = x;
          if (jj < n) p.dO32[o.cv + static_cast<index_t>(i) * V + j0 + jj] = x;
        });
    cp_async_wait_all();
    __syncthreads();  // every thread's copies landed
    const float gl = G[C - 1];
    for (int e = tid; e < C * K; e += nt) {
      const int i = e / K, a = e % K;
      Qg[i * lk + a] *= recs[i].r * __expf(G[i]);
      Kd[i * lk + a] *= __expf(gl - G[i]);
    }
    __syncthreads();
    {  // dVn = Aᵀ dO + Kd D
      float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll 4
      for (int t = 0; t < C; ++t) {
        const float x = As[t * ldc + vi];
        const float4 y = *reinterpret_cast<const float4*>(dOt + t * lds + vc);
        acc[0] = fmaf(x, y.x, acc[0]), acc[1] = fmaf(x, y.y, acc[1]), acc[2] = fmaf(x, y.z, acc[2]), acc[3] = fmaf(x, y.w, acc[3]);
      }
      dot_row4(acc, Kd, lk, vi, D, vc, K);
      const index_t row = o.cv + static_cast<index_t>(vi) * V + j0;
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int jj = vc + u;
        if (jj < n) p.dVn[row + jj] = acc[u];
        dVt[vi * lds + jj] = -acc[u];
      }
    }
    __syncthreads();
    if (ha < K) {  // D ← e^{G_C} D + Qgᵀ dO − Wᵀ dVn
      const float eg = __expf(gl);
      float acc[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) acc[u] = D[ha * lds + hc + u] * eg;
      dot_col8(acc, Qg, lk, ha, dOt, hc);
      dot_col8(acc, Ws, lk, ha, dVt, hc);
#pragma unroll
      for (int u = 0; u < 8; ++u) D[ha * lds + hc + u] = acc[u];
    }
  }
  __syncthreads();
  if (p.dh0)
    for (int e = tid; e < K * TS; e += nt) {
      const int a = e / TS, jj = e % TS;
      if (jj < n) p.dh0[sbase + static_cast<index_t>(a) * V + j0 + jj] = D[a * lds + jj];
    }
}

// --- 5. the gradient kernels ------------------------------------------------------------------------

//! The gradient kernels' workspace of one (chunk, value head), C(3K + V + 2C) + 8 floats (delta_params::ws),
//! each piece on 16 bytes (K, V multiples of 4). Kernel 5a (delta_grad_products_kernel) writes the V-long
//! products, kernel 5b (delta_grad_kernel) reads them:
//!   dqg  [C,K]  dQg = dO Sᵀ                 dbw  [C,K]  −dB_W = dB_U Sᵀ      dbu  [C,V]  dB_U = Tᵀ dVn
//!   dkd  [C,K]  dK̂ = Vn Dᵀ (before e^{G_C−G})  da   [C,C]  dA = dO Vnᵀ       dbuu [C,C]  dB_U Uᵀ
//!   red  [8]    ⟨D, S⟩'s partial sums of delta_grad_bf16_kernel's 8 warps (p.ds_by_products)
struct delta_ws {
  float *dqg, *dbw, *dbu, *dkd, *da, *dbuu, *red;
  template <class Dev>
  __device__ delta_ws(const delta_params<Dev>& p, index_t c, int hv) {
    const index_t C = chunk_len, K = p.K, V = p.V;
    dqg = p.ws + (c * p.HV + hv) * (C * (3 * K + V + 2 * C) + 8);
    dbw = dqg + C * K, dbu = dbw + C * K, dkd = dbu + C * V, da = dkd + C * K, dbuu = da + C * C, red = dbuu + C * C;
  }
};

namespace delta_grad_phase {  // (the rest of kernel 5b's phases below kernel 5a)
//! This thread's part of ⟨D, S⟩ over the [K, V] fp32 state (n4 = K·V / 4 float4 loads).
__device__ __forceinline__ float ds_part(const float* Dx, const float* S, int n4, int tid, int nt) {
  const auto* d4 = reinterpret_cast<const float4*>(Dx);
  const auto* s4 = reinterpret_cast<const float4*>(S);
  float part = 0.f;
#pragma unroll 4
  for (int e = tid; e < n4; e += nt) {
    const float4 x = d4[e], y = s4[e];
    part = fmaf(x.x, y.x, part), part = fmaf(x.y, y.y, part), part = fmaf(x.z, y.z, part), part = fmaf(x.w, y.w, part);
  }
  return part;
}

}  // namespace delta_grad_phase

// --- 5a. delta_grad_products_kernel ----------------------------------------------------------------
//
// The V-long products of a chunk's gradients (session 25): each a sweep over V of fp32 [C,V] / [K,V]
// operands that kernel 5b's 16 warps used to run one after another in one block per SM, where each
// phase's latency stalled the whole block (session 24's ncu: 25 % occupancy, 0.43 eligible warps per
// scheduler). Here they run in three independent blocks per (chunk, value head) of 8 warps each, two
// or more blocks per SM, and store into the chunk's workspace (delta_ws):
//   role 0: dK̂ = Vn Dᵀ (split-bf16 for bf16 inputs)
//   role 1: dB_U = Tᵀ dVn (split), then −dB_W = dB_U Sᵀ and dB_U Uᵀ (plain)
//   role 2, the dO role: dA = dO Vnᵀ (split, dO exact in bf16) and dQg = dO Sᵀ (plain) — only where a
//     record reads. It needs neither D nor dVn: where the reverse scan leaves dO32 to it
//     (dO32_by_grad: it gathers the chunk's dO rows first), it runs on the side stream after the
//     states' pass, beside the reverse scan (enqueue_delta_dO_role; only where the two scans run side
//     by side: else in this kernel's launch after the scans, as the third role of each chunk).
// The same products as before, each output tile's k-steps in the same order (gemm_abt_staged and
// tile_mma_f32 give a tile the same bits whichever warp forms it), so kernel 5b's results are the
// one-kernel form's bits.

inline constexpr int delta_gprod_threads = 256;  //!< kernel 5a: 8 warps

//! The most dynamic shared memory a kernel 5a launch asks for (its own, or enqueue_delta_dO_role's padding).
inline constexpr std::size_t delta_gprod_smem_ceiling = 110 * 1024;

//! Kernel 5a's shared memory: gemm_abt_staged's stage; role 1 first keeps T and a 64-column tile of dVn
//! over it; the dO role keeps the chunk's records after the stage.
struct delta_gprod_smem {
  std::size_t Tm, X, recs, bytes;
  __host__ __device__ explicit delta_gprod_smem(int) {
    const std::size_t cc = static_cast<std::size_t>(chunk_len) * delta_detail::ldc * sizeof(float);
    const std::size_t stage = delta_detail::slab_stage_bytes(delta_detail::slab_rows_max);
    Tm = 0, X = cc;
    recs = 2 * cc > stage ? 2 * cc : stage;
    bytes = recs + delta_detail::up16(chunk_len * sizeof(chunk_record));
  }
};

//! grid (nroles × max_chunks, HV): block x does role role0 + x % nroles of chunk x / nroles (a chunk's
//! roles adjacent, so the S and Vn that two of them read are in L2 for the second).
template <class Dev>
__global__ void __launch_bounds__(delta_gprod_threads, 2) delta_grad_products_kernel(const delta_params<Dev> p, int role0,
                                                                                    int nroles) {
  using namespace delta_detail;
  constexpr int C = chunk_len, NT = delta_gprod_threads;
  const index_t c = blockIdx.x / nroles;
  const int role = role0 + static_cast<int>(blockIdx.x % nroles);
  if (c >= p.rt.seg_chunk[p.S * p.P]) return;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const int K = p.K, V = p.V, hv = static_cast<int>(blockIdx.y);
  const int tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
  const at_chunk o(c, hv, p.HV, K, V);
  const delta_ws w(p, c, hv);
  const delta_gprod_smem L(K);
  float* stage = reinterpret_cast<float*>(smem_raw);
  const float* S = p.hbuf + o.kv;    // [K,V] entering state
  const float* Vn = p.Vn + o.cv;     // [C,V]
  if (role == 0) {
    if (p.ds_by_products) {  // ⟨D, S⟩ as delta_grad_bf16_kernel's 8 warps sum it (the same thread map, order and sums)
      float part = delta_grad_phase::ds_part(p.dbuf + o.kv, S, K * V / 4, tid, nt);
      part = delta_detail::warp_sum(part);
      if ((tid & 31) == 0) w.red[tid >> 5] = part;
    }
    gemm_abt_staged<Dev, NT>(w.dkd, K, Vn, V, p.dbuf + o.kv, V, C, K, V, false, stage);  // dK̂ = Vn Dᵀ
  } else if (role == 2) {
    auto* recs = reinterpret_cast<chunk_record*>(smem_raw + L.recs);
    const chunk_where at = locate_chunk(p, c);
    load_records(p, c, at, hv / (p.HV / p.H), hv, recs);
    if (__syncthreads_or(tid < C && recs[tid].rd)) {  // (kernel 5b reads da and dqg only where some record reads: the same test)
      float* dO = p.dO32 + o.cv;  // [C,V]
      if (p.dO32_by_grad) {  // the chunk's dO rows (0 where a record does not read), 16-byte loads
        gather_rows16(dO, V, p.dO, recs, V, [](const chunk_record& r) { return r.rd; },
                      [V](const chunk_record& r) { return r.hv * V; });
        __syncthreads();  // (gemm_abt_staged reads them from global memory: this block's stores, visible after the barrier)
      }
      // dO32 holds the bf16 input's values for bf16 inputs (gathered here or by delta_tc_rscan_kernel): A_lo = 0
      constexpr bool dO_bf16 = std::is_same_v<Dev, __nv_bfloat16>;
      gemm_abt_staged<Dev, NT>(w.da, C, dO, V, Vn, V, C, C, V, false, stage, dO_bf16);               // dA = dO Vnᵀ
      gemm_abt_staged<Dev, NT>(w.dqg, K, dO, V, S, V, C, K, V, false, stage, dO_bf16, /*plain=*/true);  // dQg = dO Sᵀ
    }
  } else {
    // Vn = U − W S:  dU = dVn, dW = −dVn Sᵀ;  [dB_U | dB_W] = Tᵀ [dU | dW], so dB_U = Tᵀ dVn and
    // −dB_W = Tᵀ dVn Sᵀ = dB_U Sᵀ. dB_U 64 columns at a time, dVn's tile staged in X (float4, in flight together).
    float* Tm = reinterpret_cast<float*>(smem_raw + L.Tm);
    float* X = reinterpret_cast<float*>(smem_raw + L.X);
    const float* dVn = p.dVn + o.cv;  // [C,V]
    const auto* t4 = reinterpret_cast<const float4*>(p.Tm + o.cc);
    for (int e = tid; e < C * C / 4; e += nt) {  // ldc is a multiple of 4: float4 rows
      const int i = e / (C / 4), j = 4 * (e % (C / 4));
      *reinterpret_cast<float4*>(Tm + i * ldc + j) = t4[e];
    }
    for (int j0 = 0; j0 < V; j0 += delta_out_tile) {
      const int q4 = min(delta_out_tile, V - j0) / 4, n4 = C * q4;
      __syncthreads();
      for (int e0 = tid; e0 < n4; e0 += 2 * nt) {
        float4 x[2];
#pragma unroll
        for (int u = 0; u < 2; ++u) {
          const int e = e0 + u * nt;
          if (e < n4) x[u] = *reinterpret_cast<const float4*>(dVn + static_cast<index_t>(e / q4) * V + j0 + 4 * (e % q4));
        }
#pragma unroll
        for (int u = 0; u < 2; ++u) {
          const int e = e0 + u * nt;
          if (e < n4) *reinterpret_cast<float4*>(X + (e / q4) * ldc + 4 * (e % q4)) = x[u];
        }
      }
      __syncthreads();
      tile_mma_f32<Dev, col_major_t, row_major_t>(w.dbu + j0, V, Tm, ldc, X, ldc, C, 4 * q4, C, false, x3_a_upper);  // dB_U (Tᵀ upper triangular)
    }
    // (each gemm's leading barrier: dB_U complete and T, X read before the stage is written)
    gemm_abt_staged<Dev, NT>(w.dbw, K, w.dbu, V, S, V, C, K, V, false, stage, /*a_bf16=*/false, /*plain=*/true);  // −dB_W
    gemm_abt_staged<Dev, NT>(w.dbuu, C, w.dbu, V, p.U + o.cv, V, C, C, V, false, stage, /*a_bf16=*/false, /*plain=*/true);  // dB_U Uᵀ
  }
}

// --- 5b. delta_grad_kernel -------------------------------------------------------------------------

struct delta_grad_smem {
  std::size_t recs, G, b, dG, db, cv, red, Kn, Qs, dQ, dK, Tm, Am, X, Y, bytes;
  __host__ __device__ explicit delta_grad_smem(int K) {
    using delta_detail::up16;
    // rows of K̂, Q, dQ, dK: pitch K + 1 (exact fp32 tile_mma) or K + 4 (split-bf16), sized for the larger
    const std::size_t rowk = static_cast<std::size_t>(chunk_len) * delta_detail::ldk(K) * sizeof(float);
    const std::size_t cc = static_cast<std::size_t>(chunk_len) * delta_detail::ldc * sizeof(float);
    const std::size_t stage = delta_detail::slab_stage_bytes(delta_detail::slab_rows_max);
    const std::size_t vec = up16(chunk_len * sizeof(float));
    recs = 0;
    G = up16(chunk_len * sizeof(chunk_record));
    b = G + vec, dG = b + vec, db = dG + vec, cv = db + vec, red = cv + vec;
    Kn = red + up16(delta_grad_threads / 32 * sizeof(float));
    Qs = Kn + rowk, dQ = Qs + rowk, dK = dQ + rowk, Tm = dK + rowk;
    Am = Tm + cc, X = Am + cc, Y = X + cc;
    bytes = Y + (cc > stage ? cc : stage);  // Y is also gemm_abt_staged's stage for [C, K] products
  }
};

// Kernel 5b's phases that its two forms share (delta_grad_kernel; delta_grad_bf16_kernel for bf16
// inputs), each in the one order of operations both keep, so that a change to the gradient's algebra is
// made once. K̂'s fp32 rows come as (kr, lkr): delta_grad_kernel's rows in shared memory (Kn, pitch
// lk) or p.kn's in global memory (pitch K; delta_grad_bf16_kernel holds K̂ in shared memory as bf16
// only). The caller synchronises between phases.
namespace delta_grad_phase {
using delta_detail::ldc;
using delta_detail::warp_sum;
//! Columns per lane whose loads go out together in the per-row loops (K, V ≤ 128: a lane's whole share of
//! a row). The compiler cannot move a load above a store that may alias it, so a loop that loads and
//! stores one column at a time waits one global-load latency per column. Session 28 (H200, T = 32768):
//! 1 → 4 took delta_grad_bf16_kernel from 1.41 to 1.29 ms (8 bytes of spill); 2 gave 1.38 ms.
inline constexpr int row_batch = 4;

//! A lane's share of a row of n columns (lane, lane + 32, …) in batches of row_batch columns: load(u, a)
//! for each column a of a batch (u its place in it) before use(u, a) for any, so that the batch's loads
//! go out together. The caller keeps what load reads in arrays of row_batch, indexed by u.
template <class Load, class Use>
__device__ __forceinline__ void row_batched(int lane, int n, Load load, Use use) {
  for (int a0 = lane; a0 < n; a0 += 32 * row_batch) {
#pragma unroll
    for (int u = 0; u < row_batch; ++u)
      if (a0 + 32 * u < n) load(u, a0 + 32 * u);
#pragma unroll
    for (int u = 0; u < row_batch; ++u) {
      const int a = a0 + 32 * u;
      if (a >= n) break;
      use(u, a);
    }
  }
}

//! A → Am and, where some record reads (any_r), kernel 5a's dA = dO Vnᵀ → X; [C, C] at pitch ldc
//! (a multiple of 4: float4 rows).
template <class Dev>
__device__ __forceinline__ void load_a_da(float* Am, float* X, const delta_params<Dev>& p, const delta_detail::at_chunk& o, const delta_ws& w,
                                          bool any_r, int tid, int nt) {
  constexpr int C = chunk_len;
  const auto* a4 = reinterpret_cast<const float4*>(p.A + o.cc);
  const auto* da4 = reinterpret_cast<const float4*>(w.da);
  for (int e = tid; e < C * C / 4; e += nt) {
    const int i = e / (C / 4), j = 4 * (e % (C / 4));
    const float4 xa = a4[e];
    if (any_r) *reinterpret_cast<float4*>(X + i * ldc + j) = da4[e];
    *reinterpret_cast<float4*>(Am + i * ldc + j) = xa;
  }
}

//! S' = e^{G_C} S + Kdᵀ Vn, one warp per row i: c_i = e^{G_C − G_i} ⟨dKd_i, k̂_i⟩ → cvec[i], dG[i] −= c_i,
//! and dK's row (kernel 5a's dKd = Vn Dᵀ) scaled by e^{G_C − G_i}.
__device__ __forceinline__ void decay_rows(float* dK, int lk, const float* kr, int lkr, const float* G, float gl, float* cvec,
                                           float* dG, int K, int warp, int nwarps, int lane) {
  for (int i = warp; i < chunk_len; i += nwarps) {
    const float e = __expf(gl - G[i]);
    float d = 0.f;
#pragma unroll 4
    for (int a = lane; a < K; a += 32) d = fmaf(dK[i * lk + a], kr[i * lkr + a], d);
    d = warp_sum(d) * e;
    for (int a = lane; a < K; a += 32) dK[i * lk + a] *= e;
    if (lane == 0) cvec[i] = d, dG[i] -= d;
  }
}

//! The last state's part of dG_C: Σ_i c_i + e^{G_C} ⟨D, S⟩ (the warps' parts of ⟨D, S⟩ in red). One thread.
__device__ __forceinline__ float last_state_dG(const float* red, const float* cvec, int nwarps, float egl) {
  float sd = 0.f, dGl = 0.f;
  for (int i = 0; i < nwarps; ++i) sd += red[i];
  for (int i = 0; i < chunk_len; ++i) dGl += cvec[i];
  return dGl + egl * sd;
}

//! P = lower_incl(dA) ⊙ Γ over dA in X.
__device__ __forceinline__ void form_p(float* X, const float* G, int tid, int nt) {
  constexpr int C = chunk_len;
  for (int e = tid; e < C * C; e += nt) {
    const int i = e / C, j = e % C;
    X[i * ldc + j] = j <= i ? X[i * ldc + j] * __expf(G[i] - G[j]) : 0.f;
  }
}

//! X = kernel 5a's dB_U Uᵀ [C, C].
__device__ __forceinline__ void load_dbuu(float* X, const delta_ws& w, int tid, int nt) {
  constexpr int C = chunk_len;
  const auto* u4 = reinterpret_cast<const float4*>(w.dbuu);
  for (int e = tid; e < C * C / 4; e += nt) {
    const int i = e / (C / 4), j = 4 * (e % (C / 4));
    *reinterpret_cast<float4*>(X + i * ldc + j) = u4[e];
  }
}

//! Vn = U − W S, one warp per record i: with −dB_W (ws2, [C, K]) and dB_U (ws3, [C, V]) from kernel 5a,
//! dK_i += b_i e^{G_i} (−dB_W)_i, db_i += ⟨dB_U_i, v_i⟩ + e^{G_i} ⟨−dB_W_i, k̂_i⟩, dG_i += b_i e^{G_i} ⟨−dB_W_i, k̂_i⟩,
//! and a writing record's dv = b_i dB_U_i (into its slot's partial, or the user's tensor).
template <class Dev>
__device__ __forceinline__ void wy_terms(const delta_params<Dev>& p, const chunk_record* recs, const chunk_where& at, const float* G,
                                         const float* b, float* db, float* dG, float* dK, int lk, const float* kr, int lkr,
                                         const float* ws2, const float* ws3, int warp, int nwarps, int lane) {
  const int K = p.K, V = p.V;
  for (int i = warp; i < chunk_len; i += nwarps) {
    const chunk_record& r = recs[i];
    const float e = __expf(G[i]), be = b[i] * e;
    float kb = 0.f, vb = 0.f;
    // each lane's loads of a row issued before its stores (row_batched): the stores may alias the loaded
    // rows as far as the compiler knows, so a plain loop waits one load latency per column
    {
      float y[row_batch], k[row_batch];
      row_batched(
          lane, K, [&](int u, int a) { y[u] = -ws2[i * K + a], k[u] = kr[i * lkr + a]; },
          [&](int u, int a) {
            kb = fmaf(y[u], k[u], kb);
            dK[i * lk + a] += be * y[u];
          });
    }
    if (r.wr) {
      const int wsl = write_slot(p, r, at);
      float y[row_batch], v[row_batch];
      row_batched(
          lane, V, [&](int u, int j) { y[u] = ws3[static_cast<index_t>(i) * V + j], v[u] = to_f32(p.v[r.hv * V + j]); },
          [&](int u, int j) {
            vb = fmaf(y[u], v[u], vb);
            if (p.dv_out) p.dv_out[r.hv * V + j] = from_f32<Dev>(b[i] * y[u]);  // direct store (one slot)
            else if (p.dv) p.dv[(r.hv * p.Rw + wsl) * V + j] = b[i] * y[u];
          });
    }
    kb = warp_sum(kb), vb = warp_sum(vb);
    if (lane == 0) db[i] += vb + e * kb, dG[i] += be * kb;
  }
}

//! L = I + diag(b) Mg, from Y = −dB_W Wᵀ, X = dB_U Uᵀ (so dL = Y − X) and Am = K̂K̂ᵀ (its lower part):
//! X = dL ⊙ Mg, Y = dMg ⊙ Mg = diag(b) X, Am = dM = diag(b) dL ⊙ Γ, each strictly lower (0 elsewhere).
__device__ __forceinline__ void dl_terms(float* X, float* Y, float* Am, const float* G, const float* b, int tid, int nt) {
  constexpr int C = chunk_len;
  for (int e = tid; e < C * C; e += nt) {
    const int i = e / C, j = e % C;
    float x = 0.f, y = 0.f, dm = 0.f;
    if (j < i) {
      const float gam = __expf(G[i] - G[j]);
      const float dl = Y[i * ldc + j] - X[i * ldc + j];
      x = dl * Am[i * ldc + j] * gam;  // dL ⊙ Mg
      y = x * b[i];                    // dMg ⊙ Mg
      dm = b[i] * dl * gam;            // dM = diag(b) dL ⊙ Γ
    }
    X[i * ldc + j] = x, Y[i * ldc + j] = y, Am[i * ldc + j] = dm;
  }
}

//! db_i += Σ_j X_ij, dG_i += Σ_j Y_ij − Σ_j Y_ji (thread i < C; rows read from a rotated start, no bank conflicts).
__device__ __forceinline__ void dl_sums(const float* X, const float* Y, float* db, float* dG, int tid) {
  constexpr int C = chunk_len;
  if (tid >= C) return;
  float rx = 0.f, ry = 0.f, cy = 0.f;
  for (int j = 0; j < C; ++j) {
    const int jr = (j + tid) & (C - 1);
    rx += X[tid * ldc + jr], ry += Y[tid * ldc + jr], cy += Y[j * ldc + tid];
  }
  db[tid] += rx, dG[tid] += ry - cy;
}

//! dg_i = Σ_{j ≥ i} dG_j, after the last state's part dGl is added to dG_C. One thread.
__device__ __forceinline__ void suffix_dg(float* dG, float dGl) {
  dG[chunk_len - 1] += dGl;
  float acc = 0.f;
  for (int i = chunk_len - 1; i >= 0; --i) acc += dG[i], dG[i] = acc;
}

//! Writing record i's raw gradients into the partials (or the user's tensors where one slot): dk
//! (through l2norm's projection and 1/‖k‖), and from lane 0 dβ and the router's dcw by the policy's
//! adjoint of b(β, w), dg (0 below the chunked log-decay floor). One warp.
template <class D, class Dev>
__device__ __forceinline__ void store_write_grads(const delta_params<Dev>& p, const chunk_record& r, int i, const delta_detail::at_chunk& o,
                                                  const chunk_where& at, const device_source<Dev>& src, const float* dK, int lk,
                                                  const float* kr, int lkr, const float* db, const float* dG, int lane) {
  const int K = p.K;
  const int wsl = write_slot(p, r, at);
  if (p.dk || p.dk_out) {
    const float ik = p.kinv[o.c + i];
    float d = 0.f;
    if (p.l2norm)
#pragma unroll 4
      for (int a = lane; a < K; a += 32) d = fmaf(kr[i * lkr + a], dK[i * lk + a], d);
    d = warp_sum(d);
    float x[row_batch];  // loads before stores, as in wy_terms
    row_batched(
        lane, K, [&](int u, int a) { x[u] = ik * (dK[i * lk + a] - kr[i * lkr + a] * d); },
        [&](int u, int a) {
          if (p.dk_out) p.dk_out[r.hv * K + a] = from_f32<Dev>(x[u]);  // direct store (one slot)
          else p.dk[(r.hv * p.Rw + wsl) * K + a] = x[u];
        });
  }
  if (lane == 0) {
    float dbeta = 0.f, dcw = 0.f;  // the policy's adjoint of b(β, w)
    D::write_strength_backward(to_f32(src.beta[r.hv]), r.w, db[i], dbeta, dcw);
    if (p.dbeta_out) p.dbeta_out[r.hv] = from_f32<Dev>(dbeta);  // direct stores (one slot)
    else if (p.dbeta) p.dbeta[r.hv * p.Rw + wsl] = dbeta;
    // G summed the floored gates: ∂L/∂g is exactly 0 below detail::chunked_log_decay_floor
    const float dg = detail::below_log_decay_floor(to_f32(D::log_decay(src.g + r.hv, 0))) ? 0.f : dG[i];
    if (p.dg_out) p.dg_out[r.hv] = from_f32<Dev>(dg);
    else if (p.dg) p.dg[r.hv * p.Rw + wsl] = dg;
    if (at.routed && p.dcw) p.dcw[r.hv * p.N + at.n] = dcw;
  }
}
}  // namespace delta_grad_phase

//! grid (max_chunks, HV). Notation of chunked_delta_backward.hpp; D = ∂L/∂S' (dbuf), S entering (hbuf).
//! (The template's D is the decay policy: its log_decay tells which gates were floored.)
template <class D, class Dev>
__global__ void __launch_bounds__(delta_grad_threads) delta_grad_kernel(const delta_params<Dev> p) {
  using namespace delta_detail;
  constexpr int C = chunk_len;
  const index_t c = blockIdx.x;
  if (c >= p.rt.seg_chunk[p.S * p.P]) return;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  // row pitch of K̂, Q, dQ, dK: K + 1 for the exact fp32 tile_mma; K + 4 for the split-bf16 products,
  // whose fragment reads (rows 2t, 2t + 1, columns g, and the transposed reads) then hit distinct banks
  // (K + 1 made them up to 4-way conflicts)
  const int K = p.K, V = p.V, lk = std::is_same_v<Dev, __nv_bfloat16> ? ldk(K) : ldk1(K);
  const delta_grad_smem L(K);
  auto* recs = reinterpret_cast<chunk_record*>(smem_raw + L.recs);
  float* G = reinterpret_cast<float*>(smem_raw + L.G);
  float* b = reinterpret_cast<float*>(smem_raw + L.b);
  float* dG = reinterpret_cast<float*>(smem_raw + L.dG);
  float* db = reinterpret_cast<float*>(smem_raw + L.db);
  float* cvec = reinterpret_cast<float*>(smem_raw + L.cv);
  float* red = reinterpret_cast<float*>(smem_raw + L.red);
  float* Kn = reinterpret_cast<float*>(smem_raw + L.Kn);
  float* Qs = reinterpret_cast<float*>(smem_raw + L.Qs);
  float* dQ = reinterpret_cast<float*>(smem_raw + L.dQ);
  float* dK = reinterpret_cast<float*>(smem_raw + L.dK);
  float* Tm = reinterpret_cast<float*>(smem_raw + L.Tm);
  float* Am = reinterpret_cast<float*>(smem_raw + L.Am);
  float* X = reinterpret_cast<float*>(smem_raw + L.X);
  float* Y = reinterpret_cast<float*>(smem_raw + L.Y);
  const int tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
  const int warp = uniform_warp_index(), lane = tid & 31, nwarps = nt >> 5;
  const chunk_block<Dev> blk = begin_chunk(p, c, recs);
  const int hv = blk.hv;
  const at_chunk& o = blk.o;
  const chunk_where& at = blk.at;
  const device_source<Dev>& src = blk.src;
  const float* S = p.hbuf + o.kv;    // [K,V] entering state
  const float* Dx = p.dbuf + o.kv;   // [K,V] ∂L/∂S'
  const float* W = p.W + o.ck;       // [C,K]
  // kernel 5a's products (delta_ws): dQg, −dB_W [C,K], dB_U [C,V], dK̂ [C,K], dA, dB_U Uᵀ [C,C]
  const delta_ws w(p, c, hv);
  const float* ws1 = w.dqg;
  const float* ws2 = w.dbw;
  const float* ws3 = w.dbu;
  if (tid < C) G[tid] = p.G[o.c + tid], b[tid] = p.b[o.c + tid], dG[tid] = 0.f, db[tid] = 0.f;
  // whether some record of the chunk reads: the barrier's OR (thread i < C filled recs[i] itself)
  const bool any_r = __syncthreads_or(tid < C && recs[tid].rd) != 0;
  {  // float4 loads, a batch of them in flight per thread before the (scalar, padded-row) stores:
     // K̂, Q and kernel 5a's dK̂ = Vn Dᵀ (into dK)
    constexpr int batch = 4;
    const int kq = K / 4, n4 = C * kq;
    const auto* kn4 = reinterpret_cast<const float4*>(p.kn + o.ck);
    const auto* qn4 = reinterpret_cast<const float4*>(p.qn + o.ck);
    const auto* dk4 = reinterpret_cast<const float4*>(w.dkd);
    for (int e0 = tid; e0 < n4; e0 += batch * nt) {
      float4 xk[batch], xq[batch], xd[batch];
#pragma unroll
      for (int u = 0; u < batch; ++u) {
        const int e = e0 + u * nt;
        if (e < n4) xk[u] = kn4[e], xq[u] = qn4[e], xd[u] = dk4[e];
      }
#pragma unroll
      for (int u = 0; u < batch; ++u) {
        const int e = e0 + u * nt;
        if (e >= n4) continue;
        const int i = e / kq, a = 4 * (e % kq);
        const float r = recs[i].r;
        float* kr = Kn + i * lk + a;
        float* qr = Qs + i * lk + a;
        float* dr = dK + i * lk + a;
        kr[0] = xk[u].x, kr[1] = xk[u].y, kr[2] = xk[u].z, kr[3] = xk[u].w;
        qr[0] = xq[u].x * r, qr[1] = xq[u].y * r, qr[2] = xq[u].z * r, qr[3] = xq[u].w * r;
        dr[0] = xd[u].x, dr[1] = xd[u].y, dr[2] = xd[u].z, dr[3] = xd[u].w;
      }
    }
    // A, and kernel 5a's dA = dO Vnᵀ into X where some record reads (it is formed only then)
    delta_grad_phase::load_a_da(Am, X, p, o, w, any_r, tid, nt);
  }
  const float gl = G[C - 1], egl = __expf(gl);
  __syncthreads();

  // S' = e^{G_C} S + Kdᵀ Vn:  dKd = Vn Dᵀ (kernel 5a, in dK), c_i = ⟨dKd_i, Kd_i⟩, dG_C += Σ c_i + e^{G_C} ⟨D, S⟩
  float part = delta_grad_phase::ds_part(Dx, S, K * V / 4, tid, nt);
  part = warp_sum(part);
  if (lane == 0) red[warp] = part;
  __syncthreads();
  delta_grad_phase::decay_rows(dK, lk, Kn, lk, G, gl, cvec, dG, K, warp, nwarps, lane);
  for (int i = warp; i < C; i += nwarps)
    for (int a = lane; a < K; a += 32) dQ[i * lk + a] = 0.f;
  __syncthreads();
  float dGl = 0.f;
  if (tid == 0) dGl = delta_grad_phase::last_state_dG(red, cvec, nwarps, egl);

  // O = diag(e^G) Q S + A Vn:  dA = dO Vnᵀ (kernel 5a, in X), dQg = dO Sᵀ (kernel 5a, ws1)
  if (any_r) {
    for (int e = tid; e < C * C; e += nt) {
      const int i = e / C, j = e % C;
      Y[i * ldc + j] = X[i * ldc + j] * Am[i * ldc + j];
    }
    __syncthreads();
    if (tid < C) {  // dG from Γ inside A (the diagonal cancels); the row read from a rotated start (no bank conflicts)
      float rs = 0.f, cs = 0.f;
      for (int j = 0; j < C; ++j) rs += Y[tid * ldc + ((j + tid) & (C - 1))], cs += Y[j * ldc + tid];
      dG[tid] += rs - cs;
    }
    delta_grad_phase::form_p(X, G, tid, nt);  // P = lower_incl(dA) ⊙ Γ
    __syncthreads();
    // P is lower triangular: its blocks above the diagonal (Pᵀ's below) need no product
    tile_mma_f32<Dev, row_major_t, row_major_t>(dQ, lk, X, ldc, Kn, lk, C, K, C, false, x3_a_lower | x3_plain);  // dQ = P K̂
    tile_mma_f32<Dev, col_major_t, row_major_t>(dK, lk, X, ldc, Qs, lk, C, K, C, true, x3_a_upper | x3_plain);  // dK += Pᵀ Q
    __syncthreads();
    for (int i = warp; i < C; i += nwarps) {
      const float e = __expf(G[i]);
      float d = 0.f;
      for (int a = lane; a < K; a += 32) {
        const float y = ws1[i * K + a];
        d = fmaf(y, Qs[i * lk + a], d);
        dQ[i * lk + a] += e * y;
      }
      d = warp_sum(d);
      if (lane == 0) dG[i] += e * d;
    }
  }
  __syncthreads();

  // Vn = U − W S:  dU = dVn, dW = −dVn Sᵀ;  [dB_U | dB_W] = Tᵀ [dU | dW], so dB_U = Tᵀ dVn (kernel 5a, ws3)
  // and −dB_W = Tᵀ dVn Sᵀ = dB_U Sᵀ (kernel 5a, ws2). X (P, read) takes kernel 5a's dB_U Uᵀ meanwhile.
  delta_grad_phase::load_dbuu(X, w, tid, nt);
  delta_grad_phase::wy_terms(p, recs, at, G, b, db, dG, dK, lk, Kn, lk, ws2, ws3, warp, nwarps, lane);
  // L = I + diag(b) Mg:  dL = −[dB_U | dB_W] [U | W]ᵀ = ws2 Wᵀ − ws3 Uᵀ (ws3 Uᵀ: kernel 5a, in X)
  gemm_abt_staged<Dev>(Y, ldc, ws2, K, W, K, C, C, K, false, Tm, /*a_bf16=*/false, /*plain=*/true);  // (Tm: the stage only)
  __syncthreads();  // the stage (Tm and, for the split form's 128 rows, the start of Am) read: Am is written next
  tile_mma_f32<Dev, row_major_t, col_major_t>(Am, ldc, Kn, lk, Kn, lk, C, C, K, false, x3_c_lower | x3_plain);  // K̂ K̂ᵀ, its lower part (A is used up)
  __syncthreads();
  delta_grad_phase::dl_terms(X, Y, Am, G, b, tid, nt);  // dL ⊙ Mg, dMg ⊙ Mg, dM
  __syncthreads();
  delta_grad_phase::dl_sums(X, Y, db, dG, tid);
  tile_mma_f32<Dev, row_major_t, row_major_t>(dK, lk, Am, ldc, Kn, lk, C, K, C, true, x3_a_lower | x3_plain);  // dK += dM K̂ (dM strictly lower)
  __syncthreads();
  tile_mma_f32<Dev, col_major_t, row_major_t>(dK, lk, Am, ldc, Kn, lk, C, K, C, true, x3_a_upper | x3_plain);  // dK += dMᵀ K̂
  if (tid == 0) delta_grad_phase::suffix_dg(dG, dGl);  // dg_i = Σ_{j ≥ i} dG_j
  __syncthreads();

  // per record: raw gradients into the partials
  for (int i = warp; i < C; i += nwarps) {
    const chunk_record& r = recs[i];
    if (r.rd && (p.dq || p.dq_out || p.dcr)) {
      const float iq = p.qinv[o.c + i];
      float d = 0.f;
      for (int a = lane; a < K; a += 32) d = fmaf(p.qn[o.ck + i * K + a], dQ[i * lk + a], d);
      d = warp_sum(d);  // ⟨q̂, ∂L/∂Q⟩
      if (p.dq || p.dq_out)
        for (int a = lane; a < K; a += 32) {
          const float g = dQ[i * lk + a] - (p.l2norm ? p.qn[o.ck + i * K + a] * d : 0.f);
          if (p.dq_out) p.dq_out[r.hv * K + a] = from_f32<Dev>(r.r * iq * g);  // direct store (one slot)
          else p.dq[(r.hv * p.Rr + r.slot) * K + a] = r.r * iq * g;
        }
      if (lane == 0 && at.routed && p.dcr) p.dcr[r.hv * p.N + at.n] = p.scale * d;
    }
    if (r.wr) delta_grad_phase::store_write_grads<D>(p, r, i, o, at, src, dK, lk, Kn, lk, db, dG, lane);
  }
}

// --- 5b for bf16 inputs: delta_grad_bf16_kernel ------------------------------------------------------
//
// Kernel 5b for bf16 inputs with K a multiple of 16 (session 26): the same gradients as
// delta_grad_kernel in 8 warps and ≈ 105 KiB of shared memory at K = 128, so that two blocks share an
// SM (delta_grad_kernel: 16 warps, one block per SM at ≈ 217 KiB; session 24's ncu put it at 25 %
// occupancy, latency-bound). Every product that reads K̂ or Q is a plain bf16 product in
// delta_grad_kernel (x3_plain: both operands rounded to bf16 once), so here K̂ and Q = diag(r) Q̂ live
// in shared memory as those bf16 values (their products the same bits), and the fp32 row dot products
// that read them take k̂, q̂ from global memory (p.kn, p.qn, in L2). The layout (K = 128, fp32 unless
// said): K̂, Q bf16 [C, K + 8] (17 KiB each); dK [C, K + 4] (33 KiB); A / dM and X [C, C + 4] (17 KiB
// each); Y [C, C + 4] over Q (Q is used up in the dO phase, Y first written after it); no T and no dQ
// tile: in the dO phase warps 0–3 hold dQ = P K̂ for 16 rows each in mma accumulators, add e^{G} dQg,
// and store the q gradients from there, while warps 4–7 add Pᵀ Q into dK. The row and column sums of
// dA ⊙ A read X and A directly; −dB_W Wᵀ stages through A and X (gemm_abt_staged) before dB_U Uᵀ and
// K̂K̂ᵀ are loaded there. The products' tiles keep delta_grad_kernel's k-steps and order (the same bits
// for dK's products and K̂K̂ᵀ); the row dot products (⟨q̂, dQ⟩, ⟨dQg, Q⟩) and the block-wide sums
// (⟨D, S⟩ over 8 warps, not 16) add in another order, so the gradients are not delta_grad_kernel's bits.

inline constexpr int delta_grad2_threads = 256;  //!< kernel 5b for bf16 inputs: 8 warps, two blocks per SM
static_assert(delta_grad2_threads == delta_gprod_threads,
              "kernel 5a forms ⟨D, S⟩'s partial sums for delta_grad_bf16_kernel with its thread map (ds_by_products)");

namespace delta_detail {
__host__ __device__ constexpr int ldh(int K) { return K + 8; }  //!< bf16 rows of K̂, Q: 16-byte multiples (ldmatrix)

//! C[16 × 16 tile (i0, j0)] (+)= A·B for the plain bf16 products of delta_grad_bf16_kernel, one warp:
//! A fp32 in shared memory (LA: row_major A(i, k) = A[i·lda + k], col_major A(i, k) = A[k·lda + i]),
//! rounded to bf16 as tile_mma_x3's x3_plain rounds it; B bf16 row-major [k][n] in shared memory
//! (pitch ldb, 16-byte aligned rows), its fragments by ldmatrix.trans; the k-steps [kb, ke) in order.
template <class LA>
__device__ __forceinline__ void tile16_plain(float* C, int ldc_, const float* A, int lda, const __nv_bfloat16* B, int ldb, int i0,
                                             int j0, int kb, int ke, bool accumulate) {
  using x3_detail::bf2;
  const int lane = static_cast<int>(threadIdx.x) & 31, g = lane >> 2, t2 = (lane & 3) * 2;
  auto a = [&](int i, int k) { return A[tile_index<LA>(i, k, lda)]; };
  float d[2][4];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float* c0 = C + (i0 + g) * ldc_ + j0 + 8 * h + t2;
    const float* c1 = c0 + 8 * ldc_;
    d[h][0] = accumulate ? c0[0] : 0.f, d[h][1] = accumulate ? c0[1] : 0.f;
    d[h][2] = accumulate ? c1[0] : 0.f, d[h][3] = accumulate ? c1[1] : 0.f;
  }
  // this lane's ldmatrix row: k0 + row lane % 8 (+ 8 for blocks 1, 3), columns j0 (+ 8 for blocks 2, 3)
  const __nv_bfloat16* brow = B + ((lane & 7) + 8 * ((lane >> 3) & 1)) * ldb + j0 + 8 * (lane >> 4);
  for (int k0 = kb; k0 < ke; k0 += 16) {
    unsigned ah[4], bq[4];
    ah[0] = bf2(a(i0 + g, k0 + t2), a(i0 + g, k0 + t2 + 1));
    ah[1] = bf2(a(i0 + g + 8, k0 + t2), a(i0 + g + 8, k0 + t2 + 1));
    ah[2] = bf2(a(i0 + g, k0 + t2 + 8), a(i0 + g, k0 + t2 + 9));
    ah[3] = bf2(a(i0 + g + 8, k0 + t2 + 8), a(i0 + g + 8, k0 + t2 + 9));
    ldsm_x4_trans(bq, brow + k0 * ldb);
    const unsigned b0[2] = {bq[0], bq[1]}, b1[2] = {bq[2], bq[3]};
    x3_detail::mma_bf16_16816(d[0], ah, b0);
    x3_detail::mma_bf16_16816(d[1], ah, b1);
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float* c0 = C + (i0 + g) * ldc_ + j0 + 8 * h + t2;
    float* c1 = c0 + 8 * ldc_;
    c0[0] = d[h][0], c0[1] = d[h][1], c1[0] = d[h][2], c1[1] = d[h][3];
  }
}

//! dK[C × K] += A·K̂ over the block's warps (tile16_plain per 16 × 16 tile, tiles dealt as tile_mma_x3
//! deals them, over warps [0, nwarps) of those taking part, `warp` this one's index among them): `lower`
//! — A(i, k) = 0 for k > i (the k-steps up to the tile's diagonal block), else A(i, k) = 0 for k < i
//! (from it). The caller synchronises before and after.
template <class LA>
__device__ __forceinline__ void dk_add_plain(float* dK, int lk, const float* A, int lda, const __nv_bfloat16* Kh, int lh, int K,
                                             bool lower, int warp, int nwarps) {
  const int tn = K / 16, tiles = (chunk_len / 16) * tn;
  for (int tile = warp; tile < tiles; tile += nwarps) {
    const int i0 = (tile / tn) * 16, j0 = (tile % tn) * 16;
    tile16_plain<LA>(dK, lk, A, lda, Kh, lh, i0, j0, lower ? 0 : i0, lower ? i0 + 16 : chunk_len, true);
  }
}
}  // namespace delta_detail

struct delta_grad2_smem {
  std::size_t recs, G, b, dG, db, cv, red, Kh, Qh, Y, dK, Am, X, bytes;
  __host__ __device__ explicit delta_grad2_smem(int K) {
    using delta_detail::up16;
    const std::size_t rowh = static_cast<std::size_t>(chunk_len) * delta_detail::ldh(K) * sizeof(__nv_bfloat16);
    const std::size_t rowk = static_cast<std::size_t>(chunk_len) * delta_detail::ldk(K) * sizeof(float);
    const std::size_t cc = static_cast<std::size_t>(chunk_len) * delta_detail::ldc * sizeof(float);
    const std::size_t vec = up16(chunk_len * sizeof(float));
    recs = 0;
    G = up16(chunk_len * sizeof(chunk_record));
    b = G + vec, dG = b + vec, db = dG + vec, cv = db + vec, red = cv + vec;
    Kh = red + up16(delta_grad2_threads / 32 * sizeof(float));
    Qh = Kh + rowh, Y = Qh;  // Y over Q
    dK = Qh + (rowh > cc ? rowh : cc);
    Am = dK + rowk, X = Am + cc;  // A and X adjacent: gemm_abt_staged's stage for −dB_W Wᵀ
    bytes = X + cc;
  }
};
static_assert(delta_detail::slab_stage_bytes(2 * chunk_len) <= 2 * static_cast<std::size_t>(chunk_len) * delta_detail::ldc * sizeof(float),
              "delta_grad_bf16_kernel stages −dB_W Wᵀ through A and X");
static_assert(chunk_max_k <= 128 && chunk_len == 64, "delta_grad_bf16_kernel holds dQ of K ≤ 128 columns in 16 accumulator tiles");

//! grid (max_chunks, HV), 256 threads. For bf16 inputs with K % 16 == 0 (enqueue_delta_grad); the
//! notation of delta_grad_kernel.
template <class D>
__global__ void __launch_bounds__(delta_grad2_threads, 2) delta_grad_bf16_kernel(const delta_params<__nv_bfloat16> p) {
  using Dev = __nv_bfloat16;
  using namespace delta_detail;
  constexpr int C = chunk_len, NT = delta_grad2_threads, NKT = chunk_max_k / 8;
  const index_t c = blockIdx.x;
  if (c >= p.rt.seg_chunk[p.S * p.P]) return;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const int K = p.K, V = p.V, lk = ldk(K), lh = ldh(K);
  const delta_grad2_smem L(K);
  auto* recs = reinterpret_cast<chunk_record*>(smem_raw + L.recs);
  float* G = reinterpret_cast<float*>(smem_raw + L.G);
  float* b = reinterpret_cast<float*>(smem_raw + L.b);
  float* dG = reinterpret_cast<float*>(smem_raw + L.dG);
  float* db = reinterpret_cast<float*>(smem_raw + L.db);
  float* cvec = reinterpret_cast<float*>(smem_raw + L.cv);
  float* red = reinterpret_cast<float*>(smem_raw + L.red);
  auto* Kh = reinterpret_cast<__nv_bfloat16*>(smem_raw + L.Kh);
  auto* Qh = reinterpret_cast<__nv_bfloat16*>(smem_raw + L.Qh);
  float* Y = reinterpret_cast<float*>(smem_raw + L.Y);
  float* dK = reinterpret_cast<float*>(smem_raw + L.dK);
  float* Am = reinterpret_cast<float*>(smem_raw + L.Am);
  float* X = reinterpret_cast<float*>(smem_raw + L.X);
  const int tid = static_cast<int>(threadIdx.x), nt = NT;
  const int warp = uniform_warp_index(), lane = tid & 31, nwarps = NT / 32;
  const chunk_block<Dev> blk = begin_chunk(p, c, recs);
  const int hv = blk.hv;
  const at_chunk& o = blk.o;
  const chunk_where& at = blk.at;
  const device_source<Dev>& src = blk.src;
  const float* S = p.hbuf + o.kv;    // [K,V] entering state
  const float* Dx = p.dbuf + o.kv;   // [K,V] ∂L/∂S'
  const float* W = p.W + o.ck;       // [C,K]
  const float* kn = p.kn + o.ck;     // [C,K] k̂ (fp32: the row dot products)
  const float* qn = p.qn + o.ck;     // [C,K] q̂
  const delta_ws w(p, c, hv);        // kernel 5a's products
  const float* ws1 = w.dqg;
  const float* ws2 = w.dbw;
  const float* ws3 = w.dbu;
  if (tid < C) G[tid] = p.G[o.c + tid], b[tid] = p.b[o.c + tid], dG[tid] = 0.f, db[tid] = 0.f;
  const bool any_r = __syncthreads_or(tid < C && recs[tid].rd) != 0;
  {  // K̂ and Q = diag(r) Q̂ rounded to bf16 (the plain products' operands), kernel 5a's dK̂ = Vn Dᵀ into dK
    constexpr int batch = 4;
    const int kq = K / 4, n4 = C * kq;
    const auto* kn4 = reinterpret_cast<const float4*>(kn);
    const auto* qn4 = reinterpret_cast<const float4*>(qn);
    const auto* dk4 = reinterpret_cast<const float4*>(w.dkd);
    for (int e0 = tid; e0 < n4; e0 += batch * nt) {
      float4 xk[batch], xq[batch], xd[batch];
#pragma unroll
      for (int u = 0; u < batch; ++u) {
        const int e = e0 + u * nt;
        if (e < n4) xk[u] = kn4[e], xq[u] = qn4[e], xd[u] = dk4[e];
      }
#pragma unroll
      for (int u = 0; u < batch; ++u) {
        const int e = e0 + u * nt;
        if (e >= n4) continue;
        const int i = e / kq, a = 4 * (e % kq);
        const float r = recs[i].r;
        *reinterpret_cast<uint2*>(Kh + i * lh + a) = make_uint2(x3_detail::bf2(xk[u].x, xk[u].y), x3_detail::bf2(xk[u].z, xk[u].w));
        *reinterpret_cast<uint2*>(Qh + i * lh + a) =
            make_uint2(x3_detail::bf2(xq[u].x * r, xq[u].y * r), x3_detail::bf2(xq[u].z * r, xq[u].w * r));
        *reinterpret_cast<float4*>(dK + i * lk + a) = xd[u];
      }
    }
    delta_grad_phase::load_a_da(Am, X, p, o, w, any_r, tid, nt);
  }
  const float gl = G[C - 1], egl = __expf(gl);
  __syncthreads();

  // S' = e^{G_C} S + Kdᵀ Vn:  dKd = Vn Dᵀ (kernel 5a, in dK), c_i = ⟨dKd_i, Kd_i⟩, dG_C += Σ c_i + e^{G_C} ⟨D, S⟩
  if (p.ds_by_products) {  // ⟨D, S⟩'s warp partials from kernel 5a's first role
    if (tid < nwarps) red[tid] = w.red[tid];
  } else {
    float part = delta_grad_phase::ds_part(Dx, S, K * V / 4, tid, nt);
    part = warp_sum(part);
    if (lane == 0) red[warp] = part;
  }
  delta_grad_phase::decay_rows(dK, lk, kn, K, G, gl, cvec, dG, K, warp, nwarps, lane);
  __syncthreads();
  float dGl = 0.f;
  if (tid == 0) dGl = delta_grad_phase::last_state_dG(red, cvec, nwarps, egl);

  // O = diag(e^G) Q S + A Vn:  dA = dO Vnᵀ (kernel 5a, in X), dQg = dO Sᵀ (kernel 5a, ws1)
  if (any_r) {
    if (tid < C) {  // dG from Γ inside A (the diagonal cancels): Σ_j dA_ij A_ij − Σ_j dA_ji A_ji, rows from a rotated start
      float rs = 0.f, cs = 0.f;
      for (int j = 0; j < C; ++j) {
        const int jr = (j + tid) & (C - 1);
        rs += __fmul_rn(X[tid * ldc + jr], Am[tid * ldc + jr]);
        cs += __fmul_rn(X[j * ldc + tid], Am[j * ldc + tid]);
      }
      dG[tid] += rs - cs;
    }
    __syncthreads();  // X read before P replaces it
    delta_grad_phase::form_p(X, G, tid, nt);  // P = lower_incl(dA) ⊙ Γ
    __syncthreads();
    const int g = lane >> 2, t2 = (lane & 3) * 2;
    if (warp < 4) {
      // dQ = P K̂ (rows i0 … + 15 in accumulators; P lower triangular: the k-steps up to the diagonal
      // block), + e^{G} dQg; then the q gradients of the band's reading records
      const int i0 = 16 * warp, ra = i0 + g, rb = ra + 8;
      float acc[NKT][4];
#pragma unroll
      for (int n = 0; n < NKT; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
      const __nv_bfloat16* brow = Kh + ((lane & 7) + 8 * ((lane >> 3) & 1)) * lh + 8 * (lane >> 4);
      for (int k0 = 0; k0 <= i0; k0 += 16) {
        unsigned ah[4];
        ah[0] = x3_detail::bf2(X[ra * ldc + k0 + t2], X[ra * ldc + k0 + t2 + 1]);
        ah[1] = x3_detail::bf2(X[rb * ldc + k0 + t2], X[rb * ldc + k0 + t2 + 1]);
        ah[2] = x3_detail::bf2(X[ra * ldc + k0 + t2 + 8], X[ra * ldc + k0 + t2 + 9]);
        ah[3] = x3_detail::bf2(X[rb * ldc + k0 + t2 + 8], X[rb * ldc + k0 + t2 + 9]);
#pragma unroll
        for (int n = 0; n < NKT; n += 2) {
          if (8 * n >= K) break;
          unsigned bq[4];
          ldsm_x4_trans(bq, brow + k0 * lh + 8 * n);
          const unsigned b0[2] = {bq[0], bq[1]}, b1[2] = {bq[2], bq[3]};
          x3_detail::mma_bf16_16816(acc[n], ah, b0);
          x3_detail::mma_bf16_16816(acc[n + 1], ah, b1);
        }
      }
      const float ea = __expf(G[ra]), eb = __expf(G[rb]);
      const float rra = recs[ra].r, rrb = recs[rb].r;
      float ga = 0.f, gb = 0.f, da = 0.f, dbv = 0.f;  // ⟨dQg_i, Q_i⟩ and ⟨q̂_i, dQ_i⟩ of rows ra, rb (this lane's columns)
#pragma unroll
      for (int n = 0; n < NKT; ++n) {
        if (8 * n >= K) break;
        const int col = 8 * n + t2;
        const float2 ya = *reinterpret_cast<const float2*>(ws1 + ra * K + col), yb = *reinterpret_cast<const float2*>(ws1 + rb * K + col);
        const float2 qa = *reinterpret_cast<const float2*>(qn + ra * K + col), qb = *reinterpret_cast<const float2*>(qn + rb * K + col);
        acc[n][0] = fmaf(ea, ya.x, acc[n][0]), acc[n][1] = fmaf(ea, ya.y, acc[n][1]);
        acc[n][2] = fmaf(eb, yb.x, acc[n][2]), acc[n][3] = fmaf(eb, yb.y, acc[n][3]);
        ga = fmaf(ya.x, qa.x * rra, ga), ga = fmaf(ya.y, qa.y * rra, ga);
        gb = fmaf(yb.x, qb.x * rrb, gb), gb = fmaf(yb.y, qb.y * rrb, gb);
        da = fmaf(qa.x, acc[n][0], da), da = fmaf(qa.y, acc[n][1], da);
        dbv = fmaf(qb.x, acc[n][2], dbv), dbv = fmaf(qb.y, acc[n][3], dbv);
      }
#pragma unroll
      for (int m = 1; m <= 2; m <<= 1) {  // the row's four lanes (a quad)
        ga += __shfl_xor_sync(0xffffffffu, ga, m), gb += __shfl_xor_sync(0xffffffffu, gb, m);
        da += __shfl_xor_sync(0xffffffffu, da, m), dbv += __shfl_xor_sync(0xffffffffu, dbv, m);
      }
      if ((lane & 3) == 0) dG[ra] += ea * ga, dG[rb] += eb * gb;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = half ? rb : ra;
        const float d = half ? dbv : da;  // ⟨q̂, ∂L/∂Q⟩
        const chunk_record& r = recs[row];
        if (!(r.rd && (p.dq || p.dq_out || p.dcr))) continue;
        if (p.dq || p.dq_out) {
          const float s = r.r * p.qinv[o.c + row];
#pragma unroll
          for (int n = 0; n < NKT; ++n) {
            if (8 * n >= K) break;
            const int col = 8 * n + t2;
            float g0 = acc[n][2 * half], g1 = acc[n][2 * half + 1];
            if (p.l2norm) {
              const float2 q = *reinterpret_cast<const float2*>(qn + row * K + col);
              g0 -= q.x * d, g1 -= q.y * d;
            }
            if (p.dq_out) {  // direct store (one slot; the user's tensor: scalar stores, no alignment assumed)
              p.dq_out[r.hv * K + col] = from_f32<Dev>(s * g0), p.dq_out[r.hv * K + col + 1] = from_f32<Dev>(s * g1);
            } else *reinterpret_cast<float2*>(p.dq + (r.hv * p.Rr + r.slot) * K + col) = make_float2(s * g0, s * g1);
          }
        }
        if ((lane & 3) == 0 && at.routed && p.dcr) p.dcr[r.hv * p.N + at.n] = p.scale * d;
      }
    } else {
      dk_add_plain<col_major_t>(dK, lk, X, ldc, Qh, lh, K, /*lower=*/false, warp - 4, nwarps - 4);  // dK += Pᵀ Q (Pᵀ upper)
    }
  }
  __syncthreads();  // Q and P used up: Y (over Q) and the stage (over A and X) are free

  // Vn = U − W S:  dU = dVn, dW = −dVn Sᵀ;  [dB_U | dB_W] = Tᵀ [dU | dW], so dB_U = Tᵀ dVn (kernel 5a, ws3)
  // and −dB_W = Tᵀ dVn Sᵀ = dB_U Sᵀ (kernel 5a, ws2)
  delta_grad_phase::wy_terms(p, recs, at, G, b, db, dG, dK, lk, kn, K, ws2, ws3, warp, nwarps, lane);
  // L = I + diag(b) Mg:  dL = −[dB_U | dB_W] [U | W]ᵀ = ws2 Wᵀ − ws3 Uᵀ (ws3 Uᵀ: kernel 5a)
  gemm_abt_staged<Dev, NT>(Y, ldc, ws2, K, W, K, C, C, K, false, Am, /*a_bf16=*/false, /*plain=*/true);  // (stage: A and X)
  __syncthreads();  // the stage read: A and X are written next
  delta_grad_phase::load_dbuu(X, w, tid, nt);
  {  // K̂ K̂ᵀ, its tiles on and below the diagonal (plain, as delta_grad_kernel's x3_c_lower | x3_plain)
    const int g = lane >> 2, t2 = (lane & 3) * 2;
    for (int tile = warp; tile < (C / 16) * (C / 16); tile += nwarps) {
      const int i0 = (tile / (C / 16)) * 16, j0 = (tile % (C / 16)) * 16;
      if (j0 > i0) continue;
      float d[2][4] = {};
      for (int k0 = 0; k0 < K; k0 += 16) {
        auto pair = [&](int row, int k) { return *reinterpret_cast<const unsigned*>(Kh + row * lh + k); };
        const unsigned ah[4] = {pair(i0 + g, k0 + t2), pair(i0 + g + 8, k0 + t2), pair(i0 + g, k0 + t2 + 8), pair(i0 + g + 8, k0 + t2 + 8)};
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int j = j0 + 8 * h + g;
          const unsigned bh[2] = {pair(j, k0 + t2), pair(j, k0 + t2 + 8)};
          x3_detail::mma_bf16_16816(d[h], ah, bh);
        }
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float* c0 = Am + (i0 + g) * ldc + j0 + 8 * h + t2;
        float* c1 = c0 + 8 * ldc;
        c0[0] = d[h][0], c0[1] = d[h][1], c1[0] = d[h][2], c1[1] = d[h][3];
      }
    }
  }
  __syncthreads();
  delta_grad_phase::dl_terms(X, Y, Am, G, b, tid, nt);  // dL ⊙ Mg, dMg ⊙ Mg, dM
  __syncthreads();
  delta_grad_phase::dl_sums(X, Y, db, dG, tid);
  dk_add_plain<row_major_t>(dK, lk, Am, ldc, Kh, lh, K, /*lower=*/true, warp, nwarps);  // dK += dM K̂ (dM strictly lower)
  __syncthreads();
  dk_add_plain<col_major_t>(dK, lk, Am, ldc, Kh, lh, K, /*lower=*/false, warp, nwarps);  // dK += dMᵀ K̂
  if (tid == 0) delta_grad_phase::suffix_dg(dG, dGl);  // dg_i = Σ_{j ≥ i} dG_j
  __syncthreads();

  // per writing record: raw gradients into the partials (the q gradients went out in the dO phase)
  for (int i = warp; i < C; i += nwarps) {
    const chunk_record& r = recs[i];
    if (r.wr) delta_grad_phase::store_write_grads<D>(p, r, i, o, at, src, dK, lk, kn, K, db, dG, lane);
  }
}

// --- host side ---------------------------------------------------------------------------------------

//! Whether the chunked delta-rule kernels take this problem of a family::delta policy (else the
//! recurrent kernels run).
inline bool delta_chunked_supported(const detail::problem& pb) {
  return pb.K <= chunk_max_k && pb.K % 4 == 0 && pb.V % 4 == 0 && pb.tokens() > 0 &&
         pb.tokens() < (index_t{1} << 31) && pb.S * pb.P <= 65535;
}

template <class D, class Dev>
void set_delta_smem(int K, const char* api) {
  static const bool once = [api] {
    // sized for the largest K (chunk_max_k): the attribute is a ceiling, each launch passes its own size
    const int k = chunk_max_k;
    auto set = [api](const void* f, std::size_t bytes, const char* name) {
      check(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)), name, api);
    };
    set(reinterpret_cast<const void*>(delta_prep_kernel<D, Dev>), delta_prep_smem(k).bytes, "cudaFuncSetAttribute(delta_prep_kernel)");
    // two blocks per SM (delta_prep_smem): the largest shared-memory carveout
    check(cudaFuncSetAttribute(reinterpret_cast<const void*>(delta_prep_kernel<D, Dev>), cudaFuncAttributePreferredSharedMemoryCarveout,
                               cudaSharedmemCarveoutMaxShared),
          "cudaFuncSetAttribute(delta_prep_kernel)", api);
    set(reinterpret_cast<const void*>(delta_state_kernel<Dev>), delta_state_smem(k).bytes, "cudaFuncSetAttribute(delta_state_kernel)");
    set(reinterpret_cast<const void*>(delta_output_kernel<Dev>), delta_output_smem(k).bytes,
        "cudaFuncSetAttribute(delta_output_kernel)");
    set(reinterpret_cast<const void*>(delta_rscan_kernel<Dev>), delta_rscan_smem(k).bytes, "cudaFuncSetAttribute(delta_rscan_kernel)");
    set(reinterpret_cast<const void*>(delta_grad_products_kernel<Dev>), delta_gprod_smem_ceiling,
        "cudaFuncSetAttribute(delta_grad_products_kernel)");
    set(reinterpret_cast<const void*>(delta_grad_kernel<D, Dev>), delta_grad_smem(k).bytes, "cudaFuncSetAttribute(delta_grad_kernel)");
    if constexpr (std::is_same_v<Dev, __nv_bfloat16>) {
      // two blocks per SM (delta_grad2_smem): the largest shared-memory carveout
      const auto* f = reinterpret_cast<const void*>(delta_grad_bf16_kernel<D>);
      set(f, delta_grad2_smem(k).bytes, "cudaFuncSetAttribute(delta_grad_bf16_kernel)");
      check(cudaFuncSetAttribute(f, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared),
            "cudaFuncSetAttribute(delta_grad_bf16_kernel)", api);
    }
    return true;
  }();
  (void)once, (void)K;
}

//! Kernel 1: the per-chunk WY quantities.
template <class D, class Dev>
void enqueue_delta_prep(const delta_params<Dev>& p, cudaStream_t stream, const char* api) {
  set_delta_smem<D, Dev>(p.K, api);
  const index_t chunks = p.rt.max_chunks;
  if (chunks > 0) {
    delta_prep_kernel<D, Dev><<<dim3(static_cast<unsigned>(chunks), static_cast<unsigned>(p.HV)), delta_threads,
                             delta_prep_smem(p.K).bytes, stream>>>(p);
    check_launch("delta_prep_kernel", api);
  }
}

//! Kernel 2 alone (kernel 1's buffers are written, or will be by earlier work on `stream`).
template <class Dev>
void enqueue_delta_state_pass(const delta_params<Dev>& p, cudaStream_t stream, const char* api) {
  const dim3 grid(static_cast<unsigned>((p.V + delta_scan_tile - 1) / delta_scan_tile), static_cast<unsigned>(p.HV),
                  static_cast<unsigned>(p.S * p.P));
  delta_state_kernel<Dev><<<grid, delta_threads, delta_state_smem(p.K).bytes, stream>>>(p);
  check_launch("delta_state_kernel", api);
}

//! Whether the backward may run its two sequential passes side by side at all (tests switch it off to
//! compare with one stream; not thread-safe to change while another thread enqueues a call).
inline bool delta_side_by_side_enabled = true;

//! Whether the backward's two sequential passes — the states entering each chunk and the reverse scan,
//! `blocks` blocks each, one per (stream, value head, value tile) — run side by side on two streams
//! (side_stream.cuh). Only while both grids fit on the GPU at once: beyond that the second pass's
//! blocks wait for the first's anyway (H200, SSE-GDN n4k1s at T = 32768, 320 blocks each: 18.89 →
//! 18.97 ms side by side; GDN, 64 each: 11.98 → 9.82 ms; docs/benchmarks.md, session 11).
inline bool delta_passes_side_by_side(index_t blocks, const char* api) {
  return delta_side_by_side_enabled && side_stream::leaves_room(blocks, api);
}

//! Kernels 1–2: the per-chunk WY quantities and the states entering each chunk (and the final state).
template <class D, class Dev>
void enqueue_delta_states(const delta_params<Dev>& p, cudaStream_t stream, const char* api) {
  enqueue_delta_prep<D>(p, stream, api);
  enqueue_delta_state_pass(p, stream, api);
}

//! The chunked forward: kernels 1–3 (the record table in p.rt is built already).
template <class D, class Dev>
void enqueue_chunked_delta(const delta_params<Dev>& p, cudaStream_t stream, const char* api) {
  enqueue_delta_states<D>(p, stream, api);
  const index_t chunks = p.rt.max_chunks;
  if (chunks > 0) {
    const dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>(p.HV),
                    static_cast<unsigned>((p.V + delta_out_tile - 1) / delta_out_tile));
    delta_output_kernel<Dev><<<grid, delta_threads, delta_output_smem(p.K).bytes, stream>>>(p);
    check_launch("delta_output_kernel", api);
  }
}

//! Whether bf16 inputs with K % 16 == 0 take delta_grad_bf16_kernel (8 warps, two blocks per SM) for
//! kernel 5b rather than delta_grad_kernel (tests switch it off to compare the two; not thread-safe to
//! change while another thread enqueues a call).
inline bool delta_grad_two_blocks_enabled = true;

//! Kernel 5a's dO role alone (dA, dQg; after the states' pass, which writes S and Vn; with
//! p.dO32_by_grad it gathers dO itself, so it does not wait for the reverse scan). `dynamic_smem` ≥
//! delta_gprod_smem: more keeps its blocks off the SMs where a reverse-scan block runs (see
//! enqueue_delta_tc_bscans).
template <class Dev>
void enqueue_delta_dO_role(const delta_params<Dev>& p, std::size_t dynamic_smem, cudaStream_t stream, const char* api) {
  const index_t chunks = p.rt.max_chunks;
  if (chunks > 0) {
    delta_grad_products_kernel<Dev><<<dim3(static_cast<unsigned>(chunks), static_cast<unsigned>(p.HV)), delta_gprod_threads,
                                      dynamic_smem, stream>>>(p, 2, 1);
    check_launch("delta_grad_products_kernel", api);
  }
}

//! Kernels 5a and 5b of the backward (after the reverse scan; dO_role_done: 5a's dO role ran already,
//! enqueue_delta_dO_role).
template <class D, class Dev>
void enqueue_delta_grad(const delta_params<Dev>& p, cudaStream_t stream, const char* api, bool dO_role_done = false) {
  const index_t chunks = p.rt.max_chunks;
  if (chunks > 0) {
    bool two_blocks = false;  // kernel 5b: delta_grad_bf16_kernel (8 warps, two blocks per SM)
    if constexpr (std::is_same_v<Dev, __nv_bfloat16>) two_blocks = p.K % 16 == 0 && delta_grad_two_blocks_enabled;
    delta_params<Dev> q = p;
    q.ds_by_products = two_blocks;  // its ⟨D, S⟩ from kernel 5a's first role
    const int nroles = dO_role_done ? 2 : 3;  // roles [0, 2), and the dO role (2) unless it ran already
    delta_grad_products_kernel<Dev><<<dim3(static_cast<unsigned>(nroles * chunks), static_cast<unsigned>(p.HV)), delta_gprod_threads,
                                      delta_gprod_smem(p.K).bytes, stream>>>(q, 0, nroles);
    check_launch("delta_grad_products_kernel", api);
    const dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>(p.HV));
    if constexpr (std::is_same_v<Dev, __nv_bfloat16>) {
      if (two_blocks) {
        delta_grad_bf16_kernel<D><<<grid, delta_grad2_threads, delta_grad2_smem(p.K).bytes, stream>>>(q);
        check_launch("delta_grad_bf16_kernel", api);
        return;
      }
    }
    delta_grad_kernel<D, Dev><<<grid, delta_grad_threads, delta_grad_smem(p.K).bytes, stream>>>(p);
    check_launch("delta_grad_kernel", api);
  }
}

//! The chunked backward: kernels 1–2 (no final state), 4 and 5 into the per-slot partials. (For bf16
//! inputs chunked_delta_tc.cuh's enqueue_delta_backward runs the reverse scan on tensor cores.)
template <class D, class Dev>
void enqueue_chunked_delta_backward(const delta_params<Dev>& p, cudaStream_t stream, const char* api) {
  delta_params<Dev> fwd = p;
  fwd.state_out = nullptr, fwd.in_place = false;
  enqueue_delta_prep<D>(fwd, stream, api);
  // the states (kernel 2) and the reverse scan (kernel 4) read only kernel 1's buffers and write
  // disjoint ones (hbuf, Vn; dbuf, dVn, dh0): side by side where both grids fit
  const dim3 grid(static_cast<unsigned>((p.V + delta_scan_tile - 1) / delta_scan_tile), static_cast<unsigned>(p.HV),
                  static_cast<unsigned>(p.S * p.P));
  std::optional<side_stream::fork> f;
  if (delta_passes_side_by_side(static_cast<index_t>(grid.x) * grid.y * grid.z, api)) f.emplace(stream, api);
  enqueue_delta_state_pass(fwd, f ? f->side() : stream, api);
  delta_rscan_kernel<Dev><<<grid, delta_threads, delta_rscan_smem(p.K).bytes, stream>>>(p);
  check_launch("delta_rscan_kernel", api);
  if (f) f->join();
  enqueue_delta_grad<D>(p, stream, api);
}

}  // namespace linstate::cuda_detail
