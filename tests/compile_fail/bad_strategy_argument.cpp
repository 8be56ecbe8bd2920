// expect: static assertion failed.*linstate: the strategy argument must be linstate::mask\{\} or linstate::varlen\{\}
// SPDX-License-Identifier: Apache-2.0
// Only mask and varlen are SSE strategies (SPEC §4.5, §4.7); an algorithm in the strategy position is rejected.
#include <linstate/linstate.hpp>

struct sse_n4k1 : linstate::spec<> {
  using partition = linstate::partition::routed<4>;
  using router = linstate::router::top_k<1>;
};

void run(const linstate::inputs<float>& in, const linstate::outputs<float>& out) {
  linstate::forward<sse_n4k1>(linstate::cpu{}, in, out, linstate::recurrent{}, linstate::chunked<64>{});
}
