// bench/bench_common.hpp — what bench_decode.cpp and bench_prefill.cpp share: the benchmarked
// variants, random inputs, and the work counts behind the FLOPS and byte counters.
//
// Counting conventions (used by every benchmark, so rows can be compared with each other):
//
// * A *state-token* is one K×V state (one head, one partition) updated or read for one token.
// * FLOPs, "recurrent-equivalent": per head and token,
//     4·K·V for each state that is written and read   (2·K·V for the rank-1 write k vᵀ as one
//                                                       multiply-add per element, 2·K·V for the
//                                                       read hᵀq as one multiply-add per element),
//     2·K·V for each state that is only read, or only written.
//   The decay's K·V scalings (and, for the gated delta rule, the extra read hᵀk and the
//   normalisations) are not counted, so the same count serves every decay, algorithm and strategy:
//   FLOPS is a normalised rate of useful state work, not a hardware counter. The chunked algorithm,
//   the mask strategy (which also runs the unselected partitions' zero rows through the chunk
//   products) and the delta rule (about 6·K·V per written-and-read state) all do more arithmetic
//   than they are credited with.
// * State bytes: a written state is read and written once (2·K·V·4 bytes, fp32), a read-only one
//   is read once (K·V·4 bytes). With SSE top-k<kw> plus the shared partition that gives
//   2·(1 + kw)·H·K·V·4 bytes per token, against 2·(N + 1)·H·K·V·4 if all N+1 partitions were
//   touched (SPEC §11 C8: a decode step touches only the shared and the selected partitions).
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <utility>

#include <linstate/linstate.hpp>

namespace linstate_bench {

using linstate::index_t;
namespace pt = linstate::partition;
namespace rt = linstate::router;

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

// ---------------------------------------------------------------------------------------------
// Compile-time facts about a variant, in the counts the counters need.
// ---------------------------------------------------------------------------------------------
namespace detail {
//! Routed partitions written (Readers = false) or read per token: k of top_k, all N of a dense router.
template <class R, int N, bool Readers>
constexpr int selected() {
  if constexpr (R::routes) return Readers ? R::num_reader : R::num_writer;
  else return N;
}
}  // namespace detail

template <class Spec>
struct traits {
  using R = typename Spec::router;
  using P = typename Spec::partition;
  static_assert(P::num_routed != linstate::dynamic, "bench: variants with a dynamic N are not benchmarked");

  static constexpr bool top_k = R::routes;
  static constexpr bool shared = P::has_shared;
  static constexpr int routed = P::num_routed;                 //!< N (1 for partition::single)
  static constexpr int partitions = routed + (shared ? 1 : 0);  //!< P, the state's partition axis
  static constexpr int kw = detail::selected<R, routed, false>();  //!< routed partitions written per token
  static constexpr int kr = detail::selected<R, routed, true>();   //!< routed partitions read per token
  static_assert(kw != linstate::dynamic && kr != linstate::dynamic, "bench: dynamic k is not benchmarked");

  // Per token and head. The write set and the read set are the top-kw and top-kr of the same
  // probabilities, so they overlap in min(kw, kr) partitions. The shared partition is both.
  static constexpr int written_and_read = (shared ? 1 : 0) + std::min(kw, kr);
  static constexpr int written_only = std::max(0, kw - kr);
  static constexpr int read_only = std::max(0, kr - kw);
};

//! Recurrent-equivalent FLOPs for `tokens` tokens (see the header comment).
template <class Spec>
double flops_per(double tokens, index_t H = heads, index_t K = key_dim, index_t V = value_dim) {
  using Tr = traits<Spec>;
  const double kv = static_cast<double>(K) * static_cast<double>(V);
  return tokens * static_cast<double>(H) *
         (4.0 * kv * Tr::written_and_read + 2.0 * kv * (Tr::written_only + Tr::read_only));
}

//! Bytes of fp32 state read and written for `tokens` tokens by the touched partitions only.
template <class Spec>
double state_bytes_per(double tokens, index_t H = heads, index_t K = key_dim, index_t V = value_dim) {
  using Tr = traits<Spec>;
  const double kv4 = static_cast<double>(K) * static_cast<double>(V) * sizeof(float);
  return tokens * static_cast<double>(H) * kv4 *
         (2.0 * (Tr::written_and_read + Tr::written_only) + 1.0 * Tr::read_only);
}

//! The same, if every one of the P partitions were read and written (what C8 avoids).
template <class Spec>
double state_bytes_all_per(double tokens, index_t H = heads, index_t K = key_dim, index_t V = value_dim) {
  const double kv4 = static_cast<double>(K) * static_cast<double>(V) * sizeof(float);
  return tokens * static_cast<double>(H) * kv4 * 2.0 * traits<Spec>::partitions;
}

// ---------------------------------------------------------------------------------------------
// Random inputs, owned, with the view the API takes.
// ---------------------------------------------------------------------------------------------

//! Fixed random inputs of one forward call, shaped for `Spec` (tensors it does not take stay empty).
//! q, k, v ~ N(0, 1); log-decays g = log σ(x) / 16 with x ~ N(0, 1) (about −0.05 per token, so a
//! chunk of 64 spans e^{−3}: the chunked kernel's single-product path, as in trained models);
//! β = σ(x); router logits ~ N(0, 1), so the selected partitions differ from token to token and
//! from sequence to sequence.
template <class Scalar>
struct workload {
  linstate::tensor<Scalar> q, k, v, g, beta, shared_q, shared_k, shared_g, shared_beta, logits;

