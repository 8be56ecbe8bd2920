// expect: static assertion failed.*redefines one of write_strength / write_strength_backward
// SPDX-License-Identifier: Apache-2.0
// A delta-family policy that changes its write strength but inherits the adjoint of the shipped one
// (b = β·w): the kernels would differentiate the wrong function, so the call refuses it.
#include <linstate/linstate.hpp>

namespace ls = linstate;
struct squared_write : ls::delta_transition<true, squared_write> {
  static constexpr const char* name = "decay::squared_write";
  template <class T>
  LINSTATE_HOST_DEVICE static T write_strength(T beta, T w) {
    return beta * w * w;
  }
};

struct my_variant : ls::spec<> {
  using partition = ls::partition::routed<4, ls::partition::shared>;
  using router = ls::router::top_k<1>;
  using decay = squared_write;
};

void run(const ls::inputs<float>& in, const ls::outputs<float>& out) {
  ls::forward<my_variant>(ls::cpu{}, in, out);
}
