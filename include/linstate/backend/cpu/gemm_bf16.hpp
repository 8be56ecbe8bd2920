// linstate/backend/cpu/gemm_bf16.hpp — the chunked kernels' products on bf16 operands with fp32
// accumulation, on the AVX-512 BF16 dot-product instruction (vdpbf16ps).
//
// vdpbf16ps: c[j] += a[2j]·b[2j] + a[2j+1]·b[2j+1] for the 16 fp32 lanes j of a zmm, where a and b
// hold 32 bf16 each (products exact in fp32, sums rounded to fp32, denormals flushed to zero). So a
// product C (m×n, fp32) = / += A (m×k) · B (k×n) runs over pairs of the depth k: A's operand is one
// 32-bit *pair word* per (row i, pair p) = (A(i,2p), A(i,2p+1)) broadcast to all lanes, and B is
// *pair-packed*: word (p, j) = (B(2p,j), B(2p+1,j)), row p of n words. Layouts (words = uint32_t):
//   A pair word (i, p) at a[i·rsa + p·csa]                                          // [m, k/2] through strides
//   B           (p, j) at b[p·ldb + j]                                              // [k/2, n] pair-packed
//   C           (i, j) at c[i·ldc + j]                                              // [m, n] fp32, row-major
// k odd is the caller's to pad (a zero second half in A's or B's last pair word).
//
// Used by the chunked GLA forward for bf16 inputs when linstate::cpu::bf16_products is set and the
// compiler targets AVX-512 BF16 (kernels.hpp chunk_step; docs/design.md "bf16 products"). Measured
// (bench/bf16_dot_probe.cpp, docs/benchmarks.md "Issue 13, session 10"): on the Intel Xeon model 207
// (Emerald Rapids class) VM, vdpbf16ps zmm has twice the fp32 FMA's latency (2.7 against 1.4 ns) and
// issues once per ~0.78 ns against the FMA's 0.19 ns: 0.47–0.49× the FMA's multiply-adds per second.
// This kernel runs at that instruction's rate (0.85 ns per vdpbf16ps in a 64×128×128 product), so on
// that CPU the path is slower than the fp32 products (GLA prefill ×0.89 of the exact bf16 path); it
// is there for CPUs whose vdpbf16ps is faster than two FMAs, which this project has not measured yet.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "../../concepts.hpp"
#include "gemm.hpp"

#if defined(__AVX512BF16__) && defined(__AVX512BW__) && defined(__AVX512F__) && !defined(LINSTATE_NO_BF16_DOT)
#define LINSTATE_CPU_BF16_DOT 1
#include <immintrin.h>
#else
#define LINSTATE_CPU_BF16_DOT 0
#endif

namespace linstate {
//! Whether the CPU backend was compiled with the bf16 dot-product path (the compiler targets AVX-512
//! BF16, e.g. -march=native on a CPU that has it: Intel Cooper Lake / Sapphire Rapids and later, AMD
//! Zen 4 and later). When false, linstate::cpu::bf16_products changes nothing. The translation unit's
//! target decides, not the CPU it runs on.
inline constexpr bool cpu_bf16_dot = LINSTATE_CPU_BF16_DOT;
}  // namespace linstate

#if LINSTATE_CPU_BF16_DOT
namespace linstate::cpu_detail::bf16dot {

using word = std::uint32_t;
using gemm::mode;
using gemm::shape;

//! Stores one accumulator (16 lanes, `mk` of them valid) into C by the mode (gemm::mode).
template <int Mode>
inline void put(float* cp, __m512 acc, __m512 s, __mmask16 mk) {
  if constexpr (Mode == gemm::set) _mm512_mask_storeu_ps(cp, mk, acc);
  else if constexpr (Mode == gemm::add) _mm512_mask_storeu_ps(cp, mk, _mm512_add_ps(_mm512_maskz_loadu_ps(mk, cp), acc));
  else if constexpr (Mode == gemm::scale_add) {
    __m512 x = _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, cp), s);
    gemm::keep_rounded(x);
    _mm512_mask_storeu_ps(cp, mk, _mm512_add_ps(x, acc));
  }
  else _mm512_mask_storeu_ps(cp, mk, _mm512_sub_ps(_mm512_maskz_loadu_ps(mk, cp), acc));
}

