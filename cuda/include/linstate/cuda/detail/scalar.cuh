// linstate/cuda/detail/scalar.cuh — the library's element types as CUDA's native ones.
//
// Eigen::bfloat16 and Eigen::half hold exactly the bits of __nv_bfloat16 and __half, so a device
// pointer to the former is read through the latter (no copy, no conversion pass).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <Eigen/Core>
#include <cstdint>
#include <type_traits>

namespace linstate::cuda_detail {

template <class Scalar>
struct device_scalar {
  using type = float;
};
template <>
struct device_scalar<Eigen::bfloat16> {
  using type = __nv_bfloat16;
};
template <>
struct device_scalar<Eigen::half> {
  using type = __half;
};
//! float → float, Eigen::bfloat16 → __nv_bfloat16, Eigen::half → __half
template <class Scalar>
using device_scalar_t = typename device_scalar<Scalar>::type;

static_assert(sizeof(Eigen::bfloat16) == sizeof(__nv_bfloat16) && alignof(Eigen::bfloat16) <= alignof(__nv_bfloat16));
static_assert(sizeof(Eigen::half) == sizeof(__half) && alignof(Eigen::half) <= alignof(__half));

template <class Scalar>
const device_scalar_t<Scalar>* device_ptr(const Scalar* p) {
  return reinterpret_cast<const device_scalar_t<Scalar>*>(p);
}
template <class Scalar>
device_scalar_t<Scalar>* device_ptr(Scalar* p) {
  return reinterpret_cast<device_scalar_t<Scalar>*>(p);
}

__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }

//! fp32 → element type, round to nearest even (as Eigen's conversions on the host).
template <class Dev>
__device__ __forceinline__ Dev from_f32(float x) {
  if constexpr (std::is_same_v<Dev, __nv_bfloat16>) return __float2bfloat16_rn(x);
  else if constexpr (std::is_same_v<Dev, __half>) return __float2half_rn(x);
  else return x;
}

//! True unless x is ±inf or NaN (exponent bits all ones).
__device__ __forceinline__ bool finite_f32(float x) { return (__float_as_uint(x) & 0x7f800000u) != 0x7f800000u; }

//! A quiet NaN (what an output row becomes when its router logits are not finite).
__device__ __forceinline__ float quiet_nan() { return __uint_as_float(0x7fc00000u); }

}  // namespace linstate::cuda_detail
