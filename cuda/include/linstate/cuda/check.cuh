// linstate/cuda/check.cuh — every CUDA error becomes a linstate::cuda_error.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace linstate {

//! \brief Thrown when a CUDA runtime call or a kernel launch fails. The message names the call and
//! gives cudaGetErrorName / cudaGetErrorString, e.g.
//! `linstate::forward (cuda): cudaMallocAsync(partial outputs) failed: cudaErrorMemoryAllocation (out of memory)`.
//! Bad *input* (shapes, host pointers, unsupported sizes) is reported as linstate::error instead,
//! before anything is launched.
class cuda_error : public std::runtime_error {
 public:
  cuda_error(const std::string& what, cudaError_t code) : std::runtime_error(what), code_(code) {}
  //! The CUDA error code.
  cudaError_t code() const noexcept { return code_; }

 private:
  cudaError_t code_;
};

namespace cuda_detail {

//! Throws cuda_error when `e` is not cudaSuccess; `call` names what was called (and on what).
inline void check(cudaError_t e, const char* call, const char* api = "linstate") {
  if (e == cudaSuccess) return;
  throw cuda_error(std::string(api) + ": " + call + " failed: " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")",
                   e);
}

//! After a kernel launch: reports a launch error (bad configuration, no kernel image for this GPU...)
//! without synchronising. Errors of the kernel's execution surface at the caller's next synchronisation.
inline void check_launch(const char* kernel, const char* api = "linstate") {
  const cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) return;
  throw cuda_error(std::string(api) + ": launching " + kernel + " failed: " + cudaGetErrorName(e) + " (" +
                       cudaGetErrorString(e) + ")",
                   e);
}

}  // namespace cuda_detail
}  // namespace linstate
