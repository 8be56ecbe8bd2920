// SPDX-License-Identifier: Apache-2.0
// The chunked kernels' hand-written products (backend/cpu/gemm.hpp; AVX2 + FMA, and with AVX-512 its
// 8-row × 32/16-column zmm tiles; a plain loop elsewhere) against an fp64 triple loop: every row
// remainder of the 6- and 8-row tiles, column counts with and without a 32-, 16-, 8- and scalar
// remainder, the three modes, A read plainly and transposed.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <linstate/backend/cpu/gemm.hpp>

namespace {
using linstate::index_t;
namespace gm = linstate::cpu_detail::gemm;

template <int Mode>
void check(index_t m, index_t n, index_t k, bool transposed, std::mt19937& rng) {
  CAPTURE(m);
  CAPTURE(n);
  CAPTURE(k);
  CAPTURE(transposed);
  const int mode = Mode;
  CAPTURE(mode);
  std::normal_distribution<float> nd;
  const index_t lda = (transposed ? m : k) + 3, ldb = n + 5, ldc = n + 2;  // padded rows
  std::vector<float> a(static_cast<std::size_t>((transposed ? k : m) * lda)), b(static_cast<std::size_t>(k * ldb)),
      c(static_cast<std::size_t>(m * ldc));
  for (float& x : a) x = nd(rng);
  for (float& x : b) x = nd(rng);
  for (float& x : c) x = nd(rng);
  const std::vector<float> c0 = c;
  const index_t rsa = transposed ? 1 : lda, csa = transposed ? lda : 1;
  gm::product<Mode>(m, n, k, a.data(), rsa, csa, b.data(), ldb, c.data(), ldc);
  double worst = 0, scale = 1;
  for (index_t i = 0; i < m; ++i)
    for (index_t j = 0; j < ldc; ++j) {
      const std::size_t at = static_cast<std::size_t>(i * ldc + j);
      if (j >= n) {  // the padding is not touched
        CHECK(c[at] == c0[at]);
        continue;
      }
      double s = 0, abs_sum = 0;
      for (index_t p = 0; p < k; ++p) {
        const double t = double(a[static_cast<std::size_t>(i * rsa + p * csa)]) * b[static_cast<std::size_t>(p * ldb + j)];
        s += t, abs_sum += std::abs(t);
      }
      const double want = Mode == gm::set ? s : Mode == gm::add ? c0[at] + s : c0[at] - s;
      worst = std::max(worst, std::abs(c[at] - want));
      scale = std::max(scale, abs_sum + std::abs(c0[at]));
    }
  CHECK(worst <= 4e-7 * scale);  // fp32 accumulation over k ≤ 130 terms
}
}  // namespace

TEST_CASE("gemm::product against an fp64 loop (every tile remainder, modes, transposed A)") {
  const std::string kernel = LINSTATE_GEMM_KERNEL ? "yes" : "no (plain loop)";
  const std::string zmm = LINSTATE_GEMM_AVX512 ? "yes" : "no";
  MESSAGE("AVX2 kernel: " << kernel << "; AVX-512 tiles: " << zmm);
  std::mt19937 rng(11);
  for (index_t m : {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 15, 16, 17, 64})
    for (index_t n : {1, 7, 8, 9, 16, 17, 24, 31, 32, 33, 48, 56, 64, 130})
      for (index_t k : {1, 5, 64, 130})
        for (bool tr : {false, true}) {
          check<gm::set>(m, n, k, tr, rng);
          check<gm::add>(m, n, k, tr, rng);
          check<gm::sub>(m, n, k, tr, rng);
        }
}

namespace {
//! The triangular shapes against the full product of the same operands: a_lower / a_upper on an A that
//! is zero where the shape says (then C is the full product's, bit for bit), c_lower on its lower
//! triangle with the diagonal (the rest of C is not compared).
template <int Mode, int Shape>
void check_shape(index_t m, index_t n, index_t k, bool transposed, std::mt19937& rng) {
  CAPTURE(m);
  CAPTURE(n);
  CAPTURE(k);
  CAPTURE(transposed);
  const int mode = Mode, shape = Shape;
  CAPTURE(mode);
  CAPTURE(shape);
  std::normal_distribution<float> nd;
  const index_t lda = (transposed ? m : k) + 3, ldb = n + 5, ldc = n + 2;
  std::vector<float> a(static_cast<std::size_t>((transposed ? k : m) * lda)), b(static_cast<std::size_t>(k * ldb)),
      c(static_cast<std::size_t>(m * ldc));
  const index_t rsa = transposed ? 1 : lda, csa = transposed ? lda : 1;
  for (float& x : a) x = nd(rng);
  for (index_t i = 0; i < m; ++i)
    for (index_t p = 0; p < k; ++p) {
      const bool zero = (Shape == gm::a_lower && p > i) || (Shape == gm::a_upper && p < i);
      if (zero) a[static_cast<std::size_t>(i * rsa + p * csa)] = 0.f;
    }
  for (float& x : b) x = nd(rng);
  for (float& x : c) x = nd(rng);
  std::vector<float> want = c;
  gm::product<Mode>(m, n, k, a.data(), rsa, csa, b.data(), ldb, want.data(), ldc);
  gm::product<Mode, Shape>(m, n, k, a.data(), rsa, csa, b.data(), ldb, c.data(), ldc);
  index_t differ = 0;
  for (index_t i = 0; i < m; ++i)
    for (index_t j = 0; j < n; ++j) {
      if (Shape == gm::c_lower && j > i) continue;
      const std::size_t at = static_cast<std::size_t>(i * ldc + j);
      differ += c[at] != want[at];
    }
  CHECK(differ == 0);
}
}  // namespace

