// linstate/backend/tags.hpp — backends are values chosen at the call site.
#pragma once

namespace linstate {

//! The Eigen CPU backend. `threads = 0` uses every OpenMP thread (when compiled with OpenMP).
struct cpu {
  int threads = 0;
};

//! The CUDA backend: work is enqueued on `stream` (a cudaStream_t, held as void* so that this header
//! needs no CUDA include; nullptr = the legacy default stream). CPU-only code can name and build it;
//! its forward() overloads live under cuda/ and are visible only to translation units that include
//! <linstate/cuda.cuh>.
struct cuda {
  void* stream = nullptr;
};

}  // namespace linstate
