// SPDX-License-Identifier: Apache-2.0
//! \file tests/variants/test_chunked_backward.cpp
//! \brief The chunk-parallel backward of the gated family (backend/cpu/chunked_backward.hpp, SPEC §2.4)
//! against the checkpointed recurrent backward (its reference), through the public API.
//!
//! Covered: decays gated_key (GLA), scalar and none; SSE with a shared partition, kw = kr, kw > kr and
//! kw < kr; chunk sizes 16, 32, 64; strategies mask and varlen; gate normalisers 16, 1 and 0.1 (the
//! last two take the sub-chunked path for strong decays); T not a multiple of C; packed cu_seqlens
//! with an empty sequence; grouped value heads; initial state and ∂L/∂(final state). Every gradient
//! (q, k, v, g, the shared partition's, router logits, initial state) must agree within
//! `max|a − b| ≤ 1e-5 · max|b|`. A never-selected partition passes ∂L/∂h_T through bit for bit.
#include <doctest/doctest.h>

#include <cstring>
#include <linstate/linstate.hpp>
#include <random>
#include <string>
#include <vector>

#include "random_inputs.hpp"

namespace {
namespace cbw {

namespace dc = linstate::decay;
namespace pt = linstate::partition;
namespace rt = linstate::router;
using linstate::index_t;
using linstate::tensor;
using namespace linstate_test;

struct gla : linstate::spec<> {};
struct retention : gla { using decay = dc::scalar; };
struct linear_attn : gla { using decay = dc::none; };
struct sse_n4k1s : gla {
  using partition = pt::routed<4, pt::shared>;
  using router = rt::top_k<1>;
};
struct sse_n4w2r1s : sse_n4k1s { using router = rt::top_k<2, 1>; };  // kw > kr
struct sse_n4w1r3 : gla {                                            // kw < kr, no shared
  using partition = pt::routed<4>;
  using router = rt::top_k<1, 3>;
};
struct sse_scalar_n4w2r1 : sse_n4w1r3 {
  using decay = dc::scalar;
  using router = rt::top_k<2, 1>;
};
struct sse_none_n4k1s : sse_n4k1s { using decay = dc::none; };

constexpr double tol = 1e-5;

tensor<float> normal(const linstate::shape_t& s, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> nd;
  tensor<float> t(s);
  for (float& x : t.values()) x = nd(gen);
  return t;
}

struct setup {
  sizes dims{.B = 2, .T = 150, .H = 2, .HV = 2, .K = 16, .V = 24};
  float gate_normalizer = 16.f;
  bool initial_state = true, dht = true;
  std::vector<std::int64_t> cu_seqlens{};
};

//! Every gradient of one run.
void check_close(const linstate::gradient_result<float>& a, const linstate::gradient_result<float>& ref,
                 const std::string& what) {
  auto one = [&](const char* name, const tensor<float>& x, const tensor<float>& y) {
    const std::string msg = what + " " + name;
    if (y.empty()) {
      CHECK_MESSAGE(x.empty(), msg);
      return;
    }
    const double e = max_rel_err(x, y);
    CHECK_MESSAGE(e <= tol, msg, " rel err ", e);
  };
  one("dq", a.q, ref.q), one("dk", a.k, ref.k), one("dv", a.v, ref.v), one("dg", a.g, ref.g);
  one("shared.dq", a.shared.q, ref.shared.q), one("shared.dk", a.shared.k, ref.shared.k);
  one("shared.dg", a.shared.g, ref.shared.g), one("dlogits", a.router_logits, ref.router_logits);
  one("dh0", a.initial_state, ref.initial_state);
}

template <class Spec, class Strategy, int C>
void compare_one(const random_inputs& data, const tensor<float>& dO, const tensor<float>& dht, const std::string& what) {
  const auto in = data.view();
  linstate::cotangents<float> d{.o = dO.view()};
  if (!dht.empty()) d.final_state = dht.view();
  const auto ref = linstate::backward<Spec>(linstate::cpu{}, in, d, linstate::recurrent{}, Strategy{});
  const auto got = linstate::backward<Spec>(linstate::cpu{}, in, d, linstate::chunked<C>{}, Strategy{});
  check_close(got, ref, what + " C=" + std::to_string(C));
}

template <class Spec, class Strategy>
void compare(const setup& su, const std::string& name) {
  auto cfg = config_for<Spec>(su.dims);
  cfg.gate_normalizer = su.gate_normalizer;
  cfg.initial_state = su.initial_state;
  cfg.cu_seqlens = su.cu_seqlens;
  const random_inputs data(cfg, 7);
  const tensor<float> dO = normal(data.output_shape(), 11);
  const tensor<float> dht = su.dht ? normal(data.state_shape(), 13) : tensor<float>{};
  const std::string what = name + " gn=" + std::to_string(su.gate_normalizer) +
                           (su.cu_seqlens.empty() ? "" : " packed") + (su.initial_state ? " h0" : "") +
                           (su.dht ? " dht" : "");
  compare_one<Spec, Strategy, 16>(data, dO, dht, what);
  compare_one<Spec, Strategy, 32>(data, dO, dht, what);
  compare_one<Spec, Strategy, 64>(data, dO, dht, what);
}

//! Every configuration of the brief for one variant and strategy.
template <class Spec, class Strategy>
void sweep(const std::string& name) {
  for (float gn : {16.f, 1.f, 0.1f}) {
    setup su;
    su.gate_normalizer = gn;
    compare<Spec, Strategy>(su, name);
  }
  setup bare;  // no initial state, no dht, T = 75
  bare.dims.T = 75, bare.initial_state = false, bare.dht = false;
  compare<Spec, Strategy>(bare, name);
  setup packed;  // packed sequences, one of them empty, lengths 70 / 0 / 15 / 65
  packed.dims.B = 1, packed.dims.T = 150;
  packed.cu_seqlens = {0, 70, 70, 85, 150};
  for (float gn : {16.f, 0.1f}) {
    packed.gate_normalizer = gn;
    compare<Spec, Strategy>(packed, name);
  }
  setup gva;  // grouped value heads, V ≠ K
  gva.dims.H = 1, gva.dims.HV = 3, gva.dims.T = 97, gva.gate_normalizer = 1.f;
  compare<Spec, Strategy>(gva, name);
}

TEST_CASE("chunked backward == recurrent backward: GLA / scalar / none") {
  sweep<gla, linstate::varlen>("gla");
  sweep<retention, linstate::varlen>("scalar");
  sweep<linear_attn, linstate::varlen>("none");
}

TEST_CASE("chunked backward == recurrent backward: SSE, mask and varlen") {
  sweep<sse_n4k1s, linstate::mask>("sse_n4k1s mask");
  sweep<sse_n4k1s, linstate::varlen>("sse_n4k1s varlen");
  sweep<sse_n4w2r1s, linstate::mask>("sse_n4w2r1s mask");
  sweep<sse_n4w2r1s, linstate::varlen>("sse_n4w2r1s varlen");
  sweep<sse_n4w1r3, linstate::mask>("sse_n4w1r3 mask");
  sweep<sse_n4w1r3, linstate::varlen>("sse_n4w1r3 varlen");
  sweep<sse_scalar_n4w2r1, linstate::mask>("sse_scalar_n4w2r1 mask");
  sweep<sse_none_n4k1s, linstate::varlen>("sse_none_n4k1s varlen");
}

TEST_CASE("chunked backward: long stream, several chunks of every kind (K = V = 64)") {
  setup su;
  su.dims = sizes{.B = 1, .T = 700, .H = 1, .HV = 1, .K = 64, .V = 64};
  for (float gn : {16.f, 1.f, 0.1f}) {
    su.gate_normalizer = gn;
    compare<gla, linstate::varlen>(su, "gla long");
    compare<sse_n4w2r1s, linstate::mask>(su, "sse long mask");
  }
}

//! Router logits with a fixed ranking per time segment, so that a partition's chunks are read-only,
//! write-only or untouched for whole chunks: ranks (best first) 0 1 2 3 for t < 50, 1 0 3 2 for
//! 50 ≤ t < 110, 2 3 1 0 after. With kw = 2, kr = 1 partition 0 is written but not read in the middle
//! segment; with kw = 1, kr = 3 it is read but not written there; after t = 110 it is frozen.
template <class Spec, class Strategy>
void compare_segments(float gn, const std::string& name) {
  auto cfg = config_for<Spec>({.B = 1, .T = 170, .H = 1, .HV = 2, .K = 16, .V = 16});
  cfg.initial_state = true;
  cfg.gate_normalizer = gn;
  random_inputs data(cfg, 31);
  const int order[3][4] = {{0, 1, 2, 3}, {1, 0, 3, 2}, {2, 3, 1, 0}};
  for (index_t t = 0; t < 170; ++t) {
    const int seg = t < 50 ? 0 : t < 110 ? 1 : 2;
    for (int r = 0; r < 4; ++r) data.router_logits[t * 4 + order[seg][r]] = 3.f - 1.f * static_cast<float>(r);
  }
  const tensor<float> dO = normal(data.output_shape(), 32);
  const tensor<float> dht = normal(data.state_shape(), 33);
  const std::string what = name + " segments gn=" + std::to_string(gn);
  compare_one<Spec, Strategy, 16>(data, dO, dht, what);
  compare_one<Spec, Strategy, 32>(data, dO, dht, what);
  compare_one<Spec, Strategy, 64>(data, dO, dht, what);
}

TEST_CASE("chunked backward: read-only, write-only and untouched chunks of a routed partition") {
  for (float gn : {16.f, 0.1f}) {
    compare_segments<sse_n4w2r1s, linstate::mask>(gn, "sse_n4w2r1s mask");
    compare_segments<sse_n4w2r1s, linstate::varlen>(gn, "sse_n4w2r1s varlen");
    compare_segments<sse_n4w1r3, linstate::mask>(gn, "sse_n4w1r3 mask");
    compare_segments<sse_n4w1r3, linstate::varlen>(gn, "sse_n4w1r3 varlen");
    compare_segments<sse_scalar_n4w2r1, linstate::mask>(gn, "sse_scalar_n4w2r1 mask");
  }
}

TEST_CASE("chunked backward: a never-selected partition passes dL/dh_T through bit for bit") {
  auto cfg = config_for<sse_n4k1s>({.B = 1, .T = 130, .H = 2, .HV = 2, .K = 16, .V = 16});
  cfg.initial_state = true;
  random_inputs data(cfg, 3);
  const index_t N = 4;
  for (index_t t = 0; t < 130; ++t) data.router_logits[t * N + 2] = -100.f;  // partition 2 never selected
  const tensor<float> dO = normal(data.output_shape(), 5);
  const tensor<float> dht = normal(data.state_shape(), 6);
  const linstate::cotangents<float> d{.o = dO.view(), .final_state = dht.view()};
  const index_t KV = 16 * 16, HV = 2;
  auto frozen_ok = [&](const linstate::gradient_result<float>& g) {
    for (index_t hv = 0; hv < HV; ++hv) {
      const index_t off = ((0 * 5 + (1 + 2)) * HV + hv) * KV;  // [S,P,HV,K,V], P = shared + 4
      if (std::memcmp(g.initial_state.data() + off, dht.data() + off, KV * sizeof(float)) != 0) return false;
    }
    return true;
  };
  CHECK(frozen_ok(linstate::backward<sse_n4k1s>(linstate::cpu{}, data.view(), d, linstate::chunked<32>{}, linstate::mask{})));
  CHECK(frozen_ok(linstate::backward<sse_n4k1s>(linstate::cpu{}, data.view(), d, linstate::chunked<64>{}, linstate::varlen{})));
}

TEST_CASE("chunked backward: bf16 inputs agree with the recurrent backward on the same bf16 inputs") {
  // Both kernels read the same bf16 values and accumulate in fp32; they differ by fp32 rounding and
  // the final rounding of each gradient to bf16 (relative 2^-8), so fla's ratio metric is used.
  using bf16 = Eigen::bfloat16;
  auto cfg = config_for<sse_n4k1s>({.B = 1, .T = 150, .H = 2, .HV = 2, .K = 16, .V = 24});
  cfg.initial_state = true;
  cfg.gate_normalizer = 1.f;
  random_inputs data(cfg, 21);
  data.round_to<bf16>();
  const cast_inputs<bf16> low(data);
  const tensor<float> dO32 = normal(data.output_shape(), 22);
  tensor<bf16> dO(dO32.shape());
  for (index_t i = 0; i < dO.numel(); ++i) dO[i] = static_cast<bf16>(dO32[i]);
  const tensor<float> dht = normal(data.state_shape(), 23);
  const linstate::cotangents<bf16> d{.o = dO.view(), .final_state = dht.view()};
  const auto ref = linstate::backward<sse_n4k1s>(linstate::cpu{}, low.view(), d, linstate::recurrent{}, linstate::mask{});
  const auto got = linstate::backward<sse_n4k1s>(linstate::cpu{}, low.view(), d, linstate::chunked<64>{}, linstate::mask{});
  CHECK(rms_ratio(got.q, ref.q) < 5e-3);
  CHECK(rms_ratio(got.k, ref.k) < 5e-3);
  CHECK(rms_ratio(got.v, ref.v) < 5e-3);
  CHECK(rms_ratio(got.g, ref.g) < 5e-3);
  CHECK(rms_ratio(got.shared.g, ref.shared.g) < 5e-3);
  CHECK(rms_ratio(got.router_logits, ref.router_logits) < 5e-3);
  CHECK(max_rel_err(got.initial_state, ref.initial_state) <= tol);  // fp32 output
}

}  // namespace cbw
}  // namespace
