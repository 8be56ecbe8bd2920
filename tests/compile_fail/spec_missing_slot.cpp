// expect: static assertion failed.*linstate: a variant needs the four slots state, decay, router and partition
// SPDX-License-Identifier: Apache-2.0
// A spec written by hand, not derived from linstate::spec<>, that forgets the router slot.
#include <linstate/linstate.hpp>

struct no_router {
  using state = linstate::state::dense<float>;
  using decay = linstate::decay::gated_key;
  using partition = linstate::partition::single;
};

void run(const linstate::inputs<float>& in, const linstate::outputs<float>& out) {
  linstate::forward<no_router>(linstate::cpu{}, in, out);
}
