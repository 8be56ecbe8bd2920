// expect: static assertion failed.*linstate: the router has no `template <class T, class P> static void weights_backward
// SPDX-License-Identifier: Apache-2.0
// A new router with its forward rule but no backward: the call names the missing member.
#include <linstate/linstate.hpp>

namespace ls = linstate;
struct first_only {  // always writes and reads partition 0
  static constexpr bool routes = true;
  static constexpr int num_writer = 1, num_reader = 1, params_per_partition = 0;
  static constexpr const char* name = "router::first_only";
  struct config { int kw = 1, kr = 1; };
  template <class Opt>
  static config configure(const Opt&, ls::index_t, const std::string&, bool = false) { return {}; }
  template <class T, class Round>
  static void route(const config&, int N, const T*, const float*, T* p, T* cw, T* cr, std::uint8_t* f, Round) {
    for (int n = 0; n < N; ++n) p[n] = cw[n] = cr[n] = T(n == 0), f[n] = n == 0 ? 3 : 0;
  }
  template <class T>
  static void weights(const config&, int N, const T*, const float*, const std::uint8_t*, T* p, T* cw, T* cr) {
    for (int n = 0; n < N; ++n) p[n] = cw[n] = cr[n] = T(n == 0);
  }
};

struct my_variant : ls::spec<> {
  using partition = ls::partition::routed<4>;
  using router = first_only;
};

void run(const ls::inputs<float>& in, const ls::outputs<float>& out) {
  ls::forward<my_variant>(ls::cpu{}, in, out);
}
