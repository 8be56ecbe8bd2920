// SPDX-License-Identifier: Apache-2.0
//! \file cuda/bench/bench_cuda.cu
//! \brief The GPU benchmark of issue 4: prefill (forward), training (forward + backward), the decode
//! step and the device's copy bandwidth, for GLA and SSE-nNk1 + shared (N = 4, 8, 16), bf16 inputs,
//! B = 1, H = HV = 8, K = V = 128 — the shapes of the authors' figures (../shared/peer/FLA-H200.md).
//!
//! \code
//!   bench_cuda [--suite=prefill,train,decode,copy] [--tmin=1024] [--tmax=32768] [--reps=30]
//!              [--out=file.csv] ...          (bench_cuda --help lists every option)
//! \endcode
//!
//! Method (the same for every row unless said):
//! * Timing: a pair of CUDA events around each call on a non-blocking stream, and before each call
//!   an L2 flush (a 256 MiB cudaMemsetAsync), as triton's do_bench does — and as there, the calls
//!   are enqueued back to back and the host synchronises once after the last, so the host's work
//!   for a call may overlap the flush before it. Decode `eager` rows instead wait for the flush
//!   and for each call: their interval holds the call's host work too (a latency).
//! * Repetitions: one untimed first call (pool growth, lazy loading), one timed call as an estimate,
//!   then min(--warmup, ⌈25 ms / estimate⌉) untimed warm-up calls and
//!   clamp(⌈--budget-ms / estimate⌉, --min-reps, --reps) timed calls. Reported: the median and the
//!   20th / 80th percentiles (linear interpolation, as torch.quantile).
//! * Inputs (drawn on the device by a counter-based generator, once per shape; the peer's
//!   distributions): q, k, v, the shared partition's q, k and dO ~ N(0, 1); log-decays
//!   g = logsigmoid(N(0, 1)) / 16 (≤ 0, natural log); router logits ~ N(0, 1); scale K^-1/2.
//! * prefill: linstate::forward (o only, no final state). train: forward, then linstate::backward
//!   with a random dO, writing every input's gradient (no initial state, so no dh0) — built only when
//!   <linstate/cuda/backward.cuh> exists. Algorithm chunked<64> (and recurrent for GLA up to
//!   --recurrent-tmax, a reference row); strategies varlen and mask for SSE.
//! * decode: forward_in_place, T = 1 per sequence, recurrent, B ∈ --batch. Three rows per case:
//!   `eager` (one call between events after the flush, host work included), `host` (the host's time
//!   to enqueue one call, back to back, no GPU timing) and `graph`: R steps captured into one CUDA
//!   graph, step r on its own state and inputs, R chosen so that the touched state bytes of the R
//!   steps exceed 4 × L2 (no reuse from L2 between steps), replayed --graph-replays times; the
//!   figure is a replay's time / R (median over replays).
//! * copy: a 1 GiB device-to-device cudaMemcpyAsync; bytes = 2 GiB (read + written).
//! * Order: copy, decode, then for each T from the longest down, every variant's prefill and train
//!   rows. Past --deadline seconds (default 240) the remaining measurements are skipped (printed).
//! * bytes: the compulsory traffic of the row. decode: the state bytes the step must touch (shared +
//!   kw selected partitions of each sequence and head, fp32, read and written: B·H·K·V·4·2·(1 + kw);
//!   GLA B·H·K·V·4·2) plus the step's inputs and output. prefill: every input read once and o
//!   written once. train: the forward's bytes plus the backward's (inputs and dO read, every
//!   gradient written). gbps = bytes / median / 1e9.
//!
//! Output: a table on stdout and, with --out, one CSV row per measurement (lines starting with '#'
//! are metadata):
//!   suite,variant,strategy,algorithm,B,T,N,median_ms,p20_ms,p80_ms,bytes,gbps,mode,reps
//! (mode: fwd | fwdbwd | eager | host | graph | d2d). bench/plot_gpu.py turns it into the figure and
//! the tables of docs/benchmarks.md, next to the peer's JSON.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <linstate/cuda.cuh>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#if !defined(LINSTATE_BENCH_NO_BACKWARD) && __has_include(<linstate/cuda/backward.cuh>)
#include <linstate/cuda/backward.cuh>
#define LINSTATE_BENCH_BACKWARD 1
#else
#define LINSTATE_BENCH_BACKWARD 0
#endif

namespace {

namespace pt = linstate::partition;
namespace rt = linstate::router;
using linstate::index_t;
using bf16 = Eigen::bfloat16;
using clock_type = std::chrono::steady_clock;

// ---------------------------------------------------------------------------------------------
// Variants and sizes
// ---------------------------------------------------------------------------------------------
struct gla : linstate::spec<> {};  // gated_key decay, single partition
template <int N>
struct sse_k1s : linstate::spec<> {  // N routed partitions, top-1, plus the shared partition
  using partition = pt::routed<N, pt::shared>;
  using router = rt::top_k<1>;
};
// --delta: the gated delta rule (l2norm on q and k), alone and under SSE-n4k1 + shared
struct gdn : linstate::spec<> { using decay = linstate::decay::gated_delta_rule<true>; };
struct sse_gdn_n4k1s : sse_k1s<4> { using decay = linstate::decay::gated_delta_rule<true>; };

constexpr index_t H = 8, K = 128, V = 128;
constexpr int max_n = 16;     // router logits buffers hold [B, T, 16]; a view takes the first N columns
constexpr int kw = 1;         // top-1: one routed partition written (and read) per token
constexpr std::size_t flush_bytes = std::size_t{256} << 20;

struct variant_info {
  const char* name;
  int N;               // routed partitions; 0 = a single partition
  bool delta = false;  // gated delta rule: scalar g and β per head instead of g per key
};

// ---------------------------------------------------------------------------------------------
// Command line
// ---------------------------------------------------------------------------------------------
struct config {
  std::vector<std::string> suites{"prefill", "train", "decode", "copy"};
  index_t tmin = 1024, tmax = 32768, recurrent_tmax = 4096;
  int reps = 30, min_reps = 5, warmup = 10, decode_reps = 100, graph_replays = 30;
  double budget_ms = 300, warmup_ms = 25, deadline_s = 240;
  std::vector<int> Ns{4, 8, 16};
  std::vector<index_t> batch{1, 16, 128};
  std::vector<std::string> strategies{"varlen", "mask"};
  bool flush = true, delta = false;
  std::string out;

