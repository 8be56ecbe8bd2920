// linstate/cuda/kernels/chunked.cuh — the chunk-parallel forward pass of family::diagonal (gates
// none, per head, per key: decay::none, scalar, gated_key) on the GPU, over the record table of
// kernels/records.cuh. Templated on the decay policy D; Γ is the cumulative sum of D::log_decay.
//
// Every (sequence, partition) stream is cut into chunks of C = 64 records (SPEC §2.3; for a routed
// partition the records are only the tokens that write or read it). A record that reads but does not
// write enters with k = 0 and g = 0 (the state passes through it exactly); one that writes but does
// not read produces no output. The forward is four kernels (three where the intra kernel forms U_c),
// each parallel over all chunks of all streams and heads but the scan (fla's split of the work):
//
//  1. chunk_intra_kernel  — per chunk c and value head: Γ (chunk-local inclusive cumulative
//     log-decay, γ_c its last row), and from it, rounded to the types the later products take,
//       Q̃_t = q_t ⊙ e^{Γ_t}                                  → qbuf
//       K̃_j = w_j k_j ⊙ e^{γ_c − Γ_j}   (w_j the write weight)   → kbuf,  e^{γ_c} → gbuf
//       A_tj = Σ_i q_t[i] w_j k_j[i] e^{Γ_t[i] − Γ_j[i]}, j ≤ t   → abuf
//     gated_key builds A with the secondary chunking of SPEC §2.3 / §8: 16-row sub-chunks; an
//     off-diagonal block (I > J) is one product of q_I ⊙ e^{Γ_I − Γ_r} and k_J ⊙ e^{Γ_r − Γ_J} with r
//     the first row of I (both factors ≤ 1); a diagonal block is summed in fp32 for j ≤ t only, in the
//     factorised form when its Γ spans at most diag_span, else per pair. none/scalar: A = (q kᵀ) ⊙
//     w_j e^{Γ_t − Γ_j} (a scalar per pair). bf16 with gated_key takes warp_intra_tiles instead (the
//     same blocks, each warp one 16×16 tile with its fragments formed in registers; the diagonal in
//     split-bf16) and, where intra_fuses_u holds, also forms U_c below (then K̃ is not stored and
//     kernel 2 does not run). That path (intra_warp_tiles_block) copies q, k, the gate rows and v in
//     one round (cp.async), forms Γ from the staged gate rows, and then splits the block by warps
//     with no barrier of the whole block: ten warps form A's lower tiles while the other six write
//     Γ, e^{γ} and K̃ and form U_c (the off-diagonal tiles' warps then write Q̃).
//  2. chunk_kstate_kernel — per chunk, head and 64-column V tile, the chunk's own contribution
//       U_c = K̃ᵀ V                                         [K×V]   (SPEC §2.3 step 1, inner sum)
//  3. chunk_scan_kernel   — per stream, head and 512-element slice of the state (16 chunks in flight
//     per thread through ring_scan's shared-memory ring when V % 4 == 0), the sequential
//     hand-off H_{c+1} = diag(e^{γ_c}) H_c + U_c over the stream's chunks, overwriting U_c with the
//     state H_c *entering* chunk c (for 16-bit inputs the forward writes H_c rounded to the state
//     operand type into hsbuf instead: the output kernel's operand, half the bytes); the last H is the
//     final state (fp32). Elementwise, memory bound.
//  4. chunk_output_kernel — per chunk, head and 64-column V tile (SPEC §2.3 steps 2–3):
//       o_t = r_t · [ Q̃_tᵀ H_c + Σ_{j≤t} A_{tj} v_j ]      with r_t = scale × read weight.
//  2'–3'. chunk_chain_kernel — instead of U_c in kernels 1–2 and kernel 3, where chain_applies (bf16,
//     gated_key, K and V multiples of 16, v 16-byte aligned): per stream, head and 32 × 32 tile of the
//     state, U_c = K̃ᵀ V by mma.sync over the chunk's rows and the hand-off in registers, H_c stored in
//     bf16 (the same bits as kernels 1 and 3; no fp32 U_c in global memory). The intra kernel then
//     writes K̃ (kbuf) and, for a routed chunk, v of its writing rows (vbuf); an identity partition's v
//     rows are read in place.
// chunk_state_kernel forms U_c (and e^{γ_c}) from the inputs in one kernel; the backward
// (chunked_backward.cuh) runs it to recompute H_c, and its adjoint.
//
// Products run through tile_mma (tensor cores for bf16/fp16 inputs, exact fp32 FMA for fp32 inputs).
// Operand precision: the products' operands are rounded to the input type (as fla's kernels do);
// for fp16 inputs the products with the state (Q̃·H) use bf16 operands, because a state may exceed
// fp16's range. Γ, e^{…}, the state, A's diagonal blocks and all accumulation are fp32.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <linstate/dynamic.hpp>
#include <linstate/detail/router.hpp>

#include "../detail/scalar.cuh"
#include "../detail/traits.cuh"
#include "records.cuh"
#include "recurrent.cuh"
#include "router.cuh"
#include "tile_mma.cuh"

namespace linstate::cuda_detail {

inline constexpr int chunk_len = 64;       //!< C: records per chunk (the kernels' tile height)
inline constexpr int chunk_max_k = 128;    //!< K the chunked kernels hold in shared memory
inline constexpr int chunk_threads = 512;  // 16 warps: the output kernel holds one block per multiprocessor
inline constexpr int scan_threads = 128, scan_per_thread = 4, scan_depth = 8;
//! Chunks in flight per thread in the scans' shared-memory ring (ring_scan): 16 × 16 bytes × 128 threads.
inline constexpr int scan_ring = 16;

//! Operand type of the products with the state: bf16 for fp16 inputs (range), else the input type.
template <class Dev>
using state_op_t = std::conditional_t<std::is_same_v<Dev, __half>, __nv_bfloat16, Dev>;

template <class Dev>
struct chunk_params {
  index_t T = 0;
  int H = 1, HV = 1, K = 1, V = 1, N = 1, P = 1, S = 1, R = 1;
  int first_routed = 0;  // partitions below this one see every token (weights 1)
  bool shared = false, in_place = false;
  bool intra_u = false;                 // chunk_intra_kernel also forms U_c into hbuf (intra_fuses_u), no chunk_kstate_kernel
  float scale = 1.f;
  device_source<Dev> main{}, shr{};
  const Dev* v = nullptr;               // [B,T,HV,V]
  const float* cw = nullptr;            // [tokens, N] (routed)
  const float* cr = nullptr;            // [tokens, N]
  const std::uint32_t* meta = nullptr;  // [tokens, N]
  record_table rt{};
  const float* state_in = nullptr;      // [S,P,HV,K,V] or null
  float* state_out = nullptr;           // [S,P,HV,K,V] or null
  float* hbuf = nullptr;                // [max_chunks, HV, K, V]: U_c, then H_c
  state_op_t<Dev>* hsbuf = nullptr;     // [max_chunks, HV, K, V] or null: H_c rounded to the state operand type, written
                                        // by chunk_scan_kernel instead of H_c in hbuf and read by chunk_output_kernel
                                        // (the forward with 16-bit inputs: the operand it rounds H_c to anyway, half
                                        // the bytes; the bf16 backward's gradient kernels read it too; the exact
                                        // backward (fp32, fp16 inputs), which reads H_c in fp32, leaves it null)
  float* gbuf = nullptr;                // [max_chunks, HV, K] (gated_key) / [max_chunks, HV] (scalar): e^{γ_c}
  state_op_t<Dev>* qbuf = nullptr;      // [max_chunks, HV, C, chunk_kp(K)]: Q̃ = q ⊙ e^{Γ} (forward, chunk_intra_kernel)
  Dev* abuf = nullptr;                  // [max_chunks, HV, C, C]: intra-chunk scores A (forward, chunk_intra_kernel)
  Dev* kbuf = nullptr;                  // [max_chunks, HV, C, chunk_kp(K)] or null: K̃ = w k ⊙ e^{γ − Γ} (chunk_intra_kernel; for
                                        // chunk_kstate_kernel and the backward's gradient kernels)
  float* gambuf = nullptr;              // [max_chunks, HV, gamma_floats(chunk_kp(K))]: Γ, written by chunk_intra_kernel when
                                        // set (the bf16 backward's gradient kernels read it)
  Dev* vbuf = nullptr;                  // [max_chunks, HV, C, V] or null: v of a routed chunk's writing rows (0 elsewhere),
                                        // written by chunk_intra_kernel for chunk_chain_kernel
  const index_t* seq = nullptr;         // packed sequence offsets [S + 1] or null (sequence s is [s·T, (s + 1)·T))
  Dev* o = nullptr;                     // [tokens, HV, V] when R = 1
  float* o_part = nullptr;              // [tokens, HV, R, V] when R > 1
};

//! One record of a chunk as the kernels see it.
struct chunk_record {
  index_t qk;  // element offset of this token's q / k row for the block's key head: (tok·H + h)·K
  index_t hv;  // (tok·HV + hv): times V for its v / o row, times K for its g row
  int tok;     // flat token, −1 = padding
  bool wr, rd;
  float w;     // write weight (1 without a router gate)
  float r;     // scale × read weight
  int slot;    // output slot (R > 1)
};

struct chunk_where {
  int seg, part, s, n;
  bool is_shared, routed;
};

template <class Dev>
__device__ __forceinline__ chunk_where locate_chunk(const chunk_params<Dev>& p, index_t c) {
  chunk_where at;
  at.seg = p.rt.chunk_seg[c];
  at.part = at.seg / p.S, at.s = at.seg % p.S;
  at.is_shared = p.shared && at.part == 0;
  at.routed = at.part >= p.first_routed;
  at.n = at.part - (p.shared ? 1 : 0);
  return at;
}

//! The record of token `tok` (the record table's entry, < 0: no token) in the chunk stream `at`.
template <class Dev>
__device__ __forceinline__ chunk_record record_of(const chunk_params<Dev>& p, int tok, const chunk_where& at, int h, int hv) {
  chunk_record r{0, 0, tok, false, false, 0.f, 0.f, 0};
  if (r.tok >= 0) {
    r.qk = (static_cast<index_t>(r.tok) * p.H + h) * p.K;
    r.hv = static_cast<index_t>(r.tok) * p.HV + hv;
    if (at.routed) {
      const index_t m = static_cast<index_t>(r.tok) * p.N + at.n;
      const std::uint32_t f = p.meta[m];
      r.wr = f & detail::route_write, r.rd = f & detail::route_read;
      r.w = p.cw[m], r.r = p.scale * p.cr[m];
      r.slot = route_rslot(f);
    } else {
      r.wr = r.rd = true, r.w = 1.f, r.r = p.scale;
      r.slot = at.part;  // identity partitions hold the first slots in partition order
    }
  }
  return r;
}

//! Threads [0, C) fill recs[i] for record i of chunk c.
template <class Dev>
__device__ __forceinline__ void load_records(const chunk_params<Dev>& p, index_t c, const chunk_where& at, int h, int hv,
                                             chunk_record* recs) {
  const int i = static_cast<int>(threadIdx.x);
  if (i < chunk_len) recs[i] = record_of(p, p.rt.rec_tok[c * chunk_len + i], at, h, hv);
}

//! for e in [0, total): store(e, load(e)) over the block, the loads of `Batch` elements per thread
//! issued before any store: a gather from global memory then waits for one memory latency per batch
//! instead of one per element (the stores go to shared memory, which the compiler cannot prove
//! distinct from the loads' source, so it would not reorder them itself).
template <int Batch = 8, class Load, class Store>
__device__ __forceinline__ void staged_for(int total, Load&& load, Store&& store) {
  const int tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
  for (int e0 = tid; e0 < total; e0 += nt * Batch) {
    float x[Batch];
#pragma unroll
    for (int u = 0; u < Batch; ++u) {
      const int e = e0 + u * nt;
      x[u] = e < total ? load(e) : 0.f;
    }
#pragma unroll
    for (int u = 0; u < Batch; ++u) {
      const int e = e0 + u * nt;
      if (e < total) store(e, x[u]);
    }
  }
}

//! Γ of the chunk into G: [C][ld] (gated_key; columns [K, KP) zero; ld ≥ KP, default KP) or [C]
//! (scalar); rows that do not write add 0. Each λ is floored (detail::chunked_log_decay: a gate of
//! −1e30 or −inf forgets everything, as in the recurrence, instead of swamping or NaN-ing Γ). The
//! running sum is fp32 and sequential on purpose: the kernels form Γ_t − Γ_j from these fp32 rows, and
//! of a sequential fp32 sum that difference carries only the rounding of the steps between j and t.
//! An fp64 sum rounded once per row would put ulp(|Γ_t|) into every difference instead (strong decays,
//! |Γ| ≈ 500: 2e-5 relative, over SPEC §9.3's 1e-5; measured on the H200 by "chunked backward: strong
//! decays ... stay exact"). After a floored gate (|Γ| ≥ 104) the error is fp32's spacing there, ≤ 1.4e-5.
//! Ends with __syncthreads() (also for decay::none, so callers may rely on it).
//! The gate row of record i is row(i) (a `const Dev*` to its gate_width entries: in global memory, or
//! a copy staged in shared memory); chunk_cumulative_decay below passes the global rows.
template <class D, int KP, class Row>
__device__ __forceinline__ void chunk_cumulative_decay_rows(Row&& row, int K, const chunk_record* recs, float* G, int ld = KP) {
  static_assert(is_diagonal<D>, "linstate (cuda): the chunked GLA kernels run family::diagonal");
  const int tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
  if constexpr (decay_key<D>) {
    staged_for(
        chunk_len * KP,
        [&](int e) {
          const chunk_record& r = recs[e / KP];
          const int a = e % KP;
          return (r.wr && a < K) ? detail::chunked_log_decay(to_f32(D::log_decay(row(e / KP), a))) : 0.f;
        },
        [&](int e, float x) { G[(e / KP) * ld + e % KP] = x; });
    __syncthreads();
    for (int a = tid; a < KP; a += nt) {  // the same sequential sum, its loads and stores in batches of 16
      float acc = 0.f;
      for (int i0 = 0; i0 < chunk_len; i0 += 16) {
        float x[16];
#pragma unroll
        for (int u = 0; u < 16; ++u) x[u] = G[(i0 + u) * ld + a];
#pragma unroll
        for (int u = 0; u < 16; ++u) acc += x[u], x[u] = acc;
#pragma unroll
        for (int u = 0; u < 16; ++u) G[(i0 + u) * ld + a] = x[u];
      }
    }
  } else if constexpr (decay_head<D>) {
    if (tid < chunk_len) G[tid] = recs[tid].wr ? detail::chunked_log_decay(to_f32(D::log_decay(row(tid), 0))) : 0.f;
    __syncthreads();
    if (tid == 0) {
      float acc = 0.f;
      for (int i = 0; i < chunk_len; ++i) acc += G[i], G[i] = acc;
    }
  }
  __syncthreads();
}

//! Γ from the gate tensor g [tokens, HV, gate_width] in global memory.
template <class D, int KP, class Dev>
__device__ __forceinline__ void chunk_cumulative_decay(const Dev* g, int HV, int hv, int K, const chunk_record* recs, float* G,
                                                       int ld = KP) {
  (void)HV, (void)hv;
  const int width = decay_key<D> ? K : 1;  // gate_width: K per key, 1 per head
  chunk_cumulative_decay_rows<D, KP>([&](int i) { return g + recs[i].hv * width; }, K, recs, G, ld);
}

//! Γ_t[a] (0 for decay::none).
template <class D, int KP>
__device__ __forceinline__ float gamma_at(const float* G, int t, int a) {
  if constexpr (decay_key<D>) return G[t * KP + a];
  else if constexpr (decay_head<D>) return G[t];
  else return 0.f;
}

__host__ __device__ constexpr int round16(int x) { return (x + 15) / 16 * 16; }
//! The key tile of the chunked kernels for K (enqueue_chunked): 64 up to K = 64, else 128; the row
//! length of the forward's Q̃ and K̃ buffers.
__host__ __device__ constexpr int chunk_kp(int K) { return K <= 64 ? 64 : 128; }
//! Leading-dimension padding of an operand tile (keeps ldmatrix's 16-byte row starts, spreads banks).
template <class Op>
__host__ __device__ constexpr int op_pad() { return sizeof(Op) == 2 ? 8 : 4; }
__host__ __device__ constexpr std::size_t align128(std::size_t b) { return (b + 127) / 128 * 128; }
template <class D>
__host__ __device__ constexpr int gamma_floats(int KP) {
  return decay_key<D> ? chunk_len * KP : decay_head<D> ? chunk_len : 0;
}

//! Elements of T in 16 bytes.
template <class T>
inline constexpr int vec16 = static_cast<int>(16 / sizeof(T));

__device__ __forceinline__ bool aligned16(const void* ptr) { return (reinterpret_cast<std::uintptr_t>(ptr) & 15u) == 0; }

//! dst[i·ld + a] for rows i ∈ [0, rows), a ∈ [0, W): src[off(i) + a] where take(i) and a < n, else 0
//! (raw copies, no rounding). W is a multiple of vec16<T> and ld·sizeof(T) of 16. `vec`: 16-byte loads
//! (n a multiple of vec16<T>, src + off(i) 16-byte aligned for every row); otherwise element loads.
//! A thread issues all loads of a batch before its stores (one memory latency per batch).
template <class T, class Off, class Take>
__device__ __forceinline__ void stage_rows(T* dst, int ld, int rows, int W, const T* src, int n, bool vec, Off&& off,
                                           Take&& take) {
  constexpr int E = vec16<T>, Batch = 4;
  const int groups = W / E, total = rows * groups;
  const int tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
  for (int g0 = tid; g0 < total; g0 += nt * Batch) {
    uint4 x[Batch];
#pragma unroll
    for (int u = 0; u < Batch; ++u) {
      const int gi = g0 + u * nt;
      x[u] = make_uint4(0u, 0u, 0u, 0u);
      if (gi < total) {
        const int i = gi / groups, a0 = (gi % groups) * E;
        if (a0 < n && take(i)) {
          const T* s = src + off(i) + a0;
          if (vec) {
            x[u] = __ldg(reinterpret_cast<const uint4*>(s));
          } else {
            T t[E];
#pragma unroll
            for (int e = 0; e < E; ++e) t[e] = a0 + e < n ? s[e] : from_f32<T>(0.f);
            memcpy(&x[u], t, 16);
          }
        }
      }
    }
#pragma unroll
    for (int u = 0; u < Batch; ++u) {
      const int gi = g0 + u * nt;
      if (gi < total) {
        const int i = gi / groups, a0 = (gi % groups) * E;
        *reinterpret_cast<uint4*>(dst + i * ld + a0) = x[u];
      }
    }
  }
}

//! stage_rows by cp.async where `vec` (16-byte copies straight into shared memory, zero-filled where a
//! row is not taken or past n; no registers held, so every copy of a block is in flight at once);
//! otherwise stage_rows itself. The copies are complete after stage_wait() (each thread waits for its
//! own); a barrier after that publishes them to the block.
template <class T, class Off, class Take>
__device__ __forceinline__ void stage_rows_async(T* dst, int ld, int rows, int W, const T* src, int n, bool vec, Off&& off,
                                                 Take&& take) {
  if (!vec) {
    stage_rows<T>(dst, ld, rows, W, src, n, false, off, take);
    return;
  }
  constexpr int E = vec16<T>;
  const int groups = W / E, total = rows * groups;
  const int tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
  for (int gi = tid; gi < total; gi += nt) {
    const int i = gi / groups, a0 = (gi % groups) * E;
    const bool ok = a0 < n && take(i);
    const T* s = ok ? src + off(i) + a0 : src;  // nothing is read where !ok (source size 0)
    const unsigned sa = static_cast<unsigned>(__cvta_generic_to_shared(dst + i * ld + a0));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(sa), "l"(s), "r"(ok ? 16 : 0) : "memory");
  }
}

