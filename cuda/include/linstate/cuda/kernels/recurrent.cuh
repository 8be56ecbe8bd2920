// linstate/cuda/kernels/recurrent.cuh — the token-by-token recurrence on the device (SPEC §2.1,
// §3.1, §4.5), the CUDA twin of cpu_detail::run_recurrent.
//
// Templated on the decay policy D (family::diagonal or family::delta; traits in detail/traits.cuh):
// the gates come from D::log_decay, the delta rule's write strength from D::write_strength. A
// family::recurrent_only policy runs kernels/generic.cuh instead.
//
// One thread block per (sequence s, value head hv, partition p, V-tile of 32 columns). The block
// holds the K×32 fp32 state tile in registers for the whole stream: lane j owns column v0 + j and
// warp w owns rows 32w … 32w+31 (one register per row), so a block has ceil(K/32) warps and K ≤ 512.
// A partition sees the tokens of its sequence in time order with per-token write/read flags and
// weights (router::top_k: from router_kernel; the shared partition, partition::single and
// router::dense: every token, weight 1). Per token:
//   stage q, k (and e^{λ} for a per-key gate) in shared memory, zero-padded to the warp rows;
//   family::diagonal (gate key / head / none, λ = D::log_decay):  h[a,j] = e^{λ_a} h[a,j] + (cw k_a) v_j
//   family::delta (b = D::write_strength(β, cw)):   u_j = b (v_j − e^{λ} Σ_a k̂_a h[a,j]),  h[a,j] = e^{λ} h[a,j] + k̂_a u_j
//   read:                       o_j = s · cr · Σ_a q̂_a h[a,j]     (reduced across warps in a fixed order)
// A token that neither writes nor reads the partition is skipped: the state is not touched (bit-
// identical freeze, SPEC §8.5). The state is loaded at the partition's first selected token and, in
// place, stored only if some token wrote it: a decode step (T = 1) reads and writes only the shared
// partition and the selected partitions (SPEC §11 C8).
//
// The output of a reading partition goes straight to `o` when a token has a single reader (R = 1:
// GLA, partition::single), otherwise into its read slot of the fp32 buffer `o_part` [tokens, HV, R, V],
// which combine_kernel sums in slot order (the shared partition, then routed partitions by index):
// deterministic, no atomics.
#pragma once

#include <cstdint>

#include <linstate/dynamic.hpp>
#include <linstate/detail/router.hpp>
#include <linstate/tensor.hpp>

#include "../detail/scalar.cuh"
#include "../detail/traits.cuh"
#include "router.cuh"

