// SPDX-License-Identifier: Apache-2.0
// Run-time misuse of the forward API (SPEC §1.1–§1.7 shapes, §4.3 inputs, §11 C5 "state is never
// modified behind the caller's back"). For every mistake we check that
//   * linstate::error (a std::invalid_argument) is thrown, not some other exception and not nothing;
//   * the message names the offending tensor (or option) and carries its shape string ("[1,66,2,16]");
//   * o, final_state (and initial_state, which is only read) are bit-for-bit untouched: they are
//     pre-filled with a sentinel byte pattern and compared with memcmp.
// Each mistake is made on top of a problem that is first shown to be valid (and to overwrite the
// sentinels), so an error can only come from the one thing that was changed.
#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <linstate/linstate.hpp>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using linstate::index_t;
using linstate::shape_t;
using linstate::tensor;
using linstate::tensor_view;
namespace pt = linstate::partition;
namespace rt = linstate::router;
namespace dc = linstate::decay;

struct gla : linstate::spec<> {};
struct linear_attn : gla { using decay = dc::none; };
struct retention : gla { using decay = dc::scalar; };
struct gdn : gla { using decay = dc::gated_delta_rule<true>; };
struct sse_n4k1s : gla {
  using partition = pt::routed<4, pt::shared>;
  using router = rt::top_k<1>;
};
struct sse_n4k2 : gla {
  using partition = pt::routed<4>;
  using router = rt::top_k<2>;
};
struct sse_delta_s : sse_n4k1s { using decay = dc::gated_delta_rule<true>; };
struct sse_dyn : gla {
  using partition = pt::routed<linstate::dynamic>;
  using router = rt::top_k<linstate::dynamic>;
};
struct sse_dyn_gates : sse_n4k2 { using router = rt::top_k<1, 1, rt::top_k_options{.dynamic_gates = true}>; };
struct dense_n3 : gla { using partition = pt::routed<3>; };  // router::dense over 3 partitions

//! Sizes of a problem; the defaults give q the shape [1,66,2,16].
struct dims {
  index_t B = 1, T = 66, H = 2, HV = 2, K = 16, V = 8;
  index_t N = 4;  // routed partitions (ignored for partition::single)
  index_t S = 1;  // sequences (B, or len(cu_seqlens) - 1)
};

//! Every tensor a variant needs, valid for `Spec`, plus o and final_state.
template <class Spec>
struct bundle {
  using D = typename Spec::decay;
  using R = typename Spec::router;
  using Pt = typename Spec::partition;
  static constexpr bool routed = R::routes;

  dims d;
  index_t N, P;
  tensor<float> q, k, v, g, beta, sq, sk, sg, sbeta, logits, h0, o, ht;
  std::vector<std::int64_t> cu;

  explicit bundle(dims dd = {}) : d(dd) {
    N = Pt::is_single ? 1 : d.N;
    P = N + (Pt::has_shared ? 1 : 0);
    std::mt19937 gen(1234);
    std::normal_distribution<float> nd(0.f, 0.5f);
    auto rnd = [&](shape_t s) {
      tensor<float> t(s);
      for (auto& x : t.values()) x = nd(gen);
      return t;
    };
    auto cst = [](shape_t s, float value) {
      tensor<float> t(s);
      t.values().assign(t.values().size(), value);
      return t;
    };
    const shape_t qs{d.B, d.T, d.H, d.K};
    const shape_t gs = D::gate == linstate::gate_extent::key ? shape_t{d.B, d.T, d.HV, d.K} : shape_t{d.B, d.T, d.HV};
    q = rnd(qs), k = rnd(qs), v = rnd({d.B, d.T, d.HV, d.V});
    if (D::gate != linstate::gate_extent::none) g = cst(gs, -0.05f);
    if (D::uses_beta) beta = cst({d.B, d.T, d.HV}, 0.5f);
    if (Pt::has_shared) {
      sq = rnd(qs), sk = rnd(qs);
      if (D::gate != linstate::gate_extent::none) sg = cst(gs, -0.02f);
      if (D::uses_beta) sbeta = cst({d.B, d.T, d.HV}, 0.25f);
    }
    if (routed) logits = rnd({d.B, d.T, N});
    h0 = rnd({d.S, P, d.HV, d.K, d.V});
    o = tensor<float>({d.B, d.T, d.HV, d.V});
    ht = tensor<float>({d.S, P, d.HV, d.K, d.V});
  }

  static tensor_view<const float> cv(const tensor<float>& t) {
    return t.empty() ? tensor_view<const float>{} : t.cview();
  }
  linstate::inputs<float> in() const {
    linstate::inputs<float> r{.q = cv(q), .k = cv(k), .v = cv(v), .g = cv(g), .beta = cv(beta)};
    r.shared = {cv(sq), cv(sk), cv(sg), cv(sbeta)};
    r.router_logits = cv(logits);
    r.initial_state = cv(h0);
    r.cu_seqlens = cu;
    return r;
  }
  linstate::outputs<float> out() { return {o.view(), ht.view()}; }
};

