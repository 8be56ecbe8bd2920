// SPDX-License-Identifier: Apache-2.0
//! \file tests/variants/test_bf16.cpp
//! \brief Reduced-precision inputs (Eigen::bfloat16, Eigen::half), SPEC §11 C10 and §9.3.
//!
//! Inputs are drawn in fp32, rounded to the input type, and the same rounded values are given to an
//! fp32 run. By C10 (state, cumulative decays and accumulation in fp32; outputs in the input type;
//! final states fp32) the two runs may differ only by the rounding of o, so besides fla's ratio metric
//! `RMS(a − b)/RMS(b) < 0.005` (§9.2–9.3) the tests check each element of o against one ulp of the
//! input type and the fp32 final state against the fp32 run at 1e-5.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <linstate/linstate.hpp>
#include <string>
#include <type_traits>

#include "random_inputs.hpp"

namespace {
namespace bf16t {

namespace dc = linstate::decay;
namespace pt = linstate::partition;
namespace rt = linstate::router;
using linstate::index_t;
using linstate::tensor;
using namespace linstate_test;

struct gla : linstate::spec<> {};
struct sse_n4k1s : gla {
  using partition = pt::routed<4, pt::shared>;
  using router = rt::top_k<1>;
};
struct sse_n4w2r1 : gla {  // kw ≠ kr, no shared partition
  using partition = pt::routed<4>;
  using router = rt::top_k<2, 1>;
};
//! Probabilities rounded to the logits' type before selection (bit-parity with the authors' bf16 mask path).
struct sse_round : sse_n4k1s { using router = rt::top_k<1, 1, rt::top_k_options{.round_to_input = true}>; };
struct gdn : gla { using decay = dc::gated_delta_rule<true>; };
struct retention : gla { using decay = dc::scalar; };  // one log-decay per head
struct linear : gla { using decay = dc::none; };
struct sse_gdn : sse_n4k1s { using decay = dc::gated_delta_rule<true>; };

constexpr linstate::cpu be{.threads = 1};
constexpr double ratio_tol = 0.005;  // SPEC §9.3 (fla: GLA o, ht; GDN o, ht)

template <class Spec>
constexpr bool is_delta = linstate::is_family_of<typename Spec::decay, linstate::family::delta>;

//! True for a top-k router that rounds its probabilities to the input type (top_k_options::round_to_input).
template <class Spec>
constexpr bool rounds_router() {
  if constexpr (Spec::router::routes) return Spec::router::options.round_to_input;
  else return false;
}

template <class Spec, class F>
void for_each_algorithm(F&& f) {
  f(linstate::recurrent{});
  if constexpr (!is_delta<Spec>) {
    f(linstate::chunked<16>{});
    f(linstate::chunked<64>{});
  }
}
template <class F>
void for_each_strategy(F&& f) {
  f(linstate::mask{});
  f(linstate::varlen{});
}
template <class A>
std::string name_of(A) {
  if constexpr (requires { A::chunk_size; }) return "chunked<" + std::to_string(A::chunk_size) + ">";
  else return A::name;
}

//! Relative error of one rounding to Scalar (half an ulp at 1): bf16 (8 significant bits) 2^-8,
//! fp16 (11 significant bits) 2^-11.
template <class Scalar>
constexpr double unit_roundoff = std::is_same_v<Scalar, Eigen::bfloat16> ? 0x1p-8 : 0x1p-11;
//! Smallest positive normal of Scalar (fp16 has subnormals below 6.1e-5).
template <class Scalar>
constexpr double min_normal = std::is_same_v<Scalar, Eigen::bfloat16> ? 1.2e-38 : 0x1p-14;

//! Every element of `low` is the fp32 value rounded once to Scalar (plus fp32-level slack).
template <class Scalar>
bool rounded_elementwise(const tensor<Scalar>& low, const tensor<float>& ref32) {
  if (!(low.shape() == ref32.shape())) return false;
  const double u = unit_roundoff<Scalar>;
  for (index_t i = 0; i < low.numel(); ++i) {
    const double a = static_cast<double>(static_cast<float>(low[i])), b = ref32[i];
    if (!std::isfinite(a) || std::abs(a - b) > u * std::abs(b) * 1.01 + min_normal<Scalar>) return false;
  }
  return true;
}

template <class Spec, class Scalar>
void check_low_precision(bool h0) {
  INFO("initial_state: ", h0);
  // K = V = 16 keeps the chunk products below Eigen's own OpenMP threshold (see test_invariants.cpp).
  config c = config_for<Spec>({.B = 2, .T = 150, .H = 2, .HV = 2, .K = 16, .V = 16});
  c.initial_state = h0;
  c.router_gap = 1.f;  // clear gaps: the top-k set survives rounding (SPEC §4.8)
  random_inputs d(c, 2024);
  d.round_to<Scalar>();  // the fp32 run sees exactly the values the Scalar run sees
  const cast_inputs<Scalar> low(d);
  const auto ref = linstate::reference::forward<Spec>(d.view());
  // The reference accepts Scalar inputs too. They hold the same values, so it is the same result,
  // except that round_to_input then rounds the router probabilities to Scalar (gates change by ≤ 1 ulp).
  const auto ref_low = linstate::reference::forward<Spec>(low.view());
  constexpr bool same_values = !rounds_router<Spec>();
  if constexpr (same_values) {  // (not bit for bit: the two instantiations may contract to FMAs differently)
    CHECK(max_rel_err(ref_low.o, ref.o) <= 1e-12);
    CHECK(max_rel_err(ref_low.final_state, ref.final_state) <= 1e-12);
  }

  for_each_strategy([&](auto strat) {
    for_each_algorithm<Spec>([&](auto algo) {
      INFO("run: ", name_of(algo), "/", name_of(strat));
      const auto r32 = linstate::forward<Spec>(be, d.view(), algo, strat);
      const auto r = linstate::forward<Spec>(be, low.view(), algo, strat);
      // SPEC §11 C10: outputs in the input type, states fp32.
      static_assert(std::is_same_v<decltype(r.o), tensor<Scalar>>);
      static_assert(std::is_same_v<decltype(r.final_state), tensor<float>>);
      CHECK(r.o.shape() == r32.o.shape());
      CHECK(r.final_state.shape() == r32.final_state.shape());
      // SPEC §9.3 ratio metric against the fp32 run and against the fp64 references
      CHECK(rms_ratio(r.o, r32.o) < ratio_tol);
      CHECK(rms_ratio(r.final_state, r32.final_state) < ratio_tol);
      CHECK(rms_ratio(r.o, ref_low.o) < ratio_tol);
      CHECK(rms_ratio(r.final_state, ref_low.final_state) < ratio_tol);
      // C10, tighter: the fp32 state is fp32-accurate against the reference of the same inputs ...
      CHECK(max_rel_err(r.final_state, ref_low.final_state) <= 1e-5);
      if constexpr (same_values) {
        // ... and, the values being the same, o is the fp32 run's o rounded once to Scalar.
        CHECK(rounded_elementwise(r.o, r32.o));
        CHECK(max_rel_err(r.final_state, r32.final_state) <= 1e-5);
      }
    });
  });

  // The caller-allocated API with Scalar outputs and an fp32 state.
  tensor<Scalar> o(d.output_shape());
  tensor<float> st(d.state_shape());
  linstate::forward<Spec>(be, low.view(), linstate::outputs<Scalar>{o.view(), st.view()}, linstate::recurrent{},
                          linstate::mask{});
  CHECK(rms_ratio(o, ref_low.o) < ratio_tol);
  CHECK(max_rel_err(st, ref_low.final_state) <= 1e-5);
}

//! Tags naming the input types in the test report.
struct bf16 {
  using type = Eigen::bfloat16;
};
struct fp16 {
  using type = Eigen::half;
};

}  // namespace bf16t
}  // namespace

