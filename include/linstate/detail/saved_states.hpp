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

  //! Records in `s` the forward call of variant tag `variant` with chunks of C on `in` (what check_call
  //! compares a backward call with), `on_device` when a GPU forward fills it; marks it valid.
  template <class Scalar>
  static void record(saved_states& s, const void* variant, const problem& pb, const inputs<Scalar>& in, index_t C, bool on_device) {
    const index_t S = pb.S;
    s.seq_.assign(pb.seq.begin(), pb.seq.end());
    s.base_.resize(static_cast<std::size_t>(S + 1));
    s.base_[0] = 0;
    for (index_t i = 0; i < S; ++i) {
      const index_t len = pb.seq[static_cast<std::size_t>(i + 1)] - pb.seq[static_cast<std::size_t>(i)];
      s.base_[static_cast<std::size_t>(i + 1)] = s.base_[static_cast<std::size_t>(i)] + (len + C - 1) / C;
    }
    s.variant_ = variant, s.q_ = in.q.data, s.k_ = in.k.data, s.v_ = in.v.data, s.g_ = in.g.data, s.beta_ = in.beta.data;
    s.sq_ = in.shared.q.data, s.sk_ = in.shared.k.data, s.sg_ = in.shared.g.data, s.sbeta_ = in.shared.beta.data;
    s.logits_ = in.router_logits.data, s.h0_ = in.initial_state.data;
    s.chunk_ = C, s.HV_ = pb.HV, s.K_ = pb.K, s.V_ = pb.V, s.T_ = pb.T, s.B_ = pb.B, s.scale_ = static_cast<double>(pb.scale);
    s.on_device_ = on_device;
    s.valid_ = true;
  }

  //! Sizes `s` for a CPU forward call of variant tag `variant` with chunks of C and records the call; returns
  //! the storage [Σ_s ⌈len_s / C⌉, HV, V, K] (each state transposed). Grows only (a repeated shape allocates nothing).
  template <class Scalar>
  static float* prepare(saved_states& s, const void* variant, const problem& pb, const inputs<Scalar>& in, index_t C) {
    record(s, variant, pb, in, C, /*on_device=*/false);
    const auto n = static_cast<std::size_t>(s.base_.back() * pb.HV * pb.K * pb.V);
    if (s.data_.size() < n) s.data_.resize(n);
    return s.data_.data();
  }

  //! The device storage of `s` (a GPU backend's): the allocation and its size in bytes.
  static std::shared_ptr<void>& device(saved_states& s) { return s.device_; }
  static std::size_t& device_bytes(saved_states& s) { return s.device_bytes_; }
  static const void* device_data(const saved_states& s) { return s.device_.get(); }

  //! The states of stream (sequence s, value head hv) in storage `data` laid out for `saved`: [⌈len_s / C⌉, V, K].
  static index_t offset(const saved_states& saved, index_t s, index_t hv) {
    const index_t b0 = saved.base_[static_cast<std::size_t>(s)], b1 = saved.base_[static_cast<std::size_t>(s + 1)];
    return (b0 * saved.HV_ + hv * (b1 - b0)) * saved.K_ * saved.V_;
  }
  static const float* data(const saved_states& s) { return s.data_.data(); }

  //! Whether `s` holds what a forward call kept for a backward call of variant tag `variant` with chunks
  //! of C on `in`, on the GPU (`on_device`) or the CPU: false when `s` is empty (the backward then
  //! recomputes). Throws linstate::error when `s` was filled by another call.
  template <class Scalar>
  static bool check_call(const std::string& api, const saved_states& s, const void* variant, const problem& pb,
                         const inputs<Scalar>& in, index_t C, bool on_device) {
    if (!s.valid_) return false;
    auto bad = [&](const std::string& what) {
      fail(api, "saved_states were kept by another forward call (" + what +
                    "); run linstate::forward with these inputs and this object first, or call backward without it "
                    "(it then recomputes what the forward kept)");
    };
    if (s.on_device_ != on_device) bad(s.on_device_ ? "on the GPU, this call runs on the CPU" : "on the CPU, this call runs on the GPU");
    if (s.variant_ != variant) bad("another variant");
    if (s.chunk_ != C) bad("chunks of " + std::to_string(s.chunk_) + " steps, this call's " + std::to_string(C));
    if (s.B_ != pb.B || s.T_ != pb.T || s.HV_ != pb.HV || s.K_ != pb.K || s.V_ != pb.V) bad("other shapes");
    if (s.seq_.size() != pb.seq.size() || !std::equal(s.seq_.begin(), s.seq_.end(), pb.seq.begin())) bad("other cu_seqlens");
    if (s.scale_ != static_cast<double>(pb.scale)) bad("another scale");
    if (s.q_ != in.q.data || s.k_ != in.k.data || s.v_ != in.v.data || s.g_ != in.g.data || s.beta_ != in.beta.data ||
        s.h0_ != in.initial_state.data)
      bad("inputs q, k, v, g, beta or initial_state at other addresses");
    if (s.sq_ != in.shared.q.data || s.sk_ != in.shared.k.data || s.sg_ != in.shared.g.data || s.sbeta_ != in.shared.beta.data ||
        s.logits_ != in.router_logits.data)
      bad("inputs shared.q, shared.k, shared.g, shared.beta or router_logits at other addresses");
    return true;
  }

  //! The kept states for a CPU backward call (check_call), or null when `s` is empty.
  template <class Scalar>
  static const float* check(const std::string& api, const saved_states& s, const void* variant, const problem& pb,
                            const inputs<Scalar>& in, index_t C) {
    return check_call(api, s, variant, pb, in, C, /*on_device=*/false) ? s.data_.data() : nullptr;
  }
};

}  // namespace linstate::detail
