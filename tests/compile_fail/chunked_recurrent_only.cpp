// expect: static assertion failed.*linstate: chunked<C> needs a chunk-parallel family \(diagonal or delta\), but the decay policy is family::recurrent_only
// SPDX-License-Identifier: Apache-2.0
// A recurrent_only transition asked for the chunk-parallel algorithm.
#include <linstate/linstate.hpp>

namespace ls = linstate;
struct halving : ls::diagonal_transition<ls::gate_extent::none> {
  using family = ls::family::recurrent_only;  // same math as decay::none, but declared recurrent only
  static constexpr const char* name = "decay::halving";
};

struct my_variant : ls::spec<> {
  using decay = halving;
};

void run(const ls::inputs<float>& in, const ls::outputs<float>& out) {
  ls::forward<my_variant>(ls::cpu{}, in, out, ls::chunked<64>{});
}
