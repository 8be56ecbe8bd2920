// SPDX-License-Identifier: Apache-2.0
//! \file tests/support/random_inputs.hpp
//! \brief Random inputs for any linstate variant, and the error metrics the tests use.
//!
//! \code
//!   auto cfg = linstate_test::config_for<sse_n4k1s>({.B = 2, .T = 80, .H = 2, .HV = 2, .K = 16, .V = 24});
//!   cfg.initial_state = true;
//!   linstate_test::random_inputs data(cfg, /*seed=*/42);
//!   const auto in  = data.view();                                   // linstate::inputs<float>
//!   const auto ref = linstate::reference::forward<sse_n4k1s>(in);
//!   const auto r   = linstate::forward<sse_n4k1s>(linstate::cpu{}, in, linstate::chunked<32>{});
//!   CHECK(linstate_test::max_rel_err(r.o, ref.o) <= 1e-5);          // max|a − b| ≤ 1e-5 · max|ref|
//! \endcode
//!
//! Every tensor is drawn from its own random stream (seeded from the seed and the tensor's name), so
//! switching one option (say, with or without an initial state) leaves every other tensor unchanged.
//! The tensors are public members: a test may overwrite any of them (zero keys, forced router logits...)
//! before taking a view.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <linstate/linstate.hpp>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace linstate_test {

using linstate::index_t;
using linstate::tensor;

//! The gate tensor a variant takes: none (decay::none), one log-decay per (token, value head)
//! (decay::scalar, decay::gated_delta_rule: `[B,T,HV]`) or one per key channel (decay::gated_key:
//! `[B,T,HV,K]`).
enum class gate_shape { none, per_head, per_key };

//! Problem sizes (SPEC §1.1). With packed `cu_seqlens` B must be 1 and T is the packed total.
struct sizes {
  index_t B = 1, T = 32, H = 2, HV = 2, K = 16, V = 16;
  index_t N = 4;  //!< routed partitions (the router logits' last dim); ignored without a router
};

//! What to draw. Build one with config_for<Spec>() and then adjust the fields.
struct config {
  sizes dims{};
  gate_shape gate = gate_shape::per_key;
  bool beta = false;            //!< β `[B,T,HV]` in (0,1) (delta rule)
  bool shared = false;          //!< the shared partition's q, k, g (and β)
  bool router = false;          //!< router logits `[B,T,N]`
  index_t partitions = 1;       //!< P, the partitions of the state `[S,P,HV,K,V]`
  bool initial_state = false;   //!< draw an initial state (else view() leaves it empty = zeros)
  //! Log-decays are `g = logsigmoid(z) / gate_normalizer`, z ~ N(0,1) (SPEC §1.4; the SSE layer uses
  //! 16, fla's tests 0.1, 1 and 10). Smaller values mean stronger decays.
  float gate_normalizer = 16.f;
  //! When > 0 every key row (routed and shared) is rescaled to this L2 norm. The delta rule without
  //! l2norm needs it: `I − β k kᵀ` is a contraction only when `β |k|² ≤ 2`.
  float key_norm = 0.f;
  //! When > 0 the logits of each token are a random permutation of `gap·{0, 1, …, N−1}` plus noise in
  //! `±gap/4`: consecutive probabilities differ by a factor ≥ e^{gap/2}, so there are no ties and the
  //! top-k set survives rounding the logits to bf16 (for gap ≥ ~0.5). When 0, logits are N(0,1).
  float router_gap = 1.f;
  std::vector<std::int64_t> cu_seqlens{};  //!< packed sequence offsets (B = 1); empty → one per batch row
};

//! The config a variant needs (which tensors exist, P), for the given sizes. For partition::routed<dynamic>
//! N is taken from `opt.num_partitions`; for partition::single N = 1 (sizes.N is overwritten).
template <class Spec>
config config_for(const sizes& d, const linstate::options& opt = {}) {
  using D = typename Spec::decay;
  using R = typename Spec::router;
  using P = typename Spec::partition;
  config c;
  c.dims = d;
  c.gate = D::gate == linstate::gate_extent::none ? gate_shape::none : D::gate == linstate::gate_extent::head ? gate_shape::per_head : gate_shape::per_key;
  c.beta = D::uses_beta;
  c.shared = P::has_shared;
  c.router = R::routes;
  if constexpr (P::is_single) c.dims.N = 1;
  else if constexpr (P::num_routed == linstate::dynamic) c.dims.N = opt.num_partitions;
  else c.dims.N = P::num_routed;
  c.partitions = c.dims.N + (P::has_shared ? 1 : 0);
  if constexpr (linstate::is_family_of<D, linstate::family::delta> && !D::l2norm_qk) c.key_norm = 1.f;
  return c;
}

