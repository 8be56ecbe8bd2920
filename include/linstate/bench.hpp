// linstate/bench.hpp — the cost of a state update: decode, prefill and training steps of any variant,
// timed on the CPU backend (the CUDA overloads: <linstate/cuda/bench.cuh>), with the bytes and FLOPs
// the call must move and compute, and this machine's measured roofline next to them.
//
// \code
//   #include <linstate/bench.hpp>
//   struct my_variant : linstate::spec<> { using partition = linstate::partition::routed<4, linstate::partition::shared>;
//                                          using router = linstate::router::top_k<1>; };
//   auto r = linstate::bench::decode<my_variant>(linstate::cpu{}, {.B = 16, .H = 8, .K = 128, .V = 128});
//   std::cout << r;                                   // median / p20 / p80 per step, tokens/s, state bytes,
//                                                     // bytes/s and % of copy bandwidth, FLOP/s and % of FMA peak
//   auto p = linstate::bench::prefill<my_variant>(linstate::cpu{}, {.T = 4096}, linstate::chunked<64>{}, linstate::mask{});
//   auto t = linstate::bench::train<my_variant>(linstate::cpu{}, {.T = 1024, .dtype = linstate::bench::scalar_type::bf16});
//   std::cout << linstate::bench::markdown({r, p, t});  // or to_json({r, p, t})
//   auto f = linstate::bench::decode<my_variant, float>(linstate::cpu{}, {.B = 16});  // only fp32 compiled in
// \endcode
// `decode<V>` compiles the fp32 and the bf16 kernels and picks one by options.dtype at run time;
// `decode<V, float>` / `decode<V, Eigen::bfloat16>` compile one (half the compile time).
//
// What is timed (one "call"):
//   decode   linstate::forward_in_place on a state [S,P,HV,K,V] carried from call to call (each call is the
//            next step of the same sequences), T tokens per sequence (default 1), algorithm recurrent{}
//   prefill  linstate::forward over T tokens (default 1024), final state written (options.final_state),
//            zero initial state unless options.initial_state, algorithm automatic{}
//   train    that forward, then linstate::backward with a random ∂L/∂o, every input's gradient written; the
//            forward keeps its chunk states for the backward (linstate::saved_states) unless
//            options.saved_states = false
// The algorithm and the strategy are the trailing arguments, as for linstate::forward.
//
// Method: one untimed first call; one timed call as an estimate; min(warmup, ⌈warmup_ms / estimate⌉)
// untimed warm-up calls (at least one unless warmup = 0); then `reps` timed calls, or, with reps = 0,
// clamp(⌈budget_ms / estimate⌉, min_reps, max_reps). With cold_cache the last-level cache (CPU; GPU: L2)
// is flushed before every timed call, outside the timed interval. Reported: median, 20th and 80th
// percentile (linear interpolation between order statistics, numpy's default), min, max, mean. CPU calls
// are timed with std::chrono::steady_clock around each call (the library's OpenMP threads join before it
// returns).
//
// Inputs (linstate::testing::random_inputs, every tensor the variant takes and nothing else): q, k, v
// ~ N(0,1); log-decays g = logsigmoid(z) / 16, z ~ N(0,1) (about −0.05 per token: a 64-token chunk spans
// e^−3, as in trained models), in the decay policy's gate extent; β = σ(z); router logits per token a
// random permutation of the N values n − (N−1)/2 plus noise (so the selected partitions vary from token
// to token and sequence to sequence); router_params ~ U(±0.25) for a router that takes them; keys of a
// policy with β and without l2 normalisation rescaled to unit norm; states ~ N(0, 0.1²); ∂L/∂o ~ N(0,1).
//
// Counting (per call; `count<V>(mode, options)` gives the same numbers without running anything).
// Per token and value head the router writes kw and reads kr routed partitions (top-kw and top-kr of the
// same scores, so they overlap in min(kw, kr); router::dense: all N; partition::single: the one state),
// plus the shared partition, which is written and read:
//     wr = shared + min(kw, kr)   written and read        wo = max(0, kw − kr)   written only
//     ro = max(0, kr − kw)        read only               P  = N + shared        partitions in the state
// * state bytes (fp32 state, 4 bytes per element; what the call must touch, SPEC §11 C8):
//     decode   tokens · HV · K·V·4 · (2·(wr + wo) + ro)      a written state is read and written, a read-only
//              state read: for SSE top-k<kw> + shared that is 2·(1 + kw) states per token, not 2·P
//              (for T > 1 this is the token-by-token traffic, an upper bound of the compulsory one)
//     prefill  S·P·HV·K·V·4 · (initial_state ? 1 : 0) + S·P·HV·K·V·4 · (final_state ? 1 : 0)
//     train    prefill's + S·P·HV·K·V·4 · 2 with initial_state (h0 read again, ∂L/∂h0 written)
//   state_bytes_all: the decode figure if every one of the P partitions were read and written per token.
// * I/O bytes: every input tensor read once and o written once (train: again the inputs and ∂L/∂o read and
//   every input's gradient written, in the input type). bytes = state bytes + I/O bytes.
// * nominal FLOPs ("recurrent-equivalent": the same count for every algorithm and strategy, not a hardware
//   counter): per token and value head K·V · (wr·(W + R) + wo·W + ro·R), with R = 2 (the read hᵀq, one
//   multiply-add per element) and W from decay_flops<Decay>:
//     family diagonal (none, scalar, gated_key)  W = 2   (the rank-1 write k vᵀ; the decay's scaling is not
//                                                         counted): 4·K·V per written-and-read state
//     family delta (gated_delta_rule)            W = 4   (the read hᵀk and the rank-1 update): 6·K·V
//     family recurrent_only (your own policy)    W = 2, unless you specialise decay_flops for it
//   train: 3× the forward's count (a backward costs about two forwards: gradients of both operands).
// * FLOP/s fraction: of the fp32 FMA peak (CPU; GPU with fp32 inputs or without tensor cores) or of the
//   bf16 tensor-core peak (GPU, bf16 inputs, chunked forms of the diagonal family).
//
// Roofline, measured once per process (per thread count on the CPU) by cpu_roofline(threads): copy
// bandwidth = bytes read + written per second by `threads` threads each memcpy-ing its slice of two
// buffers of max(64 MiB, 4 × LLC), median of 7; FMA peak = `threads` threads each running 12 independent
// chains of Eigen packet multiply-adds (the widest SIMD this translation unit is compiled for: build with
// -march=native to see AVX-512), 2 FLOPs per lane, median of 3. options.roofline = false skips it (the
// fractions are then NaN, null in JSON).
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "linstate.hpp"
#include "testing/inputs.hpp"

