// cuda/emulation/emulation.hpp — the CUDA device side on the CPU, for running linstate's GPU tests on a
// machine without a GPU (docs/cuda.md, "The GPU tests on the CPU"). A development and CI aid, not a
// backend: it checks the kernels' logic (indices, fragments, barriers, buffer lifetimes), not their
// speed, and it is not bit-exact to the hardware.
//
// Force-included (g++ -include) before every source of an emulated test program, whose CUDA sources
// rewrite.pl has rewritten (launches, inline PTX, __shared__ variables). The model:
//   * every thread of a block is a fiber on one OS thread (scheduler.cpp: its own stack, switched by a
//     few instructions, no system call); a block's fibers run round-robin, each until it waits;
//   * blocks run one after another, in grid order (a kernel that waits on another block of its grid
//     deadlocks here, and the scheduler reports it);
//   * __syncthreads (and _or/_and/_count), named barriers (bar.sync) and the warp collectives —
//     shuffles, ballots, mma.sync m16n8k16 (bf16 / f16, fp32 accumulators), ldmatrix x4 (.trans) and
//     WMMA products — wait for every live thread they involve; the last to arrive does the warp's work;
//   * shared memory: the dynamic buffer and static __shared__ arrays in .bss below 4 GiB (the program
//     is linked without PIE), so that a 32-bit shared address is the pointer itself (ldmatrix, cp.async);
//     each block's dynamic buffer starts as 0xff bytes (NaN as floats), so a read before any write
//     shows; cp.async copies at once (its waits are then no-ops);
//   * mma products: exact products summed in double, rounded once to fp32 with the accumulator (the
//     hardware's fp32 sums differ in the last bits; the tests' ratios agree with the H200's to about
//     three digits, docs/cuda.md);
//   * atomics are plain read-modify-writes (one fiber runs at a time); clusters and distributed shared
//     memory are not emulated (a launch that needs them stops with a message).
#pragma once
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