//! MR (≤ 8) rows × NV (≤ 2) vectors of 16 columns of C over kp pair words of depth; the last vector's
//! columns masked by `mk` (B's words past n are read only where mk allows). Named accumulators, as in
//! gemm.hpp (GCC keeps an array of vectors on the stack).
template <int Mode, int MR, int NV>
inline void tile(index_t kp, const word* __restrict a, index_t rsa, index_t csa, const word* __restrict b, index_t ldb,
                 float* __restrict c, index_t ldc, const float* __restrict rs, __mmask16 mk) {
  static_assert(MR >= 1 && MR <= 8 && (NV == 1 || NV == 2));
  __m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00;
  __m512 c40 = c00, c41 = c00, c50 = c00, c51 = c00, c60 = c00, c61 = c00, c70 = c00, c71 = c00;
  const word* a0 = a;
  const word* a1 = a + rsa;
  const word* a2 = a + 2 * rsa;
  const word* a3 = a + 3 * rsa;
  const word* a4 = a + 4 * rsa;
  const word* a5 = a + 5 * rsa;
  const word* a6 = a + 6 * rsa;
  const word* a7 = a + 7 * rsa;
  const __mmask16 m0 = NV == 1 ? mk : __mmask16(0xffff);
  for (index_t p = 0; p < kp; ++p) {
    const word* bp = b + p * ldb;
    const index_t o = p * csa;
    const __m512bh b0 = (__m512bh)_mm512_maskz_loadu_epi32(m0, bp);
    const __m512bh b1 = NV == 2 ? (__m512bh)_mm512_maskz_loadu_epi32(mk, bp + 16) : b0;
#define LINSTATE_BF16_ROW(r)                                                        \
  if constexpr (MR > r) {                                                           \
    const __m512bh ar = (__m512bh)_mm512_set1_epi32(static_cast<int>(a##r[o]));      \
    c##r##0 = _mm512_dpbf16_ps(c##r##0, ar, b0);                                    \
    if constexpr (NV == 2) c##r##1 = _mm512_dpbf16_ps(c##r##1, ar, b1);             \
  }
    LINSTATE_BF16_ROW(0)
    LINSTATE_BF16_ROW(1)
    LINSTATE_BF16_ROW(2)
    LINSTATE_BF16_ROW(3)
    LINSTATE_BF16_ROW(4)
    LINSTATE_BF16_ROW(5)
    LINSTATE_BF16_ROW(6)
    LINSTATE_BF16_ROW(7)
#undef LINSTATE_BF16_ROW
  }
#define LINSTATE_BF16_PUT(r)                                                                   \
  if constexpr (MR > r) {                                                                      \
    const __m512 sr = Mode == gemm::scale_add ? _mm512_set1_ps(rs[r]) : c00;                   \
    put<Mode>(c + r * ldc, c##r##0, sr, m0);                                                   \
    if constexpr (NV == 2) put<Mode>(c + r * ldc + 16, c##r##1, sr, mk);                       \
  }
  LINSTATE_BF16_PUT(0)
  LINSTATE_BF16_PUT(1)
  LINSTATE_BF16_PUT(2)
  LINSTATE_BF16_PUT(3)
  LINSTATE_BF16_PUT(4)
  LINSTATE_BF16_PUT(5)
  LINSTATE_BF16_PUT(6)
  LINSTATE_BF16_PUT(7)
#undef LINSTATE_BF16_PUT
}

//! Rows [i0, m) of C for one panel of columns, in tiles of 8 rows (the last one shorter). Depth per
//! tile as gemm.hpp's `shape`, in pair words: a_lower → the pairs that hold columns < i + MR (A's
//! elements above the diagonal inside the last pair must be zero), a_upper → from the pair of column i.
template <int Mode, int NV, int Shape>
inline void rows(index_t m, index_t kp, const word* a, index_t rsa, index_t csa, const word* b, index_t ldb, float* c,
                 index_t ldc, index_t i0, const float* rs, __mmask16 mk) {
  auto run = [&]<int MR>(std::integral_constant<int, MR>, index_t i) {
    index_t k0 = 0, k1 = kp;
    if constexpr (Shape == gemm::a_lower) k1 = (i + MR + 1) / 2 < kp ? (i + MR + 1) / 2 : kp;
    if constexpr (Shape == gemm::a_upper) k0 = i / 2 < kp ? i / 2 : kp;
    tile<Mode, MR, NV>(k1 - k0, a + i * rsa + k0 * csa, rsa, csa, b + k0 * ldb, ldb, c + i * ldc, ldc, rs + i, mk);
  };
  gemm::for_row_tiles<8>(m, i0, run);
}

//! C (m×n) = / += / −= A·B, or = diag(row_scale)·C + A·B, over kp pair words of depth (layouts: the
//! file comment). Columns in panels of 32, then 16, then a masked remainder; `Shape` as gemm::shape
//! (c_lower: the row tiles wholly above a panel are skipped).
template <int Mode, int Shape = gemm::full>
inline void product(index_t m, index_t n, index_t kp, const word* a, index_t rsa, index_t csa, const word* b, index_t ldb,
                    float* c, index_t ldc, const float* row_scale = nullptr) {
  if (m <= 0 || n <= 0) return;
  const float* rs = Mode == gemm::scale_add ? row_scale : c;  // c: unread (an address rows() may offset harmlessly)
  auto first = [](index_t jj) { return Shape == gemm::c_lower ? jj / 8 * 8 : index_t{0}; };
  index_t j = 0;
  for (; j + 32 <= n; j += 32) rows<Mode, 2, Shape>(m, kp, a, rsa, csa, b + j, ldb, c + j, ldc, first(j), rs, 0xffff);
  for (; j + 16 <= n; j += 16) rows<Mode, 1, Shape>(m, kp, a, rsa, csa, b + j, ldb, c + j, ldc, first(j), rs, 0xffff);
  if (j < n)
    rows<Mode, 1, Shape>(m, kp, a, rsa, csa, b + j, ldb, c + j, ldc, first(j), rs, __mmask16((1u << (n - j)) - 1));
}

//! Two fp32 vectors of 16 → 32 bf16 (round to nearest even) in order: lo's 16 then hi's 16.
inline __m512i to_bf16(__m512 lo, __m512 hi) { return (__m512i)_mm512_cvtne2ps_pbh(hi, lo); }

//! Rows of fp32 → rows of pair words, element order kept: dst word (i, p) = (src(i,2p), src(i,2p+1)),
//! src [m, n] (row stride lds floats), dst [m, n/2] (row stride ldd words); n a multiple of 16.
inline void pack_rows(const float* src, index_t lds, index_t m, index_t n, word* dst, index_t ldd) {
  for (index_t i = 0; i < m; ++i) {
    const float* s = src + i * lds;
    word* d = dst + i * ldd;
    index_t j = 0;
    for (; j + 32 <= n; j += 32) _mm512_storeu_si512(d + j / 2, to_bf16(_mm512_loadu_ps(s + j), _mm512_loadu_ps(s + j + 16)));
    if (j < n) _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + j / 2), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(s + j)));
  }
}

//! Pairs of rows of fp32 → pair-packed words: dst word (p, j) = (src(2p, j), src(2p+1, j)), src
//! [m, n] (row stride lds floats), dst [⌈m/2⌉, n] (row stride ldd words); an odd m's last pair has a
//! zero second half. n a multiple of 16.
inline void pack_row_pairs(const float* src, index_t lds, index_t m, index_t n, word* dst, index_t ldd) {
  // interleave: out bf16 2j = row0 j, 2j+1 = row1 j (row0 in the low 16 bf16 of the conversion, row1 high)
  const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21, 5,
                                       20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  for (index_t p = 0; 2 * p < m; ++p) {
    const float* s0 = src + 2 * p * lds;
    const float* s1 = s0 + lds;
    const bool two = 2 * p + 1 < m;
    word* d = dst + p * ldd;
    for (index_t j = 0; j < n; j += 16) {
      const __m512 r1 = two ? _mm512_loadu_ps(s1 + j) : _mm512_setzero_ps();
      _mm512_storeu_si512(d + j, _mm512_permutexvar_epi16(idx, to_bf16(_mm512_loadu_ps(s0 + j), r1)));
    }
  }
}

//! Pair words transposed: dst (p, i) = src (i, p) for i < m, p < np; dst's columns [m, mp) zero.
//! src [m, np] (row stride lds words), dst [np, mp] (row stride ldd words).
inline void transpose_words(const word* src, index_t lds, index_t m, index_t np, index_t mp, word* dst, index_t ldd) {
  for (index_t p = 0; p < np; ++p) {
    word* d = dst + p * ldd;
    for (index_t i = 0; i < m; ++i) d[i] = src[i * lds + p];
    for (index_t i = m; i < mp; ++i) d[i] = 0;
  }
}

//! The lower triangle of an fp32 score matrix as pair words: dst word (i, p) = (A(i,2p), A(i,2p+1)),
//! with A(i, j) taken as 0 for j > i (the causal mask), for p < ⌈m/2⌉ (an odd m's last word padded with
//! 0). src [m, ≥ m] (row stride lds floats), dst [m, ⌈m/2⌉] (row stride ldd words).
inline void pack_lower(const float* src, index_t lds, index_t m, word* dst, index_t ldd) {
  for (index_t i = 0; i < m; ++i) {
    const float* s = src + i * lds;
    word* d = dst + i * ldd;
    const index_t np = (m + 1) / 2;
    for (index_t j = 0; 2 * j < 2 * np; j += 16) {  // j: first pair word of a block of 16 words (32 columns)
      const index_t c0 = 2 * j;                      // first column of the block
      const index_t keep = i + 1 - c0;               // columns [c0, i] are kept
      const __mmask16 lo = keep <= 0 ? 0 : keep >= 16 ? 0xffff : __mmask16((1u << keep) - 1);
      const __mmask16 hi = keep <= 16 ? 0 : keep >= 32 ? 0xffff : __mmask16((1u << (keep - 16)) - 1);
      const __m512i x = to_bf16(_mm512_maskz_loadu_ps(lo, s + c0), _mm512_maskz_loadu_ps(hi, s + c0 + 16));
      const index_t words = np - j < 16 ? np - j : 16;
      _mm512_mask_storeu_epi32(d + j, __mmask16((1u << words) - 1), x);
    }
  }
}

}  // namespace linstate::cpu_detail::bf16dot
#endif
