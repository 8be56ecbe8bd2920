// SPDX-License-Identifier: Apache-2.0
//! \file tests/variants/invariants_support.hpp
//! \brief The variants and helpers of the SPEC §9.1 invariant tests (test_invariants.cpp,
//! test_invariants_more.cpp: two translation units so that the sanitizer build compiles them in
//! parallel). Included once per translation unit; everything is in an anonymous namespace.
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <linstate/linstate.hpp>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "random_inputs.hpp"

namespace {
namespace inv {

namespace dc = linstate::decay;
namespace pt = linstate::partition;
namespace rt = linstate::router;
using linstate::index_t;
using linstate::tensor;
using namespace linstate_test;

// ------------------------------------------------------------------------------------------------
// Variants. Together they cover: decays none / scalar / gated_key / gated_delta_rule with and
// without l2norm; routers dense and top_k with kw = kr, kw > kr, kw < kr, gates none / write / read /
// both, renormalize, round_to_input, run-time (dynamic) N, kw, kr and gates; partitions single,
// routed<N>, routed<N, shared>, N = 1 and kw = N.

struct gla : linstate::spec<> {};
struct linear_attn : gla { using decay = dc::none; };
struct retention : gla { using decay = dc::scalar; };
struct gdn : gla { using decay = dc::gated_delta_rule<true>; };
struct delta_rule : gla { using decay = dc::gated_delta_rule<false>; };
//! router::dense over 3 routed partitions: three GLA states per head, summed.
struct dense_n3 : gla { using partition = pt::routed<3>; };
struct sse_n4k1s : gla {
  using partition = pt::routed<4, pt::shared>;
  using router = rt::top_k<1>;
};
struct sse_n4k2 : gla {
  using partition = pt::routed<4>;
  using router = rt::top_k<2>;
};
struct sse_n4w2r1s : sse_n4k1s { using router = rt::top_k<2, 1>; };  // kw > kr
struct sse_n4w1r3 : sse_n4k2 { using router = rt::top_k<1, 3>; };    // kw < kr
struct sse_gates_none : sse_n4k1s { using router = rt::top_k<1, 1, rt::top_k_options{.gates = rt::gate::none}>; };
struct sse_gates_write : sse_n4k2 { using router = rt::top_k<2, 2, rt::top_k_options{.gates = rt::gate::write}>; };
struct sse_gates_read : sse_n4k2 { using router = rt::top_k<2, 3, rt::top_k_options{.gates = rt::gate::read}>; };
struct sse_renorm : sse_n4k1s { using router = rt::top_k<2, 3, rt::top_k_options{.renormalize = true}>; };
struct sse_round : sse_n4k1s { using router = rt::top_k<1, 1, rt::top_k_options{.round_to_input = true}>; };
struct sse_n1k1 : gla {  // N = 1, k = 1, no shared: GLA (P5 b)
  using partition = pt::routed<1>;
  using router = rt::top_k<1>;
};
struct sse_n1k1s : sse_n1k1 { using partition = pt::routed<1, pt::shared>; };  // P5 c
struct sse_n3k3s : gla {                                                        // kw = kr = N
  using partition = pt::routed<3, pt::shared>;
  using router = rt::top_k<3>;
};
struct sse_none_n4k1s : sse_n4k1s { using decay = dc::none; };
struct sse_scalar_n4w2r1 : sse_n4k2 {
  using decay = dc::scalar;
  using router = rt::top_k<2, 1>;
};
struct sse_gdn_n4k1s : sse_n4k1s { using decay = dc::gated_delta_rule<true>; };
struct sse_gdn_n4w2r1s : sse_n4w2r1s { using decay = dc::gated_delta_rule<true>; };
struct sse_delta_n3w1r2 : gla {
  using decay = dc::gated_delta_rule<false>;
  using partition = pt::routed<3>;
  using router = rt::top_k<1, 2>;
};
//! Everything at run time: N = 5, kw = 2, kr = 1, read gate only.
struct sse_dynamic : gla {
  using partition = pt::routed<linstate::dynamic, pt::shared>;
  using router = rt::top_k<linstate::dynamic, linstate::dynamic, rt::top_k_options{.dynamic_gates = true}>;
  static linstate::options test_options() {
    return {.num_partitions = 5, .num_writer = 2, .num_reader = 1, .gates = rt::gate::read};
  }
};
//! For the router-level tests (P7, P8): N, kw, kr and the gates all at run time.
struct router_dyn : gla {
  using partition = pt::routed<linstate::dynamic>;
  using router = rt::top_k<linstate::dynamic, linstate::dynamic, rt::top_k_options{.dynamic_gates = true}>;
};
struct router_dyn_renorm : router_dyn {
  using router =
      rt::top_k<linstate::dynamic, linstate::dynamic, rt::top_k_options{.renormalize = true, .dynamic_gates = true}>;
};

#if LINSTATE_TEST_SANITIZED
// The ASan + UBSan build (.ci/run; meson sets LINSTATE_TEST_SANITIZED) runs the typed cases on a subset
// that still takes every code path and every shape rule: each decay (diagonal, none, scalar, the delta
// rule with and without l2norm), single, dense and routed partitions with and without the shared one,
// N = 1, kw > kr, kw < kr, gates none / write / read, renormalisation, run-time N, kw, kr. The
// sanitizers look for memory errors and undefined behaviour, which follow the path and the shapes,
// not the constants; the left-out variants differ from a kept one only in constants. The optimised
// build runs every variant.
using all_variants = std::tuple<gla, linear_attn, retention, gdn, delta_rule, dense_n3, sse_n4w2r1s, sse_n4w1r3,
                                sse_gates_none, sse_gates_write, sse_renorm, sse_n1k1s, sse_gdn_n4w2r1s,
                                sse_delta_n3w1r2, sse_dynamic>;
using routed_variants = std::tuple<sse_n4w2r1s, sse_n4w1r3, sse_gates_none, sse_gates_write, sse_renorm, sse_n1k1s,
                                   sse_gdn_n4w2r1s, sse_delta_n3w1r2, sse_dynamic>;
#else
using all_variants =
    std::tuple<gla, linear_attn, retention, gdn, delta_rule, dense_n3, sse_n4k1s, sse_n4k2, sse_n4w2r1s, sse_n4w1r3,
               sse_gates_none, sse_gates_write, sse_gates_read, sse_renorm, sse_round, sse_n1k1, sse_n1k1s, sse_n3k3s,
               sse_none_n4k1s, sse_scalar_n4w2r1, sse_gdn_n4k1s, sse_gdn_n4w2r1s, sse_delta_n3w1r2, sse_dynamic>;

//! The variants with a top-k router (P4, P12).
using routed_variants =
    std::tuple<sse_n4k1s, sse_n4k2, sse_n4w2r1s, sse_n4w1r3, sse_gates_none, sse_gates_write, sse_gates_read, sse_renorm,
               sse_round, sse_n1k1s, sse_n3k3s, sse_none_n4k1s, sse_scalar_n4w2r1, sse_gdn_n4k1s, sse_gdn_n4w2r1s,
               sse_delta_n3w1r2, sse_dynamic>;
#endif

}  // namespace inv
}  // namespace