  bool has(const std::vector<std::string>& v, const std::string& x) const { return std::find(v.begin(), v.end(), x) != v.end(); }
  bool suite(const std::string& s) const { return has(suites, s); }
  bool strategy(const std::string& s) const { return has(strategies, s); }
  bool wants_n(int n) const { return std::find(Ns.begin(), Ns.end(), n) != Ns.end(); }
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> r;
  std::size_t at = 0;
  while (at <= s.size()) {
    const std::size_t c = s.find(',', at);
    const std::string item = s.substr(at, c == std::string::npos ? std::string::npos : c - at);
    if (!item.empty()) r.push_back(item);
    if (c == std::string::npos) break;
    at = c + 1;
  }
  return r;
}

void usage() {
  std::printf(
      "bench_cuda: GPU timings of GLA and SSE-nNk1 + shared (bf16, H = 8, K = V = 128)\n"
      "  --suite=prefill,train,decode,copy   suites to run (default: all; 'all' works too)\n"
      "  --tmin=1024 --tmax=32768            prefill/train lengths: powers of two from tmin to tmax (B = 1)\n"
      "  --Ns=4,8,16                         SSE partition counts (4, 8, 16 are compiled in)\n"
      "  --strategies=varlen,mask            SSE strategies for prefill/train\n"
      "  --recurrent-tmax=4096               GLA recurrent reference rows up to this T (0 = none)\n"
      "  --batch=1,16,128                    decode batch sizes\n"
      "  --reps=30 --min-reps=5              most / fewest timed calls per measurement\n"
      "  --warmup=10 --budget-ms=300         most warm-up calls; timed time aimed at per measurement\n"
      "  --decode-reps=100 --graph-replays=30\n"
      "  --deadline=240                      seconds; later measurements are skipped (0 = none)\n"
      "  --no-flush                          do not flush the L2 before timed calls\n"
      "  --delta                             prefill/train also for the gated delta rule (gdn, sse_gdn_n4k1s)\n"
      "  --out=file.csv                      one CSV row per measurement\n");
}

config parse(int argc, char** argv) {
  config c;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const std::size_t eq = a.find('=');
    const std::string key = a.substr(0, eq), val = eq == std::string::npos ? "" : a.substr(eq + 1);
    auto num = [&] { return std::atof(val.c_str()); };
    if (key == "--help" || key == "-h") usage(), std::exit(0);
    else if (key == "--suite") c.suites = val == "all" ? config{}.suites : split(val);
    else if (key == "--tmin") c.tmin = static_cast<index_t>(num());
    else if (key == "--tmax") c.tmax = static_cast<index_t>(num());
    else if (key == "--recurrent-tmax") c.recurrent_tmax = static_cast<index_t>(num());
    else if (key == "--reps") c.reps = static_cast<int>(num());
    else if (key == "--min-reps") c.min_reps = static_cast<int>(num());
    else if (key == "--warmup") c.warmup = static_cast<int>(num());
    else if (key == "--budget-ms") c.budget_ms = num();
    else if (key == "--decode-reps") c.decode_reps = static_cast<int>(num());
    else if (key == "--graph-replays") c.graph_replays = static_cast<int>(num());
    else if (key == "--deadline") c.deadline_s = num();
    else if (key == "--no-flush") c.flush = false;
    else if (key == "--delta") c.delta = true;
    else if (key == "--out") c.out = val;
    else if (key == "--strategies") c.strategies = split(val);
    else if (key == "--Ns") {
      c.Ns.clear();
      for (const auto& s : split(val)) c.Ns.push_back(std::atoi(s.c_str()));
    } else if (key == "--batch") {
      c.batch.clear();
      for (const auto& s : split(val)) c.batch.push_back(std::atoll(s.c_str()));
    } else {
      std::fprintf(stderr, "bench_cuda: unknown argument '%s'\n\n", a.c_str());
      usage();
      std::exit(2);
    }
  }
  for (const auto& s : c.suites)
    if (s != "prefill" && s != "train" && s != "decode" && s != "copy")
      std::fprintf(stderr, "bench_cuda: unknown suite '%s', ignored\n", s.c_str());
  for (int n : c.Ns)
    if (n != 4 && n != 8 && n != 16) std::fprintf(stderr, "bench_cuda: N = %d is not compiled in, ignored\n", n);
  c.tmin = std::max<index_t>(c.tmin, 1);
  c.reps = std::max(c.reps, 1), c.min_reps = std::clamp(c.min_reps, 1, c.reps), c.warmup = std::max(c.warmup, 0);
  return c;
}

// ---------------------------------------------------------------------------------------------
// CUDA helpers
// ---------------------------------------------------------------------------------------------
void ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "bench_cuda: %s: %s (%s)\n", what, cudaGetErrorName(e), cudaGetErrorString(e));
    std::exit(1);
  }
}

