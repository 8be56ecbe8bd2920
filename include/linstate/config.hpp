// linstate/config.hpp — the only file that defines macros.
#pragma once

#define LINSTATE_VERSION_MAJOR 0
#define LINSTATE_VERSION_MINOR 1
#define LINSTATE_VERSION_PATCH 0

#if defined(__CUDACC__)
#define LINSTATE_HOST_DEVICE __host__ __device__
#else
#define LINSTATE_HOST_DEVICE
#endif

// Unrolls the next loop completely on the device when its trip count is a compile-time constant
// (nvcc's `#pragma unroll`; nothing otherwise, and nothing in host code). The routers' building
// blocks use it so that a decode step that knows N at compile time keeps their arrays in registers.
#if defined(__CUDA_ARCH__)
#define LINSTATE_UNROLL _Pragma("unroll")
#else
#define LINSTATE_UNROLL
#endif

// Pragmas for OpenMP are ignored when the translation unit is compiled without -fopenmp: the CPU
// backend then runs on the calling thread only.
#if defined(_OPENMP)
#include <omp.h>
#define LINSTATE_HAS_OPENMP 1
#else
#define LINSTATE_HAS_OPENMP 0
#endif