// Readable variant names in doctest's report (declared before the typed tests are instantiated).
TYPE_TO_STRING_AS("gla", inv::gla);
TYPE_TO_STRING_AS("linear_attn(decay::none)", inv::linear_attn);
TYPE_TO_STRING_AS("retention(decay::scalar)", inv::retention);
TYPE_TO_STRING_AS("gdn(l2norm)", inv::gdn);
TYPE_TO_STRING_AS("delta_rule(no l2norm)", inv::delta_rule);
TYPE_TO_STRING_AS("dense_n3", inv::dense_n3);
TYPE_TO_STRING_AS("sse_n4k1s", inv::sse_n4k1s);
TYPE_TO_STRING_AS("sse_n4k2", inv::sse_n4k2);
TYPE_TO_STRING_AS("sse_n4w2r1s", inv::sse_n4w2r1s);
TYPE_TO_STRING_AS("sse_n4w1r3", inv::sse_n4w1r3);
TYPE_TO_STRING_AS("sse_gates_none", inv::sse_gates_none);
TYPE_TO_STRING_AS("sse_gates_write", inv::sse_gates_write);
TYPE_TO_STRING_AS("sse_gates_read", inv::sse_gates_read);
TYPE_TO_STRING_AS("sse_renorm", inv::sse_renorm);
TYPE_TO_STRING_AS("sse_round", inv::sse_round);
TYPE_TO_STRING_AS("sse_n1k1", inv::sse_n1k1);
TYPE_TO_STRING_AS("sse_n1k1s", inv::sse_n1k1s);
TYPE_TO_STRING_AS("sse_n3k3s", inv::sse_n3k3s);
TYPE_TO_STRING_AS("sse_none_n4k1s", inv::sse_none_n4k1s);
TYPE_TO_STRING_AS("sse_scalar_n4w2r1", inv::sse_scalar_n4w2r1);
TYPE_TO_STRING_AS("sse_gdn_n4k1s", inv::sse_gdn_n4k1s);
TYPE_TO_STRING_AS("sse_gdn_n4w2r1s", inv::sse_gdn_n4w2r1s);
TYPE_TO_STRING_AS("sse_delta_n3w1r2", inv::sse_delta_n3w1r2);
TYPE_TO_STRING_AS("sse_dynamic", inv::sse_dynamic);

