// linstate/cuda/kernels/recurrent_backward.cuh — the checkpointed token-by-token backward pass on the
// device (SPEC §2.4(f) for the gated family, the delta rule's adjoint for §3.1), the CUDA twin of
// cpu_detail::run_recurrent_backward (include/linstate/backend/cpu/backward_kernels.hpp).
//
// Work item ("task"): one (sequence s, value head hv, partition p, V group z). A block holds the
// K × (32·cg) slice of the state that the task owns, one column per lane and 32 rows per warp, in
// registers, exactly as the forward kernel (recurrent.cuh) does, with cg column groups of 32 per block
// (warp w: rows 32·(w mod rw) …, columns 32·(z·cg + w div rw) …, rw = ⌈K/32⌉ row warps; at most 16
// warps, so V is split over Z = ⌈⌈V/32⌉ / cg⌉ groups only when rw·⌈V/32⌉ > 16). The grid is
// persistent: min(tasks, resident blocks) blocks, each looping over tasks, so the per-block segment
// buffer below scales with the GPU, not with the problem.
//
// Per task, with C = segment length (64, or C of chunked<C> up to 64):
//   phase 1  replay the forward over the sequence and store the state at every segment start
//            (checkpoint k = state before token t0 + kC) into `ckpt`;
//   phase 2  Dh = dht; for each segment from the last: reload its checkpoint, replay it storing the
//            state after every WRITTEN token into the block's segment buffer, then walk the segment
//            backwards (state after the token = current, state before = previous buffer entry):
//     read  (q̂ = l2norm(q) for the delta rule with l2norm, else q; weight cr; scale s):
//           hd = h_t dO_t,  dq = s·cr·hd (through the l2norm backward),  dcr = s⟨q̂, hd⟩,
//           Dh += s·cr·q̂ dO_tᵀ
//     write, gated family (k̃ = cw·k, a = e^{g}):
//           dkv = Dh v_t,  dk = cw·dkv,  dcw = ⟨k, dkv⟩,  dv = Dhᵀ k̃,
//           dg_i = a_i Σ_j Dh_ij h_{t−1,ij} (gated_key; Σ_i of it for scalar),  Dh ← diag(a) Dh
//     write, delta rule (k̂, a = e^{g}, β̃ = β·cw, P = h_{t−1}):
//           du = Dhᵀk̂, pk = Pᵀk̂, w = v − a·pk,  dv = β̃ du,  dβ̃ = ⟨du, w⟩ (dβ = cw·dβ̃, dcw = β·dβ̃),
//           dk̂ = β̃ (Dh w − a P du),  dg = a (⟨Dh, P⟩ − β̃ ⟨du, pk⟩),  Dh ← a (Dh − β̃ k̂ duᵀ)
//   then dh0 = Dh.
// A token that neither writes nor reads the partition is skipped (its flags come from router_kernel).
// Templated on the decay policy D (family::diagonal or family::delta; detail/traits.cuh): gates from
// D::log_decay, the delta rule's β̃ from D::write_strength. family::recurrent_only: kernels/generic.cuh.
//
// Reductions: over rows (column quantities: dv, du, pk, the forward's hᵀk) through shared memory
// across the row warps; over columns (row quantities: hd, dkv, Dh·P, …) by a transposing butterfly
// inside the warp (31 shuffles for 32 rows, lane ℓ ends with row ℓ) and then across column groups in
// shared memory; all in a fixed order, so the results are deterministic. Every output is a sum over
// the V columns: with Z > 1 each V group writes its own copy (index z) and the combine pass adds them.
// Output layouts: see the contract at the top of linstate/cuda/backward.cuh.
#pragma once

#include <cstdint>

#include <linstate/dynamic.hpp>
#include <linstate/detail/router.hpp>
#include <linstate/tensor.hpp>

#include "../detail/scalar.cuh"
#include "../detail/traits.cuh"
#include "recurrent.cuh"
#include "router.cuh"