//! A byte pattern that no computation produces by accident (and that differs from byte to byte, so a
//! partial write is seen too).
void fill_sentinel(void* p, std::size_t bytes) {
  auto* b = static_cast<unsigned char*>(p);
  for (std::size_t i = 0; i < bytes; ++i) b[i] = static_cast<unsigned char>((i * 37u + 11u) & 0xFFu);
}

//! A snapshot of a buffer, compared bit for bit later.
struct snapshot {
  const void* p = nullptr;
  std::vector<unsigned char> bytes;
  template <class T>
  explicit snapshot(const tensor_view<T>& t)
      : p(t.data), bytes(static_cast<std::size_t>(t.numel()) * sizeof(T)) {
    if (p) std::memcpy(bytes.data(), p, bytes.size());
  }
  bool unchanged() const { return !p || std::memcmp(p, bytes.data(), bytes.size()) == 0; }
};

template <class T>
void sentinel(const tensor_view<T>& t) {
  if (t.data) fill_sentinel(const_cast<std::remove_const_t<T>*>(t.data), static_cast<std::size_t>(t.numel()) * sizeof(T));
}

//! True if `name` occurs in `msg` as a whole name (not as the tail of "shared.q" or inside "seq").
bool names(const std::string& msg, const std::string& name) {
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (std::size_t pos = msg.find(name); pos != std::string::npos; pos = msg.find(name, pos + 1)) {
    const std::size_t end = pos + name.size();
    const bool left = pos == 0 || !(word(msg[pos - 1]) || msg[pos - 1] == '.');
    const bool right = end == msg.size() || !(word(msg[end]) || (msg[end] == '.' && end + 1 < msg.size() &&
                                                                   word(msg[end + 1])));
    if (left && right) return true;
  }
  return false;
}

//! What a rejected call must say: the API, the tensor (or option) name, and further substrings
//! (shape strings, offending values).
struct expectation {
  std::string api = "linstate::forward";
  std::string name;
  std::vector<std::string> contains;
};

void check_message(const std::string& msg, const expectation& ex) {
  INFO("message: " << msg);
  CHECK(msg.rfind(ex.api + ":", 0) == 0);
  CHECK_MESSAGE(names(msg, ex.name), "the message does not name `" << ex.name << "`");
  for (const auto& s : ex.contains) CHECK_MESSAGE(msg.find(s) != std::string::npos, "missing `" << s << "`");
}

//! Calls `call()`, which must throw linstate::error before writing any of `watched`.
template <class Call>
void expect_rejected(Call&& call, std::initializer_list<snapshot*> watched, const expectation& ex) {
  std::optional<std::string> msg;
  try {
    call();
  } catch (const linstate::error& e) {
    msg = e.what();
  } catch (const std::exception& e) {
    FAIL_CHECK("expected linstate::error, got another exception: " << e.what());
    return;
  }
  REQUIRE_MESSAGE(msg.has_value(), "expected linstate::error mentioning `" << ex.name << "`, but the call succeeded");
  // linstate::error is documented as a std::invalid_argument.
  static_assert(std::is_base_of_v<std::invalid_argument, linstate::error>);
  check_message(*msg, ex);
  for (const snapshot* s : watched) CHECK_MESSAGE(s->unchanged(), "a buffer was written before the error");
}

//! forward(cpu, in, out, ...) with sentinels in o and final_state; also the allocating overload,
//! which must reject the same inputs (it has no buffers to watch).
template <class Spec>
void reject_forward(const linstate::inputs<float>& in, const linstate::outputs<float>& out, const expectation& ex,
                    const linstate::options& opt = {}, bool also_allocating = true) {
  sentinel(out.o), sentinel(out.final_state);
  snapshot so(out.o), sh(out.final_state), si(in.initial_state);
  SUBCASE("forward(in, out), recurrent") {
    expect_rejected([&] { linstate::forward<Spec>(linstate::cpu{}, in, out, linstate::recurrent{}, linstate::varlen{}, opt); },
                    {&so, &sh, &si}, ex);
  }
  SUBCASE("forward(in, out), chunked<16>, mask") {
    expect_rejected([&] { linstate::forward<Spec>(linstate::cpu{}, in, out, linstate::chunked<16>{}, linstate::mask{}, opt); },
                    {&so, &sh, &si}, ex);
  }
  if (also_allocating) {
    SUBCASE("forward(in) allocating") {
      expect_rejected([&] { (void)linstate::forward<Spec>(linstate::cpu{}, in, linstate::automatic{}, linstate::varlen{}, opt); },
                      {&si}, ex);
    }
    SUBCASE("reference::forward(in)") {  // the fp64 oracle shares the checks
      expectation ref = ex;
      ref.api = "linstate::reference::forward";
      expect_rejected([&] { (void)linstate::reference::forward<Spec>(in, opt); }, {&si}, ref);
    }
  }
}

//! Runs the valid problem: it must succeed and overwrite the sentinels (so "untouched" means something).
template <class Spec>
void accept_forward(const linstate::inputs<float>& in, const linstate::outputs<float>& out, const linstate::options& opt = {}) {
  sentinel(out.o), sentinel(out.final_state);
  snapshot so(out.o), sh(out.final_state);
  CHECK_NOTHROW(linstate::forward<Spec>(linstate::cpu{}, in, out, linstate::recurrent{}, linstate::varlen{}, opt));
  CHECK_FALSE(so.unchanged());
  CHECK_FALSE(sh.unchanged());
}

