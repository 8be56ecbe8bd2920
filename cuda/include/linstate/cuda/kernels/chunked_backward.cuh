// linstate/cuda/kernels/chunked_backward.cuh — the chunk-parallel backward of family::diagonal (gates
// none, per head, per key: decay::none, scalar, gated_key; templated on the policy D, Γ from
// D::log_decay) on the GPU, every input type, over the record table of kernels/records.cuh; the
// adjoint of kernels/chunked.cuh (SPEC §2.4). It fills the per-slot partial gradients of the
// contract in backward.cuh (Z = 1), whose combine and router-backward passes then run unchanged —
// except, on the bf16 path, for a gradient whose slot sum has one term (backward.cuh's
// single_slot_gradients: one partition, no router, HV = H for q and k; and, through
// chunk_bwd_dqkg_kernel, diagonal_single_slot_gradients: also SSE's routed side when a token reads or
// writes one routed slot, with the shared partition's slot 0 into grads.shared.*): chunk_bwd_dv_kernel
// stores dv and chunk_bwd_dqkg_kernel dq, dk and dg straight into the user's tensors (dq_out … dg_out,
// dq_out0 … dg_out0; rounded once from the same fp32 value), and the combine pass skips them.
//
// Per chunk c of a stream (rows t, j; r_t = scale × read weight, w_j = write weight; q, k, v, dO raw,
// zero on rows that do not read (q, dO) or write (k, v); Γ, γ, H_c as in chunked.cuh; D_c = ∂L/∂H_{c+1}):
//   1. H_c, recomputed from the inputs: bf16 — the forward's chunk_intra_kernel (which also leaves A, K̃,
//      Q̃ and Γ for step 4) and, where chain_applies (gated_key, K and V multiples of 16, v 16-byte
//      aligned), chunk_chain_kernel (U_c and the hand-off in one pass, chunked.cuh); elsewhere the intra
//      kernel's U_c (intra_fuses_u) or chunk_kstate_kernel, then chunk_scan_kernel; fp32 and fp16 —
//      chunk_state_kernel + chunk_scan_kernel;
//   2. W_c = Σ_t (r_t q_t ⊙ e^{Γ_t}) dO_tᵀ: bf16 — chunk_kstate_kernel<Adj> on Q̃ and r dO; otherwise
//      chunk_state_kernel<Adj>;
//   3. chunk_rscan_kernel: D_last = dht; D_{c−1} = diag(e^{γ_c}) D_c + W_c, each D_c stored over W_c
//      (bf16: rounded to bf16 into dsbuf, as step 1's scan stores H_c into hsbuf: the gradient kernels
//      read only those, half the bytes); dh0 = the last D, fp32                     (SPEC §2.4 (a))
//   2–3 where chain_applies to Q̃ and dO (bf16 gated_key, dO 16-byte aligned): chunk_chain_kernel<Adj>
//      forms W_c and walks D in one pass (a routed chunk's r dO rows gathered first by
//      chunk_read_rows_kernel), no fp32 W_c buffer
//   4. the per-chunk gradients (K, V ≤ 128):
//        A_tj  = Σ_i q_t[i] w_j k_j[i] e^{Γ_t[i]−Γ_j[i]},   dA_tj = dO_t·v_j          (j ≤ t)
//        dv_j  = Σ_{t≥j} A_tj r_t dO_t + D_cᵀ(w_j k_j ⊙ e^{γ−Γ_j})                   (c)
//        dk̃_j  = Σ_{t≥j} r_t dA_tj q_t ⊙ e^{Γ_t−Γ_j} + e^{γ−Γ_j} ⊙ (D_c v_j)          (d), k̃ = w k
//        dq̂_t  = Σ_{j≤t} dA_tj w_j k_j ⊙ e^{Γ_t−Γ_j} + e^{Γ_t} ⊙ (H_c dO_t)            (d), without r_t
//      raw gradients dq = r_t dq̂, dk = w dk̃, dv; router weights dcr = scale·⟨q_t, dq̂_t⟩, dcw = ⟨k_j, dk̃_j⟩;
//      and c_n = e^{γ} ⊙ rowsum(H_c ⊙ D_c) + Σ_j k̃_j ⊙ dk̃_j^inter for step 5.
//      The intra sums use the sub-chunk reference rows of SPEC §8 (first row of the later block for A
//      and dq̂, last row of the earlier block for dk̃; every exponent ≤ 0) and element-wise fp32 diagonal
//      blocks (j ≤ t only); none/scalar use the scalar factor e^{Γ_t−Γ_j} on whole-chunk products.
//      bf16: chunk_bwd_dv_kernel (dv, per V tile) and, for gated_key, chunk_bwd_dqkg_kernel (dA, dk̃, dq̂,
//      c_n and step 5's dg, per key tile); for none/scalar chunk_bwd_da_kernel (dA) and
//      chunk_bwd_dqk_kernel (dk̃ and dq̂, per key tile and role, c_n); products on tensor cores (bf16 operands, fp32 accumulation; states and
//      their gradients enter the products rounded to bf16, as fla's kernels do, and c_n's rowsum
//      multiplies the two bf16 copies in fp32, as fla's dg does). fp32 and fp16:
//      chunk_grad_exact_kernel, the same sums in exact fp32 FMA with every exponential formed per pair.
//   5. chunk_dg_kernel (bf16 gated_key: inside chunk_bwd_dqkg_kernel, chunk_dg_kernel only for the router
//      weights' gradients): dg_u = Σ_{t≥u in chunk} (q_t ⊙ dq_t − k_t ⊙ dk_t) + c_n for the writing rows u
//      (SPEC §2.4 (e)); scalar decay sums over the keys. Γ sums the floored gates (chunked.cuh,
//      chunk_cumulative_decay): dg_u = 0 exactly where g_u is below detail::chunked_log_decay_floor.
//      bf16: also the router weights' gradients, from the key tiles' dot products.
// Kernels 1–3 and 5 take the input type's products (fp32 products for fp32 inputs, the input type's
// tensor cores for fp16, as in the forward).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "chunked.cuh"