//! Waits for this thread's stage_rows_async copies.
__device__ __forceinline__ void stage_wait() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}

//! dst[0, 8) = x rounded to T (dst 16-byte aligned).
template <class T>
__device__ __forceinline__ void store8(T* dst, const float (&x)[8]) {
  if constexpr (std::is_same_v<T, float>) {
    reinterpret_cast<float4*>(dst)[0] = make_float4(x[0], x[1], x[2], x[3]);
    reinterpret_cast<float4*>(dst)[1] = make_float4(x[4], x[5], x[6], x[7]);
  } else {
    T t[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) t[u] = to_op<T>(x[u]);
    uint4 w;
    memcpy(&w, t, 16);
    *reinterpret_cast<uint4*>(dst) = w;
  }
}

//! Rows [k0, k0 + rows) and columns [j0, j0 + W) of the fp32 K×V matrix S → dst[a·ld + jj] rounded to
//! Op (0 beyond K and V); 16-byte loads when V % 4 == 0, the loads of a batch issued before its stores.
template <class Op>
__device__ __forceinline__ void stage_state(Op* dst, int ld, const float* S, int K, int V, int k0, int rows, int j0, int W) {
  const int tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
  const bool v4 = V % 4 == 0;
  const int groups = W / 4, total = rows * groups;
  constexpr int Batch = 8;
  for (int g0 = tid; g0 < total; g0 += nt * Batch) {
    float4 x[Batch];
#pragma unroll
    for (int u = 0; u < Batch; ++u) {
      const int gi = g0 + u * nt, a = gi / groups, j = j0 + (gi % groups) * 4;
      x[u] = make_float4(0.f, 0.f, 0.f, 0.f);
      if (gi < total && k0 + a < K && j < V) {
        const float* s = S + static_cast<index_t>(k0 + a) * V + j;
        if (v4) x[u] = __ldg(reinterpret_cast<const float4*>(s));
        else {
          x[u].x = s[0];
          if (j + 1 < V) x[u].y = s[1];
          if (j + 2 < V) x[u].z = s[2];
          if (j + 3 < V) x[u].w = s[3];
        }
      }
    }
#pragma unroll
    for (int u = 0; u < Batch; ++u) {
      const int gi = g0 + u * nt;
      if (gi < total) {
        const int a = gi / groups, jj = (gi % groups) * 4;
        Op* d = dst + a * ld + jj;
        d[0] = to_op<Op>(x[u].x), d[1] = to_op<Op>(x[u].y), d[2] = to_op<Op>(x[u].z), d[3] = to_op<Op>(x[u].w);
      }
    }
  }
}

// --- 1. chunk_state_kernel -----------------------------------------------------------------------

//! V columns per state block: 64. (128 for 16-bit inputs builds Γ and K̃ once for V ≤ 128 but drops
//! the kernel to one block per multiprocessor: measured 5% slower end to end on the H200.)
template <class Dev>
inline constexpr int state_tile_v = 64;

template <class D, class Dev>
struct state_smem {
  using Op = Dev;  // K̃ and V are bounded by the inputs: the input type suffices
  static constexpr int TV = state_tile_v<Dev>;
  int KP, ldk, ldv, ldc;
  std::size_t recs, G, Kt, Vt, Cs, bytes;
  __host__ __device__ explicit state_smem(int K) {
    KP = round16(K), ldk = KP + op_pad<Op>(), ldv = TV + op_pad<Op>(), ldc = TV + 4;
    recs = 0;
    G = align128(recs + chunk_len * sizeof(chunk_record));
    Kt = align128(G + gamma_floats<D>(KP) * sizeof(float));
    Vt = align128(Kt + static_cast<std::size_t>(chunk_len) * ldk * sizeof(Op));
    Cs = align128(Vt + static_cast<std::size_t>(chunk_len) * ldv * sizeof(Op));
    bytes = Cs + static_cast<std::size_t>(KP) * ldc * sizeof(float);
  }
};

//! Adj = true: the backward's adjoint of it (kernels/chunked_backward.cuh), the chunk's own part of
//! ∂L/∂H_c, W_c = Σ_t (r_t q_t ⊙ e^{Γ_t}) dO_tᵀ: reading rows instead of writing ones, q·r·e^{Γ}
//! instead of k·w·e^{γ−Γ}, p.v = dO and p.hbuf = the buffer of W; no decay is written.
template <class D, class Dev, int KP, bool Adj = false>
__global__ void __launch_bounds__(chunk_threads) chunk_state_kernel(const chunk_params<Dev> p) {
  using Op = Dev;
  constexpr int TV = state_tile_v<Dev>;
  const index_t c = blockIdx.x;
  if (c >= p.rt.seg_chunk[p.S * p.P]) return;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const int K = p.K, V = p.V, HV = p.HV;
  const state_smem<D, Dev> L(KP);  // K ≤ KP: the tiles are KP wide, zero beyond K
  auto* recs = reinterpret_cast<chunk_record*>(smem_raw + L.recs);
  float* G = reinterpret_cast<float*>(smem_raw + L.G);
  Op* Kt = reinterpret_cast<Op*>(smem_raw + L.Kt);
  Op* Vt = reinterpret_cast<Op*>(smem_raw + L.Vt);
  float* Cs = reinterpret_cast<float*>(smem_raw + L.Cs);
  const int tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
  const int hv = static_cast<int>(blockIdx.y), h = hv / (HV / p.H);
  const int j0 = static_cast<int>(blockIdx.z) * TV;

  const chunk_where at = locate_chunk(p, c);
  const device_source<Dev> src = at.is_shared ? p.shr : p.main;
  load_records(p, c, at, h, hv, recs);
  __syncthreads();
  chunk_cumulative_decay<D, KP>(src.g, HV, hv, K, recs, G);

  // K̃_j = w_j k_j ⊙ e^{γ − Γ_j}  (exponent ≤ 0); adjoint: r_t q_t ⊙ e^{Γ_t}. The raw rows first
  // (16-byte loads), then the factor in place.
  auto uses = [&](const chunk_record& r) { return Adj ? r.rd : r.wr; };
  {
    const Dev* kq = Adj ? src.q : src.k;
    const bool vk = K % vec16<Dev> == 0 && aligned16(kq);
    const bool vv = V % vec16<Dev> == 0 && aligned16(p.v);
    stage_rows<Op>(Kt, L.ldk, chunk_len, KP, kq, K, vk, [&](int i) { return recs[i].qk; }, [&](int i) { return uses(recs[i]); });
    stage_rows<Op>(Vt, L.ldv, chunk_len, TV, p.v + j0, V - j0, vv, [&](int i) { return recs[i].hv * V; },
                   [&](int i) { return uses(recs[i]); });
  }
  __syncthreads();
  for (int e = tid; e < chunk_len * K; e += nt) {
    const int i = e / K, a = e % K;
    Op& x = Kt[i * L.ldk + a];
    float f;
    if constexpr (Adj) f = recs[i].r * __expf(gamma_at<D, KP>(G, i, a));
    else f = recs[i].w * __expf(gamma_at<D, KP>(G, chunk_len - 1, a) - gamma_at<D, KP>(G, i, a));
    x = to_op<Op>(to_f32(x) * f);
  }
  __syncthreads();
  tile_mma<col_major_t, row_major_t>(Cs, L.ldc, Kt, L.ldk, Vt, L.ldv, KP, TV, chunk_len, false);
  __syncthreads();
  float* U = p.hbuf + (c * HV + hv) * static_cast<index_t>(K) * V;
  for (int e = tid; e < K * TV; e += nt) {
    const int a = e / TV, jj = e % TV, j = j0 + jj;
    if (j < V) U[static_cast<index_t>(a) * V + j] = Cs[a * L.ldc + jj];
  }
  if (!Adj && blockIdx.z == 0) {
    if constexpr (decay_key<D>) {
      for (int a = tid; a < K; a += nt) p.gbuf[(c * HV + hv) * K + a] = __expf(G[(chunk_len - 1) * KP + a]);
    } else if constexpr (decay_head<D>) {
      if (tid == 0) p.gbuf[c * HV + hv] = __expf(G[chunk_len - 1]);
    }
  }
}