//! Owns one random instance of every input a config asks for.
class random_inputs {
 public:
  config cfg;
  // per-token tensors ([B,T,...]); an absent one is empty
  tensor<float> q, k, v, g, beta;                     //!< routed / single partition inputs and values
  tensor<float> shared_q, shared_k, shared_g, shared_beta;
  tensor<float> router_logits;                        //!< [B,T,N]
  tensor<float> initial_state;                        //!< [S,P,HV,K,V] fp32
  std::vector<std::int64_t> cu_seqlens;

  random_inputs(const config& c, std::uint64_t seed) : cfg(c), cu_seqlens(c.cu_seqlens), seed_(seed) {
    const sizes& d = cfg.dims;
    if (!cu_seqlens.empty() && d.B != 1) throw linstate::error("random_inputs: cu_seqlens needs B = 1");
    const linstate::shape_t qk{d.B, d.T, d.H, d.K};
    q = normal(qk, "q");
    k = keys(qk, "k");
    v = normal({d.B, d.T, d.HV, d.V}, "v");
    if (cfg.gate != gate_shape::none) g = gates(gate_shape_of(), "g");
    if (cfg.beta) beta = betas({d.B, d.T, d.HV}, "beta");
    if (cfg.shared) {
      shared_q = normal(qk, "shared.q");
      shared_k = keys(qk, "shared.k");
      if (cfg.gate != gate_shape::none) shared_g = gates(gate_shape_of(), "shared.g");
      if (cfg.beta) shared_beta = betas({d.B, d.T, d.HV}, "shared.beta");
    }
    if (cfg.router) router_logits = logits("router_logits");
    if (cfg.initial_state) initial_state = normal(state_shape(), "initial_state");
  }

  //! Number of independent sequences S.
  index_t num_sequences() const {
    return cu_seqlens.empty() ? cfg.dims.B : static_cast<index_t>(cu_seqlens.size()) - 1;
  }
  //! `[S,P,HV,K,V]`
  linstate::shape_t state_shape() const {
    return {num_sequences(), cfg.partitions, cfg.dims.HV, cfg.dims.K, cfg.dims.V};
  }
  //! `[B,T,HV,V]`
  linstate::shape_t output_shape() const { return {cfg.dims.B, cfg.dims.T, cfg.dims.HV, cfg.dims.V}; }

  //! Views of the owned tensors (valid while *this lives and is not reassigned).
  linstate::inputs<float> view(bool with_initial_state = true) const {
    linstate::inputs<float> in;
    in.q = opt(q), in.k = opt(k), in.v = opt(v), in.g = opt(g), in.beta = opt(beta);
    in.shared = {opt(shared_q), opt(shared_k), opt(shared_g), opt(shared_beta)};
    in.router_logits = opt(router_logits);
    if (with_initial_state) in.initial_state = opt(initial_state);
    in.cu_seqlens = std::span<const std::int64_t>(cu_seqlens.data(), cu_seqlens.size());
    return in;
  }

  //! Tokens `[t0, t1)` of every batch row (not for packed inputs); the initial state is kept.
  random_inputs slice_time(index_t t0, index_t t1) const {
    if (!cu_seqlens.empty()) throw linstate::error("random_inputs::slice_time: not for packed (cu_seqlens) inputs");
    if (t0 < 0 || t1 < t0 || t1 > cfg.dims.T) throw linstate::error("random_inputs::slice_time: bad range");
    random_inputs r(*this);
    r.cfg.dims.T = t1 - t0;
    const auto src = token_tensors();
    const auto dst = r.token_tensors();
    for (std::size_t i = 0; i < src.size(); ++i) {
      if (src[i]->empty()) continue;
      linstate::shape_t s = src[i]->shape();
      const index_t inner = s.numel() / (s[0] * s[1]);
      s[1] = t1 - t0;
      std::vector<float> vals(static_cast<std::size_t>(s.numel()));
      for (index_t b = 0; b < s[0]; ++b)
        std::copy_n(src[i]->data() + (b * cfg.dims.T + t0) * inner, (t1 - t0) * inner,
                    vals.begin() + static_cast<std::ptrdiff_t>(b * (t1 - t0) * inner));
      *dst[i] = tensor<float>(s, std::move(vals));
    }
    return r;
  }

