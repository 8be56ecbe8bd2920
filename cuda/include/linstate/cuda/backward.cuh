// linstate/cuda/backward.cuh — linstate::backward on linstate::cuda.
//
// Same arguments, same checks and the same results as the CPU overload (include/linstate/backward.hpp),
// up to fp32 rounding, with every tensor in device memory except cu_seqlens (a host span):
// \code
//   #include <linstate/cuda.cuh>
//   linstate::gradients<Eigen::bfloat16> g{.q = dq, .k = dk, .v = dv, .g = dg,
//                                          .shared = {dq1, dk1, dg1}, .router_logits = deta, .initial_state = dh0};
//   linstate::backward<sse_n4k1s>(linstate::cuda{stream}, in, linstate::cotangents<Eigen::bfloat16>{.o = dO}, g);
// \endcode
// (The CUDA backward takes its arguments as a pack, as forward.cuh does, so pass the cotangents and
// the options as named types — linstate::cotangents<Scalar>{...}, linstate::options{...} — not as
// bare braced lists.)
//
// Stream semantics: as forward.cuh — everything is enqueued on `be.stream`, no host synchronisation,
// one stream-ordered scratch allocation from the library's pool; `in.cu_seqlens` is read and copied
// before the call returns. Errors: bad input throws linstate::error before anything is allocated or
// launched (the CPU's checks: make_problem, detail::check_gradients — shapes, gradients requested for
// absent inputs, aliasing — plus: host pointers, K > 512, N > 256 with router::top_k); CUDA failures
// throw linstate::cuda_error. A token whose router logits are not finite (forward: routed nowhere,
// output row NaN) gets NaN in every gradient row of that token (q, k, v, g, β, shared.*, logits).
//
// What runs (chosen with `if constexpr` on the decay policy's family, detail/traits.cuh; a family
// without kernels is a static_assert): for chunked<C> (and automatic when some sequence is longer
// than 64 tokens) the chunk-parallel backward (run_backward_chunked) in place of step 2 below — for
// family::diagonal (decays none/scalar/gated_key) with K, V ≤ 128: kernels/chunked_backward.cuh; for
// family::delta (the gated delta rule; any input type, K ≤ 128, K and V multiples of 4):
// kernels/chunked_delta.cuh; otherwise, for every algorithm and both strategies (mask and varlen give
// the same results by construction):
//   1. router_kernel (a routing router): weights, flags, read and write slots from the policy's
//      R::route (kernels/router.cuh);
//   2. recurrent_bwd_kernel (kernels/recurrent_backward.cuh; family::recurrent_only:
//      generic_backward_kernel, kernels/generic.cuh, from the policy's step / step_adjoint): per
//      (sequence, value head, partition, V group), checkpointed replay of the forward (a checkpoint
//      every C tokens: C = 64, or the C of chunked<C> up to 64; the results do not depend on C, bit for
//      bit) and the walk backwards; writes the per-slot fp32 partial gradients below and dh0;
//   3. slot_sum_kernel (kernels/gradient_combine.cuh): slots → grads.q/k/v/g/beta and grads.shared.*
//      (the chunked backward — the delta rule's, and the GLA family's bf16 one — stores a gradient with
//      one slot itself and skips it here: single_slot_gradients, run_backward_chunked);
//   4. router_bwd_kernel: ∂L/∂(write, read weights) → grads.router_logits through the policy's
//      R::weights_backward (SPEC §4.6).
//
// ====================================================================================================
// CONTRACT of the per-slot partial gradients (steps 2 → 3, 4). Any backward kernel (the recurrent one
// here, a chunked one later) that fills these buffers can reuse steps 3 and 4 unchanged:
// cuda_detail::bwd_partials (plan / bind), combine_gradients(), router_backward().
//
//   tokens = B·T (flat token index t = b·T + τ, packed sequences included)
//   Rr = read slots per token  = (shared ? 1 : 0) + (a routing router ? kr : N)
//   Rw = write slots per token = (shared ? 1 : 0) + (a routing router ? kw : N)
//   slots: the shared partition owns read and write slot 0. router::top_k: a routed partition n
//          that token t reads / writes has slot route_rslot(meta[t,n]) / route_wslot(meta[t,n])
//          (router_kernel: (shared?1:0) + the number of read / written partitions with a lower
//          index). router::dense and partition::single: the slot is the partition index p.
//   Z  = number of V groups the state columns were split over (each writes its own partial sums of the
//        V columns it owns; combine adds them). A kernel that covers all of V in one block uses Z = 1,
//        and then every buffer below has exactly the shape without the leading Z.
//   GK = gate_width(D::gate, K, V): K (gate per key, decay::gated_key), V (gate per value channel),
//        1 (per head: decay::scalar, gated_delta_rule), 0 (no gate, decay::none: no dg_part).
//
//   dq_part    [Z, tokens, HV, Rr, K]   ∂L/∂q of the partition reading t in that slot, through value
//                                       head hv: the RAW q (scale, read weight and l2norm backward done)
//   dk_part    [Z, tokens, HV, Rw, K]   ∂L/∂k (raw k; write weight and l2norm backward done)
//   dv_part    [tokens, HV, Rw, V]      ∂L/∂v (no Z: the V groups own disjoint columns)
//   dg_part    [Z, tokens, HV, Rw, GK]  ∂L/∂g (the log-decay input itself)
//   dbeta_part [Z, tokens, HV, Rw]      ∂L/∂β (delta rule; β as given, before the write gate)
//   dcw, dcr   [Z, tokens, HV, N]       ∂L/∂(write weight c_w), ∂L/∂(read weight c_r) of routed
//                                       partition n through value head hv (router::top_k only; the
//                                       HV axis keeps the sum over heads deterministic without atomics;
//                                       router_backward adds the heads in ascending order). Only the
//                                       entries of written (dcw) / read (dcr) partitions are read.
//   dh0        written directly into gradients.initial_state [S,P,HV,K,V] by the per-partition kernel.
//   All fp32, row-major, device memory. An entry is defined iff token t uses that slot (every slot
//   < Rr / Rw is used by every token whose logits are finite); nothing needs zero-filling.
//   Summation (deterministic): grads.q[t,h] = Σ_{hv of h} Σ_{slot ≥ (shared?1:0)} Σ_z dq_part,
//   grads.shared.q[t,h] = Σ_{hv of h} Σ_z dq_part[z,t,hv,0]; the same for k, g, β (without the
//   head sum for g, β); grads.v[t,hv] = Σ_{all write slots} dv_part.
// ====================================================================================================
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <linstate/algorithm.hpp>
#include <linstate/backend/tags.hpp>
#include <linstate/backward.hpp>
#include <linstate/detail/problem.hpp>
#include <linstate/io_types.hpp>