namespace linstate::bench {

//! What one timed call does (see the top of this header).
enum class mode { decode, prefill, train };
//! The element type of the inputs and outputs (the state is always fp32).
enum class scalar_type { fp32, bf16 };

inline const char* to_string(mode m) { return m == mode::decode ? "decode" : m == mode::prefill ? "prefill" : "train"; }
inline const char* to_string(scalar_type s) { return s == scalar_type::fp32 ? "float32" : "bfloat16"; }

//! \brief Sizes, inputs and timing of one measurement. Designated initialisers in this order:
//! `{.B = 16, .T = 1, .H = 8, .HV = 8, .K = 128, .V = 128, .N = ..., .dtype = ..., .reps = ...}`.
struct options {
  // --- sizes (SPEC §1.1) ------------------------------------------------------------------------
  index_t B = 1;    //!< sequences
  index_t T = 0;    //!< tokens per sequence; 0 = the mode's default: decode 1, prefill and train 1024
  index_t H = 8;    //!< query / key heads
  index_t HV = 0;   //!< value heads, a multiple of H; 0 = H
  index_t K = 128;  //!< key dimension
  index_t V = 128;  //!< value dimension
  int N = dynamic;  //!< routed partitions, for partition::routed<dynamic> (or equal to a fixed N)
  int kw = dynamic;  //!< partitions written per token, for router::top_k<dynamic, ...>
  int kr = dynamic;  //!< partitions read per token, for router::top_k<..., dynamic> (default kw)
  // --- inputs -------------------------------------------------------------------------------------
  //! input / output element type (state and accumulation: fp32); empty = fp32, or the element type a
  //! call with an explicit one (`decode<V, Eigen::bfloat16>`) is compiled for
  std::optional<scalar_type> dtype{};
  bool initial_state = false;  //!< prefill, train: start from a random state (train: ∂L/∂h0 written too)
  bool final_state = true;     //!< prefill, train: write the final state
  //! train: the forward keeps its chunk states for the backward (linstate::saved_states; the calls that keep
  //! them: its documentation), as a training step does; false: the backward recomputes them
  bool saved_states = true;
  std::uint64_t seed = 2024;   //!< the inputs are a function of the seed and the sizes
  linstate::options call{};    //!< passed to every call (scale, gates); N, kw, kr above are copied into it
  // --- timing ---------------------------------------------------------------------------------------
  int threads = 0;         //!< CPU threads; 0 = the backend value's (cpu{.threads}; its 0 = every OpenMP thread)
  int reps = 0;            //!< timed calls; 0 = as many as fit in budget_ms, within [min_reps, max_reps]
  int min_reps = 5;        //!< fewest timed calls when reps = 0
  int max_reps = 1000;     //!< most timed calls when reps = 0
  double budget_ms = 200;  //!< time aimed at for the timed calls when reps = 0 (flushes included)
  int warmup = 10;         //!< most untimed warm-up calls (after the first call); 0 = none
  double warmup_ms = 25;   //!< warm-up time aimed at
  bool cold_cache = false;  //!< flush the last-level cache (GPU: L2) before every timed call
  bool graph = false;       //!< CUDA decode only: time R steps captured into one CUDA graph (per-step time)
  bool roofline = true;     //!< measure the machine's roofline (once per process) and report the fractions
  std::string name{};       //!< the variant's name in the output; empty = linstate::describe<V>()
};

//! The element-type argument of decode / prefill / train that takes the type from options.dtype at
//! run time: `decode<V>(be, o)` compiles fp32 and bf16 in. `decode<V, float>(be, o)` or
//! `decode<V, Eigen::bfloat16>(be, o)` compiles one (half the compile time); options.dtype may then be
//! left empty or must name the same type.
struct runtime_dtype {};

//! scalar_type::fp32 for float, bf16 for Eigen::bfloat16.
template <class Scalar>
constexpr scalar_type dtype_of() {
  static_assert(std::is_same_v<Scalar, float> || std::is_same_v<Scalar, Eigen::bfloat16>,
                "linstate::bench: the element type is float or Eigen::bfloat16 (or runtime_dtype: from options.dtype)");
  return std::is_same_v<Scalar, float> ? scalar_type::fp32 : scalar_type::bf16;
}

//! \brief FLOPs per state element that a transition policy costs per written token (`write`) and per
//! read (`read`), for the nominal FLOP count. Specialise it for a policy of yours:
//! \code
//!   template <> struct linstate::bench::decay_flops<my_decay> { static constexpr double write = 5, read = 2; };
//! \endcode
template <class Decay, class Family = typename Decay::family>
struct decay_flops {
  static constexpr double write = 2;  //!< the rank-1 write, one multiply-add per element
  static constexpr double read = 2;   //!< the read hᵀq, one multiply-add per element
};
template <class Decay>
struct decay_flops<Decay, family::delta> {
  static constexpr double write = 4;  //!< the read hᵀk and the rank-1 update
  static constexpr double read = 2;
};

//! \brief Order statistics of repeated timings (seconds unless said).
struct stats {
  double median = 0, p20 = 0, p80 = 0, min = 0, max = 0, mean = 0;
  int n = 0;  //!< samples
};

//! The q-quantile (0 ≤ q ≤ 1) of ascending `sorted`, by linear interpolation between order statistics
//! (numpy.percentile's and torch.quantile's default). Throws linstate::error on an empty sample.
inline double percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) throw error("linstate::bench::percentile: empty sample");
  if (!(q >= 0 && q <= 1)) throw error("linstate::bench::percentile: q = " + std::to_string(q) + " is not in [0, 1]");
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const std::size_t lo = static_cast<std::size_t>(pos), hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (pos - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

//! Median, p20, p80, min, max and mean of `samples` (any order). An empty sample gives n = 0.
inline stats summarize(std::vector<double> samples) {
  stats s;
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  s.n = static_cast<int>(samples.size());
  s.median = percentile(samples, 0.5), s.p20 = percentile(samples, 0.2), s.p80 = percentile(samples, 0.8);
  s.min = samples.front(), s.max = samples.back();
  double sum = 0;
  for (double x : samples) sum += x;
  s.mean = sum / static_cast<double>(samples.size());
  return s;
}

//! \brief Work of one call, from the sizes and the variant alone (see the top of this header).
struct counts {
  double tokens = 0;           //!< B·T
  double state_bytes = 0;      //!< fp32 state bytes read + written
  double state_bytes_all = 0;  //!< decode: the same if all P partitions were read and written per token
  double io_bytes = 0;         //!< inputs read + outputs written (train: + the backward's)
  double flops = 0;            //!< nominal FLOPs
  double bytes() const { return state_bytes + io_bytes; }
};

//! \brief The machine's measured ceilings.
struct roofline {
  std::string backend;           //!< "cpu" or "cuda"
  std::string device;            //!< the CPU's model name or the GPU's name
  int threads = 0;               //!< CPU: the threads the figures were measured with
  double copy_bytes = 0;         //!< bytes read + written by one timed copy
  stats copy_time{};             //!< seconds per copy
  double copy_bytes_per_s = 0;   //!< copy_bytes / copy_time.median
  double fma_flop_per_s = 0;     //!< fp32 multiply-add peak (2 FLOPs per multiply-add)
  double tensor_flop_per_s = 0;  //!< GPU: bf16 tensor-core peak (0 on the CPU)
  std::string method{};          //!< how it was measured
  bool measured() const { return copy_bytes_per_s > 0; }
};

//! \brief One measurement: what ran, its times, its work and the rates against the roofline.
struct result {
  std::string variant, spec, mode, backend, device, algorithm, strategy, dtype;
  index_t B = 0, T = 0, H = 0, HV = 0, K = 0, V = 0, S = 0, N = 0, P = 0;
  int kw = 0, kr = 0;
  int threads = 0;        //!< CPU threads (0 on the GPU)
  bool cold_cache = false, graph = false, initial_state = false, final_state = false;
  int graph_steps = 0;    //!< CUDA graph: steps per replay
  int warmup = 0;         //!< untimed warm-up calls after the first
  stats time{};           //!< seconds per call (graph: per step)
  stats host{};           //!< CUDA decode: the host's time to enqueue one call (n = 0 otherwise)
  std::vector<double> samples{};  //!< the timed calls, seconds, in order (graph: per-step time of each replay)
  counts work{};
  roofline machine{};
  // rates at the median time
  double tokens_per_s = 0, bytes_per_s = 0, state_bytes_per_s = 0, flop_per_s = 0;
  double copy_fraction = std::numeric_limits<double>::quiet_NaN();  //!< bytes_per_s / machine.copy_bytes_per_s
  std::string peak_kind = "fma";                                     //!< "fma" or "tensor_bf16"
  double peak_flop_per_s = 0;
  double flop_fraction = std::numeric_limits<double>::quiet_NaN();  //!< flop_per_s / peak_flop_per_s
};

namespace detail {

[[noreturn]] inline void bench_fail(const std::string& api, const std::string& what) { throw error(api + ": " + what); }

//! Options resolved against a variant: every size, the call options, the router's kw / kr.
struct resolved {
  bench::mode mode = bench::mode::decode;
  index_t B = 1, T = 1, H = 1, HV = 1, K = 1, V = 1, S = 1, N = 1, P = 1;
  int kw = 1, kr = 1;
  bool shared = false, routes = false, single = true;
  linstate::options call{};
};

template <class Spec>
resolved resolve(bench::mode m, const options& o, const std::string& api, bool cuda_backend = false) {
  static_assert(linstate::detail::validate<Spec>());
  using Pt = typename Spec::partition;
  using R = typename Spec::router;
  auto bad = [&](const std::string& field, long long value, const std::string& why) {
    bench_fail(api, "options." + field + " = " + std::to_string(value) + ": " + why);
  };
  resolved r;
  r.mode = m;
  if (o.B < 1) bad("B", o.B, "must be >= 1");
  if (o.T < 0) bad("T", o.T, "must be >= 1 (or 0 for the mode's default)");
  if (o.H < 1) bad("H", o.H, "must be >= 1");
  if (o.HV < 0) bad("HV", o.HV, "must be a multiple of H (or 0 for HV = H)");
  if (o.HV > 0 && o.HV % o.H != 0) bad("HV", o.HV, "must be a multiple of H = " + std::to_string(o.H));
  if (o.K < 1) bad("K", o.K, "must be >= 1");
  if (o.V < 1) bad("V", o.V, "must be >= 1");
  if (o.threads < 0) bad("threads", o.threads, "must be >= 0 (0 = the backend's default)");
  if (o.reps < 0) bad("reps", o.reps, "must be >= 0 (0 = from budget_ms)");
  if (o.min_reps < 1) bad("min_reps", o.min_reps, "must be >= 1");
  if (o.max_reps < o.min_reps) bad("max_reps", o.max_reps, "must be >= min_reps = " + std::to_string(o.min_reps));
  if (o.warmup < 0) bad("warmup", o.warmup, "must be >= 0");
  if (!(o.budget_ms > 0)) bench_fail(api, "options.budget_ms = " + std::to_string(o.budget_ms) + ": must be > 0");
  if (!(o.warmup_ms >= 0)) bench_fail(api, "options.warmup_ms = " + std::to_string(o.warmup_ms) + ": must be >= 0");
  if (o.graph && m != bench::mode::decode)
    bench_fail(api, "options.graph is for decode steps (a CUDA graph of decode steps); this is " + std::string(to_string(m)));
  if (o.graph && !cuda_backend) bench_fail(api, "options.graph needs linstate::cuda (CUDA graphs); this is the CPU backend");
  r.B = o.B, r.S = o.B, r.H = o.H, r.HV = o.HV > 0 ? o.HV : o.H, r.K = o.K, r.V = o.V;
  r.T = o.T > 0 ? o.T : (m == bench::mode::decode ? 1 : 1024);
  r.call = o.call;

  // partitions
  r.single = Pt::is_single;
  if constexpr (Pt::is_single) {
    if (o.N != dynamic) bad("N", o.N, "the variant has partition::single (options.N is for partition::routed<dynamic>)");
    r.N = 1;
  } else {
    if constexpr (Pt::num_routed == dynamic) {
      if (o.N == dynamic) bench_fail(api, "options.N is required: the variant has partition::routed<dynamic>");
      if (o.N < 1) bad("N", o.N, "must be >= 1");
      r.N = o.N;
      r.call.num_partitions = o.N;
    } else {
      if (o.N != dynamic && o.N != Pt::num_routed)
        bad("N", o.N, "the variant fixes N = " + std::to_string(Pt::num_routed) + " (partition::routed<" +
                          std::to_string(Pt::num_routed) + ">)");
      r.N = Pt::num_routed;
    }
  }
  r.shared = Pt::has_shared;
  r.P = r.N + (r.shared ? 1 : 0);

  // the router's write / read sets
  r.routes = R::routes;
  if constexpr (R::routes) {
    auto fixed = [&](const char* field, int given, int compile_time) {
      if (given == dynamic) return;
      if (given < 1) bad(field, given, "must be >= 1");
      if (compile_time != dynamic && given != compile_time)
        bad(field, given, std::string("the router fixes ") + field + " = " + std::to_string(compile_time));
    };
    if constexpr (requires { R::num_writer; }) {
      if (R::num_writer == dynamic && o.kw == dynamic && o.call.num_writer == dynamic)
        bench_fail(api, std::string("options.kw is required: the variant's router (") + R::name + ") has kw = linstate::dynamic");
      fixed("kw", o.kw, R::num_writer);
    }
    else fixed("kw", o.kw, dynamic);
    if constexpr (requires { R::num_reader; }) fixed("kr", o.kr, R::num_reader);
    else fixed("kr", o.kr, dynamic);
    if (o.kw != dynamic) r.call.num_writer = o.kw;
    if (o.kr != dynamic) r.call.num_reader = o.kr;
    if constexpr (requires { R::num_writer; }) {
      if (R::num_writer != dynamic && r.call.num_writer == R::num_writer) r.call.num_writer = dynamic;
    }
    if constexpr (requires { R::num_reader; }) {
      if (R::num_reader != dynamic && r.call.num_reader == R::num_reader) r.call.num_reader = dynamic;
      if (R::num_reader == dynamic && r.call.num_reader == dynamic) {  // kr defaults to kw
        if constexpr (requires { R::num_writer; }) r.call.num_reader = R::num_writer != dynamic ? R::num_writer : r.call.num_writer;
      }
    }
    const auto cfg = R::configure(r.call, r.N, api, false);
    r.kw = cfg.kw, r.kr = cfg.kr;
  } else {
    if (o.kw != dynamic) bad("kw", o.kw, std::string("the variant's router (") + R::name + ") does not select partitions");
    if (o.kr != dynamic) bad("kr", o.kr, std::string("the variant's router (") + R::name + ") does not select partitions");
    r.kw = r.kr = static_cast<int>(r.N);  // every partition written and read (1 for partition::single)
  }
  return r;
}

//! Per token and value head: states written and read (wr), written only (wo), read only (ro).
struct touch {
  double wr = 0, wo = 0, ro = 0;
};
inline touch touched(const resolved& r) {
  touch t;
  const int kw = r.kw, kr = r.kr;
  t.wr = (r.shared ? 1 : 0) + std::min(kw, kr);
  t.wo = std::max(0, kw - kr);
  t.ro = std::max(0, kr - kw);
  return t;
}

//! Shape of one input (given = the variant takes it).
struct input_shape {
  bool given = false;
  shape_t shape{};
  double numel() const { return given ? static_cast<double>(shape.numel()) : 0.0; }
};
//! The inputs variant Spec takes at these sizes (the shapes random_inputs draws).
struct input_shapes {
  input_shape q, k, v, g, beta, shared_q, shared_k, shared_g, shared_beta, router_logits, router_params;
  //! Elements of the input-typed tensors (router_params is fp32 and counted apart).
  double scalar_numel() const {
    return q.numel() + k.numel() + v.numel() + g.numel() + beta.numel() + shared_q.numel() + shared_k.numel() +
           shared_g.numel() + shared_beta.numel() + router_logits.numel();
  }
};

template <class Spec>
input_shapes shapes_of(const resolved& r) {
  using D = typename Spec::decay;
  using R = typename Spec::router;
  input_shapes s;
  const shape_t qk{r.B, r.T, r.H, r.K};
  const index_t gw = gate_width(D::gate, r.K, r.V);
  const shape_t gs = D::gate == gate_extent::head ? shape_t{r.B, r.T, r.HV} : shape_t{r.B, r.T, r.HV, gw};
  s.q = {true, qk}, s.k = {true, qk}, s.v = {true, {r.B, r.T, r.HV, r.V}};
  s.g = {D::gate != gate_extent::none, gs};
  s.beta = {D::uses_beta, {r.B, r.T, r.HV}};
  if (r.shared) {
    s.shared_q = s.q, s.shared_k = s.k, s.shared_g = s.g, s.shared_beta = s.beta;
  }
  if constexpr (R::routes) {
    s.router_logits = {true, {r.B, r.T, r.N}};
    if constexpr (requires { R::params_per_partition; }) {
      if constexpr (R::params_per_partition > 0)
        s.router_params = {true, R::params_per_partition == 1 ? shape_t{r.N} : shape_t{r.N, R::params_per_partition}};
    }
  }
  return s;
}

//! The counts of the top of this header for resolved sizes and an element size.
template <class Spec>
counts count_resolved(const resolved& r, bool initial_state, bool final_state, double elem_bytes) {
  using D = typename Spec::decay;
  const touch t = touched(r);
  const double kv = static_cast<double>(r.K) * static_cast<double>(r.V);
  const double tokens = static_cast<double>(r.B) * static_cast<double>(r.T);
  const double HV = static_cast<double>(r.HV);
  const double state_numel = static_cast<double>(r.S) * static_cast<double>(r.P) * HV * kv;
  counts c;
  c.tokens = tokens;
  const double W = decay_flops<D>::write, Rd = decay_flops<D>::read;
  const double fwd_flops = tokens * HV * kv * (t.wr * (W + Rd) + t.wo * W + t.ro * Rd);
  const input_shapes in = shapes_of<Spec>(r);
  const double in_bytes = in.scalar_numel() * elem_bytes + in.router_params.numel() * 4.0;
  const double o_bytes = tokens * HV * static_cast<double>(r.V) * elem_bytes;
  c.state_bytes_all = tokens * HV * kv * 4.0 * 2.0 * static_cast<double>(r.P);
  switch (r.mode) {
    case mode::decode:
      c.state_bytes = tokens * HV * kv * 4.0 * (2.0 * (t.wr + t.wo) + t.ro);
      c.io_bytes = in_bytes + o_bytes;
      c.flops = fwd_flops;
      break;
    case mode::prefill:
      c.state_bytes = state_numel * 4.0 * ((initial_state ? 1.0 : 0.0) + (final_state ? 1.0 : 0.0));
      c.io_bytes = in_bytes + o_bytes;
      c.flops = fwd_flops;
      c.state_bytes_all = c.state_bytes;
      break;
    case mode::train:
      c.state_bytes = state_numel * 4.0 * ((initial_state ? 3.0 : 0.0) + (final_state ? 1.0 : 0.0));
      // forward: inputs + o; backward: inputs + dO read, a gradient of every input-typed tensor written
      c.io_bytes = (in_bytes + o_bytes) + (in_bytes + o_bytes) + in.scalar_numel() * elem_bytes;
      c.flops = 3.0 * fwd_flops;
      c.state_bytes_all = c.state_bytes;
      break;
  }
  return c;
}

// --- text ------------------------------------------------------------------------------------------
inline std::string fmt(const char* f, double x) {
  char b[64];
  std::snprintf(b, sizeof b, f, x);
  return b;
}
//! 52.8 k, 1.73 G (decimal prefixes)
inline std::string si(double x, const std::string& unit = "") {
  if (!std::isfinite(x)) return "-";
  const char* p[] = {"", " k", " M", " G", " T", " P"};
  int i = 0;
  double a = std::fabs(x);
  while (a >= 1000 && i < 5) a /= 1000, x /= 1000, ++i;
  std::string r = fmt(a >= 100 ? "%.0f" : a >= 10 ? "%.1f" : "%.2f", x) + p[i];
  if (!unit.empty()) r += (i ? "" : " ") + unit;
  return r;
}
//! 2.00 MiB (binary prefixes)
inline std::string bytes_text(double x) {
  const char* p[] = {" B", " KiB", " MiB", " GiB", " TiB"};
  int i = 0;
  while (std::fabs(x) >= 1024 && i < 4) x /= 1024, ++i;
  return fmt(i == 0 ? "%.0f" : std::fabs(x) >= 100 ? "%.0f" : std::fabs(x) >= 10 ? "%.1f" : "%.2f", x) + p[i];
}
//! 303.1 us, 4.56 ms, 1.20 s
inline std::string seconds_text(double s) {
  if (!std::isfinite(s)) return "-";
  if (s < 1e-6) return fmt("%.1f ns", s * 1e9);
  if (s < 1e-3) return fmt("%.2f us", s * 1e6);
  if (s < 1) return fmt("%.3f ms", s * 1e3);
  return fmt("%.3f s", s);
}
inline std::string percent_text(double f) { return std::isfinite(f) ? fmt("%.1f%%", 100 * f) : std::string("-"); }

inline std::string json_string(const std::string& s) {
  std::string r = "\"";
  for (const char c : s) {
    switch (c) {
      case '"': r += "\\\""; break;
      case '\\': r += "\\\\"; break;
      case '\n': r += "\\n"; break;
      case '\t': r += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          r += b;
        } else {
          r += c;
        }
    }
  }
  return r + "\"";
}
inline std::string json_number(double x) {
  if (!std::isfinite(x)) return "null";
  char b[40];
  std::snprintf(b, sizeof b, "%.9g", x);
  return b;
}
inline std::string json_stats(const stats& s) {
  return "{\"median_s\": " + json_number(s.median) + ", \"p20_s\": " + json_number(s.p20) + ", \"p80_s\": " + json_number(s.p80) +
         ", \"min_s\": " + json_number(s.min) + ", \"max_s\": " + json_number(s.max) + ", \"mean_s\": " + json_number(s.mean) +
         ", \"n\": " + std::to_string(s.n) + "}";
}

// --- CPU machinery -----------------------------------------------------------------------------------

//! Threads linstate::cpu{.threads = t} runs with (this translation unit's OpenMP setting).
inline int cpu_thread_count(int t) { return linstate::cpu_threads(cpu{.threads = t}); }

//! Bytes of the last-level cache of CPU 0 (Linux sysfs), or 32 MiB when unknown.
inline std::size_t llc_bytes() {
  std::size_t best = 0;
  for (int i = 0; i < 8; ++i) {
    std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/size");
    if (!f) continue;
    std::string s;
    f >> s;
    if (s.empty()) continue;
    std::size_t v = static_cast<std::size_t>(std::strtoull(s.c_str(), nullptr, 10));
    const char u = s.back();
    if (u == 'K') v <<= 10;
    if (u == 'M') v <<= 20;
    best = std::max(best, v);
  }
  return best ? best : std::size_t{32} << 20;
}

//! The CPU's model name (/proc/cpuinfo), or "cpu".
inline std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      const auto c = line.find(':');
      if (c != std::string::npos) return line.substr(line.find_first_not_of(" \t", c + 1));
    }
  return "cpu";
}

