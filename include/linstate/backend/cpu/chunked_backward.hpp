// linstate/backend/cpu/chunked_backward.hpp — chunk-parallel backward of the gated family (none,
// scalar, diagonal decay; SPEC §2.4).
//
// STUB: until the chunked formulas land, this runs the recurrent backward with checkpoints every
// C steps (same results, same memory bound).
#pragma once

#include "backward_kernels.hpp"

namespace linstate::cpu_detail {

struct chunk_bwd_scratch {
  recurrent_bwd_scratch rec;
  void reserve(index_t C, index_t K, index_t V) { rec.reserve(K, V, C); }
};

template <decay_kind D, class Scalar>
void run_chunked_backward(const problem& pb, const source<Scalar>& src, const stream& st, const bwd_target<Scalar>& tg,
                          index_t C, chunk_bwd_scratch& sc) {
  run_recurrent_backward<D>(pb, src, st, tg, C, sc.rec);
}

}  // namespace linstate::cpu_detail