#include "buffer.cuh"
#include "check.cuh"
#include "detail/device.cuh"
#include "detail/scalar.cuh"
#include "detail/scratch.cuh"
#include "forward.cuh"
#include "kernels/gradient_combine.cuh"
#include "kernels/chunked_backward.cuh"
#include "kernels/chunked_delta.cuh"
#include "kernels/chunked_delta_tc.cuh"
#include "kernels/generic.cuh"
#include "kernels/recurrent_backward.cuh"
#include "kernels/router.cuh"

namespace linstate {
namespace cuda_detail {

//! Read slots per token (the Rr of the contract).
inline int read_slots(const detail::problem& pb) {
  return (pb.shared ? 1 : 0) + static_cast<int>(pb.routed ? pb.kr : pb.N);
}
//! Write slots per token (the Rw of the contract).
inline int write_slots(const detail::problem& pb) {
  return (pb.shared ? 1 : 0) + static_cast<int>(pb.routed ? pb.kw : pb.N);
}

//! The partial-gradient buffers of the contract above. plan() reserves (in a scratch_layout) only the
//! buffers whose gradients were requested; bind() turns the offsets into pointers once the scratch
//! memory exists. Null pointers mean "not wanted": kernels skip those stores.
struct bwd_partials {
  int Z = 1, Rr = 1, Rw = 1, GK = 0;
  float* dq = nullptr;     // [Z, tokens, HV, Rr, K]
  float* dk = nullptr;     // [Z, tokens, HV, Rw, K]
  float* dv = nullptr;     // [tokens, HV, Rw, V]
  float* dg = nullptr;     // [Z, tokens, HV, Rw, GK] (GK = the gate width)
  float* dbeta = nullptr;  // [Z, tokens, HV, Rw]
  float* dcw = nullptr;    // [Z, tokens, HV, N]
  float* dcr = nullptr;    // [Z, tokens, HV, N]
  index_t zs_q = 0, zs_k = 0, zs_g = 0, zs_b = 0, zs_c = 0;  // floats between two V groups

  //! qk_for_g: keep dq and dk even when only dg is wanted (the chunked backward forms dg from them).
  template <class Scalar>
  void plan(const detail::problem& pb, const gradients<Scalar>& g, int z_groups, scratch_layout& lay, bool qk_for_g = false) {
    auto wanted = [](const auto& t) { return !t.empty(); };
    Z = z_groups, Rr = read_slots(pb), Rw = write_slots(pb);
    GK = static_cast<int>(pb.gate_width());  // the gate's entries per (token, value head): K, V, 1 or 0
    const index_t tk = pb.tokens() * pb.HV;
    zs_q = tk * Rr * pb.K, zs_k = tk * Rw * pb.K, zs_g = tk * Rw * GK, zs_b = tk * Rw, zs_c = tk * pb.N;
    const bool routed = pb.routed;
    auto add = [&](bool want, index_t floats) { return want ? lay.add(static_cast<std::size_t>(floats) * sizeof(float)) : npos; };
    const bool for_g = qk_for_g && GK > 0 && (wanted(g.g) || wanted(g.shared.g));
    at_[0] = add(wanted(g.q) || wanted(g.shared.q) || for_g, Z * zs_q);
    at_[1] = add(wanted(g.k) || wanted(g.shared.k) || for_g, Z * zs_k);
    at_[2] = add(wanted(g.v), tk * Rw * pb.V);
    at_[3] = add(GK > 0 && (wanted(g.g) || wanted(g.shared.g)), Z * zs_g);
    at_[4] = add(pb.uses_beta && (wanted(g.beta) || wanted(g.shared.beta)), Z * zs_b);
    at_[5] = add(routed && wanted(g.router_logits), Z * zs_c);
    at_[6] = at_[5] == npos ? npos : lay.add(static_cast<std::size_t>(Z * zs_c) * sizeof(float));
  }
  void bind(unsigned char* base) {
    float** ptr[7] = {&dq, &dk, &dv, &dg, &dbeta, &dcw, &dcr};
    for (int i = 0; i < 7; ++i) *ptr[i] = at_[i] == npos ? nullptr : reinterpret_cast<float*>(base + at_[i]);
  }

