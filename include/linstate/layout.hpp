// linstate/layout.hpp — converters between linstate's canonical state layout and the two layouts of
// the SSE authors' code (SPEC §4.10, §11 C5), for interop with checkpoints and caches made there.
//
// canonical (every linstate algorithm, strategy and backend):  [S, P, HV, K, V], P = 1 + N with the
//   shared partition first (partition 1+n = routed n);
// authors' mask path:    [S, (N+1)·HV, K, V], head p·HV + hv  — the same bytes as canonical;
// authors' varlen path:  [S·(N+1), HV, K, V], row s = shared state of sequence s,
//                        row S + s·N + n = routed partition n of sequence s.
// \code
//   linstate::tensor<float> cache = linstate::layout::to_varlen(state);   // [S,P,HV,K,V] → [S·P,HV,K,V]
//   linstate::tensor<float> back  = linstate::layout::from_varlen(cache, S);
// \endcode
#pragma once

#include <algorithm>
#include <string>

#include "tensor.hpp"

namespace linstate::layout {

namespace detail {
inline void require_canonical(const shape_t& s, const char* api) {
  if (s.rank() != 5 || s[1] < 2)
    throw error(std::string(api) + ": state has shape " + s.str() +
                " but must be the canonical [S,P,HV,K,V] with a shared partition (P = N + 1 >= 2)");
}
}  // namespace detail

//! Canonical → the authors' mask layout `[S, (N+1)·HV, K, V]` (a reshape: the bytes are identical).
inline tensor<float> to_mask(const tensor_view<const float>& state) {
  detail::require_canonical(state.shape, "linstate::layout::to_mask");
  const shape_t& s = state.shape;
  return tensor<float>({s[0], s[1] * s[2], s[3], s[4]}, std::vector<float>(state.data, state.data + state.numel()));
}

//! The authors' mask layout `[S, (N+1)·HV, K, V]` → canonical `[S, N+1, HV, K, V]`.
inline tensor<float> from_mask(const tensor_view<const float>& cache, index_t num_value_heads) {
  const shape_t& s = cache.shape;
  if (s.rank() != 4 || num_value_heads < 1 || s[1] % num_value_heads != 0 || s[1] / num_value_heads < 2)
    throw error("linstate::layout::from_mask: cache has shape " + s.str() + " but must be [S,(N+1)*HV,K,V] with HV = " +
                std::to_string(num_value_heads));
  return tensor<float>({s[0], s[1] / num_value_heads, num_value_heads, s[2], s[3]},
                       std::vector<float>(cache.data, cache.data + cache.numel()));
}

//! Canonical `[S, N+1, HV, K, V]` → the authors' varlen layout `[S·(N+1), HV, K, V]`.
inline tensor<float> to_varlen(const tensor_view<const float>& state) {
  detail::require_canonical(state.shape, "linstate::layout::to_varlen");
  const shape_t& s = state.shape;
  const index_t S = s[0], P = s[1], N = P - 1, block = s[2] * s[3] * s[4];
  tensor<float> out({S * P, s[2], s[3], s[4]});
  for (index_t q = 0; q < S; ++q)
    for (index_t p = 0; p < P; ++p) {
      const index_t row = p == 0 ? q : S + q * N + (p - 1);
      std::copy_n(state.data + (q * P + p) * block, block, out.data() + row * block);
    }
  return out;
}

//! The authors' varlen layout `[S·(N+1), HV, K, V]` → canonical `[S, N+1, HV, K, V]`.
inline tensor<float> from_varlen(const tensor_view<const float>& cache, index_t num_sequences) {
  const shape_t& s = cache.shape;
  if (s.rank() != 4 || num_sequences < 1 || s[0] % num_sequences != 0 || s[0] / num_sequences < 2)
    throw error("linstate::layout::from_varlen: cache has shape " + s.str() + " but must be [S*(N+1),HV,K,V] with S = " +
                std::to_string(num_sequences));
  const index_t S = num_sequences, P = s[0] / S, N = P - 1, block = s[1] * s[2] * s[3];
  tensor<float> out({S, P, s[1], s[2], s[3]});
  for (index_t q = 0; q < S; ++q)
    for (index_t p = 0; p < P; ++p) {
      const index_t row = p == 0 ? q : S + q * N + (p - 1);
      std::copy_n(cache.data + row * block, block, out.data() + (q * P + p) * block);
    }
  return out;
}

}  // namespace linstate::layout
