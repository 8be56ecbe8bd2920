// SPDX-License-Identifier: Apache-2.0
//! \file cuda/tests/test_cuda_layers.cu
//! \brief The GPU token mixer (linstate/layers/cuda_token_mixer.cuh) against the CPU fp32 token_mixer
//! on the same parameters and inputs (cpu_layers_reference.cpp):
//!  * GLA (identity maps, as fla's GLA layer), GLA with a scalar head gate, SSE-n4k1 + shared,
//!    SSE-n8k2 (no output gate), SSE-w2r1 + shared (kw > kr), GDN and SSE-GDN-n4k1 + shared (SiLU keys,
//!    low-rank output gate), each at T = 7 (the recurrent kernels) and T = 150 (chunked on the GPU,
//!    the CPU recurrent), and with the short convolution (mixer_config::short_conv = 4) where the
//!    CPU layer has it: the output, aux, dx and every parameter gradient against the fp64 layer on the
//!    same values at max|gpu − fp64| ≤ 2e-5 · max|fp64| per tensor (the bound tests/layers holds the
//!    CPU fp32 layer to; SPEC §9.3 suggests 1e-5 for fp32 kernels, a layer adds the projections' sums)
//!    and against the CPU fp32 layer at 1e-4 (same math, other summation order);
//!  * the initial parameters equal the CPU layer's bit for bit (names, order, shapes, values), and
//!    copy_from / copy_to move values and gradients between the two;
//!  * a repeated step gives the same bits (deterministic: no atomics, cuBLAS in a fixed configuration);
//!  * bad input: wrong shapes, host pointers, backward before forward, a parameter list that lacks a
//!    tensor or has it in another shape, a bad config — each a linstate::error naming the tensor.
//!
//! A GPU-only binary: exits 77 (Meson: SKIP) without a usable GPU.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <linstate/layers/cuda_token_mixer.cuh>
#include <string>
#include <vector>

#include "gpu_support.cuh"
#include "layers_support.hpp"

namespace {

using linstate::index_t;
using namespace linstate_cuda_test;
namespace ly = linstate::layers;

constexpr bool cpu_has_short_conv = requires(ly::mixer_config c) { c.short_conv; };

template <class V>
ly::mixer_config layer_config(index_t conv) {
  ly::mixer_config c{.d_model = 16, .num_heads = 2, .head_k = 8, .head_v = 8, .gate_rank = 4, .adapter_rank = 4};
  c.init_std = 0.3;
  c.balance_coefficient = 0.5;
  c.seed = 7;
  if constexpr (std::is_same_v<V, gla>) c.q_map = c.k_map = c.v_map = ly::feature_map::identity;  // fla's GLA layer
  if constexpr (V::decay::uses_beta) c.k_map = ly::feature_map::silu, c.output_gate_rank = 4;
  if constexpr (V::partition::num_routed == 8) c.output_gate = false;
  if constexpr (cpu_has_short_conv) c.short_conv = conv;
  else (void)conv;
  return c;
}

std::vector<float> normals(index_t n, const char* name, std::uint64_t seed) {
  ly::init_rng g(seed, name);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& e : v) e = static_cast<float>(g.normal());
  return v;
}

std::vector<float> down(const linstate::device_buffer<float>& b, index_t n) {
  std::vector<float> h(static_cast<std::size_t>(n));
  cuda_ok(cudaMemcpy(h.data(), b.data(), h.size() * sizeof(float), cudaMemcpyDeviceToHost));
  return h;
}

//! max|a − b| / max|ref|
double rel_err(const std::vector<float>& a, const std::vector<float>& ref) {
  double e = 0, m = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    e = std::max(e, std::fabs(double(a[i]) - double(ref[i])));
    m = std::max(m, std::fabs(double(ref[i])));
  }
  return m > 0 ? e / m : e;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

//! Is this parameter a function of the head gate's ∂g alone, summed over the tokens (A_log, dt_bias, W_a)?
bool head_gate_parameter(const std::string& n) {
  return n.rfind("A_log", 0) == 0 || n.rfind("dt_bias", 0) == 0 || n.rfind("W_a", 0) == 0;
}