//! Evicts the last-level cache: writes and reads back a buffer of max(32 MiB, 3 × LLC).
class cache_flusher {
 public:
  static cache_flusher& instance() {
    static cache_flusher f;
    return f;
  }
  void flush() {
    ++pass_;
    std::memset(buf_.data(), static_cast<int>(pass_ & 0x7f), buf_.size());
    unsigned long long sum = 0;
    for (std::size_t i = 0; i < buf_.size(); i += 64) sum += static_cast<unsigned char>(buf_[i]);
    sink_ = sum;
  }
  std::size_t bytes() const { return buf_.size(); }

 private:
  cache_flusher() : buf_(std::max<std::size_t>(std::size_t{32} << 20, 3 * llc_bytes())) {}
  std::vector<char> buf_;
  unsigned pass_ = 0;
  volatile unsigned long long sink_ = 0;
};

//! What measure() returns.
struct measured {
  stats time{};
  std::vector<double> samples{};
  int warmup = 0;
};

//! Timed calls of `call` on the host clock, by the method at the top of this header; `before` runs
//! untimed before every timed call (the cache flush).
template <class Call, class Before>
measured measure_host(Call&& call, Before&& before, const options& o) {
  using clock = std::chrono::steady_clock;
  auto timed = [&](double* with_before) {
    const auto t_before = clock::now();
    before();
    const auto t0 = clock::now();
    call();
    const auto t1 = clock::now();
    if (with_before) *with_before = std::chrono::duration<double>(t1 - t_before).count();
    return std::chrono::duration<double>(t1 - t0).count();
  };
  call();
  double est_total = 0;
  const double est = std::max(timed(&est_total), 1e-9);
  est_total = std::max(est_total, est);
  measured m;
  m.warmup = o.warmup == 0 ? 0 : std::min(o.warmup, std::max(1, static_cast<int>(std::ceil(o.warmup_ms * 1e-3 / est))));
  for (int i = 0; i < m.warmup; ++i) call();
  const int n = o.reps > 0 ? o.reps
                           : std::clamp(static_cast<int>(std::min(1e9, std::ceil(o.budget_ms * 1e-3 / est_total))), o.min_reps,
                                        o.max_reps);
  m.samples.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) m.samples.push_back(timed(nullptr));
  m.time = summarize(m.samples);
  return m;
}

