// linstate/cuda/forward.cuh — linstate::forward and linstate::forward_in_place on linstate::cuda.
//
// Same arguments, same checks and the same results as the CPU backend (up to fp32 rounding), with
// every tensor in device memory except cu_seqlens, which stays a host array:
// \code
//   #include <linstate/cuda.cuh>                      // from a .cu translation unit
//   linstate::inputs<Eigen::bfloat16> in;              // q, k, v, g, router_logits... device pointers
//   in.cu_seqlens = host_offsets;                      // host span (copied by the call)
//   linstate::forward<sse_n4k1s>(linstate::cuda{stream}, in, {o, final_state});
//   linstate::forward_in_place<sse_n4k1s>(linstate::cuda{stream}, step, state, o_step);   // decode
// \endcode
//
// Stream semantics: everything is enqueued on `be.stream` (nullptr = the legacy default stream) and
// the call returns without synchronising the host with the device (no cudaDeviceSynchronize,
// cudaStreamSynchronize or blocking copy inside). Scratch memory (routing tables, partial outputs,
// the device copy of cu_seqlens) is one stream-ordered allocation per call from a library-owned pool
// (detail/scratch.cuh): cudaMallocFromPoolAsync and cudaFreeAsync on that stream.
// The host array behind `in.cu_seqlens` is read (checked, then copied through a pageable staging
// copy) before the call returns, so it must stay valid until the call returns, and no longer.
// Input tensors must stay valid, and outputs untouched, until the stream has run the call's work.
//
// The host code is templated on the variant's policies and picks the kernels with `if constexpr` on
// the decay policy's family (detail/traits.cuh), never on which policy it is: family::diagonal and
// family::delta have the recurrent and chunk-parallel kernels below, family::recurrent_only runs the
// generic kernel built from the policy's D::step (kernels/generic.cuh; automatic runs it recurrently,
// chunked<C> with it does not compile), and a family without kernels is a static_assert. The router
// kernel calls the router policy's own R::route.
//
// What runs: for a decode step — every sequence at most one token, the state in place or not wanted,
// linstate::recurrent or automatic — one kernel, kernels/decode.cuh: routing (the router policy's
// R::route, in the kernel), the touched partitions and the sum of the read slots, no scratch memory
// (a routing router: small steps only, N ≤ 8 and S·HV ≤ 128 (decode_fused_max_*); one partition
// without a router, GLA or the delta rule: every step); for the diagonal family from S·HV = 128 up
// (N ≤ 16) instead kernels/decode_stream.cuh, which streams the state with 16-byte loads
// (decode_stream_*); for a routing router's diagonal-family steps below S·HV = 128 (N ≤ 16, a
// device with thread-block clusters) kernels/decode_split.cuh, which spreads each state over a
// cluster of blocks by K rows and over V tiles, every block routing the token itself and the
// cluster's first block summing the partial reads (decode_split_*).
// Otherwise the router (a routing router, e.g. router::top_k) in one kernel; then, for
// linstate::recurrent, for K > 128 and for linstate::automatic when no sequence is longer than 64
// tokens (a decode step, a short prompt), the recurrent kernel (kernels/recurrent.cuh; for a decode step only on the partitions each
// token touches); otherwise (linstate::chunked<C>, linstate::automatic on longer sequences) the
// device-side varlen grouping (kernels/records.cuh) and the chunk-parallel kernels with 64-record
// tiles whatever C is: kernels/chunked.cuh for decays none/scalar/gated_key, kernels/chunked_delta.cuh
// (the WY form, exact fp32) for the gated delta rule with K and V multiples of 4 — for bf16 inputs with
// K and V multiples of 16 its tensor-core forward, kernels/chunked_delta_tc.cuh; for a
// family::recurrent_only policy always the generic kernel (kernels/generic.cuh). When a token has
// several reading partitions, a deterministic pass sums their outputs. The strategies linstate::mask
// and linstate::varlen give the same results by construction (a partition skips the tokens that
// neither write nor read it), so both run the same kernels.
//
// Errors: bad input throws linstate::error before anything is launched or allocated (the shape
// checks of the CPU backend, plus: pointers that are host memory, K > 512, N > 256 with
// router::top_k). CUDA failures throw linstate::cuda_error. Router logits are checked on the device:
// a token whose logits hold NaN or ±inf routes to no partition (routed states untouched) and its
// output row becomes NaN; linstate::check_router_logits() turns that into an exception on request.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include <linstate/algorithm.hpp>
#include <linstate/backend/tags.hpp>
#include <linstate/detail/problem.hpp>
#include <linstate/forward.hpp>
#include <linstate/io_types.hpp>

#include "buffer.cuh"
#include "check.cuh"
#include "detail/scalar.cuh"
#include "detail/saved.cuh"
#include "detail/scratch.cuh"
#include "kernels/chunked.cuh"
#include "kernels/chunked_delta.cuh"
#include "kernels/chunked_delta_tc.cuh"
#include "kernels/decode.cuh"
#include "kernels/decode_split.cuh"
#include "kernels/decode_stream.cuh"
#include "kernels/generic.cuh"
#include "kernels/records.cuh"
#include "kernels/recurrent.cuh"
#include "kernels/router.cuh"

