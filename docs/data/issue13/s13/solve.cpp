// docs/data/issue13/s13/solve.cpp — the gated delta rule's chunk solve alone, in cache: X = (I + L)⁻¹ X for L strictly
// lower 64×64 (entries as β k̂ᵢ·k̂ⱼ Γᵢⱼ: |L| < 1) and X 64×256 ([U | W]'s right-hand side, V = K = 128), by Eigen 3.4's
// triangularView<UnitLower>().solveInPlace (main) and by kernels.hpp's unit_lower_solve (blocked by B rows, the
// off-diagonal blocks through gemm.hpp's product); medians of 15 samples of 2000 solves, thread CPU time, and the
// largest difference between the two results relative to max |X|.
//   g++ -std=c++20 -O3 -march=native -DNDEBUG -DLINSTATE_DELTA_SOLVE_BLOCK=16 -Iinclude $(pkg-config --cflags eigen3) \
//       docs/data/issue13/s13/solve.cpp -o solve && ./solve
#include <linstate/linstate.hpp>

#include <algorithm>
#include <cstdio>
#include <random>
#include <time.h>
#include <vector>

using linstate::cpu_detail::RowMat;
static double cpu_s() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}
int main() {
  const int m = 64, n = 256, reps = 2000;
  std::mt19937 g(1);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  RowMat L = RowMat::Zero(m, m), X0(m, n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < i; ++j) L(i, j) = 0.3f * u(g) * std::exp(-0.02f * static_cast<float>(i - j));
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) X0(i, j) = u(g);
  RowMat Xa = X0, Xb = X0, X = X0;
  L.triangularView<Eigen::UnitLower>().solveInPlace(Xa);
  linstate::cpu_detail::unit_lower_solve(L, Xb, m);
  const double err = (Xa - Xb).cwiseAbs().maxCoeff() / Xa.cwiseAbs().maxCoeff();
  std::vector<double> te, tb;
  for (int s = 0; s < 15; ++s) {
    double t0 = cpu_s();
    for (int r = 0; r < reps; ++r) X = X0, L.triangularView<Eigen::UnitLower>().solveInPlace(X);
    te.push_back((cpu_s() - t0) / reps);
    t0 = cpu_s();
    for (int r = 0; r < reps; ++r) X = X0, linstate::cpu_detail::unit_lower_solve(L, X, m);
    tb.push_back((cpu_s() - t0) / reps);
  }
  std::sort(te.begin(), te.end()), std::sort(tb.begin(), tb.end());
  const double flops = 1.0 * m * (m - 1) * n;  // m(m−1)/2 multiply-adds per column
  std::printf("block %d: Eigen solveInPlace %.2f us (%.1f GFLOP/s), unit_lower_solve %.2f us (%.1f GFLOP/s) per solve incl. the "
              "copy of X; max |difference| / max |X| = %.2g\n",
              LINSTATE_DELTA_SOLVE_BLOCK, te[7] * 1e6, flops / te[7] * 1e-9, tb[7] * 1e6, flops / tb[7] * 1e-9, err);
}
