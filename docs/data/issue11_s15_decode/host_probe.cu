// host_probe.cu — issue 11 session 15: what the host pieces of an eager decode call cost on the device
// machine (median of 2000 calls each, after 200 untimed): cudaPointerGetAttributes on a device pointer
// (the backend's "host memory?" check, one per given tensor), cudaGetLastError (check_launch),
// cudaGetDevice, a kernel launch with a 512-byte parameter block (<<<>>>, the stream synchronised every
// 64 launches, outside the timing), the same through cudaLaunchKernelEx with a cluster of 4 blocks, a
// launch with a 4-byte parameter, cudaGraphLaunch of a graph of one kernel.
// Build: nvcc -O2 -std=c++20 -arch=sm_90 host_probe.cu -o host_probe
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

struct big { char b[512]; };
__global__ void empty_kernel(big) {}
__global__ void tiny_kernel(int) {}

template <class F>
double median_ns(F&& f, cudaStream_t s, int n = 2000) {
  std::vector<double> t;
  for (int i = 0; i < 200 + n; ++i) {
    if (i % 64 == 63) cudaStreamSynchronize(s);
    const auto a = std::chrono::steady_clock::now();
    f();
    const auto b = std::chrono::steady_clock::now();
    if (i >= 200) t.push_back(std::chrono::duration<double, std::nano>(b - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int main() {
  cudaStream_t s;
  cudaStreamCreate(&s);
  float* d = nullptr;
  cudaMalloc(&d, 1 << 20);
  big arg{};
  int dev = 0;
  std::printf("cudaPointerGetAttributes  %8.0f ns\n", median_ns([&] { cudaPointerAttributes a{}; cudaPointerGetAttributes(&a, d); }, s));
  std::printf("cudaGetLastError          %8.0f ns\n", median_ns([&] { (void)cudaGetLastError(); }, s));
  std::printf("cudaGetDevice             %8.0f ns\n", median_ns([&] { cudaGetDevice(&dev); }, s));
  std::printf("launch <<<128,64>>> 512 B %8.0f ns\n", median_ns([&] { empty_kernel<<<128, 64, 0, s>>>(arg); }, s));
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(128), cfg.blockDim = dim3(64), cfg.stream = s;
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeClusterDimension;
  at[0].val.clusterDim.x = 4, at[0].val.clusterDim.y = 1, at[0].val.clusterDim.z = 1;
  cfg.attrs = at, cfg.numAttrs = 1;
  std::printf("cudaLaunchKernelEx cl=4   %8.0f ns\n", median_ns([&] { cudaLaunchKernelEx(&cfg, empty_kernel, arg); }, s));
  std::printf("launch <<<128,64>>> 4 B   %8.0f ns\n", median_ns([&] { tiny_kernel<<<128, 64, 0, s>>>(1); }, s));
  cudaGraph_t g;
  cudaGraphExec_t ge;
  cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
  empty_kernel<<<128, 64, 0, s>>>(arg);
  cudaStreamEndCapture(s, &g);
  cudaGraphInstantiate(&ge, g, 0);
  std::printf("cudaGraphLaunch 1 kernel  %8.0f ns\n", median_ns([&] { cudaGraphLaunch(ge, s); }, s));
  cudaStreamSynchronize(s);
  std::printf("last error: %s\n", cudaGetErrorName(cudaGetLastError()));
  return 0;
}
