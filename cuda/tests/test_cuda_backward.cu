// SPDX-License-Identifier: Apache-2.0
//! \file cuda/tests/test_cuda_backward.cu
//! \brief The CUDA backward pass and balance loss against the CPU backend on the same inputs (STYLE
//! habit 5) and against the authors' golden gradients (shared/fixtures):
//!  * every gradient (q, k, v, g, β, shared.*, router logits, initial state) of every decay (none,
//!    scalar, gated_key, gated delta rule with and without l2norm), router (dense; top_k with kw = kr,
//!    kw > kr, kw < kr, gates none / write / read / both, renormalisation, rounding to the input type,
//!    run-time N / kw / kr / gates) and partition (single, routed, routed + shared), with B > 1, grouped
//!    value heads, V ≠ K, packed sequences with empty ones, K = 20 … 512 and V split over blocks, with
//!    and without initial state and ∂L/∂(final state): fp32 `max|a − b| ≤ 1e-5·max|ref|`, bf16 / fp16
//!    fla's ratio `RMS(a − b)/RMS(b) ≤ 0.005` (SPEC §9.3) on the input-typed gradients, 1e-5 on dh0;
//!  * the chunked backward (GLA family: bf16 on tensor cores, fp32 and fp16 in exact fp32; the delta
//!    rule in the WY form) against the CPU recurrence; the recurrent backward's checkpoint interval and
//!    mask / varlen give the same bits; gradients not requested are not required; every requested element is written (the
//!    buffers start as NaN);
//!  * the fixture cases' d*.npy at 1e-5 (README), deta exactly 0 without gates; their o.npy and ht.npy
//!    from the GPU forward (recurrent, chunked<16>, automatic; mask and varlen; in place) at 1e-5;
//!  * balance_loss on the GPU (value in device memory, gradient overwrite / accumulate) as the CPU's;
//!  * family::recurrent_only (the generic backward, kernels/generic.cuh, against the CPU's generic.hpp):
//!    a per-value-channel decay (every gradient, several checkpoint segments, V > 256, SSE with mask and
//!    varlen, kw > kr, packed sequences with empty ones, bf16), decay::gated_key and the gated delta
//!    rule re-declared recurrent_only against the specialised kernels; a router with router_params;
//!  * bad input throws linstate::error before any launch and leaves the outputs untouched.
//!
//! A GPU-only binary: exits 77 (Meson: SKIP) without a usable GPU. CPU passes and the fixture loader
//! are compiled by the C++ compiler (cpu_reference_backward.cpp).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <linstate/cuda.cuh>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "backward_support.hpp"
#include "gpu_support.cuh"

namespace {

using linstate::index_t;
using linstate::tensor;
using namespace linstate_test;
using namespace linstate_cuda_test;

// --- helpers -------------------------------------------------------------------------------------

//! Random upstream gradients: dO [B,T,HV,V] and dht [S,P,HV,K,V], N(0,1).
struct cot_host {
  tensor<float> dO, dht;
};
cot_host make_cot(const random_inputs& data, std::uint64_t seed) {
  std::mt19937_64 gen(seed * 7919 + 17);
  std::normal_distribution<float> nd;
  cot_host c{tensor<float>(data.output_shape()), tensor<float>(data.state_shape())};
  for (float& x : c.dO.values()) x = nd(gen);
  for (float& x : c.dht.values()) x = nd(gen);
  return c;
}

template <class Scalar>
tensor<Scalar> cast_to(const tensor<float>& t) {
  if constexpr (std::is_same_v<Scalar, float>) return t;
  else {
    tensor<Scalar> r(t.shape());
    for (index_t i = 0; i < t.numel(); ++i) r[i] = static_cast<Scalar>(t[i]);
    return r;
  }
}

//! A host gradient for every input `in` gives (as the CPU's convenience overload), zero-filled.
template <class Scalar>
linstate::gradient_result<Scalar> alloc_like(const linstate::inputs<Scalar>& in, const linstate::shape_t& state) {
  auto like = [](const auto& t) {
    using T = std::remove_cvref_t<decltype(*t.data)>;
    return t.empty() ? tensor<T>() : tensor<T>(t.shape);
  };
  linstate::gradient_result<Scalar> r;
  r.q = like(in.q), r.k = like(in.k), r.v = like(in.v), r.g = like(in.g), r.beta = like(in.beta);
  r.shared.q = like(in.shared.q), r.shared.k = like(in.shared.k), r.shared.g = like(in.shared.g);
  r.shared.beta = like(in.shared.beta), r.router_logits = like(in.router_logits);
  r.initial_state = tensor<float>(state);
  return r;
}

template <class Scalar>
linstate::gradients<Scalar> views_of(linstate::gradient_result<Scalar>& r) {
  auto v = [](auto& t) { return t.empty() ? decltype(t.view()){} : t.view(); };
  return {v(r.q), v(r.k), v(r.v), v(r.g), v(r.beta), {v(r.shared.q), v(r.shared.k), v(r.shared.g), v(r.shared.beta)},
          v(r.router_logits), v(r.initial_state)};
}

//! Device gradients shaped like `like` (the empty ones stay empty), filled with NaN bits so that an
//! element the backward forgets to write cannot pass a comparison.
template <class Scalar>
struct device_grads {
  std::vector<linstate::device_buffer<Scalar>> bufs;
  linstate::device_buffer<float> dh0;
  linstate::gradients<Scalar> g;

