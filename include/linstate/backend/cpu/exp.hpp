// linstate/backend/cpu/exp.hpp — Eigen 3.4's fp32 packet exponential with a cheaper last step, the same bits.
//
// Eigen's pexp_float (Cephes' method) reduces x to r = x − m·ln 2 with m = ⌊x·log₂e + ½⌋, evaluates a
// polynomial y ≈ e^r and returns max(ldexp(y, m), x), where its generic ldexp multiplies y by four powers
// of two (2^b three times and 2^(m−3b), b = ⌊m/4⌋) so that any exponent in ±278 works without an
// intermediate overflow. Each of those multiplications is exact until the last one (the intermediate
// values lie between y and the result, all normal floats for |m| ≤ 128), so the result is y·2^m rounded
// once; when 2^m is itself a normal float (−126 ≤ m ≤ 127) one multiplication by 2^m, built from m's bits,
// rounds the same product once: the same result. exp8 does that, and falls back to Eigen's ldexp for a
// packet with any m outside that range (x below about −87.3 or above 88.0, NaN or ±inf). The other steps
// are Eigen's own packet operations, so every element has Eigen's bits: `exp_bits` in
// docs/data/issue13/s12 compares every fp32 input.
//
// Why: in the chunked GLA forward the exponentials of the staging loop (e^{Γ} and e^{−Γ}, 2·C·K per chunk
// and head) were ~10 % of a prefill call on the AVX2 Zen 3 VM of issue 13, and a third of each exp's
// instructions were the generic ldexp (docs/benchmarks.md, "Issue 13, session 12").
#pragma once

#include <Eigen/Core>
#include <cstdint>

#include "../../concepts.hpp"

// AVX2 + FMA builds without AVX-512 (Eigen's float packet is then 8 lanes; AVX-512 builds keep Eigen's pexp on their
// 16-lane packets), Eigen 3.4 (whose pexp_float exp8 follows).
#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__) && !defined(LINSTATE_NO_GEMM_KERNEL) && \
    !defined(EIGEN_DONT_VECTORIZE) && EIGEN_VERSION_AT_LEAST(3, 4, 0) && !EIGEN_VERSION_AT_LEAST(3, 4, 90)
#define LINSTATE_EXP8 1
#include <immintrin.h>
#else
#define LINSTATE_EXP8 0
#endif

// exp8 and its row loops are inlined wherever they are called: out of line (GCC 12 left exp8 out of line in the
// SSE forward's larger instantiation) every packet pays a call and reloads the polynomial's constants.
#if defined(__GNUC__)
#define LINSTATE_EXP_INLINE inline __attribute__((always_inline))
#else
#define LINSTATE_EXP_INLINE inline
#endif

