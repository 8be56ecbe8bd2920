// SPDX-License-Identifier: Apache-2.0
//! \file examples/linstate_run.hpp
//! \brief The part of `linstate-run` that both of its translation units share: the case (its
//! configuration and tensors), the two variant types, and `run_case`, which runs a case on any
//! runner — linstate::testing::cpu_runner (linstate_run.cpp) or linstate::testing::cuda_runner
//! (linstate_run_cuda.cu, compiled by nvcc when linstate is built with CUDA). Reading and checking
//! the case folder (JSON, .npy) and writing the outputs stay in linstate_run.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <linstate/linstate.hpp>

namespace linstate_run {

using linstate::index_t;

enum class algorithm { recurrent, chunked };
enum class strategy { mask, varlen };

//! The configuration values of one case, checked for type and range.
struct case_config {
  std::string name;
  bool sse = false;                     // kind: "gla" or "sse"
  algorithm mode = algorithm::chunked;  // mode: "chunk" or "fused_recurrent"
  index_t B = 0, T = 0, H = 0, K = 0, V = 0, S = 0;
  float scale = 1.f;
  bool initial_state = false;
  std::vector<std::int64_t> cu_seqlens;  // empty when case.json has null
  // SSE only
  int N = 0, num_writer = 0, num_reader = 0;
  bool emulq = false, emulk = false;
};

//! Everything one forward call reads, owned. The fixture names map onto linstate's:
//! GLA q,k,v,g as they are; SSE q2,k2,g2 -> q,k,g (routed partitions), q1,k1,g1 -> shared.q,k,g,
//! eta -> router_logits, h0 -> initial_state.
struct case_inputs {
  linstate::tensor<float> q, k, v, g, q1, k1, g1, eta, h0;
  linstate::tensor<float> dO;  // do.npy [B,T,H,V]; empty when the folder has none (no backward)
  bool backward = false;       // do.npy is present
};

//! One gradient file: its name (without .npy), its shape in the fixtures' layout, its values.
struct gradient_file {
  std::string name;
  std::vector<index_t> shape;
  linstate::tensor<float> values;
};

//! The outputs, in linstate's layout: o [B,T,H,V] and the final state [S,P,H,K,V]; with do.npy also
//! the gradients, in the order they are listed by --help.
struct case_outputs {
  linstate::tensor<float> o, ht;
  std::vector<gradient_file> grads;
};

//! Shape of the state as linstate sees it: [S, P, H, K, V] (P = 1 for GLA, 1 + N for SSE). The
//! fixture's GLA state [S, H, K, V] has the same memory layout, with the partition axis dropped.
inline std::vector<index_t> state_shape(const case_config& c, bool fixture_layout) {
  if (!c.sse) return fixture_layout ? std::vector<index_t>{c.S, c.H, c.K, c.V} : std::vector<index_t>{c.S, 1, c.H, c.K, c.V};
  return {c.S, 1 + c.N, c.H, c.K, c.V};
}

// ============================================================================================
// Run-time configuration -> static variant types
// ============================================================================================

namespace pt = linstate::partition;
namespace rt = linstate::router;

//! Gated Linear Attention: all four slots at their defaults.
struct gla : linstate::spec<> {};

//! SSE-GLA with every size chosen at run time: N routed partitions plus the shared one, a top-k
//! router whose kw, kr and gate use come from linstate::options.
struct sse : gla {
  using partition = pt::routed<linstate::dynamic, pt::shared>;
  using router = rt::top_k<linstate::dynamic, linstate::dynamic, rt::top_k_options{.dynamic_gates = true}>;
};

//! Calls `f` with the algorithm tag that matches the run-time choice.
template <class F>
void with_algorithm(algorithm a, F&& f) {
  if (a == algorithm::recurrent) f(linstate::recurrent{});
  else f(linstate::chunked<64>{});
}

//! Calls `f` with the strategy tag that matches the run-time choice.
template <class F>
void with_strategy(strategy s, F&& f) {
  if (s == strategy::mask) f(linstate::mask{});
  else f(linstate::varlen{});
}

//! emulk = the router probability multiplies the write (key side), emulq = the read (query side).
inline rt::gate gate_of(bool emulq, bool emulk) {
  if (emulq && emulk) return rt::gate::both;
  if (emulk) return rt::gate::write;
  if (emulq) return rt::gate::read;
  return rt::gate::none;
}

//! Runs the case forward (and backward when do.npy was given) on `runner`: any type with the member
//! templates forward<Spec, Algorithm, Strategy>(inputs, options) -> result<float> and
//! backward<Spec, Algorithm, Strategy>(inputs, cotangents, options) -> gradient_result<float>, on
//! host tensors (linstate::testing::cpu_runner, linstate::testing::cuda_runner).
template <class Runner>
case_outputs run_case(const Runner& runner, const case_config& c, const case_inputs& ci, algorithm algo, strategy strat) {
  linstate::inputs<float> in{.q = ci.q.view(), .k = ci.k.view(), .v = ci.v.view(), .g = ci.g.view()};
  if (c.initial_state) in.initial_state = ci.h0.view();
  if (!c.cu_seqlens.empty()) in.cu_seqlens = c.cu_seqlens;
  linstate::options opt{.scale = c.scale};
  if (c.sse) {
    in.shared = {.q = ci.q1.view(), .k = ci.k1.view(), .g = ci.g1.view()};
    in.router_logits = ci.eta.view();
    opt.num_partitions = c.N;
    opt.num_writer = c.num_writer;
    opt.num_reader = c.num_reader;
    opt.gates = gate_of(c.emulq, c.emulk);
  }
  const linstate::cotangents<float> d{.o = ci.dO.view()};

  case_outputs out;
  linstate::gradient_result<float> g;
  // Two run-time choices become template arguments; forward<> and backward<> are instantiated for
  // each pair.
  with_algorithm(algo, [&](auto algorithm_tag) {
    with_strategy(strat, [&](auto strategy_tag) {
      using A = decltype(algorithm_tag);
      using S = decltype(strategy_tag);
      auto go = [&]<class Spec>() {
        linstate::result<float> r = runner.template forward<Spec, A, S>(in, opt);
        out.o = std::move(r.o), out.ht = std::move(r.final_state);
        if (ci.backward) g = runner.template backward<Spec, A, S>(in, d, opt);
      };
      if (c.sse) go.template operator()<sse>();
      else go.template operator()<gla>();
    });
  });
  if (!ci.backward) return out;

  // Gradients: one file per input of the case, named as the fixture files (SSE: q2 -> dq2 is the
  // gradient of in.q, q1 -> dq1 that of in.shared.q, eta -> deta that of in.router_logits).
  const std::vector<index_t> qk{c.B, c.T, c.H, c.K}, vv{c.B, c.T, c.H, c.V};
  auto add = [&](const char* name, const std::vector<index_t>& shape, linstate::tensor<float>& t) {
    out.grads.push_back({name, shape, std::move(t)});
  };
  if (c.sse) {
    add("dq1", qk, g.shared.q), add("dq2", qk, g.q), add("dk1", qk, g.shared.k), add("dk2", qk, g.k);
    add("dv", vv, g.v), add("dg1", qk, g.shared.g), add("dg2", qk, g.g), add("deta", {c.B, c.T, c.N}, g.router_logits);
  } else {
    add("dq", qk, g.q), add("dk", qk, g.k), add("dv", vv, g.v), add("dg", qk, g.g);
  }
  // linstate's layout [S,P,H,K,V]; the file gets the fixture's shape (GLA drops P = 1)
  if (c.initial_state) add("dh0", state_shape(c, /*fixture_layout=*/true), g.initial_state);
  return out;
}

}  // namespace linstate_run