namespace linstate_emu {
struct fiber {
  void* sp = nullptr;
  uint3 tid{};
  int linear = 0, lane = 0, warp = 0;
  bool done = false;
  unsigned char* stack = nullptr;
};
extern fiber* cur;
unsigned char* dyn_smem();
void yield();
// block barrier with a reduction (op 0 plain, 1 or, 2 and, 3 count)
int block_sync(int op, int pred);
void named_barrier(int id, int count);
// warp collectives
enum class wop { sync, shfl_idx, shfl_xor, shfl_down, shfl_up, ballot, mma_bf16, mma_f16, ldsm4, ldsm4t, once };
struct wslot {
  std::uint64_t v = 0;
  int param = 0, width = 32;
  unsigned a[4], b[2];
  float c[4];
  std::uintptr_t addr = 0;
  void* ptr = nullptr;                      // wop::once: this lane's argument
  void (*fn)(void* const* lanes) = nullptr;  // wop::once: run by the last lane with every lane's ptr
  // results
  std::uint64_t r = 0;
  float d[4];
  unsigned m[4];
};
wslot& warp_begin();
void warp_finish(wop op);  // arrive; the last lane computes; returns after release
[[noreturn]] void fail(const char* what);
//! A warp-wide operation done once: every lane passes its argument; the last lane to arrive calls
//! fn with the 32 arguments (lane order); all lanes return after it.
inline void warp_once(void (*fn)(void* const* lanes), void* arg) {
  wslot& s = warp_begin();
  s.fn = fn, s.ptr = arg;
  warp_finish(wop::once);
}

template <class T>
T shfl(wop op, T v, int param, int width) {
  static_assert(sizeof(T) <= 8);
  wslot& s = warp_begin();
  s.v = 0;
  std::memcpy(&s.v, &v, sizeof(T));
  s.param = param, s.width = width;
  warp_finish(op);
  T r;
  std::memcpy(&r, &s.r, sizeof(T));
  return r;
}
inline unsigned ballot(int p) {
  wslot& s = warp_begin();
  s.v = p ? 1 : 0;
  warp_finish(wop::ballot);
  return static_cast<unsigned>(s.r);
}
inline void mma_bf16(float& d0, float& d1, float& d2, float& d3, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0,
                     unsigned b1, float c0, float c1, float c2, float c3, bool f16 = false) {
  wslot& s = warp_begin();
  s.a[0] = a0, s.a[1] = a1, s.a[2] = a2, s.a[3] = a3, s.b[0] = b0, s.b[1] = b1;
  s.c[0] = c0, s.c[1] = c1, s.c[2] = c2, s.c[3] = c3;
  warp_finish(f16 ? wop::mma_f16 : wop::mma_bf16);
  d0 = s.d[0], d1 = s.d[1], d2 = s.d[2], d3 = s.d[3];
}
inline void ldsm4(unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3, unsigned addr, bool trans) {
  wslot& s = warp_begin();
  s.addr = addr;
  warp_finish(trans ? wop::ldsm4t : wop::ldsm4);
  r0 = s.m[0], r1 = s.m[1], r2 = s.m[2], r3 = s.m[3];
}
inline void cp_async(unsigned dst, const void* src, int bytes, int src_bytes) {
  auto* d = reinterpret_cast<unsigned char*>(static_cast<std::uintptr_t>(dst));
  const int n = src_bytes < bytes ? src_bytes : bytes;
  if (n > 0) std::memcpy(d, src, static_cast<std::size_t>(n));
  if (n < bytes) std::memset(d + (n > 0 ? n : 0), 0, static_cast<std::size_t>(bytes - (n > 0 ? n : 0)));
}
[[noreturn]] void unsupported(const char* what);

// ---- launches -----------------------------------------------------------------------------------
struct cfg_t {
  dim3 grid, block;
  std::size_t smem = 0;
  cudaStream_t stream = nullptr;
};
inline cfg_t cfg(dim3 g, dim3 b, std::size_t smem = 0, cudaStream_t s = nullptr) { return {g, b, smem, s}; }
void run_grid(const cfg_t& c, const char* name, const std::function<void()>& body);
// stream capture (CUDA graphs): while a capture is open, launches and async copies are recorded
bool record(const std::function<void()>& op);  // true: recorded (do not run now)
template <class Tup, class F>
void launch(const cfg_t& c, const char* name, Tup args, F f) {
  run_grid(c, name, std::function<void()>([args, f]() mutable {
    Tup t = args;  // the kernel's parameters, per thread
    std::apply(f, t);
  }));
}
template <class T>
const void* fnaddr(T* p) { return reinterpret_cast<const void*>(p); }
template <class T, class V>
cudaError_t func_set_attr(T*, V, int) { return cudaSuccess; }
template <class T>
cudaError_t func_get_attrs(cudaFuncAttributes* a, T*) {
  *a = cudaFuncAttributes{};
  a->maxThreadsPerBlock = 1024, a->numRegs = 64, a->maxDynamicSharedSizeBytes = 232448;
  return cudaSuccess;
}
template <class T>
cudaError_t occupancy(int* n, T*, int threads, std::size_t smem) {
  int by_smem = static_cast<int>(233472 / (smem + 1024)), by_threads = 2048 / (threads > 0 ? threads : 1);
  *n = by_smem < by_threads ? by_smem : by_threads;
  if (*n > 32) *n = 32;
  return cudaSuccess;
}
template <class... A>
cudaError_t launch_ex_unsupported(A&&...) {
  unsupported("cudaLaunchKernelEx (clusters)");
}
}  // namespace linstate_emu

// ---- device built-ins ---------------------------------------------------------------------------
#undef __global__
#undef __device__
#undef __host__
#undef __forceinline__
#undef __noinline__
#undef __launch_bounds__
#undef __align__
#undef __restrict__
#undef __constant__
#undef __managed__
#undef __grid_constant__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __restrict__ __restrict
#define __constant__
#define __grid_constant__
// (globals the scheduler sets before it resumes a fiber / starts a block)
inline uint3 threadIdx;
inline uint3 blockIdx;
inline dim3 blockDim;
inline dim3 gridDim;
#define warpSize 32

