// linstate/saved_states.hpp — what a chunked forward call keeps for the backward of the same inputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tensor.hpp"

namespace linstate {

namespace detail {
struct saved_states_access;
}

//! \brief The state entering every chunk of a chunked forward call, kept for the backward of the same
//! inputs (the save-for-backward choice of a training step; fla's checkpoint choice between keeping the
//! chunk states and recomputing them).
//!
//! Without it, linstate::backward recomputes these states from the inputs before its reverse pass (a
//! forward pass over the chunks without outputs: about a fifth of the backward's time for GLA on the
//! CPU). With it, the forward copies each chunk's entering state as it runs, and the backward reads them
//! instead. The gradients are the same bits either way: the recomputation runs the forward's own state
//! update (tested: tests/variants/test_saved_states.cpp).
//!
//! Memory: one fp32 K×V state per chunk of every (sequence, value head) stream, HV·K·V·4 / C bytes per
//! token — 8 KiB per token at HV = 8, K = V = 128, C = 64 (32 MiB at T = 4096), half the size of q, k, v
//! and g together. Held until the object is destroyed or release()d; a later forward into the same
//! object reuses its storage (a training step whose shapes repeat allocates nothing).
//!
//! Kept by: the CPU backend's chunked forward (linstate::chunked<C>, or linstate::automatic when it
//! chooses chunks) of the diagonal family (GLA, retention, linear attention) with one partition that
//! every token reads and writes (no router). Other calls (recurrent, the delta rule, SSE's routed
//! partitions, policies without a chunked form) keep nothing: empty() is then true after the forward and
//! the backward recomputes, as without the object.
//!
//! Validity: the backward must be given the inputs of the forward that filled the object (the same
//! tensors, unchanged). It checks the variant, algorithm, shapes, sequence offsets and the inputs'
//! addresses, and throws linstate::error on a mismatch; it cannot see values that changed in place.
//! \code
//!   linstate::saved_states saved;                       // one per layer, kept across training steps
//!   linstate::forward<gla>(linstate::cpu{}, in, {o.view(), ht.view()}, saved, linstate::chunked<64>{});
//!   // ... the loss, ∂L/∂o ...
//!   linstate::backward<gla>(linstate::cpu{}, in, {.o = dO.view()}, grads, saved, linstate::chunked<64>{});
//! \endcode
class saved_states {
 public:
  //! Whether nothing is held (never filled, released, or the last forward's call keeps nothing).
  bool empty() const { return !valid_; }
  //! Bytes of state held (the storage's capacity, whether or not the last forward filled it).
  std::size_t bytes() const { return data_.capacity() * sizeof(float); }
  //! Forgets the kept states and frees their storage.
  void release() {
    valid_ = false;
    std::vector<float>().swap(data_);
    std::vector<index_t>().swap(seq_);
    std::vector<index_t>().swap(base_);
  }

 private:
  friend struct detail::saved_states_access;
  std::vector<float> data_;     // [Σ_s ⌈len_s / C⌉, HV, V, K] (sequence after sequence; per head its chunks; Hᵀ)
  std::vector<index_t> seq_;    // [S+1] the forward's sequence offsets
  std::vector<index_t> base_;   // [S+1] chunks of the sequences before s (Σ_{s' < s} ⌈len_s' / C⌉)
  const void* variant_ = nullptr;  // the variant's tag (detail::saved_states_access::tag<Spec>)
  const void* q_ = nullptr;     // the forward's input addresses
  const void* k_ = nullptr;
  const void* v_ = nullptr;
  const void* g_ = nullptr;
  const void* h0_ = nullptr;
  index_t chunk_ = 0, HV_ = 0, K_ = 0, V_ = 0, T_ = 0, B_ = 0;
  bool valid_ = false;
};

}  // namespace linstate