namespace linstate::cuda_detail {

template <class Dev>
struct chunk_bwd_params : chunk_params<Dev> {
  const Dev* dO = nullptr;     // [tokens, HV, V]
  const float* dht = nullptr;  // [S,P,HV,K,V] or null
  float* dh0 = nullptr;        // [S,P,HV,K,V] or null
  float* dbuf = nullptr;       // [max_chunks, HV, K, V]: W_c, then D_c
  float* cbuf = nullptr;       // [max_chunks, HV, KP]: c_n
  int kp = 128;                // the key tile (cbuf's row length)
  int Rr = 1, Rw = 1;
  float* dq = nullptr;         // [tokens, HV, Rr, K]
  float* dk = nullptr;         // [tokens, HV, Rw, K]
  float* dv = nullptr;         // [tokens, HV, Rw, V]
  float* dg = nullptr;         // [tokens, HV, Rw, GK]
  float* dcw = nullptr;        // [tokens, HV, N]
  float* dcr = nullptr;        // [tokens, HV, N]
  // Direct stores (where the backend found one slot per gradient: backward.cuh's
  // single_slot_gradients): the user's gradient tensors themselves, written rounded once from the fp32
  // value the partial would have held, at the partial's index (slot 0; [tokens, HV, ·] = [tokens, H, ·]
  // there), in place of dq / dk / dv / dg (null then). Here chunk_bwd_dv_kernel writes dv_out and
  // chunk_bwd_dqkg_kernel dq_out, dk_out and dg_out (bf16); chunked_delta.cuh's delta_grad_kernel all
  // four (and delta_params::dbeta_out); no other kernel reads or writes them.
  Dev* dq_out = nullptr;       // [tokens, H, K]
  Dev* dk_out = nullptr;       // [tokens, H, K]
  Dev* dv_out = nullptr;       // [tokens, HV, V]
  Dev* dg_out = nullptr;       // [tokens, HV, K]
  // With a shared partition (SSE; chunk_bwd_dqkg_kernel only): slot 0's rows go to the shared
  // partition's tensors below and the others' to dq_out … dg_out above, where the routed side has one
  // slot too (backward.cuh's direct_gradients). Null: that tensor was not asked for.
  Dev* dq_out0 = nullptr;      // [tokens, H, K]   grads.shared.q
  Dev* dk_out0 = nullptr;      // [tokens, H, K]   grads.shared.k
  Dev* dg_out0 = nullptr;      // [tokens, HV, K]  grads.shared.g
  // bf16 path (the gradient kernels 4a–4c); qbuf, kbuf, abuf and gambuf of chunk_params are set too
  Dev* dabuf = nullptr;        // [max_chunks, HV, C, C]: dA = dO·vᵀ (j ≤ t)
  float* dotbuf = nullptr;     // [max_chunks, HV, KP / bwd_kt, C, 2]: ⟨k_j, dk̃_j⟩, ⟨q_t, dq̂_t⟩ per key tile (routed only)
  // (and chunk_params::hsbuf: H_c rounded to bf16, written by the recomputation's scan instead of hbuf)
  state_op_t<Dev>* dsbuf = nullptr;  // [max_chunks, HV, K, V] or null: D_c rounded to bf16, written by
                                     // chunk_rscan_kernel instead of dbuf (bf16 path)
};

//! Write slot of a record (the read slot is chunk_record::slot).
template <class Dev>
__device__ __forceinline__ int write_slot(const chunk_bwd_params<Dev>& p, const chunk_record& r, const chunk_where& at) {
  if (!at.routed) return at.part;
  return route_wslot(p.meta[static_cast<index_t>(r.tok) * p.N + at.n]);
}

// --- 3. chunk_rscan_kernel -----------------------------------------------------------------------

//! grid (⌈K·V / 512⌉, HV, S·P): D walks the stream's chunks backwards.
template <class D, class Dev>
__global__ void __launch_bounds__(scan_threads) chunk_rscan_kernel(const chunk_bwd_params<Dev> p) {
  const int seg = static_cast<int>(blockIdx.z), hv = static_cast<int>(blockIdx.y);
  const int part = seg / p.S, s = seg % p.S;
  const int K = p.K, V = p.V, HV = p.HV;
  const index_t KV = static_cast<index_t>(K) * V;
  const index_t e0 = (static_cast<index_t>(blockIdx.x) * scan_threads + threadIdx.x) * scan_per_thread;
  const index_t sbase = ((static_cast<index_t>(s) * p.P + part) * HV + hv) * KV;
  const index_t c0 = p.rt.seg_chunk[seg], c1 = p.rt.seg_chunk[seg + 1];
  float d[scan_per_thread];
#pragma unroll
  for (int u = 0; u < scan_per_thread; ++u) {
    const index_t e = e0 + u;
    d[u] = (p.dht && e < KV) ? p.dht[sbase + e] : 0.f;
  }
  // as the forward scan, walking backwards: the next chunks' loads in flight (ring_scan's shared-memory
  // ring for V % 4 == 0, else a register ring of scan_depth chunks), D_c stored over W_c
  const bool v4 = V % 4 == 0;  // a thread's four elements: one 16-byte load, one key row
  static_assert(scan_per_thread == 4);
  if (v4) {
    const bool in = e0 < KV;
    const index_t eo = in ? e0 : 0;
    ring_scan<D>(
        d, c1 - 1, -1, c1 - c0, in, [&](index_t c) { return p.dbuf + (c * HV + hv) * KV + eo; },
        [&](index_t c) {
          if constexpr (decay_key<D>) return p.gbuf + (c * HV + hv) * K + eo / V;
          else return p.gbuf + (c * HV + hv);
        },
        [&](index_t c, const float (&x)[4]) {
          if (!in) return;
          if constexpr (tensor_core_op<state_op_t<Dev>>) {
            if (p.dsbuf) {  // D_c rounded to the state operand type (what the gradient kernels round it to)
              using S = state_op_t<Dev>;
              const S t[4] = {to_op<S>(x[0]), to_op<S>(x[1]), to_op<S>(x[2]), to_op<S>(x[3])};
              uint2 w;
              memcpy(&w, t, 8);
              *reinterpret_cast<uint2*>(p.dsbuf + (c * HV + hv) * KV + e0) = w;
              return;
            }
          }
          *reinterpret_cast<float4*>(p.dbuf + (c * HV + hv) * KV + e0) = make_float4(x[0], x[1], x[2], x[3]);
        });
  } else {
    float wn[scan_depth][scan_per_thread], dn[scan_depth][scan_per_thread];
    auto fetch = [&](index_t c, float (&w_)[scan_per_thread], float (&d_)[scan_per_thread]) {
      const float* Wc = p.dbuf + (c * HV + hv) * KV;
#pragma unroll
      for (int u = 0; u < scan_per_thread; ++u) {
        const index_t e = e0 + u;
        w_[u] = e < KV ? Wc[e] : 0.f;
        if constexpr (decay_key<D>) d_[u] = e < KV ? p.gbuf[(c * HV + hv) * K + e / V] : 1.f;
        else if constexpr (decay_head<D>) d_[u] = p.gbuf[c * HV + hv];
        else d_[u] = 1.f;
      }
    };
#pragma unroll
    for (int k = 0; k < scan_depth; ++k)
      if (c1 - 1 - k >= c0) fetch(c1 - 1 - k, wn[k], dn[k]);
    for (index_t cb = c1 - 1; cb >= c0; cb -= scan_depth) {
#pragma unroll
      for (int k = 0; k < scan_depth; ++k) {
        const index_t c = cb - k;
        if (c >= c0) {
          bool stored = false;
          if constexpr (tensor_core_op<state_op_t<Dev>>) {
            if (p.dsbuf) {  // D_c rounded to the state operand type
              state_op_t<Dev>* Ds = p.dsbuf + (c * HV + hv) * KV;
#pragma unroll
              for (int u = 0; u < scan_per_thread; ++u)
                if (e0 + u < KV) Ds[e0 + u] = to_op<state_op_t<Dev>>(d[u]);
              stored = true;
            }
          }
          if (!stored) {
            float* Wc = p.dbuf + (c * HV + hv) * KV;
#pragma unroll
            for (int u = 0; u < scan_per_thread; ++u)
              if (e0 + u < KV) Wc[e0 + u] = d[u];
          }
#pragma unroll
          for (int u = 0; u < scan_per_thread; ++u) d[u] = (decay_none<D>) ? d[u] + wn[k][u] : fmaf(dn[k][u], d[u], wn[k][u]);
          if (c - scan_depth >= c0) fetch(c - scan_depth, wn[k], dn[k]);
        }
      }
    }
  }
  if (p.dh0) {
#pragma unroll
    for (int u = 0; u < scan_per_thread; ++u) {
      const index_t e = e0 + u;
      if (e < KV) p.dh0[sbase + e] = d[u];
    }
  }
}

// --- 4. the bf16 gradient kernels ----------------------------------------------------------------
//
// bf16 inputs, fla's division of the work: the forward's chunk_intra_kernel has written A (abuf), K̃
// (kbuf), Q̃ (qbuf), e^{γ} (gbuf) and Γ (gambuf) for the recomputation; then, each parallel over
// chunks, value heads and tiles, with 256-thread blocks (two to three per multiprocessor):
//   chunk_bwd_da_kernel   per chunk and value head: dA_tj = dO_t·v_j (j ≤ t), rounded to bf16 → dabuf
//   chunk_bwd_dv_kernel   per chunk, value head and 64-column V tile: dv = K̃ D_c + Aᵀ (r dO), one
//                         accumulator per tile (tile_mma2x)
//   chunk_bwd_dqk_kernel  per chunk, value head, 64-key tile and role:
//     dk role: dk̃ = e^{γ−Γ_j} ⊙ (D_c v_j) + Σ_{t≥j} r_t dA_tj q_t ⊙ e^{Γ_t−Γ_j}, c_n of its keys;
//     dq role: dq̂ = e^{Γ_t} ⊙ (H_c dO_t) + Σ_{j≤t} dA_tj w_j k_j ⊙ e^{Γ_t−Γ_j};
//     the intra sums with the sub-chunk reference rows of SPEC §8 (last row of the earlier block for
//     dk̃, first row of the later block for dq̂; every exponent ≤ 0) and element-wise fp32 diagonal
//     blocks (factorised where the tile's Γ spans at most diag_span) — for gated_key by warp tiles
//     (dqk_warp_tiles: fragments formed in registers, the factorised diagonal in split-bf16); the router weights' dot products
//     ⟨k_j, dk̃_j⟩, ⟨q_t, dq̂_t⟩ per key tile into dotbuf, summed by chunk_dg_kernel in tile order.
// States and their gradients enter the products rounded to bf16, as fla's kernels do.

inline constexpr int bwd_threads = 256;  //!< threads of chunk_bwd_da_kernel and chunk_bwd_dv_kernel (8 warps)
inline constexpr int dqk_threads = 256;  //!< threads of chunk_bwd_dqk_kernel (two blocks per multiprocessor)
inline constexpr int bwd_kt = 64;        //!< keys per chunk_bwd_dqk_kernel block
inline constexpr int bwd_tv = 64;        //!< V columns per chunk_bwd_dv_kernel block

// --- 4a. chunk_bwd_da_kernel ---------------------------------------------------------------------

struct da_smem {
  static constexpr int VP = bwd_chunk_max_v, ldv = VP + 8, ldf = chunk_len + 4;
  std::size_t recs, Od, Vd, Af, bytes;
  __host__ __device__ da_smem() {
    recs = 0;
    Od = align128(chunk_len * sizeof(chunk_record));
    Vd = align128(Od + static_cast<std::size_t>(chunk_len) * ldv * sizeof(__nv_bfloat16));
    Af = align128(Vd + static_cast<std::size_t>(chunk_len) * ldv * sizeof(__nv_bfloat16));
    bytes = Af + static_cast<std::size_t>(chunk_len) * ldf * sizeof(float);
  }
};

//! grid (max_chunks, HV), bwd_threads: dA = dO·vᵀ (j ≤ t, 0 above), bf16 → p.dabuf [chunk][hv][C][C].
template <class D, class Dev>
__global__ void __launch_bounds__(bwd_threads) chunk_bwd_da_kernel(const chunk_bwd_params<Dev> p) {
  using Op = Dev;
  using L = da_smem;
  constexpr int C = chunk_len, VP = L::VP, ldv = L::ldv, ldf = L::ldf;
  const index_t c = blockIdx.x;
  if (c >= p.rt.seg_chunk[p.S * p.P]) return;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const L lay;
  auto* recs = reinterpret_cast<chunk_record*>(smem_raw + lay.recs);
  Op* Od = reinterpret_cast<Op*>(smem_raw + lay.Od);
  Op* Vd = reinterpret_cast<Op*>(smem_raw + lay.Vd);
  float* Af = reinterpret_cast<float*>(smem_raw + lay.Af);
  const int V = p.V, HV = p.HV;
  const int tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
  const int hv = static_cast<int>(blockIdx.y), h = hv / (HV / p.H);
  const chunk_where at = locate_chunk(p, c);
  load_records(p, c, at, h, hv, recs);
  __syncthreads();
  const bool vv = V % vec16<Dev> == 0 && aligned16(p.v) && aligned16(p.dO);
  stage_rows<Op>(Od, ldv, C, VP, p.dO, V, vv, [&](int i) { return recs[i].hv * V; }, [&](int i) { return recs[i].rd; });
  stage_rows<Op>(Vd, ldv, C, VP, p.v, V, vv, [&](int i) { return recs[i].hv * V; }, [&](int i) { return recs[i].wr; });
  __syncthreads();
  tile_mma<row_major_t, col_major_t>(Af, ldf, Od, ldv, Vd, ldv, C, C, VP, false);
  __syncthreads();
  Op* Ag = p.dabuf + (c * HV + hv) * static_cast<index_t>(C) * C;
  for (int e = tid; e < C * C / 8; e += nt) {
    const int t = e / (C / 8), j0 = (e % (C / 8)) * 8;
    float x[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) x[u] = j0 + u <= t ? Af[t * ldf + j0 + u] : 0.f;
    store8<Op>(Ag + t * C + j0, x);
  }
}

// --- 4b. chunk_bwd_dv_kernel ---------------------------------------------------------------------

template <int KP>
struct dv_smem {
  static constexpr int TV = bwd_tv, ldk = KP + 8, ldd = TV + 8, lda = chunk_len + 8, ldf = TV + 4;
  std::size_t recs, Ks, Ds, As, Os, Of, bytes;
  __host__ __device__ dv_smem() {
    using Op = __nv_bfloat16;
    recs = 0;
    Ks = align128(chunk_len * sizeof(chunk_record));
    Ds = align128(Ks + static_cast<std::size_t>(chunk_len) * ldk * sizeof(Op));
    As = align128(Ds + static_cast<std::size_t>(KP) * ldd * sizeof(Op));
    Os = align128(As + static_cast<std::size_t>(chunk_len) * lda * sizeof(Op));
    Of = align128(Os + static_cast<std::size_t>(chunk_len) * ldd * sizeof(Op));
    bytes = Of + static_cast<std::size_t>(chunk_len) * ldf * sizeof(float);
  }
};

//! grid (max_chunks, HV, ⌈V / bwd_tv⌉), bwd_threads: dv = K̃ D_c + Aᵀ (r dO) for the writing rows.
template <class D, class Dev, int KP>
__global__ void __launch_bounds__(bwd_threads) chunk_bwd_dv_kernel(const chunk_bwd_params<Dev> p) {
  using Op = Dev;
  using L = dv_smem<KP>;
  constexpr int C = chunk_len, TV = L::TV, ldk = L::ldk, ldd = L::ldd, lda = L::lda, ldf = L::ldf;
  const index_t c = blockIdx.x;
  if (c >= p.rt.seg_chunk[p.S * p.P]) return;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const L lay;
  auto* recs = reinterpret_cast<chunk_record*>(smem_raw + lay.recs);
  Op* Ks = reinterpret_cast<Op*>(smem_raw + lay.Ks);  // K̃ [C][KP]
  Op* Ds = reinterpret_cast<Op*>(smem_raw + lay.Ds);  // D_c [KP][TV]
  Op* As = reinterpret_cast<Op*>(smem_raw + lay.As);  // A [C][C]
  Op* Os = reinterpret_cast<Op*>(smem_raw + lay.Os);  // r dO [C][TV]
  float* Of = reinterpret_cast<float*>(smem_raw + lay.Of);
  const int K = p.K, V = p.V, HV = p.HV;
  const int tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
  const int hv = static_cast<int>(blockIdx.y), h = hv / (HV / p.H);
  const int j0 = static_cast<int>(blockIdx.z) * TV;
  const index_t ch = c * HV + hv;
  const chunk_where at = locate_chunk(p, c);
  // K̃, A and D_c by cp.async, in flight while the records load
  auto all = [](int) { return true; };
  stage_rows_async<Op>(Ks, ldk, C, KP, p.kbuf + ch * C * KP, KP, true, [](int i) { return static_cast<index_t>(i) * KP; }, all);
  stage_rows_async<Op>(As, lda, C, C, p.abuf + ch * C * C, C, true, [](int i) { return static_cast<index_t>(i) * C; }, all);
  {  // D_c [K, V] columns [j0, j0 + TV), rounded to bf16 by the reverse scan
    const bool vd = V % vec16<Op> == 0 && aligned16(p.dsbuf);
    stage_rows_async<Op>(Ds, ldd, KP, TV, p.dsbuf + ch * static_cast<index_t>(K) * V + j0, V - j0, vd,
                         [&](int a) { return static_cast<index_t>(a) * V; }, [&](int a) { return a < K; });
  }
  load_records(p, c, at, h, hv, recs);
  __syncthreads();  // recs ready
  const bool vv = V % vec16<Dev> == 0 && aligned16(p.dO);
  stage_rows_async<Op>(Os, ldd, C, TV, p.dO + j0, V - j0, vv, [&](int i) { return recs[i].hv * V; }, [&](int i) { return recs[i].rd; });
  stage_wait();
  __syncthreads();
  for (int e = tid; e < C * TV; e += nt) {
    const int t = e / TV, jj = e % TV;
    Op& x = Os[t * ldd + jj];
    x = to_op<Op>(to_f32(x) * recs[t].r);
  }
  __syncthreads();
  // Of[j][v] = Σ_a K̃_j[a] D_c[a][v] + Σ_t A_tj (r dO)_t[v]   (Aᵀ: A read col-major)
  tile_mma2x<row_major_t, row_major_t, col_major_t, row_major_t>(Of, ldf, Ks, ldk, Ds, ldd, KP, As, lda, Os, ldd, C, C, TV);
  __syncthreads();
  if (!p.dv_out && j0 + TV <= V && V % 4 == 0 && aligned16(p.dv)) {  // the write slot's fp32 row, 16 bytes per store
    for (int e = tid; e < C * (TV / 4); e += nt) {
      const int j = e / (TV / 4), jj = (e % (TV / 4)) * 4;
      const chunk_record& r = recs[j];
      if (!r.wr) continue;
      const float* f = Of + j * ldf + jj;
      *reinterpret_cast<float4*>(p.dv + (r.hv * p.Rw + write_slot(p, r, at)) * V + j0 + jj) = make_float4(f[0], f[1], f[2], f[3]);
    }
    return;
  }
  for (int e = tid; e < C * TV; e += nt) {
    const int j = e / TV, jj = e % TV;
    const chunk_record& r = recs[j];
    if (!r.wr || j0 + jj >= V) continue;
    const index_t o = (r.hv * p.Rw + write_slot(p, r, at)) * V + j0 + jj;
    if (p.dv_out) p.dv_out[o] = from_f32<Dev>(Of[j * ldf + jj]);  // direct store (one slot: o = r.hv · V + v)
    else p.dv[o] = Of[j * ldf + jj];
  }
}

//! e^x for x ≤ 0 on the SFU without __expf's subnormal fix-up (ex2.approx.ftz: a result below 2^-126,
//! e^{-87.3}, is 0 instead of subnormal; elsewhere __expf's value): two instructions instead of five.
__device__ __forceinline__ float exp_nonpos(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x * 1.44269504088896341f));
  return y;
}

// --- 4c. chunk_bwd_dqk_kernel --------------------------------------------------------------------

template <class D>
struct dqk_smem {
  using Op = __nv_bfloat16;
  static constexpr int KT = bwd_kt, VP = bwd_chunk_max_v;
  static constexpr int ldk = KT + 8, lda = chunk_len + 8, ldv = VP + 8, ldr = KT + 4, ld1 = (KT > chunk_len ? KT : chunk_len) + 8,
                       ldt = KT + 4;
  static constexpr int gfl = decay_key<D> ? chunk_len * KT : decay_head<D> ? chunk_len : 0;
  std::size_t recs, G, Qs, Ks, dA, Rw, Ss, R, T1, cn, cpart, bytes;
  __host__ __device__ dqk_smem() {
    recs = 0;
    G = align128(chunk_len * sizeof(chunk_record));
    Qs = align128(G + static_cast<std::size_t>(gfl) * sizeof(float));
    Ks = align128(Qs + static_cast<std::size_t>(chunk_len) * ldk * sizeof(Op));
    dA = align128(Ks + static_cast<std::size_t>(chunk_len) * ldk * sizeof(Op));
    Rw = align128(dA + static_cast<std::size_t>(chunk_len) * lda * sizeof(Op));
    Ss = align128(Rw + static_cast<std::size_t>(chunk_len) * ldv * sizeof(Op));
    // Ss: the state slice [KT][ldv] (bf16) for the inter product, then Tf [16][ldt] (fp32, the
    // sub-chunk products), then Xd [C][KT] (fp32, the factorised diagonal blocks' operand)
    std::size_t ss = static_cast<std::size_t>(KT) * ldv * sizeof(Op);
    if (static_cast<std::size_t>(16) * ldt * sizeof(float) > ss) ss = static_cast<std::size_t>(16) * ldt * sizeof(float);
    if (static_cast<std::size_t>(chunk_len) * KT * sizeof(float) > ss) ss = static_cast<std::size_t>(chunk_len) * KT * sizeof(float);
    R = align128(Ss + ss);
    T1 = align128(R + static_cast<std::size_t>(chunk_len) * ldr * sizeof(float));
    cn = align128(T1 + static_cast<std::size_t>(chunk_len) * ld1 * sizeof(Op));
    cpart = cn + KT * sizeof(float);
    bytes = cpart + static_cast<std::size_t>(dqk_threads / KT) * KT * sizeof(float);
  }
};

