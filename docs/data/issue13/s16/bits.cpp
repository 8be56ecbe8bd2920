// docs/data/issue13/s15/bits.cpp — session 13's bits.cpp with three more cases (GLA chunked<64> at T = 1000 on 2 threads,
// a per-head scalar decay chunked<32>, GDN chunked<64> at T = 1000 on 2 threads: the lockstep path's padded states and
// scratch rows). Session 13's description:
// docs/data/issue13/s13/bits.cpp — session 12's bits.cpp, printing the forward's hash (o, final state) and the backward's
// (the gradients) apart on each line, each hash of that call alone; with -DSAVED the forward keeps its chunk states
// in a linstate::saved_states and the backward reads them. Session 12's description:
// docs/data/issue13/s12/bits.cpp — session 10's bits.cpp with more cases (recurrent GLA at K = 128, SSE and SSE-GDN
// chunked<64> at K = 128 with 1 and 2 threads, bf16 SSE): one hash over o, the final state and the gradients of GLA / SSE (chunked, forward +
// backward) and GDN (chunked forward) at several shapes and thread counts: built against two include trees, the
// same hashes mean the same bits.
//   g++ -std=c++20 -O2 -march=native -fopenmp [-DSAVED] -Iinclude -Itests/support $(pkg-config --cflags eigen3) docs/data/issue13/s13/bits.cpp
// hashes of forward and backward results: the same bits before and after a data-movement change
#include <linstate/linstate.hpp>
#include <cstdio>
#include <cstring>
#include <random>
#include "random_inputs.hpp"
using namespace linstate_test;
using linstate::index_t;
struct gla : linstate::spec<> {};
struct ret : gla { using decay = linstate::decay::scalar; };
struct gdn : gla { using decay = linstate::decay::gated_delta_rule<true>; };
struct sse_gdn : gla { using decay = linstate::decay::gated_delta_rule<true>; using partition = linstate::partition::routed<4, linstate::partition::shared>; using router = linstate::router::top_k<1>; };
struct sse : gla { using partition = linstate::partition::routed<4, linstate::partition::shared>; using router = linstate::router::top_k<1>; };
static std::uint64_t h = 1469598103934665603ull;
template <class T> void mix(const linstate::tensor<T>& t) { const unsigned char* p = reinterpret_cast<const unsigned char*>(t.data()); for (std::size_t i = 0; i < t.values().size() * sizeof(T); ++i) h = (h ^ p[i]) * 1099511628211ull; }
template <class Spec, class Alg> void run(index_t T, index_t K, index_t V, int threads, bool bwd) {
  config c = config_for<Spec>({.B = 2, .T = T, .H = 2, .HV = 2, .K = K, .V = V});
  c.initial_state = true;
  if constexpr (linstate::detail::is_delta<typename Spec::decay>) c.beta = true;
  random_inputs d(c, 5);
  const linstate::cpu be{.threads = threads};
  auto r = linstate::forward<Spec>(be, d.view(), Alg{});
#ifdef SAVED
  linstate::saved_states saved;
  linstate::forward<Spec>(be, d.view(), {r.o.view(), r.final_state.view()}, saved, Alg{});
#endif
  h = 1469598103934665603ull;
  mix(r.o), mix(r.final_state);
  std::printf("forward %016llx", (unsigned long long)h);
  if (bwd) {
    linstate::tensor<float> dO(d.output_shape());
    std::mt19937 g(3); std::normal_distribution<float> nd; for (float& x : dO.values()) x = nd(g);
#ifdef SAVED
    auto gr = linstate::backward<Spec>(be, d.view(), linstate::cotangents<float>{.o = dO.view()}, Alg{}, linstate::varlen{});
    linstate::gradients<float> gv{gr.q.view(), gr.k.view(), gr.v.view(), gr.g.view(), {}, {}, {}, gr.initial_state.view()};
    if (!gr.shared.q.empty()) gv.shared = {gr.shared.q.view(), gr.shared.k.view(), gr.shared.g.view(), {}};
    if (!gr.router_logits.empty()) gv.router_logits = gr.router_logits.view();
    linstate::backward<Spec>(be, d.view(), linstate::cotangents<float>{.o = dO.view()}, gv, saved, Alg{}, linstate::varlen{});
#else
    auto gr = linstate::backward<Spec>(be, d.view(), linstate::cotangents<float>{.o = dO.view()}, Alg{}, linstate::varlen{});
#endif
    h = 1469598103934665603ull;
    mix(gr.q), mix(gr.k), mix(gr.v), mix(gr.g), mix(gr.initial_state);
    std::printf("  backward %016llx", (unsigned long long)h);
  }
  std::printf("\n");
}
int main() {
  run<gla, linstate::chunked<64>>(300, 128, 128, 1, true);
  run<gla, linstate::chunked<64>>(300, 40, 72, 2, true);
  run<gla, linstate::chunked<16>>(150, 36, 20, 1, true);
  run<sse, linstate::chunked<32>>(150, 40, 24, 1, true);
  run<gdn, linstate::chunked<64>>(300, 128, 128, 1, false);
  run<gdn, linstate::chunked<64>>(150, 40, 72, 2, false);
  run<gla, linstate::recurrent>(100, 128, 128, 1, false);
  run<gla, linstate::recurrent>(1, 128, 128, 1, false);
  run<sse, linstate::chunked<64>>(300, 128, 128, 1, true);
  run<sse, linstate::chunked<64>>(300, 128, 128, 2, false);
  run<sse_gdn, linstate::chunked<64>>(300, 128, 128, 2, false);
  run<sse, linstate::recurrent>(50, 128, 128, 1, false);
  run<gla, linstate::chunked<64>>(1000, 128, 128, 2, true);
  run<ret, linstate::chunked<32>>(300, 64, 128, 1, true);
  run<gdn, linstate::chunked<64>>(1000, 128, 128, 2, false);
}