// --- 2. chunk_scan_kernel ------------------------------------------------------------------------

//! cp.async of 16 bytes from global memory to the shared-memory address `dst`; `ok` false writes zeros
//! and reads nothing.
__device__ __forceinline__ void cp_async16(unsigned dst, const void* src, bool ok) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(ok ? 16 : 0) : "memory");
}

//! cp.async of 16 (4) bytes from global to shared memory; `ok` false writes zeros and reads nothing.
__device__ __forceinline__ void ring_copy16(float* s, const float* g, bool ok) {
  cp_async16(static_cast<unsigned>(__cvta_generic_to_shared(s)), g, ok);
}
__device__ __forceinline__ void ring_copy4(float* s, const float* g, bool ok) {
  const unsigned sa = static_cast<unsigned>(__cvta_generic_to_shared(s));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(sa), "l"(g), "r"(ok ? 4 : 0) : "memory");
}

//! One thread's sequential hand-off over `count` chunks of a stream, four elements of one key row
//! (V % 4 == 0): for chunk c = first, first + step, …: store(c, x) (the value entering c), then
//! x ← d_c ⊙ x + u_c, with u_c the 16 bytes at u_at(c) (`in`: the thread's elements exist; else zeros)
//! and d_c the decay at d_at(c) (gated_key: its key row's; scalar: the head's; none: 1). The inputs of
//! the next scan_ring chunks are in flight at any time, each thread copying its own into its own slots
//! of a shared-memory ring by cp.async (so no barrier: a thread waits only for its own copies) — a
//! register ring could hold 8 (issue 11 item 4: at B = 1, H = 8 the scans run 32768 threads, and the
//! bytes in flight bound their rate).
template <class D, class UAt, class DAt, class Store>
__device__ __forceinline__ void ring_scan(float (&x)[4], index_t first, index_t step, index_t count, bool in, UAt&& u_at,
                                          DAt&& d_at, Store&& store) {
  __shared__ __align__(16) float ru[scan_ring][scan_threads * 4];
  __shared__ float rd[decay_none<D> ? 1 : scan_ring][scan_threads];
  const int tid = static_cast<int>(threadIdx.x);
  auto issue = [&](index_t i, int slot) {
    if (i < count) {
      const index_t c = first + i * step;
      ring_copy16(&ru[slot][tid * 4], u_at(c), in);
      if constexpr (!decay_none<D>) ring_copy4(&rd[slot][tid], d_at(c), in);
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");  // one group per chunk, empty past the end
  };
#pragma unroll
  for (int k = 0; k < scan_ring; ++k) issue(k, k);
  int slot = 0;
  for (index_t i = 0; i < count; ++i) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(scan_ring - 1) : "memory");  // chunk i's group is complete
    const float4 u = *reinterpret_cast<const float4*>(&ru[slot][tid * 4]);
    float d = 1.f;
    if constexpr (!decay_none<D>) d = rd[slot][tid];
    const index_t c = first + i * step;
    store(c, x);
    if constexpr (decay_none<D>) x[0] += u.x, x[1] += u.y, x[2] += u.z, x[3] += u.w;
    else x[0] = fmaf(d, x[0], u.x), x[1] = fmaf(d, x[1], u.y), x[2] = fmaf(d, x[2], u.z), x[3] = fmaf(d, x[3], u.w);
    issue(i + scan_ring, slot);  // into the slot just read (its values are in registers)
    slot = slot + 1 == scan_ring ? 0 : slot + 1;
  }
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}

//! grid (⌈K·V / 512⌉, HV, S·P). A stream without records keeps its initial state (copied out of place,
//! untouched in place).
template <class D, class Dev>
__global__ void __launch_bounds__(scan_threads) chunk_scan_kernel(const chunk_params<Dev> p) {
  const int seg = static_cast<int>(blockIdx.z), hv = static_cast<int>(blockIdx.y);
  const int part = seg / p.S, s = seg % p.S;
  const int K = p.K, V = p.V, HV = p.HV;
  const index_t KV = static_cast<index_t>(K) * V;
  const index_t e0 = (static_cast<index_t>(blockIdx.x) * scan_threads + threadIdx.x) * scan_per_thread;
  const index_t sbase = ((static_cast<index_t>(s) * p.P + part) * HV + hv) * KV;
  const index_t c0 = p.rt.seg_chunk[seg], c1 = p.rt.seg_chunk[seg + 1];
  if (c0 == c1 && p.in_place) return;
  float st[scan_per_thread];
#pragma unroll
  for (int u = 0; u < scan_per_thread; ++u) {
    const index_t e = e0 + u;
    st[u] = (p.state_in && e < KV) ? p.state_in[sbase + e] : 0.f;
  }
  // The next chunks' loads are in flight while this one is stored, so the hand-off waits for one memory
  // latency per ring of chunks instead of one per chunk. With V % 4 == 0 a thread's four elements are
  // one 16-byte load and share one key row (one decay): ring_scan's shared-memory ring of scan_ring
  // chunks; otherwise a ring of registers (indexed statically through the unrolled loop) of scan_depth.
  const bool v4 = V % 4 == 0;
  static_assert(scan_per_thread == 4);
  if (v4) {  // 16-byte accesses, one decay per thread and chunk: the shared-memory ring
    const bool in = e0 < KV;
    const index_t eo = in ? e0 : 0;
    ring_scan<D>(
        st, c0, 1, c1 - c0, in, [&](index_t c) { return p.hbuf + (c * HV + hv) * KV + eo; },
        [&](index_t c) {
          if constexpr (decay_key<D>) return p.gbuf + (c * HV + hv) * K + eo / V;
          else return p.gbuf + (c * HV + hv);
        },
        [&](index_t c, const float (&x)[4]) {
          if (!in) return;
          if constexpr (tensor_core_op<state_op_t<Dev>>) {
            if (p.hsbuf) {  // H_c rounded to the state operand type (what chunk_output_kernel would round it to)
              using S = state_op_t<Dev>;
              const S t[4] = {to_op<S>(x[0]), to_op<S>(x[1]), to_op<S>(x[2]), to_op<S>(x[3])};
              uint2 w;
              memcpy(&w, t, 8);
              *reinterpret_cast<uint2*>(p.hsbuf + (c * HV + hv) * KV + e0) = w;
              return;
            }
          }
          *reinterpret_cast<float4*>(p.hbuf + (c * HV + hv) * KV + e0) = make_float4(x[0], x[1], x[2], x[3]);
        });
  } else {  // element accesses (a thread's elements may span two key rows): a register ring of scan_depth chunks
    float un[scan_depth][scan_per_thread], dn[scan_depth][scan_per_thread];
    auto fetch = [&](index_t c, float (&u_)[scan_per_thread], float (&d_)[scan_per_thread]) {
      const float* U = p.hbuf + (c * HV + hv) * KV;
#pragma unroll
      for (int u = 0; u < scan_per_thread; ++u) {
        const index_t e = e0 + u;
        u_[u] = e < KV ? U[e] : 0.f;
        if constexpr (decay_key<D>) d_[u] = e < KV ? p.gbuf[(c * HV + hv) * K + e / V] : 1.f;
        else if constexpr (decay_head<D>) d_[u] = p.gbuf[c * HV + hv];
        else d_[u] = 1.f;
      }
    };
#pragma unroll
    for (int k = 0; k < scan_depth; ++k)
      if (c0 + k < c1) fetch(c0 + k, un[k], dn[k]);
    for (index_t cb = c0; cb < c1; cb += scan_depth) {
#pragma unroll
      for (int k = 0; k < scan_depth; ++k) {
        const index_t c = cb + k;
        if (c < c1) {
          bool stored = false;
          if constexpr (tensor_core_op<state_op_t<Dev>>) {
            if (p.hsbuf) {  // H_c rounded to the state operand type
              state_op_t<Dev>* Hs = p.hsbuf + (c * HV + hv) * KV;
#pragma unroll
              for (int u = 0; u < scan_per_thread; ++u)
                if (e0 + u < KV) Hs[e0 + u] = to_op<state_op_t<Dev>>(st[u]);
              stored = true;
            }
          }
          if (!stored) {
            float* Hc = p.hbuf + (c * HV + hv) * KV;
#pragma unroll
            for (int u = 0; u < scan_per_thread; ++u)
              if (e0 + u < KV) Hc[e0 + u] = st[u];
          }
#pragma unroll
          for (int u = 0; u < scan_per_thread; ++u) {
            if constexpr (decay_none<D>) st[u] += un[k][u];
            else st[u] = fmaf(dn[k][u], st[u], un[k][u]);
          }
          if (c + scan_depth < c1) fetch(c + scan_depth, un[k], dn[k]);
        }
      }
    }
  }
  if (p.state_out) {
#pragma unroll
    for (int u = 0; u < scan_per_thread; ++u) {
      const index_t e = e0 + u;
      if (e < KV) p.state_out[sbase + e] = st[u];
    }
  }
}

// --- 3. chunk_intra_kernel -----------------------------------------------------------------------

inline constexpr int intra_threads = 512;   // 16 warps; two blocks per multiprocessor (K = 128, 16-bit inputs)
inline constexpr int output_threads = 256;  // 8 warps; three blocks per multiprocessor (K = 128, 16-bit inputs)
inline constexpr int kstate_threads = 256;  // 8 warps; three blocks per multiprocessor (K = 128, 16-bit inputs)
//! Largest |Γ_i − Γ_r| over a 16-row sub-block (r its first row) for which its diagonal block is summed
//! through the factorised form q_t e^{Γ_t − Γ_r} · w_j k_j e^{Γ_r − Γ_j} (both factors within
//! [e^−40, e^40]: normal fp32, each from an accurate expf); a sub-block beyond it (strong decays) forms
//! every e^{Γ_t − Γ_j} per pair.
inline constexpr float diag_span = 40.f;

//! The V-independent part of a chunk's output, once per chunk and value head (fla's split):
//!   Q̃ = q ⊙ e^{Γ} in the state-product operand type  → p.qbuf [chunk][hv][C][KP]
//!   A, the intra-chunk scores, lower triangle (0 above) in the input type (fp32 for fp32 inputs)
//!                                                      → p.abuf [chunk][hv][C][C]
//!   K̃ = w k ⊙ e^{γ − Γ} in the input type (chunk_kstate_kernel's operand) → p.kbuf, e^{γ} → p.gbuf
//! All are rounded to exactly the types the later products take, so splitting changes no operand.
//! gated_key: off-diagonal 16×16 blocks as one product per sub-chunk I (reference row r = 16·I, both
//! exponentials ≤ 1), diagonal blocks in fp32 for j ≤ t only — one warp per row t, lanes over the keys,
//! a shuffle reduction per (t, j); factorised (diag_span) or per pair. none/scalar: A = (q kᵀ) ⊙ w_j e^{Γ_t − Γ_j}.
//! Whether chunk_intra_kernel forms A by warp_intra_tiles (bf16 inputs, gated_key): each warp one
//! 16×16 tile of A, its operands generated from Q, K and Γ in registers (no staged X / Y copies, no
//! barriers between the tiles), the diagonal tiles in split-bf16 on tensor cores.
template <class D, class Dev>
inline constexpr bool intra_warp_tiles = decay_key<D> && std::is_same_v<Dev, __nv_bfloat16>;