namespace linstate {
namespace cuda_detail {

inline cudaStream_t stream_of(const cuda& be) { return static_cast<cudaStream_t>(be.stream); }

//! Throws linstate::error when a given tensor is plain (unregistered) host memory.
template <class T>
void require_device(const std::string& api, const char* name, const tensor_view<T>& t) {
  if (t.empty() || t.numel() == 0) return;
  cudaPointerAttributes at{};
  check(cudaPointerGetAttributes(&at, static_cast<const void*>(t.data)), "cudaPointerGetAttributes", api.c_str());
  if (at.type == cudaMemoryTypeUnregistered)
    detail::fail(api, std::string(name) + " " + t.shape.str() +
                          " is host memory; the CUDA backend reads device memory (cudaMalloc, linstate::device_buffer; "
                          "pinned and managed memory work too). Only cu_seqlens is a host array");
}

template <class Scalar>
void require_device_inputs(const std::string& api, const inputs<Scalar>& in) {
  require_device(api, "q", in.q), require_device(api, "k", in.k), require_device(api, "v", in.v);
  require_device(api, "g", in.g), require_device(api, "beta", in.beta);
  require_device(api, "shared.q", in.shared.q), require_device(api, "shared.k", in.shared.k);
  require_device(api, "shared.g", in.shared.g), require_device(api, "shared.beta", in.shared.beta);
  require_device(api, "router_logits", in.router_logits), require_device(api, "router_params", in.router_params);
  require_device(api, "initial_state", in.initial_state);
}

//! Limits of this session's kernels, checked before anything is launched.
inline void require_supported(const std::string& api, const detail::problem& pb) {
  if (pb.K > max_k)
    detail::fail(api, "K = " + std::to_string(pb.K) + " but the CUDA recurrent kernel holds at most K = " +
                          std::to_string(max_k) + " state rows per block");
  if (pb.routed && pb.N > max_router_partitions)
    detail::fail(api, "N = " + std::to_string(pb.N) + " routed partitions, but the CUDA router handles at most " +
                          std::to_string(max_router_partitions));
  if (pb.P > 65535) detail::fail(api, "more than 65535 partitions");
  if ((pb.V + tile_v - 1) / tile_v > 65535) detail::fail(api, "V is too large for the CUDA grid");
}

//! The limits of the generic kernels (family::recurrent_only), checked before anything is launched.
inline void require_generic_supported(const std::string& api, const detail::problem& pb, bool backward) {
  const std::size_t smem = generic_smem_bytes(pb.K, pb.V, pb.gate_width(), backward);
  if (smem > 48 * 1024)
    detail::fail(api, "K = " + std::to_string(pb.K) + ", V = " + std::to_string(pb.V) + ": the CUDA kernel of a "
                      "family::recurrent_only policy stages " + std::to_string(smem) + " bytes of shared memory per "
                      "token, more than 48 KiB");
  if (pb.S * pb.HV > 2147483647) detail::fail(api, "too many sequences × value heads for the CUDA grid");
}

//! Enqueues router_kernel (a routing router): weights cw, cr [tokens, N] and meta words with flags,
//! read slots and write slots, from the policy's R::route. `o_nan`: the output [tokens, HV·V] whose
//! rows of a non-finite token become NaN (when a token has a single reader), or null.
template <int NC = 0, class R, class Scalar>
void launch_router(cudaStream_t stream, const detail::problem_for<R>& pb, const inputs<Scalar>& in, float* cw, float* cr,
                   std::uint32_t* meta, device_scalar_t<Scalar>* o_nan, const char* api) {
  using Dev = device_scalar_t<Scalar>;
  const index_t tokens = pb.tokens();
  if (tokens == 0) return;
  router_params<R, Dev> rp;
  rp.cfg = pb.rcfg();
  rp.tokens = tokens, rp.N = static_cast<int>(pb.N);
  rp.first_slot = pb.shared ? 1 : 0;
  rp.logits = device_ptr(in.router_logits.data);
  rp.params = in.router_params.data;
  rp.cw = cw, rp.cr = cr, rp.meta = meta;
  rp.o_nan = o_nan;
  rp.row = pb.HV * pb.V;
  constexpr int threads = 128;
  router_kernel<R, Dev, R::routes ? NC : 0><<<static_cast<unsigned>((tokens + threads - 1) / threads), threads, 0, stream>>>(rp);
  check_launch("router_kernel", api);
}

//! Whether `Algorithm` asks for the chunked kernels: chunked<C> always (the GPU kernels use C = 64
//! whatever C is: the chunk length changes rounding, not the result), automatic when some sequence
//! is longer than one chunk (as on the CPU: a decode step or a short prompt runs the recurrence).
//! Never for a family::recurrent_only policy D (automatic runs it recurrently; chunked<C> with it
//! does not compile: detail::validate_call).
template <class Algorithm, class D>
bool wants_chunked(const detail::problem& pb) {
  if constexpr (std::is_same_v<Algorithm, recurrent> || is_generic<D>) return false;
  else if constexpr (std::is_same_v<Algorithm, automatic>) {
    for (std::size_t i = 0; i + 1 < pb.seq.size(); ++i)
      if (pb.seq[i + 1] - pb.seq[i] > chunk_len) return true;
    return false;
  } else return true;
}

template <class Scalar>
device_source<device_scalar_t<Scalar>> source_of(const tensor_view<const Scalar>& q, const tensor_view<const Scalar>& k,
                                                 const tensor_view<const Scalar>& g, const tensor_view<const Scalar>& beta) {
  return {device_ptr(q.data), device_ptr(k.data), device_ptr(g.data), device_ptr(beta.data)};
}

//! dst[0:n] = src[0:n] (device to device), or 0 when src is null; enqueued on `stream`. What an empty
//! batch (no token) leaves of a state: the forward's final state is its initial state, the backward's
//! ∂L/∂h0 is ∂L/∂(final state).
inline void copy_or_zero(float* dst, const float* src, index_t n, cudaStream_t stream, const char* api) {
  if (n == 0 || dst == nullptr || dst == src) return;
  const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(float);
  if (src) check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream), "cudaMemcpyAsync(state)", api);
  else check(cudaMemsetAsync(dst, 0, bytes, stream), "cudaMemsetAsync(state)", api);
}