__device__ __forceinline__ std::uint64_t mix64(std::uint64_t z) {  // splitmix64's finaliser
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

enum class dist : int { normal = 0, log_gate = 1, unit = 2 };  // N(0,1)·scale, logsigmoid(N(0,1)) / 16, sigmoid(N(0,1))

//! out[i] = a draw of `d` for counter (seed, i): Box–Muller on two 24-bit uniforms of one hash.
template <class Out>
__global__ void fill_kernel(Out* out, std::size_t n, std::uint64_t seed, dist d, float scale) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const std::uint64_t r = mix64(seed * 0x632be59bd9b4e019ull ^ mix64(i));
    const float u1 = (static_cast<float>(r >> 40) + 1.0f) * 0x1p-24f;  // (0, 1]
    const float u2 = static_cast<float>(r & 0xffffffu) * 0x1p-24f;     // [0, 1)
    float z = sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
    if (d == dist::log_gate) z = (fminf(z, 0.0f) - log1pf(expf(-fabsf(z)))) / 16.0f;
    if (d == dist::unit) z = 1.0f / (1.0f + expf(-z));
    z *= scale;
    if constexpr (std::is_same_v<Out, float>) out[i] = z;
    else out[i] = __float2bfloat16_rn(z);
  }
}

template <class T>
void fill(T* p, std::size_t n, std::uint64_t seed, dist d, cudaStream_t s, float scale = 1.0f) {
  if (n == 0) return;
  const unsigned blocks = static_cast<unsigned>(std::min<std::size_t>((n + 255) / 256, 132 * 32));
  if constexpr (std::is_same_v<T, float>) fill_kernel<float><<<blocks, 256, 0, s>>>(p, n, seed, d, scale);
  else fill_kernel<__nv_bfloat16><<<blocks, 256, 0, s>>>(reinterpret_cast<__nv_bfloat16*>(p), n, seed, d, scale);
  ok(cudaGetLastError(), "fill_kernel");
}

struct stats {
  double median = 0, p20 = 0, p80 = 0;
  int reps = 0;
};

stats summarize(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  auto q = [&](double f) {  // linear interpolation between order statistics (numpy / torch default)
    const double pos = f * static_cast<double>(ms.size() - 1);
    const std::size_t lo = static_cast<std::size_t>(pos), hi = std::min(lo + 1, ms.size() - 1);
    return ms[lo] + (pos - static_cast<double>(lo)) * (ms[hi] - ms[lo]);
  };
  return {q(0.5), q(0.2), q(0.8), static_cast<int>(ms.size())};
}

// ---------------------------------------------------------------------------------------------
// Results: CSV rows, stdout lines, the closing tables
// ---------------------------------------------------------------------------------------------
struct row {
  std::string suite, variant, strategy, algorithm, mode;
  index_t B = 0, T = 0;
  int N = 0;
  stats s;
  double bytes = 0;
  double gbps() const { return s.median > 0 && bytes > 0 ? bytes / (s.median * 1e-3) / 1e9 : 0.0; }
};

class bench_context {
 public:
  config cfg;
  cudaStream_t stream{};
  linstate::cuda be{};
  int l2_bytes = 0;
  double copy_gbps = 0;

