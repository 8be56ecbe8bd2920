// docs/data/issue13/s10/gemm_avx512.cpp — the four products of a GLA chunk (C = 64, K = V = 128) on one thread:
// Eigen 3.4 (the AVX-512 builds' products before session 10) against backend/cpu/gemm.hpp (its AVX-512 tiles
// when built with -march=native on an AVX-512 CPU), operands hot in cache, best of 9 runs of 2000 calls.
//   g++ -std=c++20 -O3 -march=native -DNDEBUG -Iinclude $(pkg-config --cflags eigen3) docs/data/issue13/s10/gemm_avx512.cpp -o gemm_avx512
#include <linstate/linstate.hpp>
#include <chrono>
#include <cstdio>
using namespace linstate::cpu_detail;
using linstate::index_t;
template <class F> double best(F f, int reps) { double b = 1e9; for (int r = 0; r < 9; ++r) { auto t0 = std::chrono::steady_clock::now(); for (int i = 0; i < reps; ++i) f(); b = std::min(b, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps); } return b; }
#define CLOB(x) asm volatile("" ::"r"(x.data()) : "memory")
int main() {
  const index_t m = 64, K = 128, V = 128;
  RowMat Q = RowMat::Random(m, K), H = RowMat::Random(K, V), O(m, V), Kd = RowMat::Random(m, K), Vc = RowMat::Random(m, V), KT = RowMat::Random(K, m), A(m, m);
  double fl = 2.0 * m * K * V;
  std::printf("LINSTATE_GEMM_AVX512=%d\n", LINSTATE_GEMM_AVX512);
  for (int r = 0; r < 2; ++r) {
  double te = best([&] { O.noalias() = Q * H; CLOB(O); }, 2000);
  double tk = best([&] { gemm::product<gemm::set>(m, V, K, Q.data(), K, 1, H.data(), V, O.data(), V); CLOB(O); }, 2000);
  double th = best([&] { H.noalias() += Kd.transpose() * Vc; CLOB(H); }, 2000);
  double thk = best([&] { gemm::product<gemm::add>(K, V, m, Kd.data(), 1, K, Vc.data(), V, H.data(), V); CLOB(H); }, 2000);
  double ta = best([&] { A.noalias() = Q * KT; CLOB(A); }, 2000);
  double tak = best([&] { gemm::product<gemm::set, gemm::c_lower>(m, m, K, Q.data(), K, 1, KT.data(), m, A.data(), m); CLOB(A); }, 2000);
  double tv = best([&] { O.noalias() += A * Vc; CLOB(O); }, 2000);
  double tvk = best([&] { gemm::product<gemm::add, gemm::a_lower>(m, V, m, A.data(), m, 1, Vc.data(), V, O.data(), V); CLOB(O); }, 2000);
  std::printf("O=QH     eigen %6.2f us (%3.0f GF/s)  kernel %6.2f us (%3.0f GF/s)\n", te * 1e6, fl / te / 1e9, tk * 1e6, fl / tk / 1e9);
  std::printf("H+=KdTV  eigen %6.2f us (%3.0f GF/s)  kernel %6.2f us (%3.0f GF/s)\n", th * 1e6, fl / th / 1e9, thk * 1e6, fl / thk / 1e9);
  std::printf("A=QKT    eigen %6.2f us  kernel(c_lower) %6.2f us\n", ta * 1e6, tak * 1e6);
  std::printf("O+=AV    eigen %6.2f us  kernel(a_lower) %6.2f us\n", tv * 1e6, tvk * 1e6);
  std::printf("sum: eigen %.2f us, kernel %.2f us, x%.2f\n", (te+th+ta+tv)*1e6, (tk+thk+tak+tvk)*1e6, (te+th+ta+tv)/(tk+thk+tak+tvk));
  }
}