//! The number of routed partitions when the partition policy fixes it at compile time and it is small
//! enough for a decode step to route over registers (route_in_warp's NC), else 0 (any N, over shared
//! memory). Only what the policy declares: Spec::partition::num_routed.
inline constexpr int route_static_max_n = 16;
template <class Spec>
inline constexpr int route_static_n = Spec::router::routes && Spec::partition::num_routed != dynamic &&
                                              Spec::partition::num_routed <= route_static_max_n
                                          ? Spec::partition::num_routed
                                          : 0;

//! Enqueues the whole forward pass. `state_in` may be null (zeros), `state_out` may be null (not
//! wanted); in place, state_in == state_out and untouched partitions are not accessed at all. An
//! empty batch (T = 0 or B = 0: no token, so o has no element) launches nothing: the final state is
//! the initial one. NC: route_static_n of the variant.
template <class D, int NC = 0, class R, class Scalar>
void run(const cuda& be, const detail::problem_for<R>& pb, const inputs<Scalar>& in, const float* state_in, float* state_out,
         bool in_place, Scalar* o, const char* api, bool use_chunked = false, saved_states* keep = nullptr,
         const void* variant = nullptr) {
  static_assert(check_decay<D>());
  using Dev = device_scalar_t<Scalar>;
  constexpr bool generic = is_generic<D>;
  const cudaStream_t stream = stream_of(be);
  const index_t tokens = pb.tokens();
  if (tokens == 0) return copy_or_zero(state_out, state_in, pb.state_numel(), stream, api);
  const bool routed = pb.routed;
  const int R_read = (pb.shared ? 1 : 0) + static_cast<int>(routed ? pb.kr : pb.N);  // read slots per token
  const bool direct = R_read == 1;
  index_t longest = 0;
  for (std::size_t i = 0; i + 1 < pb.seq.size(); ++i) longest = std::max(longest, pb.seq[i + 1] - pb.seq[i]);
  // Decode grid (SPEC §11 C8): blocks only for the partitions the single token of each sequence touches.
  const bool compact = !generic && routed && longest <= 1 && (in_place || state_out == nullptr);
  // the family picks the kernels: diagonal → chunked.cuh, delta → chunked_delta.cuh (when the shapes
  // fit, else the recurrence), recurrent_only → generic.cuh (never chunked)
  bool chunked = false;
  if constexpr (is_delta<D>) chunked = use_chunked && delta_chunked_supported(pb);
  else if constexpr (is_diagonal<D>) chunked = use_chunked && chunked_supported(pb);
  const bool delta_chunked = is_delta<D> && chunked;
  // The decode step's kernel (kernels/decode.cuh): at most one token per sequence, the state in place
  // (or not wanted); a routing router's routing, the touched partitions and the sum of the read slots
  // in one launch, no scratch but the device copy of cu_seqlens; or one partition without routing (GLA).
  const int rec_warps = static_cast<int>((pb.K + rows_per_warp - 1) / rows_per_warp);
  const int decode_groups = R::routes ? (pb.shared ? 1 : 0) + std::max(pb.kw, pb.kr) : 1;
  bool fused = false, streamed = false, split = false;
  if constexpr (!generic) {
    const bool one_step = longest <= 1 && (in_place || state_out == nullptr) && !chunked;
    const bool step = one_step && decode_fused_enabled && decode_groups * rec_warps <= max_warps &&
                      pb.S * pb.HV * ((pb.V + tile_v - 1) / tile_v) <= 2147483647;
    if constexpr (R::routes) fused = step && pb.N <= decode_fused_max_n && pb.S * pb.HV <= decode_fused_max_tasks;
    else fused = step && pb.P == 1 && !pb.shared;
    // the streamed decode kernel (kernels/decode_stream.cuh): the diagonal family on large steps
    if constexpr (is_diagonal<D>) {
      const auto aligned = [](const float* x) { return reinterpret_cast<std::uintptr_t>(x) % 16 == 0; };
      bool st = one_step && decode_stream_enabled && pb.S * pb.HV >= decode_stream_min_tasks && pb.V % 4 == 0 &&
                aligned(state_in) && aligned(state_out) && decode_groups * rec_warps <= stream_max_warps &&
                pb.S * pb.HV <= 2147483647 && (pb.V + stream_cols - 1) / stream_cols <= 65535;
      const int routed_groups = R::routes ? decode_groups - (pb.shared ? 1 : 0) : 0;
      st = st && decode_stream_smem_bytes(decode_groups, routed_groups, rec_warps, R::routes ? static_cast<int>(pb.N) : 0) <= 48 * 1024;
      if constexpr (R::routes) st = st && pb.N <= decode_stream_max_n;
      else st = st && pb.P == 1 && !pb.shared;
      if (st) streamed = true, fused = false;
      // the split decode kernel (kernels/decode_split.cuh): a routing router's small steps (one
      // partition without a router only when forced), each state over a cluster of blocks (K) and V
      // tiles; a device with thread-block clusters (asked last: a runtime call)
      const split_shape sh = decode_split_shape(rec_warps);
      bool sp = one_step && !streamed && decode_split_enabled && pb.S * pb.HV <= decode_split_max_tasks &&
                decode_groups * sh.wpb <= split_max_block_warps &&
                pb.S * pb.HV * ((pb.V + tile_v - 1) / tile_v) * sh.cluster <= 2147483647;
      sp = sp && decode_split_smem_bytes(decode_groups, routed_groups, rec_warps, sh.wpb, R::routes ? static_cast<int>(pb.N) : 0) <=
                     48 * 1024;
      if constexpr (R::routes) sp = sp && pb.N <= decode_split_max_n;
      else sp = sp && decode_split_single && pb.P == 1 && !pb.shared && pb.S * pb.HV <= decode_split_single_max_tasks;
      if (sp && device_has_clusters(api)) split = true, fused = false;
    }
  }
  const record_plan rplan = chunked ? plan_records(pb, chunk_len) : record_plan{};

  // --- one scratch allocation: cu_seqlens, routing tables, partial outputs ----------------------
  const bool one_kernel = fused || streamed || split;
  const std::size_t n_route = routed && !one_kernel ? static_cast<std::size_t>(tokens * pb.N) : 0;
  const std::size_t n_part = direct || one_kernel ? 0 : static_cast<std::size_t>(tokens * pb.HV * R_read * pb.V);
  scratch_layout lay;
  const std::size_t at_seq = lay.add(in.cu_seqlens.empty() ? 0 : pb.seq.size() * sizeof(index_t));
  const std::size_t at_w = lay.add(2 * n_route * sizeof(float));
  const std::size_t at_meta = lay.add(n_route * sizeof(std::uint32_t));
  const std::size_t at_part = lay.add(n_part * sizeof(float));
  // chunked: the record table (records.cuh) and per-chunk states / decays (chunked.cuh)
  const std::size_t n_chunks = chunked ? static_cast<std::size_t>(rplan.max_chunks) : 0;
  const std::size_t at_flags = lay.add(rplan.flag_count * sizeof(int));
  const std::size_t at_segc = lay.add(chunked ? static_cast<std::size_t>(pb.S * pb.P + 1) * sizeof(index_t) : 0);
  const std::size_t at_cseg = lay.add(n_chunks * sizeof(int));
  const std::size_t at_rtok = lay.add(n_chunks * chunk_len * sizeof(int));
  const bool diag_chunked = chunked && !delta_chunked;
  // with `keep`, a bf16 forward of the diagonal family whose backward is chunked writes Q̃, K̃, A, Γ, e^{γ}
  // and H_c into the saved_states' device storage (detail/saved.cuh) instead of scratch; other calls keep
  // nothing. The object holds nothing valid from here until this call's kernels are enqueued (a failed
  // allocation or launch leaves it empty, never describing storage it no longer has).
  bool keeping = false;
  if constexpr (keeps_operands<D, Dev>) keeping = keep && diag_chunked && kept_supported(pb);
  if (keep) detail::saved_states_access::invalidate(*keep);
  const std::size_t at_gbuf =
      lay.add(delta_chunked || keeping ? 0 : n_chunks * static_cast<std::size_t>(pb.HV * pb.K) * sizeof(float));
  // the GLA family's Q̃, K̃ and intra-chunk scores (chunk_intra_kernel → chunk_kstate_kernel, chunk_output_kernel),
  // in the operand types, rows chunk_kp(K) long
  const std::size_t n_qk = diag_chunked ? n_chunks * static_cast<std::size_t>(pb.HV * chunk_len * chunk_kp(static_cast<int>(pb.K))) : 0;
  const std::size_t at_qbuf = lay.add(keeping ? 0 : n_qk * sizeof(state_op_t<Dev>));
  // K̃: chunk_kstate_kernel's or chunk_chain_kernel's operand (the intra kernel forms U_c itself, and needs
  // no K̃, only where the chain cannot run: v not 16-byte aligned)
  const bool u_fused = intra_fuses_u<D, Dev>(static_cast<int>(pb.K), static_cast<int>(pb.V));
  const bool chain = diag_chunked && chain_possible<D, Dev>(static_cast<int>(pb.K), static_cast<int>(pb.V), device_ptr(in.v.data));
  const bool kt_needed = !u_fused || chain;
  const std::size_t at_kbuf = lay.add(kt_needed && !keeping ? n_qk * sizeof(Dev) : 0);
  // U_c (fp32; then H_c where the scan keeps it in fp32): not where the chain forms U_c itself
  const std::size_t at_hbuf = lay.add(chain ? 0 : n_chunks * static_cast<std::size_t>(pb.HV * pb.K * pb.V) * sizeof(float));
  // v of the routed chunks' writing rows, for chunk_chain_kernel (an identity partition's rows are read in place)
  const bool v_copy = chain && rplan.first_routed < pb.P;
  const std::size_t at_vbuf = lay.add(v_copy ? n_chunks * static_cast<std::size_t>(pb.HV * chunk_len * pb.V) * sizeof(Dev) : 0);
  const std::size_t at_abuf =
      lay.add(diag_chunked && !keeping ? n_chunks * static_cast<std::size_t>(pb.HV * chunk_len * chunk_len) * sizeof(Dev) : 0);
  // H_c in the state operand type for 16-bit inputs (chunk_scan_kernel → chunk_output_kernel; U_c stays fp32 in hbuf)
  constexpr bool h16 = tensor_core_op<state_op_t<Dev>>;
  const std::size_t at_hsbuf =
      lay.add(diag_chunked && h16 && !keeping ? n_chunks * static_cast<std::size_t>(pb.HV * pb.K * pb.V) * sizeof(state_op_t<Dev>) : 0);
  const std::size_t at_delta =
      lay.add(delta_chunked ? n_chunks * static_cast<std::size_t>(pb.HV) * delta_chunk_floats<Dev>(pb.K, pb.V, false) * sizeof(float) : 0);
  // generic: the state worked on when no final state is wanted
  const std::size_t at_gstate = lay.add(generic && state_out == nullptr ? static_cast<std::size_t>(pb.state_numel()) * sizeof(float) : 0);
  // the carry of a pipelined delta-rule forward (chunked_delta_tc.cuh) where the call writes no final state
  const bool carry_scratch = delta_chunked && std::is_same_v<Dev, __nv_bfloat16> && state_out == nullptr &&
                             delta_tc_pipeline_possible(rplan.max_chunks, pb.S * pb.P);
  const std::size_t at_carry = lay.add(carry_scratch ? static_cast<std::size_t>(pb.state_numel()) * sizeof(float) : 0);
  device_buffer<unsigned char> scratch;
  if (lay.bytes) scratch = device_buffer<unsigned char>(lay.bytes, stream, scratch_pool(api));
  auto at = [&](std::size_t off) { return static_cast<void*>(scratch.data() + off); };
  const index_t* seq = nullptr;
  if (!in.cu_seqlens.empty()) {
    // pb.seq is pageable host memory: the copy is staged before cudaMemcpyAsync returns.
    check(cudaMemcpyAsync(at(at_seq), pb.seq.data(), pb.seq.size() * sizeof(index_t), cudaMemcpyHostToDevice, stream),
          "cudaMemcpyAsync(cu_seqlens)", api);
    seq = static_cast<const index_t*>(at(at_seq));
  }
  float* cw = n_route ? static_cast<float*>(at(at_w)) : nullptr;
  float* cr = n_route ? cw + n_route : nullptr;
  std::uint32_t* meta = n_route ? static_cast<std::uint32_t*>(at(at_meta)) : nullptr;
  float* o_part = n_part ? static_cast<float*>(at(at_part)) : nullptr;

  if constexpr (R::routes)
    if (n_route) launch_router<NC>(stream, pb, in, cw, cr, meta, direct ? device_ptr(o) : nullptr, api);

  if constexpr (generic) {
    generic_params<Dev> p;
    p.T = pb.T, p.H = static_cast<int>(pb.H), p.HV = static_cast<int>(pb.HV), p.K = static_cast<int>(pb.K);
    p.V = static_cast<int>(pb.V), p.N = static_cast<int>(pb.N), p.P = static_cast<int>(pb.P), p.R = R_read;
    p.shared = pb.shared, p.in_place = in_place, p.scale = pb.scale;
    p.seq = seq;
    p.main = source_of(in.q, in.k, in.g, in.beta);
    p.shr = source_of(in.shared.q, in.shared.k, in.shared.g, in.shared.beta);
    p.v = device_ptr(in.v.data);
    p.cw = cw, p.cr = cr, p.meta = meta;
    p.state_in = state_in;
    p.state = state_out ? state_out : static_cast<float*>(at(at_gstate));
    p.o = device_ptr(o), p.o_part = o_part;
    const index_t tasks = pb.S * pb.HV;
    if (tasks > 0) {
      const std::size_t smem = generic_smem_bytes(pb.K, pb.V, pb.gate_width(), false);
      const dim3 grid(static_cast<unsigned>(tasks), static_cast<unsigned>(pb.P));
      generic_forward_kernel<D, Dev><<<grid, generic_threads(pb.V), smem, stream>>>(p);
      check_launch("generic_forward_kernel", api);
    }
  } else {
    if (chunked) {
      chunk_params<Dev> c;
      c.T = pb.T, c.H = static_cast<int>(pb.H), c.HV = static_cast<int>(pb.HV), c.K = static_cast<int>(pb.K);
      c.V = static_cast<int>(pb.V), c.N = static_cast<int>(pb.N), c.P = static_cast<int>(pb.P), c.S = static_cast<int>(pb.S);
      c.R = R_read, c.first_routed = rplan.first_routed, c.shared = pb.shared, c.in_place = in_place, c.scale = pb.scale;
      c.main = source_of(in.q, in.k, in.g, in.beta);
      c.shr = source_of(in.shared.q, in.shared.k, in.shared.g, in.shared.beta);
      c.v = device_ptr(in.v.data);
      c.cw = cw, c.cr = cr, c.meta = meta;
      auto* seg_chunk = static_cast<index_t*>(at(at_segc));
      auto* chunk_seg = static_cast<int*>(at(at_cseg));
      auto* rec_tok = static_cast<int*>(at(at_rtok));
      build_records(pb, rplan, chunk_len, seq, meta, rplan.flag_count ? static_cast<int*>(at(at_flags)) : nullptr, seg_chunk,
                    chunk_seg, rec_tok, stream, scratch_pool(api), api);
      c.rt = record_table{chunk_len, c.S, c.P, seg_chunk, chunk_seg, rec_tok, rplan.max_chunks};
      c.state_in = state_in, c.state_out = state_out;
      c.hbuf = chain ? nullptr : static_cast<float*>(at(at_hbuf)), c.gbuf = static_cast<float*>(at(at_gbuf));
      c.qbuf = static_cast<state_op_t<Dev>*>(at(at_qbuf)), c.abuf = static_cast<Dev*>(at(at_abuf));
      c.kbuf = kt_needed ? static_cast<Dev*>(at(at_kbuf)) : nullptr;
      c.vbuf = v_copy ? static_cast<Dev*>(at(at_vbuf)) : nullptr;
      c.seq = seq;
      if (diag_chunked && h16) c.hsbuf = static_cast<state_op_t<Dev>*>(at(at_hsbuf));
      if constexpr (keeps_operands<D, Dev>)
        if (keeping) {  // K̃ and Γ are written too (the backward reads them)
          const int KP = chunk_kp(c.K);
          const std::size_t chunk_heads = n_chunks * static_cast<std::size_t>(pb.HV);
          unsigned char* kept = kept_storage(*keep, chunk_heads * kept_bytes<D>(KP, c.K, c.V), stream, api);
          bind_kept<D>(c, kept, chunk_heads, KP, c.K, c.V);
        }
      c.o = device_ptr(o), c.o_part = o_part;
      if constexpr (is_delta<D>) {
        delta_params<Dev> d;
        static_cast<chunk_params<Dev>&>(d) = c;
        d.l2norm = D::l2norm_qk;
        bind_delta_buffers(d, static_cast<float*>(at(at_delta)), rplan.max_chunks, pb.HV, pb.K, pb.V, false);
        d.carry = carry_scratch ? static_cast<float*>(at(at_carry)) : nullptr;
        enqueue_delta_forward<D>(d, stream, api);  // tensor cores for bf16 (chunked_delta_tc.cuh)
      } else {
        enqueue_chunked<D, Dev>(c, stream, api);
        if (keeping) detail::saved_states_access::record(*keep, variant, pb, in, chunk_len, /*on_device=*/true);
      }
    } else {
      recurrent_params<Dev> p;
      p.T = pb.T, p.H = static_cast<int>(pb.H), p.HV = static_cast<int>(pb.HV), p.K = static_cast<int>(pb.K);
      p.V = static_cast<int>(pb.V), p.N = static_cast<int>(pb.N), p.P = static_cast<int>(pb.P), p.R = R_read;
      p.shared = pb.shared, p.l2norm = D::l2norm_qk, p.in_place = in_place, p.compact = compact, p.scale = pb.scale;
      p.seq = seq;
      p.main = source_of(in.q, in.k, in.g, in.beta);
      p.shr = source_of(in.shared.q, in.shared.k, in.shared.g, in.shared.beta);
      p.v = device_ptr(in.v.data);
      p.cw = cw, p.cr = cr, p.meta = meta;
      p.state_in = state_in, p.state_out = state_out;
      p.o = device_ptr(o), p.o_part = o_part;

      const index_t tasks = pb.S * pb.HV;
      // the fused decode step's parameters, V split into tiles of `cols` columns (the streamed and the
      // fused kernels differ only in their tile width)
      auto step_params = [&](int cols) {
        decode_params<R, Dev> dp;
        dp.r = p;
        if constexpr (R::routes) {
          dp.cfg.value = pb.rcfg();
          dp.logits = device_ptr(in.router_logits.data);
          dp.params = in.router_params.data;
        }
        dp.groups = decode_groups;
        dp.vtiles = static_cast<int>((pb.V + cols - 1) / cols);
        dp.tasks = tasks;
        return dp;
      };
      if constexpr (is_diagonal<D>)
        if (split) {
          if (tasks == 0) return;
          launch_decode_split<D, R, Dev, NC>(step_params(tile_v), decode_split_shape(rec_warps), R::routes ? static_cast<int>(pb.N) : 0,
                                         stream, api);
          return;  // the scratch (cu_seqlens) is released with cudaFreeAsync, ordered after the kernel
        }
      if constexpr (is_diagonal<D>)
        if (streamed) {
          if (tasks == 0) return;
          launch_decode_stream<D, R, Dev, NC>(step_params(stream_cols), rec_warps, R::routes ? static_cast<int>(pb.N) : 0, stream, api);
          return;  // the scratch (cu_seqlens) is released with cudaFreeAsync, ordered after the kernel
        }
      if (fused) {
        if (tasks == 0) return;
        const decode_params<R, Dev> dp = step_params(tile_v);
        const std::size_t smem = decode_smem_bytes(decode_groups, rec_warps, R::routes ? static_cast<int>(pb.N) : 0);
        const dim3 grid(static_cast<unsigned>(tasks * dp.vtiles)), block(static_cast<unsigned>(32 * rec_warps * decode_groups));
        if (pb.K == 128 && pb.V == 128) decode_kernel<D, R, Dev, 128><<<grid, block, smem, stream>>>(dp);
        else decode_kernel<D, R, Dev, 0><<<grid, block, smem, stream>>>(dp);
        check_launch("decode_kernel", api);
        return;  // the scratch (cu_seqlens) is released with cudaFreeAsync, ordered after the kernel
      }
      if (tasks > 0) {
        const int warps = rec_warps;
        const index_t touched = compact ? (pb.shared ? 1 : 0) + std::max(pb.kw, pb.kr) : pb.P;
        const dim3 grid(static_cast<unsigned>(tasks), static_cast<unsigned>(touched),
                        static_cast<unsigned>((pb.V + tile_v - 1) / tile_v));
        const dim3 block(static_cast<unsigned>(32 * warps));
        const std::size_t smem = recurrent_smem_bytes(warps);
        recurrent_kernel<D, Dev><<<grid, block, smem, stream>>>(p);
        check_launch("recurrent_kernel", api);
      }
    }
  }

  if (n_part) {
    constexpr int threads = 256;
    const index_t rows = tokens * pb.HV, total = rows * pb.V;
    if (pb.V % 4 == 0 && reinterpret_cast<std::uintptr_t>(o_part) % 16 == 0) {
      combine4_kernel<Dev><<<static_cast<unsigned>((total / 4 + threads - 1) / threads), threads, 0, stream>>>(
          o_part, device_ptr(o), rows, R_read, static_cast<int>(pb.V), static_cast<int>(pb.HV), meta, static_cast<int>(pb.N));
      check_launch("combine4_kernel", api);
    } else {
      combine_kernel<Dev><<<static_cast<unsigned>((total + threads - 1) / threads), threads, 0, stream>>>(
          o_part, device_ptr(o), rows, R_read, static_cast<int>(pb.V), static_cast<int>(pb.HV), meta, static_cast<int>(pb.N));
      check_launch("combine_kernel", api);
    }
  }
  // the scratch memory is released here with cudaFreeAsync, ordered after the kernels
}

