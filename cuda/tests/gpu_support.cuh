// SPDX-License-Identifier: Apache-2.0
//! \file cuda/tests/gpu_support.cuh
//! \brief What the GPU test files share: tolerances, device copies of host inputs, downloads, and the
//! random-input factory. Header-only, included by every .cu test file of the test_cuda binary.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <linstate/cuda.cuh>
#include <type_traits>
#include <utility>
#include <vector>

#include "random_inputs.hpp"
#include "variants.hpp"

namespace linstate_cuda_test {

using linstate::index_t;
using linstate::tensor;
using namespace linstate_test;


inline constexpr double fp32_tol = 1e-5;   // max|a − b| ≤ 1e-5 · max|ref|
inline constexpr double ratio_tol = 0.005;  // SPEC §9.3 (fla: GLA o, ht; GDN o, ht)

inline void cuda_ok(cudaError_t e) { REQUIRE_MESSAGE(e == cudaSuccess, cudaGetErrorString(e)); }

// --- host ↔ device -------------------------------------------------------------------------------

//! Device copies of a host `inputs<Scalar>` (cu_seqlens stays the host span).
template <class Scalar>
struct device_inputs {
  std::vector<linstate::device_buffer<Scalar>> bufs;
  linstate::device_buffer<float> h0, params;
  linstate::inputs<Scalar> in;