 private:
  static constexpr std::size_t npos = ~std::size_t{0};
  std::size_t at_[7] = {npos, npos, npos, npos, npos, npos, npos};
};

//! The gradients whose slot sum (step 3) has exactly one term, so that the kernel forming the partial
//! can store the gradient itself (rounded once, from the same fp32 value) and step 3 skip it. From the
//! problem (what the policy and the call declare), never from which policy it is; the caller keeps only
//! what its kernels can store directly. (The sum would be 0.f + x: the same value but for x = −0, which
//! the sum turns into +0 and the direct store keeps; every other value, NaN and ±inf included, rounds to
//! the same bits.)
struct direct_set {
  bool q = false, k = false, v = false, g = false, beta = false;
};

//! The rule of the diagonal family's bf16 path through chunk_bwd_dqkg_kernel, which also takes routed
//! and shared partitions: a gradient is stored directly when each side's sum has one term — q when every
//! token reads one routed slot (Rr − shared = 1: kr = 1, or one partition), k and g when it writes one
//! (Rw − shared = 1), both sides then (the shared partition's grads.shared.* is slot 0 alone); v only
//! when every token writes one slot in all (Rw = 1: no shared partition, whose v is the same tensor);
//! Z = 1 (one V group), and HV = H for q and k (summed over the value heads of an output head). With a
//! routing router the tokens whose logits are not finite get NaN rows in those tensors afterwards
//! (nan_rows_kernel), as the slot sum gives them. SSE n4k1s at T = 32768 (bf16, H = 8, K = V = 128): six
//! of the seven slot sums (q, k, g and shared.*; v keeps its two-slot sum), ≈ 500 µs of the backward
//! (session 16's ncu, docs/benchmarks.md).
inline direct_set diagonal_single_slot_gradients(const detail::problem& pb, int z_groups) {
  const int first = pb.shared ? 1 : 0;
  const bool z1 = z_groups == 1, heads = pb.HV == pb.H;
  const bool rd1 = read_slots(pb) - first == 1, wr1 = write_slots(pb) - first == 1;
  return {z1 && heads && rd1, z1 && heads && wr1, z1 && write_slots(pb) == 1, z1 && wr1 && pb.gate_width() > 0, false};
}

//! The same rule for the other kernels (the delta rule's, the unrouted fp32 / fp16 paths), which store
//! one partition's gradients only: every token reads and writes one slot (Rr = Rw = 1: one partition,
//! no shared one; then no routing router either, so no router flags and no NaN rows) — there it is
//! diagonal_single_slot_gradients' rule, plus β.
inline direct_set single_slot_gradients(const detail::problem& pb, int z_groups) {
  if (read_slots(pb) != 1 || write_slots(pb) != 1 || pb.routed) return {};
  direct_set d = diagonal_single_slot_gradients(pb, z_groups);
  d.beta = z_groups == 1 && pb.uses_beta;
  return d;
}

//! Step 3: the partial buffers → the requested gradients of q, k, v, g, β and shared.* (deterministic
//! slot sums, see the contract). `meta` is router_kernel's output (null without router::top_k): a
//! token with non-finite logits gets NaN rows.
template <class Scalar>
void combine_gradients(cudaStream_t stream, const detail::problem& pb, const bwd_partials& pt,
                       const std::uint32_t* meta, const gradients<Scalar>& g, const char* api) {
  using Dev = device_scalar_t<Scalar>;
  const int first = pb.shared ? 1 : 0;
  const int H = static_cast<int>(pb.H), HV = static_cast<int>(pb.HV), G = HV / H;
  auto sum = [&](const tensor_view<Scalar>& out, const float* part, index_t zstride, int Z, int groups, int per_group,
                 int R, int r0, int r1, int E) {
    if (out.empty() || out.numel() == 0 || part == nullptr) return;
    slot_sum_args a;
    a.part = part, a.zstride = zstride, a.Z = Z, a.tokens = pb.tokens(), a.groups = groups, a.G = per_group;
    a.R = R, a.r0 = r0, a.r1 = r1, a.E = E, a.meta = meta, a.N = static_cast<int>(pb.N);
    constexpr int threads = 256;
    const index_t total = out.numel();
    if (E % 4 == 0) {  // 16-byte loads (every partial buffer and slot row starts on a multiple of 4 floats)
      slot_sum4_kernel<Dev><<<static_cast<unsigned>((total / 4 + threads - 1) / threads), threads, 0, stream>>>(
          a, device_ptr(out.data));
      check_launch("slot_sum4_kernel", api);
    } else {
      slot_sum_kernel<Dev><<<static_cast<unsigned>((total + threads - 1) / threads), threads, 0, stream>>>(a, device_ptr(out.data));
      check_launch("slot_sum_kernel", api);
    }
  };
  const int K = static_cast<int>(pb.K), V = static_cast<int>(pb.V);
  sum(g.q, pt.dq, pt.zs_q, pt.Z, H, G, pt.Rr, first, pt.Rr, K);
  sum(g.k, pt.dk, pt.zs_k, pt.Z, H, G, pt.Rw, first, pt.Rw, K);
  sum(g.v, pt.dv, 0, 1, HV, 1, pt.Rw, 0, pt.Rw, V);
  sum(g.g, pt.dg, pt.zs_g, pt.Z, HV, 1, pt.Rw, first, pt.Rw, pt.GK);
  sum(g.beta, pt.dbeta, pt.zs_b, pt.Z, HV, 1, pt.Rw, first, pt.Rw, 1);
  if (pb.shared) {
    sum(g.shared.q, pt.dq, pt.zs_q, pt.Z, H, G, pt.Rr, 0, 1, K);
    sum(g.shared.k, pt.dk, pt.zs_k, pt.Z, H, G, pt.Rw, 0, 1, K);
    sum(g.shared.g, pt.dg, pt.zs_g, pt.Z, HV, 1, pt.Rw, 0, 1, pt.GK);
    sum(g.shared.beta, pt.dbeta, pt.zs_b, pt.Z, HV, 1, pt.Rw, 0, 1, 1);
  }
}

//! Step 4: dcw, dcr → `dlogits` [B,T,N] through the router policy's R::weights_backward (a routing
//! router only; no-op when dlogits is empty).
template <int NC = 0, class R, class Scalar>
void router_backward(cudaStream_t stream, const detail::problem_for<R>& pb, const inputs<Scalar>& in, const bwd_partials& pt,
                     const std::uint32_t* meta, const tensor_view<Scalar>& dlogits, const char* api) {
  using Dev = device_scalar_t<Scalar>;
  if constexpr (R::routes) {
    if (dlogits.empty() || pb.tokens() == 0) return;
    router_bwd_params<R, Dev> rp;
    rp.cfg = pb.rcfg();
    rp.tokens = pb.tokens(), rp.N = static_cast<int>(pb.N), rp.HV = static_cast<int>(pb.HV), rp.Z = pt.Z;
    rp.logits = device_ptr(in.router_logits.data), rp.params = in.router_params.data, rp.meta = meta;
    rp.dcw = pt.dcw, rp.dcr = pt.dcr, rp.zstride = pt.zs_c;
    rp.dlogits = device_ptr(dlogits.data);
    constexpr int threads = 128;
    router_bwd_kernel<R, Dev, NC><<<static_cast<unsigned>((pb.tokens() + threads - 1) / threads), threads, 0, stream>>>(rp);
    check_launch("router_bwd_kernel", api);
  } else {
    (void)stream, (void)pb, (void)in, (void)pt, (void)meta, (void)dlogits, (void)api;
  }
}

//! Blocks of `kernel` (with `threads` threads and `smem` bytes) that fit on the device at once (the
//! persistent grid's size).
template <class Kernel>
index_t resident_blocks(Kernel kernel, int threads, std::size_t smem, const char* api) {
  const int sms = sm_count(api);
  int per_sm = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem),
        "cudaOccupancyMaxActiveBlocksPerMultiprocessor", api);
  return static_cast<index_t>(std::max(1, per_sm) * std::max(1, sms));
}

