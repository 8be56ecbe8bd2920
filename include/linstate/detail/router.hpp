// linstate/detail/router.hpp — the building blocks routers are written with: softmax, top-k with the
// lowest-index tie rule, the routing flags. Host and device, any number type.
#pragma once

#include <cmath>
#include <cstdint>

#include "../config.hpp"

namespace linstate::detail {

//! Per-token routing flags.
enum : std::uint8_t { route_write = 1, route_read = 2 };

//! p = softmax(x) in T (max-subtracted), SPEC §4.4.
template <class T>
LINSTATE_HOST_DEVICE inline void softmax(const T* x, int n, T* p) {
  using std::exp;
  T m = x[0];
  LINSTATE_UNROLL
  for (int i = 1; i < n; ++i) m = x[i] > m ? x[i] : m;
  T s = T(0);
  LINSTATE_UNROLL
  for (int i = 0; i < n; ++i) {
    p[i] = exp(x[i] - m);
    s += p[i];
  }
  LINSTATE_UNROLL
  for (int i = 0; i < n; ++i) p[i] = p[i] / s;
}

//! True iff partition i is among the top-k of p under the lowest-index tie rule (SPEC §4.4, P8):
//! every value strictly above the k-th largest is taken, and among equal values the lowest indices
//! first. Equivalently: i is selected iff fewer than k partitions rank before it, where j ranks
//! before i when p[j] > p[i], or p[j] == p[i] and j < i.
template <class T>
LINSTATE_HOST_DEVICE inline bool in_top_k(const T* p, int n, int k, int i) {
  if (k >= n) return true;
  int before = 0;
  LINSTATE_UNROLL
  for (int j = 0; j < n; ++j) before += (p[j] > p[i]) || (p[j] == p[i] && j < i);
  return before < k;
}

//! dx = p ⊙ (dp − ⟨p, dp⟩): the backward of p = softmax(x), in T.
template <class T, class P>
LINSTATE_HOST_DEVICE inline void softmax_backward(const P* p, const T* dp, int n, T* dx) {
  T pdp = T(0);
  LINSTATE_UNROLL
  for (int i = 0; i < n; ++i) pdp += static_cast<T>(p[i]) * dp[i];
  LINSTATE_UNROLL
  for (int i = 0; i < n; ++i) dx[i] = static_cast<T>(p[i]) * (dp[i] - pdp);
}

}  // namespace linstate::detail
