// linstate/detail/problem.hpp — a variant + inputs resolved into run-time numbers, with every check
// made before anything is written (SPEC §11; errors name tensors and shapes).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <string>
#include <vector>

#include "../concepts.hpp"
#include "../io_types.hpp"
#include "numeric.hpp"
#include "router.hpp"

namespace linstate::detail {

//! The sequence offsets of a problem, [S+1]: held inline up to `inline_capacity` entries, so that a
//! decode step of up to 128 sequences touches no heap (make_problem runs on every step); on the heap
//! beyond. The part of std::vector's interface the library uses.
class seq_offsets {
 public:
  static constexpr std::size_t inline_capacity = 129;
  seq_offsets() = default;
  seq_offsets(const seq_offsets& o) { assign(o.begin(), o.end()); }
  seq_offsets& operator=(const seq_offsets& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  std::size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  index_t* data() { return n_ > inline_capacity ? heap_.data() : buf_; }
  const index_t* data() const { return n_ > inline_capacity ? heap_.data() : buf_; }
  index_t& operator[](std::size_t i) { return data()[i]; }
  const index_t& operator[](std::size_t i) const { return data()[i]; }
  const index_t* begin() const { return data(); }
  const index_t* end() const { return data() + n_; }
  index_t front() const { return data()[0]; }
  index_t back() const { return data()[n_ - 1]; }
  //! n entries, their values unspecified
  void resize(std::size_t n) {
    n_ = n;
    if (n > inline_capacity) heap_.resize(n);
  }
  template <class It>
  void assign(It first, It last) {
    resize(static_cast<std::size_t>(std::distance(first, last)));
    std::copy(first, last, data());
  }

 private:
  index_t buf_[inline_capacity] = {};
  std::vector<index_t> heap_;
  std::size_t n_ = 0;
};

struct problem {
  // what the decay policy declares (copied so that host code can size buffers without the type)
  gate_extent gate = gate_extent::key;
  bool uses_beta = false;
  bool l2norm = false;
  // sizes
  index_t B = 0, T = 0, H = 0, HV = 0, K = 0, V = 0, S = 0;
  index_t N = 1;       // routed partitions (1 for partition::single)
  index_t P = 1;       // partitions in the state (N + shared)
  bool shared = false;
  // router: whether it selects partitions per token, and at most how many it writes / reads
  bool routed = false;
  int kw = 1, kr = 1;
  float scale = 1.f;
  seq_offsets seq;  // [S+1] flat token offsets (token (b,t) is b*T + t)

