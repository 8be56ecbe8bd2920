// linstate/cuda/detail/side_stream.cuh — a second stream for work that runs beside the caller's
// stream inside one call (issue 11, item 4: the chunk-to-chunk passes must not serialise the GPU).
//
// The sequential passes of the chunked backward (the states entering each chunk, and the reverse
// scan of their adjoints) each occupy one block per (stream, value head, value tile) — 64 of the
// H200's 132 SMs at B = 1, H = 8, V = 128 — and wait on their own latency, not on the GPU. Where two
// of them do not depend on each other, the call forks: the caller's stream records an event, the side
// stream waits on it and takes one of the passes, and the caller's stream waits on the side stream's
// event before the work that needs both. Ordinary stream semantics, nothing spins: the result is the
// same with the launches serialised (CUDA_LAUNCH_BLOCKING=1, compute-sanitizer) and the fork is
// recorded as two branches when the caller's stream is being captured into a CUDA graph.
//
// One side stream and two events per host thread and device, created on first use (non-blocking,
// the device's greatest priority: when both streams have blocks waiting for an SM, the side
// stream's sequential pass is placed first), released when the thread ends. Scratch memory that the
// caller allocated stream-ordered on its stream may be used on the side stream between fork() and
// join(): join() orders the side stream's work before anything later on the caller's stream,
// cudaFreeAsync included.
//
//   side_stream::fork f(stream, api);           // the side stream starts after what `stream` holds
//   kernel_a<<<grid, block, smem, f.side()>>>(…);
//   kernel_b<<<grid, block, smem, stream>>>(…);  // beside kernel_a
//   f.join();                                   // `stream` waits for kernel_a
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "../check.cuh"
#include "device.cuh"

namespace linstate::cuda_detail {

namespace side_stream {

struct per_device {
  cudaStream_t side = nullptr;
  cudaEvent_t forked = nullptr, joined = nullptr;
  std::vector<cudaEvent_t> steps;  // for pipelines of several hand-offs (event(i))
};

//! This host thread's side stream and events on the current device.
inline per_device& of_current_device(const char* api) {
  struct table {
    std::vector<per_device> by_device;
    ~table() {  // errors at thread or process end are not reported (the driver may be gone)
      for (per_device& d : by_device) {
        if (d.side) (void)cudaStreamDestroy(d.side);
        if (d.forked) (void)cudaEventDestroy(d.forked);
        if (d.joined) (void)cudaEventDestroy(d.joined);
        for (cudaEvent_t e : d.steps) (void)cudaEventDestroy(e);
      }
    }
  };
  thread_local table t;
  int dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice", api);
  if (static_cast<std::size_t>(dev) >= t.by_device.size()) t.by_device.resize(static_cast<std::size_t>(dev) + 1);
  per_device& d = t.by_device[static_cast<std::size_t>(dev)];
  if (!d.side) {
    int least = 0, greatest = 0;
    check(cudaDeviceGetStreamPriorityRange(&least, &greatest), "cudaDeviceGetStreamPriorityRange", api);
    per_device made;
    check(cudaEventCreateWithFlags(&made.forked, cudaEventDisableTiming), "cudaEventCreateWithFlags(side stream fork)", api);
    check(cudaEventCreateWithFlags(&made.joined, cudaEventDisableTiming), "cudaEventCreateWithFlags(side stream join)", api);
    check(cudaStreamCreateWithPriority(&made.side, cudaStreamNonBlocking, greatest), "cudaStreamCreateWithPriority(side stream)",
          api);
    d = made;
  }
  return d;
}

//! Whether a grid of `blocks` blocks of at most one per SM (the sequential passes) leaves at least as
//! many SMs free, so that a second such grid, or other work, can run beside it.
inline bool leaves_room(std::int64_t blocks, const char* api) { return 2 * blocks <= sm_count(api); }

//! A fork of `stream` into `stream` and side(); join() (or the destructor, on an exception's path)
//! makes `stream` wait for everything enqueued on side() since the fork.
class fork {
 public:
  fork(cudaStream_t stream, const char* api) : stream_(stream), api_(api), d_(&of_current_device(api)) {
    check(cudaEventRecord(d_->forked, stream_), "cudaEventRecord(side stream fork)", api_);
    check(cudaStreamWaitEvent(d_->side, d_->forked, 0), "cudaStreamWaitEvent(side stream fork)", api_);
  }
  fork(const fork&) = delete;
  fork& operator=(const fork&) = delete;
  ~fork() {
    if (!joined_) {  // an exception left the fork open: keep the order, report nothing more
      (void)cudaEventRecord(d_->joined, d_->side);
      (void)cudaStreamWaitEvent(stream_, d_->joined, 0);
    }
  }
  //! The stream for the work beside `stream`.
  cudaStream_t side() const { return d_->side; }
  //! Hand-off i of a pipeline: everything enqueued on `from` so far comes before what is enqueued on
  //! `to` next (from, to: `stream` and side(), either way). Each i is used once per fork.
  void hand_off(std::size_t i, cudaStream_t from, cudaStream_t to) {
    while (d_->steps.size() <= i) {
      cudaEvent_t e = nullptr;
      check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags(side stream hand-off)", api_);
      d_->steps.push_back(e);
    }
    check(cudaEventRecord(d_->steps[i], from), "cudaEventRecord(side stream hand-off)", api_);
    check(cudaStreamWaitEvent(to, d_->steps[i], 0), "cudaStreamWaitEvent(side stream hand-off)", api_);
  }
  //! `stream` waits for the side stream's work (once; later calls do nothing).
  void join() {
    if (joined_) return;
    joined_ = true;
    check(cudaEventRecord(d_->joined, d_->side), "cudaEventRecord(side stream join)", api_);
    check(cudaStreamWaitEvent(stream_, d_->joined, 0), "cudaStreamWaitEvent(side stream join)", api_);
  }

 private:
  cudaStream_t stream_;
  const char* api_;
  per_device* d_;
  bool joined_ = false;
};

}  // namespace side_stream

}  // namespace linstate::cuda_detail
