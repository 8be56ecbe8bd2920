// bench/compile_probe.cpp — compile-time probes (not built by meson): one translation unit per use of
// the library, picked by LINSTATE_PROBE, timed by bench/compile_times.sh (docs/using.md, "Compile
// time"). Without LINSTATE_PROBE it is issue 9's probe (GLA, SSE-n4k1s and SSE-GDN, forward and
// backward on the CPU), timed there with
//   /usr/bin/time -f %e g++ -std=c++20 -O3 -march=native -fopenmp -Iinclude -isystem /usr/include/eigen3 -c bench/compile_probe.cpp -o /dev/null
//   LINSTATE_PROBE = 1  #include <linstate/linstate.hpp>, nothing instantiated
//                    2  GLA decode: forward_in_place, fp32
//                    3  GLA prefill: forward, automatic (= chunked<24>), fp32
//                    4  GLA forward + backward, automatic, fp32
//                    5  SSE-n4k1s forward + backward, automatic, mask and varlen
//                    6  GLA forward, automatic, fp32, bf16 and fp16 inputs
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
#if !defined(LINSTATE_PROBE)
template void run<gla>(const ls::inputs<float>&, const ls::cotangents<float>&);
template void run<sse_n4k1s>(const ls::inputs<float>&, const ls::cotangents<float>&);
template void run<sse_gdn>(const ls::inputs<float>&, const ls::cotangents<float>&);
#elif LINSTATE_PROBE == 2
void decode(const ls::inputs<float>& step, const ls::tensor_view<float>& state, const ls::tensor_view<float>& o) {
  ls::forward_in_place<gla>(ls::cpu{}, step, state, o);
}
#elif LINSTATE_PROBE == 3
ls::result<float> prefill(const ls::inputs<float>& in) { return ls::forward<gla>(ls::cpu{}, in); }
#elif LINSTATE_PROBE == 4
template void run<gla>(const ls::inputs<float>&, const ls::cotangents<float>&);
#elif LINSTATE_PROBE == 5
void train(const ls::inputs<float>& in, const ls::cotangents<float>& d) {
  auto a = ls::backward<sse_n4k1s>(ls::cpu{}, in, d, ls::automatic{}, ls::mask{});
  auto b = ls::backward<sse_n4k1s>(ls::cpu{}, in, d, ls::automatic{}, ls::varlen{});
  (void)a, (void)b;
  (void)ls::forward<sse_n4k1s>(ls::cpu{}, in, ls::automatic{}, ls::mask{});
  (void)ls::forward<sse_n4k1s>(ls::cpu{}, in, ls::automatic{}, ls::varlen{});
}
#elif LINSTATE_PROBE == 6
ls::result<float> f32(const ls::inputs<float>& in) { return ls::forward<gla>(ls::cpu{}, in); }
ls::result<Eigen::bfloat16> b16(const ls::inputs<Eigen::bfloat16>& in) { return ls::forward<gla>(ls::cpu{}, in); }
ls::result<Eigen::half> f16(const ls::inputs<Eigen::half>& in) { return ls::forward<gla>(ls::cpu{}, in); }
#endif