//! One thread's fp32 multiply-add peak kernel: 12 independent chains of Eigen packets; returns FLOPs.
inline double fma_chains(std::int64_t iters, volatile float* sink) {
  using Packet = typename Eigen::internal::packet_traits<float>::type;
  constexpr int lanes = Eigen::internal::packet_traits<float>::size;
  constexpr int chains = 12;
  const Packet a = Eigen::internal::pset1<Packet>(0.9999999f), b = Eigen::internal::pset1<Packet>(1e-7f);
  Packet acc[chains];
  for (int j = 0; j < chains; ++j) acc[j] = Eigen::internal::pset1<Packet>(1.0f + 1e-3f * static_cast<float>(j));
  // the chains written out (constant indices), so that they stay in registers at any optimisation level
  const auto step = [&]<std::size_t... J>(std::index_sequence<J...>) { ((acc[J] = Eigen::internal::pmadd(acc[J], a, b)), ...); };
  for (std::int64_t i = 0; i < iters; ++i) step(std::make_index_sequence<chains>{});
  float s = 0;
  for (int j = 0; j < chains; ++j) s += Eigen::internal::predux(acc[j]);
  *sink = s;
  return 2.0 * lanes * chains * static_cast<double>(iters);
}

inline roofline measure_cpu_roofline(int threads) {
  using clock = std::chrono::steady_clock;
  roofline rf;
  rf.backend = "cpu", rf.device = cpu_model(), rf.threads = threads;
  // copy bandwidth
  const std::size_t n = std::min<std::size_t>(std::size_t{512} << 20, std::max<std::size_t>(std::size_t{64} << 20, 4 * llc_bytes()));
  std::vector<char> src(n, 1), dst(n, 0);
  auto copy_once = [&] {
    const auto t0 = clock::now();
#if LINSTATE_HAS_OPENMP
#pragma omp parallel num_threads(threads) if (threads > 1)
#endif
    {
#if LINSTATE_HAS_OPENMP
      const int nt = omp_get_num_threads(), id = omp_get_thread_num();
#else
      const int nt = 1, id = 0;
#endif
      const std::size_t lo = n * static_cast<std::size_t>(id) / static_cast<std::size_t>(nt);
      const std::size_t hi = n * static_cast<std::size_t>(id + 1) / static_cast<std::size_t>(nt);
      std::memcpy(dst.data() + lo, src.data() + lo, hi - lo);
    }
    return std::chrono::duration<double>(clock::now() - t0).count();
  };
  copy_once();
  std::vector<double> t;
  for (int i = 0; i < 7; ++i) t.push_back(copy_once());
  rf.copy_bytes = 2.0 * static_cast<double>(n);
  rf.copy_time = summarize(t);
  rf.copy_bytes_per_s = rf.copy_bytes / rf.copy_time.median;
  // FMA peak: calibrate to about 40 ms per run
  volatile float sink = 0;
  std::int64_t iters = 1 << 16;
  for (;;) {
    const auto t0 = clock::now();
    fma_chains(iters, &sink);
    const double s = std::chrono::duration<double>(clock::now() - t0).count();
    if (s > 4e-3 || iters > (std::int64_t{1} << 34)) {
      iters = static_cast<std::int64_t>(static_cast<double>(iters) * 40e-3 / std::max(s, 1e-6)) + 1;
      break;
    }
    iters *= 8;
  }
  std::vector<double> rates;
  for (int r = 0; r < 3; ++r) {
    double flops = 0;
    const auto t0 = clock::now();
#if LINSTATE_HAS_OPENMP
#pragma omp parallel num_threads(threads) if (threads > 1) reduction(+ : flops)
#endif
    { flops += fma_chains(iters, &sink); }
    rates.push_back(flops / std::chrono::duration<double>(clock::now() - t0).count());
  }
  rf.fma_flop_per_s = summarize(rates).median;
  rf.method = "copy: " + std::to_string(threads) + " thread(s) memcpy-ing slices of 2 x " + bytes_text(static_cast<double>(n)) +
              ", bytes read + written, median of 7; FMA: " + std::to_string(threads) + " thread(s) x 12 chains of " +
              std::to_string(static_cast<int>(Eigen::internal::packet_traits<float>::size)) +
              "-lane Eigen packet multiply-adds, median of 3";
  return rf;
}