//! The intra-chunk part of the dq/dk kernels for bf16 inputs and gated_key decays, by warp tiles
//! (as the forward's warp_intra_tiles): warps warp0, warp0 + nwarps, … of the caller's group take
//! output tiles (B, A) of R — 16 rows of sub-chunk B,
//! 16 keys of the tile from A·16 — and forms its mma.sync m16n8k16 fragments in registers from dA, the
//! staged raw rows and Γ, without barriers between tiles:
//!   dk role (Dk): R_j += Σ_{t ≥ j} dA_tj r_t q_t ⊙ e^{Γ_t − Γ_j}   — rows j of B, sources t of the
//!     later sub-chunks through the reference row rr = last of B (both factors ≤ 1, the source rounded
//!     to bf16 as the staged form rounds it), and B itself factorised at its first row r0;
//!   dq role: R_t += Σ_{j ≤ t} dA_tj w_j k_j ⊙ e^{Γ_t − Γ_j}   — rows t of B, sources j of the earlier
//!     sub-chunks through the reference row r0 = first of B, and B itself factorised at r0.
//! The factorised diagonal (B's own rows, Γ spanning at most diag_span) takes the source in fp32, split
//! into bf16 halves (dA is exact in bf16): two products, each term within about 1e-5 of fp32; beyond
//! diag_span (slow[B]) every pair is formed in fp32. dA is 0 above its diagonal, so the diagonal
//! products need no mask. Adds to R only for keys < kn, and the diagonal only for rows that write (dk) /
//! read (dq), as the staged form does.
template <bool Dk>
__device__ __forceinline__ void dqk_warp_tiles(float* R, int ldr, const __nv_bfloat16* dAs, int lda, const __nv_bfloat16* Src,
                                               int lds, const float* G, int ldg, const chunk_record* recs, const int* slow,
                                               int kn, int warp0, int nwarps) {
  using x3_detail::mma_bf16_16816;
  using x3_detail::split2;
  constexpr int C = chunk_len, subs = C / 16, KT = bwd_kt, at = KT / 16;
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, g = lane >> 2, t2 = (lane & 3) * 2;
  auto pack = [](float x0, float x1) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(x0, x1);
    return *reinterpret_cast<const unsigned*>(&h);
  };
  auto dab = [&](int t, int j) { return dAs[t * lda + j]; };
  // the source row's scale: r_t (dk: q rows) or w_j (dq: k rows)
  auto scale = [&](int i) { return Dk ? recs[i].r : recs[i].w; };
  for (int task = warp0; task < subs * at; task += nwarps) {
    const int B = task / at, a0 = (task % at) * 16;
    const int r0 = 16 * B, rr = Dk ? r0 + 15 : r0;  // the reference row of the off-diagonal sources
    // A fragment of dA for target rows m and source rows k of sub-chunk S: dk: (m = j, k = t) = dA[t][j];
    // dq: (m = t, k = j) = dA[t][j]
    auto afrag = [&](int S, unsigned (&af)[4]) {
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int m = r0 + g + 8 * (q & 1), k = 16 * S + t2 + 8 * (q >> 1);
        __nv_bfloat162 v;
        if (Dk) v.x = dab(k, m), v.y = dab(k + 1, m);
        else v = *reinterpret_cast<const __nv_bfloat162*>(dAs + m * lda + k);
        af[q] = *reinterpret_cast<const unsigned*>(&v);
      }
    };
    float off[2][4] = {}, dg[2][4] = {};
    const bool sl = slow[B] != 0;
    // B-fragment values of source sub-chunk S for 8-column half h (rows k = t2, t2 + 1, t2 + 8, t2 + 9 of S,
    // key a0 + 8h + g): the source row scaled by r / w and by its decay to the reference row ref
    // (≤ 1 off the diagonal: exp_nonpos there; the factorised diagonal's accurate expf)
    auto source = [&](int S, int ref, int h, bool accurate, float (&y)[4]) {
      const int a = a0 + 8 * h + g;
      const float gref = G[ref * ldg + a];
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int i = 16 * S + t2 + (q & 1) + 8 * (q >> 1);
        const float x = Dk ? G[i * ldg + a] - gref : gref - G[i * ldg + a];
        y[q] = to_f32(Src[i * lds + a]) * scale(i) * (accurate ? expf(x) : exp_nonpos(x));
      }
    };
    // off-diagonal sources: dk — the sub-chunks after B; dq — those before
    for (int S = Dk ? B + 1 : 0; S < (Dk ? subs : B); ++S) {
      unsigned af[4];
      afrag(S, af);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float y[4];
        source(S, rr, h, false, y);
        const unsigned bf[2] = {pack(y[0], y[1]), pack(y[2], y[3])};
        mma_bf16_16816(off[h], af, bf);
      }
    }
    if (!sl) {  // B's own rows, factorised at r0, split-bf16
      unsigned af[4];
      afrag(B, af);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float y[4];
        source(B, r0, h, true, y);
        unsigned bh[2], bl[2];
        split2(y[0], y[1], bh[0], bl[0]);
        split2(y[2], y[3], bh[1], bl[1]);
        mma_bf16_16816(dg[h], af, bl);
        mma_bf16_16816(dg[h], af, bh);
      }
    }
    // epilogue: rows m = r0 + g (+8), keys a = a0 + 8h + t2 + u. One accurate exponential per element:
    // e = e^{Γ_rr − Γ_m} (dk) / e^{Γ_m − Γ_r0} (dq; rr = r0) scales the off-diagonal sum and, times the
    // key's e^{Γ_r0 − Γ_rr} for dk (read once per task), the factorised diagonal's
    float grr[2][2], e0[2][2];
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        const int a = a0 + 8 * h + t2 + u;
        grr[h][u] = G[rr * ldg + a];
        e0[h][u] = Dk && !sl ? expf(G[r0 * ldg + a] - grr[h][u]) : 1.f;
      }
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int m = r0 + g + 8 * (q >> 1), u = q & 1, a = a0 + 8 * h + t2 + u;
        if (a >= kn) continue;
        const float gm = G[m * ldg + a];
        const float e = expf(Dk ? grr[h][u] - gm : gm - grr[h][u]);
        float add = off[h][q] * e;
        const bool own = Dk ? recs[m].wr : recs[m].rd;
        if (own) {
          if (!sl) {
            add += dg[h][q] * (e * e0[h][u]);
          } else {  // per pair in fp32 over B's rows (dk: t from m to B's end; dq: j from B's start to m)
            float acc = 0.f;
            if (Dk) {
              for (int t = m; t < r0 + 16; ++t) acc += recs[t].r * to_f32(dab(t, m)) * to_f32(Src[t * lds + a]) * __expf(G[t * ldg + a] - gm);
            } else {
              for (int j = r0; j <= m; ++j) acc += to_f32(dab(m, j)) * recs[j].w * to_f32(Src[j * lds + a]) * __expf(gm - G[j * ldg + a]);
            }
            add += acc;
          }
        }
        R[m * ldr + a] += add;
      }
  }
}

//! Flags sub-chunk b (rows 16b … 16b + 15) in slow[] when Γ of one of its rows is more than diag_span
//! from Γ of its first row for a key of the tile (Γ [C][KT] in shared memory): those sub-chunks form every
//! diagonal pair in fp32 (dqk_warp_tiles). Four keys per step, one flag per sub-chunk and thread, then one
//! atomic per flagged sub-chunk; threads tid = 0 … nt − 1 of the block; slow[] zeroed and a barrier before.
template <int C, int KT>
__device__ __forceinline__ void flag_slow_subchunks(const float* G, int* slow, int tid, int nt) {
  static_assert(C / 16 <= 32 && KT % 4 == 0, "flag_slow_subchunks: one bit per sub-chunk, four keys per step");
  unsigned bad = 0;
  for (int e = tid; e < C * KT / 4; e += nt) {
    const int i = e / (KT / 4), a = (e % (KT / 4)) * 4, r0 = i & ~15;
    const float4 g = *reinterpret_cast<const float4*>(G + i * KT + a), g0 = *reinterpret_cast<const float4*>(G + r0 * KT + a);
    if (!(fabsf(g.x - g0.x) <= diag_span && fabsf(g.y - g0.y) <= diag_span && fabsf(g.z - g0.z) <= diag_span &&
          fabsf(g.w - g0.w) <= diag_span))
      bad |= 1u << (i >> 4);
  }
  for (int b = 0; b < C / 16; ++b)
    if (bad >> b & 1u) atomicOr(&slow[b], 1);
}

//! out[a] = Σ_v H(a, v) · D(a, v) in fp32 for the tile's keys a < KT (c_n's Σ_v H_c ⊙ D_c before e^{γ}):
//! warps warp0, warp0 + nwarps, … take a key row each, lanes stride over v < VP, then a butterfly sum.
template <int KT, int VP, class HAt, class DAt>
__device__ __forceinline__ void key_rowsums(float* out, HAt&& H, DAt&& D, int warp0, int nwarps) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  for (int a = warp0; a < KT; a += nwarps) {
    float hd = 0.f;
    for (int v = lane; v < VP; v += 32) hd = fmaf(H(a, v), D(a, v), hd);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) hd += __shfl_xor_sync(0xffffffffu, hd, o);
    if (lane == 0) out[a] = hd;
  }
}

//! Where a row of dq or dk goes: its element k0 (null: nothing written) and its scale (r_t or w_j); T
//! float (a partial) or the element type (a direct store, rounded once).
template <class T>
struct row_out_t {
  T* dst;
  float s;
};
using row_out = row_out_t<float>;

//! dst[0 … 3] = x[0 … 3] in T (rounded once): one 16-byte (float) or 8-byte (bf16, fp16) store; dst aligned so.
template <class T>
__device__ __forceinline__ void store4(T* dst, float x0, float x1, float x2, float x3) {
  if constexpr (std::is_same_v<T, float>) {
    *reinterpret_cast<float4*>(dst) = make_float4(x0, x1, x2, x3);
  } else {
    const T t[4] = {from_f32<T>(x0), from_f32<T>(x1), from_f32<T>(x2), from_f32<T>(x3)};
    uint2 w;
    memcpy(&w, t, 8);
    *reinterpret_cast<uint2*>(dst) = w;
  }
}

//! Whether T rows of K elements from `base` take write_key_rows' four-element stores (16 bytes for float,
//! 8 for 2-byte types): K % 4 == 0 and base aligned to four elements.
template <class T>
__device__ __forceinline__ bool rows_vec4(const T* base, int K) {
  return K % 4 == 0 && (reinterpret_cast<std::uintptr_t>(base) & (4 * sizeof(T) - 1)) == 0;
}

