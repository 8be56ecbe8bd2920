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
//! Method (the same for every row unless said): the measurements are linstate::bench's CUDA
//! overloads (<linstate/cuda/bench.cuh>: decode, prefill, train, cuda_roofline), whose header holds
//! the full method; this program picks the variants, sizes and settings, and writes the rows.
//! * Timing: a pair of CUDA events around each call on a non-blocking stream, and before each call
//!   an L2 flush (a 256 MiB cudaMemsetAsync), as triton's do_bench does — and as there, the calls
//!   are enqueued back to back and the host synchronises once after the last, so the host's work
//!   for a call may overlap the flush before it. Decode `eager` rows instead wait for the flush
//!   and for each call: their interval holds the call's host work too (a latency).
//! * Repetitions: one untimed first call (pool growth, lazy loading), one timed call as an estimate,
//!   then min(--warmup, ⌈25 ms / estimate⌉) untimed warm-up calls and
//!   clamp(⌈--budget-ms / estimate⌉, --min-reps, --reps) timed calls. Reported: the median and the
//!   20th / 80th percentiles (linear interpolation, as torch.quantile).
//! * Inputs (drawn on the device by a counter-based generator, once per measurement; the peer's
//!   distributions): q, k, v, the shared partition's q, k and dO ~ N(0, 1); log-decays
//!   g = logsigmoid(N(0, 1)) / 16 (≤ 0, natural log); β = σ(N(0, 1)); router logits ~ N(0, 1);
//!   decode states ~ N(0, 0.1²); scale K^-1/2.
//! * prefill: linstate::forward (o only, no final state). train: forward, then linstate::backward
//!   with a random dO, writing every input's gradient (no initial state, so no dh0); the forward keeps
//!   what the backward would recompute (linstate::saved_states: the bf16 GLA family; --saved-states=0:
//!   the backward recomputes, the rows of sessions before 14). Algorithm
//!   chunked<64> (and recurrent for GLA up to --recurrent-tmax, a reference row); strategies varlen
//!   and mask for SSE.
//! * decode: forward_in_place, T = 1 per sequence, recurrent, B ∈ --batch. Three rows per case:
//!   `eager` (one call between events after the flush, host work included), `host` (the host's time
//!   to enqueue one call, back to back, no GPU timing) and `graph`: R steps captured into one CUDA
//!   graph, step r on its own state and inputs, R chosen so that the touched state bytes of the R
//!   steps exceed 4 × L2 (no reuse from L2 between steps), replayed --graph-replays times; the
//!   figure is a replay's time / R (median over replays).
//! * copy: the device-to-device cudaMemcpyAsync of linstate::bench::cuda_roofline (1 GiB when free
//!   memory allows, 20 calls); bytes = 2 × its size (read + written). The same measurement gives the
//!   fp32 FMA and bf16 tensor-core peaks, printed as metadata.
//! * Order: copy, decode, then for each T from the longest down, every variant's prefill and train
//!   rows. Past --deadline seconds (default 240) the remaining measurements are skipped (printed).
//! * bytes: the compulsory traffic of the row (linstate::bench::counts: state + I/O bytes). decode:
//!   the state bytes the step must touch (shared + kw selected partitions of each sequence and head,
//!   fp32, read and written: B·H·K·V·4·2·(1 + kw); GLA B·H·K·V·4·2) plus the step's inputs and
//!   output. prefill: every input read once and o written once. train: the forward's bytes plus the
//!   backward's (inputs and dO read, every gradient written). gbps = bytes / median / 1e9.
//!
//! Output: a table on stdout and, with --out, one CSV row per measurement (lines starting with '#'
//! are metadata):
//!   suite,variant,strategy,algorithm,B,T,N,median_ms,p20_ms,p80_ms,bytes,gbps,mode,reps
//! (mode: fwd | fwdbwd | eager | host | graph | d2d). bench/plot_gpu.py turns it into the figure and
//! the tables of docs/benchmarks.md, next to the peer's JSON.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <linstate/cuda/bench.cuh>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace {

namespace pt = linstate::partition;
namespace rt = linstate::router;
namespace lb = linstate::bench;
using linstate::index_t;
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
  bool saved_states = true;           // --saved-states: train keeps the forward's operands for the backward
  int pieces = 0;                     // --pieces: the delta rule's bf16 forward pipeline (0: the library's choice)
  int bscan_warps = 8;                // --bscan-warps: the delta rule's bf16 backward scans, warps per block (8, 16)
  std::string decode_path = "auto";  // --decode-path: auto (the library's choice), fused, stream, split, three-kernel
  int decode_variant = 0;             // --decode-variant: decode_stream_kernel's variant (measurements)
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
      "  --pieces=0                          the delta rule's bf16 forward in N pipelined pieces (0: the library's choice)\n"
      "  --bscan-warps=8                     warps per block of the delta rule's bf16 backward scans (8 or 16)\n"
      "  --saved-states=1                    train: the forward keeps what the backward would recompute\n"
      "                                      (linstate::saved_states; bf16 GLA family); 0: the backward recomputes\n"
      "  --decode-path=auto                  decode: 'fused' takes the register-tile decode kernel (decode.cuh) at\n"
      "                                      every size, 'stream' the streamed one (decode_stream.cuh) wherever it\n"
      "                                      applies, 'split' the cluster-split one (decode_split.cuh) wherever it\n"
      "                                      applies, 'three-kernel' none (router, recurrent, combine; comparisons)\n"
      "  --decode-variant=0                  decode_stream_kernel's variant (rows in flight, register cap)\n"
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
    else if (key == "--saved-states" && (val == "0" || val == "1")) c.saved_states = val == "1";
    else if (key == "--delta") c.delta = true;
    else if (key == "--pieces") c.pieces = std::atoi(val.c_str());
    else if (key == "--bscan-warps" && (val == "8" || val == "16")) c.bscan_warps = std::atoi(val.c_str());
    else if (key == "--decode-path" &&
             (val == "auto" || val == "fused" || val == "stream" || val == "split" || val == "three-kernel"))
      c.decode_path = val;
    else if (key == "--decode-variant") c.decode_variant = std::atoi(val.c_str());
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

