// bench/gemm_shapes.cpp — the four matrix products of one chunk of the CPU chunked GLA forward
// (kernels.hpp run_chunked, C = 64, K = V = 128), timed on one thread with Eigen (the same
// expressions and storage orders as the kernel) and with a CBLAS (OpenBLAS or BLIS from Debian,
// chosen at compile time: bench/profile.sh builds one binary per library), in one process, rounds
// alternating between the two (issue 13, item 5: is Eigen's GEMM at these shapes the limit?).
//
//   O  = Qg · H          (64×128)·(128×128)
//   A  = Qg · Einvᵀ      (64×128)·(128×64)
//   O += A · V           (64×64)·(64×128)
//   H += Kdᵀ · V         (128×64)·(64×128)
//
// All operands row-major fp32, resident in L1/L2 (about 200 KiB), as in the kernel. One sample =
// calls for `--min-time` seconds of the thread's CPU time (time spent waiting for a core on a shared
// machine is not counted); the figure is the median of `--samples` samples; the FMA peak of one
// thread is <linstate/bench.hpp>'s chains, timed the same way (best of 7).
//
//   BUILD_DIR/gemm_shapes_openblas [--samples=7] [--min-time=0.1]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <time.h>

#include <Eigen/Core>
#include <linstate/bench.hpp>

#include "profile_util.hpp"

#if defined(LINSTATE_CBLAS)
extern "C" {
#include <cblas.h>
}
#endif
#ifndef LINSTATE_CBLAS_NAME
#define LINSTATE_CBLAS_NAME "none"
#endif

namespace {

using namespace linstate_profile;

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

//! Seconds of this thread's CPU time per call (a shared machine's waits for a core not counted).
double sample(const std::function<void()>& f, double min_time) {
  const double t0 = thread_cpu_s();
  int n = 0;
  double el = 0;
  do {
    f();
    ++n;
    el = thread_cpu_s() - t0;
  } while (el < min_time);
  return el / n;
}

struct shape {
  const char* name;
  double flops;
  std::function<void()> eigen, blas;
};

}  // namespace

int main(int argc, char** argv) {
  int samples = 7;
  double min_time = 0.1;
  for (int i = 1; i < argc; ++i) {
    if (!std::strncmp(argv[i], "--samples=", 10)) samples = std::atoi(argv[i] + 10);
    else if (!std::strncmp(argv[i], "--min-time=", 11)) min_time = std::atof(argv[i] + 11);
    else {
      std::fprintf(stderr, "usage: gemm_shapes [--samples=7] [--min-time=0.1]\n");
      return 2;
    }
  }
  Eigen::setNbThreads(1);
  const int C = 64, K = 128, V = 128;
  RowMat Qg = RowMat::Random(C, K), Hm = RowMat::Random(K, V), Einv = RowMat::Random(C, K), A = RowMat::Random(C, C);
  RowMat Vc = RowMat::Random(C, V), Kd = RowMat::Random(C, K), O(C, V), Ob(C, V), Ab(C, C);
  RowMat H1 = Hm, H2 = Hm;
  std::vector<shape> shapes = {
      {"O = Qg·H (64x128)(128x128)", 2.0 * C * K * V, [&] { O.noalias() = Qg * Hm; }, nullptr},
      {"A = Qg·Einvᵀ (64x128)(128x64)", 2.0 * C * C * K, [&] { Ab.noalias() = Qg * Einv.transpose(); }, nullptr},
      {"O += A·V (64x64)(64x128)", 2.0 * C * C * V, [&] { O.noalias() += A * Vc; }, nullptr},
      {"H += Kdᵀ·V (128x64)(64x128)", 2.0 * K * C * V, [&] { H1.noalias() += Kd.transpose() * Vc; }, nullptr},
  };
#if defined(LINSTATE_CBLAS)
  shapes[0].blas = [&] { cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, C, V, K, 1.f, Qg.data(), K, Hm.data(), V, 0.f, Ob.data(), V); };
  shapes[1].blas = [&] { cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, C, C, K, 1.f, Qg.data(), K, Einv.data(), K, 0.f, Ab.data(), C); };
  shapes[2].blas = [&] { cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, C, V, C, 1.f, A.data(), C, Vc.data(), V, 1.f, Ob.data(), V); };
  shapes[3].blas = [&] { cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, V, C, 1.f, Kd.data(), K, Vc.data(), V, 1.f, H2.data(), V); };
  // the two agree (one call each from the same operands)
  {
    RowMat o1 = Qg * Hm, o2(C, V);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, C, V, K, 1.f, Qg.data(), K, Hm.data(), V, 0.f, o2.data(), V);
    RowMat h1 = Kd.transpose() * Vc, h2 = RowMat::Zero(K, V);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, V, C, 1.f, Kd.data(), K, Vc.data(), V, 0.f, h2.data(), V);
    std::printf("# check: max |Eigen − %s| = %.2g (O), %.2g (H)\n", LINSTATE_CBLAS_NAME, (o1 - o2).cwiseAbs().maxCoeff(),
                (h1 - h2).cwiseAbs().maxCoeff());
  }
#endif
  const double peak = fma_peak_one_thread();
  std::printf("# gemm_shapes: %s, 1 thread, thread CPU time; FMA peak %.1f GFLOP/s; Eigen %d.%d.%d; BLAS: %s\n",
              linstate::bench::detail::cpu_model().c_str(), peak / 1e9,
              EIGEN_WORLD_VERSION, EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION, LINSTATE_CBLAS_NAME);
  std::printf("| product | Eigen µs | Eigen GFLOP/s (of peak) | %s µs | %s GFLOP/s (of peak) | Eigen / %s time |\n|---|---|---|---|---|---|\n",
              LINSTATE_CBLAS_NAME, LINSTATE_CBLAS_NAME, LINSTATE_CBLAS_NAME);
  double te_all = 0, tb_all = 0, f_all = 0;
  for (shape& s : shapes) {
    std::vector<double> te, tb;
    for (int r = 0; r < samples; ++r) {
      if (r % 2 == 0 || !s.blas) te.push_back(sample(s.eigen, min_time));
      if (s.blas) tb.push_back(sample(s.blas, min_time));
      if (r % 2 == 1 && s.blas) te.push_back(sample(s.eigen, min_time));
    }
    const double e = median(te), b = s.blas ? median(tb) : 0;
    te_all += e, tb_all += b, f_all += s.flops;
    if (s.blas)
      std::printf("| %s | %.2f | %.1f (%.0f %%) | %.2f | %.1f (%.0f %%) | %.2f |\n", s.name, e * 1e6, s.flops / e / 1e9,
                  100 * s.flops / e / peak, b * 1e6, s.flops / b / 1e9, 100 * s.flops / b / peak, e / b);
    else
      std::printf("| %s | %.2f | %.1f (%.0f %%) | | | |\n", s.name, e * 1e6, s.flops / e / 1e9, 100 * s.flops / e / peak);
    std::fflush(stdout);
  }
  std::printf("| all four (one chunk) | %.2f | %.1f (%.0f %%) | %.2f | %.1f (%.0f %%) | %.2f |\n", te_all * 1e6, f_all / te_all / 1e9,
              100 * f_all / te_all / peak, tb_all * 1e6, tb_all > 0 ? f_all / tb_all / 1e9 : 0.0,
              tb_all > 0 ? 100 * f_all / tb_all / peak : 0.0, tb_all > 0 ? te_all / tb_all : 0.0);
  return 0;
}
