// bench/host_probe.cpp — the host-side cost of one decode call: linstate::forward_in_place on a tiny
// problem (B = 1, H = 1, K = V = 4, one thread), N calls, so that checks, make_problem and routing,
// not the state update, dominate. Count instructions per call with valgrind (deterministic) for two
// include trees A and B (docs/benchmarks.md, "Issue 9"):
//   g++ -std=c++20 -O2 -march=x86-64-v3 -fopenmp -I<tree>/include -isystem /usr/include/eigen3 bench/host_probe.cpp -o probe
//   for n in 200 400; do valgrind --tool=callgrind --callgrind-out-file=/dev/null ./probe g $n; done   # g: GLA, s: SSE-n4k1s
//   instructions per call = (Ir(400) − Ir(200)) / 200
#include <linstate/linstate.hpp>
#include <cstdio>
#include <cstdlib>
#include <vector>
namespace ls = linstate;
struct gla : ls::spec<> {};
struct sse : ls::spec<> { using partition = ls::partition::routed<4, ls::partition::shared>; using router = ls::router::top_k<1>; };
template <class V>
void run(int n) {
  const ls::index_t B = 1, T = 1, H = 1, K = 4, Vd = 4;
  constexpr bool routed = !std::is_same_v<V, gla>;
  const ls::index_t P = routed ? 5 : 1;
  std::vector<float> q(B*T*H*K, 0.1f), k(B*T*H*K, 0.2f), v(B*T*H*Vd, 0.3f), g(B*T*H*K, -0.1f), o(B*T*H*Vd), st(B*P*H*K*Vd), lg(B*T*4, 0.f);
  lg[1] = 1.f;
  ls::inputs<float> in{.q = {q.data(), {B,T,H,K}}, .k = {k.data(), {B,T,H,K}}, .v = {v.data(), {B,T,H,Vd}}, .g = {g.data(), {B,T,H,K}}};
  if constexpr (routed) { in.shared.q = in.q; in.shared.k = in.k; in.shared.g = in.g; in.router_logits = {lg.data(), {B,T,4}}; }
  for (int i = 0; i < n; ++i)
    ls::forward_in_place<V>(ls::cpu{.threads = 1}, in, {st.data(), {B,P,H,K,Vd}}, {o.data(), {B,T,H,Vd}}, ls::recurrent{});
  std::printf("%g\n", o[0]);
}
int main(int argc, char** argv) {
  const int n = std::atoi(argv[2]);
  if (argv[1][0] == 'g') run<gla>(n); else run<sse>(n);
}
