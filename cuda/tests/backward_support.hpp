// SPDX-License-Identifier: Apache-2.0
//! \file cuda/tests/backward_support.hpp
//! \brief What test_cuda_backward.cu takes from the host compiler (cpu_reference_backward.cpp): the
//! CPU backward passes and balance losses it compares with, and the golden fixture cases (whose
//! loader needs nlohmann::json, kept out of the nvcc translation unit).
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include <linstate/linstate.hpp>

#include "variants.hpp"

namespace linstate_cuda_test {

//! linstate::backward<Spec>(linstate::cpu{1 thread}, in, d, g, recurrent, mask or varlen, opt)
template <class Spec, class Scalar>
void cpu_backward(const linstate::inputs<Scalar>& in, const linstate::cotangents<Scalar>& d,
                  const linstate::gradients<Scalar>& g, bool mask, const linstate::options& opt);

//! linstate::balance_loss<Spec>(logits, d_logits, coefficient, mode, opt) on the CPU
template <class Spec, class Scalar>
float cpu_balance_loss(const linstate::tensor_view<const Scalar>& logits, const linstate::tensor_view<Scalar>& d_logits,
                       float coefficient, linstate::gradient_write mode, const linstate::options& opt);

//! One golden-data case (shared/fixtures/<case>/), loaded by the host compiler.
struct fixture_data {
  std::string name;
  bool sse = false, emulq = false, emulk = false, initial_state = false;
  linstate::options opt;                           //!< scale (+ N, kw, kr, gates for SSE)
  std::vector<std::int64_t> cu_seqlens;
  linstate::shape_t state_shape;                   //!< [S,P,H,K,V]
  std::map<std::string, linstate::tensor<float>> arrays;  //!< every .npy by stem ("q", "dq2", "do", ...)

  const linstate::tensor<float>& at(const std::string& stem) const { return arrays.at(stem); }
  bool has(const std::string& stem) const { return arrays.count(stem) != 0; }

  //! The case's inputs (host views into `arrays`), mapped as tests/support/fixture_case.hpp does.
  linstate::inputs<float> inputs() const {
    linstate::inputs<float> in;
    in.v = at("v").view();
    if (sse) {
      in.q = at("q2").view(), in.k = at("k2").view(), in.g = at("g2").view();
      in.shared.q = at("q1").view(), in.shared.k = at("k1").view(), in.shared.g = at("g1").view();
      in.router_logits = at("eta").view();
    } else {
      in.q = at("q").view(), in.k = at("k").view(), in.g = at("g").view();
    }
    if (initial_state) in.initial_state = {at("h0").data(), state_shape};
    if (!cu_seqlens.empty()) in.cu_seqlens = std::span<const std::int64_t>(cu_seqlens);
    return in;
  }
};

//! Every case folder under the fixtures folder (LINSTATE_FIXTURES, else ../shared/fixtures or a
//! .fixtures folder next to the current directory); `where` names the folder used, or says what was
//! searched. Throws std::runtime_error on a broken case.
std::vector<fixture_data> load_fixture_cases(std::string& where);

}  // namespace linstate_cuda_test