//! Fills the rates of `r` from its times, work and roofline.
inline void finish(result& r) {
  const double t = r.time.median;
  if (t > 0) {
    r.tokens_per_s = r.work.tokens / t;
    r.bytes_per_s = r.work.bytes() / t;
    r.state_bytes_per_s = r.work.state_bytes / t;
    r.flop_per_s = r.work.flops / t;
  }
  r.peak_flop_per_s = r.peak_kind == "tensor_bf16" ? r.machine.tensor_flop_per_s : r.machine.fma_flop_per_s;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  r.copy_fraction = r.machine.copy_bytes_per_s > 0 ? r.bytes_per_s / r.machine.copy_bytes_per_s : nan;
  r.flop_fraction = r.peak_flop_per_s > 0 ? r.flop_per_s / r.peak_flop_per_s : nan;
}

//! The name of an algorithm tag in the results ("recurrent", "chunked<64>", "automatic").
template <class Algorithm>
std::string algorithm_name() {
  if constexpr (requires { Algorithm::chunk_size; }) return "chunked<" + std::to_string(Algorithm::chunk_size) + ">";
  else return Algorithm::name;
}

//! The fields of `r` every backend fills the same way.
template <class Spec>
result describe_run(const resolved& rs, const options& o, const char* backend, const std::string& algorithm,
                    const char* strategy) {
  result r;
  r.spec = linstate::describe<Spec>();
  r.variant = o.name.empty() ? r.spec : o.name;
  r.mode = to_string(rs.mode), r.backend = backend, r.dtype = to_string(o.dtype.value_or(scalar_type::fp32));
  r.algorithm = algorithm, r.strategy = strategy;
  r.B = rs.B, r.T = rs.T, r.H = rs.H, r.HV = rs.HV, r.K = rs.K, r.V = rs.V, r.S = rs.S, r.N = rs.N, r.P = rs.P;
  r.kw = rs.kw, r.kr = rs.kr;
  r.cold_cache = o.cold_cache, r.graph = o.graph;
  r.initial_state = rs.mode != mode::decode && o.initial_state;
  r.final_state = rs.mode != mode::decode && o.final_state;
  r.work = count_resolved<Spec>(rs, r.initial_state, r.final_state, o.dtype == scalar_type::bf16 ? 2.0 : 4.0);
  return r;
}

template <class Alg, class Strategy>
constexpr void check_tags() {
  static_assert(is_algorithm_v<Alg>,
                "linstate::bench: the argument after the options must be an algorithm (linstate::recurrent{}, chunked<C>{}, "
                "automatic{})");
  static_assert(is_strategy_v<Strategy>, "linstate::bench: the argument after the algorithm must be a strategy (linstate::mask{}, "
                                         "varlen{})");
}

