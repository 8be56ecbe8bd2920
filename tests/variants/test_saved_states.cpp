// SPDX-License-Identifier: Apache-2.0
//! \file tests/variants/test_saved_states.cpp
//! \brief linstate::saved_states: the chunk states a chunked forward keeps for its backward.
//!
//! Covered: the backward that reads the kept states gives the same gradients, bit for bit, as the one that
//! recomputes them (GLA, retention, linear attention; chunk sizes 16, 32, 64; K = 16 and 128; gate
//! normalisers 16, 1 and 0.1, the last taking the sub-chunked path of strong decays; packed sequences with
//! an empty one; grouped value heads; initial state and ∂L/∂(final state); 1 and 2 threads; bf16 inputs),
//! and both agree with the recurrent backward; the forward's o and final state do not change; calls that
//! keep nothing (SSE, the delta rule, recurrent) leave the object empty and the backward recomputes; a
//! backward given states kept by another call (variant, chunk size, shapes, sequences, input tensors)
//! throws linstate::error; a repeated forward reuses the storage.
#include <doctest/doctest.h>

#include <cstring>
#include <linstate/linstate.hpp>
#include <random>
#include <string>
#include <vector>

#include "random_inputs.hpp"

namespace {
namespace svs {

namespace dc = linstate::decay;
namespace pt = linstate::partition;
namespace rt = linstate::router;
using linstate::index_t;
using linstate::tensor;
using namespace linstate_test;

struct gla : linstate::spec<> {};
struct retention : gla { using decay = dc::scalar; };
struct gla_twin : gla {};  // another variant with GLA's inputs
struct linear_attn : gla { using decay = dc::none; };
struct gdn : gla { using decay = dc::gated_delta_rule<true>; };
struct sse_n4k1s : gla {
  using partition = pt::routed<4, pt::shared>;
  using router = rt::top_k<1>;
};

template <class T>
tensor<T> normal(const linstate::shape_t& s, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> nd;
  tensor<T> t(s);
  for (T& x : t.values()) x = static_cast<T>(nd(gen));
  return t;
}

template <class T>
bool same_bits(const tensor<T>& a, const tensor<T>& b) {
  return a.shape() == b.shape() && (a.values().empty() || std::memcmp(a.data(), b.data(), a.values().size() * sizeof(T)) == 0);
}

//! Every gradient the same bits.
template <class S>
void check_same(const linstate::gradient_result<S>& a, const linstate::gradient_result<S>& b, const std::string& what) {
  CHECK_MESSAGE(same_bits(a.q, b.q), what, " dq");
  CHECK_MESSAGE(same_bits(a.k, b.k), what, " dk");
  CHECK_MESSAGE(same_bits(a.v, b.v), what, " dv");
  CHECK_MESSAGE(same_bits(a.g, b.g), what, " dg");
  CHECK_MESSAGE(same_bits(a.initial_state, b.initial_state), what, " dh0");
}

template <class S>
linstate::gradient_result<S> allocate(const linstate::inputs<S>& in, const linstate::shape_t& state) {
  linstate::gradient_result<S> r;
  auto like = [](const auto& x) {
    using T = std::remove_cvref_t<decltype(*x.data)>;
    return x.empty() ? tensor<T>() : tensor<T>(x.shape);
  };
  r.q = like(in.q), r.k = like(in.k), r.v = like(in.v), r.g = like(in.g), r.beta = like(in.beta);
  r.initial_state = tensor<float>(state);
  return r;
}

template <class S>
linstate::gradients<S> views(linstate::gradient_result<S>& r) {
  auto view = [](auto& t) { return t.empty() ? decltype(t.view()){} : t.view(); };
  return {view(r.q), view(r.k), view(r.v), view(r.g), view(r.beta), {}, {}, view(r.initial_state)};
}

struct setup {
  sizes dims{.B = 2, .T = 150, .H = 2, .HV = 2, .K = 16, .V = 24};
  float gate_normalizer = 16.f;
  bool initial_state = true, dht = true;
  std::vector<std::int64_t> cu_seqlens{};
  int threads = 1;
};

//! Forward with and without saved_states (o and final state the same bits), backward with the kept states
//! and recomputing them (the same bits), and the chunked gradients against the recurrent backward.
template <class Spec, int C, class S = float>
void compare(const setup& su, const std::string& name) {
  auto cfg = config_for<Spec>(su.dims);
  cfg.gate_normalizer = su.gate_normalizer;
  cfg.initial_state = su.initial_state;
  cfg.cu_seqlens = su.cu_seqlens;
  const random_inputs data(cfg, 7);
  linstate::inputs<S> in;
  tensor<S> q, k, v, g;
  if constexpr (std::is_same_v<S, float>) {
    in = data.view();
  } else {  // the same values rounded to S
    auto cast = [](const tensor<float>& x) {
      tensor<S> y(x.shape());
      for (std::size_t i = 0; i < x.values().size(); ++i) y.values()[i] = static_cast<S>(x.values()[i]);
      return y;
    };
    const auto f = data.view();
    q = cast(data.q), k = cast(data.k), v = cast(data.v);
    in.q = q.view(), in.k = k.view(), in.v = v.view();
    if (!data.g.empty()) g = cast(data.g), in.g = g.view();
    in.initial_state = f.initial_state, in.cu_seqlens = f.cu_seqlens;
  }
  const linstate::cpu be{.threads = su.threads};
  const std::string what = name + " C=" + std::to_string(C) + " K=" + std::to_string(su.dims.K) +
                           " gn=" + std::to_string(su.gate_normalizer) + (su.cu_seqlens.empty() ? "" : " packed") +
                           (su.initial_state ? " h0" : "") + (su.dht ? " dht" : "") + " threads=" + std::to_string(su.threads);
  const tensor<S> dO = normal<S>(data.output_shape(), 11);
  const tensor<float> dht = su.dht ? normal<float>(data.state_shape(), 13) : tensor<float>{};
  linstate::cotangents<S> d{.o = dO.view()};
  if (!dht.empty()) d.final_state = dht.view();

  const auto plain = linstate::forward<Spec>(be, in, linstate::chunked<C>{});
  tensor<S> o(plain.o.shape());
  tensor<float> ht(plain.final_state.shape());
  linstate::saved_states saved;
  CHECK(saved.empty());
  linstate::forward<Spec>(be, in, linstate::outputs<S>{o.view(), ht.view()}, saved, linstate::chunked<C>{});
  REQUIRE_MESSAGE(!saved.empty(), what);
  CHECK_MESSAGE(same_bits(o, plain.o), what, " o");
  CHECK_MESSAGE(same_bits(ht, plain.final_state), what, " final state");

  auto recomputed = allocate(in, data.state_shape());
  auto kept = allocate(in, data.state_shape());
  linstate::backward<Spec>(be, in, d, views(recomputed), linstate::chunked<C>{});
  linstate::backward<Spec>(be, in, d, views(kept), saved, linstate::chunked<C>{});
  check_same(kept, recomputed, what);

  if constexpr (std::is_same_v<S, float>) {  // and the chunked gradients are right: against the recurrent backward
    const auto ref = linstate::backward<Spec>(be, in, d, linstate::recurrent{});
    for (auto [x, y, n] : {std::tuple{&kept.q, &ref.q, "dq"}, {&kept.k, &ref.k, "dk"}, {&kept.v, &ref.v, "dv"},
                           {&kept.g, &ref.g, "dg"}, {&kept.initial_state, &ref.initial_state, "dh0"}}) {
      if (y->empty()) continue;
      const double e = max_rel_err(*x, *y);
      CHECK_MESSAGE(e <= 1e-5, what, " ", n, " rel err ", e);
    }
  }
}

template <class Spec>
void sweep(const std::string& name) {
  for (float gn : {16.f, 1.f, 0.1f}) {
    setup su;
    su.gate_normalizer = gn;
    compare<Spec, 16>(su, name), compare<Spec, 32>(su, name), compare<Spec, 64>(su, name);
  }
  setup wide;  // K = V = 128: the AVX2 paths of the products and exponentials, several chunks, 2 threads
  wide.dims = sizes{.B = 1, .T = 300, .H = 2, .HV = 2, .K = 128, .V = 128};
  for (int threads : {1, 2}) {
    wide.threads = threads;
    compare<Spec, 64>(wide, name);
  }
  setup bare;  // no initial state, no dht, T = 75
  bare.dims.T = 75, bare.initial_state = false, bare.dht = false;
  compare<Spec, 32>(bare, name);
  setup packed;  // packed sequences, one of them empty, lengths 70 / 0 / 15 / 65
  packed.dims.B = 1, packed.dims.T = 150, packed.threads = 2;
  packed.cu_seqlens = {0, 70, 70, 85, 150};
  for (float gn : {16.f, 0.1f}) {
    packed.gate_normalizer = gn;
    compare<Spec, 16>(packed, name), compare<Spec, 64>(packed, name);
  }
  setup gva;  // grouped value heads, V ≠ K
  gva.dims.H = 1, gva.dims.HV = 3, gva.dims.T = 97, gva.gate_normalizer = 1.f;
  compare<Spec, 32>(gva, name);
}

TEST_CASE("saved_states: the backward on the kept chunk states == the backward that recomputes them, bit for bit") {
  sweep<gla>("gla");
  sweep<retention>("retention");
  sweep<linear_attn>("linear attention");
}

TEST_CASE("saved_states: bf16 inputs") {
  setup su;
  su.dims = sizes{.B = 1, .T = 200, .H = 2, .HV = 2, .K = 32, .V = 32};
  compare<gla, 64, Eigen::bfloat16>(su, "gla bf16");
}

//! A call that keeps nothing leaves the object empty; the backward then recomputes (the plain backward's bits).
template <class Spec, class Alg, class Strategy = linstate::varlen>
void keeps_nothing(const std::string& name) {
  auto cfg = config_for<Spec>({.B = 2, .T = 90, .H = 2, .HV = 2, .K = 16, .V = 16});
  cfg.initial_state = true;
  const random_inputs data(cfg, 5);
  const auto in = data.view();
  const tensor<float> dO = normal<float>(data.output_shape(), 3);
  const linstate::cotangents<float> d{.o = dO.view()};
  auto r = linstate::forward<Spec>(linstate::cpu{}, in, Alg{}, Strategy{});
  linstate::saved_states saved;
  {  // filled by a GLA call first: a call that keeps nothing must empty it
    auto gcfg = config_for<gla>({.B = 1, .T = 70, .H = 1, .HV = 1, .K = 16, .V = 16});
    const random_inputs gd(gcfg, 1);
    auto gr = linstate::forward<gla>(linstate::cpu{}, gd.view(), linstate::chunked<16>{});
    linstate::forward<gla>(linstate::cpu{}, gd.view(), {gr.o.view(), gr.final_state.view()}, saved, linstate::chunked<16>{});
    REQUIRE(!saved.empty());
  }
  linstate::forward<Spec>(linstate::cpu{}, in, {r.o.view(), r.final_state.view()}, saved, Alg{}, Strategy{});
  CHECK_MESSAGE(saved.empty(), name);
  const auto plain = linstate::backward<Spec>(linstate::cpu{}, in, d, Alg{}, Strategy{});
  auto got = allocate(in, data.state_shape());
  linstate::gradients<float> gv = views(got);
  linstate::gradient_result<float> full;
  if (!in.shared.q.empty()) {  // SSE: every input's gradient, as the plain call
    full.shared.q = tensor<float>(in.shared.q.shape), full.shared.k = tensor<float>(in.shared.k.shape);
    full.shared.g = tensor<float>(in.shared.g.shape);
    gv.shared = {full.shared.q.view(), full.shared.k.view(), full.shared.g.view(), {}};
  }
  if (!in.router_logits.empty()) full.router_logits = tensor<float>(in.router_logits.shape), gv.router_logits = full.router_logits.view();
  linstate::backward<Spec>(linstate::cpu{}, in, d, gv, saved, Alg{}, Strategy{});
  check_same(got, plain, name);
}

TEST_CASE("saved_states: calls that keep nothing (SSE, the delta rule, recurrent) leave it empty") {
  keeps_nothing<sse_n4k1s, linstate::chunked<32>>("sse_n4k1s chunked");
  keeps_nothing<gdn, linstate::chunked<32>>("gdn chunked");
  keeps_nothing<gla, linstate::recurrent>("gla recurrent");
}

//! What automatic runs on the CPU (include/linstate/forward.hpp, cpu_auto_chunk): a forward alone takes chunks of 24
//! above a length that depends on the family and the partitions (16, 7, 48 tokens), the recurrence up to it; a
//! forward that keeps its states and the backward take chunks of 64 above 64 tokens, so that the kept states fit the
//! backward. Each case against the named algorithm, bit for bit.
template <class Spec>
void automatic_runs(const std::string& name, index_t recurrent_upto) {
  INFO(name);
  for (const index_t T : {recurrent_upto, recurrent_upto + 1, index_t{64}, index_t{65}, index_t{100}}) {
    INFO("T = ", T);
    const random_inputs data(config_for<Spec>({.B = 2, .T = T, .H = 2, .HV = 2, .K = 16, .V = 16}), 21);
    const auto in = data.view();
    const linstate::cpu be{.threads = 1};
    const auto got = linstate::forward<Spec>(be, in);  // automatic, varlen
    const auto want = T <= recurrent_upto ? linstate::forward<Spec>(be, in, linstate::recurrent{})
                                          : linstate::forward<Spec>(be, in, linstate::chunked<24>{});
    CHECK(same_bits(got.o, want.o));
    CHECK(same_bits(got.final_state, want.final_state));
    if (T > 24) {  // not a run of the training chunks by accident (one chunk up to 24 tokens either way)
      const auto other = linstate::forward<Spec>(be, in, linstate::chunked<64>{});
      CHECK(!same_bits(got.o, other.o));
    }
    // a training step: with a saved_states, and in the backward, chunks of 64 above 64 tokens
    tensor<float> o(data.output_shape()), ht(data.state_shape());
    linstate::saved_states saved;
    linstate::forward<Spec>(be, in, {o.view(), ht.view()}, saved);
    const auto train = T <= 64 ? linstate::forward<Spec>(be, in, linstate::recurrent{})
                               : linstate::forward<Spec>(be, in, linstate::chunked<64>{});
    CHECK(same_bits(o, train.o));
    CHECK(same_bits(ht, train.final_state));
    const tensor<float> dO = normal<float>(data.output_shape(), 5);
    auto ga = allocate(in, data.state_shape());
    auto gb = allocate(in, data.state_shape());
    linstate::backward<Spec>(be, in, {.o = dO.view()}, views(ga));
    if (T <= 64) linstate::backward<Spec>(be, in, {.o = dO.view()}, views(gb), linstate::recurrent{});
    else linstate::backward<Spec>(be, in, {.o = dO.view()}, views(gb), linstate::chunked<64>{});
    check_same(ga, gb, name + " backward");
  }
}

TEST_CASE("automatic on the CPU: chunks of 24 for a forward alone, of 64 in a training step, the recurrence below") {
  automatic_runs<gla>("gla", 16);
  automatic_runs<gdn>("gdn", 7);
  automatic_runs<sse_n4k1s>("sse_n4k1s", 48);
}

TEST_CASE("saved_states: states kept by another call are refused") {
  auto cfg = config_for<gla>({.B = 2, .T = 100, .H = 2, .HV = 2, .K = 16, .V = 16});
  const random_inputs data(cfg, 9);
  const auto in = data.view();
  const tensor<float> dO = normal<float>(data.output_shape(), 4);
  const linstate::cotangents<float> d{.o = dO.view()};
  auto r = linstate::forward<gla>(linstate::cpu{}, in, linstate::chunked<32>{});
  linstate::saved_states saved;
  linstate::forward<gla>(linstate::cpu{}, in, {r.o.view(), r.final_state.view()}, saved, linstate::chunked<32>{});
  REQUIRE(!saved.empty());
  const std::size_t bytes = saved.bytes();
  CHECK(bytes >= sizeof(float) * 2 * 2 * 4 * 16 * 16);  // 2 sequences × 2 heads × 4 chunks of 32 × K·V
  auto g = allocate(in, data.state_shape());
  auto refused = [&](auto&& call, const char* contains) {
    try {
      call();
      FAIL("no linstate::error for ", contains);
    } catch (const linstate::error& e) {
      const std::string msg = e.what();
      CHECK_MESSAGE(msg.find("saved_states were kept by another forward call") != std::string::npos, msg);
      CHECK_MESSAGE(msg.find(contains) != std::string::npos, msg);
    }
  };
  refused([&] { linstate::backward<gla>(linstate::cpu{}, in, d, views(g), saved, linstate::chunked<16>{}); }, "chunks of 32");
  refused([&] { linstate::backward<gla_twin>(linstate::cpu{}, in, d, views(g), saved, linstate::chunked<32>{}); },
          "another variant");
  {  // the same values at other addresses
    const random_inputs copy(cfg, 9);
    auto g2 = allocate(copy.view(), data.state_shape());
    refused([&] { linstate::backward<gla>(linstate::cpu{}, copy.view(), d, views(g2), saved, linstate::chunked<32>{}); },
            "other addresses");
  }
  {  // other sequences: the same tensors read as one packed sequence of 200 tokens
    auto pcfg = cfg;
    pcfg.dims.B = 1, pcfg.dims.T = 200, pcfg.cu_seqlens = {0, 120, 200};
    const random_inputs packed(pcfg, 9);
    linstate::inputs<float> pin = packed.view();
    pin.q.data = in.q.data, pin.k.data = in.k.data, pin.v.data = in.v.data, pin.g.data = in.g.data;
    auto g3 = allocate(pin, packed.state_shape());
    const linstate::cotangents<float> pd{.o = {dO.data(), pin.v.shape}};
    refused([&] { linstate::backward<gla>(linstate::cpu{}, pin, pd, views(g3), saved, linstate::chunked<32>{}); }, "other shapes");
  }
  // a second forward of the same shapes reuses the storage; release() frees it and the backward recomputes
  linstate::forward<gla>(linstate::cpu{}, in, {r.o.view(), r.final_state.view()}, saved, linstate::chunked<32>{});
  CHECK(saved.bytes() == bytes);
  auto kept = allocate(in, data.state_shape());
  linstate::backward<gla>(linstate::cpu{}, in, d, views(kept), saved, linstate::chunked<32>{});
  saved.release();
  CHECK(saved.empty());
  CHECK(saved.bytes() == 0);
  auto again = allocate(in, data.state_shape());
  linstate::backward<gla>(linstate::cpu{}, in, d, views(again), saved, linstate::chunked<32>{});
  check_same(again, kept, "after release");
}

}  // namespace svs
}  // namespace
