// linstate/diagnostics.hpp — what a run did to its recurrent state: per-partition routing load, row
// sparsity of keys and states, the entropy of each state's singular values, and each partition's decay
// clock. CPU, host data; not included by <linstate/linstate.hpp> (it pulls in Eigen's SVD module).
//
// The four quantities are the state diagnostics of the SSE paper (arXiv 2507.16577): the singular-value
// entropy of Fig. 5, the key row sparsity of Fig. 8 (entries below 1e-5: routed 41.6 %, shared 4.9 %,
// GLA ≈ 0) and the local-clock argument (a routed partition decays only on the tokens routed to it).
// docs/diagnostics.md gives every formula. Each function reads views and returns an owning report;
// nothing is written to its arguments, and bad input throws linstate::error naming the tensor and its
// shape before anything is computed.
// \code
//   #include <linstate/diagnostics.hpp>
//   namespace dg = linstate::diagnostics;
//   auto r = linstate::forward<sse_n4k1s>(linstate::cpu{}, in);
//   std::cout << dg::summarize<sse_n4k1s>(in, r.final_state.cview());   // one Markdown table row per partition
//   auto load = dg::route_load<sse_n4k1s>(in.router_logits);             // [N] write / read fractions
//   auto spec = dg::state_spectrum(r.final_state.cview());               // [S,P,HV] entropy, effective rank
// \endcode
#pragma once

#include <Eigen/SVD>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/tags.hpp"
#include "concepts.hpp"
#include "describe.hpp"
#include "detail/numeric.hpp"
#include "detail/problem.hpp"
#include "detail/router.hpp"
#include "io_types.hpp"
#include "tensor.hpp"

namespace linstate::diagnostics {

//! The paper's threshold for a "zero" entry (Fig. 8): |x| < 1e-5.
inline constexpr double default_threshold = 1e-5;

// ------------------------------------------------------------------------------------------------
// Reports
// ------------------------------------------------------------------------------------------------

//! \brief How often the router selects each routed partition, over every token of a call.
//! `writes[n]` / `reads[n]`: tokens whose write / read set contains routed partition n (as the router
//! policy's own `route` decides, ties and `round_to_input` included); fractions are over `tokens` = B·T
//! (0 when there is no token). Σ_n write_fraction[n] = kw for top_k (every token writes exactly kw).
struct load_report {
  index_t N = 0;       //!< routed partitions
  index_t tokens = 0;  //!< B·T
  int kw = 0, kr = 0;  //!< the router's resolved write / read set sizes (at most that many per token)
  std::vector<index_t> writes, reads;                  //!< [N]
  std::vector<double> write_fraction, read_fraction;   //!< [N] writes / tokens, reads / tokens
  std::vector<double> mean_score;                      //!< [N] mean router score p_t[n] over all tokens (P_n of the balance loss)
  std::vector<double> mean_write_weight;               //!< [N] mean write weight c^w_t[n] over the tokens writing n (0 if none)
};

//! \brief Fraction of near-zero entries of a state `[S,P,HV,K,V]`, per partition. A row is one key row
//! of a K×V state matrix (V entries); it counts as zero when all of its entries are below the threshold.
struct sparsity_report {
  double threshold = default_threshold;
  index_t S = 0, P = 0, HV = 0, K = 0, V = 0;
  std::vector<double> entries;  //!< [P] fraction of entries with |h| < threshold, over every (s, hv) of partition p
  std::vector<double> rows;     //!< [P] fraction of the S·HV·K key rows whose every entry is below the threshold
  double all_entries = 0, all_rows = 0;  //!< the same over the whole tensor
};

//! \brief Fraction of near-zero entries of a key tensor `[B,T,H,K]`, per key head and overall.
struct key_sparsity_report {
  double threshold = default_threshold;
  index_t B = 0, T = 0, H = 0, K = 0;
  std::vector<double> per_head;  //!< [H]
  double all = 0;                //!< over every entry (0 for an empty tensor)
};

//! \brief Fraction of near-zero key entries per partition of a run: partition p counts the keys of the
//! tokens that write it (routed: `in.k` of the tokens in its write set; shared: `in.shared.k` of every
//! token; single or dense: `in.k` of every token), over all key heads. Keys as given, before the
//! router's write gate and before an l2 normalisation the decay policy applies.
struct partition_key_sparsity_report {
  double threshold = default_threshold;
  index_t P = 0;
  std::vector<index_t> entries;  //!< [P] key entries counted (tokens writing p · H · K)
  std::vector<double> fraction;  //!< [P] of those, the fraction with |k| < threshold (0 when none)
};

//! \brief Singular values of every state matrix (one K×V matrix per (s, p, hv)) and the Shannon entropy
//! of their normalised distribution, `H = −Σ_i π_i ln π_i` with `π_i = σ_i / Σ_j σ_j` (nats), and the
//! effective rank `exp(H)` (Roy & Vetterli 2007). A zero matrix (Σσ = 0) has entropy 0 and effective
//! rank 0 by convention; the per-partition means leave zero matrices out and count them in `zero_states`.
struct spectrum_report {
  index_t S = 0, P = 0, HV = 0, K = 0, V = 0, r = 0;  //!< r = min(K, V) singular values per matrix
  std::vector<double> singular_values;  //!< [S,P,HV,r], descending, computed in double (Eigen::JacobiSVD)
  std::vector<double> entropy;          //!< [S,P,HV] nats, in [0, ln r]
  std::vector<double> effective_rank;   //!< [S,P,HV] exp(entropy), in [1, r]; 0 for a zero matrix
  std::vector<double> mean_entropy;         //!< [P] over the non-zero matrices of partition p (0 if none)
  std::vector<double> mean_effective_rank;  //!< [P] likewise
  std::vector<index_t> zero_states;         //!< [P] matrices of partition p with Σσ = 0
  double entropy_at(index_t s, index_t p, index_t hv) const { return entropy[static_cast<std::size_t>((s * P + p) * HV + hv)]; }
};

//! \brief Each partition's local clock (SSE's argument: a routed partition decays only when a token
//! writes it). `events[s,p]` counts the tokens of sequence s that advanced partition p's state — every
//! token for the shared partition, a single partition or a dense router; the tokens whose write set
//! holds it for a routed one. `log_decay[s,p,hv]` is Σ over those tokens of the policy's log-decay λ_t
//! (`D::log_decay`, averaged over the K rows for per-key gates), so the state's oldest content of this
//! call is retained by about e^{log_decay}. Counts only the tokens of this call (not the initial state's
//! history). The chunked kernels floor each λ at −104 (transition.hpp); the sum here is of raw λ.
struct clock_report {
  index_t S = 0, P = 0, HV = 0;
  bool shared = false;                 //!< partition 0 is the shared one
  std::vector<index_t> length;         //!< [S] tokens of sequence s (the dense clock)
  std::vector<index_t> events;         //!< [S,P]
  bool has_log_decay = false;          //!< the decay policy declares `log_decay(g, i)` (families diagonal, delta)
  std::vector<double> log_decay;       //!< [S,P,HV] (empty when !has_log_decay)
  index_t events_at(index_t s, index_t p) const { return events[static_cast<std::size_t>(s * P + p)]; }
  double log_decay_at(index_t s, index_t p, index_t hv) const {
    return log_decay[static_cast<std::size_t>((s * P + p) * HV + hv)];
  }
};

//! \brief All of the above for one run, printable as a Markdown table with one row per partition
//! (`to_markdown()`, `operator<<`). Reports that were not computed (no router, no state given) are empty.
struct summary {
  std::string variant;  //!< linstate::describe<Spec>(), or empty
  double threshold = default_threshold;
  index_t P = 0;
  bool shared = false;  //!< partition 0 is the shared one
  bool single = false;  //!< partition::single
  std::optional<load_report> load;
  std::optional<partition_key_sparsity_report> keys;
  std::optional<sparsity_report> state_sparsity;
  std::optional<spectrum_report> spectrum;
  std::optional<clock_report> clock;

