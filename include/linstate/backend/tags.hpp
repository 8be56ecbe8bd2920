// linstate/backend/tags.hpp — backends are values chosen at the call site.
#pragma once

namespace linstate {

//! The Eigen CPU backend. `threads = 0` uses every OpenMP thread (when compiled with OpenMP).
struct cpu {
  int threads = 0;
};

//! The CUDA backend (declared here so CPU-only code can name it; its implementation lives under
//! cuda/ and is only visible to translation units that include <linstate/cuda.cuh>).
struct cuda;

}  // namespace linstate
