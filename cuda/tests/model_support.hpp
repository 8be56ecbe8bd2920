// SPDX-License-Identifier: Apache-2.0
//! \file cuda/tests/model_support.hpp
//! \brief What test_cuda_model.cu takes from the host compiler (cpu_model_reference.cpp): one training
//! step of the CPU model (linstate/layers/model.hpp, train.hpp) in fp32 and the fp64 model's gradients.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <linstate/layers/model.hpp>

#include "variants.hpp"

namespace linstate_cuda_test {

struct model_step {
  std::vector<std::string> names;
  std::vector<linstate::shape_t> shapes;
  std::vector<std::vector<float>> initial, values, grads, after;  //!< initial, moved, ∂total, after clip + AdamW
  std::vector<std::vector<double>> grads64;
  linstate::layers::loss_result loss32, loss64;
  double norm = 0;  //!< the global gradient norm before clipping
};

//! model<Spec, float, recurrent>(c): parameters moved off their initial values, loss + backward on
//! ids / targets [B,T]; the fp64 model on the same values; then clip_grad_norm(max_norm) and one
//! AdamW step (lr, weight decay 0.1) of the fp32 model.
template <class Spec>
model_step cpu_model_step(const linstate::layers::model_config& c, linstate::index_t B, linstate::index_t T,
                          const std::vector<std::int32_t>& ids, const std::vector<std::int32_t>& targets, double max_norm, double lr);

}  // namespace linstate_cuda_test