  //! "shared", "routed n" or "single" (for a summary of a variant); "partition p" for a bare state.
  std::string partition_name(index_t p) const {
    if (shared && p == 0) return "shared";
    if (variant.empty()) return "partition " + std::to_string(p);
    if (single) return "single";
    return "routed " + std::to_string(p - (shared ? 1 : 0));
  }
  std::string to_markdown() const;
};

inline std::ostream& operator<<(std::ostream& os, const summary& s) { return os << s.to_markdown(); }

// ------------------------------------------------------------------------------------------------
// Implementation helpers
// ------------------------------------------------------------------------------------------------
namespace detail {

using linstate::detail::fail;

template <class X>
concept is_variant_like = requires {
  typename X::router;
  typename X::partition;
};
template <class X>
struct router_of {
  using type = X;
};
template <class X>
  requires is_variant_like<X>
struct router_of<X> {
  using type = typename X::router;
};

inline void require_threshold(const std::string& api, double threshold) {
  if (!(threshold > 0) || !std::isfinite(threshold))
    fail(api, "threshold must be finite and > 0, got " + std::to_string(threshold));
}

inline void require_state(const std::string& api, const tensor_view<const float>& state) {
  if (state.empty()) fail(api, "state is required: [S,P,HV,K,V] fp32");
  if (state.rank() != 5) fail(api, "state has shape " + state.shape.str() + " but must be [S,P,HV,K,V] (rank 5)");
  for (int i = 0; i < 5; ++i)
    if (state.shape[i] < 0) fail(api, "state has shape " + state.shape.str() + ": every dimension must be >= 0");
}

//! N of partition policy Pt, from the policy or options.num_partitions (the rules of make_problem).
template <class Pt>
index_t resolve_partitions(const std::string& api, const options& opt) {
  if constexpr (Pt::is_single) {
    return 1;
  } else if constexpr (Pt::num_routed == dynamic) {
    if (opt.num_partitions == dynamic) fail(api, "partition::routed<dynamic> needs options.num_partitions (it is not set)");
    if (opt.num_partitions < 1)
      fail(api, "partition::routed<dynamic> needs options.num_partitions >= 1 (got " + std::to_string(opt.num_partitions) + ")");
    return opt.num_partitions;
  } else {
    if (opt.num_partitions != dynamic && opt.num_partitions != Pt::num_routed)
      fail(api, "options.num_partitions = " + std::to_string(opt.num_partitions) + " but the variant fixes N = " +
                    std::to_string(Pt::num_routed) + " at compile time");
    return Pt::num_routed;
  }
}

//! The load of a routing computed by linstate::detail::compute_routing.
inline load_report load_of(const linstate::detail::routing& rt, index_t tokens, int kw, int kr) {
  load_report L;
  L.N = rt.N, L.tokens = tokens, L.kw = kw, L.kr = kr;
  const auto n = static_cast<std::size_t>(rt.N);
  L.writes.assign(n, 0), L.reads.assign(n, 0);
  L.write_fraction.assign(n, 0.0), L.read_fraction.assign(n, 0.0);
  L.mean_score.assign(n, 0.0), L.mean_write_weight.assign(n, 0.0);
  for (index_t t = 0; t < tokens; ++t)
    for (std::size_t p = 0; p < n; ++p) {
      const std::size_t i = static_cast<std::size_t>(t) * n + p;
      if (rt.flags[i] & linstate::detail::route_write) ++L.writes[p], L.mean_write_weight[p] += rt.cw[i];
      if (rt.flags[i] & linstate::detail::route_read) ++L.reads[p];
      L.mean_score[p] += rt.prob[i];
    }
  for (std::size_t p = 0; p < n; ++p) {
    if (L.writes[p] > 0) L.mean_write_weight[p] /= static_cast<double>(L.writes[p]);
    if (tokens > 0) {
      const double M = static_cast<double>(tokens);
      L.write_fraction[p] = static_cast<double>(L.writes[p]) / M;
      L.read_fraction[p] = static_cast<double>(L.reads[p]) / M;
      L.mean_score[p] /= M;
    }
  }
  return L;
}

//! A variant's problem for a call's inputs and the call's routing (routing routers only).
template <class Spec, class Scalar>
struct resolved_run {
  linstate::detail::problem_for<typename Spec::router> pb;
  linstate::detail::routing rt;
  //! Whether token t writes partition slot p (0..P-1): always for the shared partition, a single
  //! partition or a router that does not route; its write flag for a routed one.
  bool writes(index_t t, index_t p) const {
    if (!pb.routed || (pb.shared && p == 0)) return true;
    const index_t n = p - (pb.shared ? 1 : 0);
    return (rt.flags[static_cast<std::size_t>(t * pb.N + n)] & linstate::detail::route_write) != 0;
  }
};

//! make_problem (every input checked as forward() checks it), then the routing of the call.
template <class Spec, class Scalar>
resolved_run<Spec, Scalar> resolve_run(const std::string& api, const inputs<Scalar>& in, const options& opt) {
  using R = typename Spec::router;
  resolved_run<Spec, Scalar> r{linstate::detail::make_problem<Spec>(api, in, tensor_view<Scalar>{}, tensor_view<float>{},
                                                                     "state", opt, /*o_given=*/false),
                               {}};
  if constexpr (R::routes) linstate::detail::compute_routing<R>(r.pb, in, r.rt);
  return r;
}

inline std::string fixed(double x, int digits) {
  if (std::isnan(x)) return "n/a";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return buf;
}
inline std::string percent(double x) { return fixed(100.0 * x, 1) + " %"; }
inline std::string scientific(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.0e", x);
  return buf;
}

}  // namespace detail

// ------------------------------------------------------------------------------------------------
// Routing load
// ------------------------------------------------------------------------------------------------

//! \brief Per-partition routing load of router logits `[B,T,N]` (the shape forward() takes: one set per
//! token, shared by every head), computed through the router policy's own `configure` and `route`, so a
//! user-written router is measured exactly as the backends run it.
//!
//! `X` is a variant (its router and partition count; N must match) or a router policy (N is taken
//! from the logits). `opt` resolves dynamic kw / kr / N / gates as for forward() — the forward call's
//! options object works. `router_params` (`[N]` or `[N,m]` fp32) is required for routers with
//! `params_per_partition > 0` and refused otherwise.
//! \code
//! auto L = linstate::diagnostics::route_load<sse_n4k1s>(in.router_logits);     // variant
//! auto M = linstate::diagnostics::route_load<linstate::router::top_k<2>>(eta);  // router policy, N = eta.size(2)
//! // L.write_fraction[n]: share of the B·T tokens that write routed partition n
//! \endcode
template <class X, InputScalar Scalar>
load_report route_load(const tensor_view<const Scalar>& router_logits, const options& opt = {},
                       const tensor_view<const float>& router_params = {}) {
  using R = typename detail::router_of<X>::type;
  if constexpr (detail::is_variant_like<X>) static_assert(linstate::detail::validate<X>());
  static_assert(Router<R>, "linstate::diagnostics::route_load: X must be a variant or a router policy (linstate::Router)");
  static_assert(R::routes,
                "linstate::diagnostics::route_load: the router does not route (router::dense sends every token to "
                "every partition: every load is 1); give a variant or router with `routes = true`");
  const std::string api = "linstate::diagnostics::route_load";
  const tensor_view<const Scalar>& lg = router_logits;
  if (lg.empty()) linstate::detail::fail(api, "router_logits is required: [B,T,N]");
  if (lg.rank() != 3 || lg.size(0) < 0 || lg.size(1) < 0 || lg.size(2) < 1)
    linstate::detail::fail(api, "router_logits has shape " + lg.shape.str() + " but must be [B,T,N] with N >= 1");
  index_t N = lg.size(2);
  if constexpr (detail::is_variant_like<X>) {
    N = detail::resolve_partitions<typename X::partition>(api, opt);
    if (lg.size(2) != N)
      linstate::detail::fail(api, "router_logits has shape " + lg.shape.str() + " but must be [B,T,N] with N = " +
                                      std::to_string(N) + " (the variant's routed partitions)");
  } else if (opt.num_partitions != dynamic && opt.num_partitions != N) {
    linstate::detail::fail(api, "options.num_partitions = " + std::to_string(opt.num_partitions) +
                                    " but router_logits " + lg.shape.str() + " has N = " + std::to_string(N));
  }
  if constexpr (R::params_per_partition > 0) {
    const shape_t want = R::params_per_partition == 1 ? shape_t{N} : shape_t{N, R::params_per_partition};
    linstate::detail::require_shape(api, "router_params", router_params, want,
                                    linstate::detail::router_messages<R>::params());
  } else {
    linstate::detail::require_absent(api, "router_params", router_params, linstate::detail::router_messages<R>::no_params());
  }
  linstate::detail::problem pb;
  pb.B = lg.size(0), pb.T = lg.size(1), pb.N = N, pb.routed = true;
  const auto cfg = R::configure(opt, N, api);
  for (index_t i = 0; i < lg.numel(); ++i)
    if (!std::isfinite(linstate::detail::to_float(lg.data[i])))
      linstate::detail::fail(api, "router_logits " + lg.shape.str() + " holds a non-finite value at token " +
                                      std::to_string(i / N) + ", partition " + std::to_string(i % N));
  linstate::detail::routing rt;
  linstate::detail::compute_routing<R>(pb, cfg, lg, router_params.data, rt);
  return detail::load_of(rt, pb.tokens(), cfg.kw, cfg.kr);
}

//! Same as above for a view of non-const logits.
template <class X, InputScalar Scalar>
load_report route_load(const tensor_view<Scalar>& router_logits, const options& opt = {},
                       const tensor_view<const float>& router_params = {}) {
  return route_load<X>(tensor_view<const Scalar>(router_logits), opt, router_params);
}

// ------------------------------------------------------------------------------------------------
// Row sparsity
// ------------------------------------------------------------------------------------------------

//! \brief Row sparsity of a state `[S,P,HV,K,V]` (rows = the K key rows of each K×V matrix): the
//! fraction of entries with |h| < threshold per partition, and of rows that are below it everywhere.
//! A partition no token wrote (and that started from zeros) has sparsity 1. NaN entries count as non-zero.
//! \code
//! auto sp = linstate::diagnostics::state_sparsity(r.final_state.cview());   // sp.entries[p], sp.rows[p]
//! \endcode
inline sparsity_report state_sparsity(const tensor_view<const float>& state, double threshold = default_threshold) {
  const std::string api = "linstate::diagnostics::state_sparsity";
  detail::require_threshold(api, threshold);
  detail::require_state(api, state);
  sparsity_report R;
  R.threshold = threshold;
  R.S = state.size(0), R.P = state.size(1), R.HV = state.size(2), R.K = state.size(3), R.V = state.size(4);
  const auto P = static_cast<std::size_t>(R.P);
  std::vector<index_t> zero_entries(P, 0), zero_rows(P, 0);
  const float* h = state.data;
  for (index_t s = 0; s < R.S; ++s)
    for (index_t p = 0; p < R.P; ++p)
      for (index_t hv = 0; hv < R.HV; ++hv)
        for (index_t i = 0; i < R.K; ++i) {
          const float* row = h + (((s * R.P + p) * R.HV + hv) * R.K + i) * R.V;
          index_t z = 0;
          for (index_t j = 0; j < R.V; ++j) z += std::fabs(static_cast<double>(row[j])) < threshold;
          zero_entries[static_cast<std::size_t>(p)] += z;
          zero_rows[static_cast<std::size_t>(p)] += z == R.V;
        }
  const double per_entries = static_cast<double>(R.S * R.HV * R.K * R.V), per_rows = static_cast<double>(R.S * R.HV * R.K);
  R.entries.assign(P, 0.0), R.rows.assign(P, 0.0);
  index_t ze = 0, zr = 0;
  for (std::size_t p = 0; p < P; ++p) {
    if (per_entries > 0) R.entries[p] = static_cast<double>(zero_entries[p]) / per_entries;
    if (per_rows > 0) R.rows[p] = static_cast<double>(zero_rows[p]) / per_rows;
    ze += zero_entries[p], zr += zero_rows[p];
  }
  if (per_entries > 0 && P > 0) R.all_entries = static_cast<double>(ze) / (per_entries * static_cast<double>(P));
  if (per_rows > 0 && P > 0) R.all_rows = static_cast<double>(zr) / (per_rows * static_cast<double>(P));
  return R;
}

//! \brief Sparsity of a key tensor `[B,T,H,K]` (`in.k`, `in.shared.k`, or any `[B,T,H,K]` activation):
//! fraction of entries with |k| < threshold per head and overall.
template <InputScalar Scalar>
key_sparsity_report key_sparsity(const tensor_view<const Scalar>& k, double threshold = default_threshold) {
  const std::string api = "linstate::diagnostics::key_sparsity";
  detail::require_threshold(api, threshold);
  if (k.empty()) linstate::detail::fail(api, "k is required: [B,T,H,K]");
  if (k.rank() != 4) linstate::detail::fail(api, "k has shape " + k.shape.str() + " but must be [B,T,H,K] (rank 4)");
  for (int i = 0; i < 4; ++i)
    if (k.shape[i] < 0) linstate::detail::fail(api, "k has shape " + k.shape.str() + ": every dimension must be >= 0");
  key_sparsity_report R;
  R.threshold = threshold;
  R.B = k.size(0), R.T = k.size(1), R.H = k.size(2), R.K = k.size(3);
  std::vector<index_t> z(static_cast<std::size_t>(R.H), 0);
  const index_t rows = R.B * R.T;
  for (index_t t = 0; t < rows; ++t)
    for (index_t h = 0; h < R.H; ++h)
      for (index_t i = 0; i < R.K; ++i)
        z[static_cast<std::size_t>(h)] +=
            std::fabs(static_cast<double>(linstate::detail::to_float(k.data[(t * R.H + h) * R.K + i]))) < threshold;
  R.per_head.assign(z.size(), 0.0);
  index_t total = 0;
  for (std::size_t h = 0; h < z.size(); ++h) {
    if (rows * R.K > 0) R.per_head[h] = static_cast<double>(z[h]) / static_cast<double>(rows * R.K);
    total += z[h];
  }
  if (k.numel() > 0) R.all = static_cast<double>(total) / static_cast<double>(k.numel());
  return R;
}

//! Same as above for a view of non-const keys.
template <InputScalar Scalar>
key_sparsity_report key_sparsity(const tensor_view<Scalar>& k, double threshold = default_threshold) {
  return key_sparsity(tensor_view<const Scalar>(k), threshold);
}

namespace detail {
template <class Spec, class Scalar>
partition_key_sparsity_report key_sparsity_of(const resolved_run<Spec, Scalar>& run, const inputs<Scalar>& in, double threshold) {
  const auto& pb = run.pb;
  partition_key_sparsity_report R;
  R.threshold = threshold;
  R.P = pb.P;
  std::vector<index_t> zeros(static_cast<std::size_t>(pb.P), 0);
  R.entries.assign(zeros.size(), 0);
  R.fraction.assign(zeros.size(), 0.0);
  const index_t width = pb.H * pb.K;
  for (index_t t = 0; t < pb.tokens(); ++t) {
    // zero entries of this token's routed and shared keys, counted once each
    index_t zk = 0, zs = 0;
    for (index_t i = 0; i < width; ++i) zk += std::fabs(static_cast<double>(linstate::detail::to_float(in.k.data[t * width + i]))) < threshold;
    if (pb.shared)
      for (index_t i = 0; i < width; ++i)
        zs += std::fabs(static_cast<double>(linstate::detail::to_float(in.shared.k.data[t * width + i]))) < threshold;
    for (index_t p = 0; p < pb.P; ++p)
      if (run.writes(t, p)) {
        zeros[static_cast<std::size_t>(p)] += (pb.shared && p == 0) ? zs : zk;
        R.entries[static_cast<std::size_t>(p)] += width;
      }
  }
  for (std::size_t p = 0; p < zeros.size(); ++p)
    if (R.entries[p] > 0) R.fraction[p] = static_cast<double>(zeros[p]) / static_cast<double>(R.entries[p]);
  return R;
}
}  // namespace detail

//! \brief Key sparsity per partition of a run (see partition_key_sparsity_report): the inputs are
//! checked as forward() checks them, and the routing is the router policy's own.
//! \code
//! auto ks = linstate::diagnostics::partition_key_sparsity<sse_n4k1s>(in);   // ks.fraction[0]: shared keys
//! \endcode
template <class Spec, InputScalar Scalar>
partition_key_sparsity_report partition_key_sparsity(const inputs<Scalar>& in, const options& opt = {},
                                                     double threshold = default_threshold) {
  static_assert(linstate::detail::validate<Spec>());
  const std::string api = "linstate::diagnostics::partition_key_sparsity";
  detail::require_threshold(api, threshold);
  return detail::key_sparsity_of(detail::resolve_run<Spec>(api, in, opt), in, threshold);
}

// ------------------------------------------------------------------------------------------------
// Singular-value entropy
// ------------------------------------------------------------------------------------------------

//! \brief Shannon entropy (nats) of `π_i = σ_i / Σ_j σ_j` for non-negative σ; 0 when Σσ = 0.
//! Uniform σ over r values gives ln r; one non-zero value gives 0.
inline double singular_value_entropy(std::span<const double> sigma) {
  double sum = 0;
  for (double s : sigma) {
    if (!(s >= 0)) throw error("linstate::diagnostics::singular_value_entropy: singular values must be >= 0 (got " + std::to_string(s) + ")");
    sum += s;
  }
  if (!(sum > 0)) return 0.0;
  double H = 0;
  for (double s : sigma)
    if (s > 0) {
      const double pi = s / sum;
      H -= pi * std::log(pi);
    }
  return std::max(H, 0.0);
}

//! \brief Singular values, their entropy and the effective rank of every K×V matrix of a state
//! `[S,P,HV,K,V]` (SSE paper Fig. 5: a higher entropy spreads the state's energy over more directions).
//! Runs over linstate::cpu_threads(be) threads (OpenMP), one matrix per task.
//! \code
//! auto sv = linstate::diagnostics::state_spectrum(r.final_state.cview());
//! double h = sv.entropy_at(0, 1, 0);          // sequence 0, partition 1, value head 0
//! double erank = sv.mean_effective_rank[1];    // mean over the non-zero matrices of partition 1
//! \endcode
inline spectrum_report state_spectrum(const tensor_view<const float>& state, const cpu& be = {}) {
  const std::string api = "linstate::diagnostics::state_spectrum";
  detail::require_state(api, state);
  spectrum_report R;
  R.S = state.size(0), R.P = state.size(1), R.HV = state.size(2), R.K = state.size(3), R.V = state.size(4);
  R.r = std::min(R.K, R.V);
  const index_t M = R.S * R.P * R.HV, block = R.K * R.V;
  for (index_t i = 0; i < state.numel(); ++i)
    if (!std::isfinite(state.data[i]))
      linstate::detail::fail(api, "state " + state.shape.str() + " holds a non-finite value at flat index " + std::to_string(i) +
                                      " (matrix " + std::to_string(block > 0 ? i / block : 0) + ")");
  R.singular_values.assign(static_cast<std::size_t>(M * R.r), 0.0);
  R.entropy.assign(static_cast<std::size_t>(M), 0.0);
  R.effective_rank.assign(static_cast<std::size_t>(M), 0.0);
  // JacobiSVD (two-sided Jacobi: Eigen's most accurate SVD) without a QR preconditioner, on the matrix
  // padded with zeros to n×n, n = max(K, V): padding adds only zero singular values, and the
  // preconditioner-free instantiation compiles in a fraction of BDCSVD's or the QR-preconditioned one's
  // time. The matrices are independent: one per task, over linstate::cpu_threads(be) threads.
  const index_t n = std::max(R.K, R.V);
  const int threads = cpu_threads(be);
  (void)threads;
#if LINSTATE_HAS_OPENMP
#pragma omp parallel num_threads(threads) if (threads > 1 && M > 1)
#endif
  {
    Eigen::MatrixXd m = Eigen::MatrixXd::Zero(n, n);
#if LINSTATE_HAS_OPENMP
#pragma omp for schedule(dynamic)
#endif
    for (index_t idx = 0; idx < M; ++idx) {
      const float* h = state.data + idx * block;
      bool any = false;
      for (index_t i = 0; i < R.K; ++i)
        for (index_t j = 0; j < R.V; ++j) {
          m(i, j) = static_cast<double>(h[i * R.V + j]);
          any = any || h[i * R.V + j] != 0.f;
        }
      double* sv = R.singular_values.data() + idx * R.r;
      if (!any || R.r == 0) continue;  // a zero matrix: σ = 0, entropy and effective rank 0
      const Eigen::JacobiSVD<Eigen::MatrixXd, Eigen::NoQRPreconditioner> svd(m);  // singular values only, in double
      const auto& s = svd.singularValues();
      double sum = 0;
      for (index_t i = 0; i < R.r; ++i) sum += sv[i] = std::max(s(i), 0.0);
      if (sum > 0) {
        const double H = singular_value_entropy(std::span<const double>(sv, static_cast<std::size_t>(R.r)));
        R.entropy[static_cast<std::size_t>(idx)] = H;
        R.effective_rank[static_cast<std::size_t>(idx)] = std::exp(H);
      }
    }
  }
  R.mean_entropy.assign(static_cast<std::size_t>(R.P), 0.0);
  R.mean_effective_rank.assign(static_cast<std::size_t>(R.P), 0.0);
  R.zero_states.assign(static_cast<std::size_t>(R.P), 0);
  std::vector<index_t> nonzero(static_cast<std::size_t>(R.P), 0);
  for (index_t idx = 0; idx < M; ++idx) {
    const auto ps = static_cast<std::size_t>((idx / R.HV) % R.P);
    if (R.effective_rank[static_cast<std::size_t>(idx)] > 0) {
      R.mean_entropy[ps] += R.entropy[static_cast<std::size_t>(idx)];
      R.mean_effective_rank[ps] += R.effective_rank[static_cast<std::size_t>(idx)];
      ++nonzero[ps];
    } else {
      ++R.zero_states[ps];
    }
  }
  for (std::size_t p = 0; p < nonzero.size(); ++p)
    if (nonzero[p] > 0) {
      R.mean_entropy[p] /= static_cast<double>(nonzero[p]);
      R.mean_effective_rank[p] /= static_cast<double>(nonzero[p]);
    }
  return R;
}

// ------------------------------------------------------------------------------------------------
// Decay clock
// ------------------------------------------------------------------------------------------------

namespace detail {
template <class Spec, class Scalar>
clock_report decay_clock_of(const resolved_run<Spec, Scalar>& run, const inputs<Scalar>& in) {
  using D = typename Spec::decay;
  const auto& pb = run.pb;
  clock_report C;
  C.S = pb.S, C.P = pb.P, C.HV = pb.HV, C.shared = pb.shared;
  C.length.assign(static_cast<std::size_t>(pb.S), 0);
  C.events.assign(static_cast<std::size_t>(pb.S * pb.P), 0);
  constexpr bool has_ld = requires(const double* g, index_t i) {
    { D::log_decay(g, i) } -> std::convertible_to<double>;
  };
  C.has_log_decay = has_ld;
  if constexpr (has_ld) C.log_decay.assign(static_cast<std::size_t>(pb.S * pb.P * pb.HV), 0.0);
  const index_t gw = pb.gate_width();
  std::vector<double> grow(static_cast<std::size_t>(std::max<index_t>(gw, 1)), 0.0), lam_routed(static_cast<std::size_t>(pb.HV)),
      lam_shared(lam_routed.size());
  // mean over the K rows of λ_t for one (token, value head), from a gate tensor
  auto mean_lambda = [&](const tensor_view<const Scalar>& g, index_t t, index_t hv) {
    if constexpr (has_ld) {
      const double* gp = nullptr;
      if (gw > 0) {
        for (index_t i = 0; i < gw; ++i)
          grow[static_cast<std::size_t>(i)] = static_cast<double>(linstate::detail::to_float(g.data[(t * pb.HV + hv) * gw + i]));
        gp = grow.data();
      }
      double sum = 0;
      for (index_t i = 0; i < pb.K; ++i) sum += static_cast<double>(D::log_decay(gp, i));
      return sum / static_cast<double>(pb.K);
    } else {
      (void)g, (void)t, (void)hv;
      return 0.0;
    }
  };
  for (index_t s = 0; s < pb.S; ++s) {
    const index_t t0 = pb.seq[static_cast<std::size_t>(s)], t1 = pb.seq[static_cast<std::size_t>(s + 1)];
    C.length[static_cast<std::size_t>(s)] = t1 - t0;
    for (index_t t = t0; t < t1; ++t) {
      if constexpr (has_ld)
        for (index_t hv = 0; hv < pb.HV; ++hv) {
          lam_routed[static_cast<std::size_t>(hv)] = mean_lambda(in.g, t, hv);
          if (pb.shared) lam_shared[static_cast<std::size_t>(hv)] = mean_lambda(in.shared.g, t, hv);
        }
      for (index_t p = 0; p < pb.P; ++p) {
        if (!run.writes(t, p)) continue;
        ++C.events[static_cast<std::size_t>(s * pb.P + p)];
        if constexpr (has_ld) {
          const auto& lam = (pb.shared && p == 0) ? lam_shared : lam_routed;
          for (index_t hv = 0; hv < pb.HV; ++hv)
            C.log_decay[static_cast<std::size_t>((s * pb.P + p) * pb.HV + hv)] += lam[static_cast<std::size_t>(hv)];
        }
      }
    }
  }
  return C;
}
}  // namespace detail

//! \brief The decay clock of each partition over one call's inputs (see clock_report), for variant
//! `Spec`: the inputs are checked as forward() checks them, the routing is the router policy's own
//! (`route`), and λ comes from the decay policy's `log_decay(g, i)` (the same function the chunked
//! kernels read), on `in.g` for routed / single partitions and on `in.shared.g` for the shared one.
//! A decay policy without `log_decay` (a family::recurrent_only policy may have none) still gets the
//! event counts; `has_log_decay` is then false.
//! \code
//! auto c = linstate::diagnostics::decay_clock<sse_n4k1s>(in);
//! c.events_at(0, 0);         // = T: the shared partition decays on every token
//! c.events_at(0, 1);         // tokens of sequence 0 routed to partition 0 (slot 1)
//! c.log_decay_at(0, 1, 0);   // Σ λ over those tokens, value head 0
//! \endcode
template <class Spec, InputScalar Scalar>
clock_report decay_clock(const inputs<Scalar>& in, const options& opt = {}) {
  static_assert(linstate::detail::validate<Spec>());
  return detail::decay_clock_of(detail::resolve_run<Spec>("linstate::diagnostics::decay_clock", in, opt), in);
}

// ------------------------------------------------------------------------------------------------
// Summary
// ------------------------------------------------------------------------------------------------

//! \brief Every diagnostic of one run of variant `Spec`: the routing load (routing routers), the key
//! sparsity per partition, the decay clock, and — when `final_state` `[S,P,HV,K,V]` is given — the
//! state's row sparsity and singular-value entropy. Print it (`std::cout << s`) for a Markdown table.
//! \code
//! auto r = linstate::forward<sse_n4k1s>(linstate::cpu{}, in);
//! std::cout << linstate::diagnostics::summarize<sse_n4k1s>(in, r.final_state.cview());
//! \endcode
template <class Spec, InputScalar Scalar>
summary summarize(const inputs<Scalar>& in, const tensor_view<const float>& final_state = {}, const options& opt = {},
                  double threshold = default_threshold) {
  static_assert(linstate::detail::validate<Spec>());
  using R = typename Spec::router;
  const std::string api = "linstate::diagnostics::summarize";
  detail::require_threshold(api, threshold);
  const auto run = detail::resolve_run<Spec>(api, in, opt);
  if (!final_state.empty() && !(final_state.shape == run.pb.state_shape()))
    linstate::detail::fail(api, "final_state has shape " + final_state.shape.str() + " but must be [S,P,HV,K,V] = " +
                                    run.pb.state_shape().str() + " for these inputs");
  summary S;
  S.variant = describe<Spec>();
  S.threshold = threshold;
  S.P = run.pb.P, S.shared = run.pb.shared, S.single = Spec::partition::is_single;
  if constexpr (R::routes) S.load = detail::load_of(run.rt, run.pb.tokens(), run.pb.kw, run.pb.kr);
  S.keys = detail::key_sparsity_of(run, in, threshold);
  S.clock = detail::decay_clock_of(run, in);
  if (!final_state.empty()) {
    S.state_sparsity = state_sparsity(final_state, threshold);
    S.spectrum = state_spectrum(final_state);
  }
  return S;
}

//! \brief The state-only diagnostics (row sparsity and singular-value entropy) of any state
//! `[S,P,HV,K,V]`, as a printable summary. Partitions are named "partition p" unless `shared` says
//! partition 0 is the shared one.
inline summary summarize(const tensor_view<const float>& state, bool shared = false, double threshold = default_threshold) {
  summary S;
  S.threshold = threshold;
  S.state_sparsity = state_sparsity(state, threshold);
  S.spectrum = state_spectrum(state);
  S.P = state.size(1), S.shared = shared;
  return S;
}

inline std::string summary::to_markdown() const {
  using detail::fixed;
  using detail::percent;
  std::string out;
  if (!variant.empty()) out += "Diagnostics of " + variant + "\n\n";
  const std::string thr = detail::scientific(threshold);
  std::string head = "| partition |", rule = "|---|";
  auto col = [&](const std::string& name) { head += " " + name + " |", rule += "---:|"; };
  if (load) col("tokens writing"), col("tokens reading"), col("mean write weight");
  if (keys) col("key entries < " + thr);
  if (state_sparsity) col("state entries < " + thr), col("zero state rows");
  if (spectrum) col("SV entropy (nats)"), col("effective rank"), col("zero states");
  if (clock) {
    col("decay events / seq");
    if (clock->has_log_decay) col("Σλ / seq"), col("e^Σλ");
  }
  out += head + "\n" + rule + "\n";
  for (index_t p = 0; p < P; ++p) {
    const auto ps = static_cast<std::size_t>(p);
    const bool routed_slot = !single && !(shared && p == 0);
    std::string line = "| " + partition_name(p) + " |";
    auto cell = [&](const std::string& v) { line += " " + v + " |"; };
    if (load) {
      if (routed_slot) {
        const auto n = static_cast<std::size_t>(p - (shared ? 1 : 0));
        cell(percent(load->write_fraction[n])), cell(percent(load->read_fraction[n])), cell(fixed(load->mean_write_weight[n], 3));
      } else {
        cell("100.0 %"), cell("100.0 %"), cell("1");
      }
    }
    if (keys) cell(keys->entries[ps] > 0 ? percent(keys->fraction[ps]) : "n/a");
    if (state_sparsity) cell(percent(state_sparsity->entries[ps])), cell(percent(state_sparsity->rows[ps]));
    if (spectrum) {
      const bool all_zero = spectrum->zero_states[ps] == spectrum->S * spectrum->HV;
      cell(all_zero ? "n/a" : fixed(spectrum->mean_entropy[ps], 3));
      cell(all_zero ? "n/a" : fixed(spectrum->mean_effective_rank[ps], 2));
      cell(std::to_string(spectrum->zero_states[ps]) + " / " + std::to_string(spectrum->S * spectrum->HV));
    }
    if (clock) {
      double ev = 0, ld = 0;
      for (index_t s = 0; s < clock->S; ++s) {
        ev += static_cast<double>(clock->events_at(s, p));
        if (clock->has_log_decay)
          for (index_t hv = 0; hv < clock->HV; ++hv) ld += clock->log_decay_at(s, p, hv);
      }
      const double seqs = static_cast<double>(std::max<index_t>(clock->S, 1));
      cell(fixed(ev / seqs, 1));
      if (clock->has_log_decay) {
        const double mean = ld / (seqs * static_cast<double>(std::max<index_t>(clock->HV, 1)));
        cell(fixed(mean, 3)), cell(fixed(std::exp(mean), 3));
      }
    }
    out += line + "\n";
  }
  if (shared && !variant.empty()) out += "\n(state partition 0 is the shared one; routed n is state partition 1 + n)\n";
  return out;
}

}  // namespace linstate::diagnostics
