// linstate/cuda/kernels/generic.cuh — the token-by-token forward and backward of ANY transition on the
// device, evaluated from the policy's own D::step and D::step_adjoint (linstate/transition.hpp): how
// the CUDA backend runs a family::recurrent_only policy. The CUDA twin of the CPU's
// include/linstate/backend/cpu/generic.hpp: the policy owns the math, this file the loops, the
// threads and the memory. Correct, deterministic and simple rather than fast.
//
// Work item ("task"): one (sequence s, value head hv, partition p); threads over the V value columns
// (thread j owns columns j, j + blockDim, …, the block loops when V > blockDim). The state lives in
// global memory, row-major [K,V], so column j is `column<float>{S + j, V}` (consecutive threads touch
// consecutive addresses: coalesced). A thread only ever writes its own columns of a state, so the
// state needs no barrier; the per-token inputs are staged in shared memory:
//   q, k (raw and, with D::l2norm_qk, l2-normalised: fla's x / √(Σx² + 1e-6)), the gate row
//   (gate_width(D::gate, K, V) entries), β (with D::uses_beta).
//
// Forward (generic_forward_kernel, grid (S·HV, P)): per token that writes or reads the partition
//   write:  D::step(token, j, v_j, column j)              for every column j
//   read:   o_j = scale · cr · Σ_a q̂_a S[a,j]             (rows in ascending order)
// on the output state itself (out of place: state_out, or a scratch copy when no final state is
// wanted, first set to the initial state; in place: the state, untouched unless written).
//
// Backward (generic_backward_kernel, persistent grid over the tasks), checkpointed as the recurrent
// backward (kernels/recurrent_backward.cuh): phase 1 stores the state at every segment start
// (checkpoint k = the state before token t0 + kC, C = the segment length), phase 2 walks the segments
// from the last: it replays the segment from its checkpoint into the block's segment buffer (the
// state after each written token), then walks it backwards with Dh = ∂L/∂S (dht at the end):
//   read:   hd_a = Σ_j S_after[a,j] dO_j,  dq = s·cr·hd (through the l2norm backward),
//           dcr = s·⟨q̂, hd⟩,  Dh[:,j] += s·cr·q̂ dO_j
//   write:  dv_j = D::step_adjoint(token, j, v_j, S_before[:,j], Dh[:,j], grads_j)   (Dh[:,j] ← the
//           adjoint before the token); grads_j are per-column accumulators of ∂L/∂k̂ [K] and ∂L/∂g
//           in global scratch with stride V (for gate_extent::value each column owns entry j of one
//           shared [V] row), and per-column ∂L/∂β, ∂L/∂w; the block sums them over the columns in
//           ascending order after the token (deterministic, no atomics), chains the l2norm backward
//           into dk, and stores every gradient into its slot of the per-slot partial buffers of
//           backward.cuh's contract (Z = 1), so that the combine pass, the router backward and dh0
//           work unchanged.
//   then dh0 = Dh.
// A token that neither writes nor reads the partition is skipped (its flags come from router_kernel).
// Requirement of a gate_extent::value policy: column j's step_adjoint adds only to entry j of d.dg.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include <linstate/detail/router.hpp>
#include <linstate/tensor.hpp>
#include <linstate/transition.hpp>

#include "../detail/scalar.cuh"
#include "../detail/traits.cuh"
#include "recurrent.cuh"
#include "router.cuh"

