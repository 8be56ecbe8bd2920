// SPDX-License-Identifier: Apache-2.0
//! \file cuda/tests/cpu_model_reference.cpp
//! \brief The CPU model steps test_cuda_model.cu compares the GPU model with (host compiler).
#include <linstate/layers/train.hpp>

#include "model_support.hpp"

namespace linstate_cuda_test {

namespace ly = linstate::layers;
using linstate::index_t;

template <class Spec>
model_step cpu_model_step(const ly::model_config& c, index_t B, index_t T, const std::vector<std::int32_t>& ids,
                          const std::vector<std::int32_t>& targets, double max_norm, double lr) {
  model_step s;
  ly::model<Spec, float, linstate::recurrent> m(c);
  auto ps = m.parameters();
  ly::init_rng g(99, "perturb");
  for (auto& p : ps) {
    s.names.push_back(p.name), s.shapes.push_back(p.value.shape);
    s.initial.emplace_back(p.value.data, p.value.data + p.value.numel());
    const bool w_r = p.name.size() >= 3 && p.name.compare(p.name.size() - 3, 3, "W_r") == 0;
    for (index_t i = 0; i < p.value.numel(); ++i) {
      const double n = g.normal();
      p.value.data[i] = w_r ? static_cast<float>(2.0 * n) : p.value.data[i] + static_cast<float>(0.3 * n);
    }
    s.values.emplace_back(p.value.data, p.value.data + p.value.numel());
  }
  ly::zero_grad(ps);
  s.loss32 = m.loss(ids, targets, B, T);
  m.backward();
  for (auto& p : ps) s.grads.emplace_back(p.grad.data, p.grad.data + p.grad.numel());

  ly::model<Spec, double, linstate::recurrent> m64(c);
  auto p64 = m64.parameters();
  for (std::size_t i = 0; i < p64.size(); ++i)
    for (index_t j = 0; j < p64[i].value.numel(); ++j) p64[i].value.data[j] = s.values[i][static_cast<std::size_t>(j)];
  ly::zero_grad(p64);
  s.loss64 = m64.loss(ids, targets, B, T);
  m64.backward();
  for (auto& p : p64) s.grads64.emplace_back(p.grad.data, p.grad.data + p.grad.numel());

  s.norm = ly::clip_grad_norm(ps, max_norm);
  ly::adamw<float> opt(ps, {.weight_decay = 0.1});
  opt.step(lr);
  for (auto& p : ps) s.after.emplace_back(p.value.data, p.value.data + p.value.numel());
  return s;
}

#define LINSTATE_MODEL_STEP(S)                                                                                       \
  template model_step cpu_model_step<S>(const ly::model_config&, index_t, index_t, const std::vector<std::int32_t>&, \
                                        const std::vector<std::int32_t>&, double, double);
LINSTATE_MODEL_STEP(gla)
LINSTATE_MODEL_STEP(sse_n4k1s)
LINSTATE_MODEL_STEP(sse_gdn)
#undef LINSTATE_MODEL_STEP

}  // namespace linstate_cuda_test
