// bench/bench_prefill.cpp — prefill throughput: one forward pass over a whole sequence.
//
// Names: BM_<variant>_<algorithm>[_<strategy>]/<T> (STYLE §3.2), T ∈ {1024, 4096}; B = 1, H = 8,
// K = V = 128, fp32 inputs (two bf16 rows for GLA chunked: exact, and cpu::bf16_products), zero initial state, final state written,
// on linstate::cpu{} (every OpenMP thread: 2 on the development VM). The label repeats the variant,
// algorithm, strategy and input type. A strategy is named only where the benchmark picks one; the
// others run the default (varlen), which for the recurrent algorithm is the same work as mask.
//
// Counters (linstate::bench::count; see <linstate/bench.hpp> and bench_common.hpp):
//   items_per_second   tokens per second (T per iteration)
//   FLOPS              recurrent-equivalent: 4·K·V per written-and-read state, per head and token
//                      (GLA: 1 state per token; SSE with shared partition and top-k<kw>: 1 + kw; the
//                      delta rule 6·K·V). The same count for every algorithm and strategy, so
//                      FLOPS ∝ tokens/s × states.
//   peak_fraction      FLOPS / the FMA peak measured with every thread
//
//   ./bench_prefill --benchmark_min_time=0.05
#include <string>
#include <vector>

#include "bench_common.hpp"

namespace {

using namespace linstate_bench;

const std::vector<index_t> lengths = {1024, 4096};

template <class Algorithm>
std::string algorithm_name() {
  if constexpr (requires { Algorithm::chunk_size; }) return "chunked<" + std::to_string(Algorithm::chunk_size) + ">";
  else return Algorithm::name;
}

//! One forward pass of `Spec` over B = 1 sequence of T tokens (inputs from linstate::bench::workload).
template <class Spec, class Algorithm, class Strategy, class Scalar = float, bool Bf16Products = false>
void prefill(benchmark::State& st, const std::string& variant) {
  const index_t T = st.range(0);
  lb::workload<Spec, Scalar> w(lb::mode::prefill, sizes(1, T));  // zero initial state, final state written
  for (auto _ : st) {
    w.prefill(linstate::cpu{.bf16_products = Bf16Products}, Algorithm{}, Strategy{});
    benchmark::DoNotOptimize(w.o.data());
    benchmark::DoNotOptimize(w.final_state.data());
    benchmark::ClobberMemory();
  }
  set_counters<Spec>(st, lb::mode::prefill, sizes(1, T), default_threads(), /*state_counters=*/false);
  st.SetLabel(variant + "/" + algorithm_name<Algorithm>() + "/" + Strategy::name + "/" +
              linstate::detail::scalar_name<Scalar>() + (Bf16Products ? "/bf16_products" : ""));
}

//! Registers BM_<variant>_<algorithm>[_<strategy>][_<suffix>]/<T> for every T.
template <class Spec, class Algorithm, class Strategy = linstate::varlen, class Scalar = float, bool Bf16Products = false>
void add_prefill(const std::string& variant, const std::string& name_tail) {
  auto* b = add("BM_" + variant + "_" + name_tail,
                [variant](benchmark::State& st) { prefill<Spec, Algorithm, Strategy, Scalar, Bf16Products>(st, variant); })
                ->Unit(benchmark::kMillisecond);
  for (index_t T : lengths) b->Arg(T);
}

using linstate::automatic;
using linstate::mask;
using linstate::recurrent;
using linstate::varlen;
using chunked = linstate::chunked<64>;

const bool registered = [] {
  // GLA: the three algorithms.
  add_prefill<gla, recurrent>("gla", "recurrent");
  add_prefill<gla, chunked>("gla", "chunked");
  add_prefill<gla, automatic>("gla", "automatic");
  // GLA chunked with bf16 inputs and output (state and accumulation stay fp32).
  add_prefill<gla, chunked, varlen, Eigen::bfloat16>("gla", "chunked_bf16");
  // The same with linstate::cpu::bf16_products: bf16 operands, fp32 sums (vdpbf16ps where the build
  // targets AVX-512 BF16, linstate::cpu_bf16_dot; elsewhere the row above's code).
  add_prefill<gla, chunked, varlen, Eigen::bfloat16, true>("gla", "chunked_bf16_products");
  // SSE-n4k1 with the shared partition: recurrent, chunked × {mask, varlen}, automatic.
  add_prefill<sse_n4k1s, recurrent>("sse_n4k1s", "recurrent");
  add_prefill<sse_n4k1s, chunked, mask>("sse_n4k1s", "chunked_mask");
  add_prefill<sse_n4k1s, chunked, varlen>("sse_n4k1s", "chunked_varlen");
  add_prefill<sse_n4k1s, automatic>("sse_n4k1s", "automatic");
  // More partitions: the mask strategy's cost grows with N, varlen's does not.
  add_prefill<sse_n8k1s, chunked, varlen>("sse_n8k1s", "chunked_varlen");
  add_prefill<sse_n8k1s, chunked, mask>("sse_n8k1s", "chunked_mask");
  add_prefill<sse_n8k1s, recurrent>("sse_n8k1s", "recurrent");
  add_prefill<sse_n16k1s, chunked, varlen>("sse_n16k1s", "chunked_varlen");
  add_prefill<sse_n16k1s, chunked, mask>("sse_n16k1s", "chunked_mask");
  add_prefill<sse_n16k1s, recurrent>("sse_n16k1s", "recurrent");
  // The gated delta rule: recurrent and chunked (WY form).
  add_prefill<gdn, recurrent>("gdn", "recurrent");
  add_prefill<gdn, chunked>("gdn", "chunked");
  add_prefill<sse_delta_n4k1s, recurrent>("sse_delta_n4k1s", "recurrent");
  add_prefill<sse_delta_n4k1s, chunked, varlen>("sse_delta_n4k1s", "chunked_varlen");
  return true;
}();

}  // namespace

int main(int argc, char** argv) { return linstate_bench::run_main(argc, argv); }
