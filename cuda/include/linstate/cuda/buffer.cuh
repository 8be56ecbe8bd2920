// linstate/cuda/buffer.cuh — a thin owning device array.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <utility>

#include <linstate/tensor.hpp>

#include "check.cuh"

namespace linstate {

//! \brief Owning, move-only array of `n` elements of T in device memory.
//!
//! Built with a stream, it is stream-ordered: cudaMallocAsync on construction and cudaFreeAsync on
//! destruction, both on that stream (no host synchronisation). Built without one it uses cudaMalloc /
//! cudaFree (cudaFree synchronises the device: fine for tests and long-lived buffers). The memory is
//! not initialised. `view(shape)` hands out the linstate::tensor_view the API takes.
//! \code
//!   linstate::device_buffer<float> q(B * T * H * K, stream);
//!   q.upload(host_q.data(), stream);                       // cudaMemcpyAsync
//!   in.q = q.view({B, T, H, K});
//! \endcode
template <class T>
class device_buffer {
 public:
  device_buffer() = default;
  //! cudaMalloc'ed.
  explicit device_buffer(std::size_t n) : size_(n) {
    if (n) cuda_detail::check(cudaMalloc(reinterpret_cast<void**>(&data_), n * sizeof(T)), "cudaMalloc", "linstate::device_buffer");
  }
  //! Stream-ordered: allocated with cudaMallocAsync on `stream`, freed with cudaFreeAsync on it.
  device_buffer(std::size_t n, cudaStream_t stream) : size_(n), stream_(stream), async_(true) {
    if (n)
      cuda_detail::check(cudaMallocAsync(reinterpret_cast<void**>(&data_), n * sizeof(T), stream), "cudaMallocAsync",
                         "linstate::device_buffer");
  }
  //! Stream-ordered from a given memory pool (cudaMallocFromPoolAsync), freed with cudaFreeAsync.
  device_buffer(std::size_t n, cudaStream_t stream, cudaMemPool_t pool) : size_(n), stream_(stream), async_(true) {
    if (n)
      cuda_detail::check(cudaMallocFromPoolAsync(reinterpret_cast<void**>(&data_), n * sizeof(T), pool, stream),
                         "cudaMallocFromPoolAsync", "linstate::device_buffer");
  }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  device_buffer(device_buffer&& o) noexcept { swap(o); }
  device_buffer& operator=(device_buffer&& o) noexcept {
    if (this != &o) {
      device_buffer tmp(std::move(o));
      swap(tmp);
    }
    return *this;
  }
  ~device_buffer() { release(); }

  T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }

  //! A view of the first shape.numel() elements; throws linstate::error if the buffer is too small.
  tensor_view<T> view(const shape_t& shape) const {
    if (shape.numel() < 0 || static_cast<std::size_t>(shape.numel()) > size_)
      throw error("linstate::device_buffer::view: shape " + shape.str() + " needs " + std::to_string(shape.numel()) +
                  " elements but the buffer holds " + std::to_string(size_));
    return tensor_view<T>(data_, shape);
  }
  //! Copies size() elements from host memory (cudaMemcpyAsync on `stream`; a pageable source may be
  //! reused as soon as this returns, a pinned one only after the stream reached the copy).
  void upload(const T* host, cudaStream_t stream = nullptr) {
    if (size_)
      cuda_detail::check(cudaMemcpyAsync(data_, host, size_ * sizeof(T), cudaMemcpyHostToDevice, stream),
                         "cudaMemcpyAsync(host to device)", "linstate::device_buffer::upload");
  }
  //! Copies size() elements to host memory (cudaMemcpyAsync on `stream`: synchronise before reading).
  void download(T* host, cudaStream_t stream = nullptr) const {
    if (size_)
      cuda_detail::check(cudaMemcpyAsync(host, data_, size_ * sizeof(T), cudaMemcpyDeviceToHost, stream),
                         "cudaMemcpyAsync(device to host)", "linstate::device_buffer::download");
  }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
  cudaStream_t stream_ = nullptr;
  bool async_ = false;

  void swap(device_buffer& o) noexcept {
    std::swap(data_, o.data_), std::swap(size_, o.size_), std::swap(stream_, o.stream_), std::swap(async_, o.async_);
  }
  void release() noexcept {
    if (!data_) return;
    // A destructor cannot throw: a failure here (a sticky error of an earlier kernel) was or will be
    // reported by the call that observes it.
    if (async_) (void)cudaFreeAsync(data_, stream_);
    else (void)cudaFree(data_);
    data_ = nullptr;
  }
};

}  // namespace linstate
