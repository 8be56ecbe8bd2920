// SPDX-License-Identifier: Apache-2.0
//! \file cuda/tests/cpu_reference.cpp
//! \brief The CPU passes test_cuda.cu compares the CUDA backend with (see variants.hpp).
#include "variants.hpp"

namespace linstate_cuda_test {

template <class Spec, class Scalar>
void cpu_forward(const linstate::inputs<Scalar>& in, const linstate::outputs<Scalar>& out, bool mask,
                 const linstate::options& opt) {
  if (mask) linstate::forward<Spec>(linstate::cpu{.threads = 1}, in, out, linstate::recurrent{}, linstate::mask{}, opt);
  else linstate::forward<Spec>(linstate::cpu{.threads = 1}, in, out, linstate::recurrent{}, linstate::varlen{}, opt);
}

template <class Spec, class Scalar>
void cpu_forward_in_place(const linstate::inputs<Scalar>& in, const linstate::tensor_view<float>& state,
                          const linstate::tensor_view<Scalar>& o) {
  linstate::forward_in_place<Spec>(linstate::cpu{.threads = 1}, in, state, o, linstate::recurrent{});
}

using bf16 = Eigen::bfloat16;
using f16 = Eigen::half;
using linstate::inputs;
using linstate::options;
using linstate::outputs;
using linstate::tensor_view;

template void cpu_forward<gla, float>(const inputs<float>&, const outputs<float>&, bool, const options&);
template void cpu_forward<gla_none, float>(const inputs<float>&, const outputs<float>&, bool, const options&);
template void cpu_forward<gla_scalar, float>(const inputs<float>&, const outputs<float>&, bool, const options&);
template void cpu_forward<sse_n4k1s, float>(const inputs<float>&, const outputs<float>&, bool, const options&);
template void cpu_forward<sse_n8k2, float>(const inputs<float>&, const outputs<float>&, bool, const options&);
template void cpu_forward<sse_w2r1s, float>(const inputs<float>&, const outputs<float>&, bool, const options&);
template void cpu_forward<sse_w1r3, float>(const inputs<float>&, const outputs<float>&, bool, const options&);
template void cpu_forward<sse_nogates, float>(const inputs<float>&, const outputs<float>&, bool, const options&);
template void cpu_forward<sse_renorm_w, float>(const inputs<float>&, const outputs<float>&, bool, const options&);
template void cpu_forward<sse_round, float>(const inputs<float>&, const outputs<float>&, bool, const options&);
template void cpu_forward<dense3s, float>(const inputs<float>&, const outputs<float>&, bool, const options&);
template void cpu_forward<sse_dyn, float>(const inputs<float>&, const outputs<float>&, bool, const options&);
template void cpu_forward<gdn, float>(const inputs<float>&, const outputs<float>&, bool, const options&);
template void cpu_forward<gdn_plain, float>(const inputs<float>&, const outputs<float>&, bool, const options&);
template void cpu_forward<sse_gdn, float>(const inputs<float>&, const outputs<float>&, bool, const options&);
template void cpu_forward<sse_gdn_w2r1, float>(const inputs<float>&, const outputs<float>&, bool, const options&);
template void cpu_forward<vdecay, float>(const inputs<float>&, const outputs<float>&, bool, const options&);
template void cpu_forward<sse_vdecay, float>(const inputs<float>&, const outputs<float>&, bool, const options&);
template void cpu_forward<sse_vdecay_w2r1, float>(const inputs<float>&, const outputs<float>&, bool, const options&);
template void cpu_forward<gla_generic, float>(const inputs<float>&, const outputs<float>&, bool, const options&);
template void cpu_forward<sse_gla_generic, float>(const inputs<float>&, const outputs<float>&, bool, const options&);
template void cpu_forward<gdn_generic, float>(const inputs<float>&, const outputs<float>&, bool, const options&);
template void cpu_forward<sse_gdn_generic, float>(const inputs<float>&, const outputs<float>&, bool, const options&);
template void cpu_forward<sse_sigmoid, float>(const inputs<float>&, const outputs<float>&, bool, const options&);
template void cpu_forward<vdecay, bf16>(const inputs<bf16>&, const outputs<bf16>&, bool, const options&);
template void cpu_forward<gla, bf16>(const inputs<bf16>&, const outputs<bf16>&, bool, const options&);
template void cpu_forward<sse_n4k1s, bf16>(const inputs<bf16>&, const outputs<bf16>&, bool, const options&);
template void cpu_forward<sse_n8k2, bf16>(const inputs<bf16>&, const outputs<bf16>&, bool, const options&);
template void cpu_forward<sse_gdn, bf16>(const inputs<bf16>&, const outputs<bf16>&, bool, const options&);
template void cpu_forward<gdn, bf16>(const inputs<bf16>&, const outputs<bf16>&, bool, const options&);
template void cpu_forward<gdn_plain, bf16>(const inputs<bf16>&, const outputs<bf16>&, bool, const options&);
template void cpu_forward<sse_gdn_w2r1, bf16>(const inputs<bf16>&, const outputs<bf16>&, bool, const options&);
template void cpu_forward<gla, f16>(const inputs<f16>&, const outputs<f16>&, bool, const options&);
template void cpu_forward<sse_gdn, f16>(const inputs<f16>&, const outputs<f16>&, bool, const options&);

template void cpu_forward_in_place<sse_n4k1s, float>(const inputs<float>&, const tensor_view<float>&, const tensor_view<float>&);
template void cpu_forward_in_place<sse_n8k2, float>(const inputs<float>&, const tensor_view<float>&, const tensor_view<float>&);
template void cpu_forward_in_place<sse_w1r3, float>(const inputs<float>&, const tensor_view<float>&, const tensor_view<float>&);
template void cpu_forward_in_place<sse_gdn, float>(const inputs<float>&, const tensor_view<float>&, const tensor_view<float>&);
template void cpu_forward_in_place<sse_w2r1s, float>(const inputs<float>&, const tensor_view<float>&, const tensor_view<float>&);
template void cpu_forward_in_place<sse_vdecay, float>(const inputs<float>&, const tensor_view<float>&, const tensor_view<float>&);
template void cpu_forward_in_place<sse_n4k1s, bf16>(const inputs<bf16>&, const tensor_view<float>&, const tensor_view<bf16>&);
template void cpu_forward_in_place<gla, float>(const inputs<float>&, const tensor_view<float>&, const tensor_view<float>&);
template void cpu_forward_in_place<gla, bf16>(const inputs<bf16>&, const tensor_view<float>&, const tensor_view<bf16>&);
template void cpu_forward_in_place<gdn, float>(const inputs<float>&, const tensor_view<float>&, const tensor_view<float>&);
template void cpu_forward_in_place<sse_w1r3, bf16>(const inputs<bf16>&, const tensor_view<float>&, const tensor_view<bf16>&);
template void cpu_forward_in_place<sse_none_s, float>(const inputs<float>&, const tensor_view<float>&, const tensor_view<float>&);
template void cpu_forward_in_place<sse_scalar_w2r1, float>(const inputs<float>&, const tensor_view<float>&, const tensor_view<float>&);
template void cpu_forward_in_place<gla_none, float>(const inputs<float>&, const tensor_view<float>&, const tensor_view<float>&);
template void cpu_forward_in_place<gla_scalar, float>(const inputs<float>&, const tensor_view<float>&, const tensor_view<float>&);
template void cpu_forward_in_place<sse_n8k2, bf16>(const inputs<bf16>&, const tensor_view<float>&, const tensor_view<bf16>&);
template void cpu_forward_in_place<sse_n16k1s, bf16>(const inputs<bf16>&, const tensor_view<float>&, const tensor_view<bf16>&);

}  // namespace linstate_cuda_test
