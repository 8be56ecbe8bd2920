// SPDX-License-Identifier: Apache-2.0
//! \file cuda/tests/cpu_reference_backward_delta.cpp
//! \brief The CPU backward passes of the single-partition delta-rule variants that
//! test_cuda_backward.cu runs with bf16 inputs (the tensor-core backward's test), in their own
//! translation unit: cpu_reference_backward.cpp's template (the same definition), instantiated here so
//! that adding them does not rebuild that file's many instantiations.
#include "backward_support.hpp"

namespace linstate_cuda_test {

template <class Spec, class Scalar>
void cpu_backward(const linstate::inputs<Scalar>& in, const linstate::cotangents<Scalar>& d,
                  const linstate::gradients<Scalar>& g, bool mask, const linstate::options& opt) {
  const linstate::cpu be{.threads = 1};
  if (mask) linstate::backward<Spec>(be, in, d, g, linstate::recurrent{}, linstate::mask{}, opt);
  else linstate::backward<Spec>(be, in, d, g, linstate::recurrent{}, linstate::varlen{}, opt);
}

using bf16 = Eigen::bfloat16;

#define LINSTATE_CPU_BACKWARD(SPEC, T)                                                                           \
  template void cpu_backward<SPEC, T>(const linstate::inputs<T>&, const linstate::cotangents<T>&, const linstate::gradients<T>&, \
                                      bool, const linstate::options&);
LINSTATE_CPU_BACKWARD(gdn, bf16)
LINSTATE_CPU_BACKWARD(gdn_plain, bf16)
LINSTATE_CPU_BACKWARD(sse_gdn_w2r1, bf16)
#undef LINSTATE_CPU_BACKWARD

}  // namespace linstate_cuda_test
