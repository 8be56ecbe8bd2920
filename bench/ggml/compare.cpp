// bench/ggml/compare.cpp — linstate against ggml's CPU ops, in one process, on identical inputs
// (issue 13, item 6). Built and run by bench/ggml/run.sh, which fetches ggml's source from a registry
// package and builds its CPU backend; not part of the meson build.
//
// Rows (fp32, H = 8, K = V = 128, `--threads` threads for both libraries, the same OpenMP runtime):
//   gla_prefill/T   ggml_gated_linear_attn over B = 1 sequence of T tokens, against linstate::forward
//                   with automatic, chunked<64> and recurrent (zero initial state, final state written)
//   gdn_prefill/T   ggml_gated_delta_net (one state snapshot), against linstate::forward automatic, chunked<64>
//                   (the WY form) and recurrent
//   gla_decode/B    one token of each of B sequences: ggml_gated_linear_attn with n_tokens = n_seqs = B,
//   gdn_decode/B    ggml_gated_delta_net with n_tokens = 1, n_seqs = B, against linstate::forward_in_place
//                   (recurrent), from a mid-sequence state
//
// What is mapped between the two conventions (SPEC §1, §2.1, §3.1 against ggml's CPU ops):
//   * GLA: ggml takes the decay factor α = e^{g} where linstate takes the log-decay g; the driver gives
//     ggml exp(g) (computed once, outside the timed calls). ggml's `scale` multiplies q, as SPEC §1.5:
//     both get K^-1/2. Both decay the state before the write and read after it (SPEC §2.1). The state
//     layout is the same, [seq, head, K, V] (row = key index).
//   * GDN: ggml takes the log-decay g and the write strength β as they are (β = σ(z) here), applies no
//     l2 normalisation inside the op and a fixed scale 1/sqrt(V) (= K^-1/2 here). linstate runs
//     decay::gated_delta_rule<false> (no normalisation inside either op) on the same inputs, whose keys
//     the input generator draws with unit norm (linstate::testing::random_inputs). ggml stores the
//     state transposed, [seq, head, V, K]; the driver transposes the initial state in and the final
//     state out for the comparison.
//   * Layouts of q, k, v, g, β and o are the same ([B, T, H, D], head-inner).
//
// Timing: every campaign runs every row; inside a row the sides alternate (ggml, linstate algorithms;
// then the reverse order), `--reps` rounds; one sample = as many back-to-back calls as fill
// `--min-time` seconds (at least one), its time per call. A side's figure for a campaign is the
// median of its samples; the table gives the median over campaigns of those figures, and the median
// over campaigns of the per-campaign speed ratio ggml time / linstate time (> 1: linstate faster),
// by the wall clock and by the process CPU time (the sum of the threads' CPU time, which leaves out
// the time they waited for a core: on a shared machine the steadier of the two).
// Agreement: max |Δ| between the two outputs o (and final states) of one call on the same inputs, with
// the largest |value| of ggml's output beside it (the errors are relative to that scale).
//
//   bench/ggml/run.sh --campaigns=4 --threads=2 [--rows=gla_prefill,gdn_decode] [--T=1024,4096,16384]
//                     [--B=1,16] [--reps=3] [--min-time=0.1] [--csv=FILE]
#include <ggml-cpu.h>
#include <ggml.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <time.h>
#include <unistd.h>

#include <linstate/bench.hpp>
#include <linstate/linstate.hpp>

#ifndef LINSTATE_GGML_PACKAGE
#define LINSTATE_GGML_PACKAGE "unknown"
#endif
#ifndef LINSTATE_GGML_COMMIT
#define LINSTATE_GGML_COMMIT "unknown"
#endif
#ifndef LINSTATE_GGML_VERSION
#define LINSTATE_GGML_VERSION "unknown"
#endif

