// linstate/detail/phase_timer.hpp — where the CPU chunked kernels spend their time, per phase
// (issue 13, items 4 and 5: run_chunked, run_chunked_delta, run_chunked_backward). Compiled out unless LINSTATE_PHASE_TIMERS is defined to 1: then
// LINSTATE_PHASE_START opens a lap at the top of a chunk and LINSTATE_PHASE(p) charges the time since
// the previous mark to phase p, summed over every thread of the process (relaxed atomics, a few adds
// per chunk). The clock is the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID), so time the thread
// spent descheduled on a shared machine is not charged to any phase; a reading costs a system call
// (~0.1–0.3 µs; 10–16 readings per chunk of 64 tokens). Without the macro both expand to nothing, so
// the kernels are the same code as before.
// bench/phase_profile.cpp reads the totals (docs/benchmarks.md, "Issue 13").
#pragma once

#if defined(LINSTATE_PHASE_TIMERS) && LINSTATE_PHASE_TIMERS
#include <time.h>

#include <atomic>
#include <cstdint>

namespace linstate::detail::phase {

//! The phases: input rows staged into the chunk buffers (loads, gate cumulative sums, l2 norms);
//! exponentials and the elementwise products that apply them; the matrix products; the triangular
//! solve of the WY form; the output rows added into the sequence's accumulator; the rest (masks,
//! state row scaling); the conversions of the bf16-product path's operands to bf16 pair words
//! (backend/cpu/gemm_bf16.hpp).
enum id : int { staging, exps, gemm, solve, store, other, pack, count };
inline constexpr const char* names[count] = {"staging", "exp + scaling", "GEMM", "triangular solve", "output rows", "other",
                                             "bf16 packing"};

inline std::atomic<std::int64_t> ns[count];  // zero-initialised (static storage)

inline void reset() {
  for (auto& x : ns) x.store(0, std::memory_order_relaxed);
}
inline double seconds(id p) { return 1e-9 * static_cast<double>(ns[p].load(std::memory_order_relaxed)); }

//! This thread's CPU time in ns.
inline std::int64_t thread_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

struct lap {
  std::int64_t t0 = thread_ns();
  void operator()(id p) {
    const std::int64_t t = thread_ns();
    ns[p].fetch_add(t - t0, std::memory_order_relaxed);
    t0 = t;
  }
};

}  // namespace linstate::detail::phase

#define LINSTATE_PHASE_START ::linstate::detail::phase::lap linstate_phase_lap_
#define LINSTATE_PHASE(p) linstate_phase_lap_(::linstate::detail::phase::p)
#else
#define LINSTATE_PHASE_START
#define LINSTATE_PHASE(p)
#endif