//! The dq / dk rows out of R [C][ldr] (dq̂ or dk̃ over the tile's keys a < kn): 16 threads per row, four
//! consecutive keys each (one store4 where all four lie below kn and `vec`), dst[a] = s · R[i][a] (rounded
//! once to dst's type) for row_of(i) = {dst, s} (a row_out_t); and ⟨x_i, R_i⟩ over the tile's keys into
//! dots[2i] when dots is not null (x = the staged raw q or k rows X [C][ldk]). Threads `thread` = 0 …
//! threads − 1 of the caller's group (whole warps).
template <int C, int KT, class Op, class RowOf>
__device__ __forceinline__ void write_key_rows(const float* R, int ldr, const Op* X, int ldk, int kn, bool vec, float* dots,
                                               int thread, int threads, RowOf&& row_of) {
  static_assert(KT == 64, "write_key_rows: 16 threads of four keys per row");
  const int l16 = thread % 16, a0 = l16 * 4;
  for (int i = thread / 16; i < C; i += threads / 16) {
    float dot = 0.f;
    if (a0 < kn) {
      const float4 x4 = *reinterpret_cast<const float4*>(R + i * ldr + a0);
      const float x[4] = {x4.x, x4.y, x4.z, x4.w};
#pragma unroll
      for (int u = 0; u < 4; ++u)
        if (a0 + u < kn) dot += to_f32(X[i * ldk + a0 + u]) * x[u];
      const auto o = row_of(i);
      using T = std::remove_pointer_t<decltype(o.dst)>;
      if (o.dst) {
        if (vec && a0 + 4 <= kn) store4(o.dst + a0, o.s * x[0], o.s * x[1], o.s * x[2], o.s * x[3]);
        else
#pragma unroll
          for (int u = 0; u < 4; ++u)
            if (a0 + u < kn) o.dst[a0 + u] = from_f32<T>(o.s * x[u]);
      }
    }
#pragma unroll
    for (int o = 8; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
    if (l16 == 0 && dots) dots[2 * i] = dot;
  }
}

//! grid (max_chunks, HV, 2 · KP / bwd_kt), dqk_threads: blockIdx.z = 2·(key tile) + role (0: dk̃, 1: dq̂).
template <class D, class Dev, int KP>
__global__ void __launch_bounds__(dqk_threads) chunk_bwd_dqk_kernel(const chunk_bwd_params<Dev> p) {
  using Op = Dev;
  using L = dqk_smem<D>;
  constexpr int C = chunk_len, KT = L::KT, VP = L::VP;
  constexpr int ldk = L::ldk, lda = L::lda, ldv = L::ldv, ldr = L::ldr, ld1 = L::ld1, ldt = L::ldt;
  constexpr int parts = dqk_threads / KT;  // c_n's partial sums: `parts` threads per key
  static_assert(dqk_threads % KT == 0 && C % parts == 0, "chunk_bwd_dqk_kernel: c_n's partial sums");
  static_assert(KT * ldv * sizeof(Op) <= C * ldr * sizeof(float), "chunk_bwd_dqk_kernel: H_c's rows fit in R's space");
  const index_t c = blockIdx.x;
  if (c >= p.rt.seg_chunk[p.S * p.P]) return;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const L lay;
  auto* recs = reinterpret_cast<chunk_record*>(smem_raw + lay.recs);
  float* G = reinterpret_cast<float*>(smem_raw + lay.G);   // Γ of the tile's keys [C][KT] (scalar: [C])
  Op* Qs = reinterpret_cast<Op*>(smem_raw + lay.Qs);       // raw q of the tile's keys, reading rows
  Op* Ks = reinterpret_cast<Op*>(smem_raw + lay.Ks);       // raw k of the tile's keys, writing rows
  Op* dAs = reinterpret_cast<Op*>(smem_raw + lay.dA);      // dA [C][C], 0 above the diagonal
  Op* Rw = reinterpret_cast<Op*>(smem_raw + lay.Rw);       // v (dk role) or dO (dq role) rows, all V
  Op* Ss = reinterpret_cast<Op*>(smem_raw + lay.Ss);       // D_c (dk) or H_c (dq) rows of the tile's keys
  float* Tf = reinterpret_cast<float*>(smem_raw + lay.Ss);
  float* Xd = reinterpret_cast<float*>(smem_raw + lay.Ss);
  float* R = reinterpret_cast<float*>(smem_raw + lay.R);   // dk̃ or dq̂ [C][KT]
  Op* T1 = reinterpret_cast<Op*>(smem_raw + lay.T1);
  float* cn = reinterpret_cast<float*>(smem_raw + lay.cn);
  float* cpart = reinterpret_cast<float*>(smem_raw + lay.cpart);
  __shared__ int slow[chunk_len / 16];

  const int K = p.K, V = p.V, HV = p.HV;
  const index_t KV = static_cast<index_t>(K) * V;
  const int tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
  const int hv = static_cast<int>(blockIdx.y), h = hv / (HV / p.H);
  const bool dk_role = (blockIdx.z & 1u) == 0;
  const int kt = static_cast<int>(blockIdx.z >> 1), k0 = kt * KT, kn = K - k0 < KT ? K - k0 : KT;
  const index_t ch = c * HV + hv;
  const chunk_where at = locate_chunk(p, c);
  const device_source<Dev> src = at.is_shared ? p.shr : p.main;
  // the loads that need no records (Γ, dA, the state slices) by cp.async, in flight while the records load
  if constexpr (decay_key<D>)
    stage_rows_async<float>(G, KT, C, KT, p.gambuf + ch * static_cast<index_t>(C) * KP + k0, KT, true,
                            [](int t) { return static_cast<index_t>(t) * KP; }, [](int) { return true; });
  else if constexpr (decay_head<D>)
    if (tid < C) G[tid] = p.gambuf[ch * C + tid];
  stage_rows_async<Op>(dAs, lda, C, C, p.dabuf + ch * C * C, C, true, [](int i) { return static_cast<index_t>(i) * C; },
                       [](int) { return true; });
  {  // the state slice (D_c rows of the tile's keys for dk, H_c rows for dq), rounded to bf16 by the scans;
     // the dk role also stages the H_c rows into R's space (free until the inter product) for c_n
    const Op* Hs = p.hsbuf + ch * KV + static_cast<index_t>(k0) * V;
    const Op* Ds = p.dsbuf + ch * KV + static_cast<index_t>(k0) * V;
    const bool vs = V % vec16<Op> == 0 && aligned16(p.hsbuf) && aligned16(p.dsbuf);
    auto row = [&](int a) { return static_cast<index_t>(a) * V; };
    auto key = [&](int a) { return a < kn; };
    stage_rows_async<Op>(Ss, ldv, KT, VP, dk_role ? Ds : Hs, V, vs, row, key);
    if (dk_role) stage_rows_async<Op>(reinterpret_cast<Op*>(R), ldv, KT, VP, Hs, V, vs, row, key);
  }
  load_records(p, c, at, h, hv, recs);
  if (tid < C / 16) slow[tid] = 0;
  stage_wait();
  __syncthreads();  // recs, Γ, dA and the state slices ready
  {  // the rows (records needed), in flight while c_n and the slow sub-chunks are formed
    const bool vq = K % vec16<Dev> == 0 && aligned16(src.q) && aligned16(src.k);
    stage_rows_async<Op>(Qs, ldk, C, KT, src.q + k0, K - k0, vq, [&](int i) { return recs[i].qk; },
                         [&](int i) { return recs[i].rd; });
    stage_rows_async<Op>(Ks, ldk, C, KT, src.k + k0, K - k0, vq, [&](int i) { return recs[i].qk; },
                         [&](int i) { return recs[i].wr; });
    const bool vv = V % vec16<Dev> == 0 && aligned16(p.v) && aligned16(p.dO);
    if (dk_role)
      stage_rows_async<Op>(Rw, ldv, C, VP, p.v, V, vv, [&](int i) { return recs[i].hv * V; }, [&](int i) { return recs[i].wr; });
    else
      stage_rows_async<Op>(Rw, ldv, C, VP, p.dO, V, vv, [&](int i) { return recs[i].hv * V; }, [&](int i) { return recs[i].rd; });
  }
  if (dk_role) {  // Σ_v H_c[a][v] D_c[a][v] in fp32 from the bf16 rows (a warp per key row; e^{γ} applied at the end)
    const Op* Hs = reinterpret_cast<const Op*>(R);
    key_rowsums<KT, VP>(
        cn, [&](int a, int v) { return to_f32(Hs[a * ldv + v]); }, [&](int a, int v) { return to_f32(Ss[a * ldv + v]); }, tid >> 5,
        nt >> 5);
  }
  if constexpr (decay_key<D>) flag_slow_subchunks<C, KT>(G, slow, tid, nt);
  stage_wait();
  __syncthreads();
  auto gm = [&](int t, int a) -> float {
    if constexpr (decay_key<D>) return G[t * KT + a];
    else if constexpr (decay_head<D>) return G[t];
    else return 0.f;
  };
  auto qf = [&](int t, int a) { return to_f32(Qs[t * ldk + a]); };
  auto kf = [&](int j, int a) { return to_f32(Ks[j * ldk + a]); };
  // R's rows out (write_key_rows) and ⟨x_i, R_i⟩ into dotbuf's slot `which` (x = the staged raw k or q rows)
  auto write_rows = [&](const Op* X, bool vec, int which, auto&& row_of) {
    float* dots = p.dotbuf ? p.dotbuf + (ch * (KP / KT) + kt) * C * 2 + which : nullptr;
    write_key_rows<C, KT>(R, ldr, X, ldk, kn, vec, dots, tid, nt, row_of);
  };

  // inter: R = v D_cᵀ (dk role) or dO H_cᵀ (dq role), over the tile's keys
  tile_mma<row_major_t, col_major_t>(R, ldr, Rw, ldv, Ss, ldv, C, KT, VP, false);
  __syncthreads();

  if (dk_role) {
    {  // dk̃^inter = e^{γ−Γ_j} ⊙ (D_c v_j) on the writing rows, and Σ_j k̃_j ⊙ dk̃_j^inter: `parts` partial
       // sums of C / parts rows per key, in the same pass (a thread keeps one key)
      constexpr int rows = C / parts;
      const int a = tid % KT, part = tid / KT;
      const float gl = gm(C - 1, a);
      float acc = 0.f;
      for (int j = part * rows; j < part * rows + rows; ++j) {
        const float x = (recs[j].wr && a < kn) ? R[j * ldr + a] * __expf(gl - gm(j, a)) : 0.f;
        R[j * ldr + a] = x;
        acc += kf(j, a) * recs[j].w * x;
      }
      cpart[part * KT + a] = acc;
    }
    if constexpr (decay_key<D> && std::is_same_v<Dev, __nv_bfloat16>) {
      __syncthreads();  // c_n's partial sums have read R
      dqk_warp_tiles<true>(R, ldr, dAs, lda, Qs, ldk, G, KT, recs, slow, kn, tid >> 5, nt >> 5);
      __syncthreads();
    } else if constexpr (decay_key<D>) {
      for (int J = 0; J + 1 < C / 16; ++J) {
        const int rr = 16 * J + 15, n_after = C - (rr + 1);  // rows t > rr
        __syncthreads();
        for (int e = tid; e < n_after * KT; e += nt) {
          const int i = e / KT, a = e % KT, t = rr + 1 + i;
          T1[i * ld1 + a] = to_op<Op>(a < kn ? qf(t, a) * recs[t].r * __expf(G[t * KT + a] - G[rr * KT + a]) : 0.f);
        }
        __syncthreads();
        // Tf[jj][a] = Σ_{t>rr} dA_t,(16J+jj) · Qr_t[a]: A = dAᵀ (col-major view of the rows after rr)
        tile_mma<col_major_t, row_major_t>(Tf, ldt, dAs + (rr + 1) * lda + 16 * J, lda, T1, ld1, 16, KT, n_after, false);
        __syncthreads();
        for (int e = tid; e < 16 * KT; e += nt) {
          const int jj = e / KT, a = e % KT, j = 16 * J + jj;
          if (a < kn) R[j * ldr + a] += Tf[jj * ldt + a] * __expf(G[rr * KT + a] - G[j * KT + a]);
        }
      }
      __syncthreads();
      for (int e = tid; e < C * KT; e += nt) {  // Xd[t] = r_t q_t e^{Γ_t − Γ_r}
        const int t = e / KT, a = e % KT, r0 = t & ~15;
        if (!slow[t >> 4]) Xd[t * KT + a] = recs[t].r * qf(t, a) * expf(G[t * KT + a] - G[r0 * KT + a]);
      }
      __syncthreads();
      // diagonal blocks: thread per (j, a), t from j to the end of j's block
      for (int e = tid; e < C * KT; e += nt) {
        const int j = e / KT, a = e % KT;
        if (a >= kn || !recs[j].wr) continue;
        const int r0 = j & ~15, end = r0 + 16;
        float acc = 0.f;
        if (!slow[j >> 4]) {
          for (int t = j; t < end; ++t) acc = fmaf(to_f32(dAs[t * lda + j]), Xd[t * KT + a], acc);
          acc *= expf(G[r0 * KT + a] - G[j * KT + a]);
        } else {
          for (int t = j; t < end; ++t) acc += recs[t].r * to_f32(dAs[t * lda + j]) * qf(t, a) * __expf(G[t * KT + a] - G[j * KT + a]);
        }
        R[j * ldr + a] += acc;
      }
      __syncthreads();
    } else {
      // T1[t][j] = r_t dA_tj e^{Γ_t−Γ_j}; dk̃ += T1ᵀ q
      __syncthreads();
      for (int e = tid; e < C * C; e += nt) {
        const int t = e / C, j = e % C;
        float x = to_f32(dAs[t * lda + j]) * recs[t].r;
        if constexpr (decay_head<D>) x = j > t ? 0.f : x * __expf(G[t] - G[j]);
        T1[t * ld1 + j] = to_op<Op>(x);
      }
      __syncthreads();
      tile_mma<col_major_t, row_major_t>(R, ldr, T1, ld1, Qs, ldk, C, KT, C, true);
      __syncthreads();
    }
    if (p.cbuf && tid < KT) {
      const int a = tid;
      float inter = 0.f;
#pragma unroll
      for (int q = 0; q < parts; ++q) inter += cpart[q * KT + a];
      p.cbuf[ch * KP + k0 + a] = a < kn ? cn[a] * __expf(gm(C - 1, a)) + inter : 0.f;
    }
    if (p.dk || p.dotbuf)  // dk = w dk̃ and ⟨k_j, dk̃_j⟩ over the tile
      write_rows(Ks, K % 4 == 0 && aligned16(p.dk), 0, [&](int j) {
        const chunk_record& r = recs[j];
        return row_out{r.wr && p.dk ? p.dk + (r.hv * p.Rw + write_slot(p, r, at)) * K + k0 : nullptr, r.w};
      });
  } else {
    for (int e = tid; e < C * KT; e += nt) {
      const int t = e / KT, a = e % KT;
      R[t * ldr + a] = (recs[t].rd && a < kn) ? R[t * ldr + a] * __expf(gm(t, a)) : 0.f;
    }
    if constexpr (decay_key<D> && std::is_same_v<Dev, __nv_bfloat16>) {
      __syncthreads();  // R scaled
      dqk_warp_tiles<false>(R, ldr, dAs, lda, Ks, ldk, G, KT, recs, slow, kn, tid >> 5, nt >> 5);
      __syncthreads();
    } else if constexpr (decay_key<D>) {
      for (int I = 1; I < C / 16; ++I) {
        const int r0 = 16 * I;
        __syncthreads();
        for (int e = tid; e < r0 * KT; e += nt) {
          const int j = e / KT, a = e % KT;
          T1[j * ld1 + a] = to_op<Op>(a < kn ? kf(j, a) * recs[j].w * __expf(G[r0 * KT + a] - G[j * KT + a]) : 0.f);
        }
        __syncthreads();
        tile_mma<row_major_t, row_major_t>(Tf, ldt, dAs + r0 * lda, lda, T1, ld1, 16, KT, r0, false);
        __syncthreads();
        for (int e = tid; e < 16 * KT; e += nt) {
          const int i = e / KT, a = e % KT, t = r0 + i;
          if (a < kn) R[t * ldr + a] += Tf[i * ldt + a] * __expf(G[t * KT + a] - G[r0 * KT + a]);
        }
      }
      __syncthreads();
      for (int e = tid; e < C * KT; e += nt) {  // Xd[j] = w_j k_j e^{Γ_r − Γ_j}
        const int j = e / KT, a = e % KT, r0 = j & ~15;
        if (!slow[j >> 4]) Xd[j * KT + a] = kf(j, a) * recs[j].w * expf(G[r0 * KT + a] - G[j * KT + a]);
      }
      __syncthreads();
      for (int e = tid; e < C * KT; e += nt) {
        const int t = e / KT, a = e % KT;
        if (a >= kn || !recs[t].rd) continue;
        const int start = t & ~15;
        float acc = 0.f;
        if (!slow[t >> 4]) {
          for (int j = start; j <= t; ++j) acc = fmaf(to_f32(dAs[t * lda + j]), Xd[j * KT + a], acc);
          acc *= expf(G[t * KT + a] - G[start * KT + a]);
        } else {
          for (int j = start; j <= t; ++j) acc += to_f32(dAs[t * lda + j]) * recs[j].w * kf(j, a) * __expf(G[t * KT + a] - G[j * KT + a]);
        }
        R[t * ldr + a] += acc;
      }
      __syncthreads();
    } else {
      __syncthreads();
      for (int e = tid; e < C * C; e += nt) {
        const int t = e / C, j = e % C;
        float x = to_f32(dAs[t * lda + j]) * recs[j].w;
        if constexpr (decay_head<D>) x = j > t ? 0.f : x * __expf(G[t] - G[j]);
        T1[t * ld1 + j] = to_op<Op>(x);
      }
      __syncthreads();
      tile_mma<row_major_t, row_major_t>(R, ldr, T1, ld1, Ks, ldk, C, KT, C, true);
      __syncthreads();
    }
    if (p.dq || p.dotbuf)  // dq = r dq̂ and ⟨q_t, dq̂_t⟩ over the tile
      write_rows(Qs, K % 4 == 0 && aligned16(p.dq), 1, [&](int t) {
        const chunk_record& r = recs[t];
        return row_out{r.rd && p.dq ? p.dq + (r.hv * p.Rr + r.slot) * K + k0 : nullptr, r.r};
      });
  }
}

// --- 4d. chunk_bwd_dqkg_kernel (bf16, gated_key) ------------------------------------------------
//
// For bf16 inputs and per-key decays, kernels 4a, 4c and 5 in one: one block of 16 warps per (chunk,
// value head, 64-key tile). Each input tile is copied once (chunk_bwd_dqk_kernel's two role blocks
// each staged Γ, dA, q, k and a state slice; chunk_dg_kernel read q, k, dq, dk and g back from global
// memory; chunk_bwd_da_kernel wrote dA for them):
//   1. one round of cp.async copies: Γ, the D_c and H_c slices, then (records needed) q, k, v and dO;
//      in flight, the log-decay floor of every (row, key) as bits (for dg) and the slow sub-chunks;
//   2. c_n's Σ_v H_c ⊙ D_c; dA = dO·vᵀ (j ≤ t, rounded to bf16: chunk_bwd_da_kernel's values), a warp per
//      16 × 16 tile; the inter products v D_cᵀ (warps 0–7, the dk role) and dO H_cᵀ (warps 8–15, the dq
//      role) in registers by mma.sync, with their epilogue factors e^{γ−Γ_j} / e^{Γ_t};
//   3. after one block barrier the v/dO/D_c/H_c tiles are dead and R_k, R_q take their place; each role
//      then runs as chunk_bwd_dqk_kernel's (dqk_warp_tiles, c_n, the rows out) behind its own named
//      barrier;
//   4. dg_u = Σ_{t≥u} (q_t ⊙ dq_t − k_t ⊙ dk_t) + c_n from the staged rows and R_k, R_q (chunk_dg_kernel's
//      terms), a thread per key and group of eight rows: the groups' sums first, then each group's
//      suffix sums from the later groups' total.
// The v, dO and state rows are staged without padding, their 16-byte chunks swizzled (chunk c of row r
// at c ⊕ (r mod 8)), so that ldmatrix reads them without bank conflicts and two blocks fit per SM.
// The arithmetic is that of kernels 4a, 4c and 5 (test_cuda_backward compares the gradients;
// docs/data/issue11_s13 the bits), except dg's suffix sums, taken in groups instead of one row after
// another (session 19): the same terms, added in another order.

//! Whether the bf16 backward of D takes chunk_bwd_dqkg_kernel (per-key decays) instead of kernels 4a, 4c and 5.
template <class D>
inline constexpr bool dqkg_fused = decay_key<D>;

inline constexpr int dqkg_threads = 512;  //!< threads of chunk_bwd_dqkg_kernel (two 8-warp roles, two blocks per SM)

struct dqkg_smem {
  using Op = __nv_bfloat16;
  static constexpr int C = chunk_len, KT = bwd_kt, VP = bwd_chunk_max_v;
  static constexpr int ldk = KT + 8, lda = C + 8, ldr = KT + 4, parts = (dqkg_threads / 2) / KT;
  static constexpr int dg_groups = dqkg_threads / KT;  //!< step 4's row groups (a thread per key and group)
  std::size_t recs, G, Qs, Ks, dA, Vr, Or, Ds, Hs, Rk, Rq, gsum, cn, cpart, bytes;
  __host__ __device__ dqkg_smem() {
    recs = 0;
    G = align128(C * sizeof(chunk_record));
    Qs = align128(G + static_cast<std::size_t>(C) * KT * sizeof(float));
    Ks = align128(Qs + static_cast<std::size_t>(C) * ldk * sizeof(Op));
    dA = align128(Ks + static_cast<std::size_t>(C) * ldk * sizeof(Op));
    Vr = align128(dA + static_cast<std::size_t>(C) * lda * sizeof(Op));
    Or = Vr + static_cast<std::size_t>(C) * VP * sizeof(Op);
    Ds = Or + static_cast<std::size_t>(C) * VP * sizeof(Op);
    Hs = Ds + static_cast<std::size_t>(KT) * VP * sizeof(Op);
    const std::size_t end = Hs + static_cast<std::size_t>(KT) * VP * sizeof(Op);
    Rk = Vr;  // after the inter products
    Rq = Rk + static_cast<std::size_t>(C) * ldr * sizeof(float);
    gsum = Rq + static_cast<std::size_t>(C) * ldr * sizeof(float);  // step 4's group sums
    cn = align128(end);
    cpart = cn + KT * sizeof(float);
    bytes = cpart + static_cast<std::size_t>(parts) * KT * sizeof(float);
  }
};

//! Element (r, c) of a swizzled [rows][VP] bf16 tile (16-byte chunk c / 8 of row r stored at chunk (c / 8) ⊕ (r mod 8)).
__device__ __forceinline__ int swz(int r, int c) {
  return r * bwd_chunk_max_v + ((((c >> 3) ^ r) & 7) | ((c >> 3) & ~7)) * 8 + (c & 7);
}

//! out[a] = Σ_v H(a, v) · D(a, v) in fp32 over swizzled [KT][VP] bf16 tiles (c_n's Σ_v H_c ⊙ D_c before
//! e^{γ}): warps warp0, warp0 + nwarps, … take two key rows each, a lane one 16-byte chunk (eight v) of
//! one row, then a butterfly over the row's sixteen lanes.
template <int KT, int VP>
__device__ __forceinline__ void key_rowsums_swz(float* out, const __nv_bfloat16* H, const __nv_bfloat16* D, int warp0, int nwarps) {
  static_assert(VP == 128 && KT % 2 == 0, "key_rowsums_swz: sixteen 16-byte chunks per row, two rows per warp");
  const int lane = static_cast<int>(threadIdx.x) & 31;
  for (int a2 = warp0 * 2; a2 < KT; a2 += nwarps * 2) {
    const int a = a2 + (lane >> 4), v0 = (lane & 15) * 8;
    const uint4 hr = *reinterpret_cast<const uint4*>(H + swz(a, v0)), dr = *reinterpret_cast<const uint4*>(D + swz(a, v0));
    const __nv_bfloat162* h2 = reinterpret_cast<const __nv_bfloat162*>(&hr);
    const __nv_bfloat162* d2 = reinterpret_cast<const __nv_bfloat162*>(&dr);
    float hd = 0.f;
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const float2 hf = __bfloat1622float2(h2[u]), df = __bfloat1622float2(d2[u]);
      hd = fmaf(hf.x, df.x, hd);
      hd = fmaf(hf.y, df.y, hd);
    }
#pragma unroll
    for (int o = 8; o > 0; o >>= 1) hd += __shfl_xor_sync(0xffffffffu, hd, o);
    if ((lane & 15) == 0) out[a] = hd;
  }
}