//! Whether chunk_intra_kernel also forms U_c = K̃ᵀ V (so chunk_kstate_kernel does not run, and the
//! forward needs no K̃ buffer): the warp-tile path, with K and V multiples of 16 and V ≤ the key tile
//! (V's rows take the place of q's in shared memory); 16×16 mma.sync tiles stored from the accumulators.
template <class D, class Dev>
__host__ __device__ constexpr bool intra_fuses_u(int K, int V) {
  return intra_warp_tiles<D, Dev> && K % 16 == 0 && V % 16 == 0 && V <= chunk_kp(K);
}

template <class D, class Dev>
struct intra_smem {
  using Op = Dev;
  static constexpr bool diag = decay_key<D> && !intra_warp_tiles<D, Dev>;  // the staged off-diagonal form
  int KP, ldq, ldx, ldf, ldg;
  std::size_t recs, G, Qf, Kf, Xq, Yk, Kd, Af, Gr = 0, Vs = 0, bytes;
  __host__ __device__ explicit intra_smem(int K) {
    KP = round16(K), ldq = KP + op_pad<Dev>(), ldx = KP + op_pad<Op>(), ldf = chunk_len + 4;
    // Γ's rows padded by 8 floats for the warp tiles' 8-byte loads (rows g and g + 1 of a fragment
    // then fall in different banks); else packed
    ldg = intra_warp_tiles<D, Dev> ? KP + 8 : KP;
    recs = 0;
    G = align128(chunk_len * sizeof(chunk_record));
    Qf = align128(G + (decay_key<D> ? static_cast<std::size_t>(chunk_len) * ldg : gamma_floats<D>(KP)) * sizeof(float));
    Kf = align128(Qf + static_cast<std::size_t>(chunk_len) * ldq * sizeof(Dev));
    Xq = align128(Kf + static_cast<std::size_t>(chunk_len) * ldq * sizeof(Dev));
    if constexpr (intra_warp_tiles<D, Dev>) {  // A goes from the warps' accumulators to global memory
      // Gr [C][ldq]: the raw gate rows, staged with q and k (then K̃, U_c's operand); Vs [C][ldq]: v
      Gr = Xq;
      Vs = align128(Gr + static_cast<std::size_t>(chunk_len) * ldq * sizeof(Dev));
      bytes = align128(Vs + static_cast<std::size_t>(chunk_len) * ldq * sizeof(Dev));
      Yk = Kd = Af = Xq;
      return;
    }
    Yk = align128(Xq + (diag ? static_cast<std::size_t>(16) * ldx * sizeof(Op) : 0));
    // Kd (the diagonal blocks' fp32 k̃, half a chunk at a time) shares Xq/Yk's space: the diagonal
    // blocks are done before the off-diagonal ones start
    Kd = Xq;
    const std::size_t xy = diag ? static_cast<std::size_t>(chunk_len) * ldx * sizeof(Op) : 0;
    const std::size_t kd = diag ? static_cast<std::size_t>(chunk_len / 2) * KP * sizeof(float) : 0;
    Af = align128(Xq + (xy > kd ? xy : kd));
    bytes = Af + static_cast<std::size_t>(chunk_len) * ldf * sizeof(float);
  }
};

//! A of one chunk for bf16 inputs and gated_key decays, straight from the staged raw rows (Qf: q of
//! reading rows, Kf: k of writing rows, both [C][ldq], 0 elsewhere and beyond K) and Γ ([C][ldg]):
//! one warp forms tile `task` of the 16 (4 × 4 sub-chunks of 16 rows, the 10 lower ones first); a lower tile (I, J), J ≤ I,
//! is A_IJ = X_I · Y_IJᵀ with r = 16·I, X_I = q_I ⊙ e^{Γ_I − Γ_r} and Y_IJ = w_J k_J ⊙ e^{Γ_r − Γ_J}, each
//! lane forming its own fragment elements (mma.sync m16n8k16 layouts) from shared memory:
//!   * J < I: both factors ≤ 1, rounded to bf16 exactly as the staged form rounds them (one bf16 product);
//!   * J = I, Γ spanning at most diag_span over the sub-chunk: the same factors in fp32 (accurate expf),
//!     by the split-bf16 scheme of tile_mma_x3 (three bf16 products, each term within about 1e-5 of fp32);
//!   * J = I beyond diag_span (strong decays): every e^{Γ_t − Γ_j} per pair, fp32, lanes over the keys.
//! An upper tile is zero. Ag: the chunk's [C][C] block of abuf (lower triangle, 0 above, bf16).
template <int KP>
__device__ __forceinline__ void warp_intra_tile(int task, const __nv_bfloat16* Qf, const __nv_bfloat16* Kf, int ldq, const float* G,
                                                int ldg, const chunk_record* recs, __nv_bfloat16* Ag) {
  using x3_detail::mma_bf16_16816;
  using x3_detail::split2;
  constexpr int C = chunk_len, subs = C / 16, lower = subs * (subs + 1) / 2;
  static_assert(subs == 4, "warp_intra_tiles: 4 x 4 tiles of 16 x 16");
  const int lane = static_cast<int>(threadIdx.x) & 31, g = lane >> 2, t2 = (lane & 3) * 2;
  auto bf2 = [](const __nv_bfloat16* x) { return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(x)); };
  auto f2 = [](const float* x) { return *reinterpret_cast<const float2*>(x); };
  auto pack = [](float x0, float x1) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(x0, x1);
    return *reinterpret_cast<const unsigned*>(&h);
  };
  {
    if (task >= lower) {  // an upper tile: (0,1) (0,2) (0,3) (1,2) (1,3) (2,3), zero; a lane stores 8 of its 256
      const int u = task - lower, I = u < 3 ? 0 : u < 5 ? 1 : 2, J = I + 1 + u - (I == 0 ? 0 : I == 1 ? 3 : 5);
      const int row = 16 * I + (lane >> 1), col = 16 * J + (lane & 1) * 8;
      *reinterpret_cast<uint4*>(Ag + row * C + col) = make_uint4(0u, 0u, 0u, 0u);
      return;
    }
    int I = 0, J = task;
    while (J > I) J -= ++I;
    const int r = 16 * I, j0 = 16 * J;
    const float* Gr = G + r * ldg;
    float d[2][4] = {};
    bool slow = false;
    if (J == I) {  // does Γ span more than diag_span over the sub-chunk (or hold a NaN)?
      for (int e = lane; e < 16 * KP; e += 32) {
        const int i = r + e / KP, a = e % KP;
        if (!(fabsf(G[i * ldg + a] - Gr[a]) <= diag_span)) slow = true;
      }
      slow = __any_sync(0xffffffffu, slow);
    }
    if (slow) {  // per pair in fp32, lanes over the keys (t, j in the sub-chunk, j ≤ t; 0 above)
      constexpr int per = KP / 32;
      for (int t = r; t < r + 16; ++t) {
        float qt[per], gt[per];
#pragma unroll
        for (int u = 0; u < per; ++u) qt[u] = to_f32(Qf[t * ldq + lane + 32 * u]), gt[u] = G[t * ldg + lane + 32 * u];
        for (int j = r; j < r + 16; ++j) {
          float acc = 0.f;
          if (j <= t && recs[t].rd && recs[j].wr) {  // uniform over the warp
#pragma unroll
            for (int u = 0; u < per; ++u) {
              const int a = lane + 32 * u;
              acc += qt[u] * to_f32(Kf[j * ldq + a]) * __expf(gt[u] - G[j * ldg + a]);
            }
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
            acc *= recs[j].w;
          }
          if (lane == 0) Ag[t * C + j] = __float2bfloat16_rn(acc);
        }
      }
      return;
    }
    float w[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) w[h] = recs[j0 + 8 * h + g].w;
    for (int k0 = 0; k0 < KP; k0 += 16) {
      // A fragment: rows r + g (+8), key pairs k0 + t2 (+8); B fragment per 8-column half h: row j of Y
      float2 x[4], y[2][2];
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int i = r + g + 8 * (q & 1), a = k0 + t2 + 8 * (q >> 1);
        const float2 qv = bf2(Qf + i * ldq + a), gi = f2(G + i * ldg + a), gr = f2(Gr + a);
        if (J < I) x[q] = make_float2(qv.x * __expf(gi.x - gr.x), qv.y * __expf(gi.y - gr.y));
        else x[q] = make_float2(qv.x * expf(gi.x - gr.x), qv.y * expf(gi.y - gr.y));
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int j = j0 + 8 * h + g;
#pragma unroll
        for (int q = 0; q < 2; ++q) {
          const int a = k0 + t2 + 8 * q;
          const float2 kv = bf2(Kf + j * ldq + a), gj = f2(G + j * ldg + a), gr = f2(Gr + a);
          if (J < I) y[h][q] = make_float2(kv.x * w[h] * __expf(gr.x - gj.x), kv.y * w[h] * __expf(gr.y - gj.y));
          else y[h][q] = make_float2(kv.x * w[h] * expf(gr.x - gj.x), kv.y * w[h] * expf(gr.y - gj.y));
        }
      }
      if (J < I) {
        const unsigned af[4] = {pack(x[0].x, x[0].y), pack(x[1].x, x[1].y), pack(x[2].x, x[2].y), pack(x[3].x, x[3].y)};
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const unsigned bfr[2] = {pack(y[h][0].x, y[h][0].y), pack(y[h][1].x, y[h][1].y)};
          mma_bf16_16816(d[h], af, bfr);
        }
      } else {
        unsigned ah[4], al[4];
#pragma unroll
        for (int q = 0; q < 4; ++q) split2(x[q].x, x[q].y, ah[q], al[q]);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          unsigned bh[2], bl[2];
          split2(y[h][0].x, y[h][0].y, bh[0], bl[0]);
          split2(y[h][1].x, y[h][1].y, bh[1], bl[1]);
          mma_bf16_16816(d[h], al, bh);
          mma_bf16_16816(d[h], ah, bl);
          mma_bf16_16816(d[h], ah, bh);
        }
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // rows r + g and r + g + 8, columns j and j + 1 (0 above the diagonal)
      const int j = j0 + 8 * h + t2;
#pragma unroll
      for (int q = 0; q < 2; ++q) {
        const int t = r + g + 8 * q;
        const float v0 = j <= t ? d[h][2 * q] : 0.f, v1 = j + 1 <= t ? d[h][2 * q + 1] : 0.f;
        *reinterpret_cast<__nv_bfloat162*>(Ag + t * C + j) = __floats2bfloat162_rn(v0, v1);
      }
    }
  }
}

// (ldsm_x4, ldsm_x4_trans: tile_mma.cuh)

//! Waits at named barrier `id` (1 … 15; __syncthreads is 0) for `threads` threads (a multiple of 32):
//! a barrier among some warps of the block, the others going on.
__device__ __forceinline__ void named_barrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