  //! Redraws every per-token input at positions t ≥ t0 (of every batch row, or of the packed axis)
  //! from a new stream; tokens before t0 and the initial state are unchanged (causality tests).
  void redraw_from(index_t t0, std::uint64_t seed) {
    const random_inputs other(cfg, seed);
    const auto fresh = other.token_tensors();
    const auto mine = token_tensors();
    for (std::size_t i = 0; i < mine.size(); ++i) {
      if (mine[i]->empty()) continue;
      const linstate::shape_t s = mine[i]->shape();
      const index_t inner = s.numel() / (s[0] * s[1]);
      for (index_t b = 0; b < s[0]; ++b)
        for (index_t t = t0; t < s[1]; ++t)
          for (index_t j = 0; j < inner; ++j) (*mine[i])[(b * s[1] + t) * inner + j] = (*fresh[i])[(b * s[1] + t) * inner + j];
    }
  }

  //! Rounds every input (not the fp32 initial state) to the precision of `Scalar`, in place, so that
  //! an fp32 run and a `Scalar` run see exactly the same values.
  template <class Scalar>
  void round_to() {
    for (tensor<float>* t : token_tensors())
      for (float& x : t->values()) x = static_cast<float>(static_cast<Scalar>(x));
  }

  //! The per-token tensors (those that follow the `[B,T,...]` layout), in a fixed order.
  std::vector<tensor<float>*> token_tensors() {
    return {&q, &k, &v, &g, &beta, &shared_q, &shared_k, &shared_g, &shared_beta, &router_logits};
  }
  std::vector<const tensor<float>*> token_tensors() const {
    return {&q, &k, &v, &g, &beta, &shared_q, &shared_k, &shared_g, &shared_beta, &router_logits};
  }

 private:
  std::uint64_t seed_;

  static linstate::tensor_view<const float> opt(const tensor<float>& t) {
    return t.empty() ? linstate::tensor_view<const float>{} : t.view();
  }

  linstate::shape_t gate_shape_of() const {
    const sizes& d = cfg.dims;
    return cfg.gate == gate_shape::per_key ? linstate::shape_t{d.B, d.T, d.HV, d.K} : linstate::shape_t{d.B, d.T, d.HV};
  }

  //! One independent stream per tensor name.
  std::mt19937_64 stream(const char* name) const {
    std::uint64_t h = 1469598103934665603ull;  // FNV-1a of the name, mixed with the seed
    for (const char* p = name; *p; ++p) h = (h ^ static_cast<unsigned char>(*p)) * 1099511628211ull;
    std::seed_seq seq{static_cast<std::uint32_t>(seed_), static_cast<std::uint32_t>(seed_ >> 32),
                      static_cast<std::uint32_t>(h), static_cast<std::uint32_t>(h >> 32)};
    return std::mt19937_64(seq);
  }

  tensor<float> normal(const linstate::shape_t& s, const char* name) const {
    auto gen = stream(name);
    std::normal_distribution<float> nd;
    tensor<float> t(s);
    for (float& x : t.values()) x = nd(gen);
    return t;
  }

  tensor<float> keys(const linstate::shape_t& s, const char* name) const {
    tensor<float> t = normal(s, name);
    if (cfg.key_norm > 0.f) {
      const index_t K = s[3];
      for (index_t r = 0; r < t.numel() / K; ++r) {
        float* row = t.data() + r * K;
        double n2 = 0;
        for (index_t a = 0; a < K; ++a) n2 += static_cast<double>(row[a]) * row[a];
        const float f = cfg.key_norm / static_cast<float>(std::sqrt(n2) + 1e-12);
        for (index_t a = 0; a < K; ++a) row[a] *= f;
      }
    }
    return t;
  }

  //! g = logsigmoid(z) / normalizer ≤ 0, z ~ N(0,1) (SPEC §1.4).
  tensor<float> gates(const linstate::shape_t& s, const char* name) const {
    auto gen = stream(name);
    std::normal_distribution<double> nd;
    tensor<float> t(s);
    for (float& x : t.values()) {
      const double z = nd(gen);
      const double ls = z >= 0 ? -std::log1p(std::exp(-z)) : z - std::log1p(std::exp(z));
      x = static_cast<float>(ls / static_cast<double>(cfg.gate_normalizer));
    }
    return t;
  }

