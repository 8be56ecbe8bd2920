// linstate/detail/router.hpp — softmax, top-k with the lowest-index tie rule (shared by all backends).
#pragma once

#include <cmath>
#include <cstdint>

#include "../config.hpp"

namespace linstate::detail {

//! Per-token routing flags.
enum : std::uint8_t { route_write = 1, route_read = 2 };

//! p = softmax(x) in fp32 (max-subtracted), SPEC §4.4.
LINSTATE_HOST_DEVICE inline void softmax(const float* x, int n, float* p) {
  float m = x[0];
  for (int i = 1; i < n; ++i) m = x[i] > m ? x[i] : m;
  float s = 0.f;
  for (int i = 0; i < n; ++i) {
    p[i] = std::exp(x[i] - m);
    s += p[i];
  }
  for (int i = 0; i < n; ++i) p[i] = p[i] / s;
}

//! True iff partition i is among the top-k of p under the lowest-index tie rule (SPEC §4.4, P8):
//! every value strictly above the k-th largest is taken, and among equal values the lowest indices
//! first. Equivalently: i is selected iff fewer than k partitions rank before it, where j ranks
//! before i when p[j] > p[i], or p[j] == p[i] and j < i.
LINSTATE_HOST_DEVICE inline bool in_top_k(const float* p, int n, int k, int i) {
  if (k >= n) return true;
  int before = 0;
  for (int j = 0; j < n; ++j) before += (p[j] > p[i]) || (p[j] == p[i] && j < i);
  return before < k;
}

}  // namespace linstate::detail