TEST_CASE("gemm::product's triangular shapes equal the full product where they promise to") {
  std::mt19937 rng(12);
  for (index_t m : {1, 5, 6, 7, 8, 9, 13, 17, 64})
    for (index_t n : {1, 8, 17, 32, 48, 64, 128})
      for (index_t k : {1, 7, 64, 128})
        for (bool tr : {false, true}) {
          check_shape<gm::set, gm::a_lower>(m, n, k, tr, rng);
          check_shape<gm::add, gm::a_lower>(m, n, k, tr, rng);
          check_shape<gm::set, gm::a_upper>(m, n, k, tr, rng);
          check_shape<gm::add, gm::a_upper>(m, n, k, tr, rng);
          check_shape<gm::set, gm::c_lower>(m, n, k, tr, rng);
          check_shape<gm::sub, gm::c_lower>(m, n, k, tr, rng);
        }
}

// scale_add is formed only by the AVX2 kernels (kernels.hpp's chunked GLA forward), and its barrier
// against contraction (gemm::keep_rounded) is written for x86 registers: tested where it is used.
#if LINSTATE_GEMM_KERNEL
TEST_CASE("gemm::product scale_add: diag(s)·C + A·B, the bits of a scaling pass followed by add") {
  std::mt19937 rng(13);
  std::normal_distribution<float> nd;
  std::uniform_real_distribution<float> ud(0.f, 1.f);
  for (index_t m : {1, 5, 6, 7, 8, 9, 13, 64, 128})
    for (index_t n : {1, 8, 9, 16, 17, 32, 48, 130})
      for (index_t k : {1, 5, 64})
        for (bool tr : {false, true}) {
          CAPTURE(m);
          CAPTURE(n);
          CAPTURE(k);
          CAPTURE(tr);
          const index_t lda = (tr ? m : k) + 3, ldb = n + 5, ldc = n + 2;
          std::vector<float> a(static_cast<std::size_t>((tr ? k : m) * lda)), b(static_cast<std::size_t>(k * ldb)),
              c(static_cast<std::size_t>(m * ldc)), s(static_cast<std::size_t>(m));
          for (float& x : a) x = nd(rng);
          for (float& x : b) x = nd(rng);
          for (float& x : c) x = nd(rng);
          for (float& x : s) x = ud(rng);
          const index_t rsa = tr ? 1 : lda, csa = tr ? lda : 1;
          std::vector<float> two = c;  // the two-pass form: rows scaled, then add
          for (index_t i = 0; i < m; ++i)
            for (index_t j = 0; j < n; ++j) two[static_cast<std::size_t>(i * ldc + j)] *= s[static_cast<std::size_t>(i)];
          gm::product<gm::add>(m, n, k, a.data(), rsa, csa, b.data(), ldb, two.data(), ldc);
          const std::vector<float> c0 = c;
          gm::product<gm::scale_add>(m, n, k, a.data(), rsa, csa, b.data(), ldb, c.data(), ldc, s.data());
          index_t differ = 0;
          double worst = 0, scale = 1;
          for (index_t i = 0; i < m; ++i)
            for (index_t j = 0; j < ldc; ++j) {
              const std::size_t at = static_cast<std::size_t>(i * ldc + j);
              if (j >= n) {  // the padding is not touched
                CHECK(c[at] == c0[at]);
                continue;
              }
              differ += c[at] != two[at];
              double sum = 0, abs_sum = 0;
              for (index_t p = 0; p < k; ++p) {
                const double t = double(a[static_cast<std::size_t>(i * rsa + p * csa)]) * b[static_cast<std::size_t>(p * ldb + j)];
                sum += t, abs_sum += std::abs(t);
              }
              const double want = double(c0[at]) * s[static_cast<std::size_t>(i)] + sum;
              worst = std::max(worst, std::abs(c[at] - want));
              scale = std::max(scale, abs_sum + std::abs(c0[at]));
            }
          CHECK(differ == 0);
          CHECK(worst <= 4e-7 * scale);
        }
}
#endif

TEST_CASE("gemm::transpose: dst = srcᵀ element for element (8×8 blocks and every edge), padding untouched") {
  std::mt19937 rng(14);
  std::normal_distribution<float> nd;
  for (index_t m : {1, 7, 8, 9, 17, 64})
    for (index_t n : {1, 5, 8, 15, 16, 24, 128}) {
      CAPTURE(m);
      CAPTURE(n);
      const index_t lds = n + 3, ldd = m + 5;
      std::vector<float> src(static_cast<std::size_t>(m * lds)), dst(static_cast<std::size_t>(n * ldd), -7.f);
      for (float& x : src) x = nd(rng);
      gm::transpose(m, n, src.data(), lds, dst.data(), ldd);
      index_t wrong = 0, touched = 0;
      for (index_t j = 0; j < n; ++j)
        for (index_t i = 0; i < ldd; ++i) {
          const float d = dst[static_cast<std::size_t>(j * ldd + i)];
          if (i < m) wrong += d != src[static_cast<std::size_t>(i * lds + j)];
          else touched += d != -7.f;
        }
      CHECK(wrong == 0);
      CHECK(touched == 0);
    }
}