  //! β = sigmoid(z) ∈ (0,1), z ~ N(0,1).
  tensor<float> betas(const linstate::shape_t& s, const char* name) const {
    auto gen = stream(name);
    std::normal_distribution<double> nd;
    tensor<float> t(s);
    for (float& x : t.values()) x = static_cast<float>(1.0 / (1.0 + std::exp(-nd(gen))));
    return t;
  }

  tensor<float> logits(const char* name) const {
    const sizes& d = cfg.dims;
    auto gen = stream(name);
    tensor<float> t({d.B, d.T, d.N});
    if (cfg.router_gap <= 0.f) {
      std::normal_distribution<float> nd;
      for (float& x : t.values()) x = nd(gen);
      return t;
    }
    std::uniform_real_distribution<float> noise(-cfg.router_gap / 4, cfg.router_gap / 4);
    std::vector<index_t> perm(static_cast<std::size_t>(d.N));
    for (index_t tok = 0; tok < d.B * d.T; ++tok) {
      std::iota(perm.begin(), perm.end(), index_t{0});
      std::shuffle(perm.begin(), perm.end(), gen);
      for (index_t r = 0; r < d.N; ++r)
        t[tok * d.N + perm[static_cast<std::size_t>(r)]] = cfg.router_gap * static_cast<float>(r) + noise(gen);
    }
    return t;
  }
};

//! Sets the log-decay of the listed time steps (of every batch row, or of the packed axis, and every
//! value head) to `value`, in g and in shared.g (where present): every key row of a per-key gate, or
//! with `even_rows` only the even ones; a per-head gate takes it whatever. For tests of very negative
//! or infinite gates (the chunked kernels floor them: detail::chunked_log_decay_floor).
inline void set_gates(random_inputs& data, float value, std::initializer_list<index_t> steps, bool even_rows = false) {
  for (tensor<float>* t : {&data.g, &data.shared_g}) {
    if (t->empty() || t->numel() == 0) continue;
    const linstate::shape_t& s = t->shape();
    const index_t rows = s.rank() == 4 ? s[3] : 1, inner = s.numel() / (s[0] * s[1]);
    for (index_t b = 0; b < s[0]; ++b)
      for (index_t tok : steps) {
        if (tok >= s[1]) continue;
        for (index_t e = 0; e < inner; ++e)
          if (!even_rows || rows == 1 || (e % rows) % 2 == 0) (*t)[(b * s[1] + tok) * inner + e] = value;
      }
  }
}

//! The inputs of a random_inputs converted to another element type (bf16, fp16): owns the converted
//! tensors; the initial state stays fp32 (SPEC §11 C10).
template <class Scalar>
class cast_inputs {
 public:
  explicit cast_inputs(const random_inputs& src) : src_(&src) {
    auto conv = [](const tensor<float>& t) {
      if (t.empty()) return tensor<Scalar>{};  // absent stays absent
      tensor<Scalar> r(t.shape());
      for (index_t i = 0; i < t.numel(); ++i) r[i] = static_cast<Scalar>(t[i]);
      return r;
    };
    q = conv(src.q), k = conv(src.k), v = conv(src.v), g = conv(src.g), beta = conv(src.beta);
    shared_q = conv(src.shared_q), shared_k = conv(src.shared_k), shared_g = conv(src.shared_g);
    shared_beta = conv(src.shared_beta), router_logits = conv(src.router_logits);
  }
  tensor<Scalar> q, k, v, g, beta, shared_q, shared_k, shared_g, shared_beta, router_logits;

  linstate::inputs<Scalar> view(bool with_initial_state = true) const {
    auto opt = [](const tensor<Scalar>& t) {
      return t.empty() ? linstate::tensor_view<const Scalar>{} : t.view();
    };
    linstate::inputs<Scalar> in;
    in.q = opt(q), in.k = opt(k), in.v = opt(v), in.g = opt(g), in.beta = opt(beta);
    in.shared = {opt(shared_q), opt(shared_k), opt(shared_g), opt(shared_beta)};
    in.router_logits = opt(router_logits);
    if (with_initial_state && !src_->initial_state.empty()) in.initial_state = src_->initial_state.view();
    in.cu_seqlens = std::span<const std::int64_t>(src_->cu_seqlens.data(), src_->cu_seqlens.size());
    return in;
  }

 private:
  const random_inputs* src_;
};

// ----------------------------------------------------------------------------------------------
// Error metrics. Every one returns +inf when the shapes differ or a value is not finite, so that a
// NaN can never pass a `≤ tol` check.