//! chunk_intra_kernel for bf16 inputs and gated_key (intra_warp_tiles), after the records are loaded:
//!   1. one round of copies, every one in flight at once (cp.async): q of the reading rows → Qf, k of
//!      the writing rows → Kf, their raw gate rows → Gr, and (U_c) v of the writing rows → Vs;
//!   2. Γ from the staged gate rows (chunk_cumulative_decay_rows: the same λ, the same sequential sum);
//!   3. the block splits by warps, no barrier of the whole block after this point:
//!      * warps 0 … 9: one lower tile of A each (warp_intra_tile); the four diagonal ones (split-bf16,
//!        accurate exponentials: the longest) are then done, the six off-diagonal ones write Q̃ → qbuf;
//!      * warps 10 … 15: the six upper tiles (zero), Γ → gambuf, e^{γ} → gbuf, K̃ → kbuf and (U_c) → Gr,
//!        then, after a barrier of their own, U_c = K̃ᵀ V by 16 × 16 tiles (mma.sync, ldmatrix.trans) → hbuf.
//! Every value is the one the staged, whole-block order formed before (same operands, same operations,
//! same order per element and per tile): the split changes when things happen, not what they are.
template <class D, int KP, class Dev>
__device__ __forceinline__ void intra_warp_tiles_block(const chunk_params<Dev>& p, index_t c, int hv, const device_source<Dev>& src,
                                                       const intra_smem<D, Dev>& L, const chunk_record* recs, float* G, Dev* Qf,
                                                       Dev* Kf, unsigned char* smem_raw, bool routed) {
  using Sop = state_op_t<Dev>;
  constexpr int C = chunk_len, lower = (C / 16) * (C / 16 + 1) / 2, warps = intra_threads / 32;
  static_assert(warps == (C / 16) * (C / 16), "intra_warp_tiles_block: one warp per 16 x 16 tile of A");
  const int K = p.K, V = p.V, HV = p.HV, ldq = L.ldq, ldg = L.ldg;
  const int tid = static_cast<int>(threadIdx.x), warp = tid >> 5;
  Dev* Gr = reinterpret_cast<Dev*>(smem_raw + L.Gr);  // [C][ldq] raw gate rows, then K̃
  Dev* Vs = reinterpret_cast<Dev*>(smem_raw + L.Vs);  // [C][ldq] v of writing rows
  auto qk = [&](int i) { return recs[i].qk; };
  auto rd = [&](int i) { return recs[i].rd; };
  auto wr = [&](int i) { return recs[i].wr; };

  // 1. the copies
  const bool vq = K % vec16<Dev> == 0 && aligned16(src.q) && aligned16(src.k);
  const bool vg = K % vec16<Dev> == 0 && aligned16(src.g);
  const bool vv = V % vec16<Dev> == 0 && aligned16(p.v);
  stage_rows_async<Dev>(Qf, ldq, C, KP, src.q, K, vq, qk, rd);
  stage_rows_async<Dev>(Kf, ldq, C, KP, src.k, K, vq, qk, wr);
  stage_rows_async<Dev>(Gr, ldq, C, KP, src.g, K, vg, [&](int i) { return recs[i].hv * K; }, wr);
  const bool vcopy = p.vbuf != nullptr && routed;  // v of the writing rows for chunk_chain_kernel (a routed chunk's rows are a gather)
  if (p.intra_u || vcopy) stage_rows_async<Dev>(Vs, ldq, C, V, p.v, V, vv, [&](int i) { return recs[i].hv * V; }, wr);
  stage_wait();
  __syncthreads();
  // 2. Γ (ends with a barrier)
  chunk_cumulative_decay_rows<D, KP>([&](int i) { return static_cast<const Dev*>(Gr + i * ldq); }, K, recs, G, ldg);

  // 3. the split: every warp its tile of A (warps ≥ lower an upper one, zero); then the warps of the
  // diagonal tiles (the longest) are done, the six off-diagonal ones write Q̃, the six others Γ, e^{γ}
  // and K̃ and form U_c (twelve warps on U_c measured slower: 452 → 476 µs, session 12)
  Dev* Ag = p.abuf + (c * HV + hv) * static_cast<index_t>(C) * C;
  const int task = warp, lane = tid & 31;
  warp_intra_tile<KP>(task, Qf, Kf, ldq, G, ldg, recs, Ag);
  int I = 0, J = task;
  while (J > I) J -= ++I;
  if (task < lower && I == J) return;
  const bool offd = task < lower;                                // an off-diagonal tile's warp
  const int gw = offd ? task - I : task - lower;                 // its warp index in its group (0 … 5)
  constexpr int offd_threads = (lower - C / 16) * 32, others = (warps - lower) * 32;
  const int ot = gw * 32 + lane;
  if (offd) {  // Q̃ = q ⊙ e^{Γ} → qbuf
    Sop* Qo = p.qbuf + (c * HV + hv) * static_cast<index_t>(C) * KP;
    for (int e = ot; e < C * KP / 8; e += offd_threads) {
      const int i = e / (KP / 8), a0 = (e % (KP / 8)) * 8;
      float x[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        const int a = a0 + u;
        x[u] = a < K ? to_f32(Qf[i * ldq + a]) * __expf(G[i * ldg + a]) : 0.f;
      }
      store8<Sop>(Qo + i * KP + a0, x);
    }
  } else {
    if (p.gambuf) {  // Γ for the backward's gradient kernels, [C][KP] (16-byte stores)
      float4* Gg = reinterpret_cast<float4*>(p.gambuf + (c * HV + hv) * static_cast<index_t>(gamma_floats<D>(KP)));
      for (int e = ot; e < C * (KP / 4); e += others) Gg[e] = *reinterpret_cast<const float4*>(G + (e / (KP / 4)) * ldg + (e % (KP / 4)) * 4);
    }
    for (int a = ot; a < K; a += others) p.gbuf[(c * HV + hv) * K + a] = __expf(G[(C - 1) * ldg + a]);
    // K̃ = w k ⊙ e^{γ − Γ} → kbuf (when wanted) and, for U_c, over the gate rows in Gr (used up by Γ)
    if (p.kbuf || p.intra_u) {
      Dev* Ko = p.kbuf ? p.kbuf + (c * HV + hv) * static_cast<index_t>(C) * KP : nullptr;
      for (int e = ot; e < C * KP / 8; e += others) {
        const int i = e / (KP / 8), a0 = (e % (KP / 8)) * 8;
        float x[8];
#pragma unroll
        for (int u = 0; u < 8; ++u) {
          const int a = a0 + u;
          x[u] = a < K ? to_f32(Kf[i * ldq + a]) * (recs[i].w * __expf(G[(C - 1) * ldg + a] - G[i * ldg + a])) : 0.f;
        }
        if (Ko) store8<Dev>(Ko + i * KP + a0, x);
        if (p.intra_u) store8<Dev>(Gr + i * ldq + a0, x);
      }
    }
    if (vcopy) {  // the staged v rows → vbuf [C][V] (16-byte copies; V % 8 == 0 where the chain runs)
      Dev* Vo = p.vbuf + (c * HV + hv) * static_cast<index_t>(C) * V;
      for (int e = ot; e < C * (V / 8); e += others) {
        const int i = e / (V / 8), j = (e % (V / 8)) * 8;
        *reinterpret_cast<uint4*>(Vo + static_cast<index_t>(i) * V + j) = *reinterpret_cast<const uint4*>(Vs + i * ldq + j);
      }
    }
  }
  if (offd || !p.intra_u) return;
  named_barrier(1, others);  // K̃ complete (Vs since the block's barrier above)
  // U_c's 16 × 16 tiles, two m16n8k16 products per 16 rows of the chunk; both operands are the
  // transposes of their staged rows (the product runs over the chunk's rows), loaded by ldmatrix.trans:
  // matrix l / 8 of a lane's x4 load is its row l % 8 of the 8 × 8 block at (+8 rows if bit 1 / bit 0).
  using x3_detail::mma_bf16_16816;
  float* U = p.hbuf + (c * HV + hv) * static_cast<index_t>(K) * V;
  const int tv = V / 16, tiles = (K / 16) * tv, g = lane >> 2, t2 = (lane & 3) * 2, l8 = lane & 7, mi = lane >> 3;
  for (int tile = gw; tile < tiles; tile += others / 32) {
    const int a0 = (tile / tv) * 16, v0 = (tile % tv) * 16;
    float d[2][4] = {};
#pragma unroll
    for (int k0 = 0; k0 < C; k0 += 16) {
      unsigned af[4], bf[4];
      ldsm_x4_trans(af, Gr + (k0 + l8 + (mi >> 1) * 8) * ldq + a0 + (mi & 1) * 8);  // K̃ᵀ rows a0 …, columns k0 …
      ldsm_x4_trans(bf, Vs + (k0 + l8 + (mi & 1) * 8) * ldq + v0 + (mi >> 1) * 8);  // V rows k0 …, columns v0 …
      const unsigned b0[2] = {bf[0], bf[1]}, b1[2] = {bf[2], bf[3]};
      mma_bf16_16816(d[0], af, b0);
      mma_bf16_16816(d[1], af, b1);
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float* u = U + static_cast<index_t>(a0 + g) * V + v0 + 8 * h + t2;
      *reinterpret_cast<float2*>(u) = make_float2(d[h][0], d[h][1]);
      *reinterpret_cast<float2*>(u + 8 * static_cast<index_t>(V)) = make_float2(d[h][2], d[h][3]);
    }
  }
}

template <class D, class Dev, int KP>
__global__ void __launch_bounds__(intra_threads, intra_warp_tiles<D, Dev> ? 2 : 1) chunk_intra_kernel(const chunk_params<Dev> p) {
  using Op = Dev;
  using Sop = state_op_t<Dev>;
  const index_t c = blockIdx.x;
  if (c >= p.rt.seg_chunk[p.S * p.P]) return;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const int K = p.K, HV = p.HV;
  const intra_smem<D, Dev> L(KP);
  auto* recs = reinterpret_cast<chunk_record*>(smem_raw + L.recs);
  float* G = reinterpret_cast<float*>(smem_raw + L.G);
  Dev* Qf = reinterpret_cast<Dev*>(smem_raw + L.Qf);  // [C][ldq] q of reading rows (raw), 0 elsewhere
  Dev* Kf = reinterpret_cast<Dev*>(smem_raw + L.Kf);  // [C][ldq] k of writing rows (raw), 0 elsewhere
  float* Af = reinterpret_cast<float*>(smem_raw + L.Af);
  const int tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
  const int hv = static_cast<int>(blockIdx.y), h = hv / (HV / p.H);

  const chunk_where at = locate_chunk(p, c);
  const device_source<Dev> src = at.is_shared ? p.shr : p.main;
  load_records(p, c, at, h, hv, recs);
  __syncthreads();
  if constexpr (intra_warp_tiles<D, Dev>) {
    intra_warp_tiles_block<D, KP>(p, c, hv, src, L, recs, G, Qf, Kf, smem_raw, at.routed);
    return;
  }
  const bool vq = K % vec16<Dev> == 0 && aligned16(src.q) && aligned16(src.k);
  stage_rows<Dev>(Qf, L.ldq, chunk_len, KP, src.q, K, vq, [&](int i) { return recs[i].qk; }, [&](int i) { return recs[i].rd; });
  stage_rows<Dev>(Kf, L.ldq, chunk_len, KP, src.k, K, vq, [&](int i) { return recs[i].qk; }, [&](int i) { return recs[i].wr; });
  const int ldg = L.ldg;  // Γ's row stride in shared memory (gated_key)
  chunk_cumulative_decay<D, KP>(src.g, HV, hv, K, recs, G, ldg);  // ends with a barrier: Qf, Kf, G ready
  auto gam = [&](int t, int a) -> float {  // Γ_t[a] (0 for decay::none)
    if constexpr (decay_key<D>) return G[t * ldg + a];
    else if constexpr (decay_head<D>) return G[t];
    else return 0.f;
  };
  if constexpr (gamma_floats<D>(KP) > 0)
    if (p.gambuf) {  // Γ for the backward's gradient kernels, [C][KP] (16-byte stores; KP a multiple of 4)
      float4* Gg = reinterpret_cast<float4*>(p.gambuf + (c * HV + hv) * static_cast<index_t>(gamma_floats<D>(KP)));
      constexpr int rowv = decay_key<D> ? KP / 4 : chunk_len / 4, rows = decay_key<D> ? chunk_len : 1;
      for (int e = tid; e < rows * rowv; e += nt)
        Gg[e] = *reinterpret_cast<const float4*>(G + (e / rowv) * (decay_key<D> ? ldg : 0) + (e % rowv) * 4);
    }

  // Q̃ = q ⊙ e^{Γ} → qbuf
  {
    Sop* Qo = p.qbuf + (c * HV + hv) * static_cast<index_t>(chunk_len) * KP;
    for (int e = tid; e < chunk_len * KP / 8; e += nt) {
      const int i = e / (KP / 8), a0 = (e % (KP / 8)) * 8;
      float x[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        const int a = a0 + u;
        x[u] = a < K ? to_f32(Qf[i * L.ldq + a]) * __expf(gam(i, a)) : 0.f;
      }
      store8<Sop>(Qo + i * KP + a0, x);
    }
  }
  // K̃ = w k ⊙ e^{γ − Γ} → kbuf (chunk_kstate_kernel's operand), and e^{γ} → gbuf (the scan's)
  auto ktilde = [&](int i, int a) { return a < K ? to_f32(Kf[i * L.ldq + a]) * (recs[i].w * __expf(gam(chunk_len - 1, a) - gam(i, a))) : 0.f; };
  {
    Op* Ko = p.kbuf + (c * HV + hv) * static_cast<index_t>(chunk_len) * KP;
    for (int e = tid; p.kbuf && e < chunk_len * KP / 8; e += nt) {
      const int i = e / (KP / 8), a0 = (e % (KP / 8)) * 8;
      float x[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) x[u] = ktilde(i, a0 + u);
      store8<Op>(Ko + i * KP + a0, x);
    }
    if constexpr (decay_key<D>) {
      for (int a = tid; a < K; a += nt) p.gbuf[(c * HV + hv) * K + a] = __expf(G[(chunk_len - 1) * ldg + a]);
    } else if constexpr (decay_head<D>) {
      if (tid == 0) p.gbuf[c * HV + hv] = __expf(G[chunk_len - 1]);
    }
  }

  if constexpr (intra_warp_tiles<D, Dev>) {
    return;  // (intra_warp_tiles_block above)
  } else if constexpr (decay_key<D>) {
    // diagonal blocks first (they write Af's diagonal 16×16 blocks; the products below the others).
    // Per sub-block: the factorised fp32 form when its Γ spans at most diag_span, else per pair.
    __shared__ int slow[chunk_len / 16];
    float* Kd = reinterpret_cast<float*>(smem_raw + L.Kd);  // [C/2][KP] w_j k_j e^{Γ_r − Γ_j}, factorised sub-blocks
    if (tid < chunk_len / 16) slow[tid] = 0;
    __syncthreads();
    for (int e = tid; e < chunk_len * KP; e += nt) {
      const int i = e / KP, a = e % KP, r0 = i & ~15;
      if (!(fabsf(G[i * KP + a] - G[r0 * KP + a]) <= diag_span)) atomicOr(&slow[i >> 4], 1);
    }
    __syncthreads();
    const int warp = tid >> 5, lane = tid & 31, nw = nt >> 5;
    constexpr int per = KP / 32;
    for (int h0 = 0; h0 < chunk_len; h0 += chunk_len / 2) {  // rows [h0, h0 + C/2): two sub-blocks
      for (int e = tid; e < (chunk_len / 2) * KP; e += nt) {
        const int j = h0 + e / KP, a = e % KP, r0 = j & ~15;
        if (!slow[j >> 4]) Kd[(j - h0) * KP + a] = to_f32(Kf[j * L.ldq + a]) * recs[j].w * expf(G[r0 * KP + a] - G[j * KP + a]);
      }
      __syncthreads();
      for (int t = h0 + warp; t < h0 + chunk_len / 2; t += nw) {
        const int r0 = t & ~15;
        float qt[per], gt[per];
        if (!slow[t >> 4]) {  // uniform over the warp
#pragma unroll
          for (int u = 0; u < per; ++u) {
            const int a = lane + 32 * u;
            qt[u] = to_f32(Qf[t * L.ldq + a]) * expf(G[t * KP + a] - G[r0 * KP + a]);  // 0 beyond K, on rows that do not read
          }
          for (int j = r0; j <= t; ++j) {
            float acc = 0.f;
#pragma unroll
            for (int u = 0; u < per; ++u) acc = fmaf(qt[u], Kd[(j - h0) * KP + lane + 32 * u], acc);
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
            if (lane == 0) Af[t * L.ldf + j] = acc;
          }
          continue;
        }
        const bool rd = recs[t].rd;
#pragma unroll
        for (int u = 0; u < per; ++u) {
          const int a = lane + 32 * u;
          qt[u] = to_f32(Qf[t * L.ldq + a]);  // 0 beyond K and on rows that do not read
          gt[u] = G[t * KP + a];
        }
        for (int j = r0; j <= t; ++j) {
          float acc = 0.f;
          if (rd && recs[j].wr) {  // uniform over the warp
#pragma unroll
            for (int u = 0; u < per; ++u) {
              const int a = lane + 32 * u;
              acc += qt[u] * to_f32(Kf[j * L.ldq + a]) * __expf(gt[u] - G[j * KP + a]);
            }
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
            acc *= recs[j].w;
          }
          if (lane == 0) Af[t * L.ldf + j] = acc;
        }
      }
      __syncthreads();  // Kd is rewritten next (the other half, then Xq / Yk)
    }
    // off-diagonal blocks of sub-chunk I: one product of q_I ⊙ e^{Γ_I − Γ_r} and k_J ⊙ e^{Γ_r − Γ_J}
    Op* Xq = reinterpret_cast<Op*>(smem_raw + L.Xq);
    Op* Yk = reinterpret_cast<Op*>(smem_raw + L.Yk);
    for (int I = 1; I < chunk_len / 16; ++I) {
      const int r0 = 16 * I;
      for (int e = tid; e < 16 * KP; e += nt) {
        const int i = e / KP, a = e % KP;
        Xq[i * L.ldx + a] = to_op<Op>(a < K ? to_f32(Qf[(r0 + i) * L.ldq + a]) * __expf(G[(r0 + i) * KP + a] - G[r0 * KP + a]) : 0.f);
      }
      for (int e = tid; e < r0 * KP; e += nt) {
        const int j = e / KP, a = e % KP;
        Yk[j * L.ldx + a] = to_op<Op>(a < K ? to_f32(Kf[j * L.ldq + a]) * recs[j].w * __expf(G[r0 * KP + a] - G[j * KP + a]) : 0.f);
      }
      __syncthreads();
      tile_mma<row_major_t, col_major_t>(Af + r0 * L.ldf, L.ldf, Xq, L.ldx, Yk, L.ldx, 16, r0, KP, false);
      __syncthreads();
    }
  } else {
    tile_mma<row_major_t, col_major_t>(Af, L.ldf, Qf, L.ldq, Kf, L.ldq, chunk_len, chunk_len, KP, false);
    __syncthreads();
  }

  // A → abuf (0 above the diagonal)
  Op* Ag = p.abuf + (c * HV + hv) * static_cast<index_t>(chunk_len) * chunk_len;
  for (int e = tid; e < chunk_len * chunk_len / 8; e += nt) {
    const int t = e / (chunk_len / 8), j0 = (e % (chunk_len / 8)) * 8;
    float x[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      const int j = j0 + u;
      float a = 0.f;
      if (j <= t) {
        a = Af[t * L.ldf + j];
        if constexpr (!decay_key<D>) {
          a *= recs[j].w;
          if constexpr (decay_head<D>) a *= __expf(G[t] - G[j]);
        }
      }
      x[u] = a;
    }
    store8<Op>(Ag + t * chunk_len + j0, x);
  }
}

