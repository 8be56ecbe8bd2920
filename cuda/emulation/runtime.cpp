// cuda/emulation/runtime.cpp — the CUDA runtime calls linstate and its tests make, on the CPU:
// device memory is host memory (tracked, so that cudaPointerGetAttributes tells device from host
// pointers), every call runs at once in the order made (streams and events order nothing more), the
// device reports an H200's limits. Inside a stream capture, copies and sets are recorded for the
// graph (scheduler.cpp).
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
namespace linstate_emu { bool record(const std::function<void()>& op); }

namespace {
std::map<const char*, std::size_t> allocs;  // device allocations: base → bytes
cudaError_t last = cudaSuccess;
bool is_dev(const void* p) {
  auto it = allocs.upper_bound(static_cast<const char*>(p));
  if (it == allocs.begin()) return false;
  --it;
  return static_cast<const char*>(p) < it->first + (it->second ? it->second : 1);
}
void* dev_alloc(std::size_t n) {
  void* p = std::aligned_alloc(256, (n + 255) / 256 * 256 + 256);
  std::memset(p, 0xa5, (n + 255) / 256 * 256);  // garbage, as device memory is
  allocs[static_cast<const char*>(p)] = n;
  return p;
}
void dev_free(void* p) {
  if (!p) return;
  allocs.erase(static_cast<const char*>(p));
  std::free(p);
}
struct pool_t {};
}  // namespace

extern "C" {
cudaError_t cudaMalloc(void** p, size_t n) { *p = dev_alloc(n); return cudaSuccess; }
cudaError_t cudaFree(void* p) { dev_free(p); return cudaSuccess; }
cudaError_t cudaMallocAsync(void** p, size_t n, cudaStream_t) { *p = dev_alloc(n); return cudaSuccess; }
cudaError_t cudaFreeAsync(void* p, cudaStream_t) {
  if (!linstate_emu::record([] {})) dev_free(p);  // freed inside a capture: kept for the graph's replays
  return cudaSuccess;
}
cudaError_t cudaMallocFromPoolAsync(void** p, size_t n, cudaMemPool_t, cudaStream_t) { *p = dev_alloc(n); return cudaSuccess; }
cudaError_t cudaMemPoolCreate(cudaMemPool_t* m, const cudaMemPoolProps*) { *m = reinterpret_cast<cudaMemPool_t>(new pool_t); return cudaSuccess; }
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t, cudaMemPoolAttr, void*) { return cudaSuccess; }
cudaError_t cudaMemPoolTrimTo(cudaMemPool_t, size_t) { return cudaSuccess; }
cudaError_t cudaMemcpy(void* d, const void* s, size_t n, cudaMemcpyKind) { if (n) std::memmove(d, s, n); return cudaSuccess; }
cudaError_t cudaMemcpyAsync(void* d, const void* s, size_t n, cudaMemcpyKind, cudaStream_t) {
  if (!linstate_emu::record([=] { if (n) std::memmove(d, s, n); }) && n) std::memmove(d, s, n);
  return cudaSuccess;
}
cudaError_t cudaMemset(void* d, int v, size_t n) { std::memset(d, v, n); return cudaSuccess; }
cudaError_t cudaMemsetAsync(void* d, int v, size_t n, cudaStream_t) {
  if (!linstate_emu::record([=] { std::memset(d, v, n); })) std::memset(d, v, n);
  return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t* f, size_t* t) { *f = size_t{100} << 30, *t = size_t{140} << 30; return cudaSuccess; }
cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* a, const void* p) {
  std::memset(a, 0, sizeof *a);
  if (is_dev(p)) a->type = cudaMemoryTypeDevice, a->devicePointer = const_cast<void*>(p), a->device = 0;
  else a->type = cudaMemoryTypeUnregistered, a->hostPointer = const_cast<void*>(p);
  return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
cudaError_t cudaGetDevice(int* d) { *d = 0; return cudaSuccess; }
cudaError_t cudaGetDeviceCount(int* n) { *n = 1; return cudaSuccess; }
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int) {
  std::memset(p, 0, sizeof *p);
  std::strcpy(p->name, "CPU emulation (H200-like limits)");
  p->major = 9, p->minor = 0, p->multiProcessorCount = 132, p->warpSize = 32;
  p->maxThreadsPerBlock = 1024, p->maxThreadsPerMultiProcessor = 2048;
  p->sharedMemPerBlock = 49152, p->sharedMemPerBlockOptin = 232448, p->sharedMemPerMultiprocessor = 233472;
  p->regsPerBlock = 65536, p->regsPerMultiprocessor = 65536, p->l2CacheSize = 60 << 20;
  p->totalGlobalMem = size_t{140} << 30;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr a, int) {
  switch (a) {
    case cudaDevAttrMultiProcessorCount: *v = 132; break;
    case cudaDevAttrComputeCapabilityMajor: *v = 9; break;
    case cudaDevAttrComputeCapabilityMinor: *v = 0; break;
    case cudaDevAttrL2CacheSize: *v = 60 << 20; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *v = 232448; break;
    default: *v = 0;
  }
  return cudaSuccess;
}
cudaError_t cudaDeviceGetStreamPriorityRange(int* lo, int* hi) { *lo = 0, *hi = -5; return cudaSuccess; }
cudaError_t cudaGetLastError() { cudaError_t e = last; last = cudaSuccess; return e; }
cudaError_t cudaPeekAtLastError() { return last; }
const char* cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "emulated error"; }
const char* cudaGetErrorName(cudaError_t e) { return e == cudaSuccess ? "cudaSuccess" : "cudaErrorEmulated"; }
cudaError_t cudaStreamCreate(cudaStream_t* s) { *s = reinterpret_cast<cudaStream_t>(new int(1)); return cudaSuccess; }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) { return cudaStreamCreate(s); }
cudaError_t cudaStreamCreateWithPriority(cudaStream_t* s, unsigned, int) { return cudaStreamCreate(s); }
cudaError_t cudaStreamDestroy(cudaStream_t s) { delete reinterpret_cast<int*>(s); return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned) { return cudaSuccess; }
cudaError_t cudaEventCreate(cudaEvent_t* e) { *e = reinterpret_cast<cudaEvent_t>(new int(2)); return cudaSuccess; }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) { return cudaEventCreate(e); }
cudaError_t cudaEventDestroy(cudaEvent_t e) { delete reinterpret_cast<int*>(e); return cudaSuccess; }
cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t) { return cudaSuccess; }
cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t, cudaEvent_t) { *ms = 0.f; return cudaSuccess; }
}