namespace linstate::cuda_detail {

inline constexpr int generic_max_threads = 256;

//! Threads of a generic block for V columns: whole warps, at most generic_max_threads.
inline int generic_threads(index_t V) {
  return V >= generic_max_threads ? generic_max_threads : static_cast<int>((V + 31) / 32 * 32);
}

//! Shared memory of the generic kernels: q̂, k̂ (forward); q, q̂, k, k̂, hd, dk̂ and dO (backward); the
//! gate row; a few scalars.
inline std::size_t generic_smem_bytes(index_t K, index_t V, index_t GW, bool backward) {
  const index_t g = GW > 0 ? GW : 1;
  return static_cast<std::size_t>((backward ? 6 * K + V : 2 * K) + g + 8) * sizeof(float);
}

//! Floats of the per-block work area of the backward: the segment buffer [C,K,V], Dh [K,V], the
//! per-column ∂L/∂k̂ [K,V] and ∂L/∂g [GA,V] (GA = 1 for a value gate), ∂L/∂β and ∂L/∂w [V] each.
inline index_t generic_work_floats(index_t K, index_t V, index_t GW, bool value_gate, int C) {
  const index_t GA = value_gate ? 1 : (GW > 0 ? GW : 1);
  return static_cast<index_t>(C) * K * V + 2 * K * V + GA * V + 2 * V;
}

template <class Dev>
struct generic_params {
  index_t T = 0;  // tokens per batch row (sequence s is [sT, (s+1)T) when seq is null)
  int H = 1, HV = 1, K = 1, V = 1, N = 1, P = 1;
  int R = 1;           // forward: read slots per token (1: write o directly)
  int Rr = 1, Rw = 1;  // backward: read / write slots per token
  bool shared = false, in_place = false;
  float scale = 1.f;
  const index_t* seq = nullptr;  // [S+1] packed offsets (device), or null
  device_source<Dev> main{}, shr{};
  const Dev* v = nullptr;               // [B,T,HV,V]
  const float* cw = nullptr;            // [tokens, N] router write weights, or null (every token, weight 1)
  const float* cr = nullptr;            // [tokens, N] router read weights
  const std::uint32_t* meta = nullptr;  // [tokens, N] router_kernel's flags and slots, or null
  // forward
  const float* state_in = nullptr;  // [S,P,HV,K,V] or null (zeros)
  float* state = nullptr;           // [S,P,HV,K,V] the state worked on (state_out or scratch); == state_in in place
  Dev* o = nullptr;                 // [B,T,HV,V] (R = 1)
  float* o_part = nullptr;          // [tokens, HV, R, V] (R > 1)
  // backward
  int segment = 64;
  index_t tasks = 0;                 // S·HV·P
  const index_t* segbase = nullptr;  // [S+1] first checkpoint of each sequence (device), or null: s·nseg_T
  index_t nseg_T = 0;
  const Dev* dO = nullptr;     // [B,T,HV,V]
  const float* h0 = nullptr;   // [S,P,HV,K,V] or null (zeros)
  const float* dht = nullptr;  // [S,P,HV,K,V] or null (zeros)
  float* dh0 = nullptr;        // [S,P,HV,K,V] or null (not wanted)
  float* ckpt = nullptr;       // [Σ_s ⌈len_s/C⌉, P, HV, K, V]
  float* work = nullptr;       // [gridDim.x, work_floats]
  index_t work_floats = 0;
  // per-slot partial gradients (null: not wanted), backward.cuh's contract with Z = 1
  float* dq = nullptr;     // [tokens, HV, Rr, K]
  float* dk = nullptr;     // [tokens, HV, Rw, K]
  float* dv = nullptr;     // [tokens, HV, Rw, V]
  float* dg = nullptr;     // [tokens, HV, Rw, GW]
  float* dbeta = nullptr;  // [tokens, HV, Rw]
  float* dcw = nullptr;    // [tokens, HV, N]
  float* dcr = nullptr;    // [tokens, HV, N]
};

namespace generic_detail {

//! The routing of token t for one partition (every token, weight 1, slot = partition without a router).
struct route_t {
  std::uint32_t f;
  float cw, cr;
  int rs, ws;
};

template <class Dev>
__device__ __forceinline__ route_t route_of(const generic_params<Dev>& p, bool routed, int n, int part, index_t t) {
  route_t r{detail::route_write | detail::route_read, 1.f, 1.f, part, part};
  if (routed) {
    const index_t i = t * p.N + n;
    r.f = p.meta[i];
    r.cw = p.cw[i], r.cr = p.cr[i];
    r.rs = route_rslot(r.f), r.ws = route_wslot(r.f);
  }
  return r;
}

//! Warp 0: *out = Σ_a x[a]² (lanes stride the rows, then a butterfly: a fixed order).
__device__ __forceinline__ float sum_squares_warp(const float* x, int K) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  float s = 0.f;
  for (int a = lane; a < K; a += 32) s += x[a] * x[a];
  return warp_sum(s);
}

}  // namespace generic_detail