template <class V, class Alg = linstate::automatic>
void check_layer(const char* name, index_t B, index_t T, index_t conv = 0) {
  const ly::mixer_config c = layer_config<V>(conv);
  const index_t D = c.d_model, n = B * T * D;
  const std::vector<float> x = normals(n, "x", 3), dout = normals(n, "dout", 4);
  host_parameters initial;
  mixer_step ref = cpu_mixer_step<V>(c, B, T, x, dout, initial);
  const std::string label = std::string(name) + (std::is_same_v<Alg, linstate::recurrent> ? " (recurrent)" : "");
  INFO(label << " B = " << B << ", T = " << T << ", short_conv = " << conv);

  ly::cuda_token_mixer<V, Alg> G(c);
  // the initial values are the CPU layer's, bit for bit, in its order
  REQUIRE(G.num_parameter_tensors() == initial.names.size());
  {
    std::vector<ly::parameter_ref<float>> dev;
    G.collect(dev);
    for (std::size_t i = 0; i < dev.size(); ++i) {
      CHECK(dev[i].name == initial.names[i]);
      CHECK(dev[i].value.shape == initial.shapes[i]);
    }
    host_parameters got = initial;
    for (auto& v : got.values) std::fill(v.begin(), v.end(), -1.f);
    G.copy_to(got.refs());
    bool same = true;
    for (std::size_t i = 0; i < got.values.size(); ++i) same = same && same_bits(got.values[i], initial.values[i]);
    CHECK_MESSAGE(same, "initial parameters differ from the CPU layer's");
  }
  // the CPU step's (perturbed) values, then one step on the GPU
  G.copy_from(ref.params.refs());
  linstate::device_buffer<float> xd(static_cast<std::size_t>(n)), yd(static_cast<std::size_t>(n)), dyd(static_cast<std::size_t>(n)),
      dxd(static_cast<std::size_t>(n));
  xd.upload(x.data()), dyd.upload(dout.data());
  const linstate::shape_t xs{B, T, D};
  auto step = [&](host_parameters& hp, std::vector<float>& out, std::vector<float>& dx) {
    G.zero_grad();
    const float aux = G.forward(xd.view(xs), yd.view(xs));
    G.backward(dyd.view(xs), dxd.view(xs));
    cuda_ok(cudaDeviceSynchronize());
    out = down(yd, n), dx = down(dxd, n);
    hp = ref.params;
    G.copy_to(hp.refs(), "", /*grads=*/true);
    return aux;
  };
  host_parameters got;
  std::vector<float> out, dx;
  const float aux = step(got, out, dx);
  // Each tensor against the fp64 layer on the same values: max|gpu − fp64| ≤ 2e-5 · max|fp64|, the bound
  // tests/layers holds the CPU fp32 layer to; and against the CPU fp32 layer at 1e-4 (the two fp32 layers
  // differ only in summation order, but sums over all tokens with cancellation — dA_log, dt_bias, the
  // router — reach a few 1e-5 of their maximum in either). The table gives both, and the CPU fp32
  // layer's own distance from fp64 for scale.
  //
  // One exception: the gated delta rule's chunked backward (WY form, the GPU kernels at T > 64) gives
  // ∂g per token less accurately than the recurrence, and A_log, dt_bias and W_a are sums of it over all
  // tokens in which large terms cancel: those tensors were measured at up to 4.1e-5 of their maximum
  // against fp64 (SSE-GDN, T = 150; the CPU fp32 layer, recurrent: 2.6e-6) and are held to 1e-4. The
  // same layer with the recurrent GPU kernel (check_variant runs it) meets 2e-5 on every tensor.
  constexpr double tol32 = 1e-4;
  const bool chunked_delta = V::decay::uses_beta && T > 64 && !std::is_same_v<Alg, linstate::recurrent>;
  double tol64 = 2e-5;
  std::string report = "  tensor           gpu-cpu32  gpu-fp64  cpu32-fp64\n";
  auto row = [&](const std::string& what, const std::vector<float>& g, const std::vector<float>& c32, const std::vector<double>& r64) {
    const std::vector<float> r(r64.begin(), r64.end());
    double e32 = rel_err(g, c32), e64 = rel_err(g, r), c = rel_err(c32, r);
    // rel_err rounds the fp64 values to float first; that costs at most 6e-8 of max|fp64|
    char b[200];
    const bool good = e64 <= tol64 && e32 <= std::max(tol32, tol64);
    std::snprintf(b, sizeof b, "  %-16s %9.2e %9.2e %9.2e%s\n", what.c_str(), e32, e64, c, good ? "" : "  FAILED");
    report += b;
    return good;
  };
  bool ok = row("out", out, ref.out, ref.out64);
  ok = row("dx", dx, ref.dx, ref.dx64) && ok;
  ok = row("aux", {aux}, {ref.aux}, {ref.aux64}) && ok;
  if (!V::router::routes) ok = (aux == 0.f) && ok;
  for (std::size_t i = 0; i < got.names.size(); ++i) {
    tol64 = chunked_delta && head_gate_parameter(got.names[i]) ? 1e-4 : 2e-5;
    ok = row("d" + got.names[i], got.grads[i], ref.params.grads[i], ref.grads64[i]) && ok;
    ok = same_bits(got.values[i], ref.params.values[i]) && ok;  // copy_from / copy_to round trip
  }
  INFO(report);
  if (std::getenv("LAYERS_VERBOSE")) MESSAGE(label << " B=" << B << " T=" << T << " conv=" << conv << "\n" << report);
  CHECK(ok);

  // the same step again: the same bits
  host_parameters again;
  std::vector<float> out2, dx2;
  const float aux2 = step(again, out2, dx2);
  bool same = aux2 == aux && same_bits(out2, out) && same_bits(dx2, dx);
  for (std::size_t i = 0; i < again.grads.size(); ++i) same = same && same_bits(again.grads[i], got.grads[i]);
  CHECK_MESSAGE(same, "a repeated step is not bit-identical");
}

