// linstate/backend/cpu/gemm.hpp — the chunked kernels' small matrix products on AVX2 + FMA and AVX-512 CPUs.
//
// C (m×n, row-major, row stride ldc) = A·B, += A·B or −= A·B, where A (m×k) is read through strides
// (element (i, p) at a[i·rsa + p·csa], so Aᵀ of a row-major matrix costs nothing) and B (k×n) is
// row-major (row stride ldb). fp32 multiply-adds throughout (no lower precision anywhere). Every element
// of C is one chain of fused multiply-adds over p = 0 … k−1 in order, whatever the tile and the vector
// width: the AVX2 and the AVX-512 builds give the same bits.
//
// Why: at the chunk's shapes (64×128 by 128×128, 64×64 by 64×128, …) Eigen 3.4's product reaches
// ~37 % of the FMA peak on an AVX2 Zen 3 core (docs/benchmarks.md, "Issue 13", session 7), where the
// products are ~60 % of the chunked forward. The AVX2 register tile is 6 rows × 16 columns (12 ymm
// accumulators, two B loads and six broadcasts per step of k), no packing: the operands of a chunk
// are in L1/L2 already. With AVX-512 (session 10, Intel Xeon model 207) Eigen's products ran at
// ~60 % of the peak; the tile there is 8 rows × 32 columns (16 zmm accumulators), then 16 columns,
// and the AVX2 tile for a remainder of 8. LINSTATE_NO_GEMM_KERNEL turns the kernels off (Eigen's
// products, and the plain loop below).
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

#include "../../concepts.hpp"

#if defined(__AVX2__) && defined(__FMA__) && !defined(LINSTATE_NO_GEMM_KERNEL)
#define LINSTATE_GEMM_KERNEL 1
#include <immintrin.h>
#else
#define LINSTATE_GEMM_KERNEL 0
#endif
#if LINSTATE_GEMM_KERNEL && defined(__AVX512F__)
#define LINSTATE_GEMM_AVX512 1
#else
#define LINSTATE_GEMM_AVX512 0
#endif