//! grid (S·HV, P); block generic_threads(V); dynamic shared memory generic_smem_bytes(K, V, GW, false).
template <class D, class Dev>
__global__ void __launch_bounds__(generic_max_threads) generic_forward_kernel(const generic_params<Dev> p) {
  using namespace generic_detail;
  constexpr gate_extent E = D::gate;
  extern __shared__ float smem[];
  const int K = p.K, V = p.V, HV = p.HV;
  const int GW = static_cast<int>(gate_width(E, K, V));
  float* qs = smem;                     // [K] q̂ of the token (0 when it does not read)
  float* ks = qs + K;                   // [K] k̂ (0 when it does not write)
  float* gs = ks + K;                   // [GW] the gate row
  float* sc = gs + (GW > 0 ? GW : 1);   // [0] 1/‖q‖, [1] 1/‖k‖, [2] β
  const int tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
  const index_t task = blockIdx.x;  // s·HV + hv
  const index_t s = task / HV;
  const int hv = static_cast<int>(task % HV), h = hv / (HV / p.H);
  const int part = static_cast<int>(blockIdx.y);
  const index_t t0 = p.seq ? p.seq[s] : s * p.T;
  const index_t t1 = p.seq ? p.seq[s + 1] : (s + 1) * p.T;
  const bool is_shared = p.shared && part == 0;
  const int n = part - (p.shared ? 1 : 0);
  const bool routed = !is_shared && p.meta != nullptr;
  const device_source<Dev> src = is_shared ? p.shr : p.main;
  const index_t sbase = ((s * p.P + part) * HV + hv) * static_cast<index_t>(K) * V;
  float* S = p.state + sbase;

  if (!p.in_place)  // the state worked on starts as the initial state (each thread its own columns)
    for (int j = tid; j < V; j += nt)
      for (int a = 0; a < K; ++a) S[static_cast<index_t>(a) * V + j] = p.state_in ? p.state_in[sbase + static_cast<index_t>(a) * V + j] : 0.f;

  for (index_t t = t0; t < t1; ++t) {
    const route_t rt = route_of(p, routed, n, part, t);
    const bool wr = rt.f & detail::route_write, rd = rt.f & detail::route_read;
    if (!wr && !rd) continue;  // the same decision for the whole block
    __syncthreads();           // the previous token's users of the shared arrays are done
    const index_t qk = (t * p.H + h) * K, th = t * HV + hv;
    for (int a = tid; a < K; a += nt) {
      qs[a] = rd ? to_f32(src.q[qk + a]) : 0.f;
      ks[a] = wr ? to_f32(src.k[qk + a]) : 0.f;
    }
    if constexpr (E != gate_extent::none)
      for (int e = tid; e < GW; e += nt) gs[e] = wr ? to_f32(src.g[th * GW + e]) : 0.f;
    if (tid == 0) {
      float beta = 1.f;
      if constexpr (D::uses_beta)
        if (wr) beta = to_f32(src.beta[th]);
      sc[2] = beta;
    }
    if constexpr (D::l2norm_qk) {
      __syncthreads();
      if (tid < 32) {
        const float sq = sum_squares_warp(qs, K), sk = sum_squares_warp(ks, K);
        if (tid == 0) sc[0] = math::l2_inverse_norm(sq), sc[1] = math::l2_inverse_norm(sk);
      }
      __syncthreads();
      for (int a = tid; a < K; a += nt) qs[a] *= sc[0], ks[a] *= sc[1];
    }
    __syncthreads();

    if (wr) {
      token<float> x;
      x.K = K, x.k = ks, x.g = E == gate_extent::none ? nullptr : gs, x.beta = sc[2], x.w = rt.cw;
      for (int j = tid; j < V; j += nt) D::step(x, j, to_f32(p.v[th * V + j]), column<float>{S + j, V});
    }
    if (rd) {
      const float mul = p.scale * rt.cr;
      for (int j = tid; j < V; j += nt) {
        float acc = 0.f;
        for (int a = 0; a < K; ++a) acc += qs[a] * S[static_cast<index_t>(a) * V + j];
        const float o = mul * acc;
        if (p.R == 1) p.o[th * V + j] = from_f32<Dev>(o);
        else p.o_part[(th * p.R + rt.rs) * V + j] = o;
      }
    }
  }
}