namespace linstate::cuda_detail {

inline constexpr int bwd_max_warps = 16;        //!< warps per backward block (a 128-register budget each)
inline constexpr int bwd_default_segment = 64;  //!< tokens between two checkpoints
inline constexpr int bwd_tile_floats = 32 * 32; //!< state floats one warp holds (32 rows × 32 columns)

//! How a (K, V) state is spread over blocks: rw row warps × cg column groups per block, Z blocks over V.
struct bwd_geometry {
  int rw = 1, cg = 1, Z = 1;
  int warps() const { return rw * cg; }
  //! floats of one stored state slice (one block's share, padded to whole warps)
  index_t slice() const { return static_cast<index_t>(warps()) * bwd_tile_floats; }
};

inline bwd_geometry make_bwd_geometry(index_t K, index_t V) {
  bwd_geometry g;
  g.rw = static_cast<int>((K + 31) / 32);
  const int nt = static_cast<int>((V + 31) / 32);
  const int cg_max = bwd_max_warps / g.rw > 0 ? bwd_max_warps / g.rw : 1;
  g.Z = (nt + cg_max - 1) / cg_max;
  g.cg = (nt + g.Z - 1) / g.Z;  // balanced groups
  return g;
}

//! Dynamic shared memory of recurrent_bwd_kernel.
inline std::size_t recurrent_bwd_smem_bytes(const bwd_geometry& g) {
  const std::size_t KP = static_cast<std::size_t>(g.rw) * 32, NW = static_cast<std::size_t>(g.warps());
  return (3 * KP + 3 * g.cg * KP + 2 * NW * 32 + 3 * NW + 3 * static_cast<std::size_t>(g.rw)) * sizeof(float);
}

template <class Dev>
struct bwd_params {
  index_t T = 0;  // tokens per batch row (sequence s is [sT, (s+1)T) when seq is null)
  int H = 1, HV = 1, K = 1, V = 1, N = 1, P = 1;
  int Rr = 1, Rw = 1;  // read / write slots per token
  bool shared = false, l2norm = false;
  float scale = 1.f;
  int rw = 1, cg = 1, Z = 1;  // bwd_geometry
  int segment = bwd_default_segment;
  index_t tasks = 0;                // S·HV·P·Z
  const index_t* seq = nullptr;     // [S+1] packed offsets (device), or null
  const index_t* segbase = nullptr; // [S+1] first checkpoint of each sequence (device), or null: s·nseg_T
  index_t nseg_T = 0;               // checkpoints per sequence without cu_seqlens: ⌈T/segment⌉
  device_source<Dev> main{}, shr{};
  const Dev* v = nullptr;     // [B,T,HV,V]
  const Dev* dO = nullptr;    // [B,T,HV,V]
  const float* cw = nullptr;  // [tokens, N] router write weights, or null (every token, weight 1)
  const float* cr = nullptr;  // [tokens, N] router read weights
  const std::uint32_t* meta = nullptr;  // [tokens, N] router_kernel's flags and slots, or null
  const float* h0 = nullptr;   // [S,P,HV,K,V] or null (zeros)
  const float* dht = nullptr;  // [S,P,HV,K,V] or null (zeros)
  float* dh0 = nullptr;        // [S,P,HV,K,V] or null (not wanted)
  float* ckpt = nullptr;       // [Σ_s ⌈len_s/C⌉, P, HV, Z, slice]
  float* segbuf = nullptr;     // [gridDim.x, C, slice]
  // per-slot partial gradients (null: not wanted), see backward.cuh
  float* dq = nullptr;     // [Z, tokens, HV, Rr, K]
  float* dk = nullptr;     // [Z, tokens, HV, Rw, K]
  float* dv = nullptr;     // [tokens, HV, Rw, V]
  float* dg = nullptr;     // [Z, tokens, HV, Rw, K or 1]
  float* dbeta = nullptr;  // [Z, tokens, HV, Rw]
  float* dcw = nullptr;    // [Z, tokens, HV, N]
  float* dcr = nullptr;    // [Z, tokens, HV, N]
  index_t zs_q = 0, zs_k = 0, zs_g = 0, zs_b = 0, zs_c = 0;  // strides of z in those buffers
};

//! Lane ℓ returns Σ over the 32 lanes of f(ℓ) as evaluated by each lane: a transposing butterfly
//! (16 + 8 + 4 + 2 + 1 shuffles) that reduces 32 row values across the warp's 32 columns at once.
template <class F>
__device__ __forceinline__ float row_reduce(int lane, F&& f) {
  float a[16];
  {
    const bool up = lane & 16;
#pragma unroll
    for (int r = 0; r < 16; ++r) {
      const float lo = f(r), hi = f(r + 16);
      a[r] = (up ? hi : lo) + __shfl_xor_sync(0xffffffffu, up ? lo : hi, 16);
    }
  }
#pragma unroll
  for (int half = 8; half >= 1; half >>= 1) {
    const bool up = lane & half;
#pragma unroll
    for (int r = 0; r < half; ++r) {
      const float lo = a[r], hi = a[r + half];
      a[r] = (up ? hi : lo) + __shfl_xor_sync(0xffffffffu, up ? lo : hi, half);
    }
  }
  return a[0];
}

template <class D, class Dev>
__global__ void __launch_bounds__(32 * bwd_max_warps, 1) recurrent_bwd_kernel(const bwd_params<Dev> p) {
  static_assert(is_diagonal<D> || is_delta<D>, "linstate (cuda): recurrent_bwd_kernel runs the diagonal and delta families");
  extern __shared__ float smem[];
  const int rw = p.rw, cg = p.cg, NW = rw * cg, KP = rw * 32;
  float* qs = smem;              // [KP] raw q of the token (0 beyond K)
  float* ks = qs + KP;           // [KP] raw k
  float* gs = ks + KP;           // [KP] e^{g} (gated_key)
  float* rrow = gs + KP;         // [3][cg][KP] row partials per column group
  float* rcol = rrow + 3 * cg * KP;  // [2][NW][32] column partials per warp
  float* rs_w = rcol + 2 * NW * 32;  // [3][NW] scalar partials per warp (delta rule)
  float* rs_r = rs_w + 3 * NW;       // [3][rw] scalar partials of the finishing warps

  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, w = tid >> 5;
  const int rwid = w % rw, c = w / rw;
  const int K = p.K, V = p.V, HV = p.HV, H = p.H, N = p.N, P = p.P, C = p.segment;
  const index_t slice = static_cast<index_t>(NW) * bwd_tile_floats;
  const index_t my = static_cast<index_t>(w) * bwd_tile_floats + lane;  // + 32 r: this thread's floats of a slice
  constexpr bool delta = is_delta<D>;
  const bool l2 = delta && p.l2norm;
  float* const segb = p.segbuf + static_cast<index_t>(blockIdx.x) * C * slice;

  for (index_t task = blockIdx.x; task < p.tasks; task += gridDim.x) {
    const int z = static_cast<int>(task % p.Z);
    index_t rest = task / p.Z;
    const int part = static_cast<int>(rest % P);
    rest /= P;
    const int hv = static_cast<int>(rest % HV);
    const index_t s = rest / HV;
    const index_t t0 = p.seq ? p.seq[s] : s * p.T;
    const index_t t1 = p.seq ? p.seq[s + 1] : (s + 1) * p.T;
    const index_t nseg = (t1 - t0 + C - 1) / C;
    const index_t sb = p.segbase ? p.segbase[s] : s * p.nseg_T;
    const int h = hv / (HV / H);
    const int j = (z * cg + c) * 32 + lane;  // this thread's state column
    const bool col = j < V;
    const bool is_shared = p.shared && part == 0;
    const int n = part - (p.shared ? 1 : 0);
    const bool routed = !is_shared && p.meta != nullptr;
    const device_source<Dev> src = is_shared ? p.shr : p.main;
    const index_t soff = ((s * P + part) * HV + hv) * static_cast<index_t>(K) * V + j;  // + a·V
    auto ckpt = [&](index_t sg) {
      return p.ckpt + ((((sb + sg) * P + part) * HV + hv) * p.Z + z) * slice;
    };

    // routing of token t for this partition
    struct route_t {
      std::uint32_t f;
      float cw, cr;
      int rs, ws;
    };
    auto route = [&](index_t t) {
      route_t r{detail::route_write | detail::route_read, 1.f, 1.f, part, part};
      if (routed) {
        const index_t i = t * N + n;
        r.f = p.meta[i];
        r.cw = p.cw[i], r.cr = p.cr[i];
        r.rs = route_rslot(r.f), r.ws = route_wslot(r.f);
      }
      return r;
    };

    float hc[rows_per_warp], Dh[rows_per_warp];

    // one forward state update for a written token (as the forward kernel and the CPU's recurrent_update)
    auto replay = [&](index_t t, float cw) {
      __syncthreads();  // the previous users of ks / gs / rcol are done
      const index_t qk = (t * H + h) * K;
      for (int a = tid; a < KP; a += static_cast<int>(blockDim.x)) {
        const bool in = a < K;
        ks[a] = in ? to_f32(src.k[qk + a]) : 0.f;
        if constexpr (decay_key<D>) gs[a] = in ? expf(to_f32(D::log_decay(src.g + (t * HV + hv) * K, a))) : 1.f;
      }
      __syncthreads();
      const float vj = col ? to_f32(p.v[(t * HV + hv) * V + j]) : 0.f;
      if constexpr (delta) {
        float rk = 1.f;
        if (l2) {
          float sk = 0.f;
          for (int a = lane; a < KP; a += 32) sk += ks[a] * ks[a];
          rk = 1.f / sqrtf(warp_sum(sk) + 1e-6f);
        }
        const float decay = expf(to_f32(D::log_decay(src.g + t * HV + hv, 0)));
        const float b = D::write_strength(to_f32(src.beta[t * HV + hv]), cw);  // SPEC §11 C9
        float hk = 0.f;
#pragma unroll
        for (int r = 0; r < rows_per_warp; ++r) hk += ks[rwid * 32 + r] * hc[r];
        rcol[w * 32 + lane] = hk;
        __syncthreads();
        hk = 0.f;
        for (int q = 0; q < rw; ++q) hk += rcol[(c * rw + q) * 32 + lane];
        const float u = b * (vj - decay * (rk * hk)) * rk;  // h = e^g h + k̂ uᵀ, k̂ = rk k
#pragma unroll
        for (int r = 0; r < rows_per_warp; ++r) hc[r] = decay * hc[r] + ks[rwid * 32 + r] * u;
      } else {
        float decay = 1.f;
        if constexpr (decay_head<D>) decay = expf(to_f32(D::log_decay(src.g + t * HV + hv, 0)));
#pragma unroll
        for (int r = 0; r < rows_per_warp; ++r) {
          const int a = rwid * 32 + r;
          const float kk = ks[a] * cw;
          if constexpr (decay_none<D>) hc[r] += kk * vj;
          else if constexpr (decay_head<D>) hc[r] = decay * hc[r] + kk * vj;
          else hc[r] = gs[a] * hc[r] + kk * vj;
        }
      }
    };
    auto store = [&](float* dst) {
#pragma unroll
      for (int r = 0; r < rows_per_warp; ++r) dst[my + 32 * r] = hc[r];
    };
    auto load = [&](const float* src_state) {
#pragma unroll
      for (int r = 0; r < rows_per_warp; ++r) hc[r] = src_state[my + 32 * r];
    };

    // --- phase 1: checkpoints at segment starts ----------------------------------------------------
    if (nseg > 0) {
#pragma unroll
      for (int r = 0; r < rows_per_warp; ++r) {
        const int a = rwid * 32 + r;
        hc[r] = (p.h0 && col && a < K) ? p.h0[soff + static_cast<index_t>(a) * V] : 0.f;
      }
      for (index_t sg = 0; sg < nseg; ++sg) {
        store(ckpt(sg));
        if (sg + 1 == nseg) break;  // the last segment is replayed in phase 2 anyway
        for (index_t t = t0 + sg * C; t < t0 + (sg + 1) * C; ++t) {
          const route_t rt = route(t);
          if (rt.f & detail::route_write) replay(t, rt.cw);
        }
      }
    }

    // --- phase 2: segments backwards ------------------------------------------------------------
#pragma unroll
    for (int r = 0; r < rows_per_warp; ++r) {
      const int a = rwid * 32 + r;
      Dh[r] = (p.dht && col && a < K) ? p.dht[soff + static_cast<index_t>(a) * V] : 0.f;
    }
    for (index_t sg = nseg - 1; sg >= 0; --sg) {
      const index_t b = t0 + sg * C, e = b + C < t1 ? b + C : t1;
      const float* ck = ckpt(sg);
      load(ck);
      int cnt = 0;  // states stored in the segment buffer
      for (index_t t = b; t < e; ++t) {
        const route_t rt = route(t);
        if (rt.f & detail::route_write) {
          replay(t, rt.cw);
          store(segb + cnt * slice);
          ++cnt;
        }
      }
      // hc = the state after the segment's last written token
      for (index_t t = e - 1; t >= b; --t) {
        const route_t rt = route(t);
        const bool wr = rt.f & detail::route_write, rd = rt.f & detail::route_read;
        if (!wr && !rd) continue;  // the same decision for the whole block
        __syncthreads();           // the previous token's users of the shared arrays are done
        const index_t qk = (t * H + h) * K;
        for (int a = tid; a < KP; a += static_cast<int>(blockDim.x)) {
          const bool in = a < K;
          qs[a] = (rd && in) ? to_f32(src.q[qk + a]) : 0.f;
          ks[a] = (wr && in) ? to_f32(src.k[qk + a]) : 0.f;
          if constexpr (decay_key<D>) gs[a] = (wr && in) ? expf(to_f32(D::log_decay(src.g + (t * HV + hv) * K, a))) : 1.f;
        }
        __syncthreads();
        float rq = 1.f, rk = 1.f;  // 1 / ‖·‖ (delta rule with l2norm)
        if (l2) {
          float sq = 0.f, sk = 0.f;
          for (int a = lane; a < KP; a += 32) sq += qs[a] * qs[a], sk += ks[a] * ks[a];
          rq = 1.f / sqrtf(warp_sum(sq) + 1e-6f);
          rk = 1.f / sqrtf(warp_sum(sk) + 1e-6f);
        }
        const index_t row = t * HV + hv;  // (token, value head)

        // read: hd = h_t dO_t (row partials), Dh += s·cr·q̂ dO_tᵀ
        if (rd) {
          const float dOj = col ? to_f32(p.dO[row * V + j]) : 0.f;
          const float hd = row_reduce(lane, [&](int r) { return hc[r] * dOj; });
          rrow[c * KP + rwid * 32 + lane] = hd;
          const float qm = p.scale * rt.cr * rq;
#pragma unroll
          for (int r = 0; r < rows_per_warp; ++r) Dh[r] += qm * qs[rwid * 32 + r] * dOj;
        }

        float decay = 1.f, beta = 0.f, bt = 0.f;
        if (wr) {
          --cnt;
          load(cnt == 0 ? ck : segb + (cnt - 1) * slice);  // hc = the state before the token
          const float vj = col ? to_f32(p.v[row * V + j]) : 0.f;
          if constexpr (delta) {
            decay = expf(to_f32(D::log_decay(src.g + row, 0)));
            beta = to_f32(src.beta[row]);
            bt = D::write_strength(beta, rt.cw);  // ∂bt/∂β = cw, ∂bt/∂cw = β (SPEC §11 C9)
            float du = 0.f, pk = 0.f, dP = 0.f;
#pragma unroll
            for (int r = 0; r < rows_per_warp; ++r) {
              const float kh = ks[rwid * 32 + r] * rk;
              du += Dh[r] * kh, pk += hc[r] * kh, dP += Dh[r] * hc[r];
            }
            rcol[w * 32 + lane] = du;
            rcol[NW * 32 + w * 32 + lane] = pk;
            dP = warp_sum(dP);
            if (lane == 0) rs_w[w] = dP;
            __syncthreads();
            du = 0.f, pk = 0.f;
            for (int q = 0; q < rw; ++q) du += rcol[(c * rw + q) * 32 + lane], pk += rcol[NW * 32 + (c * rw + q) * 32 + lane];
            const float wv = vj - decay * pk;  // w = v − a Pᵀk̂ (0 beyond V)
            if (rwid == 0) {
              if (col && p.dv) p.dv[(row * p.Rw + rt.ws) * V + j] = bt * du;
              const float dbt = warp_sum(du * wv), dupk = warp_sum(du * pk);
              if (lane == 0) rs_w[NW + c] = dbt, rs_w[2 * NW + c] = dupk;
            }
            const float s1 = row_reduce(lane, [&](int r) { return Dh[r] * wv; });
            const float s2 = row_reduce(lane, [&](int r) { return hc[r] * du; });
            rrow[cg * KP + c * KP + rwid * 32 + lane] = s1;
            rrow[2 * cg * KP + c * KP + rwid * 32 + lane] = s2;
#pragma unroll
            for (int r = 0; r < rows_per_warp; ++r) Dh[r] = decay * (Dh[r] - bt * (ks[rwid * 32 + r] * rk) * du);
          } else {
            const float dkv = row_reduce(lane, [&](int r) { return Dh[r] * vj; });
            rrow[cg * KP + c * KP + rwid * 32 + lane] = dkv;
            if constexpr (!decay_none<D>) {
              const float dgp = row_reduce(lane, [&](int r) { return Dh[r] * hc[r]; });
              rrow[2 * cg * KP + c * KP + rwid * 32 + lane] = dgp;
            }
            float dv = 0.f;
#pragma unroll
            for (int r = 0; r < rows_per_warp; ++r) dv += Dh[r] * (rt.cw * ks[rwid * 32 + r]);
            rcol[w * 32 + lane] = dv;
            if constexpr (decay_head<D>) decay = expf(to_f32(D::log_decay(src.g + row, 0)));
            if constexpr (decay_head<D> || decay_key<D>) {
#pragma unroll
              for (int r = 0; r < rows_per_warp; ++r) Dh[r] *= decay_head<D> ? decay : gs[rwid * 32 + r];
            }
          }
        }
        __syncthreads();

        // finish the row quantities: sum the column groups; scalar partials of the first rw warps
        float hd = 0.f, x1 = 0.f, x2 = 0.f;
        if (tid < KP) {
          const int a = tid;
          if (rd)
            for (int cc = 0; cc < cg; ++cc) hd += rrow[cc * KP + a];
          if (wr)
            for (int cc = 0; cc < cg; ++cc) x1 += rrow[(cg + cc) * KP + a], x2 += rrow[(2 * cg + cc) * KP + a];
          if constexpr (delta) x1 = bt * x1 - bt * decay * x2;  // dk̂
          float sq = qs[a] * hd, sk = ks[a] * x1, sg = 0.f;
          if constexpr (decay_head<D>) sg = decay * x2;
          sq = warp_sum(sq), sk = warp_sum(sk), sg = warp_sum(sg);
          if (lane == 0) rs_r[w] = sq, rs_r[rw + w] = sk, rs_r[2 * rw + w] = sg;
        }
        if constexpr (!delta) {
          if (wr && rwid == 0 && col && p.dv) {
            float dv = 0.f;
            for (int q = 0; q < rw; ++q) dv += rcol[(c * rw + q) * 32 + lane];
            p.dv[(row * p.Rw + rt.ws) * V + j] = dv;
          }
        }
        __syncthreads();
        if (tid < KP) {
          float S_q = 0.f, S_k = 0.f, S_g = 0.f;
          for (int q = 0; q < rw; ++q) S_q += rs_r[q], S_k += rs_r[rw + q], S_g += rs_r[2 * rw + q];
          const int a = tid;
          if (a < K) {
            if (rd && p.dq) {
              const float mul = p.scale * rt.cr;
              p.dq[z * p.zs_q + (row * p.Rr + rt.rs) * K + a] =
                  l2 ? mul * (hd * rq - qs[a] * S_q * (rq * rq * rq)) : mul * hd;
            }
            if (wr && p.dk) {
              float dk;
              if constexpr (delta) dk = l2 ? x1 * rk - ks[a] * S_k * (rk * rk * rk) : x1;
              else dk = rt.cw * x1;
              p.dk[z * p.zs_k + (row * p.Rw + rt.ws) * K + a] = dk;
            }
            if constexpr (decay_key<D>)
              if (wr && p.dg) p.dg[z * p.zs_g + (row * p.Rw + rt.ws) * K + a] = gs[a] * x2;
          }
          if (tid == 0) {
            const index_t at_c = z * p.zs_c + row * N + n;
            if (rd && routed && p.dcr) p.dcr[at_c] = p.scale * (l2 ? rq * S_q : S_q);
            if (wr) {
              if constexpr (delta) {
                float dP = 0.f, dbt = 0.f, dupk = 0.f;
                for (int q = 0; q < NW; ++q) dP += rs_w[q];
                for (int cc = 0; cc < cg; ++cc) dbt += rs_w[NW + cc], dupk += rs_w[2 * NW + cc];
                float dbeta = 0.f, dcw = 0.f;
                D::write_strength_backward(beta, rt.cw, dbt, dbeta, dcw);  // the policy's adjoint of b(β, cw)
                if (p.dbeta) p.dbeta[z * p.zs_b + row * p.Rw + rt.ws] = dbeta;
                if (routed && p.dcw) p.dcw[at_c] = dcw;
                if (p.dg) p.dg[z * p.zs_g + row * p.Rw + rt.ws] = decay * (dP - bt * dupk);
              } else {
                if (routed && p.dcw) p.dcw[at_c] = S_k;
                if constexpr (decay_head<D>)
                  if (p.dg) p.dg[z * p.zs_g + row * p.Rw + rt.ws] = S_g;
              }
            }
          }
        }
      }
    }
    if (p.dh0) {
#pragma unroll
      for (int r = 0; r < rows_per_warp; ++r) {
        const int a = rwid * 32 + r;
        if (col && a < K) p.dh0[soff + static_cast<index_t>(a) * V] = Dh[r];
      }
    }
  }
}

}  // namespace linstate::cuda_detail
