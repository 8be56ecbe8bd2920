// expect: static assertion failed.*linstate: the decay policy's `family` must be linstate::family::diagonal, family::delta or family::recurrent_only
// SPDX-License-Identifier: Apache-2.0
// A family no backend knows (here: a made-up tag) fails at the call instead of running some other kernel.
#include <linstate/linstate.hpp>

namespace ls = linstate;
struct my_family {};
struct my_decay : ls::decay::gated_key {
  using family = my_family;
};

struct my_variant : ls::spec<> {
  using decay = my_decay;
};

void run(const ls::inputs<float>& in, const ls::outputs<float>& out) {
  ls::forward<my_variant>(ls::cpu{}, in, out);
}
