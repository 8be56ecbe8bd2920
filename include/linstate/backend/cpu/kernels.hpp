// linstate/backend/cpu/kernels.hpp — the CPU kernels for one (sequence, head, partition) stream.
//
// A *stream* is the ordered list of tokens one partition state sees, with per-token write/read
// weights. GLA and the shared partition see every token of the sequence with weight 1. A routed SSE
// partition sees every token with its router weights (mask strategy: unselected tokens carry
// write = read = 0) or only the tokens that select it (varlen strategy). One kernel serves all.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "../../concepts.hpp"
#include "../../dynamic.hpp"
#include "../../detail/numeric.hpp"
#include "../../detail/phase_timer.hpp"
#include "../../detail/problem.hpp"
#include "../../detail/router.hpp"
#include "exp.hpp"
#include "gemm.hpp"
#include "gemm_bf16.hpp"

namespace linstate::cpu_detail {

using detail::problem;
//! What the CPU kernels ask of a decay policy: its family and the extent of its gate (traits only;
//! linstate/transition.hpp).
using detail::decay_head;
using detail::decay_key;
using detail::decay_none;
using detail::is_delta;

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using RowVec = Eigen::Matrix<float, 1, Eigen::Dynamic>;

//! The ordered tokens one partition state sees.
struct stream {
  index_t n = 0;                         // steps
  const index_t* token = nullptr;        // [n] flat token index (b*T + t) (nullptr: first + i)
  const float* cw = nullptr;             // [n] write weight (nullptr: 1)
  const float* cr = nullptr;             // [n] read weight (nullptr: 1)
  const std::uint8_t* flags = nullptr;   // [n] detail::route_write | route_read (nullptr: both)
  index_t first = 0;                     // without `token`: the flat token of step 0 (consecutive tokens)

  index_t tok(index_t i) const { return token ? token[i] : first + i; }
  std::uint8_t flag(index_t i) const { return flags ? flags[i] : std::uint8_t(detail::route_write | detail::route_read); }
  float wgt_w(index_t i) const { return cw ? cw[i] : 1.f; }
  float wgt_r(index_t i) const { return cr ? cr[i] : 1.f; }
};

//! The tensors feeding one family of partitions (the shared one, or the routed/single ones).
template <class Scalar>
struct source {
  const Scalar* q = nullptr;     // [B,T,H,K]
  const Scalar* k = nullptr;     // [B,T,H,K]
  const Scalar* g = nullptr;     // [B,T,HV,K] or [B,T,HV] or null
  const Scalar* beta = nullptr;  // [B,T,HV] or null
  const Scalar* v = nullptr;     // [B,T,HV,V]
};

//! Where one stream's work lands.
struct target {
  index_t h = 0, hv = 0;   // key head, value head
  float* state = nullptr;  // [K,V] fp32, updated in place
  float* o_acc = nullptr;  // [len, V] fp32 accumulator of the sequence, row (t - tok0)
  index_t tok0 = 0;        // first flat token of the sequence
  index_t ld = 0;          // the state's row stride in floats (0: V); read by the chunked kernels only
};

//! dst[0:n] = float(src[0:n]) · mul (vectorised conversion for bf16/fp16 through Eigen's packet casts;
//! bf16 on AVX-512 by hand: a bf16 is the top half of its fp32, so the conversion is a zero-extension and
//! a shift, exact, and the product the same one rounding as Eigen's)
template <class Scalar>
inline void load(const Scalar* __restrict src, float* __restrict dst, index_t n, float mul = 1.f) {
  if constexpr (std::is_same_v<Scalar, float>) {
    for (index_t i = 0; i < n; ++i) dst[i] = src[i] * mul;
#if defined(__AVX512F__)
  } else if constexpr (std::is_same_v<Scalar, Eigen::bfloat16>) {
    const __m512 m = _mm512_set1_ps(mul);
    index_t i = 0;
    for (; i + 16 <= n; i += 16) {
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
      _mm512_storeu_ps(dst + i, _mm512_mul_ps(_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)), m));
    }
    for (; i < n; ++i) dst[i] = static_cast<float>(src[i]) * mul;
#endif
  } else {
    Eigen::Map<Eigen::ArrayXf>(dst, n) = Eigen::Map<const Eigen::Array<Scalar, Eigen::Dynamic, 1>>(src, n).template cast<float>() * mul;
  }
}

//! x ← x / sqrt(Σx² + 1e-6) (SPEC §3.1, fla's l2norm eps). On AVX2 + FMA the sum of squares in four 8-lane
//! partial sums (GCC does not vectorise the float reduction of the plain loop, which then waits on one add
//! per element: a fifth of the gated delta rule's chunked forward), combined in a fixed order whatever the
//! pointer's alignment, so every path and thread gets the same bits for the same row.
inline void l2normalize(float* x, index_t n) {
  float s = 0.f;
  index_t i = 0;
#if LINSTATE_GEMM_KERNEL
  if (n >= 32) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (; i + 32 <= n; i += 32) {
      const __m256 x0 = _mm256_loadu_ps(x + i), x1 = _mm256_loadu_ps(x + i + 8), x2 = _mm256_loadu_ps(x + i + 16),
                   x3 = _mm256_loadu_ps(x + i + 24);
      a0 = _mm256_fmadd_ps(x0, x0, a0), a1 = _mm256_fmadd_ps(x1, x1, a1);
      a2 = _mm256_fmadd_ps(x2, x2, a2), a3 = _mm256_fmadd_ps(x3, x3, a3);
    }
    const __m256 a = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    s = _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
  }
#endif
  for (; i < n; ++i) s += x[i] * x[i];
  const float r = 1.f / std::sqrt(s + 1e-6f);
  for (i = 0; i < n; ++i) x[i] *= r;
}

#if LINSTATE_GEMM_KERNEL
//! The recurrent kernel's steps with their vector accumulators in registers (issue 13, sessions 9 and
//! 22): by column blocks of NB vectors (zmm of 16 floats on AVX-512 builds, ymm of 8 on AVX2), each
//! block's accumulators — o, and the delta rule's hᵀk, then u — held over the K rows, where the row
//! loops load and store them for every row. Per element the same operations as GCC compiles the row
//! loops to (it contracts `a·x + b·y` into fma(x, a, b·y), `o += q·h` into fma(h, q, o) and
//! `b·(v − d·s)` into b·fnmadd(d, s, v)), in the same order over the rows: the same bits
//! (tests/unit/test_decode_alloc.cpp checks every path against the fp64 reference; docs/benchmarks.md,
//! "Issue 13, session 22", the paths' bits against each other). A diagonal block is up to 8 vectors
//! (64 columns on AVX2, 128 on AVX-512: with V ≤ 128 a whole row, so a step still sweeps the state once,
//! in order, and the driver takes it for streamed states too); a delta-rule block up to 8 zmm or 4 ymm
//! (its update pass holds u and o: 2·NB of AVX2's 16 registers).
namespace zstep {
#if LINSTATE_GEMM_AVX512
struct vec {
  using T = __m512;
  static constexpr int lanes = 16, diagonal_nb = 8, delta_nb = 8;
  static T zero() { return _mm512_setzero_ps(); }
  static T set1(float x) { return _mm512_set1_ps(x); }
  static T load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, T x) { _mm512_storeu_ps(p, x); }
  static T mul(T a, T b) { return _mm512_mul_ps(a, b); }
  static T fmadd(T a, T b, T c) { return _mm512_fmadd_ps(a, b, c); }
  static T fnmadd(T a, T b, T c) { return _mm512_fnmadd_ps(a, b, c); }
};
#else
struct vec {
  using T = __m256;
  static constexpr int lanes = 8, diagonal_nb = 8, delta_nb = 4;
  static T zero() { return _mm256_setzero_ps(); }
  static T set1(float x) { return _mm256_set1_ps(x); }
  static T load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, T x) { _mm256_storeu_ps(p, x); }
  static T mul(T a, T b) { return _mm256_mul_ps(a, b); }
  static T fmadd(T a, T b, T c) { return _mm256_fmadd_ps(a, b, c); }
  static T fnmadd(T a, T b, T c) { return _mm256_fnmadd_ps(a, b, c); }
};
#endif
//! Floats per vector: V must be a multiple of it.
inline constexpr int L = vec::lanes;

