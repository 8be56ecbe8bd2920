// linstate/detail/numeric.hpp — input element types and their conversion to the fp32 compute type.
#pragma once

#include <Eigen/Core>
#include <concepts>
#include <type_traits>

namespace linstate {

//! Element types accepted for inputs and outputs: fp32, bf16 (Eigen::bfloat16), fp16 (Eigen::half).
//! State, cumulative decays and all accumulation are fp32 whatever the input type (SPEC §11 C10).
template <class T>
concept InputScalar = std::same_as<T, float> || std::same_as<T, Eigen::bfloat16> || std::same_as<T, Eigen::half>;

namespace detail {

template <class T>
inline float to_float(T x) {
  return static_cast<float>(x);
}
template <class T>
inline T from_float(float x) {
  return static_cast<T>(x);
}
//! Rounds an fp32 value to the precision of T and back (identity for float).
template <class T>
inline float round_to(float x) {
  if constexpr (std::is_same_v<T, float>) return x;
  else return static_cast<float>(static_cast<T>(x));
}

template <class T>
constexpr const char* scalar_name() {
  if constexpr (std::is_same_v<T, float>) return "float32";
  else if constexpr (std::is_same_v<T, Eigen::bfloat16>) return "bfloat16";
  else if constexpr (std::is_same_v<T, Eigen::half>) return "float16";
  else if constexpr (std::is_same_v<T, double>) return "float64";
  else return "unknown";
}

}  // namespace detail
}  // namespace linstate