//! Persistent grid (≤ tasks blocks); block generic_threads(V); shared memory generic_smem_bytes(K, V, GW, true).
template <class D, class Dev>
__global__ void __launch_bounds__(generic_max_threads) generic_backward_kernel(const generic_params<Dev> p) {
  using namespace generic_detail;
  constexpr gate_extent E = D::gate;
  constexpr bool l2 = D::l2norm_qk;
  extern __shared__ float smem[];
  const int K = p.K, V = p.V, HV = p.HV, H = p.H, N = p.N, P = p.P, C = p.segment;
  const int GW = static_cast<int>(gate_width(E, K, V));
  const int GA = E == gate_extent::value ? 1 : (GW > 0 ? GW : 1);
  float* qraw = smem;                  // [K] raw q (0 when the token does not read)
  float* qn = qraw + K;                // [K] q̂
  float* kraw = qn + K;                // [K] raw k (0 when it does not write)
  float* kn = kraw + K;                // [K] k̂
  float* hd = kn + K;                  // [K] S_after dO
  float* dkh = hd + K;                 // [K] ∂L/∂k̂ summed over the columns
  float* gs = dkh + K;                 // [GW] the gate row
  float* dOs = gs + (GW > 0 ? GW : 1); // [V] dO of the token
  float* sc = dOs + V;                 // [0] 1/‖q‖ [1] 1/‖k‖ [2] β [3] ⟨q̂,hd⟩ [4] ⟨q,hd⟩ [5] ⟨k,dk̂⟩
  const int tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
  const index_t KV = static_cast<index_t>(K) * V;
  float* const wk = p.work + static_cast<index_t>(blockIdx.x) * p.work_floats;
  float* const segb = wk;           // [C][K,V] the states after the written tokens of a segment
  float* const Dh = segb + C * KV;  // [K,V] ∂L/∂S
  float* const dkacc = Dh + KV;     // [K,V] per-column ∂L/∂k̂
  float* const dgacc = dkacc + KV;  // [GA,V] per-column ∂L/∂g (value gate: one row, entry j per column)
  float* const dbacc = dgacc + static_cast<index_t>(GA) * V;  // [V] per-column ∂L/∂β
  float* const dwacc = dbacc + V;                             // [V] per-column ∂L/∂w

  for (index_t task = blockIdx.x; task < p.tasks; task += gridDim.x) {
    const int part = static_cast<int>(task % P);
    const index_t rest = task / P;
    const int hv = static_cast<int>(rest % HV);
    const index_t s = rest / HV;
    const index_t t0 = p.seq ? p.seq[s] : s * p.T;
    const index_t t1 = p.seq ? p.seq[s + 1] : (s + 1) * p.T;
    const index_t nseg = (t1 - t0 + C - 1) / C;
    const index_t sb = p.segbase ? p.segbase[s] : s * p.nseg_T;
    const int h = hv / (HV / H);
    const bool is_shared = p.shared && part == 0;
    const int n = part - (p.shared ? 1 : 0);
    const bool routed = !is_shared && p.meta != nullptr;
    const device_source<Dev> src = is_shared ? p.shr : p.main;
    const index_t sbase = ((s * P + part) * HV + hv) * KV;
    auto ckpt = [&](index_t sg) { return p.ckpt + (((sb + sg) * P + part) * HV + hv) * KV; };
    __syncthreads();  // the previous task's users of the work area are done

    // stages token t's inputs in shared memory (q when it reads, k, the gate row and β when it writes)
    auto stage = [&](index_t t, bool wr, bool rd, bool with_dO) {
      __syncthreads();  // the previous users of the shared arrays and accumulators are done
      const index_t qk = (t * H + h) * K, th = t * HV + hv;
      for (int a = tid; a < K; a += nt) {
        qraw[a] = rd ? to_f32(src.q[qk + a]) : 0.f;
        kraw[a] = wr ? to_f32(src.k[qk + a]) : 0.f;
      }
      if constexpr (E != gate_extent::none)
        for (int e = tid; e < GW; e += nt) gs[e] = wr ? to_f32(src.g[th * GW + e]) : 0.f;
      if (with_dO && rd)
        for (int j = tid; j < V; j += nt) dOs[j] = to_f32(p.dO[th * V + j]);
      if (tid == 0) {
        float beta = 1.f;
        if constexpr (D::uses_beta)
          if (wr) beta = to_f32(src.beta[th]);
        sc[2] = beta;
        if constexpr (!l2) sc[0] = sc[1] = 1.f;
      }
      __syncthreads();
      if constexpr (l2) {
        if (tid < 32) {
          const float sq = sum_squares_warp(qraw, K), sk = sum_squares_warp(kraw, K);
          if (tid == 0) sc[0] = math::l2_inverse_norm(sq), sc[1] = math::l2_inverse_norm(sk);
        }
        __syncthreads();
      }
      for (int a = tid; a < K; a += nt) {
        qn[a] = l2 ? qraw[a] * sc[0] : qraw[a];
        kn[a] = l2 ? kraw[a] * sc[1] : kraw[a];
      }
      __syncthreads();
    };
    auto token_of = [&](float cw) {
      token<float> x;
      x.K = K, x.k = kn, x.g = E == gate_extent::none ? nullptr : gs, x.beta = sc[2], x.w = cw;
      return x;
    };
    // one forward step of written token t on the thread's columns of state `S`
    auto replay = [&](index_t t, float cw, float* S) {
      stage(t, true, false, false);
      const token<float> x = token_of(cw);
      const index_t th = t * HV + hv;
      for (int j = tid; j < V; j += nt) D::step(x, j, to_f32(p.v[th * V + j]), column<float>{S + j, V});
    };
    auto copy_columns = [&](const float* from, float* to) {
      for (int j = tid; j < V; j += nt)
        for (int a = 0; a < K; ++a) to[static_cast<index_t>(a) * V + j] = from[static_cast<index_t>(a) * V + j];
    };

    // --- phase 1: checkpoints at segment starts --------------------------------------------------
    if (nseg > 0) {
      float* c0 = ckpt(0);
      for (int j = tid; j < V; j += nt)
        for (int a = 0; a < K; ++a) {
          const index_t e = static_cast<index_t>(a) * V + j;
          c0[e] = p.h0 ? p.h0[sbase + e] : 0.f;
        }
      for (index_t sg = 0; sg + 1 < nseg; ++sg) {
        float* next = ckpt(sg + 1);
        copy_columns(ckpt(sg), next);
        for (index_t t = t0 + sg * C; t < t0 + (sg + 1) * C; ++t) {
          const route_t rt = route_of(p, routed, n, part, t);
          if (rt.f & detail::route_write) replay(t, rt.cw, next);
        }
      }
    }

    // --- phase 2: segments backwards -------------------------------------------------------------
    for (int j = tid; j < V; j += nt)
      for (int a = 0; a < K; ++a) {
        const index_t e = static_cast<index_t>(a) * V + j;
        Dh[e] = p.dht ? p.dht[sbase + e] : 0.f;
      }
    for (index_t sg = nseg - 1; sg >= 0; --sg) {
      const index_t b = t0 + sg * C, e = b + C < t1 ? b + C : t1;
      const float* ck = ckpt(sg);
      auto state_at = [&](int i) -> float* { return i == 0 ? const_cast<float*>(ck) : segb + (i - 1) * KV; };
      __syncthreads();  // the previous segment's readers of the segment buffer are done
      int cnt = 0;      // written tokens replayed: state_at(cnt) is the state after the last one
      for (index_t t = b; t < e; ++t) {
        const route_t rt = route_of(p, routed, n, part, t);
        if (rt.f & detail::route_write) {
          copy_columns(state_at(cnt), state_at(cnt + 1));
          replay(t, rt.cw, state_at(cnt + 1));
          ++cnt;
        }
      }
      for (index_t t = e - 1; t >= b; --t) {
        const route_t rt = route_of(p, routed, n, part, t);
        const bool wr = rt.f & detail::route_write, rd = rt.f & detail::route_read;
        if (!wr && !rd) continue;  // the same decision for the whole block
        stage(t, wr, rd, true);
        const index_t th = t * HV + hv;
        const float* Safter = state_at(cnt);
        if (rd) {  // o_t = s·cr·S_tᵀ q̂:  hd = S_t dO (rows), Dh += s·cr·q̂ dOᵀ (columns)
          for (int a = tid; a < K; a += nt) {
            float acc = 0.f;
            for (int j = 0; j < V; ++j) acc += Safter[static_cast<index_t>(a) * V + j] * dOs[j];
            hd[a] = acc;
          }
          for (int j = tid; j < V; j += nt) {
            const float dj = dOs[j];
            for (int a = 0; a < K; ++a) Dh[static_cast<index_t>(a) * V + j] += p.scale * rt.cr * qn[a] * dj;
          }
        }
        if (wr) {
          const float* Sbefore = state_at(cnt - 1);
          const token<float> x = token_of(rt.cw);
          for (int j = tid; j < V; j += nt) {
            for (int a = 0; a < K; ++a) dkacc[static_cast<index_t>(a) * V + j] = 0.f;
            if constexpr (E == gate_extent::value) dgacc[j] = 0.f;
            else
              for (int g = 0; g < GA; ++g) dgacc[static_cast<index_t>(g) * V + j] = 0.f;
            token_grad<float> d;
            d.dk = column<float>{dkacc + j, V};
            d.dg = E == gate_extent::value ? column<float>{dgacc, 1} : column<float>{dgacc + j, V};
            const float dv = D::step_adjoint(x, j, to_f32(p.v[th * V + j]), column<const float>{Sbefore + j, V},
                                             column<float>{Dh + j, V}, d);
            if (p.dv) p.dv[(th * p.Rw + rt.ws) * V + j] = dv;
            dbacc[j] = d.dbeta, dwacc[j] = d.dw;
          }
          --cnt;
        }
        __syncthreads();
        // the column sums (rows in parallel, columns in ascending order)
        if (wr) {
          for (int a = tid; a < K; a += nt) {
            float acc = 0.f;
            for (int j = 0; j < V; ++j) acc += dkacc[static_cast<index_t>(a) * V + j];
            dkh[a] = acc;
          }
          if constexpr (E != gate_extent::none)
            if (p.dg)
              for (int g = tid; g < GW; g += nt) {
                float acc = 0.f;
                if constexpr (E == gate_extent::value) acc = dgacc[g];
                else
                  for (int j = 0; j < V; ++j) acc += dgacc[static_cast<index_t>(g) * V + j];
                p.dg[(th * p.Rw + rt.ws) * GW + g] = acc;
              }
        }
        __syncthreads();
        if (tid == 0) {
          const index_t at_c = th * N + n;
          if (rd) {
            float dq1 = 0.f, dq2 = 0.f;
            for (int a = 0; a < K; ++a) dq1 += qn[a] * hd[a], dq2 += qraw[a] * hd[a];
            sc[3] = dq1, sc[4] = dq2;
            if (routed && p.dcr) p.dcr[at_c] = p.scale * dq1;
          }
          if (wr) {
            float db = 0.f, dw = 0.f, dkd = 0.f;
            for (int j = 0; j < V; ++j) db += dbacc[j], dw += dwacc[j];
            for (int a = 0; a < K; ++a) dkd += kraw[a] * dkh[a];
            sc[5] = dkd;
            if constexpr (D::uses_beta)
              if (p.dbeta) p.dbeta[th * p.Rw + rt.ws] = db;
            if (routed && p.dcw) p.dcw[at_c] = dw;
          }
        }
        __syncthreads();
        for (int a = tid; a < K; a += nt) {
          if (rd && p.dq) {  // through the l2norm backward: dx = mul (dx̂ r − x ⟨x, dx̂⟩ r³)
            const float mul = p.scale * rt.cr, r = sc[0];
            p.dq[(th * p.Rr + rt.rs) * K + a] = l2 ? mul * (hd[a] * r - qraw[a] * sc[4] * (r * r * r)) : mul * hd[a];
          }
          if (wr && p.dk) {
            const float r = sc[1];
            p.dk[(th * p.Rw + rt.ws) * K + a] = l2 ? dkh[a] * r - kraw[a] * sc[5] * (r * r * r) : dkh[a];
          }
        }
      }
    }
    if (p.dh0)
      for (int j = tid; j < V; j += nt)
        for (int a = 0; a < K; ++a) {
          const index_t e = static_cast<index_t>(a) * V + j;
          p.dh0[sbase + e] = Dh[e];
        }
  }
}

}  // namespace linstate::cuda_detail