//! A tensor of the given shape, for the "wrong shape" cases.
tensor<float> bad(std::initializer_list<index_t> s) { return tensor<float>(shape_t(s)); }

}  // namespace

TEST_CASE("errors: every base problem used below is valid and writes o and final_state") {
  SUBCASE("gla") { bundle<gla> b; accept_forward<gla>(b.in(), b.out()); }
  SUBCASE("linear attention") { bundle<linear_attn> b; accept_forward<linear_attn>(b.in(), b.out()); }
  SUBCASE("retention") { bundle<retention> b; accept_forward<retention>(b.in(), b.out()); }
  SUBCASE("gdn") { bundle<gdn> b; accept_forward<gdn>(b.in(), b.out()); }
  SUBCASE("sse_n4k1s") { bundle<sse_n4k1s> b; accept_forward<sse_n4k1s>(b.in(), b.out()); }
  SUBCASE("sse_n4k2") { bundle<sse_n4k2> b; accept_forward<sse_n4k2>(b.in(), b.out()); }
  SUBCASE("sse_delta_s") { bundle<sse_delta_s> b; accept_forward<sse_delta_s>(b.in(), b.out()); }
  SUBCASE("dense_n3") { bundle<dense_n3> b({.N = 3}); accept_forward<dense_n3>(b.in(), b.out()); }
  SUBCASE("sse_dyn") {
    bundle<sse_dyn> b({.N = 3});
    accept_forward<sse_dyn>(b.in(), b.out(), {.num_partitions = 3, .num_writer = 2, .num_reader = 3});
  }
  SUBCASE("sse_dyn_gates") {
    bundle<sse_dyn_gates> b;
    accept_forward<sse_dyn_gates>(b.in(), b.out(), {.gates = rt::gate::read});
  }
  SUBCASE("packed sequences") {
    bundle<sse_n4k1s> b({.S = 3});
    b.cu = {0, 20, 20, 66};  // an empty sequence is legal (SPEC §1.7)
    accept_forward<sse_n4k1s>(b.in(), b.out());
  }
  SUBCASE("grouped value heads, HV = 2H") {
    bundle<gla> b({.H = 1, .HV = 2});
    accept_forward<gla>(b.in(), b.out());
  }
  SUBCASE("forward_in_place") {
    bundle<sse_n4k1s> b;
    auto in = b.in();
    in.initial_state = {};
    snapshot so(b.o.view());
    CHECK_NOTHROW(linstate::forward_in_place<sse_n4k1s>(linstate::cpu{}, in, b.h0.view(), b.o.view()));
    CHECK_FALSE(so.unchanged());
  }
}

TEST_CASE("errors: q, k, v (SPEC §1.2)") {
  bundle<gla> b;
  auto in = b.in();
  SUBCASE("q missing") {
    in.q = {};
    reject_forward<gla>(in, b.out(), {.name = "q", .contains = {"[B,T,H,K]", "required"}});
  }
  SUBCASE("q of rank 3") {
    const auto q3 = bad({1, 66, 2});
    in.q = q3.cview();
    reject_forward<gla>(in, b.out(), {.name = "q", .contains = {"[1,66,2]"}});
  }
  SUBCASE("q of rank 5") {
    const auto q5 = bad({1, 66, 2, 16, 1});
    in.q = q5.cview();
    reject_forward<gla>(in, b.out(), {.name = "q", .contains = {"[1,66,2,16,1]"}});
  }
  SUBCASE("q with K = 0") {
    const auto q0 = bad({1, 66, 2, 1});
    in.q = {q0.data(), {1, 66, 2, 0}};
    reject_forward<gla>(in, b.out(), {.name = "q", .contains = {"[1,66,2,0]"}});
  }
  SUBCASE("k with another K") {
    const auto k = bad({1, 66, 2, 8});
    in.k = k.cview();
    reject_forward<gla>(in, b.out(), {.name = "k", .contains = {"[1,66,2,8]", "[1,66,2,16]"}});
  }
  SUBCASE("k missing") {
    in.k = {};
    reject_forward<gla>(in, b.out(), {.name = "k", .contains = {"[1,66,2,16]"}});
  }
  SUBCASE("v with another T") {
    const auto v = bad({1, 65, 2, 8});
    in.v = v.cview();
    reject_forward<gla>(in, b.out(), {.name = "v", .contains = {"[1,65,2,8]", "[1,66,2,16]"}});
  }
  SUBCASE("v of rank 3") {
    const auto v = bad({1, 66, 16});
    in.v = v.cview();
    reject_forward<gla>(in, b.out(), {.name = "v", .contains = {"[1,66,16]"}});
  }
  SUBCASE("v missing") {
    in.v = {};
    reject_forward<gla>(in, b.out(), {.name = "v", .contains = {"[B,T,HV,V]"}});
  }
  SUBCASE("HV not a multiple of H (SPEC §1.1)") {
    const auto v = bad({1, 66, 3, 8});
    in.v = v.cview();
    reject_forward<gla>(in, b.out(), {.name = "v", .contains = {"[1,66,3,8]", "H = 2"}});
  }
}