template <class Spec, class Algorithm, class Strategy, InputScalar Scalar>
void forward_impl(const cuda& be, const inputs<Scalar>& in, const outputs<Scalar>& out, const options& opt, saved_states* keep) {
  static_assert(detail::validate_call<Spec, Algorithm, Strategy>());
  const char* api = "linstate::forward (cuda)";
  static const std::string api_s = api;  // one string for every check of every call
  using D = typename Spec::decay;
  const auto pb = detail::make_problem<Spec>(api_s, in, out.o, out.final_state, "final_state", opt,
                                             /*o_given=*/true, /*host_data=*/false);
  detail::check_no_alias(api_s, in, out, "final_state");
  require_device_inputs(api_s, in);
  require_device(api_s, "o", out.o), require_device(api_s, "final_state", out.final_state);
  require_supported(api_s, pb);
  if constexpr (is_generic<D>) require_generic_supported(api_s, pb, /*backward=*/false);
  run<D, route_static_n<Spec>>(be, pb, in, in.initial_state.data, out.final_state.data, /*in_place=*/false, out.o.data, api,
         wants_chunked<Algorithm, D>(pb), keep, detail::saved_states_access::tag<Spec>());
}

template <class Spec, class Algorithm = automatic, class Strategy = varlen, InputScalar Scalar>
void forward(const cuda& be, const inputs<Scalar>& in, const outputs<Scalar>& out, Algorithm = {}, Strategy = {},
             const options& opt = {}) {
  forward_impl<Spec, Algorithm, Strategy>(be, in, out, opt, nullptr);
}