namespace linstate::cuda_detail {

inline constexpr int tile_v = 32;                  //!< state columns per block (one per lane)
inline constexpr int rows_per_warp = 32;           //!< state rows per warp (one register per row)
inline constexpr int max_warps = 16;               //!< 512 threads
inline constexpr int max_k = rows_per_warp * max_warps;

//! The tensors feeding one family of partitions (the shared one, or the routed/single ones).
template <class Dev>
struct device_source {
  const Dev* q = nullptr;     // [B,T,H,K]
  const Dev* k = nullptr;     // [B,T,H,K]
  const Dev* g = nullptr;     // [B,T,HV,gate_width(D::gate, K, V)]: per key, per value, per head ([B,T,HV]) or null
  const Dev* beta = nullptr;  // [B,T,HV] or null
};

template <class Dev>
struct recurrent_params {
  index_t T = 0;              // tokens per batch row (sequence s is [sT, (s+1)T) when seq is null)
  int H = 1, HV = 1, K = 1, V = 1, N = 1, P = 1;
  int R = 1;                  // read slots per token (1: write o directly)
  bool shared = false, l2norm = false, in_place = false;
  //! Decode grid: every sequence has at most one token and the state is updated in place (or not
  //! wanted); blockIdx.y enumerates only the partitions that token touches (the shared one, then the
  //! routed ones it writes or reads, by index), so no block is launched for a frozen partition.
  bool compact = false;
  float scale = 1.f;
  const index_t* seq = nullptr;  // [S+1] packed offsets (device), or null
  device_source<Dev> main{}, shr{};
  const Dev* v = nullptr;     // [B,T,HV,V]
  const float* cw = nullptr;  // [tokens, N] router write weights, or null (every token, weight 1)
  const float* cr = nullptr;  // [tokens, N] router read weights
  const std::uint32_t* meta = nullptr;  // [tokens, N] flags | slot << 8 (router_kernel), or null
  const float* state_in = nullptr;      // [S,P,HV,K,V] or null (zeros)
  float* state_out = nullptr;           // [S,P,HV,K,V] or null (not wanted); == state_in in place
  Dev* o = nullptr;                     // [B,T,HV,V] (R = 1)
  float* o_part = nullptr;              // [tokens, HV, R, V] (R > 1)
};

//! Dynamic shared memory of recurrent_kernel for `warps` warps: q, k, e^{g} (32·warps each) and two
//! reduction rows per warp.
constexpr std::size_t recurrent_smem_bytes(int warps) { return static_cast<std::size_t>(5 * rows_per_warp * warps) * sizeof(float); }

template <class T>
__device__ __forceinline__ float warp_sum(T x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// Two blocks of 512 threads per multiprocessor cap the kernel at 64 registers: the 32 state registers
// plus addressing, with a few bytes of spill (ptxas -v), at twice the resident warps of a 128 cap.
template <class D, class Dev>
__global__ void __launch_bounds__(tile_v * max_warps, 2) recurrent_kernel(const recurrent_params<Dev> p) {
  static_assert(is_diagonal<D> || is_delta<D>, "linstate (cuda): recurrent_kernel runs the diagonal and delta families");
  extern __shared__ float smem[];
  const int nw = static_cast<int>(blockDim.x) / 32;
  const int KP = nw * rows_per_warp;  // K padded to whole warps
  float* qs = smem;           // [KP] this token's query (0 beyond K)
  float* ks = qs + KP;        // [KP] key (times the write weight, except for the delta rule)
  float* gs = ks + KP;        // [KP] e^{g} (gated_key)
  float* red = gs + KP;       // [nw][32] per-warp partial outputs
  float* red_hk = red + nw * 32;  // [nw][32] per-warp partial hᵀk (delta rule)

  const int K = p.K, V = p.V, HV = p.HV;
  const int lane = static_cast<int>(threadIdx.x) & 31, w = static_cast<int>(threadIdx.x) >> 5;
  const index_t task = blockIdx.x;  // s·HV + hv
  const index_t s = task / HV;
  const index_t t0 = p.seq ? p.seq[s] : s * p.T;
  const index_t t1 = p.seq ? p.seq[s + 1] : (s + 1) * p.T;
  int part = static_cast<int>(blockIdx.y);
  if (p.compact && !(p.shared && part == 0)) {
    if (t1 == t0) return;  // in place, an empty sequence touches nothing
    int want = part - (p.shared ? 1 : 0), found = -1;
    for (int m = 0; m < p.N; ++m)
      if ((p.meta[t0 * p.N + m] & (detail::route_write | detail::route_read)) && want-- == 0) {
        found = m;
        break;
      }
    if (found < 0) return;  // the token touches fewer partitions (its logits were not finite)
    part = found + (p.shared ? 1 : 0);
  }
  const int hv = static_cast<int>(task % HV);
  const int h = hv / (HV / p.H);
  const int j = static_cast<int>(blockIdx.z) * tile_v + lane;  // this thread's state column
  const bool col = j < V;
  const bool is_shared = p.shared && part == 0;
  const int n = part - (p.shared ? 1 : 0);
  const bool routed = !is_shared && p.meta != nullptr;
  const device_source<Dev> src = is_shared ? p.shr : p.main;
  const index_t sbase = ((s * p.P + part) * HV + hv) * static_cast<index_t>(K) * V + j;

  float hreg[rows_per_warp];
  auto load_state = [&] {
#pragma unroll
    for (int r = 0; r < rows_per_warp; ++r) {
      const int a = w * rows_per_warp + r;
      hreg[r] = (p.state_in && col && a < K) ? p.state_in[sbase + static_cast<index_t>(a) * V] : 0.f;
    }
  };
  bool loaded = false, wrote = false;

  for (index_t t = t0; t < t1; ++t) {
    std::uint32_t f = detail::route_write | detail::route_read;
    float cw = 1.f, cr = 1.f;
    int slot = part;
    if (routed) {
      const index_t i = t * p.N + n;
      f = p.meta[i];
      cw = p.cw[i], cr = p.cr[i];
      slot = route_rslot(f);
    }
    const bool wr = f & detail::route_write, rd = f & detail::route_read;
    if (!wr && !rd) continue;  // the same decision for the whole block
    if (!loaded) load_state(), loaded = true;
    wrote |= wr;

    // --- stage this token's q, k (and e^{g}) ----------------------------------------------------
    const index_t qk = (t * p.H + h) * K;
    for (int a = static_cast<int>(threadIdx.x); a < KP; a += static_cast<int>(blockDim.x)) {
      const bool in = a < K;
      qs[a] = (rd && in) ? to_f32(src.q[qk + a]) : 0.f;
      if constexpr (is_delta<D>) ks[a] = (wr && in) ? to_f32(src.k[qk + a]) : 0.f;
      else ks[a] = (wr && in) ? to_f32(src.k[qk + a]) * cw : 0.f;
      if constexpr (decay_key<D>) gs[a] = (wr && in) ? expf(to_f32(D::log_decay(src.g + (t * HV + hv) * K, a))) : 1.f;
    }
    __syncthreads();

    const float vj = (wr && col) ? to_f32(p.v[(t * HV + hv) * V + j]) : 0.f;
    float qf = p.scale * cr;  // read factor
    float acc = 0.f;
    if constexpr (is_delta<D>) {
      float rk = 1.f;
      if (p.l2norm) {  // every warp forms both norms itself (shuffles, no extra barrier)
        float sq = 0.f, sk = 0.f;
        for (int a = lane; a < KP; a += 32) sq += qs[a] * qs[a], sk += ks[a] * ks[a];
        sq = warp_sum(sq), sk = warp_sum(sk);
        qf *= 1.f / sqrtf(sq + 1e-6f);
        rk = 1.f / sqrtf(sk + 1e-6f);
      }
      if (wr) {
        const float decay = expf(to_f32(D::log_decay(src.g + t * HV + hv, 0)));
        const float b = D::write_strength(to_f32(src.beta[t * HV + hv]), cw);  // SPEC §11 C9: the write gate scales β
        float hk = 0.f;
#pragma unroll
        for (int r = 0; r < rows_per_warp; ++r) hk += ks[w * rows_per_warp + r] * hreg[r];
        red_hk[w * 32 + lane] = hk;
        __syncthreads();
        hk = 0.f;
        for (int ww = 0; ww < nw; ++ww) hk += red_hk[ww * 32 + lane];
        // u = β (v − e^g hᵀk̂), k̂ = rk k;  h = e^g h + k̂ uᵀ = e^g h + k (rk u)ᵀ
        const float u = b * (vj - decay * (rk * hk)) * rk;
        if (rd) {
#pragma unroll
          for (int r = 0; r < rows_per_warp; ++r) {
            const int a = w * rows_per_warp + r;
            hreg[r] = decay * hreg[r] + ks[a] * u;
            acc += qs[a] * hreg[r];
          }
        } else {
#pragma unroll
          for (int r = 0; r < rows_per_warp; ++r) hreg[r] = decay * hreg[r] + ks[w * rows_per_warp + r] * u;
        }
      } else {
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
      } else {
#pragma unroll
        for (int r = 0; r < rows_per_warp; ++r) acc += qs[w * rows_per_warp + r] * hreg[r];
      }
    }

    // --- read: reduce the warps' partial sums in a fixed order -----------------------------------
    if (rd) {
      red[w * 32 + lane] = acc;
      __syncthreads();
      if (w == 0 && col) {
        float o = 0.f;
        for (int ww = 0; ww < nw; ++ww) o += red[ww * 32 + lane];
        o *= qf;
        const index_t row = t * HV + hv;
        if (p.R == 1) p.o[row * V + j] = from_f32<Dev>(o);
        else p.o_part[(row * p.R + slot) * V + j] = o;
      }
    }
    // The next token's staging may overwrite qs/ks/gs: every thread is past this token's last use of
    // them once it passed the barrier above (read) — or, for a write-only token, this one.
    if (!rd) __syncthreads();
  }

  if (p.state_out && (!p.in_place || wrote)) {
    if (!loaded) load_state();  // out of place: the final state of an untouched partition is its initial state
#pragma unroll
    for (int r = 0; r < rows_per_warp; ++r) {
      const int a = w * rows_per_warp + r;
      if (col && a < K) p.state_out[sbase + static_cast<index_t>(a) * V] = hreg[r];
    }
  }
}

//! o[t, hv, :] = Σ_r o_part[t, hv, r, :] in slot order (deterministic); NaN for a token whose router
//! logits are not finite. One thread per output element.
template <class Dev>
__global__ void combine_kernel(const float* o_part, Dev* o, index_t rows, int R, int V, int HV,
                               const std::uint32_t* meta, int N) {
  const index_t i = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * V) return;
  const index_t row = i / V;  // t·HV + hv
  const int j = static_cast<int>(i % V);
  float acc = 0.f;
  if (meta && (meta[(row / HV) * N] & route_nonfinite)) acc = quiet_nan();
  else
    for (int r = 0; r < R; ++r) acc += o_part[(row * R + r) * V + j];
  o[i] = from_f32<Dev>(acc);
}

//! combine_kernel for V % 4 == 0 and a 16-byte aligned o_part: one thread per four consecutive
//! elements of a row (16-byte loads of the slots; the outputs stored one by one, so o needs no
//! alignment); the same sums in the same order, so the same bits. An SSE n4k1s forward at T = 32768
//! (two read slots): 245 µs for the one-element kernel (1.4 TB/s), the floor of its 335 MB ≈ 80 µs.
template <class Dev>
__global__ void combine4_kernel(const float* o_part, Dev* o, index_t rows, int R, int V, int HV,
                                const std::uint32_t* meta, int N) {
  const index_t i4 = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int V4 = V / 4;
  if (i4 >= rows * V4) return;
  const index_t row = i4 / V4;  // t·HV + hv
  const int j = static_cast<int>(i4 % V4) * 4;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  if (meta && (meta[(row / HV) * N] & route_nonfinite)) {
    acc = make_float4(quiet_nan(), quiet_nan(), quiet_nan(), quiet_nan());
  } else {
    for (int r = 0; r < R; ++r) {
      const float4 x = *reinterpret_cast<const float4*>(o_part + (row * R + r) * V + j);
      acc.x += x.x, acc.y += x.y, acc.z += x.z, acc.w += x.w;
    }
  }
  Dev* out = o + row * V + j;
  out[0] = from_f32<Dev>(acc.x), out[1] = from_f32<Dev>(acc.y), out[2] = from_f32<Dev>(acc.z), out[3] = from_f32<Dev>(acc.w);
}

}  // namespace linstate::cuda_detail
