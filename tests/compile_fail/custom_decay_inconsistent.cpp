// expect: static assertion failed.*linstate: family::diagonal decays along the key rows \(gate none, head or key\)
// SPDX-License-Identifier: Apache-2.0
// A user-written decay policy that models linstate::Decay (every member is there) but claims the
// diagonal family, whose chunked kernels decay along the key rows, for a per-value-channel gate.
#include <linstate/linstate.hpp>

namespace ls = linstate;
struct my_decay {
  using family = ls::family::diagonal;
  static constexpr ls::gate_extent gate = ls::gate_extent::value;  // a diagonal decay's gate is per key, per head or absent
  static constexpr bool uses_beta = false;
  static constexpr bool l2norm_qk = false;
  static constexpr const char* name = "decay::my_decay";
  template <class T>
  static T log_decay(const T* g, ls::index_t i) { return g[i]; }
  template <class T>
  static void step(const ls::token<T>& x, ls::index_t j, T v, ls::column<T> s) {
    for (ls::index_t i = 0; i < x.K; ++i) s[i] = std::exp(x.g[j]) * s[i] + x.k[i] * v;
  }
  template <class T, class C>
  static T step_adjoint(const ls::token<T>&, ls::index_t, T, ls::column<C>, ls::column<T>, ls::token_grad<T>&) { return T(0); }
};
static_assert(ls::Decay<my_decay>);  // the concept alone cannot see the inconsistency

struct my_variant : ls::spec<> {
  using decay = my_decay;
};

void run(const ls::inputs<float>& in, const ls::outputs<float>& out) {
  ls::forward<my_variant>(ls::cpu{}, in, out);
}
