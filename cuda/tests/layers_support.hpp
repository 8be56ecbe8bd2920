// SPDX-License-Identifier: Apache-2.0
//! \file cuda/tests/layers_support.hpp
//! \brief What test_cuda_layers.cu takes from the host compiler (cpu_layers_reference.cpp): one training
//! step of the CPU fp32 token_mixer (linstate/layers/token_mixer.hpp) on given inputs, with parameters
//! moved off their initial values, returned as plain host arrays (the CPU layer and its Eigen backend
//! stay out of the nvcc translation unit).
#pragma once

#include <string>
#include <vector>

#include <linstate/layers/token_mixer.hpp>

#include "variants.hpp"

namespace linstate_cuda_test {

//! One layer's parameters as host arrays, in the layer's order.
struct host_parameters {
  std::vector<std::string> names;
  std::vector<linstate::shape_t> shapes;
  std::vector<std::vector<float>> values, grads;

  //! host parameter_refs over values / grads (for cuda_token_mixer::copy_from / copy_to)
  std::vector<linstate::layers::parameter_ref<float>> refs() {
    std::vector<linstate::layers::parameter_ref<float>> r;
    for (std::size_t i = 0; i < names.size(); ++i)
      r.push_back({names[i], {values[i].data(), shapes[i]}, {grads[i].data(), shapes[i]}, true});
    return r;
  }
};

//! The CPU layer's results of one forward + backward.
struct mixer_step {
  host_parameters params;  //!< values (after the perturbation) and gradients of L = Σ out·dout + c·aux
  std::vector<float> out, dx;
  float aux = 0;
  //! the fp64 layer (token_mixer<Spec, double>) on the same values and inputs: out, dx, aux, gradients
  std::vector<double> out64, dx64;
  double aux64 = 0;
  std::vector<std::vector<double>> grads64;
};

//! token_mixer<Spec, float, recurrent>(c): parameters moved off their initial values, forward on x
//! [B,T,D], backward with dout; `initial` receives the parameter values before the move. The same step
//! of the fp64 layer on the same (moved) values fills the *64 fields.
template <class Spec>
mixer_step cpu_mixer_step(const linstate::layers::mixer_config& c, linstate::index_t B, linstate::index_t T,
                          const std::vector<float>& x, const std::vector<float>& dout, host_parameters& initial);

}  // namespace linstate_cuda_test
