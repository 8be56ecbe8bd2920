// linstate/cuda/detail/saved.cuh — what a bf16 chunked forward of the diagonal family keeps in a
// linstate::saved_states for its backward (the operands the backward's first step would recompute).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <type_traits>

#include <linstate/detail/problem.hpp>
#include <linstate/detail/saved_states.hpp>
#include <linstate/saved_states.hpp>

#include "../check.cuh"
#include "../kernels/chunked.cuh"

namespace linstate::cuda_detail {

//! Whether a forward of decay D with device scalar Dev keeps its operands for the backward: the diagonal
//! family with bf16 inputs (the backward's tensor-core kernels read them; fp32 and fp16 inputs take
//! chunk_grad_exact_kernel, which recomputes what it needs in fp32).
template <class D, class Dev>
inline constexpr bool keeps_operands = is_diagonal<D> && std::is_same_v<Dev, __nv_bfloat16>;

//! Whether the problem runs the chunked forward and the chunked bf16 backward (the calls that keep).
inline bool kept_supported(const detail::problem& pb) { return chunked_supported(pb) && pb.V <= bwd_chunk_max_v; }

//! Bytes kept per chunk and value head, in the order bind_kept lays them out: Q̃ and K̃ [C][KP] bf16, A
//! [C][C] bf16, Γ [gamma_floats(KP)] fp32, H_c [K][V] bf16, e^{γ} [K] fp32 (each part a multiple of 16
//! bytes but e^{γ}, which is last, so that H_c's rows are 16-byte aligned where V % 8 == 0).
template <class D>
std::size_t kept_bytes(int KP, int K, int V) {
  const std::size_t C = chunk_len;
  return 2 * C * KP * sizeof(__nv_bfloat16) + C * C * sizeof(__nv_bfloat16) + gamma_floats<D>(KP) * sizeof(float) +
         static_cast<std::size_t>(K) * V * sizeof(__nv_bfloat16) + static_cast<std::size_t>(K) * sizeof(float);
}

//! Points p's qbuf, kbuf, abuf, gambuf, hsbuf and gbuf into base (kept_bytes per chunk and value head for
//! chunk_heads = max_chunks · HV, 256-byte aligned base). The forward's chunk_intra_kernel writes Q̃, K̃, A,
//! Γ and e^{γ} there, its chunk_scan_kernel H_c; the backward reads them.
template <class D, class Params>
void bind_kept(Params& p, unsigned char* base, std::size_t chunk_heads, int KP, int K, int V) {
  using Op = __nv_bfloat16;
  static_assert(std::is_same_v<std::remove_pointer_t<decltype(p.abuf)>, Op>, "bind_kept: bf16 parameters");
  const std::size_t C = chunk_len;
  p.qbuf = reinterpret_cast<Op*>(base), base += chunk_heads * C * KP * sizeof(Op);
  p.kbuf = reinterpret_cast<Op*>(base), base += chunk_heads * C * KP * sizeof(Op);
  p.abuf = reinterpret_cast<Op*>(base), base += chunk_heads * C * C * sizeof(Op);
  p.gambuf = gamma_floats<D>(KP) > 0 ? reinterpret_cast<float*>(base) : nullptr;
  base += chunk_heads * gamma_floats<D>(KP) * sizeof(float);
  p.hsbuf = reinterpret_cast<Op*>(base), base += chunk_heads * static_cast<std::size_t>(K) * V * sizeof(Op);
  p.gbuf = reinterpret_cast<float*>(base);
}

//! The device storage of `s`, at least `bytes` long (grown with cudaMalloc, freed with cudaFree after the
//! stream's work where it grows; a repeated shape allocates nothing).
inline unsigned char* kept_storage(saved_states& s, std::size_t bytes, cudaStream_t stream, const char* api) {
  using sa = detail::saved_states_access;
  std::shared_ptr<void>& dev = sa::device(s);
  std::size_t& have = sa::device_bytes(s);
  if (!dev || have < bytes) {
    if (dev) check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (saved_states grows)", api);
    dev.reset();
    have = 0;
    void* ptr = nullptr;
    check(cudaMalloc(&ptr, bytes), "cudaMalloc (saved_states)", api);
    dev = std::shared_ptr<void>(ptr, [](void* x) { cudaFree(x); });
    have = bytes;
  }
  return static_cast<unsigned char*>(dev.get());
}

}  // namespace linstate::cuda_detail