//! A row's times in milliseconds.
struct stats {
  double median = 0, p20 = 0, p80 = 0;
  int reps = 0;
};
stats ms_of(const lb::stats& s) { return {s.median * 1e3, s.p20 * 1e3, s.p80 * 1e3, s.n}; }

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

  //! The bench header's options for B sequences of T tokens: bf16, H = 8, K = V = 128, this run's
  //! repetition settings and L2 flush; the roofline is measured once, by run_copy.
  lb::options options(index_t B, index_t T) const {
    lb::options o{.B = B, .T = T, .H = H, .K = K, .V = V, .dtype = lb::scalar_type::bf16};
    o.final_state = false;
    o.min_reps = cfg.min_reps, o.max_reps = cfg.reps, o.budget_ms = cfg.budget_ms;
    o.warmup = cfg.warmup, o.warmup_ms = cfg.warmup_ms, o.cold_cache = cfg.flush, o.roofline = false;
    o.saved_states = cfg.saved_states;
    return o;
  }
  //! Runs measurement f (a call of linstate::bench) for row r. Returns no value (after printing why)
  //! when the deadline has passed or the measurement throws.
  template <class F>
  std::optional<lb::result> measure(const row& r, F&& f) {
    if (past_deadline()) return skipped(r, "deadline"), std::nullopt;
    try {
      return f();
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
// Variants
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// Prefill and train
// ---------------------------------------------------------------------------------------------

//! Prefill and train rows of one variant at one length.
template <class Spec>
void run_sequence(bench_context& ctx, index_t T, const variant_info& vi) {
  const lb::options o = ctx.options(1, T);
  auto one = [&](auto algorithm, auto strategy) {
    row r;
    r.variant = vi.name, r.strategy = strategy.name, r.algorithm = algorithm.name, r.B = 1, r.T = T, r.N = vi.N;
    if (ctx.cfg.suite("prefill")) {
      r.suite = "prefill", r.mode = "fwd";
      if (auto m = ctx.measure(r, [&] { return lb::prefill<Spec, Eigen::bfloat16>(ctx.be, o, algorithm, strategy); }))
        r.s = ms_of(m->time), r.bytes = m->work.bytes(), ctx.record(r);
    }
    if (ctx.cfg.suite("train")) {
      r.suite = "train", r.mode = "fwdbwd";
      if (auto m = ctx.measure(r, [&] { return lb::train<Spec, Eigen::bfloat16>(ctx.be, o, algorithm, strategy); }))
        r.s = ms_of(m->time), r.bytes = m->work.bytes(), ctx.record(r);
    }
  };
  if (vi.N == 0) {
    one(linstate::chunked<64>{}, linstate::varlen{});
    if (T <= ctx.cfg.recurrent_tmax) one(linstate::recurrent{}, linstate::varlen{});
  } else {
    if (ctx.cfg.strategy("varlen")) one(linstate::chunked<64>{}, linstate::varlen{});
    if (ctx.cfg.strategy("mask")) one(linstate::chunked<64>{}, linstate::mask{});
  }
}

void run_sequences(bench_context& ctx) {
  if (!ctx.cfg.suite("prefill") && !ctx.cfg.suite("train")) return;
  // Longest first: if the deadline cuts the run, what is lost is the short, launch-bound lengths,
  // not the T = 32768 rows the targets are set at.
  std::vector<index_t> Ts;
  for (index_t T = ctx.cfg.tmin; T <= ctx.cfg.tmax; T *= 2) Ts.insert(Ts.begin(), T);
  for (index_t T : Ts) {
    auto run = [&](auto tag, const variant_info& vi) { run_sequence<typename decltype(tag)::type>(ctx, T, vi); };
    for_each_variant(ctx.cfg, run);
    for_each_delta_variant(ctx.cfg, run);
  }
}

// ---------------------------------------------------------------------------------------------
// Decode
// ---------------------------------------------------------------------------------------------
template <class Spec>
void run_decode(bench_context& ctx, const variant_info& vi, index_t B) {
  row r;
  r.suite = "decode", r.variant = vi.name, r.strategy = "varlen", r.algorithm = "recurrent", r.B = B, r.T = 1, r.N = vi.N;

  // eager: one call after the flush, host work included; host: the same calls enqueued back to back
  lb::options o = ctx.options(B, 1);
  o.reps = ctx.cfg.decode_reps;
  r.mode = "eager";
  if (auto m = ctx.measure(r, [&] { return lb::decode<Spec, Eigen::bfloat16>(ctx.be, o, linstate::recurrent{}, linstate::varlen{}); })) {
    r.s = ms_of(m->time), r.bytes = m->work.bytes(), ctx.record(r);
    row h = r;
    h.mode = "host", h.bytes = 0, h.s = ms_of(m->host);
    ctx.record(h);
  }

  // graph: R steps over R state/input sets captured once, replayed
  o.graph = true, o.cold_cache = false, o.reps = ctx.cfg.graph_replays;
  r.mode = "graph";
  if (auto m = ctx.measure(r, [&] { return lb::decode<Spec, Eigen::bfloat16>(ctx.be, o, linstate::recurrent{}, linstate::varlen{}); })) {
    r.s = ms_of(m->time), r.bytes = m->work.bytes(), ctx.record(r);
    const double l2 = ctx.l2_bytes > 0 ? ctx.l2_bytes : 60.0 * (1 << 20);
    std::printf("%42s(graph: %d steps over %d state sets, %.0f MiB of touched state per replay, L2 %.0f MiB)\n", "",
                m->graph_steps, m->graph_steps, m->work.state_bytes * m->graph_steps / (1 << 20), l2 / (1 << 20));
  }
}

void run_decodes(bench_context& ctx) {
  namespace cd = linstate::cuda_detail;
  cd::decode_fused_enabled = ctx.cfg.decode_path == "auto" || ctx.cfg.decode_path == "fused";
  cd::decode_stream_enabled = ctx.cfg.decode_path == "auto" || ctx.cfg.decode_path == "stream";
  cd::decode_split_enabled = ctx.cfg.decode_path == "auto" || ctx.cfg.decode_path == "split";
  if (ctx.cfg.decode_path == "split")
    cd::decode_split_max_n = 64, cd::decode_split_max_tasks = index_t{1} << 40, cd::decode_split_single = true,
    cd::decode_split_single_max_tasks = index_t{1} << 40;
  cd::decode_stream_variant = ctx.cfg.decode_variant;
  if (ctx.cfg.decode_path == "fused") cd::decode_fused_max_n = 64, cd::decode_fused_max_tasks = index_t{1} << 40;
  if (ctx.cfg.decode_path == "stream") cd::decode_stream_max_n = 64, cd::decode_stream_min_tasks = 0;
  for (index_t B : ctx.cfg.batch)
    for_each_variant(ctx.cfg, [&](auto tag, const variant_info& vi) { run_decode<typename decltype(tag)::type>(ctx, vi, B); });
}

// ---------------------------------------------------------------------------------------------
// Copy bandwidth (and the rest of the roofline)
// ---------------------------------------------------------------------------------------------
void run_copy(bench_context& ctx) {
  row r;
  r.suite = "copy", r.variant = "memcpy_d2d", r.strategy = "-", r.algorithm = "-", r.mode = "d2d";
  const auto saved = ctx.cfg.deadline_s;
  ctx.cfg.deadline_s = 0;  // the reference of the decode rows: always measured
  try {
    const lb::roofline rf = lb::cuda_roofline(ctx.be);
    r.s = ms_of(rf.copy_time), r.bytes = rf.copy_bytes;
    ctx.copy_gbps = r.gbps();
    ctx.record(r);
    ctx.meta("roofline: copy " + bench_context::fmt("%.1f GB/s", rf.copy_bytes_per_s / 1e9) + ", fp32 FMA " +
             bench_context::fmt("%.1f TFLOP/s", rf.fma_flop_per_s / 1e12) + ", bf16 tensor cores (wmma) " +
             bench_context::fmt("%.1f TFLOP/s", rf.tensor_flop_per_s / 1e12) + " (" + rf.method + ")");
  } catch (const std::exception& e) {
    ctx.skipped(r, std::string("error: ") + e.what());
  }
  ctx.cfg.deadline_s = saved;
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
  linstate::cuda_detail::delta_tc_pieces_forced = cfg.pieces;
  linstate::cuda_detail::delta_tc_bscan_warps = cfg.bscan_warps;
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
  ctx.meta("measurements: linstate::bench (<linstate/cuda/bench.cuh>)");
  ctx.meta(cfg.saved_states ? "train: the forward keeps its operands for the backward (saved_states; bf16 GLA family)"
                            : "train: the backward recomputes the forward's operands (--saved-states=0)");
  ctx.header();

  if (cfg.suite("copy") || cfg.suite("decode")) run_copy(ctx);
  if (cfg.suite("decode")) run_decodes(ctx);
  run_sequences(ctx);

  ctx.tables();
  std::printf("\ntotal %.1f s%s\n", ctx.elapsed_s(),
              ctx.skipped_count() ? (", " + std::to_string(ctx.skipped_count()) + " measurement(s) skipped").c_str() : "");
  return 0;
}