TEST_CASE("errors: decay gates g and beta (SPEC §1.2, §1.4, §3.1)") {
  SUBCASE("gated_key: g of the scalar shape") {
    bundle<gla> b;
    auto in = b.in();
    const auto g = bad({1, 66, 2});
    in.g = g.cview();
    reject_forward<gla>(in, b.out(), {.name = "g", .contains = {"[1,66,2]", "[1,66,2,16]"}});
  }
  SUBCASE("gated_key: g missing") {
    bundle<gla> b;
    auto in = b.in();
    in.g = {};
    reject_forward<gla>(in, b.out(), {.name = "g", .contains = {"[1,66,2,16]", "required"}});
  }
  SUBCASE("gated_key with GVA: g must have HV heads, not H") {
    bundle<gla> b({.H = 1, .HV = 2});
    auto in = b.in();
    const auto g = bad({1, 66, 1, 16});
    in.g = g.cview();
    reject_forward<gla>(in, b.out(), {.name = "g", .contains = {"[1,66,1,16]", "[1,66,2,16]"}});
  }
  SUBCASE("scalar: g of the per-key shape") {
    bundle<retention> b;
    auto in = b.in();
    const auto g = bad({1, 66, 2, 16});
    in.g = g.cview();
    reject_forward<retention>(in, b.out(), {.name = "g", .contains = {"[1,66,2,16]", "[1,66,2]"}});
  }
  SUBCASE("g given for decay::none") {
    bundle<linear_attn> b;
    auto in = b.in();
    const auto g = bad({1, 66, 2, 16});
    in.g = g.cview();
    reject_forward<linear_attn>(in, b.out(), {.name = "g", .contains = {"[1,66,2,16]", "decay::none"}});
  }
  SUBCASE("beta given for GLA") {
    bundle<gla> b;
    auto in = b.in();
    const auto beta = bad({1, 66, 2});
    in.beta = beta.cview();
    reject_forward<gla>(in, b.out(), {.name = "beta", .contains = {"[1,66,2]"}});
  }
  SUBCASE("delta rule: beta missing") {
    bundle<gdn> b;
    auto in = b.in();
    in.beta = {};
    reject_forward<gdn>(in, b.out(), {.name = "beta", .contains = {"[1,66,2]", "required"}});
  }
  SUBCASE("delta rule: beta of the wrong shape") {
    bundle<gdn> b;
    auto in = b.in();
    const auto beta = bad({1, 66, 2, 1});
    in.beta = beta.cview();
    reject_forward<gdn>(in, b.out(), {.name = "beta", .contains = {"[1,66,2,1]", "[1,66,2]"}});
  }
  SUBCASE("delta rule: g of the per-key shape") {
    bundle<gdn> b;
    auto in = b.in();
    const auto g = bad({1, 66, 2, 16});
    in.g = g.cview();
    reject_forward<gdn>(in, b.out(), {.name = "g", .contains = {"[1,66,2,16]", "[1,66,2]"}});
  }
}

TEST_CASE("errors: the shared partition's inputs (SPEC §4.3)") {
  SUBCASE("with a shared partition") {
    bundle<sse_delta_s> b;
    auto in = b.in();
    const auto q = bad({1, 66, 2, 15}), beta = bad({1, 66, 4}), g = bad({1, 66, 2, 16});
    SUBCASE("shared.q wrong shape") {
      in.shared.q = q.cview();
      reject_forward<sse_delta_s>(in, b.out(), {.name = "shared.q", .contains = {"[1,66,2,15]", "[1,66,2,16]"}});
    }
    SUBCASE("shared.q missing") {
      in.shared.q = {};
      reject_forward<sse_delta_s>(in, b.out(), {.name = "shared.q", .contains = {"[1,66,2,16]"}});
    }
    SUBCASE("shared.k wrong shape") {
      in.shared.k = q.cview();
      reject_forward<sse_delta_s>(in, b.out(), {.name = "shared.k", .contains = {"[1,66,2,15]"}});
    }
    SUBCASE("shared.g wrong shape") {
      in.shared.g = g.cview();
      reject_forward<sse_delta_s>(in, b.out(), {.name = "shared.g", .contains = {"[1,66,2,16]", "[1,66,2]"}});
    }
    SUBCASE("shared.g missing") {
      in.shared.g = {};
      reject_forward<sse_delta_s>(in, b.out(), {.name = "shared.g", .contains = {"[1,66,2]"}});
    }
    SUBCASE("shared.beta wrong shape") {
      in.shared.beta = beta.cview();
      reject_forward<sse_delta_s>(in, b.out(), {.name = "shared.beta", .contains = {"[1,66,4]"}});
    }
  }
  SUBCASE("shared.beta given for a GLA shared partition") {
    bundle<sse_n4k1s> b;
    auto in = b.in();
    const auto beta = bad({1, 66, 2});
    in.shared.beta = beta.cview();
    reject_forward<sse_n4k1s>(in, b.out(), {.name = "shared.beta", .contains = {"[1,66,2]"}});
  }
  SUBCASE("shared inputs without a shared partition") {
    bundle<sse_n4k2> b;
    auto in = b.in();
    const auto x = bad({1, 66, 2, 16});
    SUBCASE("shared.q") {
      in.shared.q = x.cview();
      reject_forward<sse_n4k2>(in, b.out(), {.name = "shared.q", .contains = {"[1,66,2,16]", "shared"}});
    }
    SUBCASE("shared.k") {
      in.shared.k = x.cview();
      reject_forward<sse_n4k2>(in, b.out(), {.name = "shared.k", .contains = {"[1,66,2,16]"}});
    }
    SUBCASE("shared.g") {
      in.shared.g = x.cview();
      reject_forward<sse_n4k2>(in, b.out(), {.name = "shared.g", .contains = {"[1,66,2,16]"}});
    }
  }
  SUBCASE("shared inputs for partition::single") {
    bundle<gla> b;
    auto in = b.in();
    const auto x = bad({1, 66, 2, 16});
    in.shared.k = x.cview();
    reject_forward<gla>(in, b.out(), {.name = "shared.k", .contains = {"[1,66,2,16]"}});
  }
}

