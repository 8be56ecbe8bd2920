// expect: static assertion failed.*linstate: router::top_k<NumWriter> needs NumWriter >= 1
// SPDX-License-Identifier: Apache-2.0
// A router that writes no partition would leave every routed state frozen forever (SPEC §4.4).
#include <linstate/linstate.hpp>

struct sse_n4k0 : linstate::spec<> {
  using partition = linstate::partition::routed<4>;
  using router = linstate::router::top_k<0>;
};

void run(const linstate::inputs<float>& in, const linstate::outputs<float>& out) {
  linstate::forward<sse_n4k0>(linstate::cpu{}, in, out);
}
