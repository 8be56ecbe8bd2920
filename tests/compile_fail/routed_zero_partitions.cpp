// expect: static assertion failed.*linstate: partition::routed<N> needs N >= 1
// SPDX-License-Identifier: Apache-2.0
// N = 0 routed partitions is meaningless (N = 1 is legal, SPEC §11 C3).
#include <linstate/linstate.hpp>

struct sse_n0 : linstate::spec<> {
  using partition = linstate::partition::routed<0>;
};

void run(const linstate::inputs<float>& in, const linstate::outputs<float>& out) {
  linstate::forward<sse_n0>(linstate::cpu{}, in, out);
}
