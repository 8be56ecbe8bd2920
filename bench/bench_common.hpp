// bench/bench_common.hpp — what bench_decode.cpp, bench_prefill.cpp and bench_train.cpp share: the
// benchmarked variants and their Google Benchmark registration. Google Benchmark keeps its own timer
// here; the inputs (linstate::bench::workload), the byte and FLOP counts (linstate::bench::count) and
// the machine's roofline (linstate::bench::cpu_roofline) come from <linstate/bench.hpp>, whose header
// documents the counting conventions. In short:
//
// * FLOPs, "recurrent-equivalent", per value head and token: 4·K·V per state written and read (2·K·V
//   for the rank-1 write k vᵀ, 2·K·V for the read hᵀq) for the diagonal family (none, scalar,
//   gated_key), 6·K·V for the delta family (+ the read hᵀk); 2·K·V (4·K·V) per state only written,
//   2·K·V per state only read. The decay's scalings and the normalisations are not counted, and the
//   count is the same for every algorithm and strategy: FLOPS is a normalised rate of useful state work,
//   not a hardware counter.
// * State bytes (decode): a written state is read and written once (2·K·V·4 bytes, fp32), a read-only
//   one read once. With SSE top-k<kw> plus the shared partition that is 2·(1 + kw)·H·K·V·4 bytes per
//   token, against 2·(N + 1)·H·K·V·4 if all N+1 partitions were touched (SPEC §11 C8).
// * copy_fraction / peak_fraction: bytes_per_second (decode: state bytes) and FLOPS as fractions of the
//   copy bandwidth and the FMA peak measured with the benchmark's thread count (in the JSON context:
//   copy_bytes_per_s_<threads>t, fma_flop_per_s_<threads>t). Google Benchmark prints these two rate
//   counters with a "/s" suffix; their values are plain fractions.
#pragma once

#include <benchmark/benchmark.h>

#include <string>
#include <utility>

#include <linstate/bench.hpp>

namespace linstate_bench {

using linstate::index_t;
namespace pt = linstate::partition;
namespace rt = linstate::router;
namespace lb = linstate::bench;

// ---------------------------------------------------------------------------------------------
// The benchmarked variants (paper names; "s" = with the shared partition).
// ---------------------------------------------------------------------------------------------
struct gla : linstate::spec<> {};
struct sse_n4k1s : gla {
  using partition = pt::routed<4, pt::shared>;
  using router = rt::top_k<1>;
};
struct sse_n8k1s : gla {
  using partition = pt::routed<8, pt::shared>;
  using router = rt::top_k<1>;
};
struct sse_n16k1s : gla {
  using partition = pt::routed<16, pt::shared>;
  using router = rt::top_k<1>;
};
//! Gated DeltaNet (gated delta rule with l2-normalised q and k).
struct gdn : linstate::spec<> {
  using decay = linstate::decay::gated_delta_rule<true>;
};
//! SSE over the gated delta rule, N = 4, top-1, shared partition.
struct sse_delta_n4k1s : sse_n4k1s {
  using decay = linstate::decay::gated_delta_rule<true>;
};

// Problem sizes of every benchmark (the task's "K = V = 128, H = 8"; HV = H).
inline constexpr index_t heads = 8;
inline constexpr index_t key_dim = 128;
inline constexpr index_t value_dim = 128;

//! The bench header's options for B sequences of T tokens at the sizes above.
inline lb::options sizes(index_t B, index_t T) {
  return {.B = B, .T = T, .H = heads, .K = key_dim, .V = value_dim};
}

//! The number of threads linstate::cpu{} uses by default (all OpenMP threads; 1 without OpenMP).
inline int default_threads() { return lb::detail::cpu_thread_count(0); }

//! Sets the counters derived from the bench header: items_per_second (tokens), FLOPS, and the
//! fractions of the roofline measured with `threads` threads. `state_counters` (decode):
//! bytes_per_second = state bytes, state_bytes, state_bytes_all.
template <class Spec>
void set_counters(benchmark::State& st, lb::mode m, const lb::options& o, int threads, bool state_counters) {
  const lb::counts c = lb::count<Spec>(m, o);
  const double iters = static_cast<double>(st.iterations());
  const lb::roofline rf = lb::cpu_roofline(threads);
  st.SetItemsProcessed(static_cast<std::int64_t>(iters * c.tokens));
  st.counters["FLOPS"] = benchmark::Counter(iters * c.flops, benchmark::Counter::kIsRate);
  st.counters["peak_fraction"] = benchmark::Counter(iters * c.flops / rf.fma_flop_per_s, benchmark::Counter::kIsRate);
  if (state_counters) {
    st.SetBytesProcessed(static_cast<std::int64_t>(iters * c.state_bytes));
    st.counters["state_bytes"] = c.state_bytes;
    st.counters["state_bytes_all"] = c.state_bytes_all;
    st.counters["copy_fraction"] = benchmark::Counter(iters * c.state_bytes / rf.copy_bytes_per_s, benchmark::Counter::kIsRate);
  }
}

//! Registers `fn` under `name`. Every benchmark is timed on the wall clock (the library runs
//! OpenMP threads, whose work the calling thread's CPU time would miss) and reports the whole
//! process's CPU time next to it, so CPU/Time shows how many cores were busy.
template <class Fn>
benchmark::internal::Benchmark* add(const std::string& name, Fn&& fn) {
  return benchmark::RegisterBenchmark(name.c_str(), std::forward<Fn>(fn))->UseRealTime()->MeasureProcessCPUTime();
}

//! main() of the programs: measures the roofline for 1 and for all threads first (it goes into the
//! JSON context), then runs the benchmarks as BENCHMARK_MAIN() would.
inline int run_main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  for (int t : {1, default_threads()}) {
    const lb::roofline rf = lb::cpu_roofline(t);
    std::string tag = "_";  // (built with +=: GCC 12's -Wrestrict misfires on "_" + std::string&&)
    tag += std::to_string(t);
    tag += 't';
    benchmark::AddCustomContext("copy_bytes_per_s" + tag, lb::detail::json_number(rf.copy_bytes_per_s));
    benchmark::AddCustomContext("fma_flop_per_s" + tag, lb::detail::json_number(rf.fma_flop_per_s));
    if (t == 1) benchmark::AddCustomContext("roofline_method", rf.method);
    if (default_threads() == 1) break;
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace linstate_bench