namespace detail {
template <class T>
double as_double(T x) {
  if constexpr (std::is_same_v<T, double> || std::is_same_v<T, float>) return static_cast<double>(x);
  else return static_cast<double>(static_cast<float>(x));  // Eigen::bfloat16 / Eigen::half
}
template <class T>
std::span<const T> flat(const tensor<T>& t) {
  return {t.data(), static_cast<std::size_t>(t.numel())};
}
template <class T>
std::span<const T> flat(const linstate::tensor_view<T>& t) {
  return {t.data, static_cast<std::size_t>(t.numel())};
}
template <class T>
std::span<const T> flat(const linstate::tensor_view<const T>& t) {
  return {t.data, static_cast<std::size_t>(t.numel())};
}
template <class T>
linstate::shape_t shape_of(const tensor<T>& t) {
  return t.shape();
}
template <class T>
linstate::shape_t shape_of(const linstate::tensor_view<T>& t) {
  return t.shape;
}
constexpr double inf = std::numeric_limits<double>::infinity();
}  // namespace detail

//! max |a − b| (inf on shape mismatch or any non-finite value).
template <class A, class B>
double max_abs_diff(const A& a, const B& b) {
  if (!(detail::shape_of(a) == detail::shape_of(b))) return detail::inf;
  const auto x = detail::flat(a);
  const auto y = detail::flat(b);
  double m = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double d = std::abs(detail::as_double(x[i]) - detail::as_double(y[i]));
    if (!std::isfinite(d)) return detail::inf;
    m = std::max(m, d);
  }
  return m;
}

//! max |x| (inf if any value is not finite).
template <class A>
double max_abs(const A& a) {
  double m = 0;
  for (const auto& x : detail::flat(a)) {
    const double d = std::abs(detail::as_double(x));
    if (!std::isfinite(d)) return detail::inf;
    m = std::max(m, d);
  }
  return m;
}

//! `max|a − ref| / max|ref|` — the fixtures' criterion `max|a − b| ≤ tol · max|b|` reads
//! `max_rel_err(a, b) <= tol`. When ref is all zeros this is the absolute error.
template <class A, class B>
double max_rel_err(const A& a, const B& ref) {
  const double d = max_abs_diff(a, ref);
  const double m = max_abs(ref);
  return m > 0 ? d / m : d;
}

//! fla's ratio metric (SPEC §9.2): `RMS(a − ref) / (RMS(ref) + 1e-8)`.
template <class A, class B>
double rms_ratio(const A& a, const B& ref) {
  if (!(detail::shape_of(a) == detail::shape_of(ref))) return detail::inf;
  const auto x = detail::flat(a);
  const auto y = detail::flat(ref);
  double num = 0, den = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double yi = detail::as_double(y[i]);
    const double d = detail::as_double(x[i]) - yi;
    if (!std::isfinite(d)) return detail::inf;
    num += d * d, den += yi * yi;
  }
  const double n = x.empty() ? 1.0 : static_cast<double>(x.size());
  return std::sqrt(num / n) / (std::sqrt(den / n) + 1e-8);
}

//! True iff every value is finite.
template <class A>
bool all_finite(const A& a) {
  for (const auto& x : detail::flat(a))
    if (!std::isfinite(detail::as_double(x))) return false;
  return true;
}

//! The `[HV,K,V]` block of partition p of sequence s in a state `[S,P,HV,K,V]`.
template <class T>
std::span<const T> state_block(const tensor<T>& st, index_t s, index_t p) {
  const linstate::shape_t& sh = st.shape();
  const index_t n = sh[2] * sh[3] * sh[4];
  return {st.data() + (s * sh[1] + p) * n, static_cast<std::size_t>(n)};
}

//! The same, writable.
template <class T>
std::span<T> state_block(tensor<T>& st, index_t s, index_t p) {
  const linstate::shape_t& sh = st.shape();
  const index_t n = sh[2] * sh[3] * sh[4];
  return {st.data() + (s * sh[1] + p) * n, static_cast<std::size_t>(n)};
}

//! Bit-for-bit equality of two float ranges (memcmp: also distinguishes -0 from +0 and NaN payloads).
inline bool bit_equal(std::span<const float> a, std::span<const float> b) {
  if (a.size() != b.size()) return false;
  return a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;  // (memcmp: no null pointers)
}

}  // namespace linstate_test