TYPE_TO_STRING_AS("bfloat16", bf16t::bf16);
TYPE_TO_STRING_AS("float16", bf16t::fp16);

namespace {
namespace bf16t {

TEST_CASE_TEMPLATE("bf16 and fp16 inputs: GLA, SSE and GDN against the fp32 run on the same values", Tag, bf16, fp16) {
  using Scalar = typename Tag::type;
  for (const bool h0 : {false, true}) {
    SUBCASE("gla") { check_low_precision<gla, Scalar>(h0); }
    SUBCASE("sse_n4k1s") { check_low_precision<sse_n4k1s, Scalar>(h0); }
    SUBCASE("sse_n4w2r1") { check_low_precision<sse_n4w2r1, Scalar>(h0); }
    SUBCASE("sse_round (clear gaps: same selection)") { check_low_precision<sse_round, Scalar>(h0); }
    SUBCASE("gdn") { check_low_precision<gdn, Scalar>(h0); }
    SUBCASE("sse_gdn") { check_low_precision<sse_gdn, Scalar>(h0); }
  }
}

// Prefill in bf16 with the chunked form, decode token by token in bf16 (forward_in_place): the fp32
// state carries over and the result matches the full fp32 run on the same values.
TEST_CASE_TEMPLATE("bf16 and fp16: prefill then decode keeps an fp32 state", Tag, bf16, fp16) {
  using Scalar = typename Tag::type;
  const index_t T = 80, Tp = 64;
  config c = config_for<sse_n4k1s>({.B = 2, .T = T, .H = 2, .HV = 2, .K = 16, .V = 16});
  c.initial_state = true;
  random_inputs d(c, 77);
  d.round_to<Scalar>();
  const auto ref = linstate::reference::forward<sse_n4k1s>(d.view());
  const random_inputs pre = d.slice_time(0, Tp);
  const cast_inputs<Scalar> pre_low(pre);
  auto r = linstate::forward<sse_n4k1s>(be, pre_low.view(), linstate::chunked<32>{}, linstate::mask{});
  tensor<float> state = r.final_state;
  tensor<double> o_all(ref.o.shape());
  const index_t row = c.dims.HV * c.dims.V;
  for (index_t b = 0; b < 2; ++b)
    for (index_t i = 0; i < Tp * row; ++i) o_all[b * T * row + i] = static_cast<float>(r.o[b * Tp * row + i]);
  for (index_t t = Tp; t < T; ++t) {
    const random_inputs step = d.slice_time(t, t + 1);
    const cast_inputs<Scalar> step_low(step);
    tensor<Scalar> o1(step.output_shape());
    linstate::forward_in_place<sse_n4k1s>(be, step_low.view(false), state.view(), o1.view(), linstate::recurrent{},
                                          linstate::varlen{});
    for (index_t b = 0; b < 2; ++b)
      for (index_t i = 0; i < row; ++i) o_all[(b * T + t) * row + i] = static_cast<float>(o1[b * row + i]);
  }
  CHECK(rms_ratio(o_all, ref.o) < ratio_tol);
  CHECK(max_rel_err(state, ref.final_state) <= 1e-5);
}

// SPEC §4.8: with bf16 logits of small spread, rounding the probabilities to bf16 before selection
// (round_to_input, the authors' mask path) legitimately picks other partitions than selecting on the
// fp32 probabilities, on a sizeable fraction of tokens. Whatever it picks, forward and the reference
// agree, and rounding-free routing on the same bf16 logits is what the fp32 run does.
TEST_CASE("bf16 router logits: round_to_input may change the selection; forward still matches the reference") {
  config c = config_for<sse_round>({.B = 1, .T = 2000, .H = 1, .HV = 1, .K = 4, .V = 4});
  c.router_gap = 0.f;  // N(0,1) logits...
  random_inputs d(c, 5);
  for (float& x : d.router_logits.values()) x *= 0.02f;  // ...of spread 0.02, as in SPEC §10
  d.round_to<Eigen::bfloat16>();
  const cast_inputs<Eigen::bfloat16> low(d);
  auto pb_of = [&](const auto& in) {
    return linstate::detail::make_problem<sse_round>("test", in, linstate::tensor_view<std::remove_cvref_t<decltype(*in.q.data)>>{},
                                                     linstate::tensor_view<float>{}, "final_state", {}, false);
  };
  linstate::detail::routing r_low, r_32;
  linstate::detail::compute_routing(pb_of(low.view()), low.view().router_logits, r_low);  // rounded to bf16
  linstate::detail::compute_routing(pb_of(d.view()), d.view().router_logits, r_32);       // fp32 (no-op rounding)
  index_t differ = 0;
  for (index_t t = 0; t < c.dims.T; ++t)
    for (index_t n = 0; n < 4; ++n)
      if (r_low.flags[static_cast<std::size_t>(t * 4 + n)] != r_32.flags[static_cast<std::size_t>(t * 4 + n)]) {
        ++differ;
        break;
      }
  MESSAGE("tokens whose top-1 partition changes when p is rounded to bf16: ", differ, " of ", c.dims.T);
  CHECK(differ > 0);
  CHECK(differ < c.dims.T / 2);
  // the rounded probabilities are bf16 values
  for (const float p : r_low.prob) CHECK(p == static_cast<float>(static_cast<Eigen::bfloat16>(p)));

  const auto ref = linstate::reference::forward<sse_round>(low.view());
  for_each_strategy([&](auto strat) {
    for_each_algorithm<sse_round>([&](auto algo) {
      INFO("run: ", name_of(algo), "/", name_of(strat));
      const auto r = linstate::forward<sse_round>(be, low.view(), algo, strat);
      CHECK(rms_ratio(r.o, ref.o) < ratio_tol);
      CHECK(max_rel_err(r.final_state, ref.final_state) <= 1e-5);
    });
  });
}

// linstate::cpu::bf16_products (backend/tags.hpp): with bf16 inputs the chunked forward of the diagonal
// family rounds its products' operands to bf16 and sums in fp32 (vdpbf16ps, backend/cpu/gemm_bf16.hpp)
// where the build targets AVX-512 BF16. Not C10's "the fp32 run rounded once": SPEC §9.3's ratio against
// the fp64 reference of the same inputs instead, for o and the final state; and where the path is built
// in it must be taken (o differs from the exact path's), where it is not the flag changes no bit.
template <class Spec, class Algorithm>
void check_bf16_products(const sizes& dims, float gate_normalizer, int threads) {
  INFO("K = ", dims.K, ", V = ", dims.V, ", T = ", dims.T, ", gate normalizer ", gate_normalizer, ", threads ", threads,
       ", ", name_of(Algorithm{}));
  config c = config_for<Spec>(dims);
  c.initial_state = true;
  c.gate_normalizer = gate_normalizer;
  random_inputs d(c, 613);
  d.round_to<Eigen::bfloat16>();
  const cast_inputs<Eigen::bfloat16> low(d);
  const auto ref = linstate::reference::forward<Spec>(low.view());
  const auto exact = linstate::forward<Spec>(linstate::cpu{.threads = threads}, low.view(), Algorithm{});
  const auto r = linstate::forward<Spec>(linstate::cpu{.threads = threads, .bf16_products = true}, low.view(), Algorithm{});
  CHECK(all_finite(r.o));
  CHECK(rms_ratio(r.o, ref.o) < ratio_tol);
  CHECK(rms_ratio(r.final_state, ref.final_state) < ratio_tol);
  const bool taken = linstate::cpu_bf16_dot && dims.K % 16 == 0 && dims.V % 16 == 0;
  if (taken) {
    // the operands' rounding shows in o (the exact path's o is the fp32 run's, rounded once) ...
    CHECK(max_abs_diff(r.o, exact.o) > 0);
    // ... and no more than bf16 operands explain: within 3 ulp-scale ratios of the exact path
    CHECK(rms_ratio(r.o, exact.o) < 3 * 0x1p-8);
  } else {
    CHECK(max_abs_diff(r.o, exact.o) == 0);
    CHECK(max_abs_diff(r.final_state, exact.final_state) == 0);
  }
}

TEST_CASE("bf16 inputs with cpu::bf16_products: within SPEC §9.3 of the fp64 reference, and the path is taken where built in") {
  using c64 = linstate::chunked<64>;
  using c16 = linstate::chunked<16>;
  // K, V multiples of 16 (the path); T = 149: a last chunk of odd length (21 rows at C = 64, 5 at C = 16)
  SUBCASE("gla") {
    check_bf16_products<gla, c64>({.B = 2, .T = 149, .H = 2, .HV = 2, .K = 32, .V = 48}, 16.f, 1);
    check_bf16_products<gla, c16>({.B = 1, .T = 149, .H = 2, .HV = 2, .K = 16, .V = 32}, 16.f, 2);
  }
  SUBCASE("gla, strong decays (the sub-chunked scores)") {
    check_bf16_products<gla, c64>({.B = 1, .T = 149, .H = 2, .HV = 2, .K = 32, .V = 32}, 0.1f, 1);
  }
  SUBCASE("per-head decay, no decay") {
    check_bf16_products<retention, c64>({.B = 1, .T = 149, .H = 2, .HV = 2, .K = 32, .V = 32}, 1.f, 1);
    check_bf16_products<linear, c64>({.B = 1, .T = 149, .H = 2, .HV = 2, .K = 32, .V = 32}, 16.f, 1);
  }
  SUBCASE("sse_n4k1s (routed streams, write and read weights)") {
    check_bf16_products<sse_n4k1s, c64>({.B = 1, .T = 149, .H = 2, .HV = 2, .K = 32, .V = 32}, 16.f, 1);
  }
  SUBCASE("K or V not a multiple of 16: the exact path") {
    check_bf16_products<gla, c64>({.B = 1, .T = 70, .H = 1, .HV = 1, .K = 24, .V = 32}, 16.f, 1);
  }
}

TEST_CASE("linstate::cpu_bf16_dot says whether this build has the bf16 dot-product path") {
#if defined(__AVX512BF16__) && defined(__AVX512BW__)
  CHECK(linstate::cpu_bf16_dot);
#else
  CHECK_FALSE(linstate::cpu_bf16_dot);
#endif
#if defined(LINSTATE_TEST_NATIVE) && defined(__x86_64__) && defined(__GNUC__)
  // built with -march=native (meson option native): the path is in where the CPU running the tests has
  // AVX-512 BF16 (and BW), e.g. Intel Sapphire/Emerald Rapids, AMD Zen 4
  const bool cpu_has = __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw");
  MESSAGE("CPU has AVX-512 BF16: ", cpu_has, "; linstate::cpu_bf16_dot: ", linstate::cpu_bf16_dot);
  CHECK(linstate::cpu_bf16_dot == cpu_has);
#endif
}

}  // namespace bf16t
}  // namespace
