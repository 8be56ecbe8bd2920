// cuda/emulation/shim/thrust/version.h — the version cuda.cuh checks (the CCCL of CUDA 13).
#pragma once
#define THRUST_VERSION 300001
#define THRUST_MAJOR_VERSION 3
#define THRUST_MINOR_VERSION 0
#define THRUST_SUBMINOR_VERSION 1
