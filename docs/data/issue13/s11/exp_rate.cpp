// docs/data/issue13/s11/exp_rate.cpp — Eigen 3.4's float exp over a 64×128 matrix, and the fp64 → fp32 conversion, in cache
//   g++ -std=c++20 -O3 -march=native -DNDEBUG $(pkg-config --cflags eigen3) docs/data/issue13/s11/exp_rate.cpp && ./a.out
#include <Eigen/Core>
#include <chrono>
#include <cstdio>
using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using RowMatD = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
int main() {
  const int m = 64, K = 128;
  RowMatD G = RowMatD::Random(m, K) * 0.5; RowMat E(m, K), F(m,K);
  auto time = [&](const char* n, auto f) {
    for (int r = 0; r < 3; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      for (int it = 0; it < 5000; ++it) { f(); asm volatile("" ::: "memory"); }
      std::printf("%s %.2f us\n", n, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 5000 * 1e6);
    }
  };
  time("cvt ", [&] { for (int i = 0; i < m; ++i) { const double* g = G.row(i).data(); float* e = E.row(i).data(); for (int a = 0; a < K; ++a) e[a] = (float)g[a]; } });
  time("exp whole", [&] { F = E.array().exp().matrix(); });
  time("exp inplace", [&] { E = E.array().exp().matrix(); E.array() *= 0.f; });
  time("mul ", [&] { F = E.cwiseProduct(F); });
}