//! The forward that keeps, in `keep`, what the backward of the same inputs would recompute (saved_states).
template <class Spec, class Algorithm = automatic, class Strategy = varlen, InputScalar Scalar>
void forward(const cuda& be, const inputs<Scalar>& in, const outputs<Scalar>& out, saved_states& keep, Algorithm = {},
             Strategy = {}, const options& opt = {}) {
  forward_impl<Spec, Algorithm, Strategy>(be, in, out, opt, &keep);
}

}  // namespace cuda_detail

//! \brief Forward pass of variant `Spec` on the GPU: `linstate::forward<Spec>(linstate::cuda{stream},
//! in, out[, saved][, algorithm[, strategy[, options]]])`, the arguments of the CPU overload with device
//! pointers (cu_seqlens stays a host span). Reads `in`, writes `out.o` `[B,T,HV,V]` and, when given,
//! `out.final_state` `[S,P,HV,K,V]` fp32, on `be.stream`, without synchronising (see the top of
//! this header). Throws linstate::error on bad input before anything is launched. With a
//! linstate::saved_states `saved`, a bf16 chunked forward of the diagonal family (GLA, retention, linear
//! attention, SSE over them) also keeps the operands its backward would recompute (saved_states.hpp: what,
//! and its memory), and linstate::backward(…, saved, …) on the same stream reads them.
//!
//! (It takes its arguments as a pack and forwards them to cuda_detail::forward, whose signature is
//! the documented one, so that it wins overload resolution against forward.hpp's "header not
//! included" catch-all; pass the options as `linstate::options{...}`, not as a bare braced list.)
template <class Spec, class... Args>
void forward(const cuda& be, Args&&... args) {
  cuda_detail::forward<Spec>(be, std::forward<Args>(args)...);
}