// --- 3'. chunk_kstate_kernel ---------------------------------------------------------------------

//! The forward's chunk state, U_c = K̃ᵀ V per chunk, value head and 64-column V tile, from the K̃ that
//! chunk_intra_kernel wrote (the same operand chunk_state_kernel forms, so U_c is the same): no Γ and
//! no exponentials here, 16-byte loads, three blocks per multiprocessor.
//! Adj = true (the bf16 backward, kernels/chunked_backward.cuh): the adjoint's chunk part
//! W_c = Σ_t Q̃_t (r_t dO_t)ᵀ from the Q̃ that chunk_intra_kernel wrote (p.kbuf = that qbuf, p.v = dO,
//! p.hbuf = the buffer of W): reading rows, dO rows scaled by r_t and rounded to the input type.
template <class D, class Dev>
struct kstate_smem {
  using Op = Dev;
  static constexpr int TV = 64;
  int KP, ldk, ldv, ldc;
  std::size_t recs, Kt, Vt, Cs, bytes;
  __host__ __device__ explicit kstate_smem(int K) {
    KP = round16(K), ldk = KP + op_pad<Op>(), ldv = TV + op_pad<Op>(), ldc = TV + 4;
    recs = 0;
    Kt = align128(chunk_len * sizeof(chunk_record));
    Vt = align128(Kt + static_cast<std::size_t>(chunk_len) * ldk * sizeof(Op));
    Cs = align128(Vt + static_cast<std::size_t>(chunk_len) * ldv * sizeof(Op));
    bytes = Cs + static_cast<std::size_t>(KP) * ldc * sizeof(float);
  }
};

template <class D, class Dev, int KP, bool Adj = false>
__global__ void __launch_bounds__(kstate_threads) chunk_kstate_kernel(const chunk_params<Dev> p) {
  using Op = Dev;
  static_assert(!Adj || std::is_same_v<state_op_t<Dev>, Dev>, "chunk_kstate_kernel<Adj>: Q̃ is stored in the input type");
  constexpr int TV = kstate_smem<D, Dev>::TV;
  const index_t c = blockIdx.x;
  if (c >= p.rt.seg_chunk[p.S * p.P]) return;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const int K = p.K, V = p.V, HV = p.HV;
  const kstate_smem<D, Dev> L(KP);
  auto* recs = reinterpret_cast<chunk_record*>(smem_raw + L.recs);
  Op* Kt = reinterpret_cast<Op*>(smem_raw + L.Kt);
  Op* Vt = reinterpret_cast<Op*>(smem_raw + L.Vt);
  float* Cs = reinterpret_cast<float*>(smem_raw + L.Cs);
  const int tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
  const int hv = static_cast<int>(blockIdx.y), h = hv / (HV / p.H);
  const int j0 = static_cast<int>(blockIdx.z) * TV;
  const chunk_where at = locate_chunk(p, c);
  load_records(p, c, at, h, hv, recs);
  const index_t ch = c * HV + hv;
  stage_rows<Op>(Kt, L.ldk, chunk_len, KP, p.kbuf + ch * chunk_len * KP, KP, true,
                 [](int i) { return static_cast<index_t>(i) * KP; }, [](int) { return true; });
  __syncthreads();  // recs ready
  const bool vv = V % vec16<Dev> == 0 && aligned16(p.v);
  stage_rows<Op>(Vt, L.ldv, chunk_len, TV, p.v + j0, V - j0, vv, [&](int i) { return recs[i].hv * V; },
                 [&](int i) { return Adj ? recs[i].rd : recs[i].wr; });
  __syncthreads();
  if constexpr (Adj) {  // r_t dO_t, rounded to the input type
    for (int e = tid; e < chunk_len * TV; e += nt) {
      const int i = e / TV, jj = e % TV;
      Op& x = Vt[i * L.ldv + jj];
      x = to_op<Op>(to_f32(x) * recs[i].r);
    }
    __syncthreads();
  }
  tile_mma<col_major_t, row_major_t>(Cs, L.ldc, Kt, L.ldk, Vt, L.ldv, KP, TV, chunk_len, false);
  __syncthreads();
  float* U = p.hbuf + ch * static_cast<index_t>(K) * V;
  if (V % 4 == 0) {
    for (int e = tid; e < K * (TV / 4); e += nt) {
      const int a = e / (TV / 4), jj = (e % (TV / 4)) * 4, j = j0 + jj;
      if (j < V) {
        const float* cs = Cs + a * L.ldc + jj;
        *reinterpret_cast<float4*>(U + static_cast<index_t>(a) * V + j) = make_float4(cs[0], cs[1], cs[2], cs[3]);
      }
    }
  } else {
    for (int e = tid; e < K * TV; e += nt) {
      const int a = e / TV, jj = e % TV, j = j0 + jj;
      if (j < V) U[static_cast<index_t>(a) * V + j] = Cs[a * L.ldc + jj];
    }
  }
}

// --- 2'. chunk_chain_kernel ---------------------------------------------------------------------

//! The chain block's tile of the state: chain_tk key rows × chain_tv value columns, a warp per 16 × 16
//! block; chain_depth stages of copies, chain_depth − 2 chunks in flight. 32 × 32 at B = 1, H = 8,
//! K = V = 128 makes 128 blocks, one per multiprocessor, bound by L2's bandwidth (ncu 82 %: each
//! chunk's K̃ rows are read by V / 32 blocks, its v rows by K / 32); 64 × 32 (eight warps) halves the
//! blocks and reads 25 % less from L2 but took 250 µs for GLA at T = 32768 against 174 (session 20,
//! call 4: half the multiprocessors, each walking twice the tiles).
inline constexpr int chain_tk = 32, chain_tv = 32, chain_depth = 8;
inline constexpr int chain_threads = (chain_tk / 16) * (chain_tv / 16) * 32;
static_assert(chain_depth % 2 == 0 && chain_depth >= 4, "chunk_chain_kernel takes its chunks two at a time");
//! Row lengths (bf16) of a stage's operand tiles: 8 elements of padding (80-byte rows at 32 columns, 144
//! at 64: the eight rows of an ldmatrix block fall in distinct banks).
inline constexpr int chain_ldk = chain_tk + 8, chain_ldv = chain_tv + 8;
//! Dynamic shared memory of chunk_chain_kernel: chain_depth stages of K̃, v (bf16) and e^{γ} (fp32).
inline constexpr std::size_t chain_stage_bytes = chunk_len * (chain_ldk + chain_ldv) * 2 + chain_tk * sizeof(float);
inline constexpr std::size_t chain_smem_bytes = chain_depth * chain_stage_bytes;

//! Whether chunk_chain_kernel forms U_c and the hand-off (instead of the intra kernel's U_c and
//! chunk_scan_kernel): the warp-tile path (bf16, gated_key) with K and V multiples of 16 and V within
//! the key tile, v 16-byte aligned, H_c wanted in bf16 (hsbuf), K̃ kept (kbuf) and, where there are
//! routed partitions, their v rows copied (vbuf). The callers size their buffers by the same rule
//! (chain_possible), and then need no fp32 U_c buffer (hbuf).
template <class D, class Dev>
inline bool chain_possible(int K, int V, const void* v) {
  return intra_fuses_u<D, Dev>(K, V) && (reinterpret_cast<std::uintptr_t>(v) & 15u) == 0;
}
template <class D, class Dev>
inline bool chain_applies(const chunk_params<Dev>& p) {
  return chain_possible<D, Dev>(p.K, p.V, p.v) && p.hsbuf != nullptr && p.kbuf != nullptr &&
         (p.vbuf != nullptr || p.first_routed >= p.P);
}