namespace {
namespace inv {  // reopened after the type names: the aliases above apply

// ------------------------------------------------------------------------------------------------
// Helpers.

//! The backend of every test but the threading one: results do not depend on the thread count (the
//! "threads" test checks it bit for bit), and one thread keeps the suite fast on a loaded machine,
//! where waking OpenMP workers for these small problems costs more than the work.
constexpr linstate::cpu be{.threads = 1};

constexpr double tol_ref = 1e-5;   // fast path vs fp64 reference (SPEC §9.3)
constexpr double tol_same = 2e-6;  // two fp32 paths of the same math

template <class Spec>
linstate::options options_of() {
  if constexpr (requires { Spec::test_options(); }) return Spec::test_options();
  else return {};
}

template <class Spec>
constexpr bool is_delta = linstate::is_family_of<typename Spec::decay, linstate::family::delta>;
template <class Spec>
constexpr bool is_top_k = Spec::router::routes;

//! kw of a variant (N for router::dense, which writes every partition).
template <class Spec>
int writers(const linstate::options& opt, index_t N) {
  if constexpr (is_top_k<Spec>) return Spec::router::num_writer == linstate::dynamic ? opt.num_writer : Spec::router::num_writer;
  else return static_cast<int>(N);
}

//! Every algorithm the CPU backend has for the variant (no chunked delta rule yet).
template <class Spec, class F>
void for_each_algorithm(F&& f) {
  f(linstate::recurrent{});
  f(linstate::automatic{});
  if constexpr (!is_delta<Spec>) {
    f(linstate::chunked<16>{});
    f(linstate::chunked<32>{});
    f(linstate::chunked<64>{});
  }
}
template <class F>
void for_each_strategy(F&& f) {
  f(linstate::mask{});
  f(linstate::varlen{});
}
template <class S>
auto other_strategy(S) {
  if constexpr (std::is_same_v<S, linstate::mask>) return linstate::varlen{};
  else return linstate::mask{};
}
template <class A>
std::string name_of(A) {
  if constexpr (requires { A::chunk_size; }) return "chunked<" + std::to_string(A::chunk_size) + ">";
  else return A::name;
}
template <class A, class S>
std::string label(A a, S s) {
  return name_of(a) + "/" + name_of(s);
}

struct layout {
  std::string name;
  sizes dims;
  std::vector<std::int64_t> cu;
};
//! B > 1 with V ≠ K; grouped value heads HV = 2·H; packed sequences of lengths 0, 63, 15, 75, 1
//! (SPEC §9.1 P1: empty sequences and lengths that are not multiples of the chunk).
[[maybe_unused]] std::vector<layout> layouts() {
  return {
      {"batched B=2 K=16 V=24", {.B = 2, .T = 80, .H = 2, .HV = 2, .K = 16, .V = 24}, {}},
      {"grouped H=2 HV=4 K=8 V=16", {.B = 2, .T = 70, .H = 2, .HV = 4, .K = 8, .V = 16}, {}},
      {"packed lengths 0,63,15,75,1", {.B = 1, .T = 154, .H = 2, .HV = 2, .K = 16, .V = 16}, {0, 0, 63, 78, 153, 154}},
  };
}

template <class Spec>
random_inputs make_data(const layout& l, bool h0, std::uint64_t seed, float gate_normalizer = 16.f) {
  config c = config_for<Spec>(l.dims, options_of<Spec>());
  c.cu_seqlens = l.cu;
  c.initial_state = h0;
  c.gate_normalizer = gate_normalizer;
  return random_inputs(c, seed);
}

//! Partition p of every sequence of a state, as a state `[S,1,HV,K,V]` of its own.
[[maybe_unused]] tensor<float> partition_of(const tensor<float>& st, index_t p) {
  const linstate::shape_t sh = st.shape();
  tensor<float> r({sh[0], 1, sh[2], sh[3], sh[4]});
  for (index_t s = 0; s < sh[0]; ++s) {
    const auto blk = state_block(st, s, p);
    std::copy(blk.begin(), blk.end(), r.data() + s * static_cast<index_t>(blk.size()));
  }
  return r;
}
template <class T>
tensor<T> scaled(const tensor<T>& a, double c) {
  tensor<T> r(a.shape());
  for (index_t i = 0; i < a.numel(); ++i) r[i] = static_cast<T>(c * static_cast<double>(a[i]));
  return r;
}
template <class T>
tensor<T> sum(const tensor<T>& a, const tensor<T>& b) {
  tensor<T> r(a.shape());
  for (index_t i = 0; i < a.numel(); ++i) r[i] = a[i] + b[i];
  return r;
}
//! Copies the T' tokens of `part` ([B,T',HV,V]) into rows [t0, t0+T') of `full` ([B,T,HV,V]).
[[maybe_unused]] void put_rows(tensor<float>& full, const tensor<float>& part, index_t t0) {
  const index_t B = full.shape()[0], T = full.shape()[1], Tp = part.shape()[1];
  const index_t row = full.shape()[2] * full.shape()[3];
  for (index_t b = 0; b < B; ++b)
    std::copy_n(part.data() + b * Tp * row, Tp * row, full.data() + (b * T + t0) * row);
}
//! Rows [0, t1) of every batch row of o ([B,T,HV,V]).
template <class Elem>
tensor<Elem> first_rows(const tensor<Elem>& o, index_t t1) {
  const index_t B = o.shape()[0], T = o.shape()[1], row = o.shape()[2] * o.shape()[3];
  tensor<Elem> r({B, t1, o.shape()[2], o.shape()[3]});
  for (index_t b = 0; b < B; ++b) std::copy_n(o.data() + b * T * row, t1 * row, r.data() + b * t1 * row);
  return r;
}

}  // namespace inv
}  // namespace
