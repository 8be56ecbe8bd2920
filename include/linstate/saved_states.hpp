// linstate/saved_states.hpp — what a chunked forward call keeps for the backward of the same inputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "tensor.hpp"

namespace linstate {

namespace detail {
struct saved_states_access;
}

//! \brief What a chunked forward call keeps for the backward of the same inputs (the save-for-backward
//! choice of a training step; fla's checkpoint choice between keeping the chunk states and recomputing
//! them): on the CPU the state entering every chunk, on the GPU the forward's per-chunk operands.
//!
//! Without it, linstate::backward recomputes these from the inputs before its reverse pass (a forward pass
//! over the chunks without outputs: about a fifth of the backward's time for GLA on the CPU, and on the
//! GPU the forward's intra-chunk and scan kernels, about a sixth of a bf16 GLA training step at T = 32768).
//! With it, the forward writes them as it runs, and the backward reads them instead. The gradients are the
//! same bits either way: the recomputation runs the forward's own kernels (tested:
//! tests/variants/test_saved_states.cpp, and cuda/tests/test_cuda_backward.cu's "saved_states" cases).
//!
//! What is kept, and its memory (held until the object is destroyed or release()d; a later forward into the
//! same object reuses the storage, so a training step whose shapes repeat allocates nothing):
//! - **CPU** (linstate::cpu): the chunked forward (linstate::chunked<C>, or linstate::automatic when it
//!   chooses chunks) of the diagonal family (GLA, retention, linear attention) with one partition that
//!   every token reads and writes (no router) keeps one fp32 K×V state per chunk of every (sequence, value
//!   head) stream: HV·K·V·4 / C bytes per token — 8 KiB per token at HV = 8, K = V = 128, C = 64 (32 MiB at
//!   T = 4096), half the size of q, k, v and g together.
//! - **GPU** (linstate::cuda, <linstate/cuda/forward.cuh>): the chunked forward of the diagonal family with
//!   bf16 inputs — every partition, so SSE over GLA as well — keeps, per chunk of 64 tokens and value head,
//!   what the backward's first step would recompute: Q̃ = q ⊙ e^{Γ} and K̃ = w k ⊙ e^{γ−Γ} (bf16, [64, KP]),
//!   the intra-chunk scores A (bf16, [64, 64]), Γ (fp32, [64, KP]), e^{γ} (fp32, [K]) and the state H_c
//!   (bf16, [K, V]); KP = 64 for K ≤ 64, else 128. At HV = 8, K = V = 128: 104.5 KiB per chunk and head,
//!   13 KiB per token (428 MB at T = 32768), in one device allocation.
//! Other calls (recurrent, the delta rule, fp32 and fp16 inputs on the GPU, SSE's routed partitions on the
//! CPU, policies without a chunked form) keep nothing: empty() is then true after the forward and the
//! backward recomputes, as without the object.
//!
//! Validity: the backward must be given the inputs of the forward that filled the object (the same
//! tensors, unchanged) on the same backend, and on the GPU run on the same stream after it (or after a
//! synchronisation). It checks the backend, variant, algorithm, shapes, sequence offsets, scale and the
//! inputs' addresses, and throws linstate::error on a mismatch; it cannot see values that changed in place.
//! \code
//!   linstate::saved_states saved;                       // one per layer, kept across training steps
//!   linstate::forward<gla>(linstate::cpu{}, in, {o.view(), ht.view()}, saved, linstate::chunked<64>{});
//!   // ... the loss, ∂L/∂o ...
//!   linstate::backward<gla>(linstate::cpu{}, in, {.o = dO.view()}, grads, saved, linstate::chunked<64>{});
//!   // the same on the GPU: linstate::cuda{stream} and device tensors (bf16 inputs keep)
//! \endcode
class saved_states {
 public:
  //! Whether nothing is held (never filled, released, or the last forward's call keeps nothing).
  bool empty() const { return !valid_; }
  //! Bytes held, host and device (the storage's capacity, whether or not the last forward filled it).
  std::size_t bytes() const { return data_.capacity() * sizeof(float) + device_bytes_; }
  //! Bytes of device memory held (a GPU forward's storage; 0 on the CPU).
  std::size_t device_bytes() const { return device_bytes_; }
  //! Forgets what is kept and frees its storage (a device allocation with cudaFree).
  void release() {
    valid_ = false;
    std::vector<float>().swap(data_);
    std::vector<index_t>().swap(seq_);
    std::vector<index_t>().swap(base_);
    device_.reset();
    device_bytes_ = 0;
  }

 private:
  friend struct detail::saved_states_access;
  std::vector<float> data_;     // CPU: [Σ_s ⌈len_s / C⌉, HV, V, K] (sequence after sequence; per head its chunks; Hᵀ)
  std::shared_ptr<void> device_;  // GPU: the forward's operands (the CUDA backend allocates and frees it), or null
  std::size_t device_bytes_ = 0;
  std::vector<index_t> seq_;    // [S+1] the forward's sequence offsets
  std::vector<index_t> base_;   // [S+1] chunks of the sequences before s (Σ_{s' < s} ⌈len_s' / C⌉)
  const void* variant_ = nullptr;  // the variant's tag (detail::saved_states_access::tag<Spec>)
  const void* q_ = nullptr;     // the forward's input addresses
  const void* k_ = nullptr;
  const void* v_ = nullptr;
  const void* g_ = nullptr;
  const void* beta_ = nullptr;
  const void* sq_ = nullptr;    // the shared partition's q, k, g, beta
  const void* sk_ = nullptr;
  const void* sg_ = nullptr;
  const void* sbeta_ = nullptr;
  const void* logits_ = nullptr;
  const void* h0_ = nullptr;
  index_t chunk_ = 0, HV_ = 0, K_ = 0, V_ = 0, T_ = 0, B_ = 0;
  double scale_ = 0;
  bool on_device_ = false;      // filled by a GPU forward
  bool valid_ = false;
};

}  // namespace linstate
