// expect: static assertion failed.*linstate: the router slot does not model linstate::Router
// SPDX-License-Identifier: Apache-2.0
// Every slot is there, but the router slot holds a partition policy (a slip when editing a spec).
#include <linstate/linstate.hpp>

struct swapped : linstate::spec<> {
  using router = linstate::partition::routed<4>;
};

void run(const linstate::inputs<float>& in, const linstate::outputs<float>& out) {
  linstate::forward<swapped>(linstate::cpu{}, in, out);
}
