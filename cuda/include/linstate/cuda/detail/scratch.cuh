// linstate/cuda/detail/scratch.cuh — where the CUDA backend takes its per-call scratch memory.
//
// One library-owned stream-ordered memory pool per device (created on first use, never destroyed).
// Its release threshold keeps what it allocated mapped across synchronisations (a caching allocator,
// as PyTorch's): a decode loop that synchronises after every step, or a training loop whose chunked
// calls take hundreds of MiB of per-chunk states, does not map fresh memory at every call (the
// device's default pool, whose threshold is 0, would; we leave the user's default pool alone). The
// pool keeps its high-water mark until the process ends; cudaMemPoolTrimTo on
// scratch_pool() returns it.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "../check.cuh"

namespace linstate::cuda_detail {

inline constexpr std::uint64_t scratch_pool_keep = ~std::uint64_t{0};  // keep all: a caching allocator

//! The scratch pool of the current device.
inline cudaMemPool_t scratch_pool(const char* api) {
  int dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice", api);
  static std::mutex mutex;
  static std::vector<cudaMemPool_t> pools;  // by device ordinal; null until created
  const std::lock_guard<std::mutex> lock(mutex);
  if (static_cast<std::size_t>(dev) >= pools.size()) pools.resize(static_cast<std::size_t>(dev) + 1, nullptr);
  cudaMemPool_t& pool = pools[static_cast<std::size_t>(dev)];
  if (!pool) {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = dev;
    cudaMemPool_t created = nullptr;
    check(cudaMemPoolCreate(&created, &props), "cudaMemPoolCreate", api);
    std::uint64_t keep = scratch_pool_keep;
    check(cudaMemPoolSetAttribute(created, cudaMemPoolAttrReleaseThreshold, &keep), "cudaMemPoolSetAttribute", api);
    pool = created;
  }
  return pool;
}

//! Byte offsets of several arrays carved out of one allocation (each aligned to 256 bytes).
struct scratch_layout {
  std::size_t bytes = 0;
  std::size_t add(std::size_t n) {
    const std::size_t at = bytes;
    bytes += (n + 255) / 256 * 256;
    return at;
  }
};

}  // namespace linstate::cuda_detail