  explicit device_inputs(const linstate::inputs<Scalar>& host) : in(host) {
    bufs.reserve(10);
    in.q = up(host.q), in.k = up(host.k), in.v = up(host.v), in.g = up(host.g), in.beta = up(host.beta);
    in.shared.q = up(host.shared.q), in.shared.k = up(host.shared.k), in.shared.g = up(host.shared.g);
    in.shared.beta = up(host.shared.beta), in.router_logits = up(host.router_logits);
    if (!host.router_params.empty()) {
      params = linstate::device_buffer<float>(static_cast<std::size_t>(host.router_params.numel()));
      params.upload(host.router_params.data);
      in.router_params = params.view(host.router_params.shape);
    }
    if (!host.initial_state.empty()) {
      h0 = linstate::device_buffer<float>(static_cast<std::size_t>(host.initial_state.numel()));
      h0.upload(host.initial_state.data);
      in.initial_state = h0.view(host.initial_state.shape);
    }
  }
  linstate::tensor_view<const Scalar> up(const linstate::tensor_view<const Scalar>& t) {
    if (t.empty()) return {};
    bufs.emplace_back(static_cast<std::size_t>(t.numel()));
    bufs.back().upload(t.data);
    return bufs.back().view(t.shape);
  }
};

template <class T>
tensor<T> download(const linstate::device_buffer<T>& d, const linstate::shape_t& s) {
  tensor<T> h(s);
  d.download(h.data());
  cuda_ok(cudaDeviceSynchronize());
  return h;
}

template <class T>
linstate::device_buffer<T> upload(const tensor<T>& h) {
  linstate::device_buffer<T> d(static_cast<std::size_t>(h.numel()));
  d.upload(h.data());
  return d;
}

//! A copy of the device tensor t starting one element past a 16-byte aligned address (held by buf): the
//! kernels that need 16-byte aligned rows then take their other path, on the same values.
template <class T>
linstate::tensor_view<const T> misaligned_copy(const linstate::tensor_view<const T>& t, linstate::device_buffer<T>& buf) {
  buf = linstate::device_buffer<T>(static_cast<std::size_t>(t.numel() + 8));
  cuda_ok(cudaMemcpy(buf.data() + 1, t.data, static_cast<std::size_t>(t.numel()) * sizeof(T), cudaMemcpyDeviceToDevice));
  return linstate::tensor_view<const T>(buf.data() + 1, t.shape);
}

//! The inputs of `data` in element type Scalar (rounded from fp32 for bf16/fp16; fp32 state).
//! Bit-for-bit equality of two tensors of the same type (memcmp).
template <class T>
bool same_bits(const tensor<T>& a, const tensor<T>& b) {
  return a.shape() == b.shape() &&
         (a.numel() == 0 || std::memcmp(a.data(), b.data(), static_cast<std::size_t>(a.numel()) * sizeof(T)) == 0);
}

template <class Scalar>
struct host_inputs {
  const random_inputs& data;
  std::conditional_t<std::is_same_v<Scalar, float>, int, cast_inputs<Scalar>> cast;
  explicit host_inputs(const random_inputs& d) : data(d), cast(make(d)) {}
  static auto make(const random_inputs& d) {
    if constexpr (std::is_same_v<Scalar, float>) return 0;
    else return cast_inputs<Scalar>(d);
  }
  linstate::inputs<Scalar> view(bool with_initial_state = true) const {
    if constexpr (std::is_same_v<Scalar, float>) return data.view(with_initial_state);
    else return cast.view(with_initial_state);
  }
};

template <class Scalar>
struct gpu_result {
  tensor<Scalar> o;
  tensor<float> state;
};

template <class Spec>
random_inputs make(const sizes& d, std::uint64_t seed, bool h0 = true, std::vector<std::int64_t> cu = {},
                   const linstate::options& opt = {}) {
  config c = config_for<Spec>(d, opt);
  c.initial_state = h0;
  c.cu_seqlens = std::move(cu);
  return random_inputs(c, seed);
}

//! A family::recurrent_only test policy with a per-value gate (value_decay): replaces g (and shared.g)
//! of `data` by log-decays [B,T,HV,V], logsigmoid(z)/16 with z ~ N(0,1) (random_inputs draws gates
//! per key or per head only).
inline void value_gates(random_inputs& data, std::uint64_t seed) {
  const sizes& d = data.cfg.dims;
  std::mt19937_64 gen(seed * 1315423911ull + 7);
  std::normal_distribution<double> nd;
  auto draw = [&] {
    tensor<float> t({d.B, d.T, d.HV, d.V});
    for (float& x : t.values()) {
      const double z = nd(gen);
      x = static_cast<float>((z >= 0 ? -std::log1p(std::exp(-z)) : z - std::log1p(std::exp(z))) / 16.0);
    }
    return t;
  };
  data.g = draw();
  if (!data.shared_g.empty()) data.shared_g = draw();
}

//! make<Spec>() for a variant whose gate is per value channel (value_gates).
template <class Spec>
random_inputs make_vgate(const sizes& d, std::uint64_t seed, bool h0 = true, std::vector<std::int64_t> cu = {}) {
  random_inputs data = make<Spec>(d, seed, h0, std::move(cu));
  value_gates(data, seed);
  return data;
}

//! The router_params [N] of sse_sigmoid (the selection bias), for `data`'s N.
inline tensor<float> selection_bias(const random_inputs& data) {
  tensor<float> b({data.cfg.dims.N});
  for (index_t n = 0; n < b.numel(); ++n) b[n] = 0.25f * static_cast<float>((n * 7) % 5) - 0.5f;
  return b;
}

//! main() of a GPU test binary: exit 77 (Meson: SKIP) without a usable GPU or without a kernel image
//! for it, else run doctest. The file that calls it defines DOCTEST_CONFIG_IMPLEMENT.
inline int gpu_test_main(int argc, char** argv) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    std::printf("SKIP: no usable CUDA device (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return 77;  // Meson: SKIP
  }
  cudaFuncAttributes fa{};
  if (cudaFuncGetAttributes(&fa, linstate::cuda_detail::combine_kernel<float>) != cudaSuccess) {
    cudaDeviceProp prop{};
    (void)cudaGetDeviceProperties(&prop, 0);
    std::printf("SKIP: this build has no kernel image for %s (sm_%d%d): configure with -Dgpu_arch=%d.%d\n", prop.name,
                prop.major, prop.minor, prop.major, prop.minor);
    return 77;
  }
  cudaDeviceProp prop{};
  (void)cudaGetDeviceProperties(&prop, 0);
  std::printf("device: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
  doctest::Context ctx(argc, argv);
  return ctx.run();
}

}  // namespace linstate_cuda_test
