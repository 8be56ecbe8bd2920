// bench/bench_decode.cpp — the cost of one decode step: update and read the recurrent state of
// B sequences, one token each (linstate::forward_in_place, T = 1, linstate::recurrent).
//
// Names: BM_<variant>_decode/B:<B>/threads:<n>, plus the hand-written baseline
// BM_raw_gla_decode (same memory, same math, no library) that measures the abstraction's cost.
// Sizes: H = 8, K = V = 128, fp32. The state [B,P,H,K,V] is kept across iterations (each
// iteration is the next decode step of the same sequences); the inputs are fixed and random, and
// the router logits differ per sequence, so the selected partitions vary across the batch.
//
// Counters (per iteration = one decode step of B sequences; counts from linstate::bench::count, see
// <linstate/bench.hpp> and bench_common.hpp):
//   items_per_second   tokens per second (B per step)
//   FLOPS              recurrent-equivalent: 4·K·V per written-and-read state per head (delta rule: 6·K·V)
//   state_bytes        bytes of state read + written per step: B·2·(1 + kw)·H·K·V·4 for SSE with a
//                      shared partition, B·2·H·K·V·4 for GLA
//   state_bytes_all    what touching all N+1 partitions would cost; state_bytes_all / state_bytes
//                      = (N+1)/(1+kw) is the saving of SPEC §11 C8
//   bytes_per_second   state traffic rate (state_bytes per step)
//   copy_fraction      bytes_per_second / the copy bandwidth measured with the same thread count
//   peak_fraction      FLOPS / the FMA peak measured with the same thread count
//
//   ./bench_decode --benchmark_min_time=0.05
#include <cmath>
#include <string>
#include <vector>

#include "bench_common.hpp"

namespace {

using namespace linstate_bench;

const std::vector<index_t> batch_sizes = {1, 16, 64};

//! Sets the counters every decode benchmark reports (B tokens per iteration).
template <class Spec>
void set_decode_counters(benchmark::State& st, index_t B, int threads, const std::string& label) {
  set_counters<Spec>(st, lb::mode::decode, sizes(B, 1), threads, /*state_counters=*/true);
  st.SetLabel(label);
}

//! One decode step of `Spec` through the library (inputs and state from linstate::bench::workload:
//! the state [B,P,H,K,V] ~ N(0, 0.1²) is carried from step to step).
template <class Spec>
void decode(benchmark::State& st, const std::string& variant) {
  const index_t B = st.range(0);
  const int threads = static_cast<int>(st.range(1));
  lb::workload<Spec, float> w(lb::mode::decode, sizes(B, 1));
  const linstate::cpu be{.threads = threads};
  for (auto _ : st) {
    w.decode(be, linstate::recurrent{});
    benchmark::DoNotOptimize(w.o.data());
    benchmark::ClobberMemory();
  }
  set_decode_counters<Spec>(st, B, threads, variant + "/recurrent/decode/threads=" + std::to_string(threads));
}

//! The baseline: GLA's decode step written by hand over the same memory layout, with no views,
//! no checks, no routing and no scratch buffers. Per sequence b and head h:
//!   h ← diag(e^{g}) h + k vᵀ ;  o = s · hᵀ q     (s = K^{-1/2})
//! with the state row i updated and read in one pass, as the library's recurrent kernel does.
void raw_gla_decode(benchmark::State& st) {
  const index_t B = st.range(0), H = heads, K = key_dim, V = value_dim;
  const int threads = static_cast<int>(st.range(1));
  lb::workload<gla, float> w(lb::mode::decode, sizes(B, 1));  // the library rows' inputs and state
  const float* q_all = w.q.data();  // [B,1,H,K]
  const float* k_all = w.k.data();  // [B,1,H,K]
  const float* g_all = w.g.data();  // [B,1,H,K]
  const float* v_all = w.v.data();  // [B,1,H,V]
  float* h_all = w.state.data();    // [B,1,H,K,V]
  float* o_all = w.o.data();        // [B,1,H,V]
  const float scale = 1.f / std::sqrt(static_cast<float>(K));
  const index_t tasks = B * H;  // one (sequence, head) pair each; its state is h_all + task·K·V
  (void)threads;
  for (auto _ : st) {
#if LINSTATE_HAS_OPENMP
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
#endif
    for (index_t task = 0; task < tasks; ++task) {
      const float* __restrict q = q_all + task * K;
      const float* __restrict k = k_all + task * K;
      const float* __restrict g = g_all + task * K;
      const float* __restrict v = v_all + task * V;
      float* __restrict h = h_all + task * K * V;
      float* __restrict o = o_all + task * V;
      for (index_t j = 0; j < V; ++j) o[j] = 0.f;
      for (index_t i = 0; i < K; ++i) {
        const float a = std::exp(g[i]), ki = k[i], qi = scale * q[i];
        float* __restrict row = h + i * V;
        for (index_t j = 0; j < V; ++j) {
          row[j] = a * row[j] + ki * v[j];
          o[j] += qi * row[j];
        }
      }
    }
    benchmark::DoNotOptimize(o_all);
    benchmark::ClobberMemory();
  }
  set_decode_counters<gla>(st, B, threads, "raw/gla/decode/threads=" + std::to_string(threads));
}

//! Registers `fn` for B ∈ {1, 16, 64} and threads ∈ {1, the default of linstate::cpu{}}.
template <class Fn>
void add_decode(const std::string& name, Fn&& fn) {
  auto* b = add(name, std::forward<Fn>(fn))->ArgNames({"B", "threads"})->Unit(benchmark::kMicrosecond);
  const int all = default_threads();
  for (index_t B : batch_sizes) {
    b->Args({B, 1});
    if (all > 1) b->Args({B, all});
  }
}

const bool registered = [] {
  add_decode("BM_gla_decode", [](benchmark::State& st) { decode<gla>(st, "gla"); });
  add_decode("BM_raw_gla_decode", raw_gla_decode);
  add_decode("BM_sse_n4k1s_decode", [](benchmark::State& st) { decode<sse_n4k1s>(st, "sse_n4k1s"); });
  add_decode("BM_sse_n8k1s_decode", [](benchmark::State& st) { decode<sse_n8k1s>(st, "sse_n8k1s"); });
  add_decode("BM_sse_n16k1s_decode", [](benchmark::State& st) { decode<sse_n16k1s>(st, "sse_n16k1s"); });
  add_decode("BM_gdn_decode", [](benchmark::State& st) { decode<gdn>(st, "gdn"); });
  add_decode("BM_sse_delta_n4k1s_decode", [](benchmark::State& st) { decode<sse_delta_n4k1s>(st, "sse_delta_n4k1s"); });
  return true;
}();

}  // namespace

int main(int argc, char** argv) { return linstate_bench::run_main(argc, argv); }
