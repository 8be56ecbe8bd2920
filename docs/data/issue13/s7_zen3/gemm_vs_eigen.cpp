#include <Eigen/Core>
#include <linstate/backend/cpu/gemm.hpp>
#include <linstate/bench.hpp>
#include <cstdio>
#include <functional>
#include <time.h>
#include <vector>
#include <algorithm>
using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
namespace g = linstate::cpu_detail::gemm;
double tcpu() { timespec ts; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); return ts.tv_sec + 1e-9 * ts.tv_nsec; }
double sample(const std::function<void()>& f) { double t0 = tcpu(); int n = 0; double el; do { f(); ++n; el = tcpu() - t0; } while (el < 0.05); return el / n; }
double med(std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }
int main() {
  const int C = 64, K = 128, V = 128;
  RowMat Qg = RowMat::Random(C, K), H = RowMat::Random(K, V), Einv = RowMat::Random(C, K), A(C, C), O(C, V), Vc = RowMat::Random(C, V), Kd = RowMat::Random(C, K), EinvT(K, C);
  RowMat H2 = H, O2(C, V), A2(C, C);
  auto eig = [&] { O.noalias() = Qg * H; A.noalias() = Qg * Einv.transpose(); O.noalias() += A * Vc; H.noalias() += Kd.transpose() * Vc; };
  auto mine = [&] {
    g::product<g::set>(C, V, K, Qg.data(), K, 1, H2.data(), V, O2.data(), V);
    EinvT = Einv.transpose();
    g::product<g::set>(C, C, K, Qg.data(), K, 1, EinvT.data(), C, A2.data(), C);
    g::product<g::add>(C, V, C, A2.data(), C, 1, Vc.data(), V, O2.data(), V);
    g::product<g::add>(K, V, C, Kd.data(), 1, K, Vc.data(), V, H2.data(), V);
  };
  eig(); mine();
  printf("max|dO| %g max|dA| %g max|dH| %g (max|O| %g)\n", (O - O2).cwiseAbs().maxCoeff(), (A - A2).cwiseAbs().maxCoeff(), (H - H2).cwiseAbs().maxCoeff(), O.cwiseAbs().maxCoeff());
  std::vector<double> te, tm;
  for (int r = 0; r < 9; ++r) { te.push_back(sample(eig)); tm.push_back(sample(mine)); H = RowMat::Random(K, V); H2 = H; }
  const double fl = 2.0 * (C * K * V + C * K * C + C * C * V + K * C * V);
  printf("LINSTATE_GEMM_AVX2=%d eigen %.1f us (%.1f GFLOP/s)  kernel %.1f us (%.1f GFLOP/s)  speed-up %.2f\n", LINSTATE_GEMM_AVX2, med(te) * 1e6, fl / med(te) * 1e-9, med(tm) * 1e6, fl / med(tm) * 1e-9, med(te) / med(tm));
}