//! Rows [0, rows) of a swizzled [rows][VP] bf16 tile from src + off(i) (n columns; zero beyond n and
//! where !take(i)): cp.async where `vec`, else element copies. Whole block.
template <class Off, class Take>
__device__ __forceinline__ void stage_rows_swz(__nv_bfloat16* dst, int rows, const __nv_bfloat16* src, int n, bool vec, Off&& off,
                                               Take&& take) {
  constexpr int VP = bwd_chunk_max_v, groups = VP / 8;
  const int tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
  for (int gi = tid; gi < rows * groups; gi += nt) {
    const int i = gi / groups, a0 = (gi % groups) * 8;
    __nv_bfloat16* d = dst + swz(i, a0);
    if (vec) {
      const bool ok = a0 < n && take(i);
      const __nv_bfloat16* s = ok ? src + off(i) + a0 : src;  // nothing is read where !ok (source size 0)
      const unsigned sa = static_cast<unsigned>(__cvta_generic_to_shared(d));
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(sa), "l"(s), "r"(ok ? 16 : 0) : "memory");
    } else {
      const bool ok = take(i);
#pragma unroll
      for (int u = 0; u < 8; ++u) d[u] = ok && a0 + u < n ? src[off(i) + a0 + u] : __float2bfloat16_rn(0.f);
    }
  }
}

//! One warp: acc[T][h] (16 rows 16·rb[T] … of A, 8 columns n0 + 8h … of B) = A·Bᵀ over VP, for NT row
//! blocks sharing B's fragments; A and B swizzled [·][VP] bf16 tiles (rows of A: m, rows of B: n, k = VP
//! contiguous in both), m16n8k16 fragments by ldmatrix, k in ascending steps of 16.
template <int NT>
__device__ __forceinline__ void warp_abt_swz(float (&acc)[NT][2][4], const __nv_bfloat16* A, const int (&rb)[NT],
                                             const __nv_bfloat16* B, int n0) {
  using x3_detail::mma_bf16_16816;
  const int lane = static_cast<int>(threadIdx.x) & 31;
#pragma unroll
  for (int T = 0; T < NT; ++T)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[T][h][q] = 0.f;
#pragma unroll
  for (int ks = 0; ks < bwd_chunk_max_v / 16; ++ks) {
    unsigned b4[4];
    ldsm_x4(b4, B + swz(n0 + (lane & 7) + 8 * (lane >> 4), 16 * ks + 8 * ((lane >> 3) & 1)));
    const unsigned b0[2] = {b4[0], b4[1]}, b1[2] = {b4[2], b4[3]};
#pragma unroll
    for (int T = 0; T < NT; ++T) {
      unsigned a4[4];
      ldsm_x4(a4, A + swz(16 * rb[T] + (lane & 15), 16 * ks + 8 * (lane >> 4)));
      mma_bf16_16816(acc[T][0], a4, b0);
      mma_bf16_16816(acc[T][1], a4, b1);
    }
  }
}