//! The algorithm and the strategy among the trailing arguments (at most two: algorithm, strategy).
template <class DefaultAlgorithm, class... Tags>
struct tags_of {
  static_assert(sizeof...(Tags) <= 2, "linstate::bench: after the options come at most an algorithm and a strategy");
  using algorithm = DefaultAlgorithm;
  using strategy = varlen;
};
template <class DefaultAlgorithm, class A>
struct tags_of<DefaultAlgorithm, A> {
  using algorithm = std::remove_cvref_t<A>;
  using strategy = varlen;
};
template <class DefaultAlgorithm, class A, class S>
struct tags_of<DefaultAlgorithm, A, S> {
  using algorithm = std::remove_cvref_t<A>;
  using strategy = std::remove_cvref_t<S>;
};

//! Calls f(type_identity<element type>{}, options with dtype set): both types for runtime_dtype
//! (picked by options.dtype), else Scalar, after checking options.dtype against it.
template <class Scalar, class F>
result with_dtype(const options& o, const char* api, F&& f) {
  options oo = o;
  if constexpr (std::is_same_v<Scalar, runtime_dtype>) {
    oo.dtype = o.dtype.value_or(scalar_type::fp32);
    if (*oo.dtype == scalar_type::bf16) return f(std::type_identity<Eigen::bfloat16>{}, oo);
    return f(std::type_identity<float>{}, oo);
  } else {
    constexpr scalar_type want = dtype_of<Scalar>();
    if (o.dtype && *o.dtype != want)
      bench_fail(api, std::string("options.dtype = ") + to_string(*o.dtype) + " but this call is compiled for " + to_string(want) +
                          " only (its element-type argument)");
    oo.dtype = want;
    return f(std::type_identity<Scalar>{}, oo);
  }
}

}  // namespace detail

//! \brief The work of one call of `m` for variant `Spec` at sizes `o` (validated as by decode() etc.).
template <class Spec>
counts count(mode m, const options& o) {
  const auto r = detail::resolve<Spec>(m, o, "linstate::bench::count");
  const bool init = m != mode::decode && o.initial_state, fin = m != mode::decode && o.final_state;
  return detail::count_resolved<Spec>(r, init, fin, o.dtype == scalar_type::bf16 ? 2.0 : 4.0);
}

//! \brief This machine's copy bandwidth and FMA peak with `threads` CPU threads (0 = every OpenMP
//! thread), measured on the first call per thread count and remembered for the process (thread-safe).
inline roofline cpu_roofline(int threads = 0) {
  threads = detail::cpu_thread_count(threads);
  static std::mutex m;
  static std::map<int, roofline> known;
  const std::lock_guard<std::mutex> lock(m);
  auto it = known.find(threads);
  if (it == known.end()) it = known.emplace(threads, detail::measure_cpu_roofline(threads)).first;
  return it->second;
}

// ---------------------------------------------------------------------------------------------------
// The inputs, state and outputs of one measurement on the CPU
// ---------------------------------------------------------------------------------------------------

//! \brief Owned inputs, state, outputs and gradients of variant `Spec` for mode `m` at sizes `o`, in
//! element type `Scalar` (options.dtype is not used), and the calls the benchmark times. Google Benchmark
//! programs time these calls with their own loop:
//! \code
//!   linstate::bench::workload<gla, float> w(linstate::bench::mode::decode, {.B = 16});
//!   for (auto _ : st) w.decode(linstate::cpu{}, linstate::recurrent{});
//! \endcode
template <class Spec, class Scalar = float>
class workload {
 public:
  tensor<Scalar> q, k, v, g, beta;
  struct {
    tensor<Scalar> q, k, g, beta;
  } shared;
  tensor<Scalar> router_logits;
  tensor<float> router_params, initial_state;  //!< initial_state: prefill / train with options.initial_state
  tensor<float> state;                         //!< decode: [S,P,HV,K,V], updated in place by every decode()
  tensor<Scalar> o;                            //!< [B,T,HV,V]
  tensor<float> final_state;                   //!< prefill / train with options.final_state
  tensor<Scalar> d_o;                          //!< train: ∂L/∂o
  gradient_result<Scalar> grad;                //!< train: where backward() writes
  linstate::options call{};                    //!< the call options (N, kw, kr resolved)
  detail::resolved sizes{};
  bool keep_states = true;                     //!< train: options.saved_states
  linstate::saved_states saved;                //!< train: the chunk states the forward keeps for the backward

  workload(mode m, const options& opt, const std::string& api = "linstate::bench::workload")
      : sizes(detail::resolve<Spec>(m, opt, api)), keep_states(opt.saved_states) {
    call = sizes.call;
    testing::random_options ro;
    ro.initial_state = m == mode::decode || opt.initial_state;
    ro.gate_normalizer = 16.f;
    ro.router_margin = 0.f;
    testing::sizes sz{.B = sizes.B, .T = sizes.T, .H = sizes.H, .HV = sizes.HV, .K = sizes.K, .V = sizes.V};
    testing::owned_inputs r = testing::random_inputs<Spec>(sz, opt.seed, ro, call);
    q = convert(r.q), k = convert(r.k), v = convert(r.v), g = convert(r.g), beta = convert(r.beta);
    shared.q = convert(r.shared.q), shared.k = convert(r.shared.k), shared.g = convert(r.shared.g);
    shared.beta = convert(r.shared.beta), router_logits = convert(r.router_logits);
    router_params = std::move(r.router_params);
    for (float& x : r.initial_state.values()) x *= 0.1f;  // a mid-sequence state: N(0, 0.1²)
    if (m == mode::decode) state = std::move(r.initial_state);
    else initial_state = std::move(r.initial_state);
    o = tensor<Scalar>({sizes.B, sizes.T, sizes.HV, sizes.V});
    if (m != mode::decode && opt.final_state) final_state = tensor<float>({sizes.S, sizes.P, sizes.HV, sizes.K, sizes.V});
    if (m == mode::train) {
      std::mt19937_64 gen(opt.seed ^ 0xD0D0D0D0ull);
      std::normal_distribution<float> nd;
      d_o = tensor<Scalar>(o.shape());
      for (auto& x : d_o.values()) x = static_cast<Scalar>(nd(gen));
      auto like = [](const auto& t) { return t.empty() ? std::remove_cvref_t<decltype(t)>() : std::remove_cvref_t<decltype(t)>(t.shape()); };
      grad.q = like(q), grad.k = like(k), grad.v = like(v), grad.g = like(g), grad.beta = like(beta);
      grad.shared.q = like(shared.q), grad.shared.k = like(shared.k), grad.shared.g = like(shared.g);
      grad.shared.beta = like(shared.beta), grad.router_logits = like(router_logits);
      if (opt.initial_state) grad.initial_state = tensor<float>(initial_state.shape());
    }
  }

  //! The inputs of a call (views of the tensors above).
  inputs<Scalar> in() const {
    inputs<Scalar> i;
    i.q = vw(q), i.k = vw(k), i.v = vw(v), i.g = vw(g), i.beta = vw(beta);
    i.shared = {vw(shared.q), vw(shared.k), vw(shared.g), vw(shared.beta)};
    i.router_logits = vw(router_logits), i.router_params = vw(router_params), i.initial_state = vw(initial_state);
    return i;
  }
  gradients<Scalar> grads() {
    return {mv(grad.q), mv(grad.k), mv(grad.v), mv(grad.g), mv(grad.beta),
            {mv(grad.shared.q), mv(grad.shared.k), mv(grad.shared.g), mv(grad.shared.beta)},
            mv(grad.router_logits), mv(grad.initial_state)};
  }