  linstate::inputs<Scalar> view() const {
    auto opt = [](const linstate::tensor<Scalar>& t) {
      return t.empty() ? linstate::tensor_view<const Scalar>{} : t.cview();
    };
    linstate::inputs<Scalar> in;
    in.q = opt(q), in.k = opt(k), in.v = opt(v), in.g = opt(g), in.beta = opt(beta);
    in.shared = {opt(shared_q), opt(shared_k), opt(shared_g), opt(shared_beta)};
    in.router_logits = opt(logits);
    return in;
  }
};

namespace detail {

template <class Scalar, class Draw>
linstate::tensor<Scalar> random_tensor(linstate::shape_t shape, Draw&& draw) {
  linstate::tensor<Scalar> t(shape);
  for (index_t i = 0; i < t.numel(); ++i) t[i] = static_cast<Scalar>(draw());
  return t;
}

}  // namespace detail

template <class Spec, class Scalar = float>
workload<Scalar> make_workload(index_t B, index_t T, std::uint32_t seed = 2024, index_t H = heads,
                               index_t K = key_dim, index_t V = value_dim) {
  using Tr = traits<Spec>;
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  auto gauss = [&] { return normal(rng); };
  auto log_decay = [&] { return -std::log1p(std::exp(-normal(rng))) / 16.f; };  // log σ(x) / 16
  auto sigmoid = [&] { return 1.f / (1.f + std::exp(-normal(rng))); };
  // gated_key: one log-decay per key channel [B,T,HV,K]; scalar / delta rule: one per head [B,T,HV].
  const linstate::shape_t g_shape =
      Spec::decay::gate == linstate::gate_extent::key ? linstate::shape_t{B, T, H, K} : linstate::shape_t{B, T, H};

  workload<Scalar> w;
  w.q = detail::random_tensor<Scalar>({B, T, H, K}, gauss);
  w.k = detail::random_tensor<Scalar>({B, T, H, K}, gauss);
  w.v = detail::random_tensor<Scalar>({B, T, H, V}, gauss);
  if constexpr (Spec::decay::gate != linstate::gate_extent::none) w.g = detail::random_tensor<Scalar>(g_shape, log_decay);
  if constexpr (Spec::decay::uses_beta) w.beta = detail::random_tensor<Scalar>({B, T, H}, sigmoid);
  if constexpr (Tr::shared) {
    w.shared_q = detail::random_tensor<Scalar>({B, T, H, K}, gauss);
    w.shared_k = detail::random_tensor<Scalar>({B, T, H, K}, gauss);
    if constexpr (Spec::decay::gate != linstate::gate_extent::none) w.shared_g = detail::random_tensor<Scalar>(g_shape, log_decay);
    if constexpr (Spec::decay::uses_beta) w.shared_beta = detail::random_tensor<Scalar>({B, T, H}, sigmoid);
  }
  if constexpr (Tr::top_k) w.logits = detail::random_tensor<Scalar>({B, T, Tr::routed}, gauss);
  return w;
}

//! A state [S,P,H,K,V] filled with N(0, 0.1²): a mid-sequence state rather than zeros.
template <class Spec>
linstate::tensor<float> random_state(index_t S, std::uint32_t seed = 7, index_t H = heads, index_t K = key_dim,
                                     index_t V = value_dim) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 0.1f);
  return detail::random_tensor<float>({S, traits<Spec>::partitions, H, K, V}, [&] { return normal(rng); });
}

// ---------------------------------------------------------------------------------------------
// Registration helpers.
// ---------------------------------------------------------------------------------------------

//! The number of threads linstate::cpu{} uses by default (all OpenMP threads; 1 without OpenMP).
inline int default_threads() {
#if LINSTATE_HAS_OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

//! Registers `fn` under `name`. Every benchmark is timed on the wall clock (the library runs
//! OpenMP threads, whose work the calling thread's CPU time would miss) and reports the whole
//! process's CPU time next to it, so CPU/Time shows how many cores were busy.
template <class Fn>
benchmark::internal::Benchmark* add(const std::string& name, Fn&& fn) {
  return benchmark::RegisterBenchmark(name.c_str(), std::forward<Fn>(fn))->UseRealTime()->MeasureProcessCPUTime();
}

}  // namespace linstate_bench
