// expect: static assertion failed.*linstate: chunked<C> needs 1 <= C <= 1024
// SPDX-License-Identifier: Apache-2.0
// SPEC §2.3: chunks of C tokens; C = 0 is meaningless. (The brief also asked for "chunked<64> with the
// delta rule"; since the chunked WY form of the gated delta rule landed, that combination is legal and is
// compiled by control_compiles.cpp instead.)
#include <linstate/linstate.hpp>

struct gdn : linstate::spec<> {
  using decay = linstate::decay::gated_delta_rule<true>;
};

void run(const linstate::inputs<float>& in, const linstate::outputs<float>& out) {
  linstate::forward<gdn>(linstate::cpu{}, in, out, linstate::chunked<0>{});
}