  //! One decode call: forward_in_place on `state`.
  template <class Algorithm = recurrent, class Strategy = varlen>
  void decode(const cpu& be, Algorithm a = {}, Strategy s = {}) {
    forward_in_place<Spec>(be, in(), state.view(), o.view(), a, s, call);
  }
  //! One prefill call: forward into o (and final_state).
  template <class Algorithm = automatic, class Strategy = varlen>
  void prefill(const cpu& be, Algorithm a = {}, Strategy s = {}) {
    forward<Spec>(be, in(), outputs<Scalar>{o.view(), mv(final_state)}, a, s, call);
  }
  //! One training call: forward, then backward with d_o into grad (with keep_states, through `saved`).
  template <class Algorithm = automatic, class Strategy = varlen>
  void train(const cpu& be, Algorithm a = {}, Strategy s = {}) {
    const inputs<Scalar> i = in();
    if (keep_states) {
      forward<Spec>(be, i, outputs<Scalar>{o.view(), mv(final_state)}, saved, a, s, call);
      backward<Spec>(be, i, cotangents<Scalar>{.o = d_o.cview()}, grads(), saved, a, s, call);
    } else {
      forward<Spec>(be, i, outputs<Scalar>{o.view(), mv(final_state)}, a, s, call);
      backward<Spec>(be, i, cotangents<Scalar>{.o = d_o.cview()}, grads(), a, s, call);
    }
  }

 private:
  static tensor<Scalar> convert(tensor<float>& t) {
    if constexpr (std::is_same_v<Scalar, float>) {
      return std::move(t);
    } else {
      if (t.empty()) return tensor<Scalar>();
      tensor<Scalar> r(t.shape());
      for (index_t i = 0; i < t.numel(); ++i) r[i] = static_cast<Scalar>(t[i]);
      t = tensor<float>();
      return r;
    }
  }
  template <class T>
  static tensor_view<const T> vw(const tensor<T>& t) {
    return t.empty() ? tensor_view<const T>{} : t.cview();
  }
  template <class T>
  static tensor_view<T> mv(tensor<T>& t) {
    return t.empty() ? tensor_view<T>{} : t.view();
  }
};

namespace detail {

//! The timed call of mode M with algorithm A and strategy S. Only this function depends on A and S:
//! everything else of a measurement is instantiated once per (variant, mode, element type), which
//! keeps a translation unit that offers every algorithm and strategy small.
template <class Spec, mode M, class Scalar, class Algorithm, class Strategy>
void cpu_call(workload<Spec, Scalar>& w, const cpu& be) {
  if constexpr (M == mode::decode) w.decode(be, Algorithm{}, Strategy{});
  else if constexpr (M == mode::prefill) w.prefill(be, Algorithm{}, Strategy{});
  else w.train(be, Algorithm{}, Strategy{});
}

template <class Spec, mode M, class Scalar>
result run_cpu_typed(const cpu& be_in, const options& o, const std::string& api, void (*call_fn)(workload<Spec, Scalar>&, const cpu&),
                     const std::string& algorithm, const char* strategy) {
  cpu be = be_in;
  be.threads = o.threads > 0 ? o.threads : be_in.threads;
  workload<Spec, Scalar> w(M, o, api);
  result r = describe_run<Spec>(w.sizes, o, "cpu", algorithm, strategy);
  r.threads = cpu_thread_count(be.threads);
  auto call = [&] { call_fn(w, be); };
  measured m;
  if (o.cold_cache) {
    cache_flusher& f = cache_flusher::instance();
    m = measure_host(call, [&] { f.flush(); }, o);
  } else {
    m = measure_host(call, [] {}, o);
  }
  r.time = m.time, r.samples = std::move(m.samples), r.warmup = m.warmup;
  r.device = cpu_model();
  if (o.roofline) r.machine = cpu_roofline(r.threads);
  else r.machine.backend = "cpu", r.machine.device = r.device, r.machine.threads = r.threads;
  finish(r);
  return r;
}

template <class Spec, mode M, class Scalar, class DefaultAlgorithm, class... Tags>
result run_cpu(const cpu& be, const options& o, const char* api) {
  using A = typename tags_of<DefaultAlgorithm, Tags...>::algorithm;
  using S = typename tags_of<DefaultAlgorithm, Tags...>::strategy;
  check_tags<A, S>();
  return with_dtype<Scalar>(o, api, [&](auto type, const options& oo) {
    using T = typename decltype(type)::type;
    return run_cpu_typed<Spec, M, T>(be, oo, api, &cpu_call<Spec, M, T, A, S>, algorithm_name<A>(), S::name);
  });
}

}  // namespace detail

//! \brief Times decode steps of `Spec` on the CPU: forward_in_place on a carried state, T tokens per
//! sequence (default 1), algorithm recurrent{} unless given: `decode<V>(cpu{}, options[, algorithm[,
//! strategy]])`; `decode<V, float>(...)` / `decode<V, Eigen::bfloat16>(...)` compile one element type
//! only (see runtime_dtype). See the top of this header.
template <class Spec, class Scalar = runtime_dtype, class... Tags>
result decode(const cpu& be, const options& o = {}, Tags...) {
  return detail::run_cpu<Spec, mode::decode, Scalar, recurrent, Tags...>(be, o, "linstate::bench::decode");
}
//! \brief Times a forward pass of `Spec` over T tokens (default 1024) on the CPU (algorithm automatic{}
//! unless given).
template <class Spec, class Scalar = runtime_dtype, class... Tags>
result prefill(const cpu& be, const options& o = {}, Tags...) {
  return detail::run_cpu<Spec, mode::prefill, Scalar, automatic, Tags...>(be, o, "linstate::bench::prefill");
}
//! \brief Times a forward and a backward pass of `Spec` over T tokens (default 1024) on the CPU.
template <class Spec, class Scalar = runtime_dtype, class... Tags>
result train(const cpu& be, const options& o = {}, Tags...) {
  return detail::run_cpu<Spec, mode::train, Scalar, automatic, Tags...>(be, o, "linstate::bench::train");
}

//! Any other backend: its header was not included.
template <class Spec, class Scalar = runtime_dtype, class Backend, class... Args>
  requires(!std::is_same_v<std::remove_cvref_t<Backend>, cpu>)
result decode(const Backend&, const options& = {}, Args&&...) {
  static_assert(linstate::detail::dependent_false<Backend>,
                "linstate::bench: no decode() for this backend value; for linstate::cuda include <linstate/cuda/bench.cuh> "
                "from a .cu translation unit");
  return {};
}
template <class Spec, class Scalar = runtime_dtype, class Backend, class... Args>
  requires(!std::is_same_v<std::remove_cvref_t<Backend>, cpu>)
result prefill(const Backend&, const options& = {}, Args&&...) {
  static_assert(linstate::detail::dependent_false<Backend>,
                "linstate::bench: no prefill() for this backend value; for linstate::cuda include <linstate/cuda/bench.cuh> "
                "from a .cu translation unit");
  return {};
}
template <class Spec, class Scalar = runtime_dtype, class Backend, class... Args>
  requires(!std::is_same_v<std::remove_cvref_t<Backend>, cpu>)
result train(const Backend&, const options& = {}, Args&&...) {
  static_assert(linstate::detail::dependent_false<Backend>,
                "linstate::bench: no train() for this backend value; for linstate::cuda include <linstate/cuda/bench.cuh> "
                "from a .cu translation unit");
  return {};
}

// ---------------------------------------------------------------------------------------------------
// Output: text, JSON, Markdown
// ---------------------------------------------------------------------------------------------------