TEST_CASE("errors: router logits (SPEC §4.4)") {
  SUBCASE("top_k: router_logits with another N") {
    bundle<sse_n4k1s> b;
    auto in = b.in();
    const auto l = bad({1, 66, 5});
    in.router_logits = l.cview();
    reject_forward<sse_n4k1s>(in, b.out(), {.name = "router_logits", .contains = {"[1,66,5]", "[1,66,4]"}});
  }
  SUBCASE("top_k: router_logits missing") {
    bundle<sse_n4k2> b;
    auto in = b.in();
    in.router_logits = {};
    reject_forward<sse_n4k2>(in, b.out(), {.name = "router_logits", .contains = {"[1,66,4]", "required"}});
  }
  SUBCASE("top_k: router_logits per head (rank 4)") {
    bundle<sse_n4k2> b;
    auto in = b.in();
    const auto l = bad({1, 66, 2, 4});
    in.router_logits = l.cview();
    reject_forward<sse_n4k2>(in, b.out(), {.name = "router_logits", .contains = {"[1,66,2,4]"}});
  }
  SUBCASE("router::dense with partition::single takes no logits") {
    bundle<gla> b;
    auto in = b.in();
    const auto l = bad({1, 66, 4});
    in.router_logits = l.cview();
    reject_forward<gla>(in, b.out(), {.name = "router_logits", .contains = {"[1,66,4]", "router::dense"}});
  }
  SUBCASE("router::dense over routed partitions takes no logits") {
    bundle<dense_n3> b({.N = 3});
    auto in = b.in();
    const auto l = bad({1, 66, 3});
    in.router_logits = l.cview();
    reject_forward<dense_n3>(in, b.out(), {.name = "router_logits", .contains = {"[1,66,3]"}});
  }
}

TEST_CASE("errors: initial_state, final_state and o (SPEC §1.6, §11 C5)") {
  bundle<sse_n4k1s> b;  // P = 5
  auto in = b.in();
  SUBCASE("initial_state without the shared partition counted") {
    const auto h = bad({1, 4, 2, 16, 8});
    in.initial_state = h.cview();
    reject_forward<sse_n4k1s>(in, b.out(), {.name = "initial_state", .contains = {"[1,4,2,16,8]", "[1,5,2,16,8]"}});
  }
  SUBCASE("initial_state in the authors' mask layout [S,(N+1)HV,K,V]") {
    const auto h = bad({1, 10, 16, 8});
    in.initial_state = h.cview();
    reject_forward<sse_n4k1s>(in, b.out(), {.name = "initial_state", .contains = {"[1,10,16,8]", "[1,5,2,16,8]"}});
  }
  SUBCASE("initial_state with K and V swapped") {
    const auto h = bad({1, 5, 2, 8, 16});
    in.initial_state = h.cview();
    reject_forward<sse_n4k1s>(in, b.out(), {.name = "initial_state", .contains = {"[1,5,2,8,16]"}});
  }
  SUBCASE("final_state of the wrong shape") {
    auto ht = bad({2, 5, 2, 16, 8});
    reject_forward<sse_n4k1s>(in, {b.o.view(), ht.view()},
                              {.name = "final_state", .contains = {"[2,5,2,16,8]", "[1,5,2,16,8]"}},
                              {}, /*also_allocating=*/false);
  }
  SUBCASE("o of the wrong shape") {
    auto o = bad({1, 66, 2, 16});
    reject_forward<sse_n4k1s>(in, {o.view(), b.ht.view()}, {.name = "o", .contains = {"[1,66,2,16]", "[1,66,2,8]"}},
                              {}, false);
  }
  SUBCASE("o with H heads instead of HV (GVA)") {
    bundle<gla> g({.H = 1, .HV = 2});
    auto o = bad({1, 66, 1, 8});
    reject_forward<gla>(g.in(), {o.view(), g.ht.view()}, {.name = "o", .contains = {"[1,66,1,8]", "[1,66,2,8]"}}, {},
                        false);
  }
  SUBCASE("o missing") {
    reject_forward<sse_n4k1s>(in, {tensor_view<float>{}, b.ht.view()}, {.name = "o", .contains = {"[1,66,2,8]", "required"}},
                              {}, false);
  }
}