//! Blocks of recurrent_bwd_kernel<D> that fit on the device at once (the persistent grid's size).
template <class D, class Dev>
index_t bwd_resident_blocks(const bwd_geometry& geo, const char* api) {
  return resident_blocks(recurrent_bwd_kernel<D, Dev>, 32 * geo.warps(), recurrent_bwd_smem_bytes(geo), api);
}

//! Checkpoint interval of the recurrent backward for `Algorithm`: C of chunked<C> up to 64, else 64.
template <class Algorithm>
constexpr int bwd_segment() {
  if constexpr (requires { Algorithm::chunk_size; })
    return Algorithm::chunk_size < bwd_default_segment ? Algorithm::chunk_size : bwd_default_segment;
  else return bwd_default_segment;
}

//! Enqueues the whole backward pass (steps 1–4) for a checked problem. Step 2 is
//! recurrent_bwd_kernel<D> for family::diagonal and family::delta, generic_backward_kernel<D> (from
//! the policy's step / step_adjoint) for family::recurrent_only.
template <class D, int NC = 0, class R, class Scalar>
void run_backward(const cuda& be, const detail::problem_for<R>& pb, const inputs<Scalar>& in, const cotangents<Scalar>& d,
                  const gradients<Scalar>& g, int segment, const char* api) {
  static_assert(check_decay<D>());
  using Dev = device_scalar_t<Scalar>;
  constexpr bool generic = is_generic<D>;
  const cudaStream_t stream = stream_of(be);
  const bool want_any = !(g.q.empty() && g.k.empty() && g.v.empty() && g.g.empty() && g.beta.empty() &&
                          g.shared.q.empty() && g.shared.k.empty() && g.shared.g.empty() && g.shared.beta.empty() &&
                          g.router_logits.empty() && g.initial_state.empty());
  if (!want_any) return;
  const index_t tokens = pb.tokens(), S = pb.S;
  const bool routed = pb.routed;
  // generic: one block per (sequence, value head, partition) with every column (Z = 1, no padding)
  const bwd_geometry geo = generic ? bwd_geometry{} : make_bwd_geometry(pb.K, pb.V);

  // Checkpoint interval C: `segment`, or the longest sequence when that is shorter (the results do
  // not depend on C; the segment buffer holds C states per resident block).
  index_t longest = 0;
  for (index_t s = 0; s < S; ++s)
    longest = std::max(longest, pb.seq[static_cast<std::size_t>(s + 1)] - pb.seq[static_cast<std::size_t>(s)]);
  const int C = static_cast<int>(std::max<index_t>(1, std::min<index_t>(segment, longest)));
  std::vector<index_t> host_seq;  // [S+1] offsets, then [S+1] first checkpoint of each sequence
  if (!in.cu_seqlens.empty()) host_seq.assign(pb.seq.begin(), pb.seq.end());
  index_t n_ckpt = 0;
  std::vector<index_t> segbase(static_cast<std::size_t>(S + 1), 0);
  for (index_t s = 0; s < S; ++s) {
    segbase[static_cast<std::size_t>(s)] = n_ckpt;
    n_ckpt += (pb.seq[static_cast<std::size_t>(s + 1)] - pb.seq[static_cast<std::size_t>(s)] + C - 1) / C;
  }
  segbase[static_cast<std::size_t>(S)] = n_ckpt;
  if (!host_seq.empty()) host_seq.insert(host_seq.end(), segbase.begin(), segbase.end());
  const index_t tasks = S * pb.HV * pb.P * geo.Z;
  const index_t KV = pb.K * pb.V;
  const index_t slice = generic ? KV : geo.slice();  // floats of one stored state (slice)
  index_t blocks = 0, work_floats = 0;
  int gthreads = 0;
  std::size_t gsmem = 0;
  if constexpr (generic) {
    gthreads = generic_threads(pb.V);
    gsmem = generic_smem_bytes(pb.K, pb.V, pb.gate_width(), true);
    work_floats = generic_work_floats(pb.K, pb.V, pb.gate_width(), D::gate == gate_extent::value, C);
    work_floats = (work_floats + 3) / 4 * 4;  // 16-byte aligned work areas
    if (tasks > 0) {
      // a persistent grid, its work areas (segment buffer, Dh, column accumulators) capped at 1 GiB
      const index_t cap = std::max<index_t>(1, (index_t{1} << 30) / (work_floats * static_cast<index_t>(sizeof(float))));
      blocks = std::min({tasks, resident_blocks(generic_backward_kernel<D, Dev>, gthreads, gsmem, api), cap});
    }
  } else {
    blocks = tasks > 0 ? std::min(tasks, bwd_resident_blocks<D, Dev>(geo, api)) : 0;
  }

  // --- one scratch allocation ------------------------------------------------------------------
  const std::size_t n_route = routed ? static_cast<std::size_t>(tokens * pb.N) : 0;
  scratch_layout lay;
  const std::size_t at_seq = lay.add(host_seq.size() * sizeof(index_t));
  const std::size_t at_w = lay.add(2 * n_route * sizeof(float));
  const std::size_t at_meta = lay.add(n_route * sizeof(std::uint32_t));
  const std::size_t at_ckpt = lay.add(static_cast<std::size_t>(n_ckpt * pb.P * pb.HV * geo.Z * slice) * sizeof(float));
  // the segment buffer (generic: the whole work area, Dh included, also without a token)
  const std::size_t at_seg = lay.add(static_cast<std::size_t>(generic ? blocks * work_floats : tokens > 0 ? blocks * C * slice : 0) *
                                     sizeof(float));
  bwd_partials pt;
  pt.plan(pb, g, geo.Z, lay);
  device_buffer<unsigned char> scratch;
  if (lay.bytes) scratch = device_buffer<unsigned char>(lay.bytes, stream, scratch_pool(api));
  unsigned char* base = scratch.data();
  pt.bind(base);
  const index_t* seq = nullptr;
  const index_t* segb = nullptr;
  if (!host_seq.empty()) {
    // pageable host memory: the copy is staged before cudaMemcpyAsync returns
    check(cudaMemcpyAsync(base + at_seq, host_seq.data(), host_seq.size() * sizeof(index_t), cudaMemcpyHostToDevice, stream),
          "cudaMemcpyAsync(cu_seqlens)", api);
    seq = reinterpret_cast<const index_t*>(base + at_seq);
    segb = seq + (S + 1);
  }
  float* cw = n_route ? reinterpret_cast<float*>(base + at_w) : nullptr;
  float* cr = n_route ? cw + n_route : nullptr;
  std::uint32_t* meta = n_route ? reinterpret_cast<std::uint32_t*>(base + at_meta) : nullptr;

  // --- 1. router --------------------------------------------------------------------------------
  if constexpr (R::routes)
    if (n_route) launch_router<NC>(stream, pb, in, cw, cr, meta, nullptr, api);

  // --- 2. per-partition recurrent backward ----------------------------------------------------------
  if constexpr (generic) {
    if (blocks > 0) {
      generic_params<Dev> p;
      p.T = pb.T, p.H = static_cast<int>(pb.H), p.HV = static_cast<int>(pb.HV), p.K = static_cast<int>(pb.K);
      p.V = static_cast<int>(pb.V), p.N = static_cast<int>(pb.N), p.P = static_cast<int>(pb.P);
      p.Rr = pt.Rr, p.Rw = pt.Rw, p.shared = pb.shared, p.scale = pb.scale;
      p.segment = C, p.tasks = tasks;
      p.seq = seq, p.segbase = segb, p.nseg_T = (pb.T + C - 1) / C;
      p.main = source_of(in.q, in.k, in.g, in.beta);
      p.shr = source_of(in.shared.q, in.shared.k, in.shared.g, in.shared.beta);
      p.v = device_ptr(in.v.data), p.dO = device_ptr(d.o.data);
      p.cw = cw, p.cr = cr, p.meta = meta;
      p.h0 = in.initial_state.data, p.dht = d.final_state.data, p.dh0 = g.initial_state.data;
      p.ckpt = reinterpret_cast<float*>(base + at_ckpt);
      p.work = reinterpret_cast<float*>(base + at_seg), p.work_floats = work_floats;
      p.dq = pt.dq, p.dk = pt.dk, p.dv = pt.dv, p.dg = pt.dg, p.dbeta = pt.dbeta, p.dcw = pt.dcw, p.dcr = pt.dcr;
      generic_backward_kernel<D, Dev><<<static_cast<unsigned>(blocks), gthreads, gsmem, stream>>>(p);
      check_launch("generic_backward_kernel", api);
    }
  } else if (blocks > 0) {
    bwd_params<Dev> p;
    p.T = pb.T, p.H = static_cast<int>(pb.H), p.HV = static_cast<int>(pb.HV), p.K = static_cast<int>(pb.K);
    p.V = static_cast<int>(pb.V), p.N = static_cast<int>(pb.N), p.P = static_cast<int>(pb.P);
    p.Rr = pt.Rr, p.Rw = pt.Rw, p.shared = pb.shared, p.l2norm = D::l2norm_qk, p.scale = pb.scale;
    p.rw = geo.rw, p.cg = geo.cg, p.Z = geo.Z, p.segment = C, p.tasks = tasks;
    p.seq = seq, p.segbase = segb, p.nseg_T = (pb.T + C - 1) / C;
    p.main = source_of(in.q, in.k, in.g, in.beta);
    p.shr = source_of(in.shared.q, in.shared.k, in.shared.g, in.shared.beta);
    p.v = device_ptr(in.v.data), p.dO = device_ptr(d.o.data);
    p.cw = cw, p.cr = cr, p.meta = meta;
    p.h0 = in.initial_state.data, p.dht = d.final_state.data, p.dh0 = g.initial_state.data;
    p.ckpt = reinterpret_cast<float*>(base + at_ckpt);
    p.segbuf = reinterpret_cast<float*>(base + at_seg);
    p.dq = pt.dq, p.dk = pt.dk, p.dv = pt.dv, p.dg = pt.dg, p.dbeta = pt.dbeta, p.dcw = pt.dcw, p.dcr = pt.dcr;
    p.zs_q = pt.zs_q, p.zs_k = pt.zs_k, p.zs_g = pt.zs_g, p.zs_b = pt.zs_b, p.zs_c = pt.zs_c;
    const dim3 grid(static_cast<unsigned>(blocks)), block(static_cast<unsigned>(32 * geo.warps()));
    const std::size_t smem = recurrent_bwd_smem_bytes(geo);
    recurrent_bwd_kernel<D, Dev><<<grid, block, smem, stream>>>(p);
    check_launch("recurrent_bwd_kernel", api);
  }

  // --- 3. slots → gradients; 4. router ---------------------------------------------------------------
  combine_gradients(stream, pb, pt, meta, g, api);
  router_backward<NC>(stream, pb, in, pt, meta, g.router_logits, api);
  // the scratch memory is released here with cudaFreeAsync, ordered after the kernels
}

