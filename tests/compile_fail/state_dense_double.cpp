// expect: static assertion failed.*linstate: state::dense<Acc> supports Acc = float only
// SPDX-License-Identifier: Apache-2.0
// SPEC §11 C10: state and accumulation are fp32; a double state is not offered.
#include <linstate/linstate.hpp>

struct gla_f64 : linstate::spec<> {
  using state = linstate::state::dense<double>;
};

void run(const linstate::inputs<float>& in, const linstate::outputs<float>& out) {
  linstate::forward<gla_f64>(linstate::cpu{}, in, out);
}