TEST_CASE("errors: cu_seqlens (SPEC §1.7)") {
  SUBCASE("with B > 1") {
    bundle<gla> b({.B = 2, .S = 2});
    b.cu = {0, 30, 66};
    reject_forward<gla>(b.in(), b.out(), {.name = "cu_seqlens", .contains = {"B = 1", "[2,66,2,16]"}});
  }
  SUBCASE("not starting at 0") {
    bundle<gla> b({.S = 2});
    b.cu = {1, 30, 66};
    reject_forward<gla>(b.in(), b.out(), {.name = "cu_seqlens", .contains = {"start at 0", "got 1"}});
  }
  SUBCASE("decreasing") {
    bundle<sse_n4k1s> b({.S = 3});
    b.cu = {0, 40, 30, 66};
    reject_forward<sse_n4k1s>(b.in(), b.out(), {.name = "cu_seqlens", .contains = {"cu_seqlens[2] = 30", "40"}});
  }
  SUBCASE("not ending at T") {
    bundle<gla> b({.S = 2});
    b.cu = {0, 30, 60};
    reject_forward<gla>(b.in(), b.out(), {.name = "cu_seqlens", .contains = {"60", "T = 66", "[1,66,2,16]"}});
  }
  SUBCASE("running past T") {
    bundle<gla> b({.S = 2});
    b.cu = {0, 30, 70};
    reject_forward<gla>(b.in(), b.out(), {.name = "cu_seqlens", .contains = {"70", "T = 66"}});
  }
  SUBCASE("a single offset") {
    bundle<gla> b({.S = 1});
    b.cu = {0};
    reject_forward<gla>(b.in(), b.out(), {.name = "cu_seqlens", .contains = {"got 1"}});
  }
  SUBCASE("states sized for B instead of the packed sequences") {
    bundle<gla> b({.S = 1});
    b.cu = {0, 30, 66};  // S = 2, but h0 and ht are [1,...]
    reject_forward<gla>(b.in(), b.out(), {.name = "initial_state", .contains = {"[1,1,2,16,8]", "[2,1,2,16,8]"}});
  }
}

TEST_CASE("errors: options versus compile-time parameters") {
  SUBCASE("options.num_partitions contradicts a static N") {
    bundle<sse_n4k2> b;
    reject_forward<sse_n4k2>(b.in(), b.out(), {.name = "options.num_partitions", .contains = {"= 3", "N = 4"}},
                             {.num_partitions = 3});
  }
  SUBCASE("options.num_partitions with partition::single") {
    bundle<gla> b;
    reject_forward<gla>(b.in(), b.out(), {.name = "options.num_partitions", .contains = {"partition::single"}},
                        {.num_partitions = 2});
  }
  SUBCASE("options.num_writer contradicts a static kw") {
    bundle<sse_n4k2> b;
    reject_forward<sse_n4k2>(b.in(), b.out(), {.name = "options.num_writer", .contains = {"= 1", "2"}},
                             {.num_writer = 1});
  }
  SUBCASE("options.num_reader contradicts a static kr") {
    bundle<sse_n4k2> b;
    reject_forward<sse_n4k2>(b.in(), b.out(), {.name = "options.num_reader", .contains = {"= 3"}}, {.num_reader = 3});
  }
  SUBCASE("router options for router::dense") {
    bundle<dense_n3> b({.N = 3});
    reject_forward<dense_n3>(b.in(), b.out(), {.name = "router::dense", .contains = {"num_writer"}}, {.num_writer = 1});
  }
  SUBCASE("options.gates for fixed gates") {
    bundle<sse_n4k2> b;
    reject_forward<sse_n4k2>(b.in(), b.out(), {.name = "options.gates", .contains = {"compile time"}},
                             {.gates = rt::gate::none});
  }
  SUBCASE("kw > N at run time (dynamic N)") {
    bundle<sse_dyn> b({.N = 2});
    reject_forward<sse_dyn>(b.in(), b.out(), {.name = "router::top_k", .contains = {"kw = 3", "N = 2"}},
                            {.num_partitions = 2, .num_writer = 3, .num_reader = 1});
  }
  SUBCASE("kr > N at run time (dynamic N)") {
    bundle<sse_dyn> b({.N = 2});
    reject_forward<sse_dyn>(b.in(), b.out(), {.name = "router::top_k", .contains = {"kr = 5", "N = 2"}},
                            {.num_partitions = 2, .num_writer = 1, .num_reader = 5});
  }
  SUBCASE("missing options.num_partitions for routed<dynamic>") {
    bundle<sse_dyn> b({.N = 4});
    reject_forward<sse_dyn>(b.in(), b.out(), {.name = "options.num_partitions", .contains = {"routed<dynamic>"}},
                            {.num_writer = 1, .num_reader = 1});
  }
  SUBCASE("missing options.num_writer for top_k<dynamic>") {
    bundle<sse_dyn> b({.N = 4});
    reject_forward<sse_dyn>(b.in(), b.out(), {.name = "options.num_writer", .contains = {"top_k<dynamic>"}},
                            {.num_partitions = 4, .num_reader = 1});
  }
  SUBCASE("missing options.num_reader for top_k<dynamic>") {
    bundle<sse_dyn> b({.N = 4});
    reject_forward<sse_dyn>(b.in(), b.out(), {.name = "options.num_reader", .contains = {"top_k<dynamic>"}},
                            {.num_partitions = 4, .num_writer = 1});
  }
  SUBCASE("missing options.gates for dynamic gates") {
    bundle<sse_dyn_gates> b;
    reject_forward<sse_dyn_gates>(b.in(), b.out(), {.name = "options.gates", .contains = {"dynamic_gates"}});
  }
  SUBCASE("dynamic N given but logits sized for another N") {
    bundle<sse_dyn> b({.N = 4});
    reject_forward<sse_dyn>(b.in(), b.out(), {.name = "router_logits", .contains = {"[1,66,4]", "[1,66,3]"}},
                            {.num_partitions = 3, .num_writer = 1, .num_reader = 1});
  }
}

