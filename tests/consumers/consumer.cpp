// tests/consumers/consumer.cpp — the program every downstream project under tests/consumers builds
// (a Meson project with linstate as a subproject, a Makefile over pkg-config, a CMake project over
// find_package(linstate)); tests/consumers/run.sh copies it next to each project's build file.
//
// It checks what a consumer's build flags decide, at run time:
//  1. OpenMP reached this translation unit (LINSTATE_HAS_OPENMP) and the CPU backend runs on at
//     least two threads when the machine has two cores (linstate::cpu_threads());
//  2. GLA and SSE-n4k1 + shared, chunked<16>, agree with the fp64 reference (SPEC §9.3: relative
//     error ≤ 1e-5 in fp32), on a problem big enough to be split over the threads.
// Prints one line; exits 1 on a failed check.
#include <linstate/linstate.hpp>
#include <linstate/testing/inputs.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <thread>

namespace {

struct gla : linstate::spec<> {};
struct sse_n4k1s : gla {
  using partition = linstate::partition::routed<4, linstate::partition::shared>;
  using router = linstate::router::top_k<1>;
};

//! max |got − want| / max |want|.
double relative_error(const linstate::tensor<float>& got, const linstate::tensor<double>& want) {
  double e = 0, m = 0;
  for (linstate::index_t i = 0; i < want.numel(); ++i) {
    e = std::max(e, std::abs(static_cast<double>(got.data()[i]) - want.data()[i]));
    m = std::max(m, std::abs(want.data()[i]));
  }
  return e / std::max(m, 1e-300);
}

template <class V>
double check(const char* name) {
  const auto data = linstate::testing::random_inputs<V>({.B = 2, .T = 96, .H = 2, .HV = 2, .K = 16, .V = 16}, 7);
  const auto got = linstate::forward<V>(linstate::cpu{}, data.view(), linstate::chunked<16>{});
  const auto want = linstate::reference::forward<V>(data.view());
  const double e = std::max(relative_error(got.o, want.o), relative_error(got.final_state, want.final_state));
  std::printf("  %s chunked<16> against the fp64 reference: relative error %.2e\n", name, e);
  return e;
}

}  // namespace

int main(int argc, char** argv) {
  const char* how = argc > 1 ? argv[1] : "consumer";
  const unsigned cores = std::thread::hardware_concurrency();
  const int threads = linstate::cpu_threads();
  std::printf("%s: LINSTATE_HAS_OPENMP = %d, linstate::cpu_threads() = %d, %u cores\n", how, LINSTATE_HAS_OPENMP,
              threads, cores);
  int failures = 0;
  if (!LINSTATE_HAS_OPENMP) {
    std::printf("FAIL: compiled without OpenMP: the build flags lost -fopenmp, the CPU backend runs on one thread\n");
    ++failures;
  } else if (cores >= 2 && threads < 2) {
    std::printf("FAIL: the CPU backend would run on %d thread(s) of %u cores (OMP_NUM_THREADS?)\n", threads, cores);
    ++failures;
  }
  const double tol = 1e-5;
  if (check<gla>("gla") > tol) ++failures;
  if (check<sse_n4k1s>("sse_n4k1s") > tol) ++failures;
  std::printf("%s: %s\n", how, failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}
