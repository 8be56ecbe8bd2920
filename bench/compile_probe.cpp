// bench/compile_probe.cpp — compile-time probe of issue 9 §5 (not built by meson): GLA, SSE-n4k1s and SSE-GDN,
// forward and backward on the CPU. Time it with
//   /usr/bin/time -f %e g++ -std=c++20 -O3 -march=native -fopenmp -Iinclude -isystem /usr/include/eigen3 -c bench/compile_probe.cpp -o /dev/null
#include <linstate/linstate.hpp>
namespace ls = linstate;
struct gla : ls::spec<> {};
struct sse_n4k1s : gla { using partition = ls::partition::routed<4, ls::partition::shared>; using router = ls::router::top_k<1>; };
struct sse_gdn : sse_n4k1s { using decay = ls::decay::gated_delta_rule<true>; };
template <class V>
void run(const ls::inputs<float>& in, const ls::cotangents<float>& d) {
  auto r = ls::forward<V>(ls::cpu{}, in);
  auto g = ls::backward<V>(ls::cpu{}, in, d);
  (void)r, (void)g;
}
template void run<gla>(const ls::inputs<float>&, const ls::cotangents<float>&);
template void run<sse_n4k1s>(const ls::inputs<float>&, const ls::cotangents<float>&);
template void run<sse_gdn>(const ls::inputs<float>&, const ls::cotangents<float>&);
