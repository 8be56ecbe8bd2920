// linstate/cuda.cuh — the umbrella header for CUDA translation units (.cu): the whole CPU library
// (<linstate/linstate.hpp>) plus the CUDA backend.
// \code
//   #include <linstate/cuda.cuh>
//   linstate::forward<sse_n4k1s>(linstate::cuda{stream}, in, out);               // device pointers
//   linstate::forward_in_place<sse_n4k1s>(linstate::cuda{stream}, step, state, o); // decode step
//   linstate::backward<sse_n4k1s>(linstate::cuda{stream}, in, linstate::cotangents<T>{.o = dO}, grads);
//   linstate::balance_loss<sse_n4k1s>(linstate::cuda{stream}, in.router_logits, aux_dev, grads.router_logits,
//                                     0.01f, linstate::gradient_write::accumulate);   // aux_dev: device float*
// \endcode
// See linstate/cuda/forward.cuh for the stream and error semantics, linstate/cuda/backward.cuh and
// linstate/cuda/balance_loss.cuh for the training side, and docs/cuda.md for what is implemented so far.
#pragma once

#if !defined(__CUDACC__)
#error "linstate/cuda.cuh is for CUDA translation units (.cu, compiled by nvcc); CPU code includes <linstate/linstate.hpp>"
#endif

// CUDA 13's CCCL must not be shadowed by an old Thrust found through -I/usr/include (docs: TOOLCHAIN P7).
#include <thrust/version.h>
#if THRUST_VERSION < 200000
#error "linstate: an old Thrust (< 2.0) shadows the CCCL shipped with CUDA; do not install libthrust-dev"
#endif

#include <linstate/linstate.hpp>

#include "cuda/buffer.cuh"
#include "cuda/check.cuh"
#include "cuda/forward.cuh"
#include "cuda/backward.cuh"
#include "cuda/balance_loss.cuh"