//! grid (max_chunks, HV, KP / bwd_kt), dqkg_threads, dqkg_smem bytes; bf16, gated_key. Writes dk (and
//! ⟨k_j, dk̃_j⟩ into dotbuf slot 0) from warps 0–7, dq (⟨q_t, dq̂_t⟩, slot 1) from warps 8–15, and dg —
//! into the fp32 partials, or the bf16 gradients themselves where dq_out / dk_out / dg_out are set.
//! Sided: a call with a shared partition whose one-slot gradients are stored directly (dq_out … and
//! dq_out0 …, either side possibly not asked for): each block's stream picks its tensor. An instance of its own, because picking it costs the one-partition
//! path 16 bytes of spilled registers and 5 % of a GLA training step (2.466 → 2.589 ms at T = 32768,
//! session 16's device call 3); without it the kernel is the one-partition code unchanged.
template <class D, class Dev, int KP, bool Sided = false>
__global__ void __launch_bounds__(dqkg_threads, 2) chunk_bwd_dqkg_kernel(const chunk_bwd_params<Dev> p) {
  static_assert(decay_key<D> && std::is_same_v<Dev, __nv_bfloat16>, "chunk_bwd_dqkg_kernel: bf16 inputs, per-key decays");
  using Op = Dev;
  using L = dqkg_smem;
  constexpr int C = chunk_len, KT = L::KT, VP = L::VP, ldk = L::ldk, lda = L::lda, ldr = L::ldr, parts = L::parts;
  constexpr int role_threads = dqkg_threads / 2;
  static_assert(C == 64 && KT == 64 && VP == 128, "chunk_bwd_dqkg_kernel: the tile shapes its warp map assumes");
  static_assert((2 * C * ldr + L::dg_groups * KT) * sizeof(float) <= (2 * C + 2 * KT) * VP * sizeof(Op),
                "chunk_bwd_dqkg_kernel: R_k, R_q and step 4's group sums fit in the staged tiles");
  static_assert(dqkg_threads % KT == 0 && C % L::dg_groups == 0, "chunk_bwd_dqkg_kernel: step 4's thread map");
  const index_t c = blockIdx.x;
  if (c >= p.rt.seg_chunk[p.S * p.P]) return;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const L lay;
  auto* recs = reinterpret_cast<chunk_record*>(smem_raw + lay.recs);
  float* G = reinterpret_cast<float*>(smem_raw + lay.G);  // Γ of the tile's keys [C][KT]
  Op* Qs = reinterpret_cast<Op*>(smem_raw + lay.Qs);      // raw q of the tile's keys, reading rows
  Op* Ks = reinterpret_cast<Op*>(smem_raw + lay.Ks);      // raw k of the tile's keys, writing rows
  Op* dAs = reinterpret_cast<Op*>(smem_raw + lay.dA);     // dA [C][C], 0 above the diagonal
  Op* Vr = reinterpret_cast<Op*>(smem_raw + lay.Vr);      // v rows (writing), swizzled [C][VP]
  Op* Or = reinterpret_cast<Op*>(smem_raw + lay.Or);      // dO rows (reading), swizzled [C][VP]
  Op* Ds = reinterpret_cast<Op*>(smem_raw + lay.Ds);      // D_c rows of the tile's keys, swizzled [KT][VP]
  Op* Hs = reinterpret_cast<Op*>(smem_raw + lay.Hs);      // H_c rows of the tile's keys, swizzled [KT][VP]
  float* Rk = reinterpret_cast<float*>(smem_raw + lay.Rk);  // dk̃ [C][ldr] (over Vr/Or after step 2)
  float* Rq = reinterpret_cast<float*>(smem_raw + lay.Rq);  // dq̂ [C][ldr]
  float* cn = reinterpret_cast<float*>(smem_raw + lay.cn);
  float* cpart = reinterpret_cast<float*>(smem_raw + lay.cpart);
  __shared__ int slow[C / 16];
  __shared__ unsigned floor_bits[C][KT / 32];  // bit (t, a): g_t[k0 + a] is below the log-decay floor

  const int K = p.K, V = p.V, HV = p.HV;
  const index_t KV = static_cast<index_t>(K) * V;
  const int tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x), lane = tid & 31, warp = tid >> 5;
  const int role = warp >> 3, rt = tid & (role_threads - 1), rw = warp & 7;  // role 0: dk̃, 1: dq̂
  const int hv = static_cast<int>(blockIdx.y), h = hv / (HV / p.H);
  const int kt = static_cast<int>(blockIdx.z), k0 = kt * KT, kn = K - k0 < KT ? K - k0 : KT;
  const index_t ch = c * HV + hv;
  // where the chunk lies. The Sided instance keeps it in shared memory from here to the stores (at,
  // below), not in registers across the products: holding it, it spilled 20 bytes at 64 registers; the
  // one-partition instance spills when it does the same (ptxas -v, session 17)
  __shared__ chunk_where at_s;
  const chunk_where at0 = locate_chunk(p, c);
  if constexpr (Sided)
    if (tid == 0) at_s = at0;
  const device_source<Dev> src = at0.is_shared ? p.shr : p.main;

  // 1. the copies that need no records (Γ, the state slices), then those that do
  stage_rows_async<float>(G, KT, C, KT, p.gambuf + ch * static_cast<index_t>(C) * KP + k0, KT, true,
                          [](int t) { return static_cast<index_t>(t) * KP; }, [](int) { return true; });
  {
    const bool vs = V % vec16<Op> == 0 && aligned16(p.hsbuf) && aligned16(p.dsbuf);
    auto row = [&](int a) { return static_cast<index_t>(a) * V; };
    auto key = [&](int a) { return a < kn; };
    stage_rows_swz(Ds, KT, p.dsbuf + ch * KV + static_cast<index_t>(k0) * V, V, vs, row, key);
    stage_rows_swz(Hs, KT, p.hsbuf + ch * KV + static_cast<index_t>(k0) * V, V, vs, row, key);
  }
  asm volatile("cp.async.commit_group;\n" ::: "memory");
  load_records(p, c, at0, h, hv, recs);
  if (tid < C / 16) slow[tid] = 0;
  __syncthreads();  // records
  {
    const bool vq = K % vec16<Dev> == 0 && aligned16(src.q) && aligned16(src.k);
    stage_rows_async<Op>(Qs, ldk, C, KT, src.q + k0, K - k0, vq, [&](int i) { return recs[i].qk; }, [&](int i) { return recs[i].rd; });
    stage_rows_async<Op>(Ks, ldk, C, KT, src.k + k0, K - k0, vq, [&](int i) { return recs[i].qk; }, [&](int i) { return recs[i].wr; });
    const bool vv = V % vec16<Dev> == 0 && aligned16(p.v) && aligned16(p.dO);
    stage_rows_swz(Vr, C, p.v, V, vv, [&](int i) { return recs[i].hv * V; }, [&](int i) { return recs[i].wr; });
    stage_rows_swz(Or, C, p.dO, V, vv, [&](int i) { return recs[i].hv * V; }, [&](int i) { return recs[i].rd; });
  }
  asm volatile("cp.async.commit_group;\n" ::: "memory");
  const bool want_dg = p.dg || p.dg_out || (Sided && p.dg_out0);
  if (want_dg) {  // the floor bits of the writing rows (Γ summed the floored gates: dg is exactly 0 there)
    // every gate of the warp's share loaded before the first is tested: eight loads in flight, not one
    // latency each (a serial loop spent 12 % of the kernel's stall samples waiting here, session 19's ncu)
    constexpr int words = KT / 32, warps = dqkg_threads / 32, per = C * words / warps;
    static_assert(C * words % warps == 0, "chunk_bwd_dqkg_kernel: the floor bits' rounds");
    float gl[per];
#pragma unroll
    for (int u = 0; u < per; ++u) {
      const int e = warp + u * warps, t = e / words, a = (e % words) * 32 + lane;
      const chunk_record& r = recs[t];
      gl[u] = r.wr && a < kn ? to_f32(D::log_decay(src.g + r.hv * K, k0 + a)) : 0.f;
    }
#pragma unroll
    for (int u = 0; u < per; ++u) {
      const int e = warp + u * warps;
      const unsigned bits = __ballot_sync(0xffffffffu, detail::below_log_decay_floor(gl[u]));
      if (lane == 0) floor_bits[e / words][e % words] = bits;
    }
  }
  asm volatile("cp.async.wait_group 1;\n" ::: "memory");
  __syncthreads();  // Γ and the state slices
  // Σ_v H_c[a][v] D_c[a][v] in fp32 (as chunk_bwd_dqk_kernel; e^{γ} at the end), and the slow sub-chunks
  key_rowsums_swz<KT, VP>(cn, Hs, Ds, warp, nt >> 5);
  flag_slow_subchunks<C, KT>(G, slow, tid, nt);
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
  __syncthreads();  // every tile staged

  // 2. dA (a warp per 16 × 16 tile, rounded to bf16, 0 above the diagonal), then the inter products of the
  //    role's tiles (B = rw / 4 and rw / 4 + 2, keys 16 (rw mod 4) …: the tiles dqk_warp_tiles gives this warp)
  const int g8 = lane >> 2, t2 = (lane & 3) * 2;
  {
    const int ti = warp >> 2, tj = warp & 3;
    float da[1][2][4] = {};
    const int rbd[1] = {ti};
    if (tj <= ti) warp_abt_swz<1>(da, Or, rbd, Vr, 16 * tj);  // dO_t · v_j
#pragma unroll
    for (int hh = 0; hh < 2; ++hh)
#pragma unroll
      for (int q = 0; q < 4; q += 2) {
        const int t = 16 * ti + g8 + 8 * (q >> 1), j = 16 * tj + 8 * hh + t2;
        *reinterpret_cast<__nv_bfloat162*>(dAs + t * lda + j) =
            __floats2bfloat162_rn(j <= t ? da[0][hh][q] : 0.f, j + 1 <= t ? da[0][hh][q + 1] : 0.f);
      }
  }
  const int rb[2] = {rw >> 2, (rw >> 2) + 2}, a0 = 16 * (rw & 3);
  float acc[2][2][4];
  if (role == 0) warp_abt_swz<2>(acc, Vr, rb, Ds, a0);  // v D_cᵀ
  else warp_abt_swz<2>(acc, Or, rb, Hs, a0);            // dO H_cᵀ
  __syncthreads();  // dA written; v, dO, D_c and H_c read: R_k and R_q take their place
  const chunk_where at = Sided ? at_s : at0;
  // a direct store's tensor (Sided only): the shared partition's for its stream's chunks (slot 0), the
  // other for every other stream's (one routed slot per token, or the single other partition)
  auto direct_of = [&](Dev* out, Dev* out0) { return at.is_shared ? out0 : out; };
  {  // dk̃^inter = e^{γ−Γ_j} ⊙ (D_c v_j) on the writing rows; dq̂^inter = e^{Γ_t} ⊙ (H_c dO_t) on the reading rows
     // (one branch per role around the unrolled loops, γ of the lane's four keys read once)
    auto out = [&](float* R, auto&& row_ok, auto&& factor) {  // keys a, a + 1 of rows m: one 8-byte store
#pragma unroll
      for (int T = 0; T < 2; ++T)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh)
#pragma unroll
          for (int q = 0; q < 4; q += 2) {
            const int m = 16 * rb[T] + g8 + 8 * (q >> 1), a = a0 + 8 * hh + t2;
            const bool ok = row_ok(m);
            const float x0 = ok && a < kn ? acc[T][hh][q] * factor(m, a, hh * 2) : 0.f;
            const float x1 = ok && a + 1 < kn ? acc[T][hh][q + 1] * factor(m, a + 1, hh * 2 + 1) : 0.f;
            *reinterpret_cast<float2*>(R + m * ldr + a) = make_float2(x0, x1);
          }
    };
    if (role == 0) {
      float gl[4];  // γ = Γ_{C−1} of keys a0 + 8hh + t2 + u
#pragma unroll
      for (int i = 0; i < 4; ++i) gl[i] = G[(C - 1) * KT + a0 + 8 * (i >> 1) + t2 + (i & 1)];
      out(Rk, [&](int m) { return recs[m].wr; }, [&](int m, int a, int i) { return exp_nonpos(gl[i] - G[m * KT + a]); });
    } else {
      out(Rq, [&](int m) { return recs[m].rd; }, [&](int m, int a, int) { return exp_nonpos(G[m * KT + a]); });
    }
  }
  if (role == 0) named_barrier(1, role_threads);  // (constant ids: ptxas then reserves two barriers, not sixteen)
  else named_barrier(2, role_threads);

  // 3. each role as chunk_bwd_dqk_kernel's: R's rows out, s · R and ⟨x_i, R_i⟩ (16 threads per row)
  auto kf = [&](int j, int a) { return to_f32(Ks[j * ldk + a]); };
  auto write_rows = [&](const float* R, const Op* X, bool vec, int which, auto&& row_of) {
    float* dots = p.dotbuf ? p.dotbuf + (ch * (KP / KT) + kt) * C * 2 + which : nullptr;
    write_key_rows<C, KT>(R, ldr, X, ldk, kn, vec, dots, rt, role_threads, row_of);
  };
  if (role == 0) {
    {  // Σ_j k̃_j ⊙ dk̃_j^inter: `parts` partial sums of C / parts rows per key
      constexpr int rows = C / parts;
      const int a = rt % KT, part = rt / KT;
      float s = 0.f;
      for (int j = part * rows; j < part * rows + rows; ++j) s += kf(j, a) * recs[j].w * Rk[j * ldr + a];
      cpart[part * KT + a] = s;
    }
    named_barrier(1, role_threads);  // c_n's partial sums have read R_k
    dqk_warp_tiles<true>(Rk, ldr, dAs, lda, Qs, ldk, G, KT, recs, slow, kn, rw, 8);
    named_barrier(1, role_threads);
    if (rt < KT) {
      const int a = rt;
      float inter = 0.f;
#pragma unroll
      for (int q = 0; q < parts; ++q) inter += cpart[q * KT + a];
      cn[a] = a < kn ? cn[a] * __expf(G[(C - 1) * KT + a]) + inter : 0.f;
    }
    if (Sided ? (p.dk_out || p.dk_out0) : p.dk_out != nullptr) {  // dk = w dk̃ straight into the gradient tensor(s): row r.hv
      if constexpr (Sided)
        write_rows(Rk, Ks, rows_vec4(p.dk_out, K) && rows_vec4(p.dk_out0, K), 0, [&, out = direct_of(p.dk_out, p.dk_out0)](int j) {
          const chunk_record& r = recs[j];
          return row_out_t<Dev>{r.wr && out ? out + r.hv * K + k0 : nullptr, r.w};
        });
      else
        write_rows(Rk, Ks, rows_vec4(p.dk_out, K), 0, [&](int j) {
          const chunk_record& r = recs[j];
          return row_out_t<Dev>{r.wr ? p.dk_out + r.hv * K + k0 : nullptr, r.w};
        });
    }
    else if (p.dk || p.dotbuf)  // dk = w dk̃ and ⟨k_j, dk̃_j⟩ over the tile
      write_rows(Rk, Ks, K % 4 == 0 && aligned16(p.dk), 0, [&](int j) {
        const chunk_record& r = recs[j];
        return row_out{r.wr && p.dk ? p.dk + (r.hv * p.Rw + write_slot(p, r, at)) * K + k0 : nullptr, r.w};
      });
  } else {
    dqk_warp_tiles<false>(Rq, ldr, dAs, lda, Ks, ldk, G, KT, recs, slow, kn, rw, 8);
    named_barrier(2, role_threads);
    if (Sided ? (p.dq_out || p.dq_out0) : p.dq_out != nullptr) {  // dq = r dq̂ straight into the gradient tensor(s): row r.hv
      if constexpr (Sided)
        write_rows(Rq, Qs, rows_vec4(p.dq_out, K) && rows_vec4(p.dq_out0, K), 1, [&, out = direct_of(p.dq_out, p.dq_out0)](int t) {
          const chunk_record& r = recs[t];
          return row_out_t<Dev>{r.rd && out ? out + r.hv * K + k0 : nullptr, r.r};
        });
      else
        write_rows(Rq, Qs, rows_vec4(p.dq_out, K), 1, [&](int t) {
          const chunk_record& r = recs[t];
          return row_out_t<Dev>{r.rd ? p.dq_out + r.hv * K + k0 : nullptr, r.r};
        });
    }
    else if (p.dq || p.dotbuf)  // dq = r dq̂ and ⟨q_t, dq̂_t⟩ over the tile
      write_rows(Rq, Qs, K % 4 == 0 && aligned16(p.dq), 1, [&](int t) {
        const chunk_record& r = recs[t];
        return row_out{r.rd && p.dq ? p.dq + (r.hv * p.Rr + r.slot) * K + k0 : nullptr, r.r};
      });
  }
  if (!want_dg) return;  // uniform over the block
  __syncthreads();  // R_k, R_q and c_n final

  // 4. dg_u = Σ_{t ≥ u in chunk} (q_t ⊙ dq_t − k_t ⊙ dk_t) + c_n on the writing rows, with dq_t = r_t dq̂_t and
  //    dk_t = w_t dk̃_t as written above: a thread per key and group of C / L::dg_groups rows (every thread of the
  //    block), each group's sum into gsum, then each thread walks its rows backwards from the sum of the
  //    later groups (one thread walking all C rows left the other 14 warps idle: 8 % of the kernel's
  //    instructions and its longest tail, session 19's ncu)
  {
    constexpr int groups = L::dg_groups, rows = C / groups;
    float* gsum = reinterpret_cast<float*>(smem_raw + lay.gsum);  // [groups][KT] (over the staged tiles)
    // the rows' dg: the fp32 partials, or the bf16 gradient itself (direct; Sided: the block's side's tensor,
    // null where that side's dg is not asked for)
    const bool direct = Sided ? (p.dg_out || p.dg_out0) : p.dg_out != nullptr;
    Dev* const out = Sided ? direct_of(p.dg_out, p.dg_out0) : p.dg_out;
    const int a = tid % KT, grp = tid / KT, t0 = grp * rows;
    float x[rows];  // q_t ⊙ dq_t − k_t ⊙ dk_t of the group's rows, key a (0 past kn)
    float s = 0.f;
#pragma unroll
    for (int i = rows - 1; i >= 0; --i) {
      const chunk_record& r = recs[t0 + i];
      float v = 0.f;
      if (a < kn) {
        if (r.rd) v += to_f32(Qs[(t0 + i) * ldk + a]) * (r.r * Rq[(t0 + i) * ldr + a]);
        if (r.wr) v -= kf(t0 + i, a) * (r.w * Rk[(t0 + i) * ldr + a]);
      }
      x[i] = v;
      s += v;
    }
    gsum[grp * KT + a] = s;
    __syncthreads();
    if (a < kn && (!direct || out)) {
      const float cna = cn[a];
      float acc = 0.f;
      for (int q = groups - 1; q > grp; --q) acc += gsum[q * KT + a];
#pragma unroll
      for (int i = rows - 1; i >= 0; --i) {
        const int t = t0 + i;
        acc += x[i];
        if (recs[t].wr) {
          const float dg = (floor_bits[t][a >> 5] >> (a & 31) & 1u) ? 0.f : acc + cna;
          const chunk_record& r = recs[t];
          const index_t o = (Sided && direct ? r.hv * K : (r.hv * p.Rw + write_slot(p, r, at)) * K) + k0 + a;
          if (direct) out[o] = from_f32<Dev>(dg);  // (one slot per side: row r.hv)
          else p.dg[o] = dg;
        }
      }
    }
  }
}

// --- 4'. chunk_grad_exact_kernel (fp32 and fp16 inputs) -------------------------------------------
//
// The same per-chunk gradients as the bf16 kernels 4a–4c, in exact fp32 on the CUDA cores, for fp32 inputs
// (issue 4: no TF32) and fp16 inputs (whose products would need fp16 operands for the inputs and bf16
// for the states; fp32 is exact for both). No sub-chunking is needed: every exponential is formed
// per pair, e^{Γ_t[a] − Γ_j[a]} with j ≤ t, e^{γ[a] − Γ_j[a]} and e^{Γ_t[a]}, all ≤ 1 (SPEC §8).
// Shared memory holds the chunk's rows in fp32 (q, k, v, dO), Γ and the intra-chunk A and dA; the
// states H_c and D_c are read from the global buffers, always as a value broadcast to the whole warp.
// Thread maps put consecutive rows of the chunk on consecutive lanes (row pitches K + 1, V + 1,
// C + 1: no bank conflicts), and every sum is taken in a fixed order (deterministic).

