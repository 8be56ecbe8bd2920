// bench/bench_train.cpp — training throughput: one forward and one backward pass (issue 3).
//
// Names: BM_<variant>_train_<strategy>/<T>, T ∈ {1024, 4096, 16384}; B = 1, H = 8, K = V = 128,
// fp32, chunked<64>, zero initial state, ∂L/∂o random, every input's gradient written, on
// linstate::cpu{} (every OpenMP thread). items_per_second = tokens per second of forward+backward.
// The forward is run with the final state written and the backward recomputes what it needs
// (per-chunk states only), as a training step does.
//
//   ./bench_train --benchmark_min_time=0.05
#include <string>
#include <vector>

#include "bench_common.hpp"

namespace {

using namespace linstate_bench;

const std::vector<index_t> lengths = {1024, 4096, 16384};

template <class Spec, class Strategy>
void train(benchmark::State& st, const std::string& variant) {
  const index_t T = st.range(0);
  const workload<float> w = make_workload<Spec, float>(/*B=*/1, T);
  const linstate::inputs<float> in = w.view();
  linstate::tensor<float> o({1, T, heads, value_dim});
  linstate::tensor<float> final_state({1, traits<Spec>::partitions, heads, key_dim, value_dim});
  const linstate::tensor<float> d_o = detail::random_tensor<float>({1, T, heads, value_dim}, [] { return 0.01f; });
  const linstate::outputs<float> out{o.view(), final_state.view()};
  auto like = [](const linstate::tensor<float>& t) { return t.empty() ? linstate::tensor<float>() : linstate::tensor<float>(t.shape()); };
  linstate::tensor<float> dq = like(w.q), dk = like(w.k), dv = like(w.v), dg = like(w.g), dq1 = like(w.shared_q),
                          dk1 = like(w.shared_k), dg1 = like(w.shared_g), dl = like(w.logits);
  auto view = [](linstate::tensor<float>& t) { return t.empty() ? linstate::tensor_view<float>{} : t.view(); };
  const linstate::gradients<float> grads{view(dq), view(dk), view(dv), view(dg), {}, {view(dq1), view(dk1), view(dg1), {}},
                                         view(dl), {}};
  for (auto _ : st) {
    linstate::forward<Spec>(linstate::cpu{}, in, out, linstate::chunked<64>{}, Strategy{});
    linstate::backward<Spec>(linstate::cpu{}, in, linstate::cotangents<float>{.o = d_o.cview()}, grads,
                             linstate::chunked<64>{}, Strategy{});
    benchmark::DoNotOptimize(dq.data());
    benchmark::ClobberMemory();
  }
  st.SetItemsProcessed(static_cast<std::int64_t>(st.iterations()) * T);
  st.SetLabel(variant + "/chunked<64>/" + Strategy::name + "/float32/forward+backward");
}

template <class Spec, class Strategy>
void add_train(const std::string& variant, const std::string& strategy) {
  auto* b = add("BM_" + variant + "_train_" + strategy,
                [variant](benchmark::State& st) { train<Spec, Strategy>(st, variant); })
                ->Unit(benchmark::kMillisecond);
  for (index_t T : lengths) b->Arg(T);
}

const bool registered = [] {
  add_train<gla, linstate::varlen>("gla", "varlen");
  add_train<sse_n4k1s, linstate::varlen>("sse_n4k1s", "varlen");
  add_train<sse_n4k1s, linstate::mask>("sse_n4k1s", "mask");
  add_train<sse_n8k1s, linstate::varlen>("sse_n8k1s", "varlen");
  add_train<sse_n8k1s, linstate::mask>("sse_n8k1s", "mask");
  add_train<sse_n16k1s, linstate::varlen>("sse_n16k1s", "varlen");
  add_train<sse_n16k1s, linstate::mask>("sse_n16k1s", "mask");
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