//! Several lines: what ran, the times, the rates and their fractions of the roofline.
inline std::ostream& operator<<(std::ostream& os, const result& r) {
  using namespace detail;
  const bool dec = r.mode == "decode";
  const char* per = dec ? "step" : "call";
  os << "linstate::bench " << r.mode << " " << r.variant << "\n";
  if (r.variant != r.spec) os << "  " << r.spec << "\n";
  os << "  " << r.backend << " (" << r.device;
  if (r.backend == "cpu") os << ", " << r.threads << (r.threads == 1 ? " thread" : " threads");
  os << "), " << r.dtype << ", " << r.algorithm << ", " << r.strategy << (r.cold_cache ? ", cold cache" : ", warm cache")
     << (r.graph ? ", CUDA graph of " + std::to_string(r.graph_steps) + " steps" : "") << "\n";
  os << "  B=" << r.B << " T=" << r.T << " H=" << r.H << " HV=" << r.HV << " K=" << r.K << " V=" << r.V;
  if (r.P > 1 || r.N > 1) os << " N=" << r.N << " kw=" << r.kw << " kr=" << r.kr << " P=" << r.P;
  os << "\n";
  os << "  per " << per << (r.mode == "train" ? " (forward + backward)" : "") << ": median " << seconds_text(r.time.median)
     << ", p20 " << seconds_text(r.time.p20) << ", p80 " << seconds_text(r.time.p80) << "  (" << r.time.n << " timed, "
     << r.warmup << " warm-up)\n";
  if (r.host.n > 0)
    os << "  host enqueue: median " << seconds_text(r.host.median) << ", p20 " << seconds_text(r.host.p20) << ", p80 "
       << seconds_text(r.host.p80) << "\n";
  os << "  tokens/s: " << si(r.tokens_per_s) << "\n";
  os << "  state: " << bytes_text(r.work.state_bytes) << " read + written per " << per;
  if (dec && r.work.state_bytes_all > r.work.state_bytes * 1.0001)
    os << " (all " << r.P << " partitions: " << bytes_text(r.work.state_bytes_all) << ", "
       << fmt("%.2f", r.work.state_bytes_all / r.work.state_bytes) << "x)";
  os << "; inputs + outputs " << bytes_text(r.work.io_bytes) << "\n";
  os << "  bytes/s: " << si(r.bytes_per_s, "B/s");
  if (r.machine.measured())
    os << " = " << percent_text(r.copy_fraction) << " of the copy bandwidth (" << si(r.machine.copy_bytes_per_s, "B/s")
       << " measured)" << (r.copy_fraction > 1 && !r.cold_cache ? "; above 100%: the data stayed in cache (cold_cache flushes it)" : "");
  os << "\n  FLOP/s: " << si(r.flop_per_s, "FLOP/s") << " nominal";
  if (r.peak_flop_per_s > 0)
    os << " = " << percent_text(r.flop_fraction) << " of the " << (r.peak_kind == "fma" ? "FMA" : "bf16 tensor-core") << " peak ("
       << si(r.peak_flop_per_s, "FLOP/s") << " measured)";
  os << "\n";
  return os;
}

//! One result as a JSON object (NaN and infinities as null).
inline std::string to_json(const result& r) {
  using namespace detail;
  std::ostringstream s;
  auto str = [&](const char* k, const std::string& v) { s << "\"" << k << "\": " << json_string(v) << ", "; };
  auto num = [&](const char* k, double v) { s << "\"" << k << "\": " << json_number(v) << ", "; };
  auto boolean = [&](const char* k, bool v) { s << "\"" << k << "\": " << (v ? "true" : "false") << ", "; };
  s << "{";
  str("variant", r.variant), str("spec", r.spec), str("mode", r.mode), str("backend", r.backend), str("device", r.device);
  str("algorithm", r.algorithm), str("strategy", r.strategy), str("dtype", r.dtype);
  num("B", static_cast<double>(r.B)), num("T", static_cast<double>(r.T)), num("H", static_cast<double>(r.H));
  num("HV", static_cast<double>(r.HV)), num("K", static_cast<double>(r.K)), num("V", static_cast<double>(r.V));
  num("S", static_cast<double>(r.S)), num("N", static_cast<double>(r.N)), num("P", static_cast<double>(r.P));
  num("kw", r.kw), num("kr", r.kr), num("threads", r.threads);
  boolean("cold_cache", r.cold_cache), boolean("graph", r.graph), num("graph_steps", r.graph_steps);
  boolean("initial_state", r.initial_state), boolean("final_state", r.final_state), num("warmup", r.warmup);
  s << "\"time\": " << json_stats(r.time) << ", ";
  s << "\"host\": " << json_stats(r.host) << ", ";
  s << "\"samples_s\": [";
  for (std::size_t i = 0; i < r.samples.size(); ++i) s << (i ? ", " : "") << json_number(r.samples[i]);
  s << "], ";
  s << "\"work\": {\"tokens\": " << json_number(r.work.tokens) << ", \"state_bytes\": " << json_number(r.work.state_bytes)
    << ", \"state_bytes_all\": " << json_number(r.work.state_bytes_all) << ", \"io_bytes\": " << json_number(r.work.io_bytes)
    << ", \"bytes\": " << json_number(r.work.bytes()) << ", \"flops\": " << json_number(r.work.flops) << "}, ";
  const roofline& m = r.machine;
  s << "\"machine\": {\"backend\": " << json_string(m.backend) << ", \"device\": " << json_string(m.device)
    << ", \"threads\": " << m.threads << ", \"copy_bytes\": " << json_number(m.copy_bytes) << ", \"copy_time\": " << json_stats(m.copy_time)
    << ", \"copy_bytes_per_s\": " << json_number(m.measured() ? m.copy_bytes_per_s : std::nan(""))
    << ", \"fma_flop_per_s\": " << json_number(m.fma_flop_per_s > 0 ? m.fma_flop_per_s : std::nan(""))
    << ", \"tensor_flop_per_s\": " << json_number(m.tensor_flop_per_s > 0 ? m.tensor_flop_per_s : std::nan(""))
    << ", \"method\": " << json_string(m.method) << "}, ";
  num("tokens_per_s", r.tokens_per_s), num("bytes_per_s", r.bytes_per_s), num("state_bytes_per_s", r.state_bytes_per_s);
  num("flop_per_s", r.flop_per_s), num("copy_fraction", r.copy_fraction), str("peak_kind", r.peak_kind);
  num("peak_flop_per_s", r.peak_flop_per_s > 0 ? r.peak_flop_per_s : std::nan(""));
  s << "\"flop_fraction\": " << json_number(r.flop_fraction) << "}";
  return s.str();
}

//! Several results: `{"format": "linstate-bench", "version": 1, "results": [...]}`.
inline std::string to_json(const std::vector<result>& rs) {
  std::string s = "{\"format\": \"linstate-bench\", \"version\": 1, \"results\": [";
  for (std::size_t i = 0; i < rs.size(); ++i) s += (i ? ",\n  " : "\n  ") + to_json(rs[i]);
  return s + "\n]}\n";
}

//! A Markdown table, one row per result (times: medians; p20 and p80 beside them).
inline std::string markdown(const std::vector<result>& rs) {
  using namespace detail;
  std::string s =
      "| variant | mode | backend | dtype | algorithm | strategy | B | T | threads | median | p20 | p80 | tokens/s | state bytes "
      "| bytes/s | % of copy | FLOP/s | % of peak |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const result& r : rs) {
    s += "| " + r.variant + " | " + r.mode + " | " + r.backend + " | " + r.dtype + " | " + r.algorithm + " | " + r.strategy + " | " +
         std::to_string(r.B) + " | " + std::to_string(r.T) + " | " + (r.backend == "cpu" ? std::to_string(r.threads) : "-") + " | " +
         seconds_text(r.time.median) + " | " + seconds_text(r.time.p20) + " | " + seconds_text(r.time.p80) + " | " +
         si(r.tokens_per_s) + " | " + bytes_text(r.work.state_bytes) + " | " + si(r.bytes_per_s, "B/s") + " | " +
         percent_text(r.copy_fraction) + " | " + si(r.flop_per_s, "FLOP/s") + " | " + percent_text(r.flop_fraction) + " |\n";
  }
  return s;
}
inline std::string markdown(const result& r) { return markdown(std::vector<result>{r}); }

}  // namespace linstate::bench
