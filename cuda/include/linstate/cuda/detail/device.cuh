// linstate/cuda/detail/device.cuh — attributes of the current device, read once per (attribute,
// device) and host thread: the multiprocessor count (the persistent grids, whether two sequential
// passes fit side by side) and the compute capability (whether thread-block clusters exist).
// Thread-local, so no lock on the decode path; a device's attributes do not change while it exists.
//
//   const int sms = device_attribute(cudaDevAttrMultiProcessorCount, api);
#pragma once

#include <cuda_runtime.h>

#include <vector>

#include "../check.cuh"

namespace linstate::cuda_detail {

//! cudaDeviceGetAttribute(attr) of the current device, cached for this host thread.
inline int device_attribute(cudaDeviceAttr attr, const char* api) {
  struct entry {
    int dev;
    cudaDeviceAttr attr;
    int value;
  };
  thread_local std::vector<entry> known;
  int dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice", api);
  for (const entry& e : known)
    if (e.dev == dev && e.attr == attr) return e.value;
  int value = 0;
  check(cudaDeviceGetAttribute(&value, attr, dev), "cudaDeviceGetAttribute", api);
  known.push_back({dev, attr, value});
  return value;
}

//! The current device's multiprocessor count.
inline int sm_count(const char* api) { return device_attribute(cudaDevAttrMultiProcessorCount, api); }

//! Whether the current device has thread-block clusters (compute capability ≥ 9.0).
inline bool device_has_clusters(const char* api) { return device_attribute(cudaDevAttrComputeCapabilityMajor, api) >= 9; }

}  // namespace linstate::cuda_detail
