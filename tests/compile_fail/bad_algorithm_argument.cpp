// expect: static assertion failed.*linstate: the algorithm argument must be linstate::recurrent\{\}, linstate::chunked<C>\{\} or linstate::automatic\{\}
// SPDX-License-Identifier: Apache-2.0
// The algorithm comes before the strategy; passing the strategy first is a likely slip.
#include <linstate/linstate.hpp>

struct sse_n4k1 : linstate::spec<> {
  using partition = linstate::partition::routed<4>;
  using router = linstate::router::top_k<1>;
};

void run(const linstate::inputs<float>& in, const linstate::outputs<float>& out) {
  linstate::forward<sse_n4k1>(linstate::cpu{}, in, out, linstate::mask{}, linstate::recurrent{});
}