namespace {

using linstate::index_t;
namespace lb = linstate::bench;

struct gla : linstate::spec<> {};
struct gdn : linstate::spec<> {
  using decay = linstate::decay::gated_delta_rule<false>;
};

constexpr index_t H = 8, S = 128;  // heads, K = V = S

// ---------------------------------------------------------------------------------------------
// Command line
// ---------------------------------------------------------------------------------------------
struct config {
  int campaigns = 4, threads = 2, reps = 3;
  double min_time = 0.1;
  std::vector<index_t> Ts = {1024, 4096, 16384};
  std::vector<index_t> Bs = {1, 16};
  std::vector<std::string> rows = {"gla_prefill", "gdn_prefill", "gla_decode", "gdn_decode"};
  std::string csv;
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> r;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');)
    if (!x.empty()) r.push_back(x);
  return r;
}

config parse(int argc, char** argv) {
  config c;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto val = [&](const char* key) -> const char* {
      const std::size_t n = std::strlen(key);
      return a.compare(0, n, key) == 0 ? a.c_str() + n : nullptr;
    };
    auto ints = [](const char* v) {
      std::vector<index_t> r;
      for (const auto& x : split(v)) r.push_back(std::stol(x));
      return r;
    };
    if (const char* v = val("--campaigns=")) c.campaigns = std::atoi(v);
    else if (const char* v = val("--threads=")) c.threads = std::atoi(v);
    else if (const char* v = val("--reps=")) c.reps = std::atoi(v);
    else if (const char* v = val("--min-time=")) c.min_time = std::atof(v);
    else if (const char* v = val("--T=")) c.Ts = ints(v);
    else if (const char* v = val("--B=")) c.Bs = ints(v);
    else if (const char* v = val("--rows=")) c.rows = split(v);
    else if (const char* v = val("--csv=")) c.csv = v;
    else {
      std::fprintf(stderr,
                   "usage: compare [--campaigns=4] [--threads=2] [--reps=3] [--min-time=0.1] [--T=1024,4096,16384] "
                   "[--B=1,16] [--rows=gla_prefill,gdn_prefill,gla_decode,gdn_decode] [--csv=FILE]\n");
      std::exit(a == "--help" ? 0 : 2);
    }
  }
  if (c.campaigns < 1 || c.threads < 1 || c.reps < 1) {
    std::fprintf(stderr, "compare: --campaigns, --threads and --reps must be >= 1\n");
    std::exit(2);
  }
  return c;
}

// ---------------------------------------------------------------------------------------------
// The ggml side: one graph of one op at fixed sizes, computed with a work buffer made once
// ---------------------------------------------------------------------------------------------
struct ggml_graph {
  ggml_context* ctx = nullptr;
  ggml_cgraph* gf = nullptr;
  ggml_tensor* out = nullptr;
  ggml_cplan plan{};
  std::vector<std::uint8_t> work;
  index_t n_o = 0;  // floats of the attention output at the start of `out`

  ggml_graph(std::size_t bytes) {
    ggml_init_params p{bytes + 64 * ggml_tensor_overhead() + ggml_graph_overhead() + (1 << 20), nullptr, false};
    ctx = ggml_init(p);
    if (!ctx) throw std::runtime_error("ggml_init failed");
  }
  ggml_graph(const ggml_graph&) = delete;
  ggml_graph& operator=(const ggml_graph&) = delete;
  ~ggml_graph() { ggml_free(ctx); }

  ggml_tensor* tensor(std::initializer_list<std::int64_t> ne, const float* src, index_t n) {
    std::int64_t d[4] = {1, 1, 1, 1};
    int i = 0;
    for (auto x : ne) d[i++] = x;
    ggml_tensor* t = ggml_new_tensor(ctx, GGML_TYPE_F32, i, d);
    if (ggml_nelements(t) != n) throw std::runtime_error("ggml tensor size mismatch");
    if (src) std::memcpy(t->data, src, sizeof(float) * static_cast<std::size_t>(n));
    else std::memset(t->data, 0, sizeof(float) * static_cast<std::size_t>(n));
    return t;
  }
  void finish(ggml_tensor* result, index_t n_out, int threads) {
    out = result, n_o = n_out;
    gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, out);
    plan = ggml_graph_plan(gf, threads, nullptr);  // no threadpool: one per call, as ggml's CPU backend by default
    work.resize(plan.work_size + 64);
    plan.work_data = plan.work_size ? work.data() : nullptr;
  }
  void compute() {
    if (ggml_graph_compute(gf, &plan) != GGML_STATUS_SUCCESS) throw std::runtime_error("ggml_graph_compute failed");
  }
  const float* o() const { return static_cast<const float*>(out->data); }
  const float* state() const { return o() + n_o; }
};

//! [n, H, S, S] → [n, H, S, S] with the last two axes swapped (linstate's [K,V] ↔ ggml's GDN [V,K]).
std::vector<float> transpose_states(const float* src, index_t n) {
  std::vector<float> r(static_cast<std::size_t>(n * H * S * S));
  for (index_t m = 0; m < n * H; ++m)
    for (index_t i = 0; i < S; ++i)
      for (index_t j = 0; j < S; ++j) r[static_cast<std::size_t>((m * S + j) * S + i)] = src[(m * S + i) * S + j];
  return r;
}

float max_abs(const float* a, index_t n) {
  float m = 0.f;
  for (index_t i = 0; i < n; ++i) m = std::max(m, std::abs(a[i]));
  return m;
}

