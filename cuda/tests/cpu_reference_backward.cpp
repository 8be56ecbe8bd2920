// SPDX-License-Identifier: Apache-2.0
//! \file cuda/tests/cpu_reference_backward.cpp
//! \brief The CPU backward passes, balance losses and fixture loading test_cuda_backward.cu uses
//! (see backward_support.hpp), compiled by the host C++ compiler.
#include <filesystem>
#include <stdexcept>

#include "backward_support.hpp"
#include "fixture_case.hpp"
#include "fixtures_path.hpp"

namespace linstate_cuda_test {

template <class Spec, class Scalar>
void cpu_backward(const linstate::inputs<Scalar>& in, const linstate::cotangents<Scalar>& d,
                  const linstate::gradients<Scalar>& g, bool mask, const linstate::options& opt) {
  const linstate::cpu be{.threads = 1};
  if (mask) linstate::backward<Spec>(be, in, d, g, linstate::recurrent{}, linstate::mask{}, opt);
  else linstate::backward<Spec>(be, in, d, g, linstate::recurrent{}, linstate::varlen{}, opt);
}

template <class Spec, class Scalar>
float cpu_balance_loss(const linstate::tensor_view<const Scalar>& logits, const linstate::tensor_view<Scalar>& d_logits,
                       float coefficient, linstate::gradient_write mode, const linstate::options& opt) {
  return linstate::balance_loss<Spec>(logits, d_logits, coefficient, mode, opt);
}

std::vector<fixture_data> load_fixture_cases(std::string& where) {
  namespace fs = std::filesystem;
  fs::path root = linstate_test::fixtures_dir();
  std::error_code ec;
  if (root.empty())
    for (const char* rel : {".fixtures", "../.fixtures", "../../.fixtures"})
      if (fs::is_directory(rel, ec)) {
        root = fs::absolute(rel, ec);
        break;
      }
  if (root.empty()) {
    where = "no fixtures folder (LINSTATE_FIXTURES, ../shared/fixtures, .fixtures)";
    return {};
  }
  where = root.string();
  std::vector<fixture_data> out;
  for (const auto& dir : linstate_test::list_fixture_cases(root)) {
    const linstate_test::fixture_case c = linstate_test::load_fixture_case(dir);
    fixture_data f;
    f.name = c.name, f.sse = c.is_sse(), f.emulq = c.emulq, f.emulk = c.emulk, f.initial_state = c.initial_state;
    f.opt = c.make_options();
    f.cu_seqlens = c.cu_seqlens;
    f.state_shape = c.state_shape();
    for (const auto& [stem, a] : c.arrays) f.arrays.emplace(stem, linstate::tensor<float>(a.lshape(), a.values));
    out.push_back(std::move(f));
  }
  return out;
}

using bf16 = Eigen::bfloat16;
using f16 = Eigen::half;
using linstate::cotangents;
using linstate::gradients;
using linstate::inputs;
using linstate::options;

#define LINSTATE_CPU_BACKWARD(SPEC, T) \
  template void cpu_backward<SPEC, T>(const inputs<T>&, const cotangents<T>&, const gradients<T>&, bool, const options&);
LINSTATE_CPU_BACKWARD(gla, float)
LINSTATE_CPU_BACKWARD(gla_none, float)
LINSTATE_CPU_BACKWARD(gla_scalar, float)
LINSTATE_CPU_BACKWARD(sse_n4k1s, float)
LINSTATE_CPU_BACKWARD(sse_n8k2, float)
LINSTATE_CPU_BACKWARD(sse_w2r1s, float)
LINSTATE_CPU_BACKWARD(sse_w1r3, float)
LINSTATE_CPU_BACKWARD(sse_nogates, float)
LINSTATE_CPU_BACKWARD(sse_renorm_w, float)
LINSTATE_CPU_BACKWARD(sse_gate_read, float)
LINSTATE_CPU_BACKWARD(sse_round, float)
LINSTATE_CPU_BACKWARD(dense3s, float)
LINSTATE_CPU_BACKWARD(sse_dyn, float)
LINSTATE_CPU_BACKWARD(sse_dyn_gates, float)
LINSTATE_CPU_BACKWARD(sse_none_s, float)
LINSTATE_CPU_BACKWARD(sse_scalar_w2r1, float)
LINSTATE_CPU_BACKWARD(gdn, float)
LINSTATE_CPU_BACKWARD(gdn_plain, float)
LINSTATE_CPU_BACKWARD(sse_gdn, float)
LINSTATE_CPU_BACKWARD(sse_gdn_w2r1, float)
LINSTATE_CPU_BACKWARD(sse_gdn_w1r2, float)
LINSTATE_CPU_BACKWARD(sse_gdn_renorm, float)
LINSTATE_CPU_BACKWARD(dense3s_gdn, float)
LINSTATE_CPU_BACKWARD(vdecay, float)
LINSTATE_CPU_BACKWARD(sse_vdecay, float)
LINSTATE_CPU_BACKWARD(sse_vdecay_w2r1, float)
LINSTATE_CPU_BACKWARD(gla_generic, float)
LINSTATE_CPU_BACKWARD(sse_gla_generic, float)
LINSTATE_CPU_BACKWARD(gdn_generic, float)
LINSTATE_CPU_BACKWARD(sse_gdn_generic, float)
LINSTATE_CPU_BACKWARD(sse_sigmoid, float)
LINSTATE_CPU_BACKWARD(vdecay, bf16)
LINSTATE_CPU_BACKWARD(gla, bf16)
LINSTATE_CPU_BACKWARD(sse_n4k1s, bf16)
LINSTATE_CPU_BACKWARD(sse_round, bf16)
LINSTATE_CPU_BACKWARD(sse_gdn, bf16)
LINSTATE_CPU_BACKWARD(gla, f16)
LINSTATE_CPU_BACKWARD(sse_w2r1s, f16)
LINSTATE_CPU_BACKWARD(sse_n4k1s, f16)
LINSTATE_CPU_BACKWARD(sse_gdn, f16)
LINSTATE_CPU_BACKWARD(gla_none, bf16)
LINSTATE_CPU_BACKWARD(gla_scalar, bf16)
LINSTATE_CPU_BACKWARD(sse_n8k2, bf16)
LINSTATE_CPU_BACKWARD(sse_w2r1s, bf16)
LINSTATE_CPU_BACKWARD(dense3s, bf16)
LINSTATE_CPU_BACKWARD(sse_w1r3, bf16)
#undef LINSTATE_CPU_BACKWARD

template float cpu_balance_loss<sse_n4k1s, float>(const linstate::tensor_view<const float>&, const linstate::tensor_view<float>&,
                                                  float, linstate::gradient_write, const options&);
template float cpu_balance_loss<sse_n8k2, float>(const linstate::tensor_view<const float>&, const linstate::tensor_view<float>&,
                                                 float, linstate::gradient_write, const options&);
template float cpu_balance_loss<sse_dyn, float>(const linstate::tensor_view<const float>&, const linstate::tensor_view<float>&,
                                                float, linstate::gradient_write, const options&);
template float cpu_balance_loss<sse_round, bf16>(const linstate::tensor_view<const bf16>&, const linstate::tensor_view<bf16>&,
                                                 float, linstate::gradient_write, const options&);

}  // namespace linstate_cuda_test
