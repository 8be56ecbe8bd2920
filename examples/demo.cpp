// examples/demo.cpp — three linear-attention variants, each declared in one line, run at realistic
// sizes on the CPU backend.
//
// For every variant the demo
//   1. checks the fast paths: recurrent against chunked<64> on the full sequence (SPEC §9.1 P1), and
//      recurrent against the fp64 per-token loop linstate::reference::forward on the first 256 tokens;
//   2. reports the state size, the bytes one decode step touches (measured by diffing the state
//      around one linstate::forward_in_place step, and the analytic figure of SPEC §11 C8), the decode
//      latency and the prefill throughput of the automatic algorithm.
// It exits with status 1 if a check exceeds a relative difference of 1e-4, or if a decode step changes
// other partitions than the shared one and the kw selected ones.
//
// Sizes: B = 1, T = 2048, H = HV = 8, K = V = 128, fp32 inputs, fixed seed.
#include <linstate/linstate.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace ls = linstate;
namespace dc = linstate::decay;
namespace pt = linstate::partition;
namespace rt = linstate::router;

// --- the three variants: one line each ---------------------------------------------------------
// GLA (SPEC §2.1); SSE-n4k1 with a shared partition (SPEC §7); the same SSE over the gated delta rule
// with l2-normalised q, k, the router gate scaling β (SPEC §3.1, §11 C9).
struct gla : ls::spec<> {};
struct sse_n4k1s : gla { using partition = pt::routed<4, pt::shared>; using router = rt::top_k<1>; };
struct sse_gdn_n4k1s : sse_n4k1s { using decay = dc::gated_delta_rule<true>; };

namespace {

using ls::index_t;
constexpr index_t B = 1, T = 2048, H = 8, HV = 8, K = 128, V = 128;
constexpr index_t T_ref = 256;     // tokens checked against the fp64 reference
constexpr double tolerance = 1e-4;  // max relative difference allowed by the checks
constexpr int prefill_runs = 5;     // median of this many prefills
constexpr int decode_runs = 64;     // median of this many decode steps

// Owning random inputs for variant Spec, T tokens; only the tensors the variant takes are filled.
template <class Spec>
struct random_inputs {
  ls::tensor<float> q, k, v, g, beta, sq, sk, sg, sbeta, logits;

  random_inputs(index_t tokens, unsigned seed) {
    using D = typename Spec::decay;
    using P = typename Spec::partition;
    std::mt19937 gen(seed);
    std::normal_distribution<float> nd;
    auto normal = [&](ls::tensor<float>& t, ls::shape_t s) {
      t = ls::tensor<float>(s);
      for (auto& x : t.values()) x = nd(gen);
    };
    // log-decay g = logsigmoid(z)/16 <= 0, the SSE layer's gate (SPEC §1.4)
    auto log_gate = [&](ls::tensor<float>& t, ls::shape_t s) {
      t = ls::tensor<float>(s);
      for (auto& x : t.values()) x = -std::log1p(std::exp(-nd(gen))) / 16.f;
    };
    auto sigmoid = [&](ls::tensor<float>& t, ls::shape_t s) {
      t = ls::tensor<float>(s);
      for (auto& x : t.values()) x = 1.f / (1.f + std::exp(-nd(gen)));
    };
    const ls::shape_t qk{B, tokens, H, K};
    const ls::shape_t gs = D::gate == linstate::gate_extent::key ? ls::shape_t{B, tokens, HV, K} : ls::shape_t{B, tokens, HV};
    normal(q, qk), normal(k, qk), normal(v, {B, tokens, HV, V});
    if constexpr (D::gate != linstate::gate_extent::none) log_gate(g, gs);
    if constexpr (D::uses_beta) sigmoid(beta, {B, tokens, HV});
    if constexpr (P::has_shared) {
      normal(sq, qk), normal(sk, qk);
      if constexpr (D::gate != linstate::gate_extent::none) log_gate(sg, gs);
      if constexpr (D::uses_beta) sigmoid(sbeta, {B, tokens, HV});
    }
    if constexpr (Spec::router::routes) normal(logits, {B, tokens, P::num_routed});
  }