TEST_CASE("errors: aliasing between outputs and inputs (SPEC §11 C5)") {
  SUBCASE("final_state is initial_state") {
    bundle<sse_n4k1s> b;
    auto in = b.in();
    // the same memory as the initial state, writable
    reject_forward<sse_n4k1s>(in, {b.o.view(), b.h0.view()}, {.name = "final_state", .contains = {"initial_state", "forward_in_place"}},
                              {}, false);
  }
  SUBCASE("final_state overlaps the second half of initial_state") {
    bundle<gla> b;
    const index_t n = b.h0.numel();
    tensor<float> big({2 * n});
    for (index_t i = 0; i < n; ++i) big[i] = b.h0[i];
    auto in = b.in();
    in.initial_state = {big.data(), b.h0.shape()};
    reject_forward<gla>(in, {b.o.view(), {big.data() + n / 2, b.h0.shape()}},
                        {.name = "final_state", .contains = {"initial_state"}}, {}, false);
  }
  SUBCASE("o overlaps final_state") {
    bundle<gla> b;
    tensor<float> big({b.ht.numel() + b.o.numel()});
    reject_forward<gla>(b.in(), {{big.data() + b.ht.numel() - 1, b.o.shape()}, {big.data(), b.ht.shape()}},
                        {.name = "o", .contains = {"state"}}, {}, false);
  }
  SUBCASE("final_state is q") {
    // forward() fills final_state (from initial_state or zeros) before it reads q: sharing memory with
    // an input would silently change that input.
    // (reject_forward fills final_state, i.e. the front of q, with the sentinel and checks that forward()
    // leaves it as it is)
    bundle<gla> b({.K = 8});  // q [1,66,2,8] holds more elements than the state [1,1,2,8,8]
    reject_forward<gla>(b.in(), {b.o.view(), {b.q.data(), b.ht.shape()}}, {.name = "final_state", .contains = {"input", "q"}}, {},
                        false);
  }
  SUBCASE("final_state overlaps the end of router_logits") {
    bundle<sse_n4k2> b;
    tensor<float> big({b.logits.numel() + b.ht.numel()});
    std::copy(b.logits.values().begin(), b.logits.values().end(), big.values().begin());
    auto in = b.in();
    in.router_logits = {big.data(), b.logits.shape()};
    reject_forward<sse_n4k2>(in, {b.o.view(), {big.data() + b.logits.numel() - 2, b.ht.shape()}},
                             {.name = "final_state", .contains = {"input", "router_logits"}}, {}, false);
  }
  SUBCASE("forward_in_place: the state is k") {
    bundle<gla> b({.K = 8});
    auto in = b.in();
    in.initial_state = {};
    const tensor<float> k_copy = b.k;
    sentinel(b.o.view());
    snapshot so(b.o.view());
    expect_rejected([&] { linstate::forward_in_place<gla>(linstate::cpu{}, in, {b.k.data(), b.ht.shape()}, b.o.view()); },
                    {&so}, {.api = "linstate::forward_in_place", .name = "state", .contains = {"input"}});
    CHECK(b.k.values() == k_copy.values());
  }
  SUBCASE("o is v") {
    bundle<gla> b({.V = 16});
    reject_forward<gla>(b.in(), {b.v.view(), b.ht.view()}, {.name = "o", .contains = {"input"}}, {}, false);
  }
}