inline void __syncthreads() { ::linstate_emu::block_sync(0, 0); }
inline int __syncthreads_or(int p) { return ::linstate_emu::block_sync(1, p); }
inline int __syncthreads_and(int p) { return ::linstate_emu::block_sync(2, p); }
inline int __syncthreads_count(int p) { return ::linstate_emu::block_sync(3, p); }
inline void __syncwarp(unsigned = 0xffffffffu) {
  ::linstate_emu::warp_begin();
  ::linstate_emu::warp_finish(::linstate_emu::wop::sync);
}
template <class T> T __shfl_sync(unsigned, T v, int src, int w = 32) { return ::linstate_emu::shfl(::linstate_emu::wop::shfl_idx, v, src, w); }
template <class T> T __shfl_xor_sync(unsigned, T v, int m, int w = 32) { return ::linstate_emu::shfl(::linstate_emu::wop::shfl_xor, v, m, w); }
template <class T> T __shfl_down_sync(unsigned, T v, unsigned d, int w = 32) { return ::linstate_emu::shfl(::linstate_emu::wop::shfl_down, v, static_cast<int>(d), w); }
template <class T> T __shfl_up_sync(unsigned, T v, unsigned d, int w = 32) { return ::linstate_emu::shfl(::linstate_emu::wop::shfl_up, v, static_cast<int>(d), w); }
inline unsigned __ballot_sync(unsigned, int p) { return ::linstate_emu::ballot(p); }
inline int __any_sync(unsigned, int p) { return ::linstate_emu::ballot(p) != 0; }
inline int __all_sync(unsigned, int p) { return ::linstate_emu::ballot(p) == 0xffffffffu; }

inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __log2f(float x) { return std::log2(x); }
inline float __exp2f(float x) { return std::exp2(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __frcp_rn(float a) { return 1.f / a; }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __saturatef(float x) { return x < 0.f ? 0.f : (x > 1.f ? 1.f : x); }
inline float rsqrtf(float x) { return 1.f / std::sqrt(x); }
inline unsigned __float_as_uint(float x) { unsigned u; std::memcpy(&u, &x, 4); return u; }
inline float __uint_as_float(unsigned u) { float x; std::memcpy(&x, &u, 4); return x; }
inline int __float_as_int(float x) { int u; std::memcpy(&u, &x, 4); return u; }
inline float __int_as_float(int u) { float x; std::memcpy(&x, &u, 4); return x; }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __ffs(unsigned x) { return __builtin_ffs(static_cast<int>(x)); }
inline int __clz(unsigned x) { return x ? __builtin_clz(x) : 32; }
template <class T> T __ldg(const T* p) { return *p; }
template <class T> T __ldcs(const T* p) { return *p; }
template <class T> T __ldcg(const T* p) { return *p; }
template <class T> void __stcs(T* p, T v) { *p = v; }
template <class T> void __stcg(T* p, T v) { *p = v; }
[[noreturn]] inline void __trap() { ::linstate_emu::fail("__trap"); }
inline void __nanosleep(unsigned) { ::linstate_emu::yield(); }
inline void __threadfence() {}
inline void __threadfence_block() {}
inline std::size_t __cvta_generic_to_shared(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  if (a >> 32) ::linstate_emu::fail("__cvta_generic_to_shared: address above 4 GiB (build without PIE)");
  return a;
}
template <class T> T atomicAdd(T* p, T v) { T o = *p; *p = o + v; return o; }
template <class T> T atomicOr(T* p, T v) { T o = *p; *p = o | v; return o; }
template <class T> T atomicAnd(T* p, T v) { T o = *p; *p = o & v; return o; }
template <class T> T atomicMax(T* p, T v) { T o = *p; *p = o > v ? o : v; return o; }
template <class T> T atomicMin(T* p, T v) { T o = *p; *p = o < v ? o : v; return o; }
template <class T> T atomicExch(T* p, T v) { T o = *p; *p = v; return o; }
template <class T> T atomicCAS(T* p, T c, T v) { T o = *p; if (o == c) *p = v; return o; }
inline void __cluster_barrier_arrive() { ::linstate_emu::unsupported("cluster barrier"); }
inline void __cluster_barrier_arrive_relaxed() { ::linstate_emu::unsupported("cluster barrier"); }
inline void __cluster_barrier_wait() { ::linstate_emu::unsupported("cluster barrier"); }
template <class T> T* __cluster_map_shared_rank(T*, unsigned) { ::linstate_emu::unsupported("cluster shared memory"); }
inline unsigned __clusterRelativeBlockRank() { ::linstate_emu::unsupported("cluster"); }
inline unsigned __clusterSizeInBlocks() { ::linstate_emu::unsupported("cluster"); }
template <class A, class B>
inline auto min(A a, B b) -> std::common_type_t<A, B> { return a < b ? a : b; }
template <class A, class B>
inline auto max(A a, B b) -> std::common_type_t<A, B> { return a < b ? b : a; }