namespace linstate::cpu_detail::gemm {

//! set: C = A·B; add: C += A·B; sub: C −= A·B; scale_add: C = diag(s)·C + A·B, C's row i first
//! multiplied by s[i] and then the product added (two roundings, as a separate scaling pass and then
//! `add` would give: the same bits, one pass over C fewer).
enum mode : int { set = 0, add = 1, sub = 2, scale_add = 3 };

//! What the caller knows of the operands (the chunk's causal matrices are triangular): `full`; A lower
//! triangular (A(i,p) = 0 for p > i: row i's depth ends at i); A upper triangular (A(i,p) = 0 for p < i:
//! row i's depth starts at i); only C's lower triangle with the diagonal is wanted (C(i,j), j ≤ i: the
//! row tiles wholly above a column panel are skipped and hold whatever they held; elements above the
//! diagonal inside a computed tile are written too). The depth ranges are per tile of 6 rows, so the
//! skipped terms are exactly zero products: the result is the full product's, bit for bit.
enum shape : int { full = 0, a_lower = 1, a_upper = 2, c_lower = 3 };

//! An optimisation barrier: x is taken as rounded here, so that the compiler does not contract the
//! multiply before it and the add after it into one fused multiply-add (GCC contracts intrinsics too),
//! which would round once instead of twice and change the bits.
template <class T>
inline void keep_rounded(T& x) {
#if defined(__GNUC__)
  asm("" : "+x"(x));
#else
  (void)x;
#endif
}

//! The row tiles of rows [i0, m): run(std::integral_constant<int, Max>{}, i) for each whole tile of Max
//! rows, then once with the height of the rest (1 … Max − 1), so that every tile height is a kernel of
//! its own, unrolled at compile time. The register-tile kernels' row loops (here and gemm_bf16.hpp).
template <int Max, class Run>
inline void for_row_tiles(index_t m, index_t i0, Run&& run) {
  index_t i = i0;
  for (; i + Max <= m; i += Max) run(std::integral_constant<int, Max>{}, i);
  [&]<int... R>(std::integer_sequence<int, R...>) {
    (void)((m - i == R + 1 && (run(std::integral_constant<int, R + 1>{}, i), true)) || ...);
  }(std::make_integer_sequence<int, Max - 1>{});
}

//! Lines to bring towards the caches while the products run, a few after each register tile: the input rows
//! of the chunk the thread runs next (driver.hpp's lockstep loops), so that reading them from memory overlaps
//! the products instead of stalling the staging loop that loads them (docs/benchmarks.md, "Issue 13, session
//! 16"). Up to 5 arrays; step i of the next chunk reads token tok(i) = token ? token[i] : first + i, and
//! array a's row of token t lies at base[a] + t·stride[a] bytes, `lines[a]` cache lines long (an array the
//! chunk writes, the output rows, with a prefetch for writing: prefetchw where the target has it). Prefetched
//! row by row (every array's row of step i, then of i + 1), one array's row (all its lines) a step, with prefetcht1 (into L2,
//! leaving L1 to the products; on the Zen 3 VM t0 and t1 measured alike within the A/B's ±2 %). Prefetches
//! change no value: the same bits with or without them.
struct prefetch_lines {
  static constexpr index_t line = 64;
  static constexpr int max_arrays = 5;
  const char* base[max_arrays] = {};
  index_t stride[max_arrays] = {}, lines[max_arrays] = {};
  bool write[max_arrays] = {};
  const index_t* token = nullptr;
  index_t first = 0, rows = 0;  // rows: the steps to prefetch (0: none)
  int arrays = 0;
  index_t r = 0;  // the cursor: step r, array a
  int a = 0;
  //! Names the next chunk: its steps [i0, i0 + n) of a stream (token: the stream's token list or null,
  //! first: its first token); the arrays are added after.
  void start(const index_t* tok, index_t tok_first, index_t i0, index_t n) {
    token = tok ? tok + i0 : nullptr, first = tok_first + i0, rows = n, arrays = 0, r = 0, a = 0;
  }
  void clear() { rows = 0, arrays = 0; }
  //! Appends one array: p at token 0, stride_bytes between tokens, `bytes` read (or written: w) per token.
  void add(const void* p, index_t stride_bytes, index_t bytes, bool w = false) {
    if (bytes <= 0 || arrays == max_arrays) return;
    base[arrays] = static_cast<const char*>(p), stride[arrays] = stride_bytes, lines[arrays] = (bytes + line - 1) / line;
    write[arrays] = w;
    ++arrays;
  }
  //! One array's row of one step (all its lines, unrolled by the compiler for the usual 8), then the next array's
  //! row on the next call: one address computation per row instead of per line.
  void step() {
    if (r >= rows || arrays == 0) return;
#if LINSTATE_GEMM_KERNEL
    const index_t t = token ? token[r] : first + r;
    const char* const p = base[a] + t * stride[a];
    const index_t n = lines[a];
    if (write[a])
      for (index_t i = 0; i < n; ++i) __builtin_prefetch(p + i * line, 1, 2);
    else
      for (index_t i = 0; i < n; ++i) __builtin_prefetch(p + i * line, 0, 2);  // prefetcht1
#endif
    if (++a == arrays) a = 0, ++r;
  }
};

#if LINSTATE_GEMM_KERNEL
//! Stores one accumulator into C by the mode.
template <int Mode>
inline void put(float* cp, __m256 acc, __m256 s) {
  if constexpr (Mode == set) _mm256_storeu_ps(cp, acc);
  else if constexpr (Mode == add) _mm256_storeu_ps(cp, _mm256_add_ps(_mm256_loadu_ps(cp), acc));
  else if constexpr (Mode == scale_add) {
    __m256 x = _mm256_mul_ps(_mm256_loadu_ps(cp), s);
    keep_rounded(x);
    _mm256_storeu_ps(cp, _mm256_add_ps(x, acc));
  }
  else _mm256_storeu_ps(cp, _mm256_sub_ps(_mm256_loadu_ps(cp), acc));
}

//! MR (≤ 6) rows × (NV·8, NV ≤ 2) columns of C, full depth k. The accumulators are named variables,
//! not an array: GCC 12 keeps an array of __m256 on the stack and stores it on every step of k.
template <int Mode, int MR, int NV>
inline void tile(index_t k, const float* __restrict a, index_t rsa, index_t csa, const float* __restrict b, index_t ldb,
                 float* __restrict c, index_t ldc, const float* __restrict rs) {
  static_assert(MR >= 1 && MR <= 6 && (NV == 1 || NV == 2));
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  const float* a0 = a;
  const float* a1 = a + rsa;
  const float* a2 = a + 2 * rsa;
  const float* a3 = a + 3 * rsa;
  const float* a4 = a + 4 * rsa;
  const float* a5 = a + 5 * rsa;
  for (index_t p = 0; p < k; ++p) {
    const float* bp = b + p * ldb;
    const index_t o = p * csa;
    const __m256 b0 = _mm256_loadu_ps(bp);
    const __m256 b1 = NV == 2 ? _mm256_loadu_ps(bp + 8) : b0;
#define LINSTATE_GEMM_ROW(r)                                          \
  if constexpr (MR > r) {                                             \
    const __m256 ar = _mm256_broadcast_ss(a##r + o);                  \
    c##r##0 = _mm256_fmadd_ps(ar, b0, c##r##0);                       \
    if constexpr (NV == 2) c##r##1 = _mm256_fmadd_ps(ar, b1, c##r##1); \
  }
    LINSTATE_GEMM_ROW(0)
    LINSTATE_GEMM_ROW(1)
    LINSTATE_GEMM_ROW(2)
    LINSTATE_GEMM_ROW(3)
    LINSTATE_GEMM_ROW(4)
    LINSTATE_GEMM_ROW(5)
#undef LINSTATE_GEMM_ROW
  }
#define LINSTATE_GEMM_PUT(r)                                           \
  if constexpr (MR > r) {                                              \
    const __m256 sr = Mode == scale_add ? _mm256_set1_ps(rs[r]) : c00; \
    put<Mode>(c + r * ldc, c##r##0, sr);                               \
    if constexpr (NV == 2) put<Mode>(c + r * ldc + 8, c##r##1, sr);    \
  }
  LINSTATE_GEMM_PUT(0)
  LINSTATE_GEMM_PUT(1)
  LINSTATE_GEMM_PUT(2)
  LINSTATE_GEMM_PUT(3)
  LINSTATE_GEMM_PUT(4)
  LINSTATE_GEMM_PUT(5)
#undef LINSTATE_GEMM_PUT
}

//! Rows [i0, m) of C for one panel of NV·8 columns, in tiles of 6 rows (the last one shorter); each
//! tile's depth is [0, k) or, for a triangular A, the part of it where the tile's rows can be non-zero.
//! After each tile, a few of `pf`'s lines are prefetched (when given).
template <int Mode, int NV, int Shape>
inline void rows(index_t m, index_t k, const float* a, index_t rsa, index_t csa, const float* b, index_t ldb, float* c,
                 index_t ldc, index_t i0, const float* rs, prefetch_lines* pf) {
  auto run = [&]<int MR>(std::integral_constant<int, MR>, index_t i) {
    index_t k0 = 0, k1 = k;
    if constexpr (Shape == a_lower) k1 = i + MR < k ? i + MR : k;
    if constexpr (Shape == a_upper) k0 = i < k ? i : k;
    tile<Mode, MR, NV>(k1 - k0, a + i * rsa + k0 * csa, rsa, csa, b + k0 * ldb, ldb, c + i * ldc, ldc, rs + i);
    if (pf) pf->step();
  };
  for_row_tiles<6>(m, i0, run);
}

#if LINSTATE_GEMM_AVX512
//! Stores one zmm accumulator into C by the mode.
template <int Mode>
inline void put16(float* cp, __m512 acc, __m512 s) {
  if constexpr (Mode == set) _mm512_storeu_ps(cp, acc);
  else if constexpr (Mode == add) _mm512_storeu_ps(cp, _mm512_add_ps(_mm512_loadu_ps(cp), acc));
  else if constexpr (Mode == scale_add) {
    __m512 x = _mm512_mul_ps(_mm512_loadu_ps(cp), s);
    keep_rounded(x);
    _mm512_storeu_ps(cp, _mm512_add_ps(x, acc));
  }
  else _mm512_storeu_ps(cp, _mm512_sub_ps(_mm512_loadu_ps(cp), acc));
}

//! MR (≤ 8) rows × (NV·16, NV ≤ 2) columns of C, full depth k, zmm accumulators (named, as above).
template <int Mode, int MR, int NV>
inline void tile16(index_t k, const float* __restrict a, index_t rsa, index_t csa, const float* __restrict b, index_t ldb,
                   float* __restrict c, index_t ldc, const float* __restrict rs) {
  static_assert(MR >= 1 && MR <= 8 && (NV == 1 || NV == 2));
  __m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00;
  __m512 c40 = c00, c41 = c00, c50 = c00, c51 = c00, c60 = c00, c61 = c00, c70 = c00, c71 = c00;
  const float* a0 = a;
  const float* a1 = a + rsa;
  const float* a2 = a + 2 * rsa;
  const float* a3 = a + 3 * rsa;
  const float* a4 = a + 4 * rsa;
  const float* a5 = a + 5 * rsa;
  const float* a6 = a + 6 * rsa;
  const float* a7 = a + 7 * rsa;
  for (index_t p = 0; p < k; ++p) {
    const float* bp = b + p * ldb;
    const index_t o = p * csa;
    const __m512 b0 = _mm512_loadu_ps(bp);
    const __m512 b1 = NV == 2 ? _mm512_loadu_ps(bp + 16) : b0;
#define LINSTATE_GEMM_ROW16(r)                                        \
  if constexpr (MR > r) {                                             \
    const __m512 ar = _mm512_set1_ps(a##r[o]);                        \
    c##r##0 = _mm512_fmadd_ps(ar, b0, c##r##0);                       \
    if constexpr (NV == 2) c##r##1 = _mm512_fmadd_ps(ar, b1, c##r##1); \
  }
    LINSTATE_GEMM_ROW16(0)
    LINSTATE_GEMM_ROW16(1)
    LINSTATE_GEMM_ROW16(2)
    LINSTATE_GEMM_ROW16(3)
    LINSTATE_GEMM_ROW16(4)
    LINSTATE_GEMM_ROW16(5)
    LINSTATE_GEMM_ROW16(6)
    LINSTATE_GEMM_ROW16(7)
#undef LINSTATE_GEMM_ROW16
  }
#define LINSTATE_GEMM_PUT16(r)                                          \
  if constexpr (MR > r) {                                               \
    const __m512 sr = Mode == scale_add ? _mm512_set1_ps(rs[r]) : c00;  \
    put16<Mode>(c + r * ldc, c##r##0, sr);                              \
    if constexpr (NV == 2) put16<Mode>(c + r * ldc + 16, c##r##1, sr);  \
  }
  LINSTATE_GEMM_PUT16(0)
  LINSTATE_GEMM_PUT16(1)
  LINSTATE_GEMM_PUT16(2)
  LINSTATE_GEMM_PUT16(3)
  LINSTATE_GEMM_PUT16(4)
  LINSTATE_GEMM_PUT16(5)
  LINSTATE_GEMM_PUT16(6)
  LINSTATE_GEMM_PUT16(7)
#undef LINSTATE_GEMM_PUT16
}

//! Rows [i0, m) of C for one panel of NV·16 columns, in tiles of 8 rows (the last one shorter); depths
//! as rows() above.
template <int Mode, int NV, int Shape>
inline void rows16(index_t m, index_t k, const float* a, index_t rsa, index_t csa, const float* b, index_t ldb, float* c,
                   index_t ldc, index_t i0, const float* rs, prefetch_lines* pf) {
  auto run = [&]<int MR>(std::integral_constant<int, MR>, index_t i) {
    index_t k0 = 0, k1 = k;
    if constexpr (Shape == a_lower) k1 = i + MR < k ? i + MR : k;
    if constexpr (Shape == a_upper) k0 = i < k ? i : k;
    tile16<Mode, MR, NV>(k1 - k0, a + i * rsa + k0 * csa, rsa, csa, b + k0 * ldb, ldb, c + i * ldc, ldc, rs + i);
    if (pf) pf->step();
  };
  for_row_tiles<8>(m, i0, run);
}
#endif
#endif

#if LINSTATE_GEMM_KERNEL
//! dst (8×8, row stride ldd) = srcᵀ (8×8, row stride lds): unpack, shuffle, then swap the 128-bit halves.
inline void transpose8(const float* __restrict s, index_t lds, float* __restrict d, index_t ldd) {
  const __m256 r0 = _mm256_loadu_ps(s), r1 = _mm256_loadu_ps(s + lds), r2 = _mm256_loadu_ps(s + 2 * lds),
               r3 = _mm256_loadu_ps(s + 3 * lds), r4 = _mm256_loadu_ps(s + 4 * lds), r5 = _mm256_loadu_ps(s + 5 * lds),
               r6 = _mm256_loadu_ps(s + 6 * lds), r7 = _mm256_loadu_ps(s + 7 * lds);
  const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3),
               t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
               t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee),
               u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee),
               u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee),
               u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee);
  _mm256_storeu_ps(d, _mm256_permute2f128_ps(u0, u4, 0x20));
  _mm256_storeu_ps(d + ldd, _mm256_permute2f128_ps(u1, u5, 0x20));
  _mm256_storeu_ps(d + 2 * ldd, _mm256_permute2f128_ps(u2, u6, 0x20));
  _mm256_storeu_ps(d + 3 * ldd, _mm256_permute2f128_ps(u3, u7, 0x20));
  _mm256_storeu_ps(d + 4 * ldd, _mm256_permute2f128_ps(u0, u4, 0x31));
  _mm256_storeu_ps(d + 5 * ldd, _mm256_permute2f128_ps(u1, u5, 0x31));
  _mm256_storeu_ps(d + 6 * ldd, _mm256_permute2f128_ps(u2, u6, 0x31));
  _mm256_storeu_ps(d + 7 * ldd, _mm256_permute2f128_ps(u3, u7, 0x31));
}
#endif

#if LINSTATE_GEMM_KERNEL
//! transpose8, and besides d2 (8×8, row stride ld2) = s ⊙ scale (column j of the block times scale[j]), from the
//! rows transpose8 loads: one multiplication per element, as Eigen's `X * scale.asDiagonal()` rounds it.
inline void transpose8_scale(const float* __restrict s, index_t lds, float* __restrict d, index_t ldd,
                             const float* __restrict scale, float* __restrict d2, index_t ld2) {
  const __m256 f = _mm256_loadu_ps(scale);
  for (int r = 0; r < 8; ++r) _mm256_storeu_ps(d2 + r * ld2, _mm256_mul_ps(_mm256_loadu_ps(s + r * lds), f));
  transpose8(s, lds, d, ldd);
}
#endif

//! dst (n×m, row stride ldd) = srcᵀ, src m×n (row stride lds): the kernels' operand transposes (a pure
//! copy, so the same bits as Eigen's `= X.transpose()`, which on row-major operands took 3.0–9.8 µs for
//! 64×128 against 1.1–1.4 µs in 8×8 blocks here: docs/benchmarks.md "Issue 13, session 10").
inline void transpose(index_t m, index_t n, const float* __restrict src, index_t lds, float* __restrict dst, index_t ldd) {
  index_t i = 0;
#if LINSTATE_GEMM_KERNEL
  for (; i + 8 <= m; i += 8) {
    index_t j = 0;
    for (; j + 8 <= n; j += 8) transpose8(src + i * lds + j, lds, dst + j * ldd + i, ldd);
    for (; j < n; ++j)
      for (index_t r = i; r < i + 8; ++r) dst[j * ldd + r] = src[r * lds + j];
  }
#endif
  for (; i < m; ++i)
    for (index_t j = 0; j < n; ++j) dst[j * ldd + i] = src[i * lds + j];
}

//! transpose(), and besides dst2 (m×n, row stride ld2) = src ⊙ scale (src(i, j)·scale[j], one rounding: the
//! same bits as Eigen's `src * scale.asDiagonal()`), while the blocks are in registers: the chunked forward's
//! K ⊙ e^{−Γ} transposed for the scores and times e^{γ} for the state update in one pass over it.
inline void transpose_scale(index_t m, index_t n, const float* __restrict src, index_t lds, float* __restrict dst, index_t ldd,
                            const float* __restrict scale, float* __restrict dst2, index_t ld2) {
  index_t i = 0;
#if LINSTATE_GEMM_KERNEL
  for (; i + 8 <= m; i += 8) {
    index_t j = 0;
    for (; j + 8 <= n; j += 8) transpose8_scale(src + i * lds + j, lds, dst + j * ldd + i, ldd, scale + j, dst2 + i * ld2 + j, ld2);
    for (; j < n; ++j)
      for (index_t r = i; r < i + 8; ++r) dst[j * ldd + r] = src[r * lds + j], dst2[r * ld2 + j] = src[r * lds + j] * scale[j];
  }
#endif
  for (; i < m; ++i)
    for (index_t j = 0; j < n; ++j) dst[j * ldd + i] = src[i * lds + j], dst2[i * ld2 + j] = src[i * lds + j] * scale[j];
}

//! C (m×n) = / += / −= A (m×k) · B (k×n), or = diag(row_scale)·C + A·B (scale_add, row_scale [m]); see
//! the file comment for the layouts, and `shape` for what a triangular operand saves.
template <int Mode, int Shape = full>
inline void product(index_t m, index_t n, index_t k, const float* a, index_t rsa, index_t csa, const float* b, index_t ldb,
                    float* c, index_t ldc, const float* row_scale = nullptr, prefetch_lines* pf = nullptr) {
  if (m <= 0 || n <= 0) return;
  (void)pf;  // read by the kernels' row loops only
  const float* rs = row_scale;
  if constexpr (Mode != scale_add) rs = b;  // unread (an address that rows() may offset harmlessly)
  index_t j = 0;
#if LINSTATE_GEMM_AVX512
  // c_lower: a panel of columns [j, j+w) starts at the first tile of 8 rows that reaches row j
  auto first8 = [](index_t jj) { return Shape == c_lower ? jj / 8 * 8 : index_t{0}; };
  for (; j + 32 <= n; j += 32) rows16<Mode, 2, Shape>(m, k, a, rsa, csa, b + j, ldb, c + j, ldc, first8(j), rs, pf);
  for (; j + 16 <= n; j += 16) rows16<Mode, 1, Shape>(m, k, a, rsa, csa, b + j, ldb, c + j, ldc, first8(j), rs, pf);
#endif
#if LINSTATE_GEMM_KERNEL
  // c_lower: a panel of columns [j, j+w) starts at the first tile of 6 rows that reaches row j
  auto first = [](index_t jj) { return Shape == c_lower ? jj / 6 * 6 : index_t{0}; };
  for (; j + 16 <= n; j += 16) rows<Mode, 2, Shape>(m, k, a, rsa, csa, b + j, ldb, c + j, ldc, first(j), rs, pf);
  for (; j + 8 <= n; j += 8) rows<Mode, 1, Shape>(m, k, a, rsa, csa, b + j, ldb, c + j, ldc, first(j), rs, pf);
#endif
  for (index_t i = 0; i < m; ++i)  // the columns left over (all of them without AVX2)
    for (index_t jj = j; jj < n; ++jj) {
      float s = 0.f;
      for (index_t p = 0; p < k; ++p) s += a[i * rsa + p * csa] * b[p * ldb + jj];
      float& x = c[i * ldc + jj];
      if constexpr (Mode == set) x = s;
      else if constexpr (Mode == add) x += s;
      else if constexpr (Mode == scale_add) {
        float y = x * row_scale[i];
        keep_rounded(y);
        x = y + s;
      }
      else x -= s;
    }
}

}  // namespace linstate::cpu_detail::gemm
