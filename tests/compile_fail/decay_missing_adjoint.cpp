// expect: static assertion failed.*linstate: the decay policy has no `step_adjoint
// SPDX-License-Identifier: Apache-2.0
// A new transition with its forward math but no adjoint: the call names the missing member.
#include <linstate/linstate.hpp>

namespace ls = linstate;
struct half_decay {
  using family = ls::family::recurrent_only;
  static constexpr ls::gate_extent gate = ls::gate_extent::none;
  static constexpr bool uses_beta = false;
  static constexpr bool l2norm_qk = false;
  static constexpr const char* name = "decay::half";
  template <class T>
  static void step(const ls::token<T>& x, ls::index_t, T v, ls::column<T> s) {
    for (ls::index_t i = 0; i < x.K; ++i) s[i] = T(0.5) * s[i] + x.w * x.k[i] * v;
  }
};

struct my_variant : ls::spec<> {
  using decay = half_decay;
};

void run(const ls::inputs<float>& in, const ls::outputs<float>& out) {
  ls::forward<my_variant>(ls::cpu{}, in, out);
}
