// SPDX-License-Identifier: Apache-2.0
//! \file cuda/tests/cpu_layers_reference.cpp
//! \brief The CPU token_mixer steps test_cuda_layers.cu compares the GPU layer with (host compiler):
//! the fp32 layer (kernel recurrent, which is also what the CPU layer's `automatic` runs at T ≤ 64)
//! and the fp64 layer (linstate::reference) on the same values.
#include "layers_support.hpp"

namespace linstate_cuda_test {

namespace ly = linstate::layers;
using linstate::index_t;

namespace {

template <class Layer>
host_parameters snapshot(Layer& L) {
  std::vector<ly::parameter_ref<float>> ps;
  L.collect(ps);
  host_parameters h;
  for (auto& p : ps) {
    h.names.push_back(p.name), h.shapes.push_back(p.value.shape);
    h.values.emplace_back(p.value.data, p.value.data + p.value.numel());
    h.grads.emplace_back(p.grad.data, p.grad.data + p.grad.numel());
  }
  return h;
}

}  // namespace

template <class Spec>
mixer_step cpu_mixer_step(const ly::mixer_config& c, index_t B, index_t T, const std::vector<float>& x,
                          const std::vector<float>& dout, host_parameters& initial) {
  ly::token_mixer<Spec, float, linstate::recurrent> L(c);
  initial = snapshot(L);
  // generic values for the router, biases and norm weight (fla starts them at a near-tie, 0 and 1),
  // and for every weight a second draw on top: nothing sits at its initial value
  {
    std::vector<ly::parameter_ref<float>> ps;
    L.collect(ps);
    ly::init_rng g(99, "perturb");
    for (auto& p : ps) {
      const bool w_r = p.name == "W_r";
      for (index_t i = 0; i < p.value.numel(); ++i) {
        const double n = g.normal();
        p.value.data[i] = w_r ? static_cast<float>(2.0 * n) : p.value.data[i] + static_cast<float>(0.3 * n);
      }
    }
  }
  const index_t D = c.d_model;
  std::vector<float> xin = x, dy = dout;
  mixer_step s;
  s.out.assign(static_cast<std::size_t>(B * T * D), 0.f), s.dx = s.out;
  s.aux = L.forward(linstate::tensor_view<const float>(xin.data(), {B, T, D}), linstate::tensor_view<float>(s.out.data(), {B, T, D}));
  L.backward(linstate::tensor_view<const float>(dy.data(), {B, T, D}), linstate::tensor_view<float>(s.dx.data(), {B, T, D}));
  s.params = snapshot(L);

  // the fp64 layer on the same values
  ly::token_mixer<Spec, double, linstate::recurrent> L64(c);
  std::vector<ly::parameter_ref<double>> p64;
  L64.collect(p64);
  for (std::size_t i = 0; i < p64.size(); ++i)
    for (index_t j = 0; j < p64[i].value.numel(); ++j) p64[i].value.data[j] = s.params.values[i][static_cast<std::size_t>(j)];
  std::vector<double> x64(x.begin(), x.end()), dy64(dout.begin(), dout.end());
  s.out64.assign(s.out.size(), 0.0), s.dx64 = s.out64;
  s.aux64 = L64.forward(linstate::tensor_view<const double>(x64.data(), {B, T, D}), linstate::tensor_view<double>(s.out64.data(), {B, T, D}));
  L64.backward(linstate::tensor_view<const double>(dy64.data(), {B, T, D}), linstate::tensor_view<double>(s.dx64.data(), {B, T, D}));
  for (auto& p : p64) s.grads64.emplace_back(p.grad.data, p.grad.data + p.grad.numel());
  return s;
}

#define LINSTATE_LAYERS_STEP(S)                                                                                        \
  template mixer_step cpu_mixer_step<S>(const ly::mixer_config&, index_t, index_t, const std::vector<float>&, \
                                        const std::vector<float>&, host_parameters&);
LINSTATE_LAYERS_STEP(gla)
LINSTATE_LAYERS_STEP(gla_scalar)
LINSTATE_LAYERS_STEP(sse_n4k1s)
LINSTATE_LAYERS_STEP(sse_n8k2)
LINSTATE_LAYERS_STEP(sse_w2r1s)
LINSTATE_LAYERS_STEP(gdn)
LINSTATE_LAYERS_STEP(sse_gdn)
#undef LINSTATE_LAYERS_STEP

}  // namespace linstate_cuda_test