float max_abs_diff(const float* a, const float* b, index_t n) {
  float m = 0.f;
  for (index_t i = 0; i < n; ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

//! ggml_gated_linear_attn over the inputs of `w`: n_seqs sequences of `tokens / n_seqs` tokens.
template <class W>
std::unique_ptr<ggml_graph> ggml_gla(const W& w, index_t tokens, index_t n_seqs, const float* state0, int threads) {
  const index_t n = tokens * H * S;
  auto g = std::make_unique<ggml_graph>(sizeof(float) * static_cast<std::size_t>(4 * n + 2 * n + 2 * n_seqs * H * S * S));
  std::vector<float> alpha(w.g.data(), w.g.data() + n);
  for (float& x : alpha) x = std::exp(x);  // ggml's gate is the decay factor, linstate's its log
  ggml_tensor* k = g->tensor({S, H, tokens}, w.k.data(), n);
  ggml_tensor* v = g->tensor({S, H, tokens}, w.v.data(), n);
  ggml_tensor* q = g->tensor({S, H, tokens}, w.q.data(), n);
  ggml_tensor* a = g->tensor({S, H, tokens}, alpha.data(), n);
  ggml_tensor* s0 = g->tensor({S * S * H, n_seqs}, state0, S * S * H * n_seqs);
  g->finish(ggml_gated_linear_attn(g->ctx, k, v, q, a, s0, 1.f / std::sqrt(static_cast<float>(S))), n, threads);
  return g;
}

//! ggml_gated_delta_net over the inputs of `w`: B sequences of T tokens, one state snapshot.
template <class W>
std::unique_ptr<ggml_graph> ggml_gdn(const W& w, index_t B, index_t T, const float* state0, int threads) {
  const index_t n = B * T * H * S;
  auto g = std::make_unique<ggml_graph>(sizeof(float) * static_cast<std::size_t>(3 * n + 2 * B * T * H + 2 * n + 4 * B * H * S * S));
  std::vector<float> st = state0 ? transpose_states(state0, B) : std::vector<float>(static_cast<std::size_t>(B * H * S * S), 0.f);
  ggml_tensor* q = g->tensor({S, H, T, B}, w.q.data(), n);
  ggml_tensor* k = g->tensor({S, H, T, B}, w.k.data(), n);
  ggml_tensor* v = g->tensor({S, H, T, B}, w.v.data(), n);
  ggml_tensor* gg = g->tensor({1, H, T, B}, w.g.data(), B * T * H);
  ggml_tensor* beta = g->tensor({1, H, T, B}, w.beta.data(), B * T * H);
  ggml_tensor* s0 = g->tensor({S, S, H, B}, st.data(), B * H * S * S);
  g->finish(ggml_gated_delta_net(g->ctx, q, k, v, gg, beta, s0, 1), n, threads);
  return g;
}

// ---------------------------------------------------------------------------------------------
// Rows
// ---------------------------------------------------------------------------------------------
struct side {
  std::string name;              // "ggml" or the linstate algorithm
  std::function<void()> call;
  std::vector<double> campaign, campaign_cpu;  // per-campaign median seconds per call (wall, process CPU)
  std::vector<double> samples, samples_cpu;    // this campaign's samples
};

struct row {
  std::string name;      // e.g. gla_prefill/4096
  index_t tokens = 0;    // tokens per call
  std::vector<side> sides;  // sides[0] = ggml
  std::vector<float> diff_o, diff_state;  // per linstate side
  float max_o = 0.f, max_state = 0.f;     // max |ggml's o| and |ggml's final state|
  std::shared_ptr<void> keep;  // the workload and the ggml graph
};

template <class Spec, class... Algs>
row prefill_row(const std::string& op, index_t T, int threads, const char* const* names) {
  auto w = std::make_shared<lb::workload<Spec, float>>(lb::mode::prefill, lb::options{.B = 1, .T = T, .H = H, .K = S, .V = S});
  std::shared_ptr<ggml_graph> g;
  if constexpr (linstate::detail::is_delta<typename Spec::decay>) g = ggml_gdn(*w, 1, T, nullptr, threads);
  else g = ggml_gla(*w, T, 1, nullptr, threads);
  row r;
  r.name = op + "/" + std::to_string(T), r.tokens = T;
  r.keep = std::make_shared<std::pair<decltype(w), decltype(g)>>(w, g);
  r.sides.push_back({"ggml", [g] { g->compute(); }, {}, {}, {}, {}});
  const linstate::cpu be{.threads = threads};
  int i = 0;
  (r.sides.push_back({names[i++], [w, be] { w->prefill(be, Algs{}); }, {}, {}, {}, {}}), ...);
  // agreement: one call of each on the same inputs
  g->compute();
  const index_t no = T * H * S;
  std::vector<float> gstate(g->state(), g->state() + H * S * S);
  if constexpr (linstate::detail::is_delta<typename Spec::decay>) gstate = transpose_states(gstate.data(), 1);
  r.max_o = max_abs(g->o(), no), r.max_state = max_abs(gstate.data(), H * S * S);
  for (std::size_t s = 1; s < r.sides.size(); ++s) {
    std::fill(w->o.values().begin(), w->o.values().end(), 0.f);
    r.sides[s].call();
    r.diff_o.push_back(max_abs_diff(w->o.data(), g->o(), no));
    r.diff_state.push_back(max_abs_diff(w->final_state.data(), gstate.data(), H * S * S));
  }
  return r;
}

template <class Spec>
row decode_row(const std::string& op, index_t B, int threads) {
  auto w = std::make_shared<lb::workload<Spec, float>>(lb::mode::decode, lb::options{.B = B, .T = 1, .H = H, .K = S, .V = S});
  const std::vector<float> state0(w->state.data(), w->state.data() + w->state.numel());  // [B,1,H,K,V]
  std::shared_ptr<ggml_graph> g;
  if constexpr (linstate::detail::is_delta<typename Spec::decay>) g = ggml_gdn(*w, B, 1, state0.data(), threads);
  else g = ggml_gla(*w, B, B, state0.data(), threads);
  row r;
  r.name = op + "/B=" + std::to_string(B), r.tokens = B;
  r.keep = std::make_shared<std::pair<decltype(w), decltype(g)>>(w, g);
  const linstate::cpu be{.threads = threads};
  r.sides.push_back({"ggml", [g] { g->compute(); }, {}, {}, {}, {}});
  r.sides.push_back({"recurrent (forward_in_place)", [w, be] { w->decode(be, linstate::recurrent{}); }, {}, {}, {}, {}});
  g->compute();
  r.sides[1].call();  // from state0, as ggml's call
  std::vector<float> gstate(g->state(), g->state() + B * H * S * S);
  if constexpr (linstate::detail::is_delta<typename Spec::decay>) gstate = transpose_states(gstate.data(), B);
  r.max_o = max_abs(g->o(), B * H * S), r.max_state = max_abs(gstate.data(), B * H * S * S);
  r.diff_o.push_back(max_abs_diff(w->o.data(), g->o(), B * H * S));
  r.diff_state.push_back(max_abs_diff(w->state.data(), gstate.data(), B * H * S * S));
  return r;
}

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double process_cpu() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

//! Seconds per call, wall clock and process CPU time (the latter leaves out the time the threads
//! waited for a core on a shared machine; with passive OpenMP waits it sums the threads' work).
std::pair<double, double> sample(const std::function<void()>& f, double min_time) {
  const double t0 = now(), c0 = process_cpu();
  int n = 0;
  double t = t0;
  do {
    f();
    ++n;
    t = now();
  } while (t - t0 < min_time);
  return {(t - t0) / n, (process_cpu() - c0) / n};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string read_first_line(const char* path, const char* key = nullptr) {
  std::ifstream f(path);
  for (std::string l; std::getline(f, l);)
    if (!key || l.rfind(key, 0) == 0) return key ? l.substr(l.find(':') + 2) : l;
  return "?";
}

std::string rate(double per_s) {
  char b[32];
  if (per_s >= 1e6) std::snprintf(b, sizeof b, "%.2f M", per_s / 1e6);
  else std::snprintf(b, sizeof b, "%.1f k", per_s / 1e3);
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  const config c = parse(argc, argv);
  ggml_cpu_init();
  const char* wait = std::getenv("OMP_WAIT_POLICY");
  std::printf("# linstate vs ggml, one process, identical inputs (bench/ggml/compare.cpp)\n");
  std::printf("# ggml: %s from PyPI, vendored llama.cpp commit %s, ggml version %s (ggml_version() = %s), CPU backend, OpenMP\n",
              LINSTATE_GGML_PACKAGE, LINSTATE_GGML_COMMIT, LINSTATE_GGML_VERSION, ggml_version());
  std::printf("# machine: %s, %d online CPUs; threads = %d (both libraries); OMP_WAIT_POLICY = %s\n",
              read_first_line("/proc/cpuinfo", "model name").c_str(), static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)),
              c.threads, wait ? wait : "(unset)");
  std::printf("# fp32, H = %ld, K = V = %ld; campaigns = %d, rounds per campaign = %d, min time per sample = %.3f s\n",
              static_cast<long>(H), static_cast<long>(S), c.campaigns, c.reps, c.min_time);
  std::printf("# load average at start: %s\n", read_first_line("/proc/loadavg").c_str());
  std::fflush(stdout);

  auto want = [&](const char* r) { return std::find(c.rows.begin(), c.rows.end(), r) != c.rows.end(); };
  static const char* const gla_names[] = {"automatic", "chunked<64>", "recurrent"};
  static const char* const gdn_names[] = {"automatic", "chunked<64> (WY)", "recurrent"};
  std::vector<row> rows;
  for (index_t T : c.Ts) {
    if (want("gla_prefill"))
      rows.push_back(prefill_row<gla, linstate::automatic, linstate::chunked<64>, linstate::recurrent>("gla_prefill", T, c.threads, gla_names));
    if (want("gdn_prefill"))
      rows.push_back(prefill_row<gdn, linstate::automatic, linstate::chunked<64>, linstate::recurrent>("gdn_prefill", T, c.threads, gdn_names));
  }
  for (index_t B : c.Bs) {
    if (want("gla_decode")) rows.push_back(decode_row<gla>("gla_decode", B, c.threads));
    if (want("gdn_decode")) rows.push_back(decode_row<gdn>("gdn_decode", B, c.threads));
  }

  std::ofstream csv;
  if (!c.csv.empty()) {
    csv.open(c.csv);
    csv << "campaign,row,side,round,seconds_per_call,cpu_seconds_per_call\n";
  }
  for (int k = 0; k < c.campaigns; ++k) {
    for (row& r : rows) {
      for (side& s : r.sides) s.samples.clear(), s.samples_cpu.clear();
      for (int rd = 0; rd < c.reps; ++rd) {
        const std::size_t n = r.sides.size();
        for (std::size_t j = 0; j < n; ++j) {
          side& s = r.sides[rd % 2 ? n - 1 - j : j];  // alternate the order from round to round
          const auto [t, tc] = sample(s.call, c.min_time);
          s.samples.push_back(t), s.samples_cpu.push_back(tc);
          if (csv) csv << k << ',' << r.name << ",\"" << s.name << "\"," << rd << ',' << t << ',' << tc << '\n';
        }
      }
      for (side& s : r.sides) s.campaign.push_back(median(s.samples)), s.campaign_cpu.push_back(median(s.samples_cpu));
    }
    std::fprintf(stderr, "campaign %d/%d done (load %s)\n", k + 1, c.campaigns, read_first_line("/proc/loadavg").c_str());
  }

  std::printf("\n| row | side | wall / call | tokens/s (wall) | ggml / this, wall (median [min, max] of campaigns) "
              "| CPU / call | ggml / this, CPU | max abs Δo (max abs o) | max abs Δstate (max abs state) |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  auto ratios = [](const std::vector<double>& a, const std::vector<double>& b) {
    std::vector<double> r;
    for (std::size_t k = 0; k < a.size(); ++k) r.push_back(a[k] / b[k]);
    return r;
  };
  for (const row& r : rows) {
    const side& g = r.sides[0];
    const double tg = median(g.campaign);
    std::printf("| %s | ggml | %.4g ms | %s | | %.4g ms | | | |\n", r.name.c_str(), tg * 1e3, rate(r.tokens / tg).c_str(),
                median(g.campaign_cpu) * 1e3);
    for (std::size_t s = 1; s < r.sides.size(); ++s) {
      const side& l = r.sides[s];
      const std::vector<double> rw = ratios(g.campaign, l.campaign), rc = ratios(g.campaign_cpu, l.campaign_cpu);
      const double tl = median(l.campaign);
      std::printf("| %s | linstate %s | %.4g ms | %s | %.3f [%.3f, %.3f] | %.4g ms | %.3f [%.3f, %.3f] | %.2g (%.3g) | %.2g (%.3g) |\n",
                  r.name.c_str(), l.name.c_str(), tl * 1e3, rate(r.tokens / tl).c_str(), median(rw),
                  *std::min_element(rw.begin(), rw.end()), *std::max_element(rw.begin(), rw.end()), median(l.campaign_cpu) * 1e3,
                  median(rc), *std::min_element(rc.begin(), rc.end()), *std::max_element(rc.begin(), rc.end()), r.diff_o[s - 1],
                  r.max_o, r.diff_state[s - 1], r.max_state);
    }
  }
  std::printf("\n# load average at end: %s\n", read_first_line("/proc/loadavg").c_str());
  return 0;
}
