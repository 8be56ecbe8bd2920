// docs/data/issue13/s11/exps.cpp — the reverse pass's three decay tables of one chunk (m = 64, K = 128), in cache: exp_into on
// whole matrices ("whole"), per row with Eigen ("rows"), exp_row ("fused"; needs the include tree of a0adf10 or later)
//   g++ -std=c++20 -O3 -march=native -fopenmp -DNDEBUG -Iinclude $(pkg-config --cflags eigen3) docs/data/issue13/s11/exps.cpp && ./a.out
#include <linstate/linstate.hpp>
#include <chrono>
#include <cstdio>
#include <random>
using namespace linstate::cpu_detail;
using linstate::index_t;
int main() {
  const index_t m = 64, K = 128;
  RowMatD G(m, K); RowMat E(m,K), Egd(m,K), Ei(m,K), Kd(m,K), Qg(m,K), Kinv(m,K), Kt(m,K), Q(m,K);
  std::mt19937 g(1); std::uniform_real_distribution<double> u(-0.5, 0);
  for (index_t i = 0; i < m; ++i) for (index_t a = 0; a < K; ++a) G(i,a) = (i ? G(i-1,a) : 0) + u(g), Kt(i,a)=u(g), Q(i,a)=u(g);
  auto whole = [&] {
    exp_into(E, G, 1.); exp_into(Egd, G, -1., G.row(m - 1).data(), 1.); Kd = Kt.cwiseProduct(Egd); Qg = Q.cwiseProduct(E);
    exp_into(Ei, G, -1.); Kinv = Kt.cwiseProduct(Ei);
  };
  auto rows = [&] {
    const double* __restrict gl = G.row(m - 1).data();
    for (index_t i = 0; i < m; ++i) {
      const double* __restrict gg = G.row(i).data();
      float* __restrict e = E.row(i).data(); float* __restrict egd = Egd.row(i).data();
      for (index_t a = 0; a < K; ++a) e[a] = static_cast<float>(gg[a]), egd[a] = static_cast<float>(gl[a] - gg[a]);
      float* __restrict ei = Ei.row(i).data();
      for (index_t a = 0; a < K; ++a) ei[a] = -e[a];
      Ei.row(i) = Ei.row(i).array().exp().matrix(); Kinv.row(i) = Kt.row(i).cwiseProduct(Ei.row(i));
      E.row(i) = E.row(i).array().exp().matrix(); Egd.row(i) = Egd.row(i).array().exp().matrix();
      Kd.row(i) = Kt.row(i).cwiseProduct(Egd.row(i)); Qg.row(i) = Q.row(i).cwiseProduct(E.row(i));
    }
  };
  auto fused = [&] { for (index_t i = 0; i < m; ++i) exp_row(K, G.row(i).data(), G.row(m-1).data(), Kt.row(i).data(), Q.row(i).data(), E.row(i).data(), Egd.row(i).data(), Ei.row(i).data(), Kd.row(i).data(), Qg.row(i).data(), Kinv.row(i).data()); };
  for (int r = 0; r < 3; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    for (int it = 0; it < 2000; ++it) { fused(); asm volatile("" ::: "memory"); }
    std::printf("fused %.2f us\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 2000 * 1e6);
  }
  for (int r = 0; r < 3; ++r) for (int w = 0; w < 2; ++w) {
    auto t0 = std::chrono::steady_clock::now();
    for (int it = 0; it < 2000; ++it) { if (w) rows(); else whole(); asm volatile("" ::: "memory"); }
    double us = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 2000 * 1e6;
    std::printf("%s %.2f us\n", w ? "rows " : "whole", us);
  }
}