template <class V>
void check_variant(const char* name) {
  check_layer<V>(name, 2, 7);
  check_layer<V>(name, 2, 150);
  if constexpr (V::decay::uses_beta) check_layer<V, linstate::recurrent>(name, 2, 150);  // the layer alone: 2e-5 everywhere
  if constexpr (cpu_has_short_conv) {
    check_layer<V>(name, 2, 7, 4);
    check_layer<V>(name, 1, 150, 4);
  }
}

template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const linstate::error& e) {
    return e.what();
  }
  return "(no linstate::error)";
}

}  // namespace

TEST_CASE("cuda_token_mixer: GLA (identity maps, key gate) against the CPU layer") { check_variant<gla>("gla"); }
TEST_CASE("cuda_token_mixer: GLA with a scalar head gate") { check_variant<gla_scalar>("gla_scalar"); }
TEST_CASE("cuda_token_mixer: SSE-n4k1 + shared") { check_variant<sse_n4k1s>("sse_n4k1s"); }
TEST_CASE("cuda_token_mixer: SSE-n8k2 (no shared, no output gate)") { check_variant<sse_n8k2>("sse_n8k2"); }
TEST_CASE("cuda_token_mixer: SSE-w2r1 + shared (kw > kr)") { check_variant<sse_w2r1s>("sse_w2r1s"); }
TEST_CASE("cuda_token_mixer: GDN") { check_variant<gdn>("gdn"); }
TEST_CASE("cuda_token_mixer: SSE-GDN n4k1 + shared") { check_variant<sse_gdn>("sse_gdn"); }

TEST_CASE("cuda_token_mixer: bad input names the tensor") {
  const ly::mixer_config c = layer_config<sse_n4k1s>(0);
  ly::cuda_token_mixer<sse_n4k1s> G(c);
  const index_t B = 2, T = 3, D = c.d_model;
  linstate::device_buffer<float> a(static_cast<std::size_t>(B * (T + 1) * D)), b(static_cast<std::size_t>(B * T * D));
  std::vector<float> host(static_cast<std::size_t>(B * T * D), 0.f);
  const linstate::shape_t xs{B, T, D};
  CHECK(message_of([&] { G.backward(a.view(xs), b.view(xs)); }).find("no forward call to differentiate") != std::string::npos);
  CHECK(message_of([&] { G.forward(a.view({B, T, 5}), b.view({B, T, 5})); })
            .find("forward: x has shape [2,3,5] but must be [B,T,D] with D = d_model = 16") != std::string::npos);
  CHECK(message_of([&] { G.forward(a.view(xs), b.view({B, 2, D})); }).find("out has shape [2,2,16] but must be [2,3,16]") !=
        std::string::npos);
  CHECK(message_of([&] { G.forward(linstate::tensor_view<const float>(host.data(), xs), b.view(xs)); })
            .find("x [2,3,16] is host memory") != std::string::npos);
  CHECK(message_of([&] { G.forward(a.view(xs), linstate::tensor_view<float>(host.data(), xs)); }).find("out [2,3,16] is host memory") !=
        std::string::npos);
  cuda_ok(cudaMemset(a.data(), 0, a.size() * sizeof(float)));
  (void)G.forward(a.view(xs), b.view(xs));
  CHECK(message_of([&] { G.backward(a.view({B, T + 1, D}), b.view(xs)); }).find("dout has shape [2,4,16]") != std::string::npos);
  CHECK(message_of([&] { G.backward(a.view(xs), b.view({1, T, D})); }).find("dx has shape [1,3,16]") != std::string::npos);
  CHECK(message_of([&] { G.backward(a.view(xs), linstate::tensor_view<float>(host.data(), xs)); }).find("dx [2,3,16] is host memory") !=
        std::string::npos);
  // parameter lists
  host_parameters hp;
  {
    std::vector<ly::parameter_ref<float>> dev;
    G.collect(dev);
    for (auto& p : dev) {
      hp.names.push_back(p.name), hp.shapes.push_back(p.value.shape);
      hp.values.emplace_back(static_cast<std::size_t>(p.value.numel())), hp.grads.emplace_back(static_cast<std::size_t>(p.value.numel()));
    }
  }
  auto refs = hp.refs();
  CHECK(message_of([&] { G.copy_from(refs, "blocks.0."); }).find("copy_from: no parameter named blocks.0.W_q [16,16]") !=
        std::string::npos);
  refs[0].value.shape = {16, 15};
  CHECK(message_of([&] { G.copy_from(refs); }).find("copy_from: parameter W_q has shape [16,15] but must be [16,16]") !=
        std::string::npos);
  refs[0].value.shape = hp.shapes[0];
  refs.erase(refs.begin() + 3);
  CHECK(message_of([&] { G.copy_to(refs); }).find("copy_to: no parameter named") != std::string::npos);
  // the config is checked as the CPU layer checks it
  ly::mixer_config bad = c;
  bad.num_heads = 0;
  CHECK(message_of([&] { ly::cuda_token_mixer<sse_n4k1s> X(bad); }).find("mixer_config.num_heads = 0: must be >= 1") !=
        std::string::npos);
}

int main(int argc, char** argv) { return linstate_cuda_test::gpu_test_main(argc, argv); }