#define LINSTATE_Z8(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
#define LINSTATE_ZDECL(n) \
  vec::T n##0 = vec::zero(), n##1 = n##0, n##2 = n##0, n##3 = n##0, n##4 = n##0, n##5 = n##0, n##6 = n##0, n##7 = n##0
#define LINSTATE_ZLOAD(c) \
  if constexpr (c < NB) o##c = vec::load(o + L * c);
#define LINSTATE_ZSTORE(c) \
  if constexpr (c < NB) vec::store(o + L * c, o##c);

//! The diagonal family's written and read step on columns [0, L·NB) of the state rows at `row` (row
//! stride V): h[a, j] = g[a]·h[a, j] + k[a]·v[j] ; o[j] += q[a]·h[a, j].
template <int NB>
inline void diagonal_block(float* __restrict row, const float* __restrict g, const float* __restrict k,
                           const float* __restrict q, const float* __restrict v, float* __restrict o, index_t K,
                           index_t V) {
  LINSTATE_ZDECL(o);
  LINSTATE_Z8(LINSTATE_ZLOAD)
  for (index_t a = 0; a < K; ++a, row += V) {
    const vec::T ga = vec::set1(g[a]), ka = vec::set1(k[a]), qa = vec::set1(q[a]);
#define LINSTATE_ZCOL(c)                                         \
  if constexpr (c < NB) {                                        \
    vec::T kv = vec::mul(ka, vec::load(v + L * c));              \
    gemm::keep_rounded(kv);                                      \
    const vec::T h = vec::fmadd(vec::load(row + L * c), ga, kv); \
    vec::store(row + L * c, h);                                  \
    o##c = vec::fmadd(h, qa, o##c);                              \
  }
    LINSTATE_Z8(LINSTATE_ZCOL)
#undef LINSTATE_ZCOL
  }
  LINSTATE_Z8(LINSTATE_ZSTORE)
}

//! The delta rule's step (SPEC §3.1) on columns [0, L·NB) of the state rows at `rows` (row stride V),
//! with d = e^{g} and b = β (times the write weight):
//!   s = hᵀk (read pass) ;  u = b·(v − d·s) ;  h[a, :] = d·h[a, :] + k[a]·u ;  o += q[a]·h[a, :] if Read.
template <int NB, bool Read>
inline void delta_block(float* __restrict rows, const float* __restrict k, const float* __restrict q,
                        const float* __restrict v, float* __restrict o, float d, float b, index_t K, index_t V) {
  LINSTATE_ZDECL(s);
  const float* row = rows;
  for (index_t a = 0; a < K; ++a, row += V) {
    const vec::T ka = vec::set1(k[a]);
#define LINSTATE_ZDOT(c) \
  if constexpr (c < NB) s##c = vec::fmadd(ka, vec::load(row + L * c), s##c);
    LINSTATE_Z8(LINSTATE_ZDOT)
#undef LINSTATE_ZDOT
  }
  const vec::T dd = vec::set1(d), bb = vec::set1(b);
#define LINSTATE_ZU(c) \
  if constexpr (c < NB) s##c = vec::mul(bb, vec::fnmadd(dd, s##c, vec::load(v + L * c)));
  LINSTATE_Z8(LINSTATE_ZU)  // s now holds u
#undef LINSTATE_ZU
  LINSTATE_ZDECL(o);
  if constexpr (Read) {
    LINSTATE_Z8(LINSTATE_ZLOAD)
  }
  float* __restrict w = rows;
  for (index_t a = 0; a < K; ++a, w += V) {
    const vec::T ka = vec::set1(k[a]), qa = vec::set1(Read ? q[a] : 0.f);
#define LINSTATE_ZUPD(c)                                       \
  if constexpr (c < NB) {                                      \
    vec::T ku = vec::mul(ka, s##c);                            \
    gemm::keep_rounded(ku);                                    \
    const vec::T h = vec::fmadd(vec::load(w + L * c), dd, ku); \
    vec::store(w + L * c, h);                                  \
    if constexpr (Read) o##c = vec::fmadd(h, qa, o##c);        \
  }
    LINSTATE_Z8(LINSTATE_ZUPD)
#undef LINSTATE_ZUPD
  }
  if constexpr (Read) {
    LINSTATE_Z8(LINSTATE_ZSTORE)
  }
}
#undef LINSTATE_ZSTORE
#undef LINSTATE_ZLOAD
#undef LINSTATE_ZDECL
#undef LINSTATE_Z8

//! f(std::integral_constant<int, NB>{}, j0) over column blocks [j0, j0 + L·NB) covering [0, V): blocks of
//! Max vectors, then one of the rest. V a multiple of L.
template <int Max, class F>
inline void by_column_blocks(index_t V, F&& f) {
  index_t j = 0;
  for (; j + L * Max <= V; j += L * Max) f(std::integral_constant<int, Max>{}, j);
  const index_t rest = (V - j) / L;
  [&]<int... N>(std::integer_sequence<int, N...>) {
    (void)((rest == N + 1 ? (f(std::integral_constant<int, N + 1>{}, j), true) : false) || ...);
  }(std::make_integer_sequence<int, Max - 1>{});
}

inline void diagonal_step(float* hs, const float* g, const float* k, const float* q, const float* v, float* o,
                          index_t K, index_t V) {
  by_column_blocks<vec::diagonal_nb>(
      V, [&](auto nb, index_t j) { diagonal_block<nb()>(hs + j, g, k, q, v + j, o + j, K, V); });
}
inline void delta_step(float* hs, const float* k, const float* q, const float* v, float* o, float d, float b,
                       bool read, index_t K, index_t V) {
  by_column_blocks<vec::delta_nb>(V, [&](auto nb, index_t j) {
    if (read) delta_block<nb(), true>(hs + j, k, q, v + j, o + j, d, b, K, V);
    else delta_block<nb(), false>(hs + j, k, q, v + j, o + j, d, b, K, V);
  });
}
}  // namespace zstep
#endif

//! Per-thread scratch of the recurrent kernel (sized once per task, never per token).
struct recurrent_scratch {
  //! The diagonal family's written and read steps by column blocks (zstep::diagonal_step): set by the
  //! driver for calls whose states stay in this core's caches from step to step (small decode calls);
  //! a call that streams its states from memory keeps the row-by-row pass (one sequential sweep), but on
  //! AVX-512 builds with V ≤ 128, where one block is a whole row.
  bool blocked = false;
  std::vector<float> q, k, v, hk, u;
  // e^{g}: aligned to Eigen's packet alignment, so that its vectorised exp (which starts with scalar
  // steps up to the first aligned element) treats every element alike whichever thread's buffer it is:
  // the results would otherwise depend, by an ulp, on which thread ran the task.
  std::vector<float, Eigen::aligned_allocator<float>> g;
  void reserve(index_t K, index_t V) {
    q.resize(static_cast<std::size_t>(K)), k.resize(static_cast<std::size_t>(K)), g.resize(static_cast<std::size_t>(K));
    v.resize(static_cast<std::size_t>(V)), hk.resize(static_cast<std::size_t>(V)), u.resize(static_cast<std::size_t>(V));
  }
};

//! Token-by-token recurrence (SPEC §2.1, §3.1, §4.5) over one stream. The state row i is updated and
//! read in the same pass: h[i,:] = a_i h[i,:] + k_i v ;  o += q_i h[i,:]. Unwritten steps leave the
//! state untouched (bit-identical freeze, SPEC §8.5).
template <class D, class Scalar>
void run_recurrent(const problem& pb, const source<Scalar>& src, const stream& st, const target& tg,
                   recurrent_scratch& sc) {
  const index_t K = pb.K, V = pb.V, H = pb.H, HV = pb.HV;
  float* __restrict hs = tg.state;
  float* __restrict q = sc.q.data();
  float* __restrict k = sc.k.data();
  float* __restrict g = sc.g.data();
  float* __restrict v = sc.v.data();
  for (index_t i = 0; i < st.n; ++i) {
    const index_t t = st.tok(i);
    const std::uint8_t f = st.flag(i);
    const bool w = f & detail::route_write, r = f & detail::route_read;
    if (!w && !r) continue;
    float* __restrict o = tg.o_acc + (t - tg.tok0) * V;
    const float cr = st.wgt_r(i), cw = st.wgt_w(i);
    load(src.q + (t * H + tg.h) * K, q, K);
    if constexpr (is_delta<D>) {
      if (D::l2norm_qk) l2normalize(q, K);
    }
    for (index_t a = 0; a < K; ++a) q[a] *= pb.scale * cr;
    if (!w) {  // read only
      for (index_t a = 0; a < K; ++a) {
        const float qa = q[a];
        const float* __restrict row = hs + a * V;
        for (index_t j = 0; j < V; ++j) o[j] += qa * row[j];
      }
      continue;
    }
    load(src.v + (t * HV + tg.hv) * V, v, V);
    if constexpr (is_delta<D>) {
      load(src.k + (t * H + tg.h) * K, k, K);
      if (D::l2norm_qk) l2normalize(k, K);
      const float decay = std::exp(detail::to_float(D::log_decay(src.g + t * HV + tg.hv, 0)));
      const float b = D::write_strength(detail::to_float(src.beta[t * HV + tg.hv]), cw);  // SPEC §11 C9: the write gate scales β
#if LINSTATE_GEMM_KERNEL
      if (V % zstep::L == 0) {  // the same operations with the accumulators in registers (zstep)
        zstep::delta_step(hs, k, q, v, o, decay, b, r, K, V);
        continue;
      }
#endif
      float* __restrict hk = sc.hk.data();
      float* __restrict u = sc.u.data();
      std::fill(hk, hk + V, 0.f);
      for (index_t a = 0; a < K; ++a) {  // hk = hᵀ k  (read pass)
        const float* __restrict row = hs + a * V;
        const float ka = k[a];
        for (index_t j = 0; j < V; ++j) hk[j] += ka * row[j];
      }
      // h'ᵀk = e^g hᵀk, so u = β (v − e^g hᵀk) and the decay folds into the update pass
      for (index_t j = 0; j < V; ++j) u[j] = b * (v[j] - decay * hk[j]);
      for (index_t a = 0; a < K; ++a) {  // h = e^g h + k uᵀ ; o += q_a h[a,:]
        float* __restrict row = hs + a * V;
        const float ka = k[a], qa = q[a];
        if (r)
          for (index_t j = 0; j < V; ++j) {
            row[j] = decay * row[j] + ka * u[j];
            o[j] += qa * row[j];
          }
        else
          for (index_t j = 0; j < V; ++j) row[j] = decay * row[j] + ka * u[j];
      }
    } else {
      load(src.k + (t * H + tg.h) * K, k, K, cw);
      if constexpr (decay_key<D>) {  // e^{g}, vectorised (Eigen's exp: K std::exp calls cost as much as the update)
        load(src.g + (t * HV + tg.hv) * K, g, K);
        exp_in_place(g, K);
      } else if constexpr (decay_head<D>) {
        const float e = std::exp(detail::to_float(D::log_decay(src.g + t * HV + tg.hv, 0)));
        std::fill(g, g + K, e);
      }
#if LINSTATE_GEMM_KERNEL
      if constexpr (!decay_none<D>) {
        // states in cache: column blocks (zstep); on AVX-512 builds with V ≤ 128 a block is a whole row, one
        // sweep, so states streamed from memory take it too
        if (r && V % zstep::L == 0 && (sc.blocked || (LINSTATE_GEMM_AVX512 && V <= 128))) {
          zstep::diagonal_step(hs, g, k, q, v, o, K, V);
          continue;
        }
      }
#endif
      for (index_t a = 0; a < K; ++a) {
        float* __restrict row = hs + a * V;
        const float ka = k[a], qa = q[a];
        if constexpr (decay_none<D>) {
          if (r)
            for (index_t j = 0; j < V; ++j) {
              row[j] += ka * v[j];
              o[j] += qa * row[j];
            }
          else
            for (index_t j = 0; j < V; ++j) row[j] += ka * v[j];
        } else {
          const float ga = g[a];
          if (r)
            for (index_t j = 0; j < V; ++j) {
              row[j] = ga * row[j] + ka * v[j];
              o[j] += qa * row[j];
            }
          else
            for (index_t j = 0; j < V; ++j) row[j] = ga * row[j] + ka * v[j];
        }
      }
    }
  }
}

//! The row stride (floats) the chunked kernels give a scratch matrix of n columns: n + 16 (one cache line
//! more) where n is a multiple of 16 on the kernels' builds (AVX2 and AVX-512). Rows 128 floats (512
//! bytes) apart map onto 8 of a 32 KiB 8-way L1's 64 sets, so a product's 16-column panel of 64 or 128
//! such rows (B, read again by every row tile) does not stay in L1 and the rows of A, B and C evict each
//! other; 16 floats more and successive rows fall on successive sets (docs/benchmarks.md, "Issue 13,
//! session 15"). The 48 KiB 12-way L1 of the AVX-512 Xeon has 64 sets as well: GLA prefill ×0.97 at
//! chunks of 24, ×0.94 at 64 there ("Issue 13, session 22"). Only the layout changes: every element is
//! computed by the same operations.
inline constexpr index_t chunk_row_pad = LINSTATE_GEMM_KERNEL ? 16 : 0;
inline index_t padded_cols(index_t n) { return n % 16 == 0 ? n + chunk_row_pad : n; }
//! The top-left rows × cols of a scratch matrix whose rows may be padded, as an Eigen expression.
using ScratchView = Eigen::Map<RowMat, 0, Eigen::OuterStride<>>;
inline ScratchView scratch_view(RowMat& X, index_t rows, index_t cols) {
  return ScratchView(X.data(), rows, cols, Eigen::OuterStride<>(X.cols()));
}
//! The top-left rows × cols of a scratch matrix whose rows are not padded (X.cols() == cols), as one
//! contiguous block: Eigen's linear traversal runs its packets across the ends of rows, as it did before
//! the padding (the same bits).
inline Eigen::Map<RowMat> contiguous_view(RowMat& X, index_t rows, index_t cols) {
  eigen_assert(X.cols() == cols);
  return Eigen::Map<RowMat>(X.data(), rows, cols);
}

//! Per-thread scratch of the chunked kernel. The matrices' rows are padded (padded_cols): read them through
//! scratch_view, or row by row (X.row(i).data(), X.outerStride()).
struct chunk_scratch {
  RowMat Q, Kc, G, Vc, E, Einv, A, O, Kd, EinvT;
  RowVec gamma, egamma;
  std::vector<double> gsum;  // [K] the running sum Γ of the current chunk, in fp64 (see chunk_log_decays)
  //! The input rows of the chunk this thread runs next, prefetched during this chunk's products (set by
  //! the driver's lockstep loops before each chunk_step; empty: none).
  gemm::prefetch_lines next;
  //! The bf16-product path (linstate::cpu::bf16_products, bf16 inputs, AVX-512 BF16 builds): set by the
  //! driver for each call; its operands as bf16 pair words (gemm_bf16.hpp), sized by reserve_bf16.
  bool bf16_products = false;
  std::vector<std::uint32_t> wQ, wK, wKT, wA, wV, wKd, wH;
  void reserve(index_t C, index_t K, index_t V) {
    const index_t pk = padded_cols(K), pv = padded_cols(V), pc = padded_cols(C);
    Q.resize(C, pk), Kc.resize(C, pk), G.resize(C, pk), Vc.resize(C, pv), E.resize(C, pk), Einv.resize(C, pk);
    A.resize(C, pc), O.resize(C, pv), Kd.resize(C, pk), gamma.resize(K), egamma.resize(K);
    if (LINSTATE_GEMM_KERNEL) EinvT.resize(K, pc);
    gsum.resize(static_cast<std::size_t>(K));
  }
  void reserve_bf16(index_t C, index_t K, index_t V) {
    const auto np = static_cast<std::size_t>((C + 1) / 2), c = static_cast<std::size_t>(C);
    const auto k = static_cast<std::size_t>(K), v = static_cast<std::size_t>(V);
    wQ.resize(c * k / 2), wK.resize(c * k / 2), wKT.resize(k / 2 * c), wA.resize(c * np);  // [C,K/2] ×2, [K/2,C], [C,⌈C/2⌉]
    wV.resize(np * v), wKd.resize(np * k), wH.resize(k / 2 * v);                             // [⌈C/2⌉,V], [⌈C/2⌉,K], [K/2,V]
  }
};

//! λ_t of one written step of the diagonal family, as the chunked kernels read it: the policy's
//! log-decay of every key row (`g_row` = this token's gate row), floored at
//! detail::chunked_log_decay_floor (transition.hpp: why). dst [K]. Returns whether any λ was floored.
template <class D, class Scalar>
inline bool load_log_decay(const Scalar* g_row, float* __restrict dst, index_t K) {
  bool floored = false;
  if constexpr (decay_key<D>) {
    load(g_row, dst, K);  // λ_t[i] = g_t[i] (diagonal_transition::log_decay)
    for (index_t a = 0; a < K; ++a) {
      floored |= detail::below_log_decay_floor(dst[a]);
      dst[a] = detail::chunked_log_decay(dst[a]);
    }
  } else {
    const float l = detail::to_float(D::log_decay(g_row, 0));
    floored = detail::below_log_decay_floor(l);
    std::fill(dst, dst + K, detail::chunked_log_decay(l));
  }
  return floored;
}

//! One written step of the chunked forward's Γ: gs (fp64 running sum, [K]) += λ_t (load_log_decay<D>) and
//! grow = float(gs), each Γ_t rounded once. With fp32 gates of a per-key decay on AVX2, 8 keys at a time by hand
//! (compare, blend, widen, add, narrow: the plain form's operations, which GCC 12 does not vectorise because of
//! the floor's select), so the same bits.
template <class D, class Scalar>
inline void gamma_sum_row(const Scalar* g_row, double* __restrict gs, float* __restrict grow, index_t K) {
#if defined(__AVX2__) && !defined(LINSTATE_NO_GEMM_KERNEL)
  if constexpr (decay_key<D> && std::is_same_v<Scalar, float>) {
    if (K % 8 == 0) {
      const __m256 F = _mm256_set1_ps(detail::chunked_log_decay_floor);
      for (index_t a = 0; a < K; a += 8) {
        const __m256 x = _mm256_loadu_ps(g_row + a);
        const __m256 y = _mm256_blendv_ps(x, F, _mm256_cmp_ps(x, F, _CMP_LT_OQ));  // detail::chunked_log_decay
        const __m256d lo = _mm256_add_pd(_mm256_loadu_pd(gs + a), _mm256_cvtps_pd(_mm256_castps256_ps128(y)));
        const __m256d hi = _mm256_add_pd(_mm256_loadu_pd(gs + a + 4), _mm256_cvtps_pd(_mm256_extractf128_ps(y, 1)));
        _mm256_storeu_pd(gs + a, lo), _mm256_storeu_pd(gs + a + 4, hi);
        _mm256_storeu_ps(grow + a, _mm256_set_m128(_mm256_cvtpd_ps(hi), _mm256_cvtpd_ps(lo)));
      }
      return;
    }
  }
#endif
  load_log_decay<D>(g_row, grow, K);
  for (index_t a = 0; a < K; ++a) gs[a] += grow[a];
  for (index_t a = 0; a < K; ++a) grow[a] = static_cast<float>(gs[a]);
}

//! Largest decay span inside one chunk for which the intra-chunk scores are formed by a single
//! matrix product (Q ⊙ e^{Γ}) (K ⊙ e^{−Γ})ᵀ: factors stay within e^{±40}, far from fp32 overflow,
//! and each product term keeps full relative precision. Stronger decays take the sub-chunked path.
inline constexpr float single_gemm_span = 40.f;
inline constexpr index_t sub_chunk = 16;

//! o_acc[token] += O.row(i) for the steps c0 + i of a chunk that read the partition; the accumulator's
//! rows lie `stride` floats apart (V: one head's accumulator; more: rows of several heads interleaved).
template <int = 0>  // a template, so that a TU that never calls it does not instantiate it
inline void add_read_rows(const stream& st, index_t c0, index_t m, const RowMat& O, const target& tg, index_t V,
                          index_t stride = 0) {
  if (stride == 0) stride = V;
  for (index_t i = 0; i < m; ++i) {
    const index_t s = c0 + i;
    if (!(st.flag(s) & detail::route_read)) continue;
    float* __restrict o = tg.o_acc + (st.tok(s) - tg.tok0) * stride;
    const float* __restrict src = O.row(i).data();
    for (index_t j = 0; j < V; ++j) o[j] += src[j];
  }
}

//! Intra-chunk scores for strong decays (SPEC §2.3 step 2, §8 rules 1–3): sub-chunks of 16 rows;
//! an off-diagonal block (I, J), I > J, is one product with the reference row r = first row of I,
//!   A_IJ = (Q_I ⊙ e^{Γ_I − Γ_r}) (K_J ⊙ e^{Γ_r − Γ_J})ᵀ   (both factors ≤ 1);
//! diagonal blocks are formed element-wise, only for j ≤ t, so no exponent is ever positive.
template <int = 0>  // a template, so that a TU that never calls it does not instantiate it
inline void intra_subchunked(const Eigen::Ref<const RowMat>& Q, const Eigen::Ref<const RowMat>& Kc,
                             const Eigen::Ref<const RowMat>& G, Eigen::Ref<RowMat> A, index_t m) {
  const index_t K = Q.cols();
  A.setZero();
  RowMat QI, KJ;
  for (index_t i0 = 0; i0 < m; i0 += sub_chunk) {
    const index_t ni = std::min(sub_chunk, m - i0);
    if (i0 > 0) {
      QI = Q.middleRows(i0, ni).cwiseProduct(
          (G.middleRows(i0, ni).rowwise() - G.row(i0)).array().exp().matrix());
      for (index_t j0 = 0; j0 < i0; j0 += sub_chunk) {
        KJ = Kc.middleRows(j0, sub_chunk)
                 .cwiseProduct(((-G.middleRows(j0, sub_chunk)).rowwise() + G.row(i0)).array().exp().matrix());
        A.block(i0, j0, ni, sub_chunk).noalias() = QI * KJ.transpose();
      }
    }
    for (index_t t = i0; t < i0 + ni; ++t)
      for (index_t j = i0; j <= t; ++j) {
        float acc = 0.f;
        for (index_t a = 0; a < K; ++a) acc += Q(t, a) * Kc(j, a) * std::exp(G(t, a) - G(j, a));
        A(t, j) = acc;
      }
  }
}

//! One chunk of run_chunked: the steps [c0, c0 + min(C, st.n − c0)) of the stream. Updates the state
//! and, when a step of the chunk reads, leaves its output rows in sc.O.topRows(m) and returns true
//! (the caller adds them where they belong); a chunk with neither reads nor writes returns false.
//! StatesOnly: the state update alone, every step taken as unread (no q, no outputs; returns false): the
//! backward's recomputation of the chunk states, the same operations on the same values as the forward's.
template <class D, bool StatesOnly = false, class Scalar>
bool chunk_step(const problem& pb, const source<Scalar>& src, const stream& st, const target& tg, index_t c0,
                index_t C, chunk_scratch& sc) {
  static_assert(!is_delta<D>, "chunked delta rule: see run_chunked_delta");
  const index_t K = pb.K, V = pb.V, H = pb.H, HV = pb.HV, GW = pb.gate_width();
  const index_t ldh = tg.ld ? tg.ld : V;  // the state's row stride
  Eigen::Map<RowMat, 0, Eigen::OuterStride<>> Hm(tg.state, K, V, Eigen::OuterStride<>(ldh));
  LINSTATE_PHASE_START;  // detail/phase_timer.hpp: compiled out unless LINSTATE_PHASE_TIMERS
  const index_t m = std::min(C, st.n - c0);
  bool any_w = false, any_r = false;
  // fused_exps: e^{±Γ} formed row by row inside the staging loop (the gemm.hpp kernel builds, K a multiple of
  // Eigen's packet so that every row starts aligned, as the whole-matrix evaluation's packets did)
  constexpr index_t packet = Eigen::internal::packet_traits<float>::size;
  [[maybe_unused]] const bool fused_exps = !decay_none<D> && LINSTATE_GEMM_KERNEL && K % packet == 0;
  for (index_t i = 0; i < m; ++i) {
    const index_t s = c0 + i, t = st.tok(s);
    const std::uint8_t f = st.flag(s);
    const bool w = f & detail::route_write, r = !StatesOnly && (f & detail::route_read);
    any_w |= w, any_r |= r;
    float* qrow = sc.Q.row(i).data();
    float* krow = sc.Kc.row(i).data();
    float* vrow = sc.Vc.row(i).data();
    if (r) load(src.q + (t * H + tg.h) * K, qrow, K, pb.scale * st.wgt_r(s));
    else if (!StatesOnly) std::fill(qrow, qrow + K, 0.f);
    if (w) {
      load(src.k + (t * H + tg.h) * K, krow, K, st.wgt_w(s));
      load(src.v + (t * HV + tg.hv) * V, vrow, V);
    } else {
      std::fill(krow, krow + K, 0.f);
      std::fill(vrow, vrow + V, 0.f);
    }
    if constexpr (!decay_none<D>) {
      // Γ: inclusive cumulative sum of the floored λ inside the chunk, summed in fp64 and stored in
      // fp32, so each Γ_t is rounded once (its error does not grow along the chunk)
      float* grow = sc.G.row(i).data();
      double* __restrict gs = sc.gsum.data();
      if (i == 0) std::fill(gs, gs + K, 0.0);
      if (w) gamma_sum_row<D>(src.g + (t * HV + tg.hv) * GW, gs, grow, K);
      else
        for (index_t a = 0; a < K; ++a) grow[a] = static_cast<float>(gs[a]);
      // the row's exponentials while its values are in L1 (fused: no pass over whole chunk matrices
      // afterwards, no E = e^{Γ} matrix): Q ⊙ e^{Γ} into Kd's storage (unread rows: 0), and K ⊙ e^{−Γ}
      // (unwritten rows: 0), which the single-product form uses. Eigen's packet exp on each row, the
      // same operations per element as on the whole matrix (rows are packet-aligned when K is a
      // multiple of the packet: fused_exps). When the chunk's span turns out too large for the single
      // product (span > single_gemm_span), Einv is not read (it may then hold inf or NaN).
      if (fused_exps) {  // exp.hpp: Eigen's packet exp with a cheaper 2^m, the same bits
        if (!StatesOnly) mul_exp_row<1>(grow, qrow, sc.Kd.row(i).data(), K);
        mul_exp_row<-1>(grow, krow, sc.Einv.row(i).data(), K);
      }
    }
  }
  LINSTATE_PHASE(staging);
  if (!any_w && !any_r) return false;
  [[maybe_unused]] gemm::prefetch_lines* const pf = sc.next.rows > 0 ? &sc.next : nullptr;
  auto Q = scratch_view(sc.Q, m, K);
  auto Kc = scratch_view(sc.Kc, m, K);
  auto Vc = scratch_view(sc.Vc, m, V);
  auto A = scratch_view(sc.A, m, m);
  auto O = scratch_view(sc.O, m, V);
#if LINSTATE_CPU_BF16_DOT
  // bf16 inputs with linstate::cpu::bf16_products: the same chunk formulas with every product's operands
  // rounded to bf16 and the sums in fp32 (vdpbf16ps, gemm_bf16.hpp), as fla's kernels round theirs
  // (SPEC §1.3): Q ⊙ e^{Γ}, the entering state H as read, K ⊙ e^{−Γ}, the masked scores A, K ⊙ e^{γ−Γ};
  // V is a bf16 input already. The state itself stays fp32 (H = diag(e^{γ}) H + Kdᵀ V accumulates in
  // fp32). Within SPEC §9.3's ratio of the fp64 reference, not C10's "the fp32 run's o rounded once".
  if constexpr (std::is_same_v<Scalar, Eigen::bfloat16>) {
    if (sc.bf16_products && K % 16 == 0 && V % 16 == 0) {
      namespace bd = bf16dot;
      const index_t Kw = K / 2, np = (m + 1) / 2, ldc = sc.A.outerStride(), ldk = sc.Q.outerStride();
      const float* Qg = sc.Q.data();     // [m,K] Q ⊙ e^{Γ} (row stride ldk: every K-wide scratch matrix's)
      const float* Kinv = sc.Kc.data();  // [m,K] K ⊙ e^{−Γ}
      bool one_gemm = true;
      if constexpr (!decay_none<D>) {
        auto G = scratch_view(sc.G, m, K);
        sc.gamma = G.row(m - 1);
        one_gemm = (any_w ? -sc.gamma.minCoeff() : 0.f) <= single_gemm_span;
        sc.egamma = sc.gamma.array().exp();
        // K ⊙ e^{−Γ} and Q ⊙ e^{Γ}: formed row by row in the staging loop already with fused_exps (K is a
        // multiple of 16 here, so always but in LINSTATE_NO_GEMM_KERNEL builds); else here
        if (!fused_exps) {
          auto sv = [&](RowMat& X) { return scratch_view(X, m, K); };
          if (any_w && one_gemm) sv(sc.Einv).array() = sv(sc.Kc).array() * (-sv(sc.G).array()).exp();
          if (any_r) sv(sc.Kd) = sv(sc.Q).cwiseProduct(sv(sc.G).array().exp().matrix());
        }
        Qg = sc.Kd.data(), Kinv = sc.Einv.data();
      }
      LINSTATE_PHASE(exps);
      if (any_r) {  // O = (Q ⊙ e^{Γ}) H
        bd::pack_row_pairs(tg.state, ldh, K, V, sc.wH.data(), V);  // [K/2, V]
        bd::pack_rows(Qg, ldk, m, K, sc.wQ.data(), Kw);              // [m, K/2]
        LINSTATE_PHASE(pack);
        bd::product<gemm::set>(m, V, Kw, sc.wQ.data(), Kw, 1, sc.wH.data(), V, O.data(), O.outerStride());
        LINSTATE_PHASE(gemm);
      }
      if (any_w) {
        bd::pack_row_pairs(Vc.data(), Vc.outerStride(), m, V, sc.wV.data(), V);  // [⌈m/2⌉, V]
        LINSTATE_PHASE(pack);
        if (any_r) {  // O += tril(A) V, A_tj = (Q ⊙ e^{Γ})_t · (K ⊙ e^{−Γ})_j
          if (one_gemm) {
            bd::pack_rows(Kinv, ldk, m, K, sc.wK.data(), Kw);                 // [m, K/2]
            bd::transpose_words(sc.wK.data(), Kw, m, Kw, m, sc.wKT.data(), m);  // [K/2, m]
            LINSTATE_PHASE(pack);
            bd::product<gemm::set, gemm::c_lower>(m, m, Kw, sc.wQ.data(), Kw, 1, sc.wKT.data(), m, A.data(), ldc);
          } else {
            intra_subchunked(Q, Kc, scratch_view(sc.G, m, K), A, m);
          }
          LINSTATE_PHASE(gemm);
          bd::pack_lower(A.data(), ldc, m, sc.wA.data(), np);  // [m, ⌈m/2⌉], zero above the diagonal
          LINSTATE_PHASE(pack);
          bd::product<gemm::add, gemm::a_lower>(m, V, np, sc.wA.data(), np, 1, sc.wV.data(), V, O.data(), O.outerStride());
          LINSTATE_PHASE(gemm);
        }
        const float* Kd = sc.Kc.data();  // [m,K] K ⊙ e^{γ − Γ} (no decay: K)
        if constexpr (!decay_none<D>) {
          auto Kdm = scratch_view(sc.Kd, m, K);
          if (one_gemm) Kdm = scratch_view(sc.Einv, m, K) * sc.egamma.asDiagonal();
          else
            for (index_t i = 0; i < m; ++i)
              Kdm.row(i) = Kc.row(i).cwiseProduct((sc.gamma - sc.G.row(i)).array().exp().matrix());
          Kd = sc.Kd.data();
        }
        LINSTATE_PHASE(exps);
        bd::pack_row_pairs(Kd, ldk, m, K, sc.wKd.data(), K);  // [⌈m/2⌉, K]: Kdᵀ's pair words, (a, p) at p·K + a
        LINSTATE_PHASE(pack);
        if constexpr (decay_none<D>)  // H += Kᵀ V
          bd::product<gemm::add>(K, V, np, sc.wKd.data(), 1, K, sc.wV.data(), V, tg.state, ldh);
        else  // H = diag(e^{γ}) H + Kdᵀ V
          bd::product<gemm::scale_add>(K, V, np, sc.wKd.data(), 1, K, sc.wV.data(), V, tg.state, ldh, sc.egamma.data());
        LINSTATE_PHASE(gemm);
      }
      return any_r;
    }
  }
#endif
  if constexpr (decay_none<D>) {
    if (any_r) {
      O.noalias() = Q * Hm;
      if (any_w) {
        A.noalias() = Q * Kc.transpose();
        A.template triangularView<Eigen::StrictlyUpper>().setZero();
        O.noalias() += A * Vc;
      }
    }
    if (any_w) Hm.noalias() += Kc.transpose() * Vc;
  } else {
    auto G = scratch_view(sc.G, m, K);
    auto E = scratch_view(sc.E, m, K);
    auto Einv = scratch_view(sc.Einv, m, K);
    sc.gamma = G.row(m - 1);
    const float span = any_w ? -sc.gamma.minCoeff() : 0.f;
    const bool one_gemm = span <= single_gemm_span;
    sc.egamma = sc.gamma.array().exp();
    // The whole-matrix exponentials without fused_exps are evaluated over the contiguous m × K block, as
    // before the rows were padded (Eigen's linear traversal, whose packets run across the ends of rows: the
    // same bits as then). Those K-wide rows are never padded: padded_cols pads multiples of 16 only, and
    // every multiple of 16 takes fused_exps (Eigen's packet: 8 floats on AVX2 builds, 16 on AVX-512).
    auto flat = [&](RowMat& X) { return contiguous_view(X, m, K); };
    // K ⊙ e^{−Γ} (factors ≤ e^{span}); serves the scores and, times e^{γ}, the state update
    if (any_w && one_gemm && !fused_exps) flat(sc.Einv).array() = flat(sc.Kc).array() * (-flat(sc.G).array()).exp();
    // K ⊙ e^{γ − Γ} for the state update, formed in the scores' transpose (gemm::transpose_scale) into E's storage
    // (E, read only by Qg before then) when that runs, else below into Kd's
    bool kd_in_e = false;
    if (any_r) {
      auto Qg = scratch_view(sc.Kd, m, K);  // reuse Kd's storage for Q ⊙ e^{Γ}
      if (!fused_exps) {
        flat(sc.E) = flat(sc.G).array().exp();  // e^{Γ} ≤ 1
        Qg = Q.cwiseProduct(E);
      }
      LINSTATE_PHASE(exps);
#if LINSTATE_GEMM_KERNEL  // gemm.hpp: the products by hand on AVX2 / AVX-512 (C += / = A·B, A through strides)
      gemm::product<gemm::set>(m, V, K, Qg.data(), Qg.outerStride(), 1, Hm.data(), ldh, O.data(), O.outerStride(), nullptr,
                               pf);
#else
      O.noalias() = Qg * Hm;
#endif
      LINSTATE_PHASE(gemm);
      if (any_w) {
        if (one_gemm) {
#if LINSTATE_GEMM_KERNEL
          gemm::transpose_scale(m, K, Einv.data(), Einv.outerStride(), sc.EinvT.data(), sc.EinvT.outerStride(),
                                sc.egamma.data(), E.data(), E.outerStride());
          kd_in_e = true;
          // only A's lower triangle is kept (the causal mask below)
          gemm::product<gemm::set, gemm::c_lower>(m, m, K, Qg.data(), Qg.outerStride(), 1, sc.EinvT.data(),
                                                  sc.EinvT.outerStride(), A.data(), A.outerStride(), nullptr, pf);
#else
          A.noalias() = Qg * Einv.transpose();
#endif
        } else {
          intra_subchunked(Q, Kc, G, A, m);
        }
        LINSTATE_PHASE(gemm);
#if LINSTATE_GEMM_KERNEL
        // the causal mask where the product below reads: its register tiles (6 rows, 8 with AVX-512; V a multiple
        // of 8, so no column is left to the plain loop, which reads whole rows) read row i of A up to their last
        // row, i.e. A(i, j) for j < i + 8 at most; the elements further right are never read
        if (V % 8 == 0)
          for (index_t i = 0; i < m; ++i) {
            float* const ai = A.data() + i * A.outerStride();
            for (index_t j = i + 1; j < std::min(i + 8, m); ++j) ai[j] = 0.f;
          }
        else
#endif
          A.template triangularView<Eigen::StrictlyUpper>().setZero();
        LINSTATE_PHASE(other);
#if LINSTATE_GEMM_KERNEL
        gemm::product<gemm::add, gemm::a_lower>(m, V, m, A.data(), A.outerStride(), 1, Vc.data(), Vc.outerStride(), O.data(),
                                                O.outerStride(), nullptr, pf);  // A is lower triangular
#else
        O.noalias() += A * Vc;
#endif
        LINSTATE_PHASE(gemm);
      }
    }
    if (any_w) {
      auto Kd = scratch_view(kd_in_e ? sc.E : sc.Kd, m, K);  // K ⊙ e^{γ − Γ} ≤ 1
      if (kd_in_e) {
      } else if (one_gemm) Kd = Einv * sc.egamma.asDiagonal();
      else
        for (index_t i = 0; i < m; ++i)
          Kd.row(i) = Kc.row(i).cwiseProduct((sc.gamma - G.row(i)).array().exp().matrix());
      LINSTATE_PHASE(exps);
#if LINSTATE_GEMM_KERNEL  // H = diag(e^{γ}) H + Kdᵀ V: the decay in the product's store (gemm::scale_add)
      gemm::product<gemm::scale_add>(K, V, m, Kd.data(), 1, Kd.outerStride(), Vc.data(), Vc.outerStride(), Hm.data(), ldh,
                                     sc.egamma.data(), pf);
#else
      for (index_t a = 0; a < K; ++a) Hm.row(a) *= sc.egamma(a);
      LINSTATE_PHASE(other);
      Hm.noalias() += Kd.transpose() * Vc;
#endif
      LINSTATE_PHASE(gemm);
    }
  }
  return any_r;
}

//! Chunk-parallel form (SPEC §2.3) over one stream, chunks of C steps. Per chunk n with entering
//! state H_n, local cumulative log-decay Γ (rows) and γ = Γ_last:
//!   O   = (Q ⊙ e^{Γ}) H_n + tril(A) V,   A_tj = Σ_i q_t[i] k_j[i] e^{Γ_t[i] − Γ_j[i]}
//!   H_{n+1} = diag(e^{γ}) H_n + (K ⊙ e^{γ − Γ})ᵀ V
//! Γ sums the floored log-decays (load_log_decay; detail::chunked_log_decay_floor). Unwritten steps
//! contribute a zero key row and a zero log-decay row; a chunk without writes leaves the state
//! untouched and a chunk without reads skips the output (bit-identical freeze).
template <class D, class Scalar>
void run_chunked(const problem& pb, const source<Scalar>& src, const stream& st, const target& tg, index_t C,
                 chunk_scratch& sc) {
  for (index_t c0 = 0; c0 < st.n; c0 += C) {
    if (!chunk_step<D>(pb, src, st, tg, c0, C, sc)) continue;
    LINSTATE_PHASE_START;
    add_read_rows(st, c0, std::min(C, st.n - c0), sc.O, tg, pb.V);
    LINSTATE_PHASE(store);
  }
}

//! Chunk-parallel gated delta rule (SPEC §3.2, the WY form of Yang et al.'s DeltaNet chunking) over
//! one stream. Per chunk with entering state S, scalar local cumulative log-decay G (inclusive),
//! Γ_ij = e^{G_i − G_j} (j ≤ i, so Γ ≤ 1) and β̃ = β·(write weight):
//!   (I + strict_lower(diag(β̃) K̂K̂ᵀ ⊙ Γ)) [U | W] = [diag(β̃) V | diag(β̃) (K̂ ⊙ e^{G})]   (forward substitution)
//!   V_new = U − W S
//!   O     = (Q̂ ⊙ e^{G}) S + lower_incl(Q̂K̂ᵀ ⊙ Γ) V_new
//!   S'    = e^{G_last} S + (K̂ ⊙ e^{G_last − G})ᵀ V_new
//! G sums the floored log-decays (detail::chunked_log_decay), so every exponent is finite and ≤ 0.
//! Unwritten steps have β̃ = 0 and g = 0 (so u = 0 and no decay); a chunk without writes leaves the
//! state untouched.
struct delta_scratch {  // rows padded as chunk_scratch's (padded_cols; read through scratch_view or row by row)
  RowMat Q, Kc, Vc, L, A, Gam, RHS, Vn, O, KcT;
  std::vector<float> G, beta, sdecay;  // sdecay [K]: the state's decay e^{G_last}, per row (gemm::scale_add)
  gemm::prefetch_lines next;  // as chunk_scratch's: the next chunk's input rows, prefetched during the products
  void reserve(index_t C, index_t K, index_t V) {
    sdecay.resize(static_cast<std::size_t>(K));
    const index_t pk = padded_cols(K), pv = padded_cols(V), pc = padded_cols(C);
    Q.resize(C, pk), Kc.resize(C, pk), Vc.resize(C, pv), L.resize(C, pc), A.resize(C, pc), Gam.resize(C, pc);
    RHS.resize(C, padded_cols(V + K)), Vn.resize(C, pv), O.resize(C, pv);
    G.resize(static_cast<std::size_t>(C)), beta.resize(static_cast<std::size_t>(C));
    if (LINSTATE_GEMM_KERNEL) KcT.resize(K, pc);
  }
};

#if LINSTATE_GEMM_KERNEL
//! X = (I + L)⁻¹ X in place for L strictly lower triangular (m×m; its diagonal and upper part are not read):
//! forward substitution blocked by LINSTATE_DELTA_SOLVE_BLOCK rows, each block's rows first reduced by every
//! earlier block in one product (gemm.hpp, C −= A·B), then solved row by row inside the block. Eigen's
//! solveInPlace on these shapes (64 × 256) ran at a third of the products' rate (docs/benchmarks.md,
//! "Issue 13, session 13").
#ifndef LINSTATE_DELTA_SOLVE_BLOCK
#define LINSTATE_DELTA_SOLVE_BLOCK 16
#endif
template <class LMat, class XMat>
inline void unit_lower_solve(const LMat& L, XMat& X, index_t m) {
  constexpr index_t b = LINSTATE_DELTA_SOLVE_BLOCK;
  const index_t n = X.cols(), ldl = L.outerStride(), ldx = X.outerStride();
  for (index_t r0 = 0; r0 < m; r0 += b) {
    const index_t nb = std::min(b, m - r0);
    if (r0 > 0)
      gemm::product<gemm::sub>(nb, n, r0, L.data() + r0 * ldl, ldl, 1, X.data(), ldx, X.data() + r0 * ldx, ldx);
    for (index_t i = r0 + 1; i < r0 + nb; ++i)
      X.row(i).noalias() -= L.row(i).segment(r0, i - r0) * X.middleRows(r0, i - r0);
  }
}
#endif

//! One chunk of run_chunked_delta (as chunk_step for the diagonal family): updates the state and,
//! when a step of the chunk reads, leaves its output rows in sc.O.topRows(m) and returns true.
template <class D, class Scalar>
bool chunk_step_delta(const problem& pb, const source<Scalar>& src, const stream& st, const target& tg, index_t c0,
                      index_t C, delta_scratch& sc) {
  const index_t K = pb.K, V = pb.V, H = pb.H, HV = pb.HV;
  const index_t ldh = tg.ld ? tg.ld : V;  // the state's row stride
  Eigen::Map<RowMat, 0, Eigen::OuterStride<>> Sm(tg.state, K, V, Eigen::OuterStride<>(ldh));
  LINSTATE_PHASE_START;  // detail/phase_timer.hpp: compiled out unless LINSTATE_PHASE_TIMERS
  const index_t m = std::min(C, st.n - c0);
  bool any_w = false, any_r = false;
  double gsum = 0.;  // G: the floored λ summed in fp64, each G_i rounded once to fp32
  for (index_t i = 0; i < m; ++i) {
    const index_t s = c0 + i, t = st.tok(s);
    const std::uint8_t f = st.flag(s);
    const bool w = f & detail::route_write, r = f & detail::route_read;
    any_w |= w, any_r |= r;
    float* qrow = sc.Q.row(i).data();
    float* krow = sc.Kc.row(i).data();
    float* vrow = sc.Vc.row(i).data();
    if (r) {
      load(src.q + (t * H + tg.h) * K, qrow, K);
      if (D::l2norm_qk) l2normalize(qrow, K);
      const float mul = pb.scale * st.wgt_r(s);
      for (index_t a = 0; a < K; ++a) qrow[a] *= mul;
    } else {
      std::fill(qrow, qrow + K, 0.f);
    }
    if (w) {
      load(src.k + (t * H + tg.h) * K, krow, K);
      if (D::l2norm_qk) l2normalize(krow, K);
      load(src.v + (t * HV + tg.hv) * V, vrow, V);
      gsum += detail::chunked_log_decay(detail::to_float(D::log_decay(src.g + t * HV + tg.hv, 0)));
      sc.beta[static_cast<std::size_t>(i)] = D::write_strength(detail::to_float(src.beta[t * HV + tg.hv]), st.wgt_w(s));
    } else {
      std::fill(krow, krow + K, 0.f);
      std::fill(vrow, vrow + V, 0.f);
      sc.beta[static_cast<std::size_t>(i)] = 0.f;
    }
    sc.G[static_cast<std::size_t>(i)] = static_cast<float>(gsum);  // inclusive local cumsum
  }
  LINSTATE_PHASE(staging);
  if (!any_w && !any_r) return false;
  auto Q = scratch_view(sc.Q, m, K);
  auto Kc = scratch_view(sc.Kc, m, K);
  auto O = scratch_view(sc.O, m, V);
  const float* G = sc.G.data();
  // gemm.hpp's products on AVX2 / AVX-512 (Eigen's elsewhere): C = / += / −= A·B, A through strides
#if LINSTATE_GEMM_KERNEL
  gemm::prefetch_lines* const pf = sc.next.rows > 0 ? &sc.next : nullptr;
  auto mul = [pf](auto md, index_t mm, index_t nn, index_t kk, const float* a, index_t rsa, index_t csa, const float* b,
                  index_t ldb, float* c, index_t ldc) {
    gemm::product<decltype(md)::value>(mm, nn, kk, a, rsa, csa, b, ldb, c, ldc, nullptr, pf);
  };
  using set_t = std::integral_constant<int, gemm::set>;
  using sub_t = std::integral_constant<int, gemm::sub>;
#endif
  if (!any_w) {  // read only: o = (Q ⊙ e^{G}) S — no decay applies (g frozen), so G ≡ 0
#if LINSTATE_GEMM_KERNEL
    mul(set_t{}, m, V, K, Q.data(), Q.outerStride(), 1, Sm.data(), ldh, O.data(), O.outerStride());
#else
    O.noalias() = Q * Sm;
#endif
  } else {
    auto Vc = scratch_view(sc.Vc, m, V);
    auto L = scratch_view(sc.L, m, m);
    auto A = scratch_view(sc.A, m, m);
    auto RHS = scratch_view(sc.RHS, m, V + K);
    auto Vn = scratch_view(sc.Vn, m, V);
    // L = I + strict_lower(diag(β) K Kᵀ ⊙ Γ)
#if LINSTATE_GEMM_KERNEL
    gemm::transpose(m, K, Kc.data(), Kc.outerStride(), sc.KcT.data(), sc.KcT.outerStride());
    // only L's strictly lower triangle is read (the mask below and the unit-lower solve)
    gemm::product<gemm::set, gemm::c_lower>(m, m, K, Kc.data(), Kc.outerStride(), 1, sc.KcT.data(), sc.KcT.outerStride(),
                                            L.data(), L.outerStride(), nullptr, pf);
#else
    L.noalias() = Kc * Kc.transpose();
#endif
    LINSTATE_PHASE(gemm);
    // Γ_ij = e^{G_i − G_j} for j ≤ i (each ≤ 1), for both masks: one vectorised exponential per row
    auto Gam = scratch_view(sc.Gam, m, m);
    const Eigen::Map<const Eigen::Array<float, 1, Eigen::Dynamic>> Grow(G, m);
#ifndef LINSTATE_DELTA_EIGEN_EXP
    // Eigen's bits (exp_diff_row: exp8 on whole packets, std::exp on the tail, as Eigen's evaluation of a row
    // that starts packet-aligned)
    if (reinterpret_cast<std::uintptr_t>(Gam.data()) % (sizeof(float) * exp_packet_size) == 0 &&
        Gam.outerStride() % exp_packet_size == 0)
      for (index_t i = 0; i < m; ++i) exp_diff_row(G[i], G, Gam.row(i).data(), i + 1);
    else
#endif
      for (index_t i = 0; i < m; ++i) Gam.row(i).head(i + 1).array() = (G[i] - Grow.head(i + 1)).exp();
    for (index_t i = 0; i < m; ++i) {
      const float bi = sc.beta[static_cast<std::size_t>(i)];
      L.row(i).head(i).array() *= bi * Gam.row(i).head(i).array();
    }
    // RHS = [diag(β) V | diag(β) (K ⊙ e^{G})]
    for (index_t i = 0; i < m; ++i) {
      const float bi = sc.beta[static_cast<std::size_t>(i)];
      RHS.row(i).head(V) = bi * Vc.row(i);
      RHS.row(i).tail(K) = (bi * std::exp(G[i])) * Kc.row(i);
    }
    LINSTATE_PHASE(exps);
#if LINSTATE_GEMM_KERNEL
    unit_lower_solve(L, RHS, m);
#else
    L.template triangularView<Eigen::UnitLower>().solveInPlace(RHS);
#endif
    LINSTATE_PHASE(solve);
    Vn.noalias() = RHS.leftCols(V);                  // U
#if LINSTATE_GEMM_KERNEL                               // V_new = U − W S
    mul(sub_t{}, m, V, K, RHS.data() + V, RHS.outerStride(), 1, Sm.data(), ldh, Vn.data(), Vn.outerStride());
#else
    Vn.noalias() -= RHS.rightCols(K) * Sm;
#endif
    LINSTATE_PHASE(gemm);
    if (any_r) {
#if LINSTATE_GEMM_KERNEL
      // A's lower triangle (its upper part is zeroed below)
      gemm::product<gemm::set, gemm::c_lower>(m, m, K, Q.data(), Q.outerStride(), 1, sc.KcT.data(), sc.KcT.outerStride(),
                                              A.data(), A.outerStride(), nullptr, pf);
#else
      A.noalias() = Q * Kc.transpose();
#endif
      LINSTATE_PHASE(gemm);
      for (index_t i = 0; i < m; ++i) {
        A.row(i).head(i + 1).array() *= Gam.row(i).head(i + 1).array();
        A.row(i).tail(m - i - 1).setZero();
      }
      for (index_t i = 0; i < m; ++i) Q.row(i) *= std::exp(G[i]);
      LINSTATE_PHASE(exps);
#if LINSTATE_GEMM_KERNEL
      mul(set_t{}, m, V, K, Q.data(), Q.outerStride(), 1, Sm.data(), ldh, O.data(), O.outerStride());
      gemm::product<gemm::add, gemm::a_lower>(m, V, m, A.data(), A.outerStride(), 1, Vn.data(), Vn.outerStride(), O.data(),
                                              O.outerStride(), nullptr, pf);  // A is lower triangular
#else
      O.noalias() = Q * Sm;
      O.noalias() += A * Vn;
#endif
      LINSTATE_PHASE(gemm);
    }
    const float glast = G[m - 1];
    for (index_t i = 0; i < m; ++i) Kc.row(i) *= std::exp(glast - G[i]);
#if LINSTATE_GEMM_KERNEL
    // S = e^{G_last} S + Kᵀ V_new: the decay in the product's store (gemm::scale_add: the product added to
    // the scaled S as rounded, the bits of the scaling pass and then the addition)
    std::fill(sc.sdecay.begin(), sc.sdecay.end(), std::exp(glast));
    LINSTATE_PHASE(exps);
    gemm::product<gemm::scale_add>(K, V, m, Kc.data(), 1, Kc.outerStride(), Vn.data(), Vn.outerStride(), Sm.data(), ldh,
                                   sc.sdecay.data(), pf);
#else
    Sm *= std::exp(glast);
    LINSTATE_PHASE(exps);
    Sm.noalias() += Kc.transpose() * Vn;
#endif
    LINSTATE_PHASE(gemm);
  }
  return any_r;
}

template <class D, class Scalar>
void run_chunked_delta(const problem& pb, const source<Scalar>& src, const stream& st, const target& tg, index_t C,
                       delta_scratch& sc) {
  for (index_t c0 = 0; c0 < st.n; c0 += C) {
    if (!chunk_step_delta<D>(pb, src, st, tg, c0, C, sc)) continue;
    LINSTATE_PHASE_START;
    add_read_rows(st, c0, std::min(C, st.n - c0), sc.O, tg, pb.V);
    LINSTATE_PHASE(store);
  }
}

}  // namespace linstate::cpu_detail
