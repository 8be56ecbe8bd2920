// bench/bench_train.cpp — training throughput: one forward and one backward pass (issue 3).
//
// Names: BM_<variant>_train_<strategy>/<T>, T ∈ {1024, 4096, 16384}; B = 1, H = 8, K = V = 128,
// fp32, chunked<64>, zero initial state, ∂L/∂o random, every input's gradient written, on
// linstate::cpu{} (every OpenMP thread). items_per_second = tokens per second of forward+backward.
// The forward is run with the final state written and keeps its chunk states for the backward
// (linstate::saved_states), as a training step does; BM_gla_train_recompute/<T>: the backward recomputes
// them instead (the overloads without saved_states). Inputs, ∂L/∂o (~ N(0,1)) and the gradients come
// from linstate::bench::workload; FLOPS (3× the forward's recurrent-equivalent count) and
// peak_fraction from linstate::bench::count and cpu_roofline (<linstate/bench.hpp>).
//
//   ./bench_train --benchmark_min_time=0.05
#include <string>
#include <vector>

#include "bench_common.hpp"

namespace {

using namespace linstate_bench;

const std::vector<index_t> lengths = {1024, 4096, 16384};

template <class Spec, class Strategy>
void train(benchmark::State& st, const std::string& variant, bool saved = true) {
  const index_t T = st.range(0);
  lb::options o = sizes(1, T);
  o.saved_states = saved;
  lb::workload<Spec, float> w(lb::mode::train, o);  // zero initial state, final state written
  for (auto _ : st) {
    w.train(linstate::cpu{}, linstate::chunked<64>{}, Strategy{});
    benchmark::DoNotOptimize(w.grad.q.data());
    benchmark::ClobberMemory();
  }
  set_counters<Spec>(st, lb::mode::train, sizes(1, T), default_threads(), /*state_counters=*/false);
  st.SetLabel(variant + "/chunked<64>/" + Strategy::name + "/float32/forward+backward" + (saved ? "" : "/recompute"));
}

template <class Spec, class Strategy>
void add_train(const std::string& variant, const std::string& strategy, bool saved = true) {
  auto* b = add("BM_" + variant + "_train_" + (saved ? strategy : "recompute"),
                [variant, saved](benchmark::State& st) { train<Spec, Strategy>(st, variant, saved); })
                ->Unit(benchmark::kMillisecond);
  for (index_t T : lengths) b->Arg(T);
}

const bool registered = [] {
  add_train<gla, linstate::varlen>("gla", "varlen");
  add_train<gla, linstate::varlen>("gla", "varlen", /*saved=*/false);
  add_train<sse_n4k1s, linstate::varlen>("sse_n4k1s", "varlen");
  add_train<sse_n4k1s, linstate::mask>("sse_n4k1s", "mask");
  add_train<sse_n8k1s, linstate::varlen>("sse_n8k1s", "varlen");
  add_train<sse_n8k1s, linstate::mask>("sse_n8k1s", "mask");
  add_train<sse_n16k1s, linstate::varlen>("sse_n16k1s", "varlen");
  add_train<sse_n16k1s, linstate::mask>("sse_n16k1s", "mask");
  return true;
}();

}  // namespace

int main(int argc, char** argv) { return linstate_bench::run_main(argc, argv); }