//! The chunk-parallel backward: router, record table, then the chunked kernels into the per-slot
//! partials (Z = 1) and steps 3–4. family::diagonal: kernels/chunked_backward.cuh (K, V ≤ 128);
//! family::delta: kernels/chunked_delta.cuh (any input type, exact fp32).
template <class D, int NC = 0, class R, class Scalar>
void run_backward_chunked(const cuda& be, const detail::problem_for<R>& pb, const inputs<Scalar>& in, const cotangents<Scalar>& d,
                          const gradients<Scalar>& g, const char* api, const unsigned char* kept = nullptr) {
  static_assert(check_decay<D>());
  static_assert(is_diagonal<D> || is_delta<D>, "linstate (cuda): the chunked backward runs family::diagonal and family::delta");
  using Dev = device_scalar_t<Scalar>;
  constexpr bool delta = is_delta<D>;
  const cudaStream_t stream = stream_of(be);
  const index_t tokens = pb.tokens();
  const bool routed = pb.routed;
  const record_plan rplan = plan_records(pb, chunk_len);
  const int KP = pb.K <= 64 ? 64 : 128;
  const std::size_t n_route = routed ? static_cast<std::size_t>(tokens * pb.N) : 0;
  const std::size_t chunks = static_cast<std::size_t>(rplan.max_chunks);
  const std::size_t kv = static_cast<std::size_t>(pb.HV * pb.K * pb.V);
  scratch_layout lay;
  const std::size_t at_seq = lay.add(in.cu_seqlens.empty() ? 0 : pb.seq.size() * sizeof(index_t));
  const std::size_t at_w = lay.add(2 * n_route * sizeof(float));
  const std::size_t at_meta = lay.add(n_route * sizeof(std::uint32_t));
  const std::size_t at_flags = lay.add(rplan.flag_count * sizeof(int));
  const std::size_t at_segc = lay.add(static_cast<std::size_t>(pb.S * pb.P + 1) * sizeof(index_t));
  const std::size_t at_cseg = lay.add(chunks * sizeof(int));
  const std::size_t at_rtok = lay.add(chunks * chunk_len * sizeof(int));
  // bf16, family::diagonal: the gradient kernels' buffers (dA, the router dots, D_c), and what the forward
  // kept (`kept`: Q̃, K̃, A, Γ, e^{γ}, H_c; detail/saved.cuh) or, without it, their recomputation's scratch
  // (and U_c's, fp32 in hbuf)
  constexpr bool tc_bwd = !delta && std::is_same_v<Dev, __nv_bfloat16>;
  // chunk_chain_kernel (chunked.cuh) for the recomputation's U_c and hand-off (chain) and for W_c and the
  // adjoint's hand-off (adj_chain): then no fp32 U_c (hbuf) or W_c (dbuf) buffer; a routed chunk's v rows
  // (the intra kernel's copy) and r dO rows (chunk_read_rows_kernel's) pass through vbuf
  bool chain = false, adj_chain = false;
  if constexpr (tc_bwd) {
    chain = chain_possible<D, Dev>(static_cast<int>(pb.K), static_cast<int>(pb.V), device_ptr(in.v.data));
    adj_chain = chain_possible<D, Dev>(static_cast<int>(pb.K), static_cast<int>(pb.V), device_ptr(d.o.data));
  }
  const bool v_copy = ((chain && !kept) || adj_chain) && rplan.first_routed < pb.P;
  const std::size_t at_hbuf = lay.add(tc_bwd && (kept || chain) ? 0 : chunks * kv * sizeof(float));
  const std::size_t at_vbuf = lay.add(v_copy ? chunks * static_cast<std::size_t>(pb.HV * chunk_len * pb.V) * sizeof(Dev) : 0);
  const std::size_t at_dbuf = lay.add(adj_chain ? 0 : chunks * kv * sizeof(float));
  const std::size_t at_gbuf = lay.add(delta || tc_bwd ? 0 : chunks * static_cast<std::size_t>(pb.HV * pb.K) * sizeof(float));
  const std::size_t at_cbuf = lay.add(delta ? 0 : chunks * static_cast<std::size_t>(pb.HV * KP) * sizeof(float));
  const std::size_t at_delta =
      lay.add(delta ? chunks * static_cast<std::size_t>(pb.HV) * delta_chunk_floats<Dev>(pb.K, pb.V, true) * sizeof(float) : 0);
  std::size_t tc_bytes = 0, recompute_bytes = 0;
  if constexpr (tc_bwd) {
    tc_bytes = chunks * static_cast<std::size_t>(pb.HV) * bwd_tc_bytes(KP, static_cast<int>(pb.K), static_cast<int>(pb.V), routed);
    if (!kept) recompute_bytes = chunks * static_cast<std::size_t>(pb.HV) * kept_bytes<D>(KP, static_cast<int>(pb.K), static_cast<int>(pb.V));
  }
  const std::size_t at_tc = lay.add(tc_bytes);
  const std::size_t at_recompute = lay.add(recompute_bytes);
  // one slot per gradient (single_slot_gradients): the kernel forming it stores it itself and step 3 has
  // no partial for it (gp: g without it) — family::delta: delta_grad_kernel, every gradient (any input
  // type); family::diagonal, bf16: dv (chunk_bwd_dv_kernel) and, where chunk_bwd_dqkg_kernel forms them
  // (dg from its own rows, not from dq and dk read back), dq, dk and dg. The diagonal family's fp32 and
  // fp16 path (chunk_grad_exact_kernel, chunk_dg_kernel reading dq and dk back) keeps the partials.
  // With a shared partition or a routing router the diagonal family's bf16 path stores more
  // (diagonal_single_slot_gradients): the routed side's one-slot gradients and the shared partition's.
  direct_set dir{};
  if constexpr (delta) {
    dir = single_slot_gradients(pb, 1);
  } else if constexpr (tc_bwd) {
    if constexpr (dqkg_fused<D>) {
      dir = diagonal_single_slot_gradients(pb, 1);
    } else {
      dir = single_slot_gradients(pb, 1);
      dir.q = dir.k = dir.g = false;
    }
    dir.beta = false;
  }
  gradients<Scalar> gp = g;
  if (dir.q) gp.q = {}, gp.shared.q = {};
  if (dir.k) gp.k = {}, gp.shared.k = {};
  if (dir.v) gp.v = {};
  if (dir.g) gp.g = {}, gp.shared.g = {};
  if (dir.beta) gp.beta = {};
  bwd_partials pt;
  pt.plan(pb, gp, 1, lay, /*qk_for_g=*/!delta && !dir.g);
  device_buffer<unsigned char> scratch(lay.bytes, stream, scratch_pool(api));
  unsigned char* base = scratch.data();
  pt.bind(base);
  const index_t* seq = nullptr;
  if (!in.cu_seqlens.empty()) {
    check(cudaMemcpyAsync(base + at_seq, pb.seq.data(), pb.seq.size() * sizeof(index_t), cudaMemcpyHostToDevice, stream),
          "cudaMemcpyAsync(cu_seqlens)", api);
    seq = reinterpret_cast<const index_t*>(base + at_seq);
  }
  float* cw = n_route ? reinterpret_cast<float*>(base + at_w) : nullptr;
  float* cr = n_route ? cw + n_route : nullptr;
  auto* meta = n_route ? reinterpret_cast<std::uint32_t*>(base + at_meta) : nullptr;
  if constexpr (R::routes)
    if (n_route) launch_router<NC>(stream, pb, in, cw, cr, meta, nullptr, api);

  auto* seg_chunk = reinterpret_cast<index_t*>(base + at_segc);
  auto* chunk_seg = reinterpret_cast<int*>(base + at_cseg);
  auto* rec_tok = reinterpret_cast<int*>(base + at_rtok);
  build_records(pb, rplan, chunk_len, seq, meta, rplan.flag_count ? reinterpret_cast<int*>(base + at_flags) : nullptr,
                seg_chunk, chunk_seg, rec_tok, stream, scratch_pool(api), api);

  chunk_bwd_params<Dev> c;
  c.T = pb.T, c.H = static_cast<int>(pb.H), c.HV = static_cast<int>(pb.HV), c.K = static_cast<int>(pb.K);
  c.V = static_cast<int>(pb.V), c.N = static_cast<int>(pb.N), c.P = static_cast<int>(pb.P), c.S = static_cast<int>(pb.S);
  c.R = pt.Rr, c.first_routed = rplan.first_routed, c.shared = pb.shared, c.scale = pb.scale;
  c.main = source_of(in.q, in.k, in.g, in.beta);
  c.shr = source_of(in.shared.q, in.shared.k, in.shared.g, in.shared.beta);
  c.v = device_ptr(in.v.data);
  c.cw = cw, c.cr = cr, c.meta = meta;
  c.rt = record_table{chunk_len, c.S, c.P, seg_chunk, chunk_seg, rec_tok, rplan.max_chunks};
  c.state_in = in.initial_state.data;
  c.hbuf = tc_bwd && (kept || chain) ? nullptr : reinterpret_cast<float*>(base + at_hbuf);
  c.gbuf = reinterpret_cast<float*>(base + at_gbuf);
  c.vbuf = v_copy ? reinterpret_cast<Dev*>(base + at_vbuf) : nullptr;
  c.seq = seq;
  c.dO = device_ptr(d.o.data), c.dht = d.final_state.data, c.dh0 = g.initial_state.data;
  c.dbuf = adj_chain ? nullptr : reinterpret_cast<float*>(base + at_dbuf), c.cbuf = reinterpret_cast<float*>(base + at_cbuf), c.kp = KP;
  c.Rr = pt.Rr, c.Rw = pt.Rw;
  c.dq = pt.dq, c.dk = pt.dk, c.dv = pt.dv, c.dg = pt.dg, c.dcw = pt.dcw, c.dcr = pt.dcr;
  auto direct = [](bool on, const tensor_view<Scalar>& t) { return on && !t.empty() ? device_ptr(t.data) : nullptr; };
  c.dq_out = direct(dir.q, g.q), c.dk_out = direct(dir.k, g.k), c.dv_out = direct(dir.v, g.v), c.dg_out = direct(dir.g, g.g);
  if (pb.shared) c.dq_out0 = direct(dir.q, g.shared.q), c.dk_out0 = direct(dir.k, g.shared.k), c.dg_out0 = direct(dir.g, g.shared.g);
  if constexpr (tc_bwd) {
    bind_bwd_tc_buffers(c, base + at_tc, chunks * static_cast<std::size_t>(pb.HV), KP, routed);
    bind_kept<D>(c, kept ? const_cast<unsigned char*>(kept) : base + at_recompute, chunks * static_cast<std::size_t>(pb.HV), KP, c.K,
                 c.V);
  }
  if constexpr (delta) {
    delta_params<Dev> dp;
    static_cast<chunk_bwd_params<Dev>&>(dp) = c;
    dp.l2norm = D::l2norm_qk, dp.dbeta = pt.dbeta, dp.dbeta_out = direct(dir.beta, g.beta);
    bind_delta_buffers(dp, reinterpret_cast<float*>(base + at_delta), rplan.max_chunks, pb.HV, pb.K, pb.V, true);
    enqueue_delta_backward<D>(dp, stream, api);
  } else {
    enqueue_chunked_backward<D, Dev>(c, pt.dg != nullptr || c.dg_out != nullptr || c.dg_out0 != nullptr, /*recompute=*/kept == nullptr,
                                     stream, api);
  }
  if (meta) {  // the NaN rows of non-finite tokens in what the kernels stored directly (the slot sum writes the others')
    nan_rows_args a;
    a.meta = meta, a.tokens = pb.tokens(), a.N = static_cast<int>(pb.N);
    auto add = [&](Dev* out, index_t row) {
      if (out) a.out[a.count] = out, a.row[a.count] = row, ++a.count;
    };
    const index_t HK = pb.H * pb.K, HVK = pb.HV * pb.K;
    add(c.dq_out, HK), add(c.dk_out, HK), add(c.dv_out, pb.HV * pb.V), add(c.dg_out, HVK);
    add(c.dq_out0, HK), add(c.dk_out0, HK), add(c.dg_out0, HVK);
    launch_nan_rows<Dev>(a, stream, api);
  }
  combine_gradients(stream, pb, pt, meta, gp, api);
  router_backward<NC>(stream, pb, in, pt, meta, g.router_logits, api);
}