  index_t tokens() const { return B * T; }
  index_t key_head(index_t hv) const { return hv / (HV / H); }
  index_t state_stride_partition() const { return HV * K * V; }
  index_t state_numel() const { return S * P * HV * K * V; }
  shape_t state_shape() const { return {S, P, HV, K, V}; }
  //! gate entries per (token, value head): 0, 1, K or V
  index_t gate_width() const { return linstate::gate_width(gate, K, V); }
  //! partition index of routed partition n in the state
  index_t routed_slot(index_t n) const { return n + (shared ? 1 : 0); }
};

//! The resolved configuration of router R (empty for a router that does not route).
template <class R>
struct router_config {};
template <class R>
  requires(R::routes)
struct router_config<R> {
  typename R::config value{};
};

//! A problem together with its router's configuration: what make_problem returns.
template <class R>
struct problem_for : problem {
  router_config<R> router_cfg{};
  const auto& rcfg() const { return router_cfg.value; }
};

[[noreturn]] inline void fail(const std::string& api, const std::string& what) { throw error(api + ": " + what); }

template <class T>
std::string shp(const tensor_view<T>& t) {
  return t.empty() ? std::string("(not given)") : t.shape.str();
}

template <class T>
void require_shape(const std::string& api, const char* name, const tensor_view<T>& t, const shape_t& want,
                   const char* meaning) {
  if (t.empty()) fail(api, std::string(name) + " is required: expected " + want.str() + " " + meaning);
  if (!(t.shape == want))
    fail(api, std::string(name) + " has shape " + t.shape.str() + " but must be " + want.str() + " " + meaning);
}

template <class T>
void require_absent(const std::string& api, const char* name, const tensor_view<T>& t, const char* why) {
  if (!t.empty()) fail(api, std::string(name) + " was given (shape " + t.shape.str() + ") but " + why);
}

//! The messages make_problem gives that name a policy, built once per policy: make_problem runs on
//! every decode step, and nothing is formatted there unless a check fails.
template <class D>
struct decay_messages {
  static const char* gate_meaning() {
    static const std::string m = std::string(D::gate == gate_extent::key     ? "([B,T,HV,K] per-key log-decay of "
                                             : D::gate == gate_extent::value ? "([B,T,HV,V] per-value gate of "
                                                                             : "([B,T,HV] scalar log-decay of ") +
                                 D::name + ")";
    return m.c_str();
  }
  static const char* no_gate() {
    static const std::string m = std::string(D::name) + " takes no gate";
    return m.c_str();
  }
  static const char* no_beta() {
    static const std::string m =
        std::string(D::name) + " takes no beta (only a policy with uses_beta, e.g. decay::gated_delta_rule)";
    return m.c_str();
  }
};
template <class R>
struct router_messages {
  static const char* params() {
    static const std::string m = std::string("(the router parameters of ") + R::name + ")";
    return m.c_str();
  }
  static const char* no_params() {
    static const std::string m = std::string(R::name) + " takes no router_params";
    return m.c_str();
  }
  static const char* no_logits() {
    static const std::string m = std::string(R::name) + " takes no logits";
    return m.c_str();
  }
};

//! Resolves Spec + inputs + options into a problem, checking every shape. `state` is the view that
//! will receive the final state (final_state, or the in-place state); `state_name` names it.
//! Only shapes are read from the views, except the router-logit finiteness check, which reads the
//! logits when `host_data` is true; `cu_seqlens` is always a host array.
template <class Spec, class Scalar>
problem_for<typename Spec::router> make_problem(const std::string& api, const inputs<Scalar>& in, const tensor_view<Scalar>& o,
                     const tensor_view<float>& state, const char* state_name, const options& opt,
                     bool o_given = true, bool host_data = true) {
  using D = typename Spec::decay;
  using R = typename Spec::router;
  using Pt = typename Spec::partition;
  problem_for<R> pb;
  pb.gate = D::gate;
  pb.uses_beta = D::uses_beta;
  pb.l2norm = D::l2norm_qk;

  // --- no negative dimension anywhere -----------------------------------------------------------
  auto non_negative = [&](const char* name, const auto& t) {
    for (int i = 0; i < t.rank(); ++i)
      if (t.shape[i] < 0) fail(api, std::string(name) + " has shape " + t.shape.str() + ": every dimension must be >= 0");
  };
  non_negative("q", in.q), non_negative("k", in.k), non_negative("v", in.v), non_negative("g", in.g);
  non_negative("beta", in.beta), non_negative("shared.q", in.shared.q), non_negative("shared.k", in.shared.k);
  non_negative("shared.g", in.shared.g), non_negative("shared.beta", in.shared.beta);
  non_negative("router_logits", in.router_logits), non_negative("router_params", in.router_params);
  non_negative("initial_state", in.initial_state);
  non_negative("o", o), non_negative(state_name, state);

  // --- q fixes B, T, H, K ---------------------------------------------------------------------
  if (in.q.empty()) fail(api, "q is required: [B,T,H,K]");
  if (in.q.rank() != 4) fail(api, "q has shape " + in.q.shape.str() + " but must be [B,T,H,K] (rank 4)");
  pb.B = in.q.size(0), pb.T = in.q.size(1), pb.H = in.q.size(2), pb.K = in.q.size(3);
  if (pb.H < 1 || pb.K < 1) fail(api, "q has shape " + in.q.shape.str() + ": H and K must be >= 1");
  require_shape(api, "k", in.k, {pb.B, pb.T, pb.H, pb.K}, "(like q: [B,T,H,K])");
  if (in.v.empty()) fail(api, "v is required: [B,T,HV,V]");
  if (in.v.rank() != 4 || in.v.size(0) != pb.B || in.v.size(1) != pb.T)
    fail(api, "v has shape " + in.v.shape.str() + " but must be [B,T,HV,V] with B,T of q " + in.q.shape.str());
  pb.HV = in.v.size(2), pb.V = in.v.size(3);
  if (pb.HV < 1 || pb.V < 1 || pb.HV % pb.H != 0)
    fail(api, "v has shape " + in.v.shape.str() + ": HV must be a positive multiple of H = " + std::to_string(pb.H) +
                  " (q " + in.q.shape.str() + ")");

  // --- gates -----------------------------------------------------------------------------------
  const shape_t g_shape = D::gate == gate_extent::key     ? shape_t{pb.B, pb.T, pb.HV, pb.K}
                          : D::gate == gate_extent::value ? shape_t{pb.B, pb.T, pb.HV, pb.V}
                                                          : shape_t{pb.B, pb.T, pb.HV};
  using dmsg = decay_messages<D>;
  using rmsg = router_messages<R>;
  if constexpr (D::gate == gate_extent::none) require_absent(api, "g", in.g, dmsg::no_gate());
  else require_shape(api, "g", in.g, g_shape, dmsg::gate_meaning());
  if constexpr (D::uses_beta) require_shape(api, "beta", in.beta, {pb.B, pb.T, pb.HV}, "([B,T,HV] write strength)");
  else require_absent(api, "beta", in.beta, dmsg::no_beta());

  // --- partitions ------------------------------------------------------------------------------
  pb.shared = Pt::has_shared;
  if constexpr (Pt::is_single) {
    pb.N = 1;
  } else if constexpr (Pt::num_routed == dynamic) {
    if (opt.num_partitions == dynamic)
      fail(api, "partition::routed<dynamic> needs options.num_partitions (it is not set)");
    if (opt.num_partitions < 1)
      fail(api, "partition::routed<dynamic> needs options.num_partitions >= 1 (got " +
                    std::to_string(opt.num_partitions) + ")");
    pb.N = opt.num_partitions;
  } else {
    if (opt.num_partitions != dynamic && opt.num_partitions != Pt::num_routed)
      fail(api, "options.num_partitions = " + std::to_string(opt.num_partitions) +
                    " but the variant fixes N = " + std::to_string(Pt::num_routed) + " at compile time");
    pb.N = Pt::num_routed;
  }
  if constexpr (Pt::is_single || !R::routes) {
    if (opt.num_partitions != dynamic && Pt::is_single)
      fail(api, "options.num_partitions is set but the variant has partition::single");
  }
  pb.P = pb.N + (pb.shared ? 1 : 0);
  if constexpr (Pt::has_shared) {
    require_shape(api, "shared.q", in.shared.q, {pb.B, pb.T, pb.H, pb.K}, "(like q: [B,T,H,K])");
    require_shape(api, "shared.k", in.shared.k, {pb.B, pb.T, pb.H, pb.K}, "(like q: [B,T,H,K])");
    if constexpr (D::gate == gate_extent::none) require_absent(api, "shared.g", in.shared.g, dmsg::no_gate());
    else require_shape(api, "shared.g", in.shared.g, g_shape, dmsg::gate_meaning());
    if constexpr (D::uses_beta) require_shape(api, "shared.beta", in.shared.beta, {pb.B, pb.T, pb.HV}, "([B,T,HV])");
    else require_absent(api, "shared.beta", in.shared.beta, dmsg::no_beta());
  } else {
    const char* why = "the variant has no shared partition (use partition::routed<N, partition::shared>)";
    require_absent(api, "shared.q", in.shared.q, why);
    require_absent(api, "shared.k", in.shared.k, why);
    require_absent(api, "shared.g", in.shared.g, why);
    require_absent(api, "shared.beta", in.shared.beta, why);
  }

  // --- router ----------------------------------------------------------------------------------
  pb.routed = R::routes;
  if constexpr (R::routes) {
    pb.router_cfg.value = R::configure(opt, pb.N, api);
    pb.kw = pb.rcfg().kw;
    pb.kr = pb.rcfg().kr;
    require_shape(api, "router_logits", in.router_logits, {pb.B, pb.T, pb.N}, "([B,T,N] router logits)");
    if constexpr (R::params_per_partition > 0) {
      const shape_t want = R::params_per_partition == 1 ? shape_t{pb.N} : shape_t{pb.N, R::params_per_partition};
      require_shape(api, "router_params", in.router_params, want, rmsg::params());
    } else {
      require_absent(api, "router_params", in.router_params, rmsg::no_params());
    }
    // The top-k sets are defined on finite probabilities (SPEC §4.4): NaN or ±inf logits are refused.
    // (Only where the data is host memory: device backends pass host_data = false and check on the device.)
    for (index_t i = 0; host_data && i < in.router_logits.numel(); ++i)
      if (!std::isfinite(to_float(in.router_logits.data[i])))
        fail(api, "router_logits " + in.router_logits.shape.str() + " holds a non-finite value at token " +
                      std::to_string(i / pb.N) + ", partition " + std::to_string(i % pb.N));
  } else {
    if (opt.num_writer != dynamic || opt.num_reader != dynamic || opt.gates)
      fail(api, std::string("options.num_writer / num_reader / gates are set but the variant's router is ") + R::name);
    require_absent(api, "router_logits", in.router_logits, rmsg::no_logits());
    require_absent(api, "router_params", in.router_params, rmsg::no_params());
    pb.kw = pb.kr = static_cast<int>(pb.N);
  }

  // --- sequences -------------------------------------------------------------------------------
  if (in.cu_seqlens.empty()) {
    pb.S = pb.B;
    pb.seq.resize(static_cast<std::size_t>(pb.S + 1));
    for (index_t s = 0; s <= pb.S; ++s) pb.seq[static_cast<std::size_t>(s)] = s * pb.T;
  } else {
    if (pb.B != 1)
      fail(api, "cu_seqlens is given, so the batch must be packed with B = 1, but q has shape " + in.q.shape.str());
    const auto& cu = in.cu_seqlens;
    if (cu.size() < 2) fail(api, "cu_seqlens must hold S+1 >= 2 offsets, got " + std::to_string(cu.size()));
    if (cu.front() != 0) fail(api, "cu_seqlens must start at 0, got " + std::to_string(cu.front()));
    for (std::size_t i = 1; i < cu.size(); ++i)
      if (cu[i] < cu[i - 1])
        fail(api, "cu_seqlens must be non-decreasing, but cu_seqlens[" + std::to_string(i) + "] = " +
                      std::to_string(cu[i]) + " < " + std::to_string(cu[i - 1]));
    if (cu.back() != pb.T)
      fail(api, "cu_seqlens ends at " + std::to_string(cu.back()) + " but q has T = " + std::to_string(pb.T) +
                    " tokens (shape " + in.q.shape.str() + ")");
    pb.S = static_cast<index_t>(cu.size()) - 1;
    pb.seq.assign(cu.begin(), cu.end());
  }

  // --- state and output ------------------------------------------------------------------------
  const shape_t st = pb.state_shape();
  if (!in.initial_state.empty() && !(in.initial_state.shape == st))
    fail(api, "initial_state has shape " + in.initial_state.shape.str() + " but must be [S,P,HV,K,V] = " + st.str());
  if (!state.empty() && !(state.shape == st))
    fail(api, std::string(state_name) + " has shape " + state.shape.str() + " but must be [S,P,HV,K,V] = " + st.str());
  if (o_given) require_shape(api, "o", tensor_view<const Scalar>(o), {pb.B, pb.T, pb.HV, pb.V}, "([B,T,HV,V] output)");

  pb.scale = opt.scale ? *opt.scale : 1.0f / std::sqrt(static_cast<float>(pb.K));
  return pb;
}

//! Per-token routing decisions and gate values, [tokens, N] each (routing routers only).
struct routing {
  index_t N = 0;
  std::vector<float> prob;          // the router's scores (top_k: softmax, rounded when round_to_input)
  std::vector<float> cw, cr;        // write / read weights actually used (0 where not selected)
  std::vector<std::uint8_t> flags;  // route_write | route_read
  std::vector<float> row;           // one token's logits (compute_routing's working row)
};

//! Runs router R's `route` on every token (host data).
template <class R, class Scalar>
void compute_routing(const problem& pb, const typename R::config& cfg, const tensor_view<const Scalar>& logits,
                     const float* params, routing& rt) {
  const index_t n_tok = pb.tokens(), N = pb.N;
  rt.N = N;
  rt.prob.assign(static_cast<std::size_t>(n_tok * N), 0.f);
  rt.cw.assign(rt.prob.size(), 0.f);
  rt.cr.assign(rt.prob.size(), 0.f);
  rt.flags.assign(rt.prob.size(), 0);
  std::vector<float>& x = rt.row;  // kept with rt: a routing object that is reused allocates nothing
  x.resize(static_cast<std::size_t>(N));
  const auto round = [](float p) { return round_to<Scalar>(p); };
  for (index_t t = 0; t < n_tok; ++t) {
    for (index_t n = 0; n < N; ++n) x[static_cast<std::size_t>(n)] = to_float(logits.data[t * N + n]);
    const std::size_t o = static_cast<std::size_t>(t * N);
    R::route(cfg, static_cast<int>(N), x.data(), params, rt.prob.data() + o, rt.cw.data() + o, rt.cr.data() + o,
             rt.flags.data() + o, round);
  }
}

//! The routing of a resolved problem for given logits (a router without router_params).
template <class R, class Scalar>
void compute_routing(const problem_for<R>& pb, const tensor_view<const Scalar>& logits, routing& rt) {
  compute_routing<R>(pb, pb.rcfg(), logits, nullptr, rt);
}

//! The routing of a resolved problem (its inputs' logits and router parameters).
template <class R, class Scalar>
void compute_routing(const problem_for<R>& pb, const inputs<Scalar>& in, routing& rt) {
  compute_routing<R>(pb, pb.rcfg(), in.router_logits, in.router_params.data, rt);
}

}  // namespace linstate::detail