  explicit bench_context(config c) : cfg(std::move(c)), start_(clock_type::now()) {
    ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    be = linstate::cuda{stream};
    if (cfg.flush) ok(cudaMalloc(&flush_, flush_bytes), "cudaMalloc(flush buffer)");
    int dev = 0;
    ok(cudaGetDevice(&dev), "cudaGetDevice");
    ok(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, dev), "cudaDeviceGetAttribute");
    if (!cfg.out.empty()) {
      csv_ = std::fopen(cfg.out.c_str(), "w");
      if (!csv_) std::fprintf(stderr, "bench_cuda: cannot write %s\n", cfg.out.c_str()), std::exit(1);
    }
  }
  ~bench_context() {
    if (csv_) std::fclose(csv_);
    if (flush_) (void)cudaFree(flush_);
    for (cudaEvent_t e : events_) (void)cudaEventDestroy(e);
    (void)cudaStreamDestroy(stream);
  }
  bench_context(const bench_context&) = delete;
  bench_context& operator=(const bench_context&) = delete;

  double elapsed_s() const { return std::chrono::duration<double>(clock_type::now() - start_).count(); }
  bool past_deadline() const { return cfg.deadline_s > 0 && elapsed_s() > cfg.deadline_s; }

  void meta(const std::string& line) {
    std::printf("# %s\n", line.c_str());
    if (csv_) std::fprintf(csv_, "# %s\n", line.c_str());
  }
  void header() {
    if (csv_) std::fprintf(csv_, "suite,variant,strategy,algorithm,B,T,N,median_ms,p20_ms,p80_ms,bytes,gbps,mode,reps\n");
    std::printf("%-8s %-11s %-7s %-10s %-6s %4s %6s %3s %12s %12s %12s %5s %10s  %s\n", "suite", "variant", "strat",
                "algorithm", "mode", "B", "T", "N", "median", "p20", "p80", "reps", "GB/s", "note");
  }

  //! Prints the row, appends it to the CSV (flushed: a killed run keeps what it measured), keeps it
  //! for the closing tables.
  void record(const row& r) {
    rows_.push_back(r);
    std::string note;
    if (r.suite == "prefill" || r.suite == "train")
      note = fmt("%.3g M tokens/s", static_cast<double>(r.B * r.T) / (r.s.median * 1e-3) / 1e6);
    if (r.suite == "decode" && r.mode != "host" && copy_gbps > 0) note = fmt("%.0f%% of copy", 100.0 * r.gbps() / copy_gbps);
    std::printf("%-8s %-11s %-7s %-10s %-6s %4lld %6lld %3d %12s %12s %12s %5d %10.1f  %s\n", r.suite.c_str(),
                r.variant.c_str(), r.strategy.c_str(), r.algorithm.c_str(), r.mode.c_str(), static_cast<long long>(r.B),
                static_cast<long long>(r.T), r.N, dur(r.s.median).c_str(), dur(r.s.p20).c_str(), dur(r.s.p80).c_str(),
                r.s.reps, r.gbps(), note.c_str());
    std::fflush(stdout);
    if (csv_) {
      std::fprintf(csv_, "%s,%s,%s,%s,%lld,%lld,%d,%.6g,%.6g,%.6g,%.0f,%.2f,%s,%d\n", r.suite.c_str(), r.variant.c_str(),
                   r.strategy.c_str(), r.algorithm.c_str(), static_cast<long long>(r.B), static_cast<long long>(r.T), r.N,
                   r.s.median, r.s.p20, r.s.p80, r.bytes, r.gbps(), r.mode.c_str(), r.s.reps);
      std::fflush(csv_);
    }
  }
  void skipped(const row& r, const std::string& why) {
    std::printf("%-8s %-11s %-7s %-10s %-6s %4lld %6lld %3d  skipped: %s\n", r.suite.c_str(), r.variant.c_str(),
                r.strategy.c_str(), r.algorithm.c_str(), r.mode.c_str(), static_cast<long long>(r.B),
                static_cast<long long>(r.T), r.N, why.c_str());
    std::fflush(stdout);
    ++skipped_;
  }

  //! Times n calls of f, each between its own pair of events. Before each call the L2 is flushed
  //! by a 256 MiB write on the stream. `latency` = false (prefill, train, copy): triton do_bench's
  //! way — everything is enqueued back to back and the host synchronises once at the end, so the
  //! host's work for a call may overlap the flush before it, and the library's scratch pool is not
  //! trimmed between calls. `latency` = true (decode eager): the host waits for the flush before
  //! the call and for the call before the next flush, so a call's host work is inside its interval.
  template <class F>
  std::vector<double> time_calls(F&& f, int n, bool latency) {
    while (events_.size() < 2 * static_cast<std::size_t>(n)) {
      cudaEvent_t e{};
      ok(cudaEventCreate(&e), "cudaEventCreate");
      events_.push_back(e);
    }
    std::vector<double> ms(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      if (flush_) ok(cudaMemsetAsync(flush_, 0, flush_bytes, stream), "cudaMemsetAsync(flush)");
      if (latency) ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize(flush)");
      ok(cudaEventRecord(events_[2 * i], stream), "cudaEventRecord");
      f();
      ok(cudaEventRecord(events_[2 * i + 1], stream), "cudaEventRecord");
      if (latency) ok(cudaEventSynchronize(events_[2 * i + 1]), "cudaEventSynchronize");
    }
    ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    for (int i = 0; i < n; ++i) {
      float t = 0;
      ok(cudaEventElapsedTime(&t, events_[2 * i], events_[2 * i + 1]), "cudaEventElapsedTime");
      ms[static_cast<std::size_t>(i)] = t;
    }
    return ms;
  }
  //! The measurement of the file's header: first call, estimate, warm-up, timed calls (`fixed_reps`
  //! of them when > 0). Returns no value (after printing why) when the deadline has passed or the
  //! call throws.
  template <class F>
  std::optional<stats> measure(const row& r, F&& f, int fixed_reps = 0, bool latency = false) {
    if (past_deadline()) return skipped(r, "deadline"), std::nullopt;
    try {
      f();
      ok(cudaStreamSynchronize(stream), "first call");
      const double est = std::max(time_calls(f, 1, latency)[0], 1e-3);
      const int warm = std::min(cfg.warmup, std::max(1, static_cast<int>(std::ceil(cfg.warmup_ms / est))));
      for (int i = 0; i < warm; ++i) f();
      const int n = fixed_reps > 0 ? fixed_reps
                                   : std::clamp(static_cast<int>(std::ceil(cfg.budget_ms / est)), cfg.min_reps, cfg.reps);
      return summarize(time_calls(f, n, latency));
    } catch (const std::exception& e) {
      (void)cudaStreamSynchronize(stream);
      skipped(r, std::string("error: ") + e.what());
      return std::nullopt;
    }
  }

  void tables() const;
  int skipped_count() const { return skipped_; }

  static std::string fmt(const char* f, double x) {
    char b[64];
    std::snprintf(b, sizeof b, f, x);
    return b;
  }
  static std::string dur(double ms) {  // 12.3 us, 4.56 ms
    return ms < 1.0 ? fmt("%.2f us", ms * 1e3) : fmt("%.3f ms", ms);
  }

 private:
  clock_type::time_point start_;
  std::vector<cudaEvent_t> events_;
  void* flush_ = nullptr;
  std::FILE* csv_ = nullptr;
  std::vector<row> rows_;
  int skipped_ = 0;
};