template <class Scalar>
void require_device_gradients(const std::string& api, const cotangents<Scalar>& d, const gradients<Scalar>& g) {
  require_device(api, "cotangents.o", d.o), require_device(api, "cotangents.final_state", d.final_state);
  require_device(api, "gradient q", g.q), require_device(api, "gradient k", g.k), require_device(api, "gradient v", g.v);
  require_device(api, "gradient g", g.g), require_device(api, "gradient beta", g.beta);
  require_device(api, "gradient shared.q", g.shared.q), require_device(api, "gradient shared.k", g.shared.k);
  require_device(api, "gradient shared.g", g.shared.g), require_device(api, "gradient shared.beta", g.shared.beta);
  require_device(api, "gradient router_logits", g.router_logits);
  require_device(api, "gradient initial_state", g.initial_state);
}

template <class Spec, class Algorithm, class Strategy, InputScalar Scalar>
void backward_impl(const cuda& be, const inputs<Scalar>& in, const cotangents<Scalar>& d, const gradients<Scalar>& grads,
                   const options& opt, const saved_states* saved) {
  static_assert(detail::validate_call<Spec, Algorithm, Strategy>());
  const char* api = "linstate::backward (cuda)";
  using D = typename Spec::decay;
  const auto pb = detail::make_problem<Spec>(api, in, tensor_view<Scalar>{}, tensor_view<float>{}, "final_state", opt,
                                             /*o_given=*/false, /*host_data=*/false);
  detail::check_gradients(api, pb, in, d, grads);
  require_device_inputs(api, in);
  require_device_gradients(api, d, grads);
  require_supported(api, pb);
  if constexpr (is_generic<D>) require_generic_supported(api, pb, /*backward=*/true);
  // An empty batch (T = 0 or B = 0): every per-token gradient has no element, and h_T = h_0 gives
  // ∂L/∂h0 = ∂L/∂h_T (zeros without it). Nothing is launched.
  if (pb.tokens() == 0)
    return copy_or_zero(grads.initial_state.data, d.final_state.data, grads.initial_state.numel(), stream_of(be), api);
  // the family picks the kernels (a family::recurrent_only policy is never chunked: wants_chunked)
  bool chunked = wants_chunked<Algorithm, D>(pb);
  if constexpr (is_delta<D>) chunked = chunked && delta_chunked_supported(pb);
  else if constexpr (is_diagonal<D>) chunked = chunked && chunked_backward_supported<device_scalar_t<Scalar>>(pb);
  else chunked = false;
  // what a forward call kept (saved_states; a mismatch with this call throws before anything is launched)
  using sa = detail::saved_states_access;
  const bool kept = saved && sa::check_call(api, *saved, sa::tag<Spec>(), pb, in, chunked ? chunk_len : 0, /*on_device=*/true);
  if constexpr (is_delta<D> || is_diagonal<D>)
    if (chunked) {
      const unsigned char* ops = nullptr;
      if constexpr (keeps_operands<D, device_scalar_t<Scalar>>) ops = kept ? static_cast<const unsigned char*>(sa::device_data(*saved)) : nullptr;
      return run_backward_chunked<D, route_static_n<Spec>>(be, pb, in, d, grads, api, ops);
    }
  run_backward<D, route_static_n<Spec>>(be, pb, in, d, grads, bwd_segment<Algorithm>(), api);
}

