// linstate/detail/saved_states.hpp — how the CPU drivers fill and read linstate::saved_states.
#pragma once

#include <algorithm>
#include <string>

#include "../io_types.hpp"
#include "../saved_states.hpp"
#include "problem.hpp"

namespace linstate::detail {

//! The layout of a saved_states object and the check that it belongs to a backward call's inputs.
struct saved_states_access {
  //! A distinct address per variant type.
  template <class Spec>
  static const void* tag() {
    static const char t = 0;
    return &t;
  }

  //! Forgets what `s` held (its storage stays for the next forward).
  static void invalidate(saved_states& s) { s.valid_ = false; }

  //! Sizes `s` for a forward call of variant tag `variant` with chunks of C and records the call; returns
  //! the storage [Σ_s ⌈len_s / C⌉, HV, V, K] (each state transposed). Grows only (a repeated shape allocates nothing).
  template <class Scalar>
  static float* prepare(saved_states& s, const void* variant, const problem& pb, const inputs<Scalar>& in, index_t C) {
    const index_t S = pb.S, KV = pb.K * pb.V;
    s.seq_.assign(pb.seq.begin(), pb.seq.end());
    s.base_.resize(static_cast<std::size_t>(S + 1));
    s.base_[0] = 0;
    for (index_t i = 0; i < S; ++i) {
      const index_t len = pb.seq[static_cast<std::size_t>(i + 1)] - pb.seq[static_cast<std::size_t>(i)];
      s.base_[static_cast<std::size_t>(i + 1)] = s.base_[static_cast<std::size_t>(i)] + (len + C - 1) / C;
    }
    const auto n = static_cast<std::size_t>(s.base_.back() * pb.HV * KV);
    if (s.data_.size() < n) s.data_.resize(n);
    s.variant_ = variant, s.q_ = in.q.data, s.k_ = in.k.data, s.v_ = in.v.data, s.g_ = in.g.data;
    s.h0_ = in.initial_state.data;
    s.chunk_ = C, s.HV_ = pb.HV, s.K_ = pb.K, s.V_ = pb.V, s.T_ = pb.T, s.B_ = pb.B;
    s.valid_ = true;
    return s.data_.data();
  }

  //! The states of stream (sequence s, value head hv) in storage `data` laid out for `saved`: [⌈len_s / C⌉, V, K].
  static index_t offset(const saved_states& saved, index_t s, index_t hv) {
    const index_t b0 = saved.base_[static_cast<std::size_t>(s)], b1 = saved.base_[static_cast<std::size_t>(s + 1)];
    return (b0 * saved.HV_ + hv * (b1 - b0)) * saved.K_ * saved.V_;
  }
  static const float* data(const saved_states& s) { return s.data_.data(); }

  //! The kept states for a backward call of variant tag `variant` with chunks of C on `in`, or null when
  //! `s` is empty (the backward then recomputes them). Throws linstate::error when `s` was filled by
  //! another call.
  template <class Scalar>
  static const float* check(const std::string& api, const saved_states& s, const void* variant, const problem& pb,
                            const inputs<Scalar>& in, index_t C) {
    if (!s.valid_) return nullptr;
    auto bad = [&](const std::string& what) {
      fail(api, "saved_states were kept by another forward call (" + what +
                    "); run linstate::forward with these inputs and this object first, or call backward without it "
                    "(it then recomputes the chunk states)");
    };
    if (s.variant_ != variant) bad("another variant");
    if (s.chunk_ != C) bad("chunks of " + std::to_string(s.chunk_) + " steps, this call's " + std::to_string(C));
    if (s.B_ != pb.B || s.T_ != pb.T || s.HV_ != pb.HV || s.K_ != pb.K || s.V_ != pb.V) bad("other shapes");
    if (s.seq_.size() != pb.seq.size() || !std::equal(s.seq_.begin(), s.seq_.end(), pb.seq.begin())) bad("other cu_seqlens");
    if (s.q_ != in.q.data || s.k_ != in.k.data || s.v_ != in.v.data || s.g_ != in.g.data || s.h0_ != in.initial_state.data)
      bad("inputs q, k, v, g or initial_state at other addresses");
    return s.data_.data();
  }
};

}  // namespace linstate::detail
