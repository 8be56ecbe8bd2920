// SPDX-License-Identifier: Apache-2.0
//! \file cuda/tests/variants.hpp
//! \brief The variants the CUDA tests run, and the CPU reference passes they are compared with.
//!
//! The CPU passes are compiled by the host C++ compiler in cpu_reference.cpp (explicit
//! instantiations): instantiating the Eigen CPU backend inside an nvcc translation unit is slow and
//! makes nvcc warn about Eigen's host/device annotations.
#pragma once

#include <linstate/linstate.hpp>

#include <cstdint>
#include <string>

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
struct sse_n16k1s : sse_n4k1s { using partition = pt::routed<16, pt::shared>; };
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

// --- family::recurrent_only policies (kernels/generic.cuh on the GPU, backend/cpu/generic.hpp on the CPU)

//! A per-value-channel decay: s_j ← e^{g_j} s_j + w k v_j, gate [B,T,HV,V] (a test policy, in the
//! user's form: one struct, host/device templates on the number type).
struct value_decay {
  using family = linstate::family::recurrent_only;
  static constexpr linstate::gate_extent gate = linstate::gate_extent::value;
  static constexpr bool uses_beta = false, l2norm_qk = false;
  static constexpr const char* name = "test::value_decay";
  template <class T>
  LINSTATE_HOST_DEVICE static void step(const linstate::token<T>& x, linstate::index_t j, T v, linstate::column<T> s) {
    using linstate::math::exp;
    const T a = exp(x.g[j]), wv = x.w * v;
    for (linstate::index_t i = 0; i < x.K; ++i) s[i] = a * s[i] + x.k[i] * wv;
  }
  template <class T, class C>
  LINSTATE_HOST_DEVICE static T step_adjoint(const linstate::token<T>& x, linstate::index_t j, T v, linstate::column<C> prev,
                                             linstate::column<T> ds, linstate::token_grad<T>& d) {
    using linstate::math::exp;
    const T a = exp(x.g[j]);
    T kds = T(0), dsp = T(0);
    for (linstate::index_t i = 0; i < x.K; ++i) {
      kds += x.k[i] * ds[i], dsp += ds[i] * static_cast<T>(prev[i]);
      d.dk[i] += x.w * v * ds[i];
      ds[i] *= a;
    }
    d.dg[j] += a * dsp;
    d.dw += v * kds;
    return x.w * kds;
  }
};
//! decay::gated_key and the gated delta rule re-declared family::recurrent_only: the generic kernels
//! run the same math as the specialised ones, so the two can be compared on the GPU.
struct gated_key_generic : dc::gated_key {
  using family = linstate::family::recurrent_only;
  static constexpr const char* name = "test::gated_key (recurrent_only)";
};
struct gdn_generic_decay : dc::gated_delta_rule<true> {
  using family = linstate::family::recurrent_only;
  static constexpr const char* name = "test::gated_delta_rule<l2norm> (recurrent_only)";
};

//! A top-1 router over sigmoid scores with a per-partition selection bias (router_params [N]): the
//! router_params path of the router kernels.
struct sigmoid_top1 {
  static constexpr bool routes = true;
  static constexpr int num_writer = 1, num_reader = 1, params_per_partition = 1;
  static constexpr const char* name = "test::sigmoid_top1";
  struct config {
    int kw = 1, kr = 1;
  };
  template <class Opt>
  static config configure(const Opt&, linstate::index_t, const std::string&, bool = false) {
    return {};
  }
  template <class T>
  LINSTATE_HOST_DEVICE static void weights(const config&, int N, const T* x, const float*, const std::uint8_t* f, T* p,
                                           T* cw, T* cr) {
    using linstate::math::exp;
    for (int n = 0; n < N; ++n) p[n] = T(1) / (T(1) + exp(-x[n])), cw[n] = cr[n] = f[n] ? p[n] : T(0);
  }
  template <class T, class Round>
  LINSTATE_HOST_DEVICE static void route(const config& c, int N, const T* x, const float* b, T* p, T* cw, T* cr,
                                         std::uint8_t* f, Round) {
    using linstate::math::exp;
    for (int n = 0; n < N; ++n) cw[n] = T(1) / (T(1) + exp(-x[n])) + static_cast<T>(b[n]);  // cw as scratch
    for (int n = 0; n < N; ++n)
      f[n] = linstate::detail::in_top_k(cw, N, c.kw, n) ? std::uint8_t(linstate::detail::route_write | linstate::detail::route_read)
                                                         : std::uint8_t(0);
    weights(c, N, x, b, f, p, cw, cr);
  }
  template <class T, class P>
  LINSTATE_HOST_DEVICE static void weights_backward(const config&, int N, const T*, const float*, const P* p,
                                                    const std::uint8_t* f, const T* dcw, const T* dcr, T* dx, T*) {
    for (int n = 0; n < N; ++n) {
      const T pn = static_cast<T>(p[n]);
      dx[n] = f[n] ? (dcw[n] + dcr[n]) * pn * (T(1) - pn) : T(0);
    }
  }
  static std::string describe() { return "sigmoid_top1"; }
};

struct vdecay : gla { using decay = value_decay; };
struct sse_vdecay : sse_n4k1s { using decay = value_decay; };
struct sse_vdecay_w2r1 : sse_w2r1s { using decay = value_decay; };
struct gla_generic : gla { using decay = gated_key_generic; };
struct sse_gla_generic : sse_n4k1s { using decay = gated_key_generic; };
struct gdn_generic : gla { using decay = gdn_generic_decay; };
struct sse_gdn_generic : sse_n4k1s { using decay = gdn_generic_decay; };
struct sse_sigmoid : sse_n4k1s { using router = sigmoid_top1; };

//! linstate::forward<Spec>(linstate::cpu{1 thread}, in, out, recurrent, mask or varlen, opt)
template <class Spec, class Scalar>
void cpu_forward(const linstate::inputs<Scalar>& in, const linstate::outputs<Scalar>& out, bool mask,
                 const linstate::options& opt);

//! linstate::forward_in_place<Spec>(linstate::cpu{1 thread}, in, state, o, recurrent)
template <class Spec, class Scalar>
void cpu_forward_in_place(const linstate::inputs<Scalar>& in, const linstate::tensor_view<float>& state,
                          const linstate::tensor_view<Scalar>& o);

}  // namespace linstate_cuda_test
