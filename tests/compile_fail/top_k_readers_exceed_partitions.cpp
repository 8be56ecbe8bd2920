// expect: static assertion failed.*linstate: router::top_k<kw, kr> reads more partitions per token \(kr\) than partition::routed<N> has \(N\)
// SPDX-License-Identifier: Apache-2.0
// SPEC §11 C3: kw and kr are independent, but each must be <= N. Here kw = 1 is fine and kr = 5 > 4.
#include <linstate/linstate.hpp>

struct sse_n4w1r5 : linstate::spec<> {
  using partition = linstate::partition::routed<4, linstate::partition::shared>;
  using router = linstate::router::top_k<1, 5>;
};

void run(const linstate::inputs<float>& in, const linstate::outputs<float>& out) {
  linstate::forward<sse_n4w1r5>(linstate::cpu{}, in, out, linstate::recurrent{}, linstate::mask{});
}