void bench_context::tables() const {
  // prefill / train: one line per (variant, strategy, algorithm), one column per T (median)
  for (const char* suite : {"prefill", "train"}) {
    std::vector<index_t> Ts;
    std::vector<std::string> keys;
    std::map<std::string, std::map<index_t, double>> cell;
    for (const auto& r : rows_) {
      if (r.suite != suite) continue;
      const std::string key = r.variant + " " + r.strategy + " " + r.algorithm;
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
      if (std::find(Ts.begin(), Ts.end(), r.T) == Ts.end()) Ts.push_back(r.T);
      cell[key][r.T] = r.s.median;
    }
    if (keys.empty()) continue;
    std::sort(Ts.begin(), Ts.end());
    std::printf("\n%s (%s), median ms, B = 1, H = 8, K = V = 128, bf16\n", suite,
                std::string(suite) == "prefill" ? "forward" : "forward + backward");
    std::printf("| variant strategy algorithm |");
    for (index_t T : Ts) std::printf(" T=%lld |", static_cast<long long>(T));
    std::printf("\n|---|");
    for (std::size_t i = 0; i < Ts.size(); ++i) std::printf("---|");
    std::printf("\n");
    for (const auto& key : keys) {
      std::printf("| %s |", key.c_str());
      for (index_t T : Ts) {
        const auto it = cell[key].find(T);
        if (it == cell[key].end()) std::printf(" – |");
        else std::printf(" %.3f |", it->second);
      }
      std::printf("\n");
    }
  }
  // decode: one line per (variant, B)
  bool any = false;
  for (const auto& r : rows_) any = any || r.suite == "decode";
  if (any) {
    std::printf("\ndecode step (T = 1, forward_in_place, recurrent); copy bandwidth %.1f GB/s (1 GiB D2D, read + write)\n",
                copy_gbps);
    std::printf("| variant | B | bytes/step | eager | host enqueue | graph (per step) | graph GB/s | %% of copy |\n");
    std::printf("|---|---|---|---|---|---|---|---|\n");
    std::vector<std::pair<std::string, index_t>> keys;
    for (const auto& r : rows_)
      if (r.suite == "decode" && std::find(keys.begin(), keys.end(), std::make_pair(r.variant, r.B)) == keys.end())
        keys.emplace_back(r.variant, r.B);
    for (const auto& [variant, B] : keys) {
      const row *eager = nullptr, *host = nullptr, *graph = nullptr;
      for (const auto& r : rows_) {
        if (r.suite != "decode" || r.variant != variant || r.B != B) continue;
        if (r.mode == "eager") eager = &r;
        if (r.mode == "host") host = &r;
        if (r.mode == "graph") graph = &r;
      }
      const row* any_row = graph ? graph : eager;
      std::printf("| %s | %lld | %s | %s | %s | %s | %s | %s |\n", variant.c_str(), static_cast<long long>(B),
                  any_row ? fmt("%.2f MiB", any_row->bytes / (1 << 20)).c_str() : "–",
                  eager ? dur(eager->s.median).c_str() : "–", host ? dur(host->s.median).c_str() : "–",
                  graph ? dur(graph->s.median).c_str() : "–", graph ? fmt("%.0f", graph->gbps()).c_str() : "–",
                  graph && copy_gbps > 0 ? fmt("%.0f%%", 100 * graph->gbps() / copy_gbps).c_str() : "–");
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Per-length tensors (B = 1): inputs, o, dO and the gradients
// ---------------------------------------------------------------------------------------------
struct seq_tensors {
  index_t T;
  linstate::device_buffer<bf16> q, k, v, g, sq, sk, sg, logits, o, dO;
  linstate::device_buffer<bf16> dq, dk, dv, dg, dsq, dsk, dsg, dlogits;
  linstate::device_buffer<bf16> gs, bs, sgs, sbs, dgs, dbs, dsgs, dsbs;  // [T, H]: delta rule g and β

  seq_tensors(index_t T_, cudaStream_t s) : T(T_) {
    const auto hk = static_cast<std::size_t>(T * H * K), hv = static_cast<std::size_t>(T * H * V);
    const auto lg = static_cast<std::size_t>(T * max_n);
    for (auto* b : {&q, &k, &g, &sq, &sk, &sg, &dq, &dk, &dg, &dsq, &dsk, &dsg}) *b = linstate::device_buffer<bf16>(hk);
    for (auto* b : {&v, &o, &dO, &dv}) *b = linstate::device_buffer<bf16>(hv);
    logits = linstate::device_buffer<bf16>(lg), dlogits = linstate::device_buffer<bf16>(lg);
    const auto seed = static_cast<std::uint64_t>(T) << 8;
    fill(q.data(), hk, seed + 1, dist::normal, s), fill(k.data(), hk, seed + 2, dist::normal, s);
    fill(v.data(), hv, seed + 3, dist::normal, s), fill(g.data(), hk, seed + 4, dist::log_gate, s);
    fill(sq.data(), hk, seed + 5, dist::normal, s), fill(sk.data(), hk, seed + 6, dist::normal, s);
    fill(sg.data(), hk, seed + 7, dist::log_gate, s), fill(logits.data(), lg, seed + 8, dist::normal, s);
    fill(dO.data(), hv, seed + 9, dist::normal, s);
    const auto th = static_cast<std::size_t>(T * H);
    for (auto* b : {&gs, &bs, &sgs, &sbs, &dgs, &dbs, &dsgs, &dsbs}) *b = linstate::device_buffer<bf16>(th);
    fill(gs.data(), th, seed + 10, dist::log_gate, s), fill(bs.data(), th, seed + 11, dist::unit, s);
    fill(sgs.data(), th, seed + 12, dist::log_gate, s), fill(sbs.data(), th, seed + 13, dist::unit, s);
  }

  linstate::inputs<bf16> inputs(int N, bool delta) const {
    linstate::inputs<bf16> in;
    in.q = q.view({1, T, H, K}), in.k = k.view({1, T, H, K}), in.v = v.view({1, T, H, V}), in.g = g.view({1, T, H, K});
    if (delta) in.g = gs.view({1, T, H}), in.beta = bs.view({1, T, H});
    if (N > 0) {
      in.shared = {sq.view({1, T, H, K}), sk.view({1, T, H, K}), sg.view({1, T, H, K}), {}};
      if (delta) in.shared.g = sgs.view({1, T, H}), in.shared.beta = sbs.view({1, T, H});
      in.router_logits = logits.view({1, T, N});
    }
    return in;
  }
#if LINSTATE_BENCH_BACKWARD
  linstate::gradients<bf16> gradients(int N, bool delta) const {
    linstate::gradients<bf16> gr;
    gr.q = dq.view({1, T, H, K}), gr.k = dk.view({1, T, H, K}), gr.v = dv.view({1, T, H, V}), gr.g = dg.view({1, T, H, K});
    if (delta) gr.g = dgs.view({1, T, H}), gr.beta = dbs.view({1, T, H});
    if (N > 0) {
      gr.shared = {dsq.view({1, T, H, K}), dsk.view({1, T, H, K}), dsg.view({1, T, H, K}), {}};
      if (delta) gr.shared.g = dsgs.view({1, T, H}), gr.shared.beta = dsbs.view({1, T, H});
      gr.router_logits = dlogits.view({1, T, N});
    }
    return gr;
  }
#endif
  //! Bytes of every input of variant N read once, and of o written once.
  double input_bytes(int N, bool delta = false) const {
    const double hk = static_cast<double>(T * H * K) * 2, hv = static_cast<double>(T * H * V) * 2;
    const double gb = delta ? 2 * static_cast<double>(T * H) * 2 : hk;  // g (and β)
    return N > 0 ? 2 * (2 * hk + gb) + hv + static_cast<double>(T * N) * 2 : 2 * hk + gb + hv;
  }
  double output_bytes() const { return static_cast<double>(T * H * V) * 2; }
};

//! Calls f(type_identity<Spec>, info) for GLA and every SSE variant asked for.
template <class F>
void for_each_variant(const config& c, F&& f) {
  f(std::type_identity<gla>{}, variant_info{"gla", 0});
  if (c.wants_n(4)) f(std::type_identity<sse_k1s<4>>{}, variant_info{"sse_n4k1s", 4});
  if (c.wants_n(8)) f(std::type_identity<sse_k1s<8>>{}, variant_info{"sse_n8k1s", 8});
  if (c.wants_n(16)) f(std::type_identity<sse_k1s<16>>{}, variant_info{"sse_n16k1s", 16});
}

//! The delta-rule variants of --delta (prefill and train only).
template <class F>
void for_each_delta_variant(const config& c, F&& f) {
  if (!c.delta) return;
  f(std::type_identity<gdn>{}, variant_info{"gdn", 0, true});
  f(std::type_identity<sse_gdn_n4k1s>{}, variant_info{"sse_gdn_n4k1s", 4, true});
}

//! Prefill and train rows of one variant at one length.
template <class Spec>
void run_sequence(bench_context& ctx, const seq_tensors& t, const variant_info& vi) {
  const auto in = t.inputs(vi.N, vi.delta);
  const linstate::outputs<bf16> out{t.o.view({1, t.T, H, V}), {}};
#if LINSTATE_BENCH_BACKWARD
  const linstate::cotangents<bf16> cot{t.dO.view({1, t.T, H, V}), {}};
  const auto grads = t.gradients(vi.N, vi.delta);
#endif
  auto one = [&](auto algorithm, auto strategy) {
    row r;
    r.variant = vi.name, r.strategy = strategy.name, r.algorithm = algorithm.name, r.B = 1, r.T = t.T, r.N = vi.N;
    auto fwd = [&] { linstate::forward<Spec>(ctx.be, in, out, algorithm, strategy); };
    if (ctx.cfg.suite("prefill")) {
      r.suite = "prefill", r.mode = "fwd", r.bytes = t.input_bytes(vi.N, vi.delta) + t.output_bytes();
      if (auto s = ctx.measure(r, fwd)) r.s = *s, ctx.record(r);
    }
#if LINSTATE_BENCH_BACKWARD
    if (ctx.cfg.suite("train")) {
      r.suite = "train", r.mode = "fwdbwd", r.bytes = 3 * t.input_bytes(vi.N, vi.delta) + 2 * t.output_bytes();
      auto fwdbwd = [&] {
        fwd();
        linstate::backward<Spec>(ctx.be, in, cot, grads, algorithm, strategy);
      };
      if (auto s = ctx.measure(r, fwdbwd)) r.s = *s, ctx.record(r);
    }
#endif
  };
  if (vi.N == 0) {
    one(linstate::chunked<64>{}, linstate::varlen{});
    if (t.T <= ctx.cfg.recurrent_tmax) one(linstate::recurrent{}, linstate::varlen{});
  } else {
    if (ctx.cfg.strategy("varlen")) one(linstate::chunked<64>{}, linstate::varlen{});
    if (ctx.cfg.strategy("mask")) one(linstate::chunked<64>{}, linstate::mask{});
  }
}

void run_sequences(bench_context& ctx) {
  const bool train = ctx.cfg.suite("train");
  if (train && !LINSTATE_BENCH_BACKWARD)
    std::printf("train: skipped (this build has no <linstate/cuda/backward.cuh>; touch cuda/bench/bench_cuda.cu and "
                "rebuild once it exists)\n");
  if (!ctx.cfg.suite("prefill") && !(train && LINSTATE_BENCH_BACKWARD)) return;
  // Longest first: if the deadline cuts the run, what is lost is the short, launch-bound lengths,
  // not the T = 32768 rows the targets are set at.
  std::vector<index_t> Ts;
  for (index_t T = ctx.cfg.tmin; T <= ctx.cfg.tmax; T *= 2) Ts.insert(Ts.begin(), T);
  for (index_t T : Ts) {
    const seq_tensors t(T, ctx.stream);
    ok(cudaStreamSynchronize(ctx.stream), "input generation");
    auto run = [&](auto tag, const variant_info& vi) { run_sequence<typename decltype(tag)::type>(ctx, t, vi); };
    for_each_variant(ctx.cfg, run);
    for_each_delta_variant(ctx.cfg, run);
    ok(cudaStreamSynchronize(ctx.stream), "end of length");  // before the buffers are freed
  }
}

// ---------------------------------------------------------------------------------------------
// Decode
// ---------------------------------------------------------------------------------------------
template <class Spec>
void run_decode(bench_context& ctx, const variant_info& vi, index_t B) {
  const index_t P = vi.N > 0 ? vi.N + 1 : 1, nl = vi.N > 0 ? vi.N : 1;
  const index_t hk = B * H * K, hv = B * H * V, st = B * P * H * K * V;
  // one set = the step's inputs (q k g sq sk sg: hk each, v: hv, logits: B·N; padded so that every
  // set starts 256-byte aligned), its output and its state
  const index_t in_elems = (6 * hk + hv + B * nl + 127) / 128 * 128;
  const double touched = static_cast<double>(B * H * K * V) * 4 * 2 * (vi.N > 0 ? 1 + kw : 1);
  const double io = (vi.N > 0 ? static_cast<double>(6 * hk + hv + B * vi.N) : static_cast<double>(3 * hk + hv)) * 2 +
                    static_cast<double>(hv) * 2;
  const double bytes = touched + io;
  const double l2 = ctx.l2_bytes > 0 ? ctx.l2_bytes : 60.0 * (1 << 20);
  const double state_set_bytes = static_cast<double>(st) * 4;
  index_t R = std::clamp(static_cast<index_t>(std::ceil(4 * l2 / touched)), index_t{4}, index_t{256});
  R = std::max<index_t>(2, std::min<index_t>(R, static_cast<index_t>((8.0 * (1ull << 30)) / state_set_bytes)));

  row r;
  r.suite = "decode", r.variant = vi.name, r.strategy = "varlen", r.algorithm = "recurrent", r.B = B, r.T = 1, r.N = vi.N;
  r.bytes = bytes;
  if (ctx.past_deadline()) {
    r.mode = "graph";
    ctx.skipped(r, "deadline");
    return;
  }
  linstate::device_buffer<bf16> ins(static_cast<std::size_t>(R * in_elems)), outs(static_cast<std::size_t>(R * hv));
  linstate::device_buffer<float> states(static_cast<std::size_t>(R * st));
  const auto seed = (static_cast<std::uint64_t>(B) << 20) + static_cast<std::uint64_t>(vi.N) * 7919;
  for (index_t s = 0; s < R; ++s) {
    bf16* p = ins.data() + s * in_elems;
    const auto sd = seed + static_cast<std::uint64_t>(s) * 16;
    fill(p, static_cast<std::size_t>(6 * hk + hv), sd, dist::normal, ctx.stream);  // q k sq sk v (g's below)
    fill(p + 2 * hk, static_cast<std::size_t>(hk), sd + 1, dist::log_gate, ctx.stream);
    fill(p + 5 * hk, static_cast<std::size_t>(hk), sd + 2, dist::log_gate, ctx.stream);
    fill(p + 6 * hk + hv, static_cast<std::size_t>(B * nl), sd + 3, dist::normal, ctx.stream);
  }
  fill(states.data(), static_cast<std::size_t>(R * st), seed + 5, dist::normal, ctx.stream, 0.1f);
  ok(cudaStreamSynchronize(ctx.stream), "decode inputs");

  // layout of one set: q | k | g | sq | sk | sg | v | logits
  auto set_inputs = [&](index_t s) {
    const bf16* p = ins.data() + s * in_elems;
    linstate::inputs<bf16> in;
    in.q = {p, {B, 1, H, K}}, in.k = {p + hk, {B, 1, H, K}}, in.g = {p + 2 * hk, {B, 1, H, K}};
    in.v = {p + 6 * hk, {B, 1, H, V}};
    if (vi.N > 0) {
      in.shared = {{p + 3 * hk, {B, 1, H, K}}, {p + 4 * hk, {B, 1, H, K}}, {p + 5 * hk, {B, 1, H, K}}, {}};
      in.router_logits = {p + 6 * hk + hv, {B, 1, vi.N}};
    }
    return in;
  };
  auto step = [&](index_t s) {
    linstate::forward_in_place<Spec>(ctx.be, set_inputs(s), linstate::tensor_view<float>(states.data() + s * st, {B, P, H, K, V}),
                                     linstate::tensor_view<bf16>(outs.data() + s * hv, {B, 1, H, V}), linstate::recurrent{},
                                     linstate::varlen{});
  };

  // eager: one call after the flush, host work included
  r.mode = "eager";
  if (auto s = ctx.measure(r, [&] { step(0); }, ctx.cfg.decode_reps, /*latency=*/true)) r.s = *s, ctx.record(r);

  // host: the host's time to enqueue one call (back to back, the GPU runs behind)
  {
    row h = r;
    h.mode = "host", h.bytes = 0;
    try {
      std::vector<double> ms;
      for (int i = 0; i < ctx.cfg.decode_reps; ++i) {
        const auto t0 = clock_type::now();
        step(i % R);
        ms.push_back(std::chrono::duration<double, std::milli>(clock_type::now() - t0).count());
        if (i % 64 == 63) ok(cudaStreamSynchronize(ctx.stream), "host enqueue");  // keep the queue short
      }
      ok(cudaStreamSynchronize(ctx.stream), "host enqueue");
      h.s = summarize(std::move(ms));
      ctx.record(h);
    } catch (const std::exception& e) {
      (void)cudaStreamSynchronize(ctx.stream);
      ctx.skipped(h, std::string("error: ") + e.what());
    }
  }

  // graph: R steps over R state/input sets captured once, replayed
  r.mode = "graph";
  if (ctx.past_deadline()) return ctx.skipped(r, "deadline");
  std::string note;
  cudaGraph_t graph{};
  ok(cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  try {
    for (index_t s = 0; s < R; ++s) step(s);
  } catch (const std::exception& e) {
    note = e.what();
  }
  const cudaError_t ec = cudaStreamEndCapture(ctx.stream, &graph);
  if (note.empty() && ec != cudaSuccess) note = std::string("cudaStreamEndCapture: ") + cudaGetErrorString(ec);
  (void)cudaGetLastError();
  if (!note.empty()) {
    if (graph) (void)cudaGraphDestroy(graph);
    return ctx.skipped(r, "capture failed: " + note);
  }
  cudaGraphExec_t exec{};
  ok(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  cudaEvent_t e0{}, e1{};
  ok(cudaEventCreate(&e0), "cudaEventCreate"), ok(cudaEventCreate(&e1), "cudaEventCreate");
  for (int i = 0; i < 2; ++i) ok(cudaGraphLaunch(exec, ctx.stream), "cudaGraphLaunch");
  ok(cudaStreamSynchronize(ctx.stream), "graph warm-up");
  std::vector<double> ms;
  for (int i = 0; i < ctx.cfg.graph_replays; ++i) {
    ok(cudaEventRecord(e0, ctx.stream), "cudaEventRecord");
    ok(cudaGraphLaunch(exec, ctx.stream), "cudaGraphLaunch");
    ok(cudaEventRecord(e1, ctx.stream), "cudaEventRecord");
    ok(cudaEventSynchronize(e1), "cudaEventSynchronize");
    float t = 0;
    ok(cudaEventElapsedTime(&t, e0, e1), "cudaEventElapsedTime");
    ms.push_back(static_cast<double>(t) / static_cast<double>(R));
  }
  r.s = summarize(std::move(ms));
  ctx.record(r);
  std::printf("%42s(graph: %lld steps over %lld state sets, %.0f MiB of touched state per replay, L2 %.0f MiB)\n", "",
              static_cast<long long>(R), static_cast<long long>(R), touched * static_cast<double>(R) / (1 << 20),
              l2 / (1 << 20));
  (void)cudaEventDestroy(e0), (void)cudaEventDestroy(e1);
  ok(cudaGraphExecDestroy(exec), "cudaGraphExecDestroy");
  ok(cudaGraphDestroy(graph), "cudaGraphDestroy");
  ok(cudaStreamSynchronize(ctx.stream), "end of decode case");
}

void run_decodes(bench_context& ctx) {
  for (index_t B : ctx.cfg.batch)
    for_each_variant(ctx.cfg, [&](auto tag, const variant_info& vi) { run_decode<typename decltype(tag)::type>(ctx, vi, B); });
}

// ---------------------------------------------------------------------------------------------
// Copy bandwidth
// ---------------------------------------------------------------------------------------------
void run_copy(bench_context& ctx) {
  constexpr std::size_t n = std::size_t{1} << 30;
  void *a = nullptr, *b = nullptr;
  ok(cudaMalloc(&a, n), "cudaMalloc(copy source)"), ok(cudaMalloc(&b, n), "cudaMalloc(copy target)");
  ok(cudaMemsetAsync(a, 1, n, ctx.stream), "cudaMemsetAsync");
  row r;
  r.suite = "copy", r.variant = "memcpy_d2d", r.strategy = "-", r.algorithm = "-", r.mode = "d2d";
  r.bytes = 2.0 * static_cast<double>(n);
  const auto saved = ctx.cfg.deadline_s;
  ctx.cfg.deadline_s = 0;  // the reference of the decode rows: always measured
  if (auto s = ctx.measure(r, [&] { ok(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, ctx.stream), "cudaMemcpyAsync"); }, 20)) {
    r.s = *s;
    ctx.copy_gbps = r.gbps();
    ctx.record(r);
  }
  ctx.cfg.deadline_s = saved;
  ok(cudaFree(a), "cudaFree"), ok(cudaFree(b), "cudaFree");
}

}  // namespace

int main(int argc, char** argv) {
  const config cfg = parse(argc, argv);
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("bench_cuda: no usable CUDA device\n");
    return 77;
  }
  cudaDeviceProp prop{};
  ok(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  int driver = 0, runtime = 0;
  (void)cudaDriverGetVersion(&driver), (void)cudaRuntimeGetVersion(&runtime);

  bench_context ctx(cfg);
  std::string args;
  for (int i = 1; i < argc; ++i) args += std::string(i > 1 ? " " : "") + argv[i];
  ctx.meta("bench_cuda " + args);
  ctx.meta(std::string("device: ") + prop.name + ", sm_" + std::to_string(prop.major) + std::to_string(prop.minor) + ", " +
           std::to_string(prop.multiProcessorCount) + " SMs, L2 " + std::to_string(ctx.l2_bytes >> 20) + " MiB, " +
           std::to_string(prop.totalGlobalMem >> 30) + " GiB; driver " + std::to_string(driver) + ", runtime " +
           std::to_string(runtime));
  ctx.meta(std::string("timing: CUDA events around one call; ") +
           (cfg.flush ? "256 MiB L2 flush before each timed call (do_bench style: no host sync between calls, "
                       "except decode eager)"
                     : "no L2 flush") +
           "; median, p20, p80; bf16 inputs, fp32 state, B = 1 (decode: --batch), H = 8, K = V = 128, top-1 + shared");
  ctx.meta(std::string("backward: ") + (LINSTATE_BENCH_BACKWARD ? "built in" : "not in this build (no train rows)"));
  ctx.header();

  if (cfg.suite("copy") || cfg.suite("decode")) run_copy(ctx);
  if (cfg.suite("decode")) run_decodes(ctx);
  run_sequences(ctx);

  ctx.tables();
  std::printf("\ntotal %.1f s%s\n", ctx.elapsed_s(),
              ctx.skipped_count() ? (", " + std::to_string(ctx.skipped_count()) + " measurement(s) skipped").c_str() : "");
  return 0;
}