  // A view of the first `n` tokens (B = 1 and [B,T,...] row-major: a prefix of every buffer).
  ls::inputs<float> view(index_t n) const {
    auto cut = [n](const ls::tensor<float>& t) -> ls::tensor_view<const float> {
      if (t.empty()) return {};
      ls::shape_t s = t.shape();
      s[1] = n;
      return {t.data(), s};
    };
    return {.q = cut(q), .k = cut(k), .v = cut(v), .g = cut(g), .beta = cut(beta),
            .shared = {.q = cut(sq), .k = cut(sk), .g = cut(sg), .beta = cut(sbeta)},
            .router_logits = cut(logits)};
  }
};

// max|a − b| / max|b| over all elements (b is the reference).
template <class A, class Bt>
double rel_diff(const ls::tensor<A>& a, const ls::tensor<Bt>& b) {
  double err = 0, mag = 0;
  for (index_t i = 0; i < b.numel(); ++i) {
    err = std::max(err, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
    mag = std::max(mag, std::abs(static_cast<double>(b[i])));
  }
  return mag > 0 ? err / mag : err;
}

template <class F>
double median_seconds(int runs, F&& f) {
  std::vector<double> s;
  for (int r = 0; r < runs; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::nth_element(s.begin(), s.begin() + runs / 2, s.end());
  return s[static_cast<std::size_t>(runs / 2)];
}

struct row {
  std::string name, describe;
  double rel_chunked = 0, rel_reference = 0;
  index_t state_bytes = 0, measured_bytes = 0, analytic_bytes = 0;
  index_t changed = 0, partitions = 0;
  double decode_us_1 = 0, decode_us = 0, prefill_tps = 0;
};

template <class Spec>
row run_variant(const char* name, unsigned seed) {
  static_assert(ls::Variant<Spec>);
  using P = typename Spec::partition;
  using R = typename Spec::router;
  const ls::cpu cpu{};
  row r;
  r.name = name, r.describe = ls::describe<Spec>();

  const random_inputs<Spec> data(T, seed);
  const ls::inputs<float> in = data.view(T);

  // 1. correctness ------------------------------------------------------------------------------
  // recurrent ≡ chunked<64> (SPEC §9.1 P1) on the whole sequence: outputs and final states
  const auto rec = ls::forward<Spec>(cpu, in, ls::recurrent{});
  const auto chk = ls::forward<Spec>(cpu, in, ls::chunked<64>{});
  r.rel_chunked = std::max(rel_diff(rec.o, chk.o), rel_diff(rec.final_state, chk.final_state));
  // recurrent ≡ the fp64 per-token loop (linstate::reference::forward) on the first T_ref tokens
  const ls::inputs<float> head = data.view(T_ref);
  const auto rec_head = ls::forward<Spec>(cpu, head, ls::recurrent{});
  const auto ref = ls::reference::forward<Spec>(head);
  r.rel_reference = std::max(rel_diff(rec_head.o, ref.o), rel_diff(rec_head.final_state, ref.final_state));

  // 2. prefill throughput, automatic algorithm (CPU: chunked<24> for a forward alone, T > 16)
  const index_t P_all = P::num_routed + (P::has_shared ? 1 : 0);  // partitions in the state (single: 1)
  ls::tensor<float> o({B, T, HV, V}), state({B, P_all, HV, K, V});
  const double t_prefill = median_seconds(prefill_runs, [&] {
    ls::forward<Spec>(cpu, in, ls::outputs<float>{o.view(), state.view()}, ls::automatic{});
  });
  r.prefill_tps = static_cast<double>(B * T) / t_prefill;

  // 3. one decode step on the prefilled state: which partitions does it touch? -------------------
  const random_inputs<Spec> tok(1, seed + 1);
  const ls::inputs<float> in1 = tok.view(1);
  ls::tensor<float> o1({B, 1, HV, V});
  const index_t part_bytes = HV * K * V * static_cast<index_t>(sizeof(float));  // one partition, all heads
  ls::tensor<float> before = state;
  ls::forward_in_place<Spec>(cpu, in1, state.view(), o1.view(), ls::recurrent{});
  for (index_t p = 0; p < P_all; ++p)
    r.changed += std::memcmp(before.data() + p * HV * K * V, state.data() + p * HV * K * V,
                             static_cast<std::size_t>(part_bytes)) != 0;
  r.partitions = P_all;
  r.state_bytes = P_all * part_bytes;
  r.measured_bytes = 2 * r.changed * part_bytes;  // each changed partition is read and written once
  // SPEC §11 C8: a step writes the shared partition and the kw selected ones (router::dense: all)
  index_t written = P_all;
  if constexpr (R::routes) written = R::num_writer + (P::has_shared ? 1 : 0);
  r.analytic_bytes = 2 * written * part_bytes;

  // 4. decode latency (B = 1, one token, state updated in place) --------------------------------
  // Once on the calling thread only, once with the default backend (every OpenMP thread; the CPU
  // driver forks only when a step has enough work to pay for it).
  const ls::cpu one_thread{.threads = 1};
  r.decode_us_1 = 1e6 * median_seconds(decode_runs, [&] {
    ls::forward_in_place<Spec>(one_thread, in1, state.view(), o1.view(), ls::recurrent{});
  });
  r.decode_us = 1e6 * median_seconds(decode_runs, [&] {
    ls::forward_in_place<Spec>(cpu, in1, state.view(), o1.view(), ls::recurrent{});
  });
  return r;
}

}  // namespace

int main() {
  int threads = 1;
#if LINSTATE_HAS_OPENMP
  threads = omp_get_max_threads();
#endif
  std::printf("linstate %d.%d.%d demo: B=%lld T=%lld H=HV=%lld K=%lld V=%lld, fp32 inputs, fp32 state, %d thread(s)\n",
              LINSTATE_VERSION_MAJOR, LINSTATE_VERSION_MINOR, LINSTATE_VERSION_PATCH, static_cast<long long>(B),
              static_cast<long long>(T), static_cast<long long>(H), static_cast<long long>(K),
              static_cast<long long>(V), threads);
  std::printf("SSE strategy: linstate::varlen{} (the default)\n\n");

  const std::vector<row> rows = {run_variant<gla>("gla", 1), run_variant<sse_n4k1s>("sse_n4k1s", 2),
                                 run_variant<sse_gdn_n4k1s>("sse_gdn_n4k1s", 3)};

  std::printf("%-14s %11s  %-12s %-17s %-16s %13s  %-16s %s\n", "variant", "state B/seq", "decode parts",
              "decode r+w (m|a)", "us/step (1|all)", "prefill tok/s", "rec vs chunked64", "rec vs fp64 ref");
  bool ok = true;
  for (const row& r : rows) {
    char parts[48], rw[48], us[48], rc[24], rr[24];
    const bool c8 = r.measured_bytes == r.analytic_bytes;  // SPEC §11 C8: only shared + kw partitions change
    const bool pass_c = r.rel_chunked <= tolerance, pass_r = r.rel_reference <= tolerance;
    ok &= pass_c && pass_r && c8;
    std::snprintf(parts, sizeof parts, "%lld of %lld%s", static_cast<long long>(r.changed),
                  static_cast<long long>(r.partitions), c8 ? "" : " FAIL");
    std::snprintf(rw, sizeof rw, "%.2f|%.2f MiB", static_cast<double>(r.measured_bytes) / 1048576.0,
                  static_cast<double>(r.analytic_bytes) / 1048576.0);
    std::snprintf(us, sizeof us, "%.1f | %.1f", r.decode_us_1, r.decode_us);
    std::snprintf(rc, sizeof rc, "%.1e %s", r.rel_chunked, pass_c ? "ok" : "FAIL");
    std::snprintf(rr, sizeof rr, "%.1e %s", r.rel_reference, pass_r ? "ok" : "FAIL");
    std::printf("%-14s %11lld  %-12s %-17s %-16s %13.0f  %-16s %s\n", r.name.c_str(),
                static_cast<long long>(r.state_bytes), parts, rw, us, r.prefill_tps, rc, rr);
  }
  std::printf("\n");
  for (const row& r : rows) std::printf("%-14s %s\n", r.name.c_str(), r.describe.c_str());
  std::printf(
      "\nstate B/seq   bytes of all partitions of one sequence: P*HV*K*V*4 ([S,P,HV,K,V] fp32, S = 1)\n"
      "decode        one forward_in_place step (T = 1, recurrent) on the prefilled state: partitions whose bytes\n"
      "              changed, and read+write bytes measured from that diff | analytic 2*(shared+kw)*HV*K*V*4\n"
      "us/step       median of %d decode steps (B = 1), on 1 thread | on every OpenMP thread (noisy when other\n"
      "              processes share the cores: a thread fork can then wait a whole scheduler time slice)\n"
      "prefill       B*T / median of %d forward calls, every thread, algorithm linstate::automatic{}\n"
      "rec vs ...    max|a-b| / max|b| over o and the final state, limit %.0e: recurrent against chunked<64>\n"
      "              on all %lld tokens, and recurrent against the fp64 linstate::reference::forward on the first %lld\n",
      decode_runs, prefill_runs, tolerance, static_cast<long long>(T), static_cast<long long>(T_ref));
  if (!ok) std::printf("\nFAILED: a check exceeded %.0e or a decode step touched other partitions\n", tolerance);
  return ok ? 0 : 1;
}
