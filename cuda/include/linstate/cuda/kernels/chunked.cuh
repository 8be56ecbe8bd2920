// linstate/cuda/kernels/chunked.cuh — the chunk-parallel forward pass of family::diagonal (gates
// none, per head, per key: decay::none, scalar, gated_key) on the GPU, over the record table of
// kernels/records.cuh. Templated on the decay policy D; Γ is the cumulative sum of D::log_decay.
//
// Every (sequence, partition) stream is cut into chunks of C = 64 records (SPEC §2.3; for a routed
// partition the records are only the tokens that write or read it). A record that reads but does not
// write enters with k = 0 and g = 0 (the state passes through it exactly); one that writes but does
// not read produces no output. Three kernels, each parallel over all chunks of all streams and heads:
//
//  1. chunk_state_kernel  — per chunk c and value head, the chunk's own contribution and decay
//       U_c = Σ_j (w_j k_j ⊙ e^{γ_c − Γ_j}) v_jᵀ        [K×V]   (SPEC §2.3 step 1, inner sum)
//       e^{γ_c}                                          [K] (gated_key) or [1] (scalar)
//     Γ_j is the chunk-local inclusive cumulative log-decay, γ_c its last row; w_j the write weight.
//  2. chunk_scan_kernel   — per stream, head and 512-element slice of the state, the sequential
//     hand-off H_{c+1} = diag(e^{γ_c}) H_c + U_c over the stream's chunks, overwriting U_c with the
//     state H_c *entering* chunk c; the last H is the final state. Elementwise, memory bound.
//  3. chunk_output_kernel — per chunk, head and 64-column V tile (SPEC §2.3 steps 2–3):
//       o_t = r_t · [ (q_t ⊙ e^{Γ_t})ᵀ H_c + Σ_{j≤t} A_{tj} v_j ],  A_{tj} = Σ_i q_t[i] w_j k_j[i] e^{Γ_t[i] − Γ_j[i]}
//     with r_t = scale × read weight. gated_key builds A with the secondary chunking of SPEC §2.3 /
//     §8: 16-row sub-chunks; an off-diagonal block (I > J) is one product of q_I ⊙ e^{Γ_I − Γ_r} and
//     k_J ⊙ e^{Γ_r − Γ_J} with r the first row of I (both factors ≤ 1); a diagonal block is summed
//     element-wise in fp32 for j ≤ t only. none/scalar: A = (q kᵀ) ⊙ e^{Γ_t − Γ_j} (a scalar per pair).
//
// Products run through tile_mma (tensor cores for bf16/fp16 inputs, exact fp32 FMA for fp32 inputs).
// Operand precision: the products' operands are rounded to the input type (as fla's kernels do);
// for fp16 inputs the products with the state (Q̃·H) use bf16 operands, because a state may exceed
// fp16's range. Γ, e^{…}, the state, A's diagonal blocks and all accumulation are fp32.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
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
inline constexpr int scan_threads = 128, scan_per_thread = 4;

//! Operand type of the products with the state: bf16 for fp16 inputs (range), else the input type.
template <class Dev>
using state_op_t = std::conditional_t<std::is_same_v<Dev, __half>, __nv_bfloat16, Dev>;

