// docs/data/issue13/s10/transpose.cpp — the kernels' operand transposes, one thread, in cache: Eigen's `X = Y.transpose()`
// on row-major operands against gemm::transpose (8×8 AVX blocks), best of 9 runs of 2000 calls.
//   g++ -std=c++20 -O3 -march=native -DNDEBUG -Iinclude $(pkg-config --cflags eigen3) docs/data/issue13/s10/transpose.cpp
#include <linstate/linstate.hpp>
#include <chrono>
#include <cstdio>
using namespace linstate::cpu_detail;
template <class F> double best(F f, int reps) { double b = 1e9; for (int r = 0; r < 9; ++r) { auto t0 = std::chrono::steady_clock::now(); for (int i = 0; i < reps; ++i) f(); b = std::min(b, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps); } return b; }
int main() {
  RowMat E = RowMat::Random(64, 128), ET(128, 64), D = RowMat::Random(128, 128), DT(128, 128);
  double t1 = best([&] { ET.leftCols(64) = E.transpose(); asm volatile("" ::"r"(ET.data()) : "memory"); }, 2000);
  double t2 = best([&] { DT = D.transpose(); asm volatile("" ::"r"(DT.data()) : "memory"); }, 2000);
  double t3 = best([&] { gemm::transpose(64, 128, E.data(), 128, ET.data(), 64); asm volatile("" ::"r"(ET.data()) : "memory"); }, 2000);
  double t4 = best([&] { gemm::transpose(128, 128, D.data(), 128, DT.data(), 128); asm volatile("" ::"r"(DT.data()) : "memory"); }, 2000);
  std::printf("gemm::transpose 64x128: %.2f us; 128x128: %.2f us\n", t3 * 1e6, t4 * 1e6);
  std::printf("transpose 64x128: %.2f us; 128x128: %.2f us\n", t1 * 1e6, t2 * 1e6);
}
