// expect: static assertion failed.*linstate: router::top_k<kw, kr> writes more partitions per token \(kw\) than partition::routed<N> has \(N\)
// SPDX-License-Identifier: Apache-2.0
// SPEC §4.4 / §11 C3: kw <= N. top_k<3> over routed<2> can never select 3 of 2 partitions.
#include <linstate/linstate.hpp>

struct sse_n2k3 : linstate::spec<> {
  using partition = linstate::partition::routed<2>;
  using router = linstate::router::top_k<3, 1>;  // kr is fine, kw is not
};

void run(const linstate::inputs<float>& in, const linstate::outputs<float>& out) {
  linstate::forward<sse_n2k3>(linstate::cpu{}, in, out);
}