template <class Spec, class Algorithm = automatic, class Strategy = varlen, InputScalar Scalar>
void backward(const cuda& be, const inputs<Scalar>& in, const cotangents<Scalar>& d, const gradients<Scalar>& grads,
              Algorithm = {}, Strategy = {}, const options& opt = {}) {
  backward_impl<Spec, Algorithm, Strategy>(be, in, d, grads, opt, nullptr);
}

//! The backward that reads what linstate::forward(…, saved, …) kept for these inputs (an empty `saved`:
//! it recomputes, as the overload without it).
template <class Spec, class Algorithm = automatic, class Strategy = varlen, InputScalar Scalar>
void backward(const cuda& be, const inputs<Scalar>& in, const cotangents<Scalar>& d, const gradients<Scalar>& grads,
              const saved_states& saved, Algorithm = {}, Strategy = {}, const options& opt = {}) {
  backward_impl<Spec, Algorithm, Strategy>(be, in, d, grads, opt, &saved);
}

}  // namespace cuda_detail

//! \brief Backward pass of variant `Spec` on the GPU: `linstate::backward<Spec>(linstate::cuda{stream},
//! in, cotangents, gradients[, saved][, algorithm[, strategy[, options]]])`, the arguments of the CPU overload
//! with device pointers (cu_seqlens stays a host span). Reads `in` (the forward call's inputs),
//! `cotangents.o` `[B,T,HV,V]` and, when given, `cotangents.final_state` `[S,P,HV,K,V]` fp32; writes
//! every non-empty view of `gradients` (input element type; `initial_state` fp32) on `be.stream`
//! without synchronising. Throws linstate::error on bad input before anything is launched.
//!
//! (Arguments are taken as a pack and forwarded to cuda_detail::backward, whose signature is the
//! documented one, so that this overload wins against backward.hpp's catch-all for other backends;
//! pass the cotangents and options as named types, not as bare braced lists.)
template <class Spec, class... Args>
void backward(const cuda& be, Args&&... args) {
  cuda_detail::backward<Spec>(be, std::forward<Args>(args)...);
}

}  // namespace linstate