template <class D>
struct grad_exact_smem {
  int ldq, ldv, lda, ldg;
  std::size_t recs, G, Q, Kk, Vv, O, A, dA, cn, cpart, wpart, rpart, bytes;
  __host__ __device__ grad_exact_smem(int K, int V, int KP) {
    ldq = K + 1, ldv = V + 1, lda = chunk_len + 1, ldg = KP + 1;
    const std::size_t c = chunk_len;
    recs = 0;
    G = align128(c * sizeof(chunk_record));
    const std::size_t g = decay_key<D> ? c * ldg : c;
    Q = align128(G + g * sizeof(float));
    Kk = align128(Q + c * ldq * sizeof(float));
    Vv = align128(Kk + c * ldq * sizeof(float));
    O = align128(Vv + c * ldv * sizeof(float));
    A = align128(O + c * ldv * sizeof(float));
    dA = align128(A + c * lda * sizeof(float));
    cn = align128(dA + c * lda * sizeof(float));
    cpart = align128(cn + static_cast<std::size_t>(KP) * sizeof(float));
    wpart = align128(cpart + static_cast<std::size_t>(KP) * 2 * sizeof(float));
    rpart = align128(wpart + c * 4 * sizeof(float));
    bytes = rpart + c * 4 * sizeof(float);
  }
};

//! grid (max_chunks, HV), 256 threads (the maps below assume it).
template <class D, class Dev, int KP>
__global__ void __launch_bounds__(256) chunk_grad_exact_kernel(const chunk_bwd_params<Dev> p) {
  constexpr int C = chunk_len;
  const index_t c = blockIdx.x;
  if (c >= p.rt.seg_chunk[p.S * p.P]) return;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const int K = p.K, V = p.V, HV = p.HV;
  const grad_exact_smem<D> L(K, V, KP);
  const int ldq = L.ldq, ldv = L.ldv, lda = L.lda, ldg = L.ldg;
  auto* recs = reinterpret_cast<chunk_record*>(smem_raw + L.recs);
  float* G = reinterpret_cast<float*>(smem_raw + L.G);
  float* Qs = reinterpret_cast<float*>(smem_raw + L.Q);    // [C][ldq] q of reading rows
  float* Ks = reinterpret_cast<float*>(smem_raw + L.Kk);   // [C][ldq] k of writing rows
  float* Vs = reinterpret_cast<float*>(smem_raw + L.Vv);   // [C][ldv] v of writing rows
  float* Os = reinterpret_cast<float*>(smem_raw + L.O);    // [C][ldv] dO of reading rows
  float* As = reinterpret_cast<float*>(smem_raw + L.A);    // [C][lda] A_tj (j ≤ t, with w_j)
  float* dAs = reinterpret_cast<float*>(smem_raw + L.dA);  // [C][lda] dA_tj = dO_t·v_j (j ≤ t)
  float* cn = reinterpret_cast<float*>(smem_raw + L.cn);
  float* cpart = reinterpret_cast<float*>(smem_raw + L.cpart);  // [KP][2]
  float* wpart = reinterpret_cast<float*>(smem_raw + L.wpart);  // [C][4] ⟨k_j, dk̃_j⟩ partials
  float* rpart = reinterpret_cast<float*>(smem_raw + L.rpart);  // [C][4] ⟨q_t, dq̂_t⟩ partials
  const int tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
  const int warp = tid >> 5, lane = tid & 31, nwarps = nt >> 5;
  const int hv = static_cast<int>(blockIdx.y), h = hv / (HV / p.H);
  const index_t KV = static_cast<index_t>(K) * V;
  const chunk_where at = locate_chunk(p, c);
  const device_source<Dev> src = at.is_shared ? p.shr : p.main;
  const float* Hg = p.hbuf + (c * HV + hv) * KV;  // H_c [K,V]
  const float* Dg = p.dbuf + (c * HV + hv) * KV;  // D_c [K,V]
  load_records(p, c, at, h, hv, recs);
  __syncthreads();
  staged_for(
      C * K, [&](int e) { const chunk_record& r = recs[e / K]; return r.rd ? to_f32(src.q[r.qk + e % K]) : 0.f; },
      [&](int e, float x) { Qs[(e / K) * ldq + e % K] = x; });
  staged_for(
      C * K, [&](int e) { const chunk_record& r = recs[e / K]; return r.wr ? to_f32(src.k[r.qk + e % K]) : 0.f; },
      [&](int e, float x) { Ks[(e / K) * ldq + e % K] = x; });
  staged_for(
      C * V, [&](int e) { const chunk_record& r = recs[e / V]; return r.wr ? to_f32(p.v[r.hv * V + e % V]) : 0.f; },
      [&](int e, float x) { Vs[(e / V) * ldv + e % V] = x; });
  staged_for(
      C * V, [&](int e) { const chunk_record& r = recs[e / V]; return r.rd ? to_f32(p.dO[r.hv * V + e % V]) : 0.f; },
      [&](int e, float x) { Os[(e / V) * ldv + e % V] = x; });
  chunk_cumulative_decay<D, KP>(src.g, HV, hv, K, recs, G, ldg);  // Γ (the forward's), then a barrier
  auto gm = [&](int t, int a) -> float {
    if constexpr (decay_key<D>) return G[t * ldg + a];
    else if constexpr (decay_head<D>) return G[t];
    else return 0.f;
  };
  auto ex = [&](float x) -> float {
    if constexpr (decay_none<D>) return 1.f;
    else return __expf(x);
  };

  // --- A_tj = w_j Σ_a q_t[a] k_j[a] e^{Γ_t[a]−Γ_j[a]},  dA_tj = dO_t·v_j   (j ≤ t; lanes = j) -------
  for (int e = tid; e < C * C; e += nt) {
    const int t = e / C, j = e % C;
    float a_tj = 0.f, da = 0.f;
    if (j <= t && recs[t].rd && recs[j].wr) {
      float s = 0.f;
      for (int a = 0; a < K; ++a) {
        const float x = Qs[t * ldq + a] * Ks[j * ldq + a];
        if constexpr (decay_key<D>) s = fmaf(x, __expf(gm(t, a) - gm(j, a)), s);
        else s += x;
      }
      if constexpr (decay_head<D>) s *= __expf(gm(t, 0) - gm(j, 0));
      a_tj = s * recs[j].w;
      for (int v = 0; v < V; ++v) da = fmaf(Os[t * ldv + v], Vs[j * ldv + v], da);
    }
    As[t * lda + j] = a_tj, dAs[t * lda + j] = da;
  }
  // c_n[a] = e^{γ[a]} Σ_v H_c[a][v] D_c[a][v] (one warp per key; completed in the dk̃ pass)
  for (int a = warp; a < K; a += nwarps) {
    float s = 0.f;
    for (int v = lane; v < V; v += 32) s = fmaf(Hg[static_cast<index_t>(a) * V + v], Dg[static_cast<index_t>(a) * V + v], s);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) cn[a] = s * ex(gm(C - 1, a));
  }
  __syncthreads();

  // --- dv_j = Σ_{t≥j} A_tj r_t dO_t + Σ_a D_c[a] w_j k_j[a] e^{γ[a]−Γ_j[a]}   (lanes = j, 4 columns) ---
  if (p.dv)
    for (int e = tid; e < C * ((V + 3) / 4); e += nt) {
      const int j = e % C, v0 = (e / C) * 4;
      const chunk_record& r = recs[j];
      if (!r.wr) continue;
      float acc[4] = {0.f, 0.f, 0.f, 0.f};
      for (int t = j; t < C; ++t) {
        const float x = As[t * lda + j] * recs[t].r;
#pragma unroll
        for (int u = 0; u < 4; ++u)
          if (v0 + u < V) acc[u] = fmaf(x, Os[t * ldv + v0 + u], acc[u]);
      }
      const float wj = decay_head<D> ? r.w * __expf(gm(C - 1, 0) - gm(j, 0)) : r.w;
      for (int a = 0; a < K; ++a) {
        float x = Ks[j * ldq + a] * wj;
        if constexpr (decay_key<D>) x *= __expf(gm(C - 1, a) - gm(j, a));
        const float* drow = Dg + static_cast<index_t>(a) * V + v0;
#pragma unroll
        for (int u = 0; u < 4; ++u)
          if (v0 + u < V) acc[u] = fmaf(x, drow[u], acc[u]);
      }
      const int ws = write_slot(p, r, at);
#pragma unroll
      for (int u = 0; u < 4; ++u)
        if (v0 + u < V) p.dv[(r.hv * p.Rw + ws) * V + v0 + u] = acc[u];
    }

  // --- dk̃_j[a] = e^{γ[a]−Γ_j[a]} (D_c v_j)[a] + Σ_{t≥j} r_t dA_tj q_t[a] e^{Γ_t[a]−Γ_j[a]}   (lanes = j) ---
  {
    const int j = tid % C, a0 = tid / C;  // this thread's row, and its keys a0, a0 + 4, …
    const chunk_record& r = recs[j];
    const int ws = r.wr ? write_slot(p, r, at) : 0;
    float wdot = 0.f;
    for (int a = a0; a < KP; a += nt / C) {
      float inter = 0.f, dkt = 0.f;
      if (a < K && r.wr) {
        const float* drow = Dg + static_cast<index_t>(a) * V;
        for (int v = 0; v < V; ++v) inter = fmaf(drow[v], Vs[j * ldv + v], inter);
        const float gja = gm(j, a);
        inter *= ex(gm(C - 1, a) - gja);
        float intra = 0.f;
        for (int t = j; t < C; ++t) intra = fmaf(recs[t].r * dAs[t * lda + j], Qs[t * ldq + a] * ex(gm(t, a) - gja), intra);
        dkt = inter + intra;
        if (p.dk) p.dk[(r.hv * p.Rw + ws) * K + a] = r.w * dkt;
        wdot = fmaf(Ks[j * ldq + a], dkt, wdot);
      }
      // c_n[a] += Σ_j k_j[a] w_j dk̃_j^inter[a]: the 32 lanes of this warp, then the two warps of a
      float cj = (a < K) ? Ks[j * ldq + a] * r.w * inter : 0.f;
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) cj += __shfl_xor_sync(0xffffffffu, cj, o);
      if (lane == 0 && a < KP) cpart[a * 2 + j / 32] = cj;
    }
    wpart[j * 4 + a0] = wdot;
  }

  // --- dq̂_t[a] = e^{Γ_t[a]} (H_c dO_t)[a] + Σ_{j≤t} dA_tj w_j k_j[a] e^{Γ_t[a]−Γ_j[a]}   (lanes = t) ---
  {
    const int t = tid % C, a0 = tid / C;
    const chunk_record& r = recs[t];
    float rdot = 0.f;
    for (int a = a0; a < K; a += nt / C) {
      if (!r.rd) break;
      const float* hrow = Hg + static_cast<index_t>(a) * V;
      float inter = 0.f;
      for (int v = 0; v < V; ++v) inter = fmaf(hrow[v], Os[t * ldv + v], inter);
      const float gta = gm(t, a);
      float dq = inter * ex(gta);
      for (int j = 0; j <= t; ++j) dq = fmaf(dAs[t * lda + j] * recs[j].w, Ks[j * ldq + a] * ex(gta - gm(j, a)), dq);
      if (p.dq) p.dq[(r.hv * p.Rr + r.slot) * K + a] = r.r * dq;
      rdot = fmaf(Qs[t * ldq + a], dq, rdot);
    }
    rpart[t * 4 + a0] = rdot;
  }
  __syncthreads();
  if (tid < C) {
    const chunk_record& r = recs[tid];
    const float wd = ((wpart[tid * 4] + wpart[tid * 4 + 1]) + wpart[tid * 4 + 2]) + wpart[tid * 4 + 3];
    const float rd = ((rpart[tid * 4] + rpart[tid * 4 + 1]) + rpart[tid * 4 + 2]) + rpart[tid * 4 + 3];
    if (at.routed && r.wr && p.dcw) p.dcw[r.hv * p.N + at.n] = wd;
    if (at.routed && r.rd && p.dcr) p.dcr[r.hv * p.N + at.n] = p.scale * rd;
  }
  if (p.cbuf)
    for (int a = tid; a < KP; a += nt) p.cbuf[(c * HV + hv) * KP + a] = a < K ? cn[a] + (cpart[2 * a] + cpart[2 * a + 1]) : 0.f;
}

// --- 5. chunk_dg_kernel --------------------------------------------------------------------------

