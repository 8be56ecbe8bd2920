// linstate/backend/tags.hpp — backends are values chosen at the call site.
#pragma once

#include "../config.hpp"

namespace linstate {

//! The Eigen CPU backend. `threads = 0` uses every OpenMP thread (when compiled with OpenMP).
struct cpu {
  int threads = 0;
};

//! How many threads forward() and backward() on `be` run a problem with enough work (at least two
//! (sequence, value head) tasks and about one K×V state update per thread): `be.threads` when
//! positive, else OpenMP's omp_get_max_threads(). It is 1 when the calling translation unit was
//! compiled without OpenMP (no -fopenmp: LINSTATE_HAS_OPENMP = 0): the CPU backend then runs on the
//! calling thread only, so a build system that drops the flag shows here.
//!
//!   if (linstate::cpu_threads() < 2) std::cerr << "linstate: built without OpenMP, one thread\n";
inline int cpu_threads(const cpu& be = {}) {
#if LINSTATE_HAS_OPENMP
  return be.threads > 0 ? be.threads : omp_get_max_threads();
#else
  (void)be;
  return 1;
#endif
}

//! The CUDA backend: work is enqueued on `stream` (a cudaStream_t, held as void* so that this header
//! needs no CUDA include; nullptr = the legacy default stream). CPU-only code can name and build it;
//! its forward() overloads live under cuda/ and are visible only to translation units that include
//! <linstate/cuda.cuh>.
struct cuda {
  void* stream = nullptr;
};

}  // namespace linstate
