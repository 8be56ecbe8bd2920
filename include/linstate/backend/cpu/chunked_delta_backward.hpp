// linstate/backend/cpu/chunked_delta_backward.hpp — chunk-parallel backward of the gated delta rule
// (SPEC §3.2, WY form).
//
// STUB: until the chunked formulas land, this runs the recurrent backward with checkpoints every
// C steps (same results, same memory bound).
#pragma once

#include "backward_kernels.hpp"

namespace linstate::cpu_detail {

struct delta_bwd_scratch {
  recurrent_bwd_scratch rec;
  void reserve(index_t C, index_t K, index_t V) { rec.reserve(K, V, C); }
};

template <class Scalar>
void run_chunked_delta_backward(const problem& pb, const source<Scalar>& src, const stream& st,
                                const bwd_target<Scalar>& tg, index_t C, delta_bwd_scratch& sc) {
  run_recurrent_backward<decay_kind::delta>(pb, src, st, tg, C, sc.rec);
}

}  // namespace linstate::cpu_detail
