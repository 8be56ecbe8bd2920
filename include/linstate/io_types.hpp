// linstate/io_types.hpp — what a forward call reads (inputs), writes (outputs) and how (options).
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "dynamic.hpp"
#include "router/top_k.hpp"
#include "tensor.hpp"

namespace linstate {

//! Inputs of the shared partition (only with partition::routed<N, shared>; SPEC §4.3: q1, k1, gk1).
template <class Scalar>
struct shared_inputs {
  tensor_view<const Scalar> q{};     //!< [B,T,H,K]
  tensor_view<const Scalar> k{};     //!< [B,T,H,K]
  tensor_view<const Scalar> g{};     //!< its own gate, shaped like inputs::g
  tensor_view<const Scalar> beta{};  //!< [B,T,HV] (delta rule only)
};

//! \brief Inputs of one forward call. Names follow fla and the SSE paper.
//! Per-token tensors are `[B,T,·,·]` row-major; with `cu_seqlens` B = 1 and S sequences are packed
//! along T. H = query/key heads, HV = value heads (a multiple of H; value head hv reads key head
//! hv / (HV/H)).
template <class Scalar>
struct inputs {
  tensor_view<const Scalar> q{};     //!< [B,T,H,K]   queries of the single / routed partitions (q2 in SSE)
  tensor_view<const Scalar> k{};     //!< [B,T,H,K]   keys (k2 in SSE)
  tensor_view<const Scalar> v{};     //!< [B,T,HV,V]  values (shared by every partition)
  tensor_view<const Scalar> g{};     //!< the decay policy's gate (its gate_extent): [B,T,HV,K] key (gated_key),
                                     //!< [B,T,HV] head (scalar, delta rule), [B,T,HV,V] value; empty for none
  tensor_view<const Scalar> beta{};  //!< [B,T,HV] write strength (policies with uses_beta: the delta rule)
  shared_inputs<Scalar> shared{};  //!< the shared partition's own q, k, g, beta
  tensor_view<const Scalar> router_logits{};     //!< [B,T,N] (routing routers only; eta in the fixtures)
  tensor_view<const float> router_params{};      //!< [N] or [N,m] fp32 parameters of a router policy with
                                                 //!< params_per_partition = m > 0 (e.g. a selection bias); not differentiated
  tensor_view<const float> initial_state{};      //!< [S,P,HV,K,V] fp32, or empty for zeros
  std::span<const std::int64_t> cu_seqlens{};  //!< [S+1] packed sequence offsets, or empty (S = B)
};

//! \brief Outputs of one forward call. `o` is required; `final_state` may be empty.
template <class Scalar>
struct outputs {
  tensor_view<Scalar> o{};                 //!< [B,T,HV,V], in the input element type
  tensor_view<float> final_state{};        //!< [S,P,HV,K,V] fp32, or empty if not wanted
};

//! \brief Run-time options. Values for policy parameters declared linstate::dynamic are taken from
//! here; giving one for a parameter fixed at compile time is an error (it would be ignored).
struct options {
  std::optional<float> scale{};          //!< read scale s; default K^-1/2 (SPEC §1.5)
  int num_partitions = dynamic;          //!< N for partition::routed<dynamic>
  int num_writer = dynamic;              //!< kw for router::top_k<dynamic, ...>
  int num_reader = dynamic;              //!< kr for router::top_k<..., dynamic>
  std::optional<router::gate> gates{};   //!< gate use for top_k<..., {.dynamic_gates = true}>
};

//! Upstream gradients of a backward call: ∂L/∂o and, optionally, ∂L/∂(final state).
template <class Scalar>
struct cotangents {
  tensor_view<const Scalar> o{};            //!< dO [B,T,HV,V] (required)
  tensor_view<const float> final_state{};   //!< dht [S,P,HV,K,V] fp32, or empty for zero
};

//! Gradients of the shared partition's inputs.
template <class Scalar>
struct shared_gradients {
  tensor_view<Scalar> q{};     //!< [B,T,H,K]
  tensor_view<Scalar> k{};     //!< [B,T,H,K]
  tensor_view<Scalar> g{};     //!< like shared.g
  tensor_view<Scalar> beta{};  //!< [B,T,HV]
};

//! \brief Where a backward call writes ∂L/∂(input). Each view is either empty (that gradient is not
//! wanted) or exactly the shape of its input; input gradients are in the input element type
//! (computed in fp32), the initial state's gradient is fp32.
template <class Scalar>
struct gradients {
  tensor_view<Scalar> q{}, k{}, v{}, g{}, beta{};
  shared_gradients<Scalar> shared{};
  tensor_view<Scalar> router_logits{};     //!< [B,T,N], through the write and read gates (SPEC §4.6)
  tensor_view<float> initial_state{};      //!< dh0 [S,P,HV,K,V]
};

//! Owning result of the convenience overload of backward(): one tensor per input that was given
//! (empty tensors for inputs that were not).
template <class Scalar>
struct gradient_result {
  tensor<Scalar> q, k, v, g, beta;
  struct {
    tensor<Scalar> q, k, g, beta;
  } shared;
  tensor<Scalar> router_logits;
  tensor<float> initial_state;
};

//! Owning result of the convenience overload of forward().
template <class Scalar>
struct result {
  tensor<Scalar> o;                      //!< [B,T,HV,V]
  tensor<float> final_state;             //!< [S,P,HV,K,V]
};

}  // namespace linstate