  explicit device_grads(const linstate::gradient_result<Scalar>& like, unsigned char fill = 0xff) {
    bufs.reserve(10);
    auto make = [&](const tensor<Scalar>& t) -> linstate::tensor_view<Scalar> {
      if (t.empty()) return {};
      bufs.emplace_back(static_cast<std::size_t>(t.numel()));
      if (t.numel()) cuda_ok(cudaMemset(bufs.back().data(), fill, bufs.back().size() * sizeof(Scalar)));
      return bufs.back().view(t.shape());
    };
    g.q = make(like.q), g.k = make(like.k), g.v = make(like.v), g.g = make(like.g), g.beta = make(like.beta);
    g.shared.q = make(like.shared.q), g.shared.k = make(like.shared.k), g.shared.g = make(like.shared.g);
    g.shared.beta = make(like.shared.beta), g.router_logits = make(like.router_logits);
    if (!like.initial_state.empty()) {
      dh0 = linstate::device_buffer<float>(static_cast<std::size_t>(like.initial_state.numel()));
      if (dh0.size()) cuda_ok(cudaMemset(dh0.data(), fill, dh0.size() * sizeof(float)));
      g.initial_state = dh0.view(like.initial_state.shape());
    }
  }
  template <class T>
  static tensor<T> get(const linstate::tensor_view<T>& v) {
    if (v.empty()) return {};
    tensor<T> h(v.shape);
    if (v.numel()) cuda_ok(cudaMemcpy(h.data(), v.data, static_cast<std::size_t>(v.numel()) * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }
  linstate::gradient_result<Scalar> fetch() const {
    linstate::gradient_result<Scalar> r;
    r.q = get(g.q), r.k = get(g.k), r.v = get(g.v), r.g = get(g.g), r.beta = get(g.beta);
    r.shared.q = get(g.shared.q), r.shared.k = get(g.shared.k), r.shared.g = get(g.shared.g);
    r.shared.beta = get(g.shared.beta), r.router_logits = get(g.router_logits), r.initial_state = get(g.initial_state);
    return r;
  }
};

//! linstate::backward on the GPU for host inputs `in` and host cotangents; gradients shaped like `like`.
template <class Spec, class Algorithm, class Strategy, class Scalar>
linstate::gradient_result<Scalar> gpu_backward(const linstate::inputs<Scalar>& in, const tensor<Scalar>& dO,
                                               const tensor<float>* dht, const linstate::gradient_result<Scalar>& like,
                                               const linstate::options& opt) {
  device_inputs<Scalar> din(in);
  auto d_dO = upload(dO);
  linstate::device_buffer<float> d_dht;
  linstate::cotangents<Scalar> dc{d_dO.view(dO.shape()), {}};
  if (dht) {
    d_dht = upload(*dht);
    dc.final_state = d_dht.view(dht->shape());
  }
  device_grads<Scalar> dg(like);
  cudaStream_t stream{};
  cuda_ok(cudaStreamCreate(&stream));
  linstate::backward<Spec>(linstate::cuda{stream}, din.in, dc, dg.g, Algorithm{}, Strategy{}, opt);
  cuda_ok(cudaStreamSynchronize(stream));
  cuda_ok(cudaStreamDestroy(stream));
  cuda_ok(cudaGetLastError());
  return dg.fetch();
}

//! CPU (recurrent, 1 thread) and GPU backward passes on the same inputs and cotangents.
template <class Spec, class Scalar = float, class Algorithm = linstate::recurrent, class Strategy = linstate::varlen>
std::pair<linstate::gradient_result<Scalar>, linstate::gradient_result<Scalar>> both(const random_inputs& data,
                                                                                     std::uint64_t seed,
                                                                                     const linstate::options& opt = {},
                                                                                     bool with_dht = true,
                                                                                     bool with_h0 = true,
                                                                                     linstate::tensor_view<const float> router_params = {}) {
  const host_inputs<Scalar> hin(data);
  linstate::inputs<Scalar> in = hin.view(with_h0);
  in.router_params = router_params;
  const cot_host c = make_cot(data, seed);
  const tensor<Scalar> dO = cast_to<Scalar>(c.dO);
  linstate::gradient_result<Scalar> ref = alloc_like(in, data.state_shape());
  const linstate::cotangents<Scalar> d{dO.view(), with_dht ? c.dht.view() : linstate::tensor_view<const float>{}};
  cpu_backward<Spec>(in, d, views_of(ref), !Strategy::gather, opt);
  auto got = gpu_backward<Spec, Algorithm, Strategy>(in, dO, with_dht ? &c.dht : nullptr, ref, opt);
  return {std::move(ref), std::move(got)};
}

//! Calls f(name, a.x, b.x) for every gradient of two results.
template <class Scalar, class F>
void for_each_grad(const linstate::gradient_result<Scalar>& a, const linstate::gradient_result<Scalar>& b, F&& f) {
  f("q", a.q, b.q), f("k", a.k, b.k), f("v", a.v, b.v), f("g", a.g, b.g), f("beta", a.beta, b.beta);
  f("shared.q", a.shared.q, b.shared.q), f("shared.k", a.shared.k, b.shared.k), f("shared.g", a.shared.g, b.shared.g);
  f("shared.beta", a.shared.beta, b.shared.beta), f("router_logits", a.router_logits, b.router_logits);
  f("initial_state", a.initial_state, b.initial_state);
}

//! Every gradient at SPEC §9.3's ratio ≤ 0.005 against `ref`, dh0 (fp32) too: the tensor-core paths' state
//! gradients enter their products in bf16.
template <class Scalar>
void check_ratios(const linstate::gradient_result<Scalar>& ref, const linstate::gradient_result<Scalar>& got) {
  for_each_grad(ref, got, [](const char* name, const auto& a, const auto& b) {
    CAPTURE(name);
    if (a.empty()) {
      CHECK(b.empty());
      return;
    }
    const double ratio = rms_ratio(b, a);
    CAPTURE(ratio);
    CHECK(ratio <= ratio_tol);
  });
}

//! fp32 gradients within 1e-5·max|ref| (or `tol`); bf16/fp16 ones at ratio ≤ 0.005; dh0 (fp32) within 1e-5 (`tol`).
template <class Scalar>
void check_grads(const linstate::gradient_result<Scalar>& ref, const linstate::gradient_result<Scalar>& got,
                 double tol = fp32_tol) {
  for_each_grad(ref, got, [tol](const char* name, const auto& a, const auto& b) {
    using T = std::remove_cvref_t<decltype(*a.data())>;
    CAPTURE(name);
    if (a.empty()) {
      CHECK(b.empty());
      return;
    }
    if constexpr (std::is_same_v<T, float>) {
      const double err = max_rel_err(b, a);
      CAPTURE(err);
      CHECK(err <= tol);
    } else {
      const double ratio = rms_ratio(b, a);
      CAPTURE(ratio);
      CHECK(ratio <= ratio_tol);
    }
  });
}

template <class Scalar>
void check_same_bits(const linstate::gradient_result<Scalar>& a, const linstate::gradient_result<Scalar>& b) {
  for_each_grad(a, b, [](const char* name, const auto& x, const auto& y) {
    CAPTURE(name);
    CHECK(same_bits(x, y));
  });
}

template <class Spec, class Strategy = linstate::varlen>
void check_fp32(const random_inputs& data, std::uint64_t seed, const linstate::options& opt = {}) {
  const auto [ref, got] = both<Spec, float, linstate::recurrent, Strategy>(data, seed, opt);
  check_grads(ref, got);
}

template <class Spec, class Scalar>
void check_low(const random_inputs& data, std::uint64_t seed) {
  const auto [ref, got] = both<Spec, Scalar>(data, seed);
  check_grads(ref, got);
}

// --- fp32 parity -----------------------------------------------------------------------------------

TEST_CASE("GLA: B > 1, grouped value heads, V != K, initial state and dht, several checkpoint segments") {
  const auto data = make<gla>({.B = 2, .T = 150, .H = 2, .HV = 4, .K = 48, .V = 40}, 101);
  const auto [ref, got] = both<gla>(data, 1);
  check_grads(ref, got);
  SUBCASE("the chunked backward (chunked<16>, automatic, chunked<7> + mask) agrees, and its variants give the same bits") {
    const auto chunked = both<gla, float, linstate::chunked<16>>(data, 1).second;
    check_grads(ref, chunked);
    check_same_bits(chunked, both<gla, float, linstate::automatic>(data, 1).second);
    check_same_bits(chunked, both<gla, float, linstate::chunked<7>, linstate::mask>(data, 1).second);
  }
  SUBCASE("the recurrent backward's checkpoint interval does not change a bit (V > 128: chunked<16> runs it)") {
    const auto wide = make<gla>({.B = 1, .T = 90, .H = 1, .HV = 2, .K = 32, .V = 136}, 141);
    check_same_bits(both<gla>(wide, 3).second, both<gla, float, linstate::chunked<16>>(wide, 3).second);
  }
  SUBCASE("no initial state, no dht") {
    const auto [r2, g2] = both<gla>(data, 2, {}, /*with_dht=*/false, /*with_h0=*/false);
    check_grads(r2, g2);
  }
}

TEST_CASE("decays none and scalar") {
  check_fp32<gla_none>(make<gla_none>({.B = 2, .T = 70, .H = 2, .HV = 2, .K = 32, .V = 64}, 102), 3);
  check_fp32<gla_scalar>(make<gla_scalar>({.B = 2, .T = 70, .H = 1, .HV = 2, .K = 40, .V = 24}, 103), 4);
  check_fp32<sse_none_s>(make<sse_none_s>({.B = 1, .T = 80, .H = 2, .HV = 2, .K = 32, .V = 32}, 104), 5);
  check_fp32<sse_scalar_w2r1>(make<sse_scalar_w2r1>({.B = 2, .T = 50, .H = 1, .HV = 2, .K = 32, .V = 48}, 105), 6);
}

TEST_CASE("SSE-n4k1 + shared: mask and varlen, router and shared-partition gradients") {
  const auto data = make<sse_n4k1s>({.B = 2, .T = 100, .H = 2, .HV = 2, .K = 64, .V = 64}, 106);
  const auto [rm, gm] = both<sse_n4k1s, float, linstate::recurrent, linstate::mask>(data, 7);
  const auto [rv, gv] = both<sse_n4k1s, float, linstate::recurrent, linstate::varlen>(data, 7);
  check_grads(rm, gm);
  check_grads(rv, gv);
  check_same_bits(gm, gv);
  CHECK(max_abs(rm.router_logits) > 0);
}

TEST_CASE("SSE-n8k2 (three V tiles in a block), and V split over several blocks (K = 256, 512)") {
  check_fp32<sse_n8k2>(make<sse_n8k2>({.B = 2, .T = 45, .H = 2, .HV = 2, .K = 128, .V = 96, .N = 8}, 107), 8);
  check_fp32<sse_n4k1s>(make<sse_n4k1s>({.B = 1, .T = 70, .H = 1, .HV = 2, .K = 256, .V = 96}, 108), 9);
  check_fp32<gla>(make<gla>({.B = 1, .T = 20, .H = 1, .HV = 1, .K = 512, .V = 64}, 109), 10);
  check_fp32<sse_gdn>(make<sse_gdn>({.B = 1, .T = 12, .H = 1, .HV = 1, .K = 512, .V = 40}, 110), 11);
}

TEST_CASE("kw != kr") {
  check_fp32<sse_w2r1s>(make<sse_w2r1s>({.B = 2, .T = 70, .H = 1, .HV = 2, .K = 32, .V = 48}, 111), 12);
  check_fp32<sse_w1r3, linstate::mask>(make<sse_w1r3>({.B = 1, .T = 71, .H = 2, .HV = 2, .K = 24, .V = 32}, 112), 13);
}

TEST_CASE("router options: gates none / write + renormalize / read, rounding to the input type") {
  {
    const auto data = make<sse_nogates>({.B = 2, .T = 60, .H = 2, .HV = 2, .K = 32, .V = 32}, 113);
    const auto [ref, got] = both<sse_nogates>(data, 14);
    check_grads(ref, got);
    bool zero = true;  // SPEC §4.6: no gate uses p, no gradient reaches the router, exactly
    for (float x : got.router_logits.values()) zero &= x == 0.f;
    CHECK(zero);
  }
  check_fp32<sse_renorm_w>(make<sse_renorm_w>({.B = 1, .T = 60, .H = 2, .HV = 2, .K = 32, .V = 32, .N = 8}, 114), 15);
  check_fp32<sse_gate_read>(make<sse_gate_read>({.B = 2, .T = 50, .H = 1, .HV = 2, .K = 32, .V = 32}, 115), 16);
  check_fp32<sse_round>(make<sse_round>({.B = 1, .T = 60, .H = 2, .HV = 2, .K = 32, .V = 32}, 116), 17);
}

TEST_CASE("router::dense over routed partitions; run-time N, kw, kr, gates and scale") {
  check_fp32<dense3s>(make<dense3s>({.B = 2, .T = 40, .H = 1, .HV = 1, .K = 32, .V = 32, .N = 3}, 117), 18);
  check_fp32<dense3s_gdn>(make<dense3s_gdn>({.B = 1, .T = 40, .H = 1, .HV = 2, .K = 32, .V = 32, .N = 3}, 118), 19);
  linstate::options opt;
  opt.num_partitions = 6, opt.num_writer = 2, opt.num_reader = 1, opt.scale = 0.3f;
  check_fp32<sse_dyn>(make<sse_dyn>({.B = 2, .T = 45, .H = 2, .HV = 2, .K = 32, .V = 40, .N = 6}, 119, true, {}, opt), 20, opt);
  for (const auto gates : {linstate::router::gate::write, linstate::router::gate::read, linstate::router::gate::none}) {
    linstate::options o2;
    o2.num_partitions = 4, o2.num_writer = 1, o2.num_reader = 2, o2.gates = gates;
    CAPTURE(static_cast<int>(gates));
    check_fp32<sse_dyn_gates>(make<sse_dyn_gates>({.B = 1, .T = 50, .H = 1, .HV = 1, .K = 32, .V = 32}, 120, true, {}, o2),
                              21, o2);
  }
}

TEST_CASE("gated delta rule (l2norm and plain) and SSE over it (C9: the write gate scales beta)") {
  check_fp32<gdn>(make<gdn>({.B = 2, .T = 80, .H = 2, .HV = 2, .K = 64, .V = 128}, 121), 22);
  check_fp32<gdn_plain>(make<gdn_plain>({.B = 2, .T = 80, .H = 1, .HV = 2, .K = 32, .V = 32}, 122), 23);
  check_fp32<sse_gdn>(make<sse_gdn>({.B = 2, .T = 80, .H = 2, .HV = 2, .K = 64, .V = 64}, 123), 24);
  check_fp32<sse_gdn_w2r1>(make<sse_gdn_w2r1>({.B = 1, .T = 80, .H = 1, .HV = 1, .K = 96, .V = 32}, 124), 25);
  check_fp32<sse_gdn_w1r2, linstate::mask>(make<sse_gdn_w1r2>({.B = 1, .T = 70, .H = 2, .HV = 4, .K = 32, .V = 48}, 125), 26);
  check_fp32<sse_gdn_renorm>(make<sse_gdn_renorm>({.B = 2, .T = 50, .H = 1, .HV = 1, .K = 32, .V = 32}, 126), 27);
}

TEST_CASE("packed cu_seqlens with empty sequences") {
  const std::vector<std::int64_t> cu{0, 0, 17, 17, 90, 91, 130, 130};
  check_fp32<sse_n4k1s>(make<sse_n4k1s>({.B = 1, .T = 130, .H = 2, .HV = 2, .K = 32, .V = 48}, 127, true, cu), 28);
  check_fp32<sse_gdn>(make<sse_gdn>({.B = 1, .T = 130, .H = 2, .HV = 2, .K = 32, .V = 32}, 128, true, cu), 29);
  const auto data = make<gla>({.B = 1, .T = 130, .H = 1, .HV = 2, .K = 16, .V = 16}, 129, false, cu);
  const auto [ref, got] = both<gla>(data, 30, {}, /*with_dht=*/true, /*with_h0=*/false);
  check_grads(ref, got);
  // an empty sequence passes dht through to dh0 unchanged
  const cot_host c = make_cot(data, 30);
  CHECK(bit_equal(state_block(got.initial_state, 0, 0), state_block(c.dht, 0, 0)));
  CHECK(bit_equal(state_block(got.initial_state, 6, 0), state_block(c.dht, 6, 0)));
}

TEST_CASE("K not a multiple of 32") {
  check_fp32<gla>(make<gla>({.B = 1, .T = 30, .H = 1, .HV = 1, .K = 20, .V = 8}, 130), 31);
  check_fp32<sse_gdn>(make<sse_gdn>({.B = 2, .T = 30, .H = 1, .HV = 1, .K = 20, .V = 36}, 131), 32);
}

// --- family::recurrent_only: the generic backward (kernels/generic.cuh) against the CPU's generic.hpp --

TEST_CASE("recurrent_only backward: a per-value-channel decay, every gradient, several checkpoint segments") {
  const auto data = make_vgate<vdecay>({.B = 2, .T = 150, .H = 2, .HV = 4, .K = 48, .V = 40}, 401);
  const auto [ref, got] = both<vdecay>(data, 51);
  check_grads(ref, got);
  CHECK(max_abs(ref.g) > 0);
  SUBCASE("automatic runs it recurrently: the same bits") {
    check_same_bits(got, both<vdecay, float, linstate::automatic>(data, 51).second);
  }
  SUBCASE("no initial state, no dht") {
    const auto [r2, g2] = both<vdecay>(data, 52, {}, /*with_dht=*/false, /*with_h0=*/false);
    check_grads(r2, g2);
  }
  SUBCASE("V > 256: the block loops over the columns") {
    check_fp32<vdecay>(make_vgate<vdecay>({.B = 1, .T = 20, .H = 1, .HV = 1, .K = 16, .V = 300}, 402), 53);
  }
}

TEST_CASE("recurrent_only backward: SSE over it (mask and varlen, kw > kr), packed cu_seqlens with empty sequences") {
  const auto data = make_vgate<sse_vdecay>({.B = 2, .T = 100, .H = 2, .HV = 2, .K = 32, .V = 48}, 403);
  const auto [rm, gm] = both<sse_vdecay, float, linstate::recurrent, linstate::mask>(data, 54);
  const auto [rv, gv] = both<sse_vdecay, float, linstate::recurrent, linstate::varlen>(data, 54);
  check_grads(rm, gm);
  check_grads(rv, gv);
  check_same_bits(gm, gv);
  CHECK(max_abs(rm.router_logits) > 0);
  check_fp32<sse_vdecay_w2r1>(make_vgate<sse_vdecay_w2r1>({.B = 2, .T = 70, .H = 1, .HV = 2, .K = 24, .V = 40}, 404), 55);
  const std::vector<std::int64_t> cu{0, 0, 17, 17, 90, 91, 130, 130};
  const auto packed = make_vgate<sse_vdecay>({.B = 1, .T = 130, .H = 2, .HV = 2, .K = 32, .V = 32}, 405, true, cu);
  const auto [rp, gp] = both<sse_vdecay>(packed, 56);
  check_grads(rp, gp);
  const cot_host c = make_cot(packed, 56);  // an empty sequence passes dht through to dh0 unchanged
  CHECK(bit_equal(state_block(gp.initial_state, 0, 0), state_block(c.dht, 0, 0)));
  CHECK(bit_equal(state_block(gp.initial_state, 6, 2), state_block(c.dht, 6, 2)));
}

TEST_CASE("recurrent_only backward: gated_key and the gated delta rule re-declared recurrent_only match the specialised kernels") {
  auto same = [](const auto& a, const auto& b) { check_grads(a, b); };
  {
    const auto data = make<gla>({.B = 2, .T = 90, .H = 2, .HV = 4, .K = 48, .V = 40}, 406);
    const auto [ref, generic] = both<gla_generic>(data, 57);
    check_grads(ref, generic);
    same(both<gla>(data, 57).second, generic);
  }
  {
    const auto data = make<sse_n4k1s>({.B = 2, .T = 80, .H = 2, .HV = 2, .K = 32, .V = 32}, 407);
    const auto [ref, generic] = both<sse_gla_generic, float, linstate::recurrent, linstate::mask>(data, 58);
    check_grads(ref, generic);
    same(both<sse_n4k1s>(data, 58).second, generic);
  }
  {
    const auto data = make<gdn>({.B = 2, .T = 80, .H = 2, .HV = 2, .K = 64, .V = 48}, 408);
    const auto [ref, generic] = both<gdn_generic>(data, 59);
    check_grads(ref, generic);
    same(both<gdn>(data, 59).second, generic);
  }
  {
    const std::vector<std::int64_t> cu{0, 30, 30, 31, 100};
    const auto data = make<sse_gdn>({.B = 1, .T = 100, .H = 2, .HV = 2, .K = 32, .V = 32}, 409, true, cu);
    const auto [ref, generic] = both<sse_gdn_generic>(data, 60);
    check_grads(ref, generic);
    same(both<sse_gdn>(data, 60).second, generic);
  }
}

TEST_CASE("recurrent_only backward: bf16 inputs") {
  check_low<vdecay, Eigen::bfloat16>(make_vgate<vdecay>({.B = 2, .T = 70, .H = 2, .HV = 2, .K = 64, .V = 64}, 410), 61);
}

TEST_CASE("a router with router_params (sigmoid top-1, selection bias): the router kernels read them") {
  const auto data = make<sse_sigmoid>({.B = 2, .T = 60, .H = 2, .HV = 2, .K = 32, .V = 32}, 411);
  const tensor<float> bias = selection_bias(data);
  const auto [ref, got] = both<sse_sigmoid>(data, 62, {}, true, true, bias.view());
  check_grads(ref, got);
  CHECK(max_abs(ref.router_logits) > 0);
  const auto [ref2, got2] = both<sse_sigmoid, float, linstate::chunked<64>>(data, 62, {}, true, true, bias.view());
  check_grads(ref2, got2);
}

// --- reduced precision -----------------------------------------------------------------------------

TEST_CASE("bf16 and fp16 inputs") {
  const sizes d{.B = 2, .T = 70, .H = 2, .HV = 2, .K = 64, .V = 64};
  SUBCASE("bf16") {
    check_low<gla, Eigen::bfloat16>(make<gla>(d, 132), 33);
    check_low<sse_n4k1s, Eigen::bfloat16>(make<sse_n4k1s>(d, 133), 34);
    check_low<sse_round, Eigen::bfloat16>(make<sse_round>(d, 134), 35);
    check_low<sse_gdn, Eigen::bfloat16>(make<sse_gdn>(d, 135), 36);
  }
  SUBCASE("fp16") {
    check_low<gla, Eigen::half>(make<gla>(d, 136), 37);
    check_low<sse_w2r1s, Eigen::half>(make<sse_w2r1s>(d, 138), 38);
    check_low<sse_gdn, Eigen::half>(make<sse_gdn>(d, 137), 39);
  }
}

// --- which gradients ---------------------------------------------------------------------------------

// --- the chunk-parallel backward (kernels/chunked_backward.cuh; bf16, GLA family) ---------------------

//! bf16 chunked<64> backward against the CPU recurrent backward on the same rounded inputs: every
//! gradient at fla's ratio (dh0 too: the state gradients enter tensor-core products in bf16).
//! (also fp16 inputs: Scalar = Eigen::half)
template <class Spec, class Scalar = Eigen::bfloat16>
void check_chunked_bf16(const random_inputs& data, std::uint64_t seed, bool with_dht = true, bool with_h0 = true) {
  const auto [ref, got] = both<Spec, Scalar, linstate::chunked<64>>(data, seed, {}, with_dht, with_h0);
  check_ratios(ref, got);
}

TEST_CASE("chunked backward (bf16): GLA family, several chunks, grouped value heads, h0 and dht") {
  check_chunked_bf16<gla>(make<gla>({.B = 2, .T = 150, .H = 2, .HV = 4, .K = 64, .V = 64}, 201), 61);
  check_chunked_bf16<gla>(make<gla>({.B = 1, .T = 200, .H = 2, .HV = 2, .K = 128, .V = 128}, 202), 62, false, false);
  check_chunked_bf16<gla>(make<gla>({.B = 1, .T = 130, .H = 1, .HV = 1, .K = 48, .V = 40}, 203), 63);
  check_chunked_bf16<gla_none>(make<gla_none>({.B = 2, .T = 140, .H = 2, .HV = 2, .K = 64, .V = 64}, 204), 64);
  check_chunked_bf16<gla_scalar>(make<gla_scalar>({.B = 2, .T = 140, .H = 2, .HV = 2, .K = 64, .V = 64}, 205), 65);
}

TEST_CASE("chunked backward (bf16): SSE routed streams, router gradients, packed sequences") {
  check_chunked_bf16<sse_n4k1s>(make<sse_n4k1s>({.B = 2, .T = 260, .H = 2, .HV = 2, .K = 64, .V = 64}, 206), 66);
  check_chunked_bf16<sse_n8k2>(make<sse_n8k2>({.B = 1, .T = 300, .H = 2, .HV = 2, .K = 64, .V = 64, .N = 8}, 207), 67);
  check_chunked_bf16<sse_w2r1s>(make<sse_w2r1s>({.B = 1, .T = 200, .H = 1, .HV = 2, .K = 64, .V = 64}, 208), 68);
  check_chunked_bf16<dense3s>(make<dense3s>({.B = 1, .T = 150, .H = 1, .HV = 1, .K = 64, .V = 64, .N = 3}, 209), 69);
  // kw = 1, kr = 3, no shared partition: dk, dg and dv stored directly, dq through the slot sum
  check_chunked_bf16<sse_w1r3>(make<sse_w1r3>({.B = 2, .T = 150, .H = 2, .HV = 2, .K = 64, .V = 64}, 211), 72);
  const std::vector<std::int64_t> cu{0, 70, 70, 71, 200, 330};
  check_chunked_bf16<sse_n4k1s>(make<sse_n4k1s>({.B = 1, .T = 330, .H = 2, .HV = 2, .K = 64, .V = 64}, 210, true, cu), 70);
}

//! One bf16 backward call's data on the host and the device: the inputs, random cotangents (make_cot),
//! gradient buffers shaped like the inputs (like) and the cotangents' device views (dc).
struct bf16_call {
  using bf = Eigen::bfloat16;
  host_inputs<bf> hin;
  linstate::inputs<bf> in;
  cot_host c;
  tensor<bf> dO;
  linstate::gradient_result<bf> like;
  device_inputs<bf> din;
  linstate::device_buffer<bf> d_dO;
  linstate::device_buffer<float> d_dht;
  linstate::cotangents<bf> dc;
  bf16_call(const random_inputs& data, std::uint64_t seed)
      : hin(data), in(hin.view(true)), c(make_cot(data, seed)), dO(cast_to<bf>(c.dO)), like(alloc_like(in, data.state_shape())),
        din(in), d_dO(upload(dO)), d_dht(upload(c.dht)), dc{d_dO.view(dO.shape()), d_dht.view(c.dht.shape())} {}
  bf16_call(const bf16_call&) = delete;  // in, din and dc point into the members
  bf16_call& operator=(const bf16_call&) = delete;
};

// chunk_chain_kernel (v and dO 16-byte aligned: the recomputation's U_c and hand-off, and W_c with the
// adjoint's hand-off, in one pass each) against the kernels it replaces (v and dO one element past an
// aligned address: the intra kernel's U_c, chunk_scan_kernel, chunk_kstate_kernel<Adj>,
// chunk_rscan_kernel). The forward's states are the same bits (test_cuda); W_c sums its 64 products in
// another order, so D_c may round to a neighbouring bf16: every gradient within a ratio of 2e-3 of the
// other path's (a wrong operand, scale or direction gives ratios near 1). The chain path is checked
// against the CPU reference by the chunked backward (bf16) cases above.
template <class Spec>
void check_chain_backward(const random_inputs& data, std::uint64_t seed) {
  using bf = Eigen::bfloat16;
  const bf16_call call(data, seed);
  linstate::device_buffer<bf> v1, o1;
  linstate::inputs<bf> in1 = call.din.in;
  in1.v = misaligned_copy(call.din.in.v, v1);
  linstate::cotangents<bf> dc1 = call.dc;
  dc1.o = misaligned_copy(call.dc.o, o1);
  device_grads<bf> g0(call.like, 0), g1(call.like, 0);
  linstate::backward<Spec>(linstate::cuda{}, call.din.in, call.dc, g0.g, linstate::chunked<64>{}, linstate::varlen{});
  linstate::backward<Spec>(linstate::cuda{}, in1, dc1, g1.g, linstate::chunked<64>{}, linstate::varlen{});
  cuda_ok(cudaDeviceSynchronize());
  const auto r0 = g0.fetch(), r1 = g1.fetch();
  for_each_grad(r1, r0, [](const char* name, const auto& a, const auto& b) {
    CAPTURE(name);
    if (a.empty()) return;
    const double ratio = rms_ratio(b, a);
    CAPTURE(ratio);
    CHECK(ratio <= 2e-3);
  });
}

TEST_CASE("chunked backward (bf16): chunk_chain_kernel against the scans it replaces (GLA, SSE routed streams, packed sequences)") {
  check_chain_backward<gla>(make<gla>({.B = 2, .T = 200, .H = 2, .HV = 2, .K = 128, .V = 128}, 221), 81);
  check_chain_backward<sse_n4k1s>(make<sse_n4k1s>({.B = 2, .T = 260, .H = 2, .HV = 2, .K = 64, .V = 64}, 222), 82);
  const std::vector<std::int64_t> cu{0, 70, 70, 71, 200, 330};
  check_chain_backward<sse_n4k1s>(make<sse_n4k1s>({.B = 1, .T = 330, .H = 2, .HV = 2, .K = 96, .V = 80}, 223, true, cu), 83);
}

// The direct stores of one-slot gradients (backward.cuh: diagonal_single_slot_gradients) skip the slot
// sum, which is what gives a token with non-finite router logits its NaN rows; nan_rows_kernel writes them
// instead. Every gradient of SSE-n4k1s (q, k, g and shared.* stored directly, v summed) and of kw = 1,
// kr = 3 without a shared partition (k, g and v stored directly, q summed): the token's rows NaN, every other entry finite —
// once on buffers filled with zeros (so the NaN rows were written) and once with NaN bytes (so every
// other row was written).
template <class Spec>
void check_nonfinite_rows(random_inputs data, index_t bad, std::uint64_t seed) {
  using bf = Eigen::bfloat16;
  const index_t N = data.router_logits.shape()[2];
  data.router_logits[bad * N + 1] = std::numeric_limits<float>::quiet_NaN();
  const bf16_call call(data, seed);
  const auto& [hin, in, c, dO, like, din, d_dO, d_dht, dc] = call;
  for (const unsigned char fill : {0x00, 0xff}) {
    CAPTURE(int(fill));
    device_grads<bf> g(like, fill);
    linstate::backward<Spec>(linstate::cuda{}, din.in, dc, g.g, linstate::chunked<64>{}, linstate::varlen{});
    cuda_ok(cudaDeviceSynchronize());
    const auto r = g.fetch();
    const std::pair<const char*, const tensor<bf>*> outs[] = {{"q", &r.q}, {"k", &r.k}, {"v", &r.v}, {"g", &r.g},
                                                              {"shared.q", &r.shared.q}, {"shared.k", &r.shared.k},
                                                              {"shared.g", &r.shared.g}};
    for (const auto& [name, t] : outs) {
      if (t->empty()) continue;
      CAPTURE(name);
      const index_t row = t->numel() / (data.cfg.dims.B * data.cfg.dims.T);
      index_t wrong_nan = 0, wrong_finite = 0;
      for (index_t i = 0; i < t->numel(); ++i) {
        const bool nan = std::isnan(static_cast<float>((*t)[i]));
        if (i / row == bad) wrong_finite += !nan;
        else wrong_nan += !std::isfinite(static_cast<float>((*t)[i]));
      }
      CHECK(wrong_finite == 0);
      CHECK(wrong_nan == 0);
    }
  }
}

TEST_CASE("chunked backward (bf16): a token with non-finite router logits gets NaN rows in every gradient (direct stores too)") {
  check_nonfinite_rows<sse_n4k1s>(make<sse_n4k1s>({.B = 1, .T = 150, .H = 2, .HV = 2, .K = 64, .V = 64}, 311), 77, 81);
  check_nonfinite_rows<sse_w1r3>(make<sse_w1r3>({.B = 2, .T = 100, .H = 2, .HV = 2, .K = 64, .V = 64}, 312), 130, 82);
}

// --- saved_states: what a bf16 chunked forward keeps for its backward -------------------------------

//! A bf16 chunked<64> forward that keeps its operands in a linstate::saved_states (Q̃, K̃, A, Γ, e^{γ}, H_c)
//! and the backward that reads them, against the forward and backward without the object (which recompute
//! them): o, the final state and every gradient the same bits; a second step of the same shapes reuses the
//! storage and gives the same bits again; and the gradients within SPEC §9.3's ratio of the CPU's fp32
//! recurrent backward on the same bf16 inputs (so a kept buffer the backward read wrongly cannot pass).
template <class Spec, class Strategy = linstate::varlen>
void check_saved(const random_inputs& data, std::uint64_t seed) {
  using bf = Eigen::bfloat16;
  const bf16_call call(data, seed);
  const auto& [hin, in, c, dO, like, din, d_dO, d_dht, dc] = call;
  const linstate::shape_t os = data.output_shape(), ss = data.state_shape();
  const auto n_o = static_cast<std::size_t>(os.numel()), n_s = static_cast<std::size_t>(ss.numel());
  linstate::device_buffer<bf> o_rec(n_o), o_kept(n_o);
  linstate::device_buffer<float> h_rec(n_s), h_kept(n_s);
  const linstate::cuda be{};
  const linstate::chunked<64> alg{};
  linstate::forward<Spec>(be, din.in, linstate::outputs<bf>{o_rec.view(os), h_rec.view(ss)}, alg, Strategy{});
  device_grads<bf> g_rec(like);
  linstate::backward<Spec>(be, din.in, dc, g_rec.g, alg, Strategy{});
  linstate::saved_states saved;
  linstate::forward<Spec>(be, din.in, linstate::outputs<bf>{o_kept.view(os), h_kept.view(ss)}, saved, alg, Strategy{});
  REQUIRE_FALSE(saved.empty());
  CHECK(saved.device_bytes() > 0);
  CHECK(saved.bytes() == saved.device_bytes());
  device_grads<bf> g_kept(like);
  linstate::backward<Spec>(be, din.in, dc, g_kept.g, saved, alg, Strategy{});
  cuda_ok(cudaDeviceSynchronize());
  CHECK(same_bits(download(o_rec, os), download(o_kept, os)));
  CHECK(same_bits(download(h_rec, ss), download(h_kept, ss)));
  const auto rec = g_rec.fetch(), kept = g_kept.fetch();
  check_same_bits(rec, kept);
  // a second training step of the same shapes: the storage is reused, the bits repeat
  const std::size_t bytes = saved.device_bytes();
  const void* storage = linstate::detail::saved_states_access::device_data(saved);
  linstate::forward<Spec>(be, din.in, linstate::outputs<bf>{o_kept.view(os), h_kept.view(ss)}, saved, alg, Strategy{});
  device_grads<bf> g_again(like);
  linstate::backward<Spec>(be, din.in, dc, g_again.g, saved, alg, Strategy{});
  cuda_ok(cudaDeviceSynchronize());
  CHECK(saved.device_bytes() == bytes);
  CHECK(linstate::detail::saved_states_access::device_data(saved) == storage);
  check_same_bits(rec, g_again.fetch());
  // and right: the CPU's fp32 recurrent backward on the same bf16 inputs
  linstate::gradient_result<bf> ref = alloc_like(in, data.state_shape());
  cpu_backward<Spec>(in, linstate::cotangents<bf>{dO.view(), c.dht.view()}, views_of(ref), !Strategy::gather, {});
  check_ratios(ref, kept);
  saved.release();
  CHECK(saved.empty());
  CHECK(saved.device_bytes() == 0);
}

TEST_CASE("saved_states (bf16): the kept operands give the recomputing backward's bits — GLA family, SSE, packed sequences") {
  check_saved<gla>(make<gla>({.B = 2, .T = 150, .H = 2, .HV = 4, .K = 64, .V = 64}, 301), 71);
  check_saved<gla>(make<gla>({.B = 1, .T = 200, .H = 2, .HV = 2, .K = 128, .V = 128}, 302), 72);
  check_saved<gla>(make<gla>({.B = 1, .T = 130, .H = 1, .HV = 1, .K = 48, .V = 40}, 303), 73);
  check_saved<gla_none>(make<gla_none>({.B = 2, .T = 140, .H = 2, .HV = 2, .K = 64, .V = 64}, 304), 74);
  check_saved<gla_scalar>(make<gla_scalar>({.B = 2, .T = 140, .H = 2, .HV = 2, .K = 64, .V = 64}, 305), 75);
  const auto d4 = make<sse_n4k1s>({.B = 2, .T = 260, .H = 2, .HV = 2, .K = 64, .V = 64}, 306);
  check_saved<sse_n4k1s>(d4, 76);
  check_saved<sse_n4k1s, linstate::mask>(d4, 77);
  check_saved<sse_n8k2>(make<sse_n8k2>({.B = 1, .T = 300, .H = 2, .HV = 2, .K = 64, .V = 64, .N = 8}, 307), 78);
  const std::vector<std::int64_t> cu{0, 70, 70, 71, 200, 330};
  check_saved<sse_n4k1s>(make<sse_n4k1s>({.B = 1, .T = 330, .H = 2, .HV = 2, .K = 128, .V = 128}, 308, true, cu), 79);
}

struct gla_other : gla {};  // GLA's inputs, another variant (saved_states' check)

TEST_CASE("saved_states: calls that keep nothing, and an object kept by another call, throw or recompute") {
  const auto data = make<gla>({.B = 1, .T = 100, .H = 2, .HV = 2, .K = 64, .V = 64}, 309);
  const linstate::cuda be{};
  const linstate::chunked<64> alg{};
  const cot_host c = make_cot(data, 80);
  const linstate::shape_t os = data.output_shape(), ss = data.state_shape();
  SUBCASE("fp32 inputs (the exact backward recomputes in fp32): nothing kept, the backward recomputes") {
    device_inputs<float> din(data.view());
    auto d_dO = upload(c.dO);
    const linstate::cotangents<float> dc{d_dO.view(os), {}};
    linstate::device_buffer<float> o(static_cast<std::size_t>(os.numel()));
    linstate::saved_states saved;
    linstate::forward<gla>(be, din.in, linstate::outputs<float>{o.view(os), {}}, saved, alg);
    CHECK(saved.empty());
    const auto like = alloc_like(din.in, ss);
    device_grads<float> a(like), b(like);
    linstate::backward<gla>(be, din.in, dc, a.g, saved, alg);
    linstate::backward<gla>(be, din.in, dc, b.g, alg);
    cuda_ok(cudaDeviceSynchronize());
    check_same_bits(a.fetch(), b.fetch());
  }
  using bf = Eigen::bfloat16;
  const host_inputs<bf> hin(data);
  device_inputs<bf> din(hin.view(true));
  const tensor<bf> dO = cast_to<bf>(c.dO);
  auto d_dO = upload(dO);
  const linstate::cotangents<bf> dc{d_dO.view(os), {}};
  linstate::device_buffer<bf> o(static_cast<std::size_t>(os.numel()));
  const auto like = alloc_like(din.in, ss);
  device_grads<bf> dg(like);
  linstate::saved_states saved;
  linstate::forward<gla>(be, din.in, linstate::outputs<bf>{o.view(os), {}}, saved, alg);
  REQUIRE_FALSE(saved.empty());
  SUBCASE("the same values at other addresses") {
    device_inputs<bf> other(hin.view(true));
    CHECK_THROWS_WITH_AS(linstate::backward<gla>(be, other.in, dc, dg.g, saved, alg), doctest::Contains("kept by another forward call"),
                         linstate::error);
  }
  SUBCASE("another variant, another algorithm") {
    CHECK_THROWS_WITH_AS(linstate::backward<gla_other>(be, din.in, dc, dg.g, saved, alg), doctest::Contains("another variant"),
                         linstate::error);
    CHECK_THROWS_WITH_AS(linstate::backward<gla>(be, din.in, dc, dg.g, saved, linstate::recurrent{}), doctest::Contains("chunks of 64"),
                         linstate::error);
  }
  SUBCASE("an object the CPU filled") {
    linstate::saved_states cpu_saved;
    const linstate::inputs<bf> hv = hin.view(true);
    tensor<bf> ho(os);
    linstate::forward<gla>(linstate::cpu{}, hv, linstate::outputs<bf>{ho.view(), {}}, cpu_saved, alg);
    if (!cpu_saved.empty())
      CHECK_THROWS_WITH_AS(linstate::backward<gla>(be, din.in, dc, dg.g, cpu_saved, alg), doctest::Contains("on the CPU"),
                           linstate::error);
    linstate::gradient_result<bf> hg = alloc_like(hv, ss);  // the GPU-kept object on the CPU
    CHECK_THROWS_WITH_AS(linstate::backward<gla>(linstate::cpu{}, hv, linstate::cotangents<bf>{dO.view(), {}}, views_of(hg), saved, alg),
                         doctest::Contains("on the GPU"), linstate::error);
  }
  cuda_ok(cudaDeviceSynchronize());
  cuda_ok(cudaGetLastError());
}

// --- the chunk-parallel backward in exact fp32 (chunk_grad_exact_kernel: fp32 and fp16 inputs) -------

//! fp32 chunked<64> backward against the CPU recurrent backward: every gradient at 1e-5·max|ref|.
template <class Spec, class Strategy = linstate::varlen>
void check_chunked_exact(const random_inputs& data, std::uint64_t seed, bool with_dht = true, bool with_h0 = true) {
  const auto [ref, got] = both<Spec, float, linstate::chunked<64>, Strategy>(data, seed, {}, with_dht, with_h0);
  check_grads(ref, got);
}

TEST_CASE("chunked backward (fp32, exact): GLA family, SSE routed streams, packed sequences") {
  check_chunked_exact<gla>(make<gla>({.B = 2, .T = 150, .H = 2, .HV = 4, .K = 64, .V = 64}, 231), 91);
  check_chunked_exact<gla>(make<gla>({.B = 1, .T = 200, .H = 2, .HV = 2, .K = 128, .V = 128}, 232), 92, false, false);
  check_chunked_exact<gla>(make<gla>({.B = 1, .T = 130, .H = 1, .HV = 1, .K = 48, .V = 40}, 233), 93);
  check_chunked_exact<gla_none>(make<gla_none>({.B = 2, .T = 140, .H = 2, .HV = 2, .K = 64, .V = 64}, 234), 94);
  check_chunked_exact<gla_scalar>(make<gla_scalar>({.B = 2, .T = 140, .H = 2, .HV = 2, .K = 64, .V = 64}, 235), 95);
  const auto d4 = make<sse_n4k1s>({.B = 2, .T = 260, .H = 2, .HV = 2, .K = 64, .V = 64}, 236);
  check_chunked_exact<sse_n4k1s>(d4, 96);
  check_chunked_exact<sse_n4k1s, linstate::mask>(d4, 96);
  check_chunked_exact<sse_n8k2>(make<sse_n8k2>({.B = 1, .T = 300, .H = 2, .HV = 2, .K = 64, .V = 96, .N = 8}, 237), 97);
  check_chunked_exact<sse_w2r1s>(make<sse_w2r1s>({.B = 1, .T = 200, .H = 1, .HV = 2, .K = 32, .V = 48}, 238), 98);
  check_chunked_exact<sse_w1r3, linstate::mask>(make<sse_w1r3>({.B = 1, .T = 170, .H = 2, .HV = 2, .K = 24, .V = 32}, 239), 99);
  check_chunked_exact<dense3s>(make<dense3s>({.B = 1, .T = 150, .H = 1, .HV = 1, .K = 64, .V = 64, .N = 3}, 240), 100);
  const std::vector<std::int64_t> cu{0, 70, 70, 71, 200, 330};
  check_chunked_exact<sse_n4k1s>(make<sse_n4k1s>({.B = 1, .T = 330, .H = 2, .HV = 2, .K = 32, .V = 48}, 241, true, cu), 101);
}

TEST_CASE("chunked backward: strong decays (g = 10·logsigmoid) stay exact, fp32") {
  linstate_test::config cg = config_for<gla>({.B = 1, .T = 140, .H = 1, .HV = 2, .K = 64, .V = 64});
  cg.gate_normalizer = 0.1f;
  check_chunked_exact<gla>(random_inputs(cg, 242), 102);
  linstate_test::config cs = config_for<gla_scalar>({.B = 1, .T = 140, .H = 1, .HV = 2, .K = 64, .V = 64});
  cs.gate_normalizer = 0.1f;
  check_chunked_exact<gla_scalar>(random_inputs(cs, 243), 103);
}

// Very negative or infinite gates (issue 10): the chunked backward sums the floored gates
// max(g, −104) (linstate::detail::chunked_log_decay_floor) and gives ∂L/∂g = 0 exactly below the floor.
constexpr float extreme_gates[] = {-1e4f, -1e30f, -std::numeric_limits<float>::infinity()};
//! Their tolerance: after a floored gate a chunk's Γ sits near −104, where fp32 values are 2^−17 ≈
//! 7.6e-6 apart, and the GPU's chunked backward forms its exponentials from those fp32 values (the
//! CPU's chunked backward measured ≤ 6.6e-6 on such cases).
constexpr double extreme_tol = 5e-5;

//! ∂L/∂g is exactly 0 wherever the gate is below the floor (and there are such gates).
void check_floored_zero(const tensor<float>& g, const tensor<float>& dg) {
  if (g.empty() || dg.empty()) return;
  index_t floored = 0, nonzero = 0;
  for (index_t i = 0; i < g.numel(); ++i)
    if (g[i] < linstate::detail::chunked_log_decay_floor) ++floored, nonzero += dg[i] != 0.f;
  CHECK(floored > 0);
  CHECK(nonzero == 0);
}

//! `data` with gate G at steps 0, 37, 70 and 149 (every key row, or every other one), then the fp32
//! chunked<64> backward against the CPU recurrence (every gradient finite and within extreme_tol),
//! floored dg = 0.
template <class Spec, class Strategy = linstate::varlen>
void check_extreme(random_inputs data, float G, bool even_rows, std::uint64_t seed) {
  set_gates(data, G, {0, 37, 70, 149}, even_rows);
  const auto [ref, got] = both<Spec, float, linstate::chunked<64>, Strategy>(data, seed);
  check_grads(ref, got, extreme_tol);
  check_floored_zero(data.g, got.g);
  check_floored_zero(data.shared_g, got.shared.g);
}

TEST_CASE("chunked backward: extreme gates (-1e4, -1e30, -inf): the recurrence's gradients, no NaN, dg = 0 where floored") {
  for (float G : extreme_gates) {
    CAPTURE(G);
    const sizes d{.B = 2, .T = 150, .H = 2, .HV = 4, .K = 64, .V = 64};
    check_extreme<gla>(make<gla>(d, 320), G, false, 111);
    check_extreme<gla>(make<gla>(d, 321), G, true, 112);
    check_extreme<gla_scalar>(make<gla_scalar>(d, 322), G, false, 113);
    check_extreme<gdn>(make<gdn>({.B = 2, .T = 150, .H = 2, .HV = 4, .K = 64, .V = 40}, 323), G, false, 114);
    const sizes ds{.B = 2, .T = 260, .H = 2, .HV = 2, .K = 64, .V = 64};
    check_extreme<sse_n4k1s>(make<sse_n4k1s>(ds, 324), G, true, 115);
    check_extreme<sse_n4k1s, linstate::mask>(make<sse_n4k1s>(ds, 324), G, true, 115);
    check_extreme<sse_gdn>(make<sse_gdn>(ds, 325), G, false, 116);
    check_extreme<sse_gdn, linstate::mask>(make<sse_gdn>(ds, 325), G, false, 116);
    SUBCASE("bf16 (tensor cores)") {
      random_inputs b = make<gla>({.B = 1, .T = 200, .H = 2, .HV = 2, .K = 128, .V = 128}, 326);
      set_gates(b, G, {0, 37, 70, 149}, true);
      check_chunked_bf16<gla>(b, 117);
    }
  }
}

// An empty batch (issue 10): zero-sized gradients, ∂L/∂h0 = ∂L/∂h_T (zeros without it), written
// although nothing else is (the buffers start as NaN), for every algorithm.
template <class Spec, class Strategy = linstate::varlen>
void check_empty_backward(const char* name) {
  struct shape_case {
    const char* what;
    index_t B, T;
    std::vector<std::int64_t> cu;
  };
  const shape_case cases[] = {{"T = 0", 2, 0, {}}, {"B = 0", 0, 5, {}}, {"B = T = 0", 0, 0, {}}, {"cu_seqlens {0, 0, 0}", 1, 0, {0, 0, 0}}};
  for (const shape_case& c : cases)
    for (bool h0 : {true, false})
      for (bool dht : {true, false}) {
        CAPTURE(name);
        CAPTURE(c.what);
        CAPTURE(h0);
        CAPTURE(dht);
        const random_inputs data = make<Spec>({.B = c.B, .T = c.T, .H = 2, .HV = 4, .K = 16, .V = 8}, 330, h0, c.cu);
        const auto [ref, got] = both<Spec, float, linstate::recurrent, Strategy>(data, 118, {}, dht, h0);
        check_grads(ref, got);
        check_grads(ref, both<Spec, float, linstate::automatic, Strategy>(data, 118, {}, dht, h0).second);
        if constexpr (!linstate::is_family_of<typename Spec::decay, linstate::family::recurrent_only>)
          check_grads(ref, both<Spec, float, linstate::chunked<64>, Strategy>(data, 118, {}, dht, h0).second);
        if (dht) CHECK(max_abs_diff(got.initial_state, make_cot(data, 118).dht) == 0.0);
        else CHECK(max_abs(got.initial_state) == 0.0);
      }
}

TEST_CASE("empty batch backward (T = 0, B = 0, empty packed sequences): every algorithm and family") {
  check_empty_backward<gla>("gla");
  check_empty_backward<gla_scalar>("scalar");
  check_empty_backward<gdn>("gdn");
  check_empty_backward<gla_generic>("recurrent_only");
  check_empty_backward<sse_n4k1s, linstate::varlen>("sse varlen");
  check_empty_backward<sse_n4k1s, linstate::mask>("sse mask");
  check_empty_backward<sse_gdn, linstate::mask>("sse-gdn mask");
}

TEST_CASE("chunked backward (fp16): exact fp32 arithmetic on the fp16 inputs") {
  using f16 = Eigen::half;
  check_chunked_bf16<gla, f16>(make<gla>({.B = 1, .T = 200, .H = 2, .HV = 2, .K = 128, .V = 128}, 244), 104);
  check_chunked_bf16<sse_n4k1s, f16>(make<sse_n4k1s>({.B = 2, .T = 260, .H = 2, .HV = 2, .K = 64, .V = 64}, 245), 105);
  check_chunked_bf16<sse_w2r1s, f16>(make<sse_w2r1s>({.B = 1, .T = 200, .H = 1, .HV = 2, .K = 64, .V = 64}, 246), 106, false);
}

// --- the chunk-parallel delta-rule backward (kernels/chunked_delta.cuh; exact fp32, any input type) ---

TEST_CASE("chunked backward: gated delta rule in the WY form, every gradient against the CPU recurrence") {
  check_chunked_exact<gdn>(make<gdn>({.B = 2, .T = 150, .H = 2, .HV = 4, .K = 64, .V = 40}, 211), 71);
  check_chunked_exact<gdn>(make<gdn>({.B = 1, .T = 200, .H = 1, .HV = 1, .K = 128, .V = 128}, 212), 72, false, false);
  check_chunked_exact<gdn_plain>(make<gdn_plain>({.B = 2, .T = 130, .H = 1, .HV = 2, .K = 32, .V = 32}, 213), 73);
  const auto d4 = make<sse_gdn>({.B = 2, .T = 260, .H = 2, .HV = 2, .K = 64, .V = 64}, 214);
  check_chunked_exact<sse_gdn>(d4, 74);
  check_chunked_exact<sse_gdn, linstate::mask>(d4, 74);
  check_chunked_exact<sse_gdn_w2r1>(make<sse_gdn_w2r1>({.B = 1, .T = 200, .H = 1, .HV = 1, .K = 96, .V = 32}, 215), 75);
  check_chunked_exact<sse_gdn_w1r2, linstate::mask>(make<sse_gdn_w1r2>({.B = 1, .T = 150, .H = 2, .HV = 4, .K = 32, .V = 48}, 216), 76);
  check_chunked_exact<sse_gdn_renorm>(make<sse_gdn_renorm>({.B = 2, .T = 150, .H = 1, .HV = 1, .K = 32, .V = 32}, 217), 77);
  check_chunked_exact<dense3s_gdn>(make<dense3s_gdn>({.B = 1, .T = 150, .H = 1, .HV = 2, .K = 32, .V = 32, .N = 3}, 218), 78);
  const std::vector<std::int64_t> cu{0, 70, 70, 71, 200, 330};
  check_chunked_exact<sse_gdn>(make<sse_gdn>({.B = 1, .T = 330, .H = 2, .HV = 2, .K = 32, .V = 48}, 219, true, cu), 79);
  SUBCASE("bf16 and fp16 inputs") {
    // bf16 with V = 40 (not a multiple of 16): the exact kernels, whose dh0 is fp32-exact; bf16 shapes
    // the tensor-core passes take are check_delta_tc_backward's (their dh0 at the ratio tolerance)
    const sizes d{.B = 1, .T = 200, .H = 2, .HV = 2, .K = 64, .V = 64};
    const auto [rb, gb] = both<sse_gdn, Eigen::bfloat16, linstate::chunked<64>>(make<sse_gdn>({.B = 1, .T = 200, .H = 2, .HV = 2, .K = 64, .V = 40}, 220), 80);
    check_grads(rb, gb);
    const auto [rh, gh] = both<sse_gdn, Eigen::half, linstate::chunked<64>>(make<sse_gdn>(d, 221), 81);
    check_grads(rh, gh);
  }
}

//! bf16 inputs on the delta-rule backward's tensor-core products (the prep's and three of the gradient
//! kernel's in split-bf16 form, kernels/tile_mma.cuh tile_mma_x3; the other nine and the two sequential
//! passes on plain bf16 operands):
//! every gradient against the CPU's fp32 pass on the same bf16 inputs at fla's ratio 0.005 (SPEC §9.3),
//! dh0 (fp32, but formed by the reverse scan's bf16 products) also by its largest error, ≤ 0.005·max|ref|
//! (1e-5 while the scan was split-bf16, before session 21); the ratios are printed.
template <class Spec, class Strategy = linstate::varlen>
void check_delta_tc_backward(const std::string& what, const random_inputs& data, std::uint64_t seed, bool with_dht = true,
                             bool with_h0 = true) {
  const auto [ref, got] = both<Spec, Eigen::bfloat16, linstate::chunked<64>, Strategy>(data, seed, {}, with_dht, with_h0);
  std::string line = what + ": ratios";
  for_each_grad(ref, got, [&](const char* name, const auto& a, const auto& b) {
    CAPTURE(what);
    CAPTURE(name);
    if (a.empty()) {
      CHECK(b.empty());
      return;
    }
    const double ratio = rms_ratio(b, a);
    line += std::string(" ") + name + " " + std::to_string(ratio);
    CAPTURE(ratio);
    CHECK(ratio <= ratio_tol);
  });
  if (!ref.initial_state.empty()) {
    const double e = max_rel_err(got.initial_state, ref.initial_state);
    line += "; dh0 max err " + std::to_string(e);
    CAPTURE(what);
    CAPTURE(e);
    CHECK(e <= ratio_tol);
  }
  MESSAGE(line);
}

TEST_CASE("chunked backward: gated delta rule, bf16 inputs on tensor cores, every gradient against the exact path (ratio 0.005)") {
  check_delta_tc_backward<gdn>("gdn K=V=128 B=2", make<gdn>({.B = 2, .T = 300, .H = 2, .HV = 2, .K = 128, .V = 128}, 250), 82);
  check_delta_tc_backward<gdn>("gdn K=V=128 T=1024", make<gdn>({.B = 1, .T = 1024, .H = 1, .HV = 1, .K = 128, .V = 128}, 251), 83);
  // a training length: the plain-bf16 products' errors must not grow past the tolerance along the stream
  check_delta_tc_backward<gdn>("gdn K=V=128 T=4096 H=2", make<gdn>({.B = 1, .T = 4096, .H = 2, .HV = 2, .K = 128, .V = 128}, 258), 90);
  check_delta_tc_backward<gdn>("gdn grouped heads K=32 V=64, no h0, no dht",
                               make<gdn>({.B = 2, .T = 150, .H = 1, .HV = 4, .K = 32, .V = 64}, 252, false), 84, false, false);
  check_delta_tc_backward<gdn_plain>("gdn plain K=64 V=48", make<gdn_plain>({.B = 2, .T = 130, .H = 1, .HV = 2, .K = 64, .V = 48}, 253), 85);
  check_delta_tc_backward<gdn>("gdn V=40 (fp32 fallback of the V-wide products)",
                               make<gdn>({.B = 1, .T = 130, .H = 1, .HV = 2, .K = 64, .V = 40}, 254), 86);
  // K = 48: an odd number of 16-column k-steps (the scans' K-long products take them in pairs where they can)
  check_delta_tc_backward<gdn>("gdn K=48 V=32", make<gdn>({.B = 1, .T = 200, .H = 1, .HV = 2, .K = 48, .V = 32}, 271), 96);
  const auto d5 = make<sse_gdn>({.B = 2, .T = 260, .H = 2, .HV = 2, .K = 64, .V = 64}, 255);
  check_delta_tc_backward<sse_gdn, linstate::varlen>("sse_gdn varlen", d5, 87);
  check_delta_tc_backward<sse_gdn, linstate::mask>("sse_gdn mask", d5, 87);
  check_delta_tc_backward<sse_gdn_w2r1>("sse_gdn kw=2 kr=1 K=96",
                                        make<sse_gdn_w2r1>({.B = 1, .T = 200, .H = 1, .HV = 1, .K = 96, .V = 32}, 256), 88);
  const std::vector<std::int64_t> cu{0, 70, 70, 71, 200, 330};
  check_delta_tc_backward<sse_gdn>("sse_gdn packed cu_seqlens K=32",
                                   make<sse_gdn>({.B = 1, .T = 330, .H = 2, .HV = 2, .K = 32, .V = 48}, 257, true, cu), 89);
}

//! Router logits [B,T,N] that make routed partition N − 1 every token's second choice and never its first
//! (the first cycles over the others, one logit apart): under top_k<2, 1> every token writes it and none
//! reads it, so each of its chunks has no reading record — the chunks where the delta rule's gradient
//! kernels skip dA = dO Vnᵀ and dQg = dO Sᵀ (delta_grad_products_kernel's second role and
//! delta_grad_kernel's any_r; a chunk that took them from another chunk's workspace, or left them
//! unformed where one is read, would move q and k's gradients).
inline void second_choice_never_read(random_inputs& data) {
  const index_t N = data.cfg.dims.N, rows = data.router_logits.numel() / N;
  REQUIRE(N >= 3);
  float* x = data.router_logits.data();
  for (index_t t = 0; t < rows; ++t) {
    const index_t first = t % (N - 1);
    for (index_t n = 0; n < N - 1; ++n) x[t * N + n] = n == first ? 3.f : -static_cast<float>(n);
    x[t * N + N - 1] = 2.f;
  }
}

TEST_CASE("chunked backward: gated delta rule, a routed partition written by every token and read by none (chunks without a reading record)") {
  auto d = make<sse_gdn_w2r1>({.B = 1, .T = 200, .H = 2, .HV = 2, .K = 64, .V = 64}, 259);
  second_choice_never_read(d);
  check_delta_tc_backward<sse_gdn_w2r1>("sse_gdn kw=2 kr=1, partition 3 never read", d, 91);
  check_chunked_exact<sse_gdn_w2r1>(d, 92);
}

//! Sets one of the library's path switches (cuda_detail::delta_*_enabled) to false for the calls made
//! while it lives, and back to true when it goes, also when a failed REQUIRE leaves the scope (so that a
//! failure does not send the cases after it down the other path).
struct switched_off {
  bool& flag;
  explicit switched_off(bool& f) : flag(f) { flag = false; }
  ~switched_off() { flag = true; }
  switched_off(const switched_off&) = delete;
  switched_off& operator=(const switched_off&) = delete;
};

//! The delta rule's backward with its two sequential passes side by side (the states on the side
//! stream, chunked_delta.cuh: delta_passes_side_by_side) and one after the other: the same bits.
template <class Spec, class Scalar>
void check_side_by_side(const random_inputs& data, std::uint64_t seed) {
  namespace cd = linstate::cuda_detail;
  const auto beside = both<Spec, Scalar, linstate::chunked<64>>(data, seed).second;
  const auto serial = [&] {
    const switched_off one_stream(cd::delta_side_by_side_enabled);
    return both<Spec, Scalar, linstate::chunked<64>>(data, seed).second;
  }();
  check_same_bits(beside, serial);
}

TEST_CASE("chunked backward: the delta rule's two sequential passes side by side give one stream's bits") {
  check_side_by_side<gdn, Eigen::bfloat16>(make<gdn>({.B = 2, .T = 300, .H = 2, .HV = 2, .K = 128, .V = 128}, 258), 90);  // tensor cores
  check_side_by_side<gdn, float>(make<gdn>({.B = 2, .T = 150, .H = 2, .HV = 4, .K = 64, .V = 40}, 259), 91);            // exact
  const std::vector<std::int64_t> cu{0, 70, 70, 71, 200, 330};
  check_side_by_side<sse_gdn, Eigen::bfloat16>(make<sse_gdn>({.B = 1, .T = 330, .H = 2, .HV = 2, .K = 32, .V = 48}, 260, true, cu), 92);
}

//! Kernel 5b for bf16 inputs at two blocks per SM (delta_grad_bf16_kernel, K % 16 == 0) against the
//! one-block kernel it replaces (delta_grad_kernel, delta_grad_two_blocks_enabled = false): their
//! products are the same bits, their row dot products and block-wide sums add in another order (fp32
//! rounding, then the one rounding to bf16 of the stored gradients: a few elements one bf16 unit apart),
//! so every gradient within an rms ratio of 1e-3 of the other's, five times inside SPEC §9.3's 0.005; a
//! wrong fragment, band or buffer moves some gradient by far more. The two-block kernel's gradients are
//! also checked against the CPU's fp32 pass at 0.005 here and in check_delta_tc_backward.
template <class Spec, class Strategy = linstate::varlen>
void check_grad_two_blocks(const std::string& what, const random_inputs& data, std::uint64_t seed) {
  namespace cd = linstate::cuda_detail;
  REQUIRE(cd::delta_grad_two_blocks_enabled);
  const auto [ref, two] = both<Spec, Eigen::bfloat16, linstate::chunked<64>, Strategy>(data, seed);
  const auto one = [&] {
    const switched_off one_block(cd::delta_grad_two_blocks_enabled);
    return both<Spec, Eigen::bfloat16, linstate::chunked<64>, Strategy>(data, seed).second;
  }();
  std::string line = what + ": two blocks ÷ one block, ratios";
  int compared = 0;
  for_each_grad(one, two, [&](const char* name, const auto& a, const auto& b) {
    CAPTURE(what);
    CAPTURE(name);
    REQUIRE(a.numel() == b.numel());
    if (a.empty()) return;
    const double ratio = rms_ratio(b, a);
    line += std::string(" ") + name + " " + std::to_string(ratio);
    CAPTURE(ratio);
    CHECK(ratio <= 1e-3);
    ++compared;
  });
  CHECK(compared >= 5);  // q, k, v, beta, g at least
  for_each_grad(ref, two, [&](const char* name, const auto& a, const auto& b) {
    CAPTURE(what);
    CAPTURE(name);
    if (!a.empty()) CHECK(rms_ratio(b, a) <= ratio_tol);
  });
  MESSAGE(line);
}

TEST_CASE("chunked backward: the delta rule's bf16 gradient kernel at two blocks per SM against the one-block kernel") {
  check_grad_two_blocks<gdn>("gdn K=V=128", make<gdn>({.B = 2, .T = 300, .H = 2, .HV = 2, .K = 128, .V = 128}, 264), 96);
  check_grad_two_blocks<gdn_plain>("gdn plain K=64 V=48", make<gdn_plain>({.B = 2, .T = 130, .H = 1, .HV = 2, .K = 64, .V = 48}, 265), 97);
  const auto d = make<sse_gdn>({.B = 2, .T = 260, .H = 2, .HV = 2, .K = 96, .V = 64}, 266);
  check_grad_two_blocks<sse_gdn, linstate::varlen>("sse_gdn varlen K=96", d, 98);
  check_grad_two_blocks<sse_gdn, linstate::mask>("sse_gdn mask K=96", d, 98);
  auto n = make<sse_gdn_w2r1>({.B = 1, .T = 200, .H = 2, .HV = 2, .K = 32, .V = 64}, 267);
  second_choice_never_read(n);  // chunks without a reading record (no dO phase)
  check_grad_two_blocks<sse_gdn_w2r1>("sse_gdn kw=2 kr=1 K=32, partition 3 never read", n, 99);
}

//! The bf16 backward's two sequential passes (delta_tc_hstate_kernel, delta_tc_rscan_kernel) at 8 and at
//! 16 warps per block: the same accumulators summed in the same order, so the same bits; and both
//! within the tolerance of the exact path (the case above runs the default, 8). At K = 128 the 8-warp
//! kernels are the ones with K a compile-time constant (FK), the 16-warp ones read it at run time.
template <class Spec>
void check_bscan_warps(const random_inputs& data, std::uint64_t seed) {
  namespace cd = linstate::cuda_detail;
  REQUIRE(cd::delta_tc_bscan_warps == 8);
  const auto w8 = both<Spec, Eigen::bfloat16, linstate::chunked<64>>(data, seed).second;
  cd::delta_tc_bscan_warps = 16;
  const auto w16 = both<Spec, Eigen::bfloat16, linstate::chunked<64>>(data, seed).second;
  cd::delta_tc_bscan_warps = 8;
  check_same_bits(w8, w16);
}

TEST_CASE("chunked backward: the delta rule's bf16 backward scans at 8 and 16 warps per block give the same bits") {
  check_bscan_warps<gdn>(make<gdn>({.B = 2, .T = 300, .H = 2, .HV = 2, .K = 128, .V = 128}, 261), 93);
  check_bscan_warps<gdn>(make<gdn>({.B = 2, .T = 150, .H = 1, .HV = 4, .K = 32, .V = 64}, 262, false), 94);
  const std::vector<std::int64_t> cu{0, 70, 70, 71, 200, 330};
  check_bscan_warps<sse_gdn>(make<sse_gdn>({.B = 1, .T = 330, .H = 2, .HV = 2, .K = 32, .V = 48}, 263, true, cu), 95);
}

TEST_CASE("only the requested gradients are written; none requested is a no-op") {
  const auto data = make<sse_gdn>({.B = 1, .T = 40, .H = 1, .HV = 2, .K = 32, .V = 32}, 140);
  const auto in = data.view();
  const cot_host c = make_cot(data, 41);
  const auto full = alloc_like(in, data.state_shape());
  const auto all = gpu_backward<sse_gdn, linstate::recurrent, linstate::varlen>(in, c.dO, &c.dht, full, {});
  SUBCASE("q, shared.beta and dh0 only") {
    linstate::gradient_result<float> some;
    some.q = tensor<float>(data.q.shape()), some.shared.beta = tensor<float>(data.shared_beta.shape());
    some.initial_state = tensor<float>(data.state_shape());
    const auto got = gpu_backward<sse_gdn, linstate::recurrent, linstate::varlen>(in, c.dO, &c.dht, some, {});
    CHECK(same_bits(got.q, all.q));
    CHECK(same_bits(got.shared.beta, all.shared.beta));
    CHECK(same_bits(got.initial_state, all.initial_state));
    CHECK(got.k.empty());
  }
  SUBCASE("router logits only") {
    linstate::gradient_result<float> some;
    some.router_logits = tensor<float>(data.router_logits.shape());
    const auto got = gpu_backward<sse_gdn, linstate::recurrent, linstate::varlen>(in, c.dO, &c.dht, some, {});
    CHECK(same_bits(got.router_logits, all.router_logits));
  }
  SUBCASE("nothing") {
    const linstate::gradient_result<float> none;
    CHECK_NOTHROW(gpu_backward<sse_gdn, linstate::recurrent, linstate::varlen>(in, c.dO, &c.dht, none, {}));
  }
}

//! The chunked backward with every gradient, then with subsets of them: each subset's gradients are the
//! same bits, the others stay untouched (empty). Covers the direct stores of a one-slot gradient
//! (backward.cuh's single_slot_gradients) beside the partials of the others (HV ≠ H: q and k summed over
//! heads), and dg without dq and dk (chunk_bwd_dqkg_kernel forms it from its own rows).
template <class Spec, class Scalar>
void check_chunked_subsets(const random_inputs& data, std::uint64_t seed) {
  const host_inputs<Scalar> hin(data);
  const linstate::inputs<Scalar> in = hin.view(true);
  const cot_host c = make_cot(data, seed);
  const tensor<Scalar> dO = cast_to<Scalar>(c.dO);
  const auto full = alloc_like(in, data.state_shape());
  const auto all = gpu_backward<Spec, linstate::chunked<64>, linstate::varlen>(in, dO, &c.dht, full, {});
  auto sub = [&](bool q, bool k, bool v, bool g, bool beta) {
    linstate::gradient_result<Scalar> some;
    if (q) some.q = tensor<Scalar>(full.q.shape());
    if (k) some.k = tensor<Scalar>(full.k.shape());
    if (v) some.v = tensor<Scalar>(full.v.shape());
    if (g && !full.g.empty()) some.g = tensor<Scalar>(full.g.shape());
    if (beta && !full.beta.empty()) some.beta = tensor<Scalar>(full.beta.shape());
    const auto got = gpu_backward<Spec, linstate::chunked<64>, linstate::varlen>(in, dO, &c.dht, some, {});
    CHECK(q == !got.q.empty());
    CHECK(k == !got.k.empty());
    CHECK(v == !got.v.empty());
    if (q) CHECK(same_bits(got.q, all.q));
    if (k) CHECK(same_bits(got.k, all.k));
    if (v) CHECK(same_bits(got.v, all.v));
    if (!some.g.empty()) CHECK(same_bits(got.g, all.g));
    if (!some.beta.empty()) CHECK(same_bits(got.beta, all.beta));
    CHECK(got.initial_state.empty());
  };
  sub(false, false, false, true, false);  // dg alone
  sub(true, false, true, false, false);   // dq and dv
  sub(false, true, false, true, true);    // dk, dg and dβ
}

TEST_CASE("chunked backward: subsets of the gradients give the full call's bits (direct stores of one-slot gradients)") {
  check_chunked_subsets<gla, Eigen::bfloat16>(make<gla>({.B = 2, .T = 150, .H = 2, .HV = 2, .K = 64, .V = 64}, 301), 91);
  check_chunked_subsets<gla, Eigen::bfloat16>(make<gla>({.B = 1, .T = 140, .H = 1, .HV = 2, .K = 48, .V = 40}, 302), 92);
  check_chunked_subsets<gla_scalar, Eigen::bfloat16>(make<gla_scalar>({.B = 1, .T = 140, .H = 2, .HV = 2, .K = 64, .V = 64}, 303), 93);
  check_chunked_subsets<gla, float>(make<gla>({.B = 1, .T = 140, .H = 2, .HV = 2, .K = 64, .V = 64}, 304), 94);
  check_chunked_subsets<gdn, Eigen::bfloat16>(make<gdn>({.B = 2, .T = 150, .H = 2, .HV = 2, .K = 64, .V = 64}, 305), 95);
  check_chunked_subsets<gdn, float>(make<gdn>({.B = 1, .T = 150, .H = 1, .HV = 2, .K = 32, .V = 64}, 306), 96);
  check_chunked_subsets<sse_n4k1s, Eigen::bfloat16>(make<sse_n4k1s>({.B = 1, .T = 150, .H = 2, .HV = 2, .K = 64, .V = 64}, 307), 97);
}

// --- golden fixtures -------------------------------------------------------------------------------

//! max|a − b| / max|b| over equal-length flat arrays (the fixtures README's criterion).
template <class T>
double flat_rel_err(const tensor<T>& a, const tensor<float>& b) {
  if (a.numel() != b.numel()) return std::numeric_limits<double>::infinity();
  double err = 0, ref = 0;
  for (index_t i = 0; i < a.numel(); ++i) {
    const double d = std::abs(static_cast<double>(a[i]) - b[i]);
    if (!std::isfinite(d)) return std::numeric_limits<double>::infinity();
    err = std::max(err, d), ref = std::max(ref, std::abs(static_cast<double>(b[i])));
  }
  return ref > 0 ? err / ref : err;
}

template <class Spec, class Algorithm, class Strategy>
void check_fixture(const fixture_data& c) {
  INFO("case " << c.name << ", " << Algorithm::name << ", " << Strategy::name);
  const linstate::inputs<float> in = c.inputs();
  const auto like = alloc_like(in, c.state_shape);
  const auto g = gpu_backward<Spec, Algorithm, Strategy>(in, c.at("do"), nullptr, like, c.opt);
  std::vector<std::pair<std::string, const tensor<float>*>> m;
  if (c.sse)
    m = {{"dq2", &g.q}, {"dk2", &g.k}, {"dg2", &g.g}, {"dq1", &g.shared.q}, {"dk1", &g.shared.k},
         {"dg1", &g.shared.g}, {"dv", &g.v}, {"deta", &g.router_logits}};
  else
    m = {{"dq", &g.q}, {"dk", &g.k}, {"dv", &g.v}, {"dg", &g.g}};
  if (c.initial_state) m.emplace_back("dh0", &g.initial_state);
  int stored = 0;
  for (const auto& [stem, a] : c.arrays) stored += stem.size() > 1 && stem[0] == 'd' && stem != "do";
  CHECK(stored == static_cast<int>(m.size()));
  for (const auto& [name, t] : m) {
    CAPTURE(name);
    REQUIRE(c.has(name));
    const double err = flat_rel_err(*t, c.at(name));
    CAPTURE(err);
    CHECK(err <= fp32_tol);
  }
  if (c.sse && !c.emulq && !c.emulk) {
    bool zero = true;
    for (float x : g.router_logits.values()) zero &= x == 0.f;
    CHECK(zero);
  }
}

TEST_CASE("golden fixtures: every stored gradient (recurrent and chunked<16>; mask and varlen)") {
  std::string where;
  const std::vector<fixture_data> cases = load_fixture_cases(where);
  INFO("fixtures: " << where << " (set LINSTATE_FIXTURES)");
  REQUIRE_MESSAGE(!cases.empty(), "no fixture case found");
  for (const fixture_data& c : cases) {
    if (c.sse) {
      check_fixture<sse_dyn_gates, linstate::recurrent, linstate::mask>(c);
      check_fixture<sse_dyn_gates, linstate::recurrent, linstate::varlen>(c);
      check_fixture<sse_dyn_gates, linstate::chunked<16>, linstate::varlen>(c);
    } else {
      check_fixture<gla, linstate::recurrent, linstate::varlen>(c);
      check_fixture<gla, linstate::chunked<16>, linstate::varlen>(c);
    }
  }
}

//! The forward on the GPU against the fixture's o and ht (the element order of [S,P,H,K,V]), and the
//! decode API: forward_in_place from a copy of h0 (or zeros) must land on ht too.
template <class Spec, class Algorithm, class Strategy>
void check_fixture_forward(const fixture_data& c) {
  INFO("case " << c.name << ", " << Algorithm::name << ", " << Strategy::name);
  const linstate::inputs<float> in = c.inputs();
  device_inputs<float> din(in);
  const tensor<float>& o_ref = c.at("o");
  const tensor<float>& ht = c.at("ht");
  linstate::device_buffer<float> o(static_cast<std::size_t>(o_ref.numel()));
  linstate::device_buffer<float> st(static_cast<std::size_t>(c.state_shape.numel()));
  linstate::forward<Spec>(linstate::cuda{}, din.in, linstate::outputs<float>{o.view(o_ref.shape()), st.view(c.state_shape)},
                          Algorithm{}, Strategy{}, c.opt);
  cuda_ok(cudaDeviceSynchronize());
  const double err_o = flat_rel_err(download(o, o_ref.shape()), o_ref);
  const double err_ht = flat_rel_err(download(st, c.state_shape), ht);
  CAPTURE(err_o);
  CAPTURE(err_ht);
  CHECK(err_o <= fp32_tol);
  CHECK(err_ht <= fp32_tol);
  // in place (the decode API, over the whole sequence)
  linstate::inputs<float> ip = din.in;
  ip.initial_state = {};
  tensor<float> h(c.state_shape);
  if (c.initial_state) std::copy(c.at("h0").values().begin(), c.at("h0").values().end(), h.values().begin());
  auto d_h = upload(h);
  linstate::device_buffer<float> o2(static_cast<std::size_t>(o_ref.numel()));
  linstate::forward_in_place<Spec>(linstate::cuda{}, ip, d_h.view(c.state_shape), o2.view(o_ref.shape()), Algorithm{},
                                   Strategy{}, c.opt);
  cuda_ok(cudaDeviceSynchronize());
  CHECK(flat_rel_err(download(d_h, c.state_shape), ht) <= fp32_tol);
  CHECK(flat_rel_err(download(o2, o_ref.shape()), o_ref) <= fp32_tol);
}

TEST_CASE("golden fixtures: forward outputs and final states (recurrent, chunked<16>, automatic; mask and varlen; in place)") {
  std::string where;
  const std::vector<fixture_data> cases = load_fixture_cases(where);
  INFO("fixtures: " << where << " (set LINSTATE_FIXTURES)");
  REQUIRE_MESSAGE(!cases.empty(), "no fixture case found");
  for (const fixture_data& c : cases) {
    REQUIRE(c.has("o"));
    REQUIRE(c.has("ht"));
    if (c.sse) {
      check_fixture_forward<sse_dyn_gates, linstate::recurrent, linstate::mask>(c);
      check_fixture_forward<sse_dyn_gates, linstate::recurrent, linstate::varlen>(c);
      check_fixture_forward<sse_dyn_gates, linstate::chunked<16>, linstate::mask>(c);
      check_fixture_forward<sse_dyn_gates, linstate::chunked<16>, linstate::varlen>(c);
      check_fixture_forward<sse_dyn_gates, linstate::automatic, linstate::varlen>(c);
    } else {
      check_fixture_forward<gla, linstate::recurrent, linstate::varlen>(c);
      check_fixture_forward<gla, linstate::chunked<16>, linstate::varlen>(c);
      check_fixture_forward<gla, linstate::automatic, linstate::varlen>(c);
    }
  }
}

// --- balance loss ------------------------------------------------------------------------------------

template <class Spec, class Scalar = float>
void check_balance(const random_inputs& data, const linstate::options& opt = {}) {
  const host_inputs<Scalar> hin(data);
  const linstate::tensor_view<const Scalar> logits = hin.view().router_logits;
  // a prior gradient to accumulate onto
  tensor<Scalar> prior(logits.shape);
  std::mt19937_64 gen(5);
  std::normal_distribution<float> nd;
  for (index_t i = 0; i < prior.numel(); ++i) prior[i] = static_cast<Scalar>(nd(gen));

  linstate::device_buffer<Scalar> d_logits(static_cast<std::size_t>(logits.numel()));
  d_logits.upload(logits.data);
  const auto dl = linstate::tensor_view<const Scalar>(d_logits.view(logits.shape));
  linstate::device_buffer<float> d_loss(2);
  cudaStream_t stream{};
  cuda_ok(cudaStreamCreate(&stream));
  for (const auto mode : {linstate::gradient_write::overwrite, linstate::gradient_write::accumulate}) {
    CAPTURE(static_cast<int>(mode));
    tensor<Scalar> ref_g = prior;
    const float ref = cpu_balance_loss<Spec>(logits, ref_g.view(), 0.5f, mode, opt);
    auto d_g = upload(prior);
    linstate::balance_loss<Spec>(linstate::cuda{stream}, dl, d_loss.data(), d_g.view(logits.shape), 0.5f, mode, opt);
    linstate::balance_loss<Spec>(linstate::cuda{stream}, dl, d_loss.data() + 1, opt);  // the value alone
    cuda_ok(cudaStreamSynchronize(stream));
    float loss[2];
    d_loss.download(loss);
    const tensor<Scalar> got = download(d_g, logits.shape);
    CHECK(std::abs(loss[0] - ref) <= 1e-6f * std::abs(ref));
    CHECK(loss[1] == loss[0]);
    if constexpr (std::is_same_v<Scalar, float>) {
      // dlogit = p ⊙ (dp − ⟨p, dp⟩) cancels: with balanced routing dp_n ≈ ⟨p, dp⟩, and the device's
      // expf (softmax) differs from the host's by an ulp, which the cancellation magnifies. So the
      // error is measured against the terms before the cancellation, coefficient · max_n dp_n
      // (dp_n = (N/kw) F_n / M, p ≤ 1), as well as against max|ref|.
      const auto pb = linstate::detail::make_balance_problem<Spec>("test", logits, opt);
      linstate::detail::routing rt;
      linstate::detail::compute_routing(pb, logits, rt);
      const index_t M = pb.tokens(), N = pb.N;
      double dp_max = 0;
      for (index_t n = 0; n < N; ++n) {
        double F = 0;
        for (index_t t = 0; t < M; ++t) F += (rt.flags[static_cast<std::size_t>(t * N + n)] & linstate::detail::route_write) ? 1 : 0;
        dp_max = std::max(dp_max, static_cast<double>(N) / pb.kw * (F / static_cast<double>(M)) / static_cast<double>(M));
      }
      const double err = max_abs_diff(got, ref_g), scale = max_abs(ref_g) + 0.5 * dp_max;
      CAPTURE(err);
      CAPTURE(scale);
      CHECK(err <= fp32_tol * scale);
    } else {
      CHECK(rms_ratio(got, ref_g) <= ratio_tol);
    }
  }
  cuda_ok(cudaStreamDestroy(stream));
}

TEST_CASE("balance loss on the GPU: the CPU's value and gradient (overwrite and accumulate)") {
  check_balance<sse_n4k1s>(make<sse_n4k1s>({.B = 2, .T = 1500, .H = 1, .HV = 1, .K = 4, .V = 4}, 150));
  check_balance<sse_n8k2>(make<sse_n8k2>({.B = 3, .T = 50, .H = 1, .HV = 1, .K = 4, .V = 4, .N = 8}, 151));
  linstate::options opt;
  opt.num_partitions = 6, opt.num_writer = 2;
  check_balance<sse_dyn>(make<sse_dyn>({.B = 1, .T = 777, .H = 1, .HV = 1, .K = 4, .V = 4, .N = 6}, 152, false, {}, opt), opt);
  check_balance<sse_round, Eigen::bfloat16>(make<sse_round>({.B = 2, .T = 300, .H = 1, .HV = 1, .K = 4, .V = 4}, 153));
  SUBCASE("no token: loss 0; a non-finite logit: NaN") {
    linstate::device_buffer<float> d_loss(1);
    linstate::device_buffer<float> empty(4);
    linstate::balance_loss<sse_n4k1s>(linstate::cuda{}, empty.view({1, 0, 4}), d_loss.data());
    CHECK(download(d_loss, {1})[0] == 0.f);
    random_inputs data = make<sse_n4k1s>({.B = 1, .T = 10, .H = 1, .HV = 1, .K = 4, .V = 4}, 154);
    data.router_logits[13] = std::numeric_limits<float>::infinity();
    auto d = upload(data.router_logits);
    linstate::balance_loss<sse_n4k1s>(linstate::cuda{}, d.view(data.router_logits.shape()), d_loss.data());
    CHECK(std::isnan(download(d_loss, {1})[0]));
  }
}

// --- timing (not a check; run with --no-skip -tc='*timing*') ------------------------------------------

template <class Spec>
void time_one(const char* name, const sizes& d) {
  using bf16 = Eigen::bfloat16;
  const random_inputs data = make<Spec>(d, 170, /*h0=*/false);
  const host_inputs<bf16> hin(data);
  const auto in = hin.view(false);
  device_inputs<bf16> din(in);
  const tensor<bf16> dO = cast_to<bf16>(make_cot(data, 71).dO);
  auto d_dO = upload(dO);
  linstate::device_buffer<bf16> o(static_cast<std::size_t>(data.output_shape().numel()));
  const auto like = alloc_like(in, data.state_shape());
  device_grads<bf16> dg(like);
  dg.g.initial_state = {};
  const linstate::cotangents<bf16> dc{d_dO.view(dO.shape()), {}};
  const linstate::cuda be{};
  cudaEvent_t e0, e1, e2;
  cuda_ok(cudaEventCreate(&e0)), cuda_ok(cudaEventCreate(&e1)), cuda_ok(cudaEventCreate(&e2));
  float fwd = 1e30f, bwd = 1e30f;
  for (int rep = 0; rep < 3; ++rep) {
    cuda_ok(cudaEventRecord(e0));
    linstate::forward<Spec>(be, din.in, linstate::outputs<bf16>{o.view(data.output_shape()), {}}, linstate::recurrent{});
    cuda_ok(cudaEventRecord(e1));
    linstate::backward<Spec>(be, din.in, dc, dg.g, linstate::recurrent{});
    cuda_ok(cudaEventRecord(e2));
    cuda_ok(cudaEventSynchronize(e2));
    float a = 0, b = 0;
    cuda_ok(cudaEventElapsedTime(&a, e0, e1)), cuda_ok(cudaEventElapsedTime(&b, e1, e2));
    fwd = std::min(fwd, a), bwd = std::min(bwd, b);
  }
  const double tokens = static_cast<double>(d.B * d.T);
  std::printf("timing %-10s B=%lld T=%lld H=HV=%lld K=V=%lld bf16: forward %.2f ms, backward %.2f ms (%.0f tokens/s)\n", name,
              static_cast<long long>(d.B), static_cast<long long>(d.T), static_cast<long long>(d.H),
              static_cast<long long>(d.K), fwd, bwd, tokens / (bwd * 1e-3));
  cuda_ok(cudaEventDestroy(e0)), cuda_ok(cudaEventDestroy(e1)), cuda_ok(cudaEventDestroy(e2));
}

TEST_CASE("timing of the recurrent backward (prints, checks nothing)" * doctest::skip()) {
  const sizes d{.B = 4, .T = 2048, .H = 8, .HV = 8, .K = 128, .V = 128};
  time_one<gla>("GLA", d);
  time_one<sse_n4k1s>("SSE-n4k1s", d);
  time_one<sse_gdn>("SSE-GDN", d);
}

// --- errors --------------------------------------------------------------------------------------------

TEST_CASE("bad input throws linstate::error before any launch; outputs untouched") {
  const auto data = make<sse_n4k1s>({.B = 2, .T = 8, .H = 1, .HV = 1, .K = 32, .V = 32}, 160);
  device_inputs<float> din(data.view());
  const cot_host c = make_cot(data, 61);
  auto d_dO = upload(c.dO);
  const linstate::cotangents<float> dc{d_dO.view(c.dO.shape()), {}};
  const auto like = alloc_like(data.view(), data.state_shape());
  device_grads<float> dg(like, 0x7f);
  const linstate::cuda be{};
  auto untouched = [&] {
    bool same = true;
    for_each_grad(dg.fetch(), like, [&](const char*, const auto& got, const auto&) {
      for (const auto x : got.values()) same &= std::bit_cast<std::uint32_t>(static_cast<float>(x)) == 0x7f7f7f7fu;
    });
    return same;
  };
  SUBCASE("a gradient of the wrong shape") {
    auto g = dg.g;
    g.q.shape = {2, 8, 1, 16};
    CHECK_THROWS_WITH_AS(linstate::backward<sse_n4k1s>(be, din.in, dc, g), doctest::Contains("gradient q has shape"),
                         linstate::error);
  }
  SUBCASE("a gradient for an input that was not given") {
    auto g = dg.g;
    g.beta = {dg.g.v.data, {2, 8, 1}};
    CHECK_THROWS_AS(linstate::backward<sse_n4k1s>(be, din.in, dc, g), linstate::error);
  }
  SUBCASE("a gradient in host memory") {
    auto g = dg.g;
    tensor<float> host_k(data.k.shape());
    g.k = host_k.view();
    CHECK_THROWS_WITH_AS(linstate::backward<sse_n4k1s>(be, din.in, dc, g), doctest::Contains("is host memory"),
                         linstate::error);
  }
  SUBCASE("cotangents in host memory, of the wrong shape") {
    const linstate::cotangents<float> host{c.dO.view(), {}};
    CHECK_THROWS_WITH_AS(linstate::backward<sse_n4k1s>(be, din.in, host, dg.g), doctest::Contains("is host memory"),
                         linstate::error);
    linstate::cotangents<float> bad = dc;
    bad.o.shape = {2, 8, 1, 16};
    CHECK_THROWS_AS(linstate::backward<sse_n4k1s>(be, din.in, bad, dg.g), linstate::error);
  }
  SUBCASE("a gradient overlapping an input") {
    auto g = dg.g;
    g.q = {const_cast<float*>(din.in.k.data), din.in.k.shape};
    CHECK_THROWS_WITH_AS(linstate::backward<sse_n4k1s>(be, din.in, dc, g), doctest::Contains("overlaps"), linstate::error);
  }
  SUBCASE("K above the kernel's limit") {
    const auto big = make<gla>({.B = 1, .T = 2, .H = 1, .HV = 1, .K = 544, .V = 4}, 62, false);
    device_inputs<float> dbig(big.view());
    auto d_o = upload(make_cot(big, 1).dO);
    const linstate::cotangents<float> dcb{d_o.view(big.output_shape()), {}};
    CHECK_THROWS_WITH_AS(linstate::backward<gla>(be, dbig.in, dcb, linstate::gradients<float>{}),
                         doctest::Contains("K = 544"), linstate::error);
  }
  SUBCASE("balance loss: d_logits of the wrong shape, a host loss pointer") {
    float host_loss = 0.f;
    auto g = dg.g.router_logits;
    CHECK_THROWS_WITH_AS(linstate::balance_loss<sse_n4k1s>(be, din.in.router_logits, &host_loss),
                         doctest::Contains("loss is host memory"), linstate::error);
    linstate::device_buffer<float> d_loss(1);
    g.shape = {2, 8, 3};
    CHECK_THROWS_AS(linstate::balance_loss<sse_n4k1s>(be, din.in.router_logits, d_loss.data(), g), linstate::error);
  }
  CHECK(untouched());
  cuda_ok(cudaGetLastError());
}

}  // namespace

int main(int argc, char** argv) { return linstate_cuda_test::gpu_test_main(argc, argv); }