//! The chunk states and their hand-off in one pass, per stream, value head and chain_tk × chain_tv tile
//! of the state (grid (⌈K/32⌉·⌈V/32⌉, HV, S·P), a warp per 16 × 16 block of it in mma accumulators):
//! over the stream's chunks in order, store H_c (rounded to bf16 → hsbuf), then
//!   H_{c+1} = diag(e^{γ_c}) H_c + U_c,   U_c = K̃_cᵀ V_c   (SPEC §2.3 step 1)
//! with U_c formed from zero by the same m16n8k16 products over the chunk's rows in the same order as
//! the intra kernel's U_c tiles, and the update the same fmaf as chunk_scan_kernel's: the states are
//! bit for bit those of the intra kernel's U_c followed by the scan, without U_c's fp32 round trip
//! through global memory (2 × 4 bytes per state element and chunk). The operands: K̃ from kbuf (the
//! intra kernel's), V from the input rows themselves for an identity partition (token t0 + 64·(c − c0)
//! + i of the stream's sequence; zeros past its end) or, for a routed one, the intra kernel's copy of
//! the writing rows (vbuf: the records are a gather). chain_depth − 2 chunks' copies are in flight
//! (cp.async into a ring of stages; each thread's sources and destinations formed once and moved by a
//! chunk per round); two chunks per barrier, their products in flight together. A stream without
//! records keeps its initial state (copied out of place, untouched in place); the final state is
//! written in fp32.
//!
//! Adj = true: the backward's adjoint (kernels/chunked_backward.cuh, steps 2–3), walking the chunks
//! backwards from D = dht (state_in): store D_c (bf16 → hsbuf, there the backward's dsbuf), then
//!   D ← diag(e^{γ_c}) D + W_c,   W_c = Σ_t Q̃_t (r_t dO_t)ᵀ
//! with Q̃ in kbuf (there the forward's qbuf; 0 on rows that do not read) and dO in v: an identity
//! partition's raw rows, r_t = scale applied to the fp32 product (chunk_kstate_kernel<Adj> rounds
//! scale · dO to bf16 first instead: one rounding less here), a routed one's r_t dO_t rounded to bf16
//! in vbuf (chunk_read_rows_kernel; 0 on rows that do not read); the last D (dh0) into state_out.
template <class D, class Dev, bool Adj = false>
__global__ void __launch_bounds__(chain_threads) chunk_chain_kernel(const chunk_params<Dev> p) {
  static_assert(decay_key<D> && std::is_same_v<Dev, __nv_bfloat16>, "chunk_chain_kernel: bf16 inputs, per-key decays");
  using x3_detail::mma_bf16_16816;
  constexpr int C = chunk_len, TK = chain_tk, TV = chain_tv, LDK = chain_ldk, LDV = chain_ldv, DEPTH = chain_depth;
  constexpr int NT = chain_threads;
  // copies of 16 bytes: PK (PV) per operand row, RK (RV) rows per pass of the block, NK (NV) passes
  constexpr int PK = TK / 8, PV = TV / 8, RK = NT / PK, RV = NT / PV, NK = C / RK, NV = C / RV;
  static_assert(NT % PK == 0 && NT % PV == 0 && C % RK == 0 && C % RV == 0 && TK / 4 <= NT, "chunk_chain_kernel: the copies divide");
  constexpr unsigned SK = C * LDK * sizeof(Dev), SV = C * LDV * sizeof(Dev);  // bytes of one stage's operand tiles
  extern __shared__ __align__(128) unsigned char smem_raw[];
  // [DEPTH] stages of K̃ (Q̃) rows [C][LDK] (the tile's key columns), then of v (dO) rows [C][LDV] (its
  // value columns), then of e^{γ_c} [TK] (its key rows)
  const unsigned sK = static_cast<unsigned>(__cvta_generic_to_shared(smem_raw)), sV = sK + DEPTH * SK, sD = sV + DEPTH * SV;
  const float* Dsm = reinterpret_cast<const float*>(smem_raw + DEPTH * (SK + SV));
  const int seg = static_cast<int>(blockIdx.z), hv = static_cast<int>(blockIdx.y);
  const int part = seg / p.S, s = seg % p.S;
  const int K = p.K, V = p.V, HV = p.HV, KP = chunk_kp(K);
  const int tv = (V + TV - 1) / TV;
  const int k0 = (static_cast<int>(blockIdx.x) / tv) * TK, v0 = (static_cast<int>(blockIdx.x) % tv) * TV;
  const index_t KV = static_cast<index_t>(K) * V;
  const index_t c0 = p.rt.seg_chunk[seg], c1 = p.rt.seg_chunk[seg + 1];
  const int count = static_cast<int>(c1 - c0);
  if (count == 0 && p.in_place) return;
  const bool routed = part >= p.first_routed;
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t2 = (lane & 3) * 2, l8 = lane & 7, mi = lane >> 3;
  const int ar = (warp / (TV / 16)) * 16, vc = (warp % (TV / 16)) * 16;  // the warp's 16 × 16 within the tile
  const int a = k0 + ar, vv = v0 + vc;                    // its first key row and value column
  const bool active = a < K && vv < V;
  const index_t sbase = ((static_cast<index_t>(s) * p.P + part) * HV + hv) * KV;
  const index_t cfirst = Adj ? c1 - 1 : c0;  // the first chunk walked; then one chunk back (Adj) or on per step
  const index_t dir = Adj ? -1 : 1;

  // The copies: this thread's rows rk0 + RK·n of K̃ at columns ck … ck + 7 and rv0 + RV·n of v at cv …
  // cv + 7 (16 bytes each); zero-filled beyond K, V and (identity partition) the sequence's end. The
  // sources move by one chunk per copy round (steps in elements, int: a chunk of a value head is far
  // below 2^31 elements); a predicate that is off points the copy at a valid base and reads nothing.
  const int rk0 = tid / PK, ck = (tid % PK) * 8, rv0 = tid / PV, cv = (tid % PV) * 8;
  const bool okk = k0 + ck < K, okc = v0 + cv < V;
  const Dev* kp = p.kbuf + ((cfirst * HV + hv) * C + rk0) * KP + k0 + ck;
  const int kstep = static_cast<int>(dir) * HV * C * KP, krow = RK * KP;
  const Dev* vp;
  int vstep, vrow, left = C;  // left: rows of the sequence from this thread's row rv0 on (identity partition)
  if (routed) {
    vp = p.vbuf + ((cfirst * HV + hv) * C + rv0) * V + v0 + cv;
    vstep = static_cast<int>(dir) * HV * C * V, vrow = RV * V;
  } else {
    index_t t0, t1;
    sequence_range(p.seq, p.T, s, t0, t1);
    const index_t tok = t0 + (cfirst - c0) * C + rv0;
    left = static_cast<int>(t1 - tok);
    vp = p.v + (tok * HV + hv) * V + v0 + cv;
    vstep = static_cast<int>(dir) * C * HV * V, vrow = RV * HV * V;
  }
  const int lstep = routed ? 0 : -static_cast<int>(dir) * C;
  const float* dp = p.gbuf + (cfirst * HV + hv) * K + k0 + 4 * (tid % (TK / 4));
  const bool cd = tid < TK / 4, okd = cd && k0 + 4 * tid < K;
  const int dstep = static_cast<int>(dir) * HV * K;
  const unsigned cK = sK + (rk0 * LDK + ck) * sizeof(Dev), cV = sV + (rv0 * LDV + cv) * sizeof(Dev), cD = sD + 16 * tid;
  // the copies of walk index j into stage st (a constant where the loops below are unrolled), one commit
  // group (empty past the end)
  auto issue = [&](int j, unsigned st) {
    if (j < count) {
#pragma unroll
      for (int n = 0; n < NK; ++n) cp_async16(cK + st * SK + n * RK * LDK * sizeof(Dev), okk ? kp + n * krow : p.kbuf, okk);
#pragma unroll
      for (int n = 0; n < NV; ++n) {
        const bool ok = okc && left > n * RV;
        cp_async16(cV + st * SV + n * RV * LDV * sizeof(Dev), ok ? vp + n * vrow : p.kbuf, ok);
      }
      if (cd) cp_async16(cD + st * (TK * 4), okd ? dp : p.gbuf, okd);
      kp += kstep, vp += vstep, dp += dstep, left += lstep;
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
  };

  // the warp's quarter of H: rows a + g (h[.][0, 1]) and a + g + 8 (h[.][2, 3]), columns vv + 8·n + t2, + 1
  const int hoff = (a + g) * V + vv + t2;  // of element h[0][0] within a chunk's [K][V] block
  float h[2][4];
#pragma unroll
  for (int n = 0; n < 2; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) h[n][e] = (active && p.state_in) ? p.state_in[sbase + hoff + (e >> 1) * 8 * V + 8 * n + (e & 1)] : 0.f;
  __nv_bfloat16* hp = p.hsbuf + (cfirst * HV + hv) * KV + hoff;
  const int hstep = static_cast<int>(dir * HV * KV);
  // Adj, identity partition: W_c = scale · Σ_t Q̃_t dO_tᵀ, the scale applied to the fp32 product
  const bool scaled = Adj && !routed;
  const float wscale = p.scale;
  // ldmatrix.trans row addresses of this lane (stage 0, rows 0 … 15 of the chunk): K̃ᵀ's 16 × 16 block at
  // key rows ar …, V's at value columns vc …; matrix l / 8 is row l % 8 of the 8 × 8 block (+8 rows / +8 columns)
  const unsigned lK = sK + ((l8 + (mi >> 1) * 8) * LDK + ar + (mi & 1) * 8) * sizeof(Dev);
  const unsigned lV = sV + ((l8 + (mi & 1) * 8) * LDV + vc + (mi >> 1) * 8) * sizeof(Dev);
  // U (W) of the chunk in stage st: from zero, the chunk's rows in steps of 16 (the intra kernel's order)
  auto product = [&](unsigned st, float (&u)[2][4]) {
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) u[n][e] = 0.f;
#pragma unroll
    for (int kk = 0; kk < C; kk += 16) {
      unsigned af[4], bf[4];
      ldsm_x4_trans(af, lK + st * SK + kk * LDK * sizeof(Dev));
      ldsm_x4_trans(bf, lV + st * SV + kk * LDV * sizeof(Dev));
      const unsigned b0[2] = {bf[0], bf[1]}, b1[2] = {bf[2], bf[3]};
      mma_bf16_16816(u[0], af, b0);
      mma_bf16_16816(u[1], af, b1);
    }
  };
  // store H_c (bf16) and hand off: H ← diag(e^{γ_c}) H + U_c
  auto step = [&](unsigned st, const float (&u)[2][4]) {
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int r = 0; r < 2; ++r)
        *reinterpret_cast<__nv_bfloat162*>(hp + r * 8 * V + 8 * n) =
            __halves2bfloat162(to_op<__nv_bfloat16>(h[n][2 * r]), to_op<__nv_bfloat16>(h[n][2 * r + 1]));
    hp += hstep;
    const float d0 = Dsm[st * TK + ar + g], d1 = Dsm[st * TK + ar + g + 8];
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) h[n][e] = fmaf(e < 2 ? d0 : d1, h[n][e], scaled ? wscale * u[n][e] : u[n][e]);
  };

#pragma unroll
  for (int j = 0; j < DEPTH - 2; ++j) issue(j, static_cast<unsigned>(j));
  // walk indices i + j, i + j + 1 per round: stage (i + j) % DEPTH = j, a constant of the unrolled loop
  for (int i = 0; i < count; i += DEPTH) {
#pragma unroll
    for (int j = 0; j < DEPTH; j += 2) {
      if (i + j < count) {
        asm volatile("cp.async.wait_group %0;\n" ::"n"(DEPTH - 4) : "memory");  // walk indices i + j, + 1 complete
        __syncthreads();  // … for every thread's copies; every warp is past the previous round (its stages free)
        issue(i + j + DEPTH - 2, static_cast<unsigned>((j + DEPTH - 2) % DEPTH));
        issue(i + j + DEPTH - 1, static_cast<unsigned>((j + DEPTH - 1) % DEPTH));
        if (active) {
          const bool two = i + j + 1 < count;
          float u0[2][4], u1[2][4];
          product(static_cast<unsigned>(j), u0);
          if (two) product(static_cast<unsigned>(j + 1), u1);
          step(static_cast<unsigned>(j), u0);
          if (two) step(static_cast<unsigned>(j + 1), u1);
        }
      }
    }
  }
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
  if (p.state_out && active) {
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) p.state_out[sbase + hoff + (e >> 1) * 8 * V + 8 * n + (e & 1)] = h[n][e];
  }
}

//! The adjoint chain's operand rows of a routed chunk (chunk_chain_kernel<Adj>): vbuf[c][hv][i] =
//! r_i dO_i rounded to bf16 for a record that reads, 0 otherwise (as chunk_kstate_kernel<Adj> stages
//! them); grid (max_chunks, HV), blocks of identity partitions return at once.
template <class Dev>
__global__ void __launch_bounds__(256) chunk_read_rows_kernel(const chunk_params<Dev> p) {
  const index_t c = blockIdx.x;
  if (c >= p.rt.seg_chunk[p.S * p.P]) return;
  const chunk_where at = locate_chunk(p, c);
  if (!at.routed) return;
  __shared__ chunk_record recs[chunk_len];
  const int V = p.V, HV = p.HV, hv = static_cast<int>(blockIdx.y), h = hv / (HV / p.H);
  load_records(p, c, at, h, hv, recs);
  __syncthreads();
  Dev* out = p.vbuf + (c * HV + hv) * static_cast<index_t>(chunk_len) * V;
  for (int e = static_cast<int>(threadIdx.x); e < chunk_len * (V / 8); e += static_cast<int>(blockDim.x)) {
    const int i = e / (V / 8), j = (e % (V / 8)) * 8;
    float x[8] = {};
    if (recs[i].rd) {
      const uint4 raw = *reinterpret_cast<const uint4*>(p.v + recs[i].hv * V + j);
      Dev in[8];
      memcpy(in, &raw, 16);
#pragma unroll
      for (int u = 0; u < 8; ++u) x[u] = to_f32(in[u]) * recs[i].r;
    }
    store8<Dev>(out + static_cast<index_t>(i) * V + j, x);
  }
}