//! One block of KP threads per (chunk, value head): thread a walks the chunk backwards (dg, when
//! p.dg); the bf16 path's router-weight gradients are summed here from the key tiles' dots (p.dotbuf).
template <class D, class Dev, int KP>
__global__ void __launch_bounds__(KP) chunk_dg_kernel(const chunk_bwd_params<Dev> p) {
  const index_t c = blockIdx.x;
  if (c >= p.rt.seg_chunk[p.S * p.P]) return;
  __shared__ chunk_record recs[chunk_len];
  __shared__ float rows[decay_head<D> ? chunk_len * KP : 1];
  const int HV = p.HV, a = static_cast<int>(threadIdx.x);
  const int hv = static_cast<int>(blockIdx.y), h = hv / (HV / p.H);
  const chunk_where at = locate_chunk(p, c);
  load_records(p, c, at, h, hv, recs);
  __syncthreads();
  if (p.dotbuf && at.routed && a < chunk_len) {  // ⟨k_j, dk̃_j⟩ and ⟨q_t, dq̂_t⟩: the key tiles' dots, in tile order
    constexpr int kts = KP / bwd_kt;
    const chunk_record& r = recs[a];
    const float* d = p.dotbuf + ((c * HV + hv) * kts * chunk_len + a) * 2;
    float wd = 0.f, rd = 0.f;
#pragma unroll
    for (int kt = 0; kt < kts; ++kt) wd += d[kt * chunk_len * 2], rd += d[kt * chunk_len * 2 + 1];
    if (r.wr && p.dcw) p.dcw[r.hv * p.N + at.n] = wd;
    if (r.rd && p.dcr) p.dcr[r.hv * p.N + at.n] = p.scale * rd;
  }
  if constexpr (!decay_none<D>) {
    if (!p.dg) return;  // uniform over the block
    const int K = p.K;
    const device_source<Dev> src = at.is_shared ? p.shr : p.main;
    const float cna = p.cbuf[(c * HV + hv) * KP + a];
    float acc = 0.f;
    for (int t = chunk_len - 1; t >= 0; --t) {
      const chunk_record& r = recs[t];
      float val = 0.f;
      if (a < K) {
        if (r.rd) acc += to_f32(src.q[r.qk + a]) * p.dq[(r.hv * p.Rr + r.slot) * K + a];
        if (r.wr) acc -= to_f32(src.k[r.qk + a]) * p.dk[(r.hv * p.Rw + write_slot(p, r, at)) * K + a];
        val = acc + cna;
      }
      // Γ summed the floored gates (detail::chunked_log_decay): ∂L/∂g is exactly 0 below the floor
      if constexpr (decay_key<D>) {
        if (r.wr && a < K)
          p.dg[(r.hv * p.Rw + write_slot(p, r, at)) * K + a] =
              detail::below_log_decay_floor(to_f32(D::log_decay(src.g + r.hv * K, a))) ? 0.f : val;
      } else {
        rows[t * KP + a] = val;
      }
    }
    if constexpr (decay_head<D>) {
      __syncthreads();
      for (int t = a; t < chunk_len; t += KP) {
        const chunk_record& r = recs[t];
        if (!r.wr) continue;
        float s = 0.f;
        for (int b = 0; b < K; ++b) s += rows[t * KP + b];
        p.dg[r.hv * p.Rw + write_slot(p, r, at)] = detail::below_log_decay_floor(to_f32(D::log_decay(src.g + r.hv, 0))) ? 0.f : s;
      }
    }
  }
}

//! Whether the chunked backward takes this problem (else the recurrent backward runs).
template <class Dev>
bool chunked_backward_supported(const detail::problem& pb) {
  // bf16: kernels 4a–4c (tensor cores). fp32 and fp16: chunk_grad_exact_kernel (fp32 FMA). (With the
  // bf16 gradient kernel's bf16 operands, fp16 inputs measured gradient ratios 0.0055–0.0059 against the
  // CPU's on the same fp16 inputs — gla, sse_n4k1s, sse_w2r1s at T = 200–260 — over SPEC §9.3's 0.005.)
  (void)sizeof(Dev);
  return chunked_supported(pb) && pb.V <= bwd_chunk_max_v;
}

//! The bf16 path's own scratch per chunk and value head, in bytes (dabuf; dotbuf when routed; dsbuf), in the
//! order bind_bwd_tc_buffers lays them out (every part before dsbuf a multiple of 16 bytes, so D_c's rows
//! are 16-byte aligned where V % 8 == 0). What the forward's kernels form (Q̃, K̃, A, Γ, e^{γ}, H_c) is
//! kept_bytes (detail/saved.cuh): a saved_states' storage or the recomputation's scratch.
inline std::size_t bwd_tc_bytes(int KP, int K, int V, bool routed) {
  const std::size_t C = chunk_len;
  return C * C * sizeof(__nv_bfloat16) + (routed ? static_cast<std::size_t>(KP / bwd_kt) * C * 2 * sizeof(float) : 0) +
         static_cast<std::size_t>(K) * V * sizeof(__nv_bfloat16);
}

//! Points p's dabuf (and dotbuf when routed) and dsbuf into base (bwd_tc_bytes per chunk and value head,
//! 256-byte aligned base).
inline void bind_bwd_tc_buffers(chunk_bwd_params<__nv_bfloat16>& p, unsigned char* base, std::size_t chunk_heads, int KP,
                                bool routed) {
  using Op = __nv_bfloat16;
  const std::size_t C = chunk_len;
  p.dabuf = reinterpret_cast<Op*>(base), base += chunk_heads * C * C * sizeof(Op);
  p.dotbuf = routed ? reinterpret_cast<float*>(base) : nullptr;
  base += routed ? chunk_heads * static_cast<std::size_t>(KP / bwd_kt) * C * 2 * sizeof(float) : 0;
  p.dsbuf = reinterpret_cast<Op*>(base);
}

template <class D, class Dev, int KP>
void enqueue_chunked_backward_kp(const chunk_bwd_params<Dev>& p, bool want_dg, bool recompute, cudaStream_t stream, const char* api) {
  constexpr bool tc = std::is_same_v<Dev, __nv_bfloat16>;
  set_chunk_smem<D, Dev, KP>(api);
  static const bool once = [api] {
    if constexpr (tc) {
      check(cudaFuncSetAttribute(chunk_kstate_kernel<D, Dev, KP, true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(kstate_smem<D, Dev>(KP).bytes)),
            "cudaFuncSetAttribute(chunk_kstate_kernel)", api);
      check(cudaFuncSetAttribute(chunk_bwd_dv_kernel<D, Dev, KP>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(dv_smem<KP>().bytes)),
            "cudaFuncSetAttribute(chunk_bwd_dv_kernel)", api);
      if constexpr (dqkg_fused<D>) {
        check(cudaFuncSetAttribute(chunk_bwd_dqkg_kernel<D, Dev, KP>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(dqkg_smem().bytes)),
              "cudaFuncSetAttribute(chunk_bwd_dqkg_kernel)", api);
        check(cudaFuncSetAttribute(chunk_bwd_dqkg_kernel<D, Dev, KP, true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(dqkg_smem().bytes)),
              "cudaFuncSetAttribute(chunk_bwd_dqkg_kernel, sided)", api);
      } else {
        check(cudaFuncSetAttribute(chunk_bwd_da_kernel<D, Dev>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(da_smem().bytes)),
              "cudaFuncSetAttribute(chunk_bwd_da_kernel)", api);
        check(cudaFuncSetAttribute(chunk_bwd_dqk_kernel<D, Dev, KP>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(dqk_smem<D>().bytes)),
              "cudaFuncSetAttribute(chunk_bwd_dqk_kernel)", api);
      }
    } else {
      check(cudaFuncSetAttribute(chunk_state_kernel<D, Dev, KP, true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(state_smem<D, Dev>(KP).bytes)),
            "cudaFuncSetAttribute(chunk_state_kernel)", api);
      check(cudaFuncSetAttribute(chunk_grad_exact_kernel<D, Dev, KP>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(grad_exact_smem<D>(KP, bwd_chunk_max_v, KP).bytes)),
            "cudaFuncSetAttribute(chunk_grad_exact_kernel)", api);
    }
    return true;
  }();
  (void)once;
  const index_t chunks = p.rt.max_chunks;
  const unsigned ch = static_cast<unsigned>(chunks), hv = static_cast<unsigned>(p.HV);
  const unsigned vt = static_cast<unsigned>((p.V + state_tile_v<Dev> - 1) / state_tile_v<Dev>);
  const index_t KV = static_cast<index_t>(p.K) * p.V;
  const dim3 scan_grid(static_cast<unsigned>((KV + scan_threads * scan_per_thread - 1) / (scan_threads * scan_per_thread)),
                       hv, static_cast<unsigned>(p.S * p.P));
  // 1. H_c (the forward's kernels, without a final state); bf16: the forward's own split, whose intra
  //    kernel also leaves A, K̃, Q̃ and Γ for the gradient kernels — or nothing, where a forward call kept
  //    them (saved_states: bf16 only, !recompute)
  chunk_params<Dev> fwd = p;
  fwd.state_out = nullptr, fwd.in_place = false;
  if (!tc) recompute = true;
  bool chain = false;  // U_c and the hand-off by chunk_chain_kernel (chunked.cuh)
  if constexpr (intra_warp_tiles<D, Dev>) chain = recompute && chain_applies<D>(fwd);
  if (recompute && chunks > 0) {
    if constexpr (tc) {
      // U_c by the intra kernel (which still leaves K̃ in kbuf), unless the chain forms it
      fwd.intra_u = intra_fuses_u<D, Dev>(p.K, p.V) && !chain;
      chunk_intra_kernel<D, Dev, KP><<<dim3(ch, hv), intra_threads, intra_smem<D, Dev>(KP).bytes, stream>>>(fwd);
      check_launch("chunk_intra_kernel", api);
      if (!fwd.intra_u && !chain) {
        const unsigned kv = static_cast<unsigned>((p.V + kstate_smem<D, Dev>::TV - 1) / kstate_smem<D, Dev>::TV);
        chunk_kstate_kernel<D, Dev, KP><<<dim3(ch, hv, kv), kstate_threads, kstate_smem<D, Dev>(KP).bytes, stream>>>(fwd);
        check_launch("chunk_kstate_kernel", api);
      }
    } else {
      chunk_state_kernel<D, Dev, KP><<<dim3(ch, hv, vt), chunk_threads, state_smem<D, Dev>(KP).bytes, stream>>>(fwd);
      check_launch("chunk_state_kernel", api);
    }
  }
  if (recompute) enqueue_state_pass<D, Dev>(fwd, chain, stream, api);
  // 2.–3. by chunk_chain_kernel<Adj> (chunked.cuh) where it applies: W_c formed there from Q̃ and r dO (a
  // routed chunk's rows gathered first by chunk_read_rows_kernel into vbuf), D_c into dsbuf, dh0
  bool adj_chain = false;
  if constexpr (intra_warp_tiles<D, Dev>) {
    chunk_params<Dev> ac = p;
    ac.kbuf = p.qbuf, ac.v = p.dO, ac.hsbuf = p.dsbuf, ac.state_in = p.dht, ac.state_out = p.dh0, ac.in_place = false;
    adj_chain = chain_applies<D>(ac);
    if (adj_chain) {
      if (chunks > 0 && p.first_routed < p.P) {
        chunk_read_rows_kernel<Dev><<<dim3(ch, hv), 256, 0, stream>>>(ac);
        check_launch("chunk_read_rows_kernel", api);
      }
      launch_chain<D, Dev, true>(ac, stream, api);
    }
  }
  if (!adj_chain) {
    if (p.dbuf == nullptr) throw std::logic_error(std::string(api) + ": chunked backward without chunk_chain_kernel has no W_c buffer");
    // 2. W_c
    chunk_params<Dev> adj = p;
    adj.v = p.dO, adj.hbuf = p.dbuf;
    if (chunks > 0) {
      if constexpr (tc) {
        adj.kbuf = p.qbuf;  // W_c = Σ_t Q̃_t (r_t dO_t)ᵀ
        const unsigned kv = static_cast<unsigned>((p.V + kstate_smem<D, Dev>::TV - 1) / kstate_smem<D, Dev>::TV);
        chunk_kstate_kernel<D, Dev, KP, true><<<dim3(ch, hv, kv), kstate_threads, kstate_smem<D, Dev>(KP).bytes, stream>>>(adj);
        check_launch("chunk_kstate_kernel (adjoint)", api);
      } else {
        chunk_state_kernel<D, Dev, KP, true><<<dim3(ch, hv, vt), chunk_threads, state_smem<D, Dev>(KP).bytes, stream>>>(adj);
        check_launch("chunk_state_kernel (adjoint)", api);
      }
    }
    // 3. D_c, dh0
    chunk_rscan_kernel<D, Dev><<<scan_grid, scan_threads, 0, stream>>>(p);
    check_launch("chunk_rscan_kernel", api);
  }
  if (chunks > 0) {
    // 4. per-chunk gradients
    if constexpr (tc) {
      if constexpr (!dqkg_fused<D>) {
        chunk_bwd_da_kernel<D, Dev><<<dim3(ch, hv), bwd_threads, da_smem().bytes, stream>>>(p);
        check_launch("chunk_bwd_da_kernel", api);
      }
      if (p.dv || p.dv_out) {
        const unsigned tv = static_cast<unsigned>((p.V + bwd_tv - 1) / bwd_tv);
        chunk_bwd_dv_kernel<D, Dev, KP><<<dim3(ch, hv, tv), bwd_threads, dv_smem<KP>().bytes, stream>>>(p);
        check_launch("chunk_bwd_dv_kernel", api);
      }
      if constexpr (dqkg_fused<D>) {  // dA, dq, dk and dg in one kernel (4d)
        // Sided for every direct store of a call with a shared partition (its rows must not reach the other
        // partitions' tensors even where only those were asked for: grads.q without grads.shared.q)
        if (p.shared && (p.dq_out || p.dk_out || p.dg_out || p.dq_out0 || p.dk_out0 || p.dg_out0))
          chunk_bwd_dqkg_kernel<D, Dev, KP, true><<<dim3(ch, hv, KP / bwd_kt), dqkg_threads, dqkg_smem().bytes, stream>>>(p);
        else
          chunk_bwd_dqkg_kernel<D, Dev, KP><<<dim3(ch, hv, KP / bwd_kt), dqkg_threads, dqkg_smem().bytes, stream>>>(p);
        check_launch("chunk_bwd_dqkg_kernel", api);
      } else {
        chunk_bwd_dqk_kernel<D, Dev, KP><<<dim3(ch, hv, 2 * (KP / bwd_kt)), dqk_threads, dqk_smem<D>().bytes, stream>>>(p);
        check_launch("chunk_bwd_dqk_kernel", api);
      }
    } else {
      chunk_grad_exact_kernel<D, Dev, KP><<<dim3(ch, hv), 256, grad_exact_smem<D>(p.K, p.V, KP).bytes, stream>>>(p);
      check_launch("chunk_grad_exact_kernel", api);
    }
    // 5. dg (and, bf16, the router weights' gradients; where 4d formed dg, only those)
    if constexpr (tc && dqkg_fused<D>) {
      if (p.dotbuf) {
        chunk_bwd_params<Dev> w = p;
        w.dg = nullptr;
        chunk_dg_kernel<D, Dev, KP><<<dim3(ch, hv), KP, 0, stream>>>(w);
        check_launch("chunk_dg_kernel", api);
      }
    } else if ((want_dg && !decay_none<D>) || p.dotbuf) {
      chunk_dg_kernel<D, Dev, KP><<<dim3(ch, hv), KP, 0, stream>>>(p);
      check_launch("chunk_dg_kernel", api);
    }
  }
}

template <class D, class Dev>
void enqueue_chunked_backward(const chunk_bwd_params<Dev>& p, bool want_dg, bool recompute, cudaStream_t stream, const char* api) {
  if (p.kp == 64) enqueue_chunked_backward_kp<D, Dev, 64>(p, want_dg, recompute, stream, api);
  else enqueue_chunked_backward_kp<D, Dev, 128>(p, want_dg, recompute, stream, api);
}

}  // namespace linstate::cuda_detail
