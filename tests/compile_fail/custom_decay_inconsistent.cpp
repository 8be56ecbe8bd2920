// expect: static assertion failed.*linstate: a decay policy of kind diagonal takes a \[B,T,HV,K\] gate
// SPDX-License-Identifier: Apache-2.0
// A user-written decay policy that models linstate::Decay syntactically but declares a per-key
// (diagonal, SPEC §2.1) transition with a per-head gate tensor.
#include <linstate/linstate.hpp>

struct my_decay {
  static constexpr linstate::detail::decay_kind kind = linstate::detail::decay_kind::diagonal;
  static constexpr int gate_rank = 1;  // must be 2 for a diagonal decay
  static constexpr bool uses_beta = false;
  static constexpr bool l2norm_qk = false;
  static constexpr const char* name = "my_decay";
};
static_assert(linstate::Decay<my_decay>);  // the concept alone cannot see the inconsistency

struct my_variant : linstate::spec<> {
  using decay = my_decay;
};

void run(const linstate::inputs<float>& in, const linstate::outputs<float>& out) {
  linstate::forward<my_variant>(linstate::cpu{}, in, out);
}