// --- 4. chunk_output_kernel ----------------------------------------------------------------------

//! V columns per output block.
inline constexpr int output_tile_v = 64;

template <class D, class Dev>
struct output_smem {
  using Op = Dev;
  using Sop = state_op_t<Dev>;
  static constexpr int TV = output_tile_v;
  int KP, ldx, ldy, lda, ldf;
  std::size_t recs, Xs, Ys, Ao, Vo, Of, bytes;
  __host__ __device__ explicit output_smem(int K) {
    KP = round16(K), ldx = KP + op_pad<Sop>(), ldy = TV + op_pad<Op>(), lda = chunk_len + op_pad<Op>(), ldf = TV + 4;
    recs = 0;
    Xs = align128(chunk_len * sizeof(chunk_record));
    Ys = align128(Xs + static_cast<std::size_t>(chunk_len) * ldx * sizeof(Sop));
    Ao = align128(Ys + static_cast<std::size_t>(KP) * ldy * sizeof(Sop));
    Vo = align128(Ao + static_cast<std::size_t>(chunk_len) * lda * sizeof(Op));
    Of = align128(Vo + static_cast<std::size_t>(chunk_len) * ldy * sizeof(Op));
    bytes = Of + static_cast<std::size_t>(chunk_len) * ldf * sizeof(float);
  }
};

//! Per chunk, value head and 64-column V tile: O = Q̃ H_c + A V (one accumulator per 16×16 tile),
//! then the read scale and the store. Q̃ and A come from chunk_intra_kernel; H_c (fp32) is rounded to
//! the state operand type as it is staged.
template <class D, class Dev, int KP>
__global__ void __launch_bounds__(output_threads) chunk_output_kernel(const chunk_params<Dev> p) {
  using Op = Dev;
  using Sop = state_op_t<Dev>;
  constexpr int TV = output_tile_v;
  const index_t c = blockIdx.x;
  if (c >= p.rt.seg_chunk[p.S * p.P]) return;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const int K = p.K, V = p.V, HV = p.HV;
  const output_smem<D, Dev> L(KP);
  auto* recs = reinterpret_cast<chunk_record*>(smem_raw + L.recs);
  Sop* Xs = reinterpret_cast<Sop*>(smem_raw + L.Xs);
  Sop* Ys = reinterpret_cast<Sop*>(smem_raw + L.Ys);
  Op* Ao = reinterpret_cast<Op*>(smem_raw + L.Ao);
  Op* Vo = reinterpret_cast<Op*>(smem_raw + L.Vo);
  float* Of = reinterpret_cast<float*>(smem_raw + L.Of);
  const int tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
  const int hv = static_cast<int>(blockIdx.y), h = hv / (HV / p.H);
  const int j0 = static_cast<int>(blockIdx.z) * TV;

  // Q̃, A and H_c do not depend on the records: their copies go out first (cp.async, all in flight at
  // once), then the records, then v of the writing records; one wait for all of them.
  const index_t ch = c * HV + hv;
  auto all = [](int) { return true; };
  stage_rows_async<Sop>(Xs, L.ldx, chunk_len, KP, p.qbuf + ch * chunk_len * KP, KP, true,
                        [](int i) { return static_cast<index_t>(i) * KP; }, all);
  stage_rows_async<Op>(Ao, L.lda, chunk_len, chunk_len, p.abuf + ch * chunk_len * chunk_len, chunk_len, true,
                       [](int i) { return static_cast<index_t>(i) * chunk_len; }, all);
  if (p.hsbuf) {  // H_c [K, V] columns [j0, j0 + TV), rounded by the scan already
    const Sop* Hs = p.hsbuf + ch * static_cast<index_t>(K) * V;
    const bool vh = V % vec16<Sop> == 0 && aligned16(p.hsbuf);
    stage_rows_async<Sop>(Ys, L.ldy, KP, TV, Hs + j0, V - j0, vh, [&](int a) { return static_cast<index_t>(a) * V; },
                          [&](int a) { return a < K; });
  } else {  // H_c [K, V] columns [j0, j0 + TV), fp32 → Sop
    stage_state<Sop>(Ys, L.ldy, p.hbuf + ch * static_cast<index_t>(K) * V, K, V, 0, KP, j0, TV);
  }
  const chunk_where at = locate_chunk(p, c);
  load_records(p, c, at, h, hv, recs);
  __syncthreads();  // recs ready
  {  // V rows of writing records
    const bool vv = V % vec16<Dev> == 0 && aligned16(p.v);
    stage_rows_async<Op>(Vo, L.ldy, chunk_len, TV, p.v + j0, V - j0, vv, [&](int i) { return recs[i].hv * V; },
                         [&](int i) { return recs[i].wr; });
  }
  stage_wait();
  __syncthreads();
  tile_mma2<row_major_t, row_major_t>(Of, L.ldf, Xs, L.ldx, Ys, L.ldy, KP, Ao, L.lda, Vo, L.ldy, chunk_len, chunk_len, TV);
  __syncthreads();
  if (p.R == 1 && j0 + TV <= V && V % 8 == 0 && aligned16(p.o)) {  // 8 outputs per thread, one 16-byte store (bf16, fp16)
    static_assert(TV % 8 == 0);
    for (int e = tid; e < chunk_len * (TV / 8); e += nt) {
      const int i = e / (TV / 8), jj = (e % (TV / 8)) * 8;
      const chunk_record& r = recs[i];
      if (!r.rd) continue;
      float x[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) x[u] = Of[i * L.ldf + jj + u] * r.r;
      if constexpr (sizeof(Dev) == 2) store8<Dev>(p.o + r.hv * V + j0 + jj, x);
      else
#pragma unroll
        for (int u = 0; u < 8; ++u) p.o[r.hv * V + j0 + jj + u] = from_f32<Dev>(x[u]);
    }
    return;
  }
  if (p.R > 1 && j0 + TV <= V && V % 4 == 0 && aligned16(p.o_part)) {  // the read slot's fp32 row, 16 bytes per store
    for (int e = tid; e < chunk_len * (TV / 4); e += nt) {
      const int i = e / (TV / 4), jj = (e % (TV / 4)) * 4;
      const chunk_record& r = recs[i];
      if (!r.rd) continue;
      const float* f = Of + i * L.ldf + jj;
      *reinterpret_cast<float4*>(p.o_part + (r.hv * p.R + r.slot) * V + j0 + jj) =
          make_float4(f[0] * r.r, f[1] * r.r, f[2] * r.r, f[3] * r.r);
    }
    return;
  }
  for (int e = tid; e < chunk_len * TV; e += nt) {
    const int i = e / TV, jj = e % TV, j = j0 + jj;
    const chunk_record& r = recs[i];
    if (!r.rd || j >= V) continue;
    const float val = Of[i * L.ldf + jj] * r.r;
    const index_t row = r.hv;
    if (p.R == 1) p.o[row * V + j] = from_f32<Dev>(val);
    else p.o_part[(row * p.R + r.slot) * V + j] = val;
  }
}

//! Whether the chunked kernels take this problem of a family::diagonal policy (else the recurrent kernel runs).
inline constexpr int bwd_chunk_max_v = 128;  //!< V the bf16 backward's gradient kernels hold in one block

inline bool chunked_supported(const detail::problem& pb) {
  return pb.K <= chunk_max_k && pb.tokens() > 0 && pb.tokens() < (index_t{1} << 31) &&
         pb.S * pb.P <= 65535;
}

template <class D, class Dev, int KP>
void set_chunk_smem(const char* api) {
  static const bool once = [api] {
    check(cudaFuncSetAttribute(chunk_state_kernel<D, Dev, KP>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(state_smem<D, Dev>(KP).bytes)),
          "cudaFuncSetAttribute(chunk_state_kernel)", api);
    check(cudaFuncSetAttribute(chunk_intra_kernel<D, Dev, KP>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(intra_smem<D, Dev>(KP).bytes)),
          "cudaFuncSetAttribute(chunk_intra_kernel)", api);
    check(cudaFuncSetAttribute(chunk_kstate_kernel<D, Dev, KP>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(kstate_smem<D, Dev>(KP).bytes)),
          "cudaFuncSetAttribute(chunk_kstate_kernel)", api);
    check(cudaFuncSetAttribute(chunk_output_kernel<D, Dev, KP>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(output_smem<D, Dev>(KP).bytes)),
          "cudaFuncSetAttribute(chunk_output_kernel)", api);
    return true;
  }();
  (void)once;
}

//! Launches chunk_chain_kernel<D, Dev, Adj> over p's streams (see chain_applies).
template <class D, class Dev, bool Adj>
void launch_chain(const chunk_params<Dev>& p, cudaStream_t stream, const char* api) {
  static const bool once = [api] {
    check(cudaFuncSetAttribute(chunk_chain_kernel<D, Dev, Adj>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(chain_smem_bytes)),
          "cudaFuncSetAttribute(chunk_chain_kernel)", api);
    return true;
  }();
  (void)once;
  const unsigned tiles = static_cast<unsigned>(((p.K + chain_tk - 1) / chain_tk) * ((p.V + chain_tv - 1) / chain_tv));
  chunk_chain_kernel<D, Dev, Adj><<<dim3(tiles, static_cast<unsigned>(p.HV), static_cast<unsigned>(p.S * p.P)), chain_threads,
                                    chain_smem_bytes, stream>>>(p);
  check_launch(Adj ? "chunk_chain_kernel (adjoint)" : "chunk_chain_kernel", api);
}

//! Enqueues the hand-off over the chunks: chunk_chain_kernel (U_c formed there; `chain`, see
//! chain_applies) or chunk_scan_kernel (over the U_c in hbuf).
template <class D, class Dev>
void enqueue_state_pass(const chunk_params<Dev>& p, bool chain, cudaStream_t stream, const char* api) {
  if (!chain && p.hbuf == nullptr) throw std::logic_error(std::string(api) + ": chunked forward without chunk_chain_kernel has no U_c buffer");
  if constexpr (intra_warp_tiles<D, Dev>) {
    if (chain) return launch_chain<D, Dev, false>(p, stream, api);
  }
  const index_t KV = static_cast<index_t>(p.K) * p.V;
  const unsigned slices = static_cast<unsigned>((KV + scan_threads * scan_per_thread - 1) / (scan_threads * scan_per_thread));
  chunk_scan_kernel<D, Dev><<<dim3(slices, static_cast<unsigned>(p.HV), static_cast<unsigned>(p.S * p.P)), scan_threads, 0, stream>>>(p);
  check_launch("chunk_scan_kernel", api);
}

//! Enqueues the forward with tiles KP wide (K ≤ KP; the record table in p.rt is built already):
//! chunk_intra_kernel (Γ, Q̃, K̃, e^{γ}, A), chunk_kstate_kernel (U_c), chunk_scan_kernel (H_c over
//! U_c), chunk_output_kernel. (chunk_state_kernel forms U_c from the inputs for the backward's
//! recomputation.)
template <class D, class Dev, int KP>
void enqueue_chunked_kp(const chunk_params<Dev>& p, cudaStream_t stream, const char* api) {
  set_chunk_smem<D, Dev, KP>(api);
  const index_t chunks = p.rt.max_chunks;
  const unsigned ch = static_cast<unsigned>(chunks), hv = static_cast<unsigned>(p.HV);
  bool chain = false;
  if constexpr (intra_warp_tiles<D, Dev>) chain = chain_applies<D>(p);
  if (chunks > 0) {
    chunk_params<Dev> q = p;
    q.intra_u = intra_fuses_u<D, Dev>(p.K, p.V) && !chain;
    chunk_intra_kernel<D, Dev, KP><<<dim3(ch, hv), intra_threads, intra_smem<D, Dev>(KP).bytes, stream>>>(q);
    check_launch("chunk_intra_kernel", api);
    if (!q.intra_u && !chain) {
      const unsigned vt = static_cast<unsigned>((p.V + kstate_smem<D, Dev>::TV - 1) / kstate_smem<D, Dev>::TV);
      chunk_kstate_kernel<D, Dev, KP><<<dim3(ch, hv, vt), kstate_threads, kstate_smem<D, Dev>(KP).bytes, stream>>>(p);
      check_launch("chunk_kstate_kernel", api);
    }
  }
  enqueue_state_pass<D, Dev>(p, chain, stream, api);
  if (chunks > 0) {
    const unsigned vo = static_cast<unsigned>((p.V + output_tile_v - 1) / output_tile_v);
    chunk_output_kernel<D, Dev, KP><<<dim3(ch, hv, vo), output_threads, output_smem<D, Dev>(KP).bytes, stream>>>(p);
    check_launch("chunk_output_kernel", api);
  }
}

//! Enqueues kernels 1–3: tiles 64 keys wide for K ≤ 64, 128 wide up to chunk_max_k.
template <class D, class Dev>
void enqueue_chunked(const chunk_params<Dev>& p, cudaStream_t stream, const char* api) {
  if (chunk_kp(p.K) == 64) enqueue_chunked_kp<D, Dev, 64>(p, stream, api);
  else enqueue_chunked_kp<D, Dev, 128>(p, stream, api);
}

}  // namespace linstate::cuda_detail
