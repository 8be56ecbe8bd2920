// SPDX-License-Identifier: Apache-2.0
//! \file cuda/tests/variants.hpp
//! \brief The variants the CUDA tests run, and the CPU reference passes they are compared with.
//!
//! The CPU passes are compiled by the host C++ compiler in cpu_reference.cpp (explicit
//! instantiations): instantiating the Eigen CPU backend inside an nvcc translation unit is slow and
//! makes nvcc warn about Eigen's host/device annotations.
#pragma once

#include <linstate/linstate.hpp>

namespace linstate_cuda_test {

namespace dc = linstate::decay;
namespace pt = linstate::partition;
namespace rt = linstate::router;

struct gla : linstate::spec<> {};
struct gla_none : gla { using decay = dc::none; };
struct gla_scalar : gla { using decay = dc::scalar; };
struct sse_n4k1s : gla {
  using partition = pt::routed<4, pt::shared>;
  using router = rt::top_k<1>;
};
struct sse_n8k2 : gla {
  using partition = pt::routed<8>;
  using router = rt::top_k<2>;
};
struct sse_w2r1s : sse_n4k1s { using router = rt::top_k<2, 1>; };
struct sse_w1r3 : gla {  // kr > kw, no shared partition
  using partition = pt::routed<4>;
  using router = rt::top_k<1, 3>;
};
struct sse_nogates : sse_n4k1s { using router = rt::top_k<1, 1, rt::top_k_options{.gates = rt::gate::none}>; };
struct sse_renorm_w : sse_n8k2 {
  using router = rt::top_k<2, 3, rt::top_k_options{.gates = rt::gate::write, .renormalize = true}>;
};
struct sse_round : sse_n4k1s { using router = rt::top_k<1, 1, rt::top_k_options{.round_to_input = true}>; };
struct dense3s : gla { using partition = pt::routed<3, pt::shared>; };  // router::dense: every partition, weight 1
struct sse_dyn : gla {
  using partition = pt::routed<linstate::dynamic, pt::shared>;
  using router = rt::top_k<linstate::dynamic, linstate::dynamic>;
};
struct gdn : gla { using decay = dc::gated_delta_rule<true>; };
struct gdn_plain : gla { using decay = dc::gated_delta_rule<false>; };
struct sse_gdn : sse_n4k1s { using decay = dc::gated_delta_rule<true>; };
struct sse_gdn_w2r1 : sse_w2r1s { using decay = dc::gated_delta_rule<true>; };

// More variants for the backward tests (test_cuda_backward.cu).
struct sse_gate_read : sse_w1r3 { using router = rt::top_k<2, 1, rt::top_k_options{.gates = rt::gate::read}>; };
struct sse_none_s : sse_n4k1s { using decay = dc::none; };
struct sse_scalar_w2r1 : sse_w1r3 {
  using decay = dc::scalar;
  using router = rt::top_k<2, 1>;
};
struct sse_gdn_w1r2 : sse_w1r3 {  // kw < kr, no shared partition
  using decay = dc::gated_delta_rule<true>;
  using router = rt::top_k<1, 2>;
};
struct sse_gdn_renorm : sse_n4k1s {  // C9: the renormalised write weight scales β
  using decay = dc::gated_delta_rule<true>;
  using router = rt::top_k<2, 2, rt::top_k_options{.renormalize = true}>;
};
struct dense3s_gdn : dense3s { using decay = dc::gated_delta_rule<false>; };
//! N, kw, kr and the gate use from linstate::options (the fixture cases).
struct sse_dyn_gates : gla {
  using partition = pt::routed<linstate::dynamic, pt::shared>;
  using router = rt::top_k<linstate::dynamic, linstate::dynamic, rt::top_k_options{.dynamic_gates = true}>;
};

//! linstate::forward<Spec>(linstate::cpu{1 thread}, in, out, recurrent, mask or varlen, opt)
template <class Spec, class Scalar>
void cpu_forward(const linstate::inputs<Scalar>& in, const linstate::outputs<Scalar>& out, bool mask,
                 const linstate::options& opt);

//! linstate::forward_in_place<Spec>(linstate::cpu{1 thread}, in, state, o, recurrent)
template <class Spec, class Scalar>
void cpu_forward_in_place(const linstate::inputs<Scalar>& in, const linstate::tensor_view<float>& state,
                          const linstate::tensor_view<Scalar>& o);

}  // namespace linstate_cuda_test