template <class Dev>
struct chunk_params {
  index_t T = 0;
  int H = 1, HV = 1, K = 1, V = 1, N = 1, P = 1, S = 1, R = 1;
  int first_routed = 0;  // partitions below this one see every token (weights 1)
  bool shared = false, in_place = false;
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
  float* gbuf = nullptr;                // [max_chunks, HV, K] (gated_key) / [max_chunks, HV] (scalar): e^{γ_c}
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

//! Threads [0, C) fill recs[i] for record i of chunk c.
template <class Dev>
__device__ __forceinline__ void load_records(const chunk_params<Dev>& p, index_t c, const chunk_where& at, int h, int hv,
                                             chunk_record* recs) {
  const int i = static_cast<int>(threadIdx.x);
  if (i >= chunk_len) return;
  chunk_record r{0, 0, p.rt.rec_tok[c * chunk_len + i], false, false, 0.f, 0.f, 0};
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
  recs[i] = r;
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
template <class D, int KP, class Dev>
__device__ __forceinline__ void chunk_cumulative_decay(const Dev* g, int HV, int hv, int K, const chunk_record* recs, float* G,
                                                       int ld = KP) {
  static_assert(is_diagonal<D>, "linstate (cuda): the chunked GLA kernels run family::diagonal");
  const int tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
  if constexpr (decay_key<D>) {
    staged_for(
        chunk_len * KP,
        [&](int e) {
          const chunk_record& r = recs[e / KP];
          const int a = e % KP;
          return (r.wr && a < K) ? detail::chunked_log_decay(to_f32(D::log_decay(g + r.hv * K, a))) : 0.f;
        },
        [&](int e, float x) { G[(e / KP) * ld + e % KP] = x; });
    __syncthreads();
    for (int a = tid; a < KP; a += nt) {
      float acc = 0.f;
      for (int i = 0; i < chunk_len; ++i) acc += G[i * ld + a], G[i * ld + a] = acc;
    }
  } else if constexpr (decay_head<D>) {
    if (tid < chunk_len) G[tid] = recs[tid].wr ? detail::chunked_log_decay(to_f32(D::log_decay(g + recs[tid].hv, 0))) : 0.f;
    __syncthreads();
    if (tid == 0) {
      float acc = 0.f;
      for (int i = 0; i < chunk_len; ++i) acc += G[i], G[i] = acc;
    }
  }
  __syncthreads();
}

//! Γ_t[a] (0 for decay::none).
template <class D, int KP>
__device__ __forceinline__ float gamma_at(const float* G, int t, int a) {
  if constexpr (decay_key<D>) return G[t * KP + a];
  else if constexpr (decay_head<D>) return G[t];
  else return 0.f;
}

__host__ __device__ constexpr int round16(int x) { return (x + 15) / 16 * 16; }
//! Leading-dimension padding of an operand tile (keeps WMMA's 32-byte alignment, spreads banks).
template <class Op>
__host__ __device__ constexpr int op_pad() { return sizeof(Op) == 2 ? 8 : 4; }
__host__ __device__ constexpr std::size_t align128(std::size_t b) { return (b + 127) / 128 * 128; }
template <class D>
__host__ __device__ constexpr int gamma_floats(int KP) {
  return decay_key<D> ? chunk_len * KP : decay_head<D> ? chunk_len : 0;
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

  // K̃_j = w_j k_j ⊙ e^{γ − Γ_j}  (exponent ≤ 0); adjoint: r_t q_t ⊙ e^{Γ_t}
  auto uses = [&](const chunk_record& r) { return Adj ? r.rd : r.wr; };
  staged_for(
      chunk_len * KP,
      [&](int e) {
        const int i = e / KP, a = e % KP;
        const chunk_record& r = recs[i];
        return (uses(r) && a < K) ? to_f32((Adj ? src.q : src.k)[r.qk + a]) : 0.f;
      },
      [&](int e, float x) {
        const int i = e / KP, a = e % KP;
        if (a < K) {
          if constexpr (Adj) x *= recs[i].r * __expf(gamma_at<D, KP>(G, i, a));
          else x *= recs[i].w * __expf(gamma_at<D, KP>(G, chunk_len - 1, a) - gamma_at<D, KP>(G, i, a));
        }
        Kt[i * L.ldk + a] = to_op<Op>(x);
      });
  staged_for(
      chunk_len * TV,
      [&](int e) {
        const int i = e / TV, j = j0 + e % TV;
        const chunk_record& r = recs[i];
        return (uses(r) && j < V) ? to_f32(p.v[r.hv * V + j]) : 0.f;
      },
      [&](int e, float x) { Vt[(e / TV) * L.ldv + e % TV] = to_op<Op>(x); });
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
  float un[scan_per_thread], dn[scan_per_thread];
  auto fetch = [&](index_t c) {
    const float* U = p.hbuf + (c * HV + hv) * KV;
#pragma unroll
    for (int u = 0; u < scan_per_thread; ++u) {
      const index_t e = e0 + u;
      un[u] = e < KV ? U[e] : 0.f;
      if constexpr (decay_key<D>) dn[u] = e < KV ? p.gbuf[(c * HV + hv) * K + e / V] : 1.f;
      else if constexpr (decay_head<D>) dn[u] = p.gbuf[c * HV + hv];
      else dn[u] = 1.f;
    }
  };
  if (c0 < c1) fetch(c0);
  for (index_t c = c0; c < c1; ++c) {
    float uc[scan_per_thread], dc[scan_per_thread];
#pragma unroll
    for (int u = 0; u < scan_per_thread; ++u) uc[u] = un[u], dc[u] = dn[u];
    if (c + 1 < c1) fetch(c + 1);  // next chunk's loads in flight while this one is stored
    float* Hc = p.hbuf + (c * HV + hv) * KV;
#pragma unroll
    for (int u = 0; u < scan_per_thread; ++u) {
      const index_t e = e0 + u;
      if (e < KV) Hc[e] = st[u];
      if constexpr (decay_none<D>) st[u] += uc[u];
      else st[u] = fmaf(dc[u], st[u], uc[u]);
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

// --- 3. chunk_output_kernel ----------------------------------------------------------------------

//! V columns per output block: 128 for 16-bit inputs (the V-independent work of a chunk — Γ, the
//! intra-chunk scores — is then done once for V ≤ 128), 64 for fp32 (shared memory).
template <class Dev>
inline constexpr int output_tile_v = sizeof(Dev) == 2 ? 128 : 64;

template <class D, class Dev>
struct output_smem {
  using Op = Dev;
  using Sop = state_op_t<Dev>;
  static constexpr bool diag = decay_key<D>;
  static constexpr int TV = output_tile_v<Dev>;
  int KP, ldx, ldy, ldf;
  std::size_t recs, G, Qf, Kf, Xs, Ys, Of, Af, Ao, Vo, bytes;
  __host__ __device__ explicit output_smem(int K) {
    KP = round16(K), ldx = KP + op_pad<Op>(), ldy = TV + op_pad<Op>(), ldf = TV + 4;
    recs = 0;
    G = align128(chunk_len * sizeof(chunk_record));
    Qf = align128(G + gamma_floats<D>(KP) * sizeof(float));
    Kf = align128(Qf + (diag ? static_cast<std::size_t>(chunk_len) * KP * sizeof(Dev) : 0));
    Xs = align128(Kf + (diag ? static_cast<std::size_t>(chunk_len) * KP * sizeof(Dev) : 0));
    Ys = align128(Xs + static_cast<std::size_t>(chunk_len) * ldx * sizeof(Op));
    const std::size_t y = static_cast<std::size_t>(KP) * ldy * sizeof(Op), kr = static_cast<std::size_t>(chunk_len) * ldx * sizeof(Op);
    Of = align128(Ys + (y > kr ? y : kr));
    Af = align128(Of + static_cast<std::size_t>(chunk_len) * ldf * sizeof(float));
    Ao = align128(Af + static_cast<std::size_t>(chunk_len) * ldf * sizeof(float));
    const std::size_t ao = std::is_same_v<Op, float> ? 0 : static_cast<std::size_t>(chunk_len) * ldy * sizeof(Op);
    Vo = align128(Ao + ao);
    bytes = Vo + static_cast<std::size_t>(chunk_len) * ldy * sizeof(Op);
  }
};

template <class D, class Dev, int KP>
__global__ void __launch_bounds__(chunk_threads) chunk_output_kernel(const chunk_params<Dev> p) {
  using Op = Dev;
  using Sop = state_op_t<Dev>;
  constexpr int TV = output_tile_v<Dev>;
  static_assert(sizeof(Sop) == sizeof(Op));
  const index_t c = blockIdx.x;
  if (c >= p.rt.seg_chunk[p.S * p.P]) return;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const int K = p.K, V = p.V, HV = p.HV;
  const output_smem<D, Dev> L(KP);  // K ≤ KP: the tiles are KP wide, zero beyond K
  auto* recs = reinterpret_cast<chunk_record*>(smem_raw + L.recs);
  float* G = reinterpret_cast<float*>(smem_raw + L.G);
  Dev* Qf = reinterpret_cast<Dev*>(smem_raw + L.Qf);  // [C][KP] q of reading rows (input type, exact), gated_key only
  Dev* Kf = reinterpret_cast<Dev*>(smem_raw + L.Kf);  // [C][KP] k of writing rows (times w where used), gated_key only
  float* Of = reinterpret_cast<float*>(smem_raw + L.Of);  // [C][ldf] output tile
  float* Af = reinterpret_cast<float*>(smem_raw + L.Af);  // [C][ldf] intra-chunk scores
  Op* Ao = std::is_same_v<Op, float> ? reinterpret_cast<Op*>(Af) : reinterpret_cast<Op*>(smem_raw + L.Ao);
  const int lda_o = std::is_same_v<Op, float> ? L.ldf : L.ldy;
  Op* Vo = reinterpret_cast<Op*>(smem_raw + L.Vo);
  const int tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
  const int hv = static_cast<int>(blockIdx.y), h = hv / (HV / p.H);
  const int j0 = static_cast<int>(blockIdx.z) * TV;

  const chunk_where at = locate_chunk(p, c);
  const device_source<Dev> src = at.is_shared ? p.shr : p.main;
  load_records(p, c, at, h, hv, recs);
  __syncthreads();
  chunk_cumulative_decay<D, KP>(src.g, HV, hv, K, recs, G);

  auto q_at = [&](int i, int a) -> float {  // q of a reading row, else 0
    const chunk_record& r = recs[i];
    return (r.rd && a < K) ? to_f32(src.q[r.qk + a]) : 0.f;
  };
  auto k_raw = [&](int i, int a) -> float {  // k of a writing row, else 0
    const chunk_record& r = recs[i];
    return (r.wr && a < K) ? to_f32(src.k[r.qk + a]) : 0.f;
  };
  auto k_at = [&](int i, int a) -> float { return k_raw(i, a) * recs[i].w; };  // w·k
  if constexpr (decay_key<D>) {
    staged_for(chunk_len * KP, [&](int e) { return q_at(e / KP, e % KP); }, [&](int e, float x) { Qf[e] = to_op<Dev>(x); });
    staged_for(chunk_len * KP, [&](int e) { return k_raw(e / KP, e % KP); }, [&](int e, float x) { Kf[e] = to_op<Dev>(x); });
    __syncthreads();
  }
  auto qv = [&](int i, int a) -> float {
    if constexpr (decay_key<D>) return to_f32(Qf[i * KP + a]);
    else return q_at(i, a);
  };
  auto kv = [&](int i, int a) -> float {
    if constexpr (decay_key<D>) return to_f32(Kf[i * KP + a]) * recs[i].w;
    else return k_at(i, a);
  };

  // --- inter-chunk: O = (q ⊙ e^{Γ}) H_c ---------------------------------------------------------
  {
    Sop* Xs = reinterpret_cast<Sop*>(smem_raw + L.Xs);
    Sop* Ys = reinterpret_cast<Sop*>(smem_raw + L.Ys);
    staged_for(
        chunk_len * KP, [&](int e) { return qv(e / KP, e % KP); },
        [&](int e, float x) {
          const int i = e / KP, a = e % KP;
          Xs[i * L.ldx + a] = to_op<Sop>(a < K ? x * __expf(gamma_at<D, KP>(G, i, a)) : 0.f);
        });
    const float* Hc = p.hbuf + (c * HV + hv) * static_cast<index_t>(K) * V;
    staged_for(
        KP * TV,
        [&](int e) {
          const int a = e / TV, j = j0 + e % TV;
          return (a < K && j < V) ? Hc[static_cast<index_t>(a) * V + j] : 0.f;
        },
        [&](int e, float x) { Ys[(e / TV) * L.ldy + e % TV] = to_op<Sop>(x); });
    staged_for(
        chunk_len * TV,
        [&](int e) {
          const int i = e / TV, j = j0 + e % TV;
          const chunk_record& r = recs[i];
          return (r.wr && j < V) ? to_f32(p.v[r.hv * V + j]) : 0.f;
        },
        [&](int e, float x) { Vo[(e / TV) * L.ldy + e % TV] = to_op<Op>(x); });
    __syncthreads();
    tile_mma<row_major_t, row_major_t>(Of, L.ldf, Xs, L.ldx, Ys, L.ldy, chunk_len, TV, KP, false);
    __syncthreads();
  }

  // --- intra-chunk scores A (lower triangle incl. the diagonal) ---------------------------------
  Op* Xq = reinterpret_cast<Op*>(smem_raw + L.Xs);
  Op* Yk = reinterpret_cast<Op*>(smem_raw + L.Ys);
  if constexpr (decay_key<D>) {
    for (int e = tid; e < chunk_len * L.ldf; e += nt) Af[e] = 0.f;
    for (int I = 1; I < chunk_len / 16; ++I) {  // off-diagonal blocks of sub-chunk I: one product
      const int r0 = 16 * I;
      for (int e = tid; e < 16 * KP; e += nt) {
        const int i = e / KP, a = e % KP;
        Xq[i * L.ldx + a] = to_op<Op>(a < K ? qv(r0 + i, a) * __expf(G[(r0 + i) * KP + a] - G[r0 * KP + a]) : 0.f);
      }
      for (int e = tid; e < r0 * KP; e += nt) {
        const int j = e / KP, a = e % KP;
        Yk[j * L.ldx + a] = to_op<Op>(a < K ? kv(j, a) * __expf(G[r0 * KP + a] - G[j * KP + a]) : 0.f);
      }
      __syncthreads();
      tile_mma<row_major_t, col_major_t>(Af + r0 * L.ldf, L.ldf, Xq, L.ldx, Yk, L.ldx, 16, r0, KP, false);
      __syncthreads();
    }
    // diagonal blocks, element-wise in fp32, j ≤ t only (the other order would exponentiate Γ_t − Γ_j > 0)
    // one thread per pair (t, j ≤ t) of the 4 diagonal 16×16 blocks: 4 · 136 pairs
    for (int e = tid; e < (chunk_len / 16) * 136; e += nt) {
      const int I = e / 136, q = e % 136;
      int ti = static_cast<int>((sqrtf(8.f * q + 1.f) - 1.f) * 0.5f);
      if ((ti + 1) * (ti + 2) / 2 <= q) ++ti;  // guard the float rounding of the triangular root
      if (ti * (ti + 1) / 2 > q) --ti;
      const int tj = q - ti * (ti + 1) / 2;
      const int t = 16 * I + ti, j = 16 * I + tj;
      float acc = 0.f;
      if (recs[t].rd && recs[j].wr) {
#pragma unroll 8
        for (int a = 0; a < K; ++a)
          acc += to_f32(Qf[t * KP + a]) * to_f32(Kf[j * KP + a]) * __expf(G[t * KP + a] - G[j * KP + a]);
        acc *= recs[j].w;
      }
      Af[t * L.ldf + j] = acc;
    }
    __syncthreads();
  } else {
    staged_for(chunk_len * KP, [&](int e) { return qv(e / KP, e % KP); },
               [&](int e, float x) { Xq[(e / KP) * L.ldx + e % KP] = to_op<Op>(x); });
    staged_for(chunk_len * KP, [&](int e) { return kv(e / KP, e % KP); },
               [&](int e, float x) { Yk[(e / KP) * L.ldx + e % KP] = to_op<Op>(x); });
    __syncthreads();
    tile_mma<row_major_t, col_major_t>(Af, L.ldf, Xq, L.ldx, Yk, L.ldx, chunk_len, chunk_len, KP, false);
    __syncthreads();
    for (int e = tid; e < chunk_len * chunk_len; e += nt) {
      const int t = e / chunk_len, j = e % chunk_len;
      float& x = Af[t * L.ldf + j];
      if (j > t) x = 0.f;
      else if constexpr (decay_head<D>) x *= __expf(G[t] - G[j]);
    }
    __syncthreads();
  }

  // --- O += A V, then scale and store ------------------------------------------------------------
  if constexpr (!std::is_same_v<Op, float>) {
    for (int e = tid; e < chunk_len * chunk_len; e += nt) {
      const int t = e / chunk_len, j = e % chunk_len;
      Ao[t * L.ldy + j] = to_op<Op>(Af[t * L.ldf + j]);
    }
    __syncthreads();
  }
  tile_mma<row_major_t, row_major_t>(Of, L.ldf, Ao, lda_o, Vo, L.ldy, chunk_len, TV, chunk_len, true);
  __syncthreads();
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
    check(cudaFuncSetAttribute(chunk_output_kernel<D, Dev, KP>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(output_smem<D, Dev>(KP).bytes)),
          "cudaFuncSetAttribute(chunk_output_kernel)", api);
    return true;
  }();
  (void)once;
}

//! Enqueues kernels 1–3 with tiles KP wide (K ≤ KP; the record table in p.rt is built already).
template <class D, class Dev, int KP>
void enqueue_chunked_kp(const chunk_params<Dev>& p, cudaStream_t stream, const char* api) {
  set_chunk_smem<D, Dev, KP>(api);
  const index_t chunks = p.rt.max_chunks;
  const unsigned vt = static_cast<unsigned>((p.V + state_tile_v<Dev> - 1) / state_tile_v<Dev>);
  if (chunks > 0) {
    const dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>(p.HV), vt);
    chunk_state_kernel<D, Dev, KP><<<grid, chunk_threads, state_smem<D, Dev>(KP).bytes, stream>>>(p);
    check_launch("chunk_state_kernel", api);
  }
  const index_t KV = static_cast<index_t>(p.K) * p.V;
  const unsigned slices = static_cast<unsigned>((KV + scan_threads * scan_per_thread - 1) / (scan_threads * scan_per_thread));
  chunk_scan_kernel<D, Dev><<<dim3(slices, static_cast<unsigned>(p.HV), static_cast<unsigned>(p.S * p.P)), scan_threads, 0,
                              stream>>>(p);
  check_launch("chunk_scan_kernel", api);
  if (chunks > 0) {
    const unsigned vo = static_cast<unsigned>((p.V + output_tile_v<Dev> - 1) / output_tile_v<Dev>);
    const dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>(p.HV), vo);
    chunk_output_kernel<D, Dev, KP><<<grid, chunk_threads, output_smem<D, Dev>(KP).bytes, stream>>>(p);
    check_launch("chunk_output_kernel", api);
  }
}

//! Enqueues kernels 1–3: tiles 64 keys wide for K ≤ 64, 128 wide up to chunk_max_k.
template <class D, class Dev>
void enqueue_chunked(const chunk_params<Dev>& p, cudaStream_t stream, const char* api) {
  if (p.K <= 64) enqueue_chunked_kp<D, Dev, 64>(p, stream, api);
  else enqueue_chunked_kp<D, Dev, 128>(p, stream, api);
}

}  // namespace linstate::cuda_detail