TEST_CASE("errors: forward_in_place (SPEC §11 C5, C8)") {
  bundle<sse_n4k1s> b;
  auto in = b.in();  // initial_state set: the state argument already is the initial state
  auto state = b.ht.view();
  auto o = b.o.view();
  const expectation ex{.api = "linstate::forward_in_place", .name = "in.initial_state", .contains = {"empty"}};
  SUBCASE("with initial_state set") {
    sentinel(state), sentinel(o);
    snapshot ss(state), so(o), si(in.initial_state);
    expect_rejected([&] { linstate::forward_in_place<sse_n4k1s>(linstate::cpu{}, in, state, o); }, {&ss, &so, &si}, ex);
  }
  SUBCASE("with initial_state set to the state itself") {
    in.initial_state = b.ht.cview();
    sentinel(state), sentinel(o);
    snapshot ss(state), so(o);
    expect_rejected([&] { linstate::forward_in_place<sse_n4k1s>(linstate::cpu{}, in, state, o, linstate::recurrent{}); },
                    {&ss, &so}, ex);
  }
  in.initial_state = {};
  SUBCASE("state of the wrong shape") {
    tensor<float> st({1, 4, 2, 16, 8});
    sentinel(st.view()), sentinel(o);
    snapshot ss(st.view()), so(o);
    expect_rejected([&] { linstate::forward_in_place<sse_n4k1s>(linstate::cpu{}, in, st.view(), o); }, {&ss, &so},
                    {.api = "linstate::forward_in_place", .name = "state", .contains = {"[1,4,2,16,8]", "[1,5,2,16,8]"}});
  }
  SUBCASE("state missing") {
    sentinel(o);
    snapshot so(o);
    expect_rejected([&] { linstate::forward_in_place<sse_n4k1s>(linstate::cpu{}, in, tensor_view<float>{}, o); }, {&so},
                    {.api = "linstate::forward_in_place", .name = "state", .contains = {"[S,P,HV,K,V]"}});
  }
  SUBCASE("o of the wrong shape, state untouched") {
    tensor<float> o2({1, 66, 2, 9});
    sentinel(state), sentinel(o2.view());
    snapshot ss(state), so(o2.view());
    expect_rejected([&] { linstate::forward_in_place<sse_n4k1s>(linstate::cpu{}, in, state, o2.view()); }, {&ss, &so},
                    {.api = "linstate::forward_in_place", .name = "o", .contains = {"[1,66,2,9]", "[1,66,2,8]"}});
  }
  SUBCASE("a bad router input leaves the state untouched") {
    const auto l = bad({1, 66, 3});
    in.router_logits = l.cview();
    sentinel(state), sentinel(o);
    snapshot ss(state), so(o);
    expect_rejected([&] { linstate::forward_in_place<sse_n4k1s>(linstate::cpu{}, in, state, o); }, {&ss, &so},
                    {.api = "linstate::forward_in_place", .name = "router_logits", .contains = {"[1,66,3]"}});
  }
}

// ---------------------------------------------------------------------------------------------------
// Contracts first written as known gaps of the library's checks (now fixed).

TEST_CASE("errors: a negative dimension is rejected with linstate::error naming the shape") {
  tensor<float> buf({64});
  const linstate::inputs<float> in{.q = {buf.data(), {1, -3, 2, 4}}, .k = {buf.data(), {1, -3, 2, 4}},
                                   .v = {buf.data(), {1, -3, 2, 4}}, .g = {buf.data(), {1, -3, 2, 4}}};
  bool library_error = false;
  std::string what;
  try {
    (void)linstate::forward<gla>(linstate::cpu{}, in);
  } catch (const linstate::error& e) {
    library_error = true, what = e.what();
  } catch (const std::exception& e) {
    what = e.what();  // today: std::length_error from std::vector
  }
  INFO("what(): " << what);
  CHECK(library_error);
  CHECK(what.find("[1,-3,2,4]") != std::string::npos);
}

namespace {
//! The message of the linstate::error `call` throws, or "" when it throws none.
template <class Call>
std::string error_message(Call&& call) {
  try {
    call();
  } catch (const linstate::error& e) {
    return e.what();
  }
  return {};
}
}  // namespace

// Every other run-time error names its tensor and shape; the overlap errors say "an input tensor" and
// "the state" (which, for forward(), is the caller's final_state).
TEST_CASE("errors: o overlapping an input names that input (v) and its shape") {
  bundle<gla> b({.V = 16});
  const std::string msg = error_message([&] { linstate::forward<gla>(linstate::cpu{}, b.in(), {b.v.view(), b.ht.view()}); });
  INFO("message: " << msg);
  REQUIRE(!msg.empty());
  CHECK(names(msg, "v"));
  CHECK(msg.find("[1,66,2,16]") != std::string::npos);
}

TEST_CASE("errors: final_state overlapping an input names both") {
  bundle<gla> b({.K = 8});
  const std::string msg =
      error_message([&] { linstate::forward<gla>(linstate::cpu{}, b.in(), {b.o.view(), {b.q.data(), b.ht.shape()}}); });
  INFO("message: " << msg);
  REQUIRE(!msg.empty());
  CHECK(names(msg, "final_state"));
  CHECK(names(msg, "q"));
}

TEST_CASE("errors: forward() names final_state when o overlaps it") {
  bundle<gla> b;
  tensor<float> big({b.ht.numel() + b.o.numel()});
  const std::string msg = error_message([&] {
    linstate::forward<gla>(linstate::cpu{}, b.in(), {{big.data() + b.ht.numel() - 1, b.o.shape()}, {big.data(), b.ht.shape()}});
  });
  INFO("message: " << msg);
  REQUIRE(!msg.empty());
  CHECK(names(msg, "final_state"));
}