//! \brief Forward pass that updates `state` `[S,P,HV,K,V]` (device, fp32) in place: the initial state
//! on entry, the final state when the stream has run the call. The decode API: with T = 1 it reads
//! and writes only the shared partition and the selected partitions' states (SPEC §11 C8); every
//! other partition is not accessed at all. `in.initial_state` must be empty.
template <class Spec, class Algorithm = automatic, class Strategy = varlen, InputScalar Scalar>
void forward_in_place(const cuda& be, const inputs<Scalar>& in, const tensor_view<float>& state,
                      const tensor_view<Scalar>& o, Algorithm = {}, Strategy = {}, const options& opt = {}) {
  static_assert(detail::validate_call<Spec, Algorithm, Strategy>());
  const char* api = "linstate::forward_in_place (cuda)";
  // one string for every check of every call (each const char* → std::string argument was a heap
  // allocation per check on the decode path)
  static const std::string api_s = api;
  if (!in.initial_state.empty())
    detail::fail(api, "in.initial_state must be empty: the state argument is both the initial and the final state");
  if (state.empty()) detail::fail(api, "state is required: [S,P,HV,K,V] fp32");
  using D = typename Spec::decay;
  const auto pb = detail::make_problem<Spec>(api_s, in, o, state, "state", opt, /*o_given=*/true, /*host_data=*/false);
  detail::check_no_alias(api_s, in, outputs<Scalar>{o, state}, "state");
  cuda_detail::require_device_inputs(api_s, in);
  cuda_detail::require_device(api_s, "o", o), cuda_detail::require_device(api_s, "state", state);
  cuda_detail::require_supported(api_s, pb);
  if constexpr (cuda_detail::is_generic<D>) cuda_detail::require_generic_supported(api_s, pb, /*backward=*/false);
  cuda_detail::run<D, cuda_detail::route_static_n<Spec>>(be, pb, in, state.data, state.data, /*in_place=*/true, o.data, api,
                      cuda_detail::wants_chunked<Algorithm, D>(pb));
}

