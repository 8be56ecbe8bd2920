// expect: static assertion failed.*linstate: router::top_k selects partitions per token, but partition::single has one state
// SPDX-License-Identifier: Apache-2.0
// A top-k router needs routed partitions to choose from (SPEC §4.4, §5); the default partition is single.
#include <linstate/linstate.hpp>

struct gla_topk : linstate::spec<> {
  using router = linstate::router::top_k<1>;
};

void run(const linstate::inputs<float>& in) {
  auto r = linstate::forward<gla_topk>(linstate::cpu{}, in);  // the allocating overload validates too
  (void)r;
}