namespace linstate::cpu_detail {

//! The packet Eigen's vectorised .exp() works on (8 floats with AVX2 and without AVX-512).
using exp_packet = Eigen::internal::packet_traits<float>::type;
inline constexpr index_t exp_packet_size = Eigen::internal::packet_traits<float>::size;

#if LINSTATE_EXP8
static_assert(exp_packet_size == 8);
#endif

//! e^x of one packet, Eigen's bits (see the file comment); Eigen's pexp where exp8 does not apply.
LINSTATE_EXP_INLINE exp_packet exp8(const exp_packet& x0) {
  namespace ei = Eigen::internal;
#if LINSTATE_EXP8
  if constexpr (exp_packet_size == 8) {
    const exp_packet one = ei::pset1<exp_packet>(1.0f), half = ei::pset1<exp_packet>(0.5f);
    // Eigen 3.4 pexp_float's steps, its constants (Cephes' expf)
    const exp_packet x = ei::pmax(ei::pmin(x0, ei::pset1<exp_packet>(88.723f)), ei::pset1<exp_packet>(-88.723f));
    const exp_packet m = ei::pfloor(ei::pmadd(x, ei::pset1<exp_packet>(1.44269504088896341f), half));
    exp_packet r = ei::pmadd(m, ei::pset1<exp_packet>(-0.693359375f), x);
    r = ei::pmadd(m, ei::pset1<exp_packet>(2.12194440e-4f), r);
    const exp_packet r2 = ei::pmul(r, r), r3 = ei::pmul(r2, r);
    exp_packet y = ei::pmadd(ei::pset1<exp_packet>(1.9875691500E-4f), r, ei::pset1<exp_packet>(1.3981999507E-3f));
    exp_packet y1 = ei::pmadd(ei::pset1<exp_packet>(4.1665795894E-2f), r, ei::pset1<exp_packet>(1.6666665459E-1f));
    const exp_packet y2 = ei::padd(r, one);
    y = ei::pmadd(y, r, ei::pset1<exp_packet>(8.3334519073E-3f));
    y1 = ei::pmadd(y1, r, ei::pset1<exp_packet>(5.0000001201E-1f));
    y = ei::pmadd(y, r3, y1);
    y = ei::pmadd(y, r2, y2);
    // 2^m: one multiplication when 2^m is a normal float (every lane), else Eigen's generic ldexp
    const __m256 out_of_range = _mm256_or_ps(_mm256_cmp_ps(m, _mm256_set1_ps(-126.f), _CMP_LT_OQ),
                                             _mm256_cmp_ps(m, _mm256_set1_ps(127.f), _CMP_GT_OQ));
    exp_packet s;
    if (__builtin_expect(_mm256_movemask_ps(out_of_range) == 0, 1)) {
      const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(m), _mm256_set1_epi32(127)), 23);
      s = ei::pmul(y, _mm256_castsi256_ps(e));
    } else {
      s = ei::pldexp(y, m);
    }
    return ei::pmax(s, x0);
  }
#endif
  return ei::pexp(x0);
}

//! dst[0:n] = x[0:n] ⊙ e^{±g[0:n]} (sign −1: e^{−g}), Eigen's bits for `x.array() * (±g.array()).exp()` when n is a
//! multiple of the packet (the element-wise product of the exp packet and x's); dst may alias x.
template <int Sign>
LINSTATE_EXP_INLINE void mul_exp_row(const float* g, const float* x, float* dst, index_t n) {
  namespace ei = Eigen::internal;
  for (index_t a = 0; a < n; a += exp_packet_size) {
    exp_packet v = ei::ploadu<exp_packet>(g + a);
    if constexpr (Sign < 0) v = ei::pnegate(v);
    ei::pstoreu(dst + a, ei::pmul(ei::ploadu<exp_packet>(x + a), exp8(v)));
  }
}

//! dst[j] = e^{c − g[j]} for j < n, Eigen's bits for `Map<ArrayXf>(dst, n) = (c − Map<const ArrayXf>(g, n)).exp()` on a
//! packet-aligned dst: whole packets by exp8, the tail by std::exp (Eigen's scalar path). The gated delta rule's
//! rows of Γ_ij = e^{G_i − G_j}.
LINSTATE_EXP_INLINE void exp_diff_row(float c, const float* g, float* dst, index_t n) {
  namespace ei = Eigen::internal;
  const exp_packet pc = ei::pset1<exp_packet>(c);
  index_t j = 0;
  for (; j + exp_packet_size <= n; j += exp_packet_size) ei::pstoreu(dst + j, exp8(ei::psub(pc, ei::ploadu<exp_packet>(g + j))));
  for (; j < n; ++j) dst[j] = std::exp(c - g[j]);
}

//! x[0:n] = e^{x[0:n]}, Eigen's bits for `Map<ArrayXf>(x, n) = …exp()` on a packet-aligned x (the recurrent
//! step's e^{g}: recurrent_scratch::g is aligned): whole packets by exp8 when n is a multiple of the packet,
//! else Eigen's own evaluation (its scalar tail is std::exp).
inline void exp_in_place(float* x, index_t n) {
  namespace ei = Eigen::internal;
  if (n % exp_packet_size != 0 || reinterpret_cast<std::uintptr_t>(x) % (sizeof(float) * exp_packet_size) != 0) {
    Eigen::Map<Eigen::ArrayXf> a(x, n);
    a = a.exp();
    return;
  }
  for (index_t i = 0; i < n; i += exp_packet_size) ei::pstoreu(x + i, exp8(ei::ploadu<exp_packet>(x + i)));
}

}  // namespace linstate::cpu_detail