//! \brief The state shape `[S, P, HV, K, V]` variant `Spec` uses for these (device) inputs; checks
//! their shapes without reading device memory.
template <class Spec, InputScalar Scalar>
shape_t state_shape(const cuda&, const inputs<Scalar>& in, const options& opt = {}) {
  static_assert(detail::validate<Spec>());
  return detail::make_problem<Spec>("linstate::state_shape (cuda)", in, tensor_view<Scalar>{}, tensor_view<float>{}, "state",
                                    opt, /*o_given=*/false, /*host_data=*/false)
      .state_shape();
}

//! \brief Throws linstate::error, naming the token and partition, if device `router_logits` `[B,T,N]`
//! hold a NaN or ±inf. Unlike forward(), this SYNCHRONISES with `be.stream` (it reads the answer
//! back): call it where an exception is worth a round trip (tests, debugging, a training step's
//! guard). forward() itself never stops on such logits: see the top of this header.
template <InputScalar Scalar>
void check_router_logits(const cuda& be, const tensor_view<const Scalar>& router_logits) {
  const char* api = "linstate::check_router_logits";
  if (router_logits.empty() || router_logits.numel() == 0) return;
  if (router_logits.rank() != 3) detail::fail(api, "router_logits has shape " + router_logits.shape.str() + " but must be [B,T,N]");
  cuda_detail::require_device(api, "router_logits", router_logits);
  const cudaStream_t stream = cuda_detail::stream_of(be);
  const index_t numel = router_logits.numel();
  unsigned long long first = static_cast<unsigned long long>(numel);
  device_buffer<unsigned long long> d_first(1, stream);
  cuda_detail::check(cudaMemcpyAsync(d_first.data(), &first, sizeof first, cudaMemcpyHostToDevice, stream),
                     "cudaMemcpyAsync", api);
  constexpr int threads = 256;
  cuda_detail::nonfinite_kernel<<<static_cast<unsigned>((numel + threads - 1) / threads), threads, 0, stream>>>(
      cuda_detail::device_ptr(router_logits.data), numel, d_first.data());
  cuda_detail::check_launch("nonfinite_kernel", api);
  cuda_detail::check(cudaMemcpyAsync(&first, d_first.data(), sizeof first, cudaMemcpyDeviceToHost, stream),
                     "cudaMemcpyAsync", api);
  cuda_detail::check(cudaStreamSynchronize(stream), "cudaStreamSynchronize", api);
  if (first < static_cast<unsigned long long>(numel)) {
    const index_t N = router_logits.size(2), i = static_cast<index_t>(first);
    detail::fail(api, "router_logits " + router_logits.shape.str() + " holds a non-finite value at token " +
                          std::to_string(i / N) + ", partition " + std::to_string(i % N));
  }
}

}  // namespace linstate
