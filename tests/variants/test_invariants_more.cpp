// SPDX-License-Identifier: Apache-2.0
//! \file tests/variants/test_invariants_more.cpp
//! \brief SPEC §9.1 invariants P10–P12 and P14 on the CPU backend (the rest: test_invariants.cpp; shared
//! variants and helpers: invariants_support.hpp). Tolerances as there.

#include "invariants_support.hpp"

namespace {
namespace inv {  // reopened: the aliases and using-declarations of invariants_support.hpp apply

// ------------------------------------------------------------------------------------------------
// P10 prefill + token-by-token decode (forward_in_place, recurrent, T = 1) ≡ the full run; a prefill
// done with one strategy and continued with the other (SPEC §11 C5: one canonical state layout).

TEST_CASE_TEMPLATE_DEFINE("P10: prefill then decode equals the full run", Spec, p10_id) {
  const linstate::options opt = options_of<Spec>();
  const index_t T = 72, Tp = 50;
  for (const bool h0 : {false, true}) {
    INFO("initial_state: ", h0);
    config c = config_for<Spec>({.B = 2, .T = T, .H = 2, .HV = 2, .K = 16, .V = 24}, opt);
    c.initial_state = h0;
    const random_inputs d(c, 91);
    const auto ref = linstate::reference::forward<Spec>(d.view(), opt);
    const auto full = linstate::forward<Spec>(be, d.view(), linstate::automatic{}, linstate::mask{}, opt);
    const random_inputs prefill = d.slice_time(0, Tp);
    const random_inputs rest = d.slice_time(Tp, T);
    std::vector<random_inputs> steps;
    for (index_t t = Tp; t < T; ++t) steps.push_back(d.slice_time(t, t + 1));

    auto prefill_algos = [](auto&& f) {
      f(linstate::recurrent{});
      if constexpr (!is_delta<Spec>) f(linstate::chunked<32>{});
    };
    for_each_strategy([&](auto strat) {
      prefill_algos([&](auto algo) {
        const auto pre = linstate::forward<Spec>(be, prefill.view(), algo, strat, opt);
        const auto next = other_strategy(strat);
        {  // token by token, with the other strategy
          INFO("prefill ", label(algo, strat), ", decode recurrent/", name_of(next));
          tensor<float> state = pre.final_state;
          tensor<float> o(d.output_shape());
          put_rows(o, pre.o, 0);
          for (index_t t = Tp; t < T; ++t) {
            const random_inputs& step = steps[static_cast<std::size_t>(t - Tp)];
            tensor<float> o1(step.output_shape());
            linstate::forward_in_place<Spec>(be, step.view(false), state.view(), o1.view(),
                                             linstate::recurrent{}, next, opt);
            put_rows(o, o1, t);
          }
          CHECK(max_rel_err(o, ref.o) <= tol_ref);
          CHECK(max_rel_err(state, ref.final_state) <= tol_ref);
          CHECK(max_rel_err(o, full.o) <= tol_same);
          CHECK(max_rel_err(state, full.final_state) <= tol_same);
        }
        {  // the rest in one block, with the other strategy (chunked where it exists)
          INFO("prefill ", label(algo, strat), ", continue in one block with ", name_of(next));
          tensor<float> state = pre.final_state;
          tensor<float> o(d.output_shape()), o_rest(rest.output_shape());
          put_rows(o, pre.o, 0);
          if constexpr (is_delta<Spec>)
            linstate::forward_in_place<Spec>(be, rest.view(false), state.view(), o_rest.view(),
                                             linstate::recurrent{}, next, opt);
          else
            linstate::forward_in_place<Spec>(be, rest.view(false), state.view(), o_rest.view(),
                                             linstate::chunked<16>{}, next, opt);
          put_rows(o, o_rest, Tp);
          CHECK(max_rel_err(o, ref.o) <= tol_ref);
          CHECK(max_rel_err(state, ref.final_state) <= tol_ref);
        }
      });
    });
  }
}
TEST_CASE_TEMPLATE_APPLY(p10_id, all_variants);

// ------------------------------------------------------------------------------------------------
// P11 causality: o_t does not change when any input at t' > t changes. The token-by-token recurrence
// must give bit-identical outputs; the chunked form forms chunk-wide products (and picks its
// intra-chunk method from the whole chunk's decay), so it is held to fp32 rounding. Packed sequences
// are fully independent: redrawing a later sequence leaves an earlier one bit-identical.

TEST_CASE_TEMPLATE_DEFINE("P11: causality and sequence independence", Spec, p11_id) {
  const linstate::options opt = options_of<Spec>();
  const index_t t0 = 37;  // o[0..t0] must not depend on tokens t0+1..
  for (const bool h0 : {false, true}) {
    INFO("initial_state: ", h0);
    config c = config_for<Spec>({.B = 2, .T = 90, .H = 2, .HV = 2, .K = 8, .V = 16}, opt);
    c.initial_state = h0;
    const random_inputs d(c, 111);
    random_inputs d2 = d;
    d2.redraw_from(t0 + 1, 112);
    for_each_strategy([&](auto strat) {
      for_each_algorithm<Spec>([&](auto algo) {
        INFO("run: ", label(algo, strat));
        const auto a = linstate::forward<Spec>(be, d.view(), algo, strat, opt);
        const auto b = linstate::forward<Spec>(be, d2.view(), algo, strat, opt);
        const auto pa = first_rows(a.o, t0 + 1), pb = first_rows(b.o, t0 + 1);
        if constexpr (std::is_same_v<decltype(algo), linstate::recurrent>) CHECK(max_abs_diff(pa, pb) == 0.0);
        else CHECK(max_rel_err(pb, pa) <= tol_same);
        CHECK(max_abs_diff(a.o, b.o) > 0.0);  // the redraw did change the later outputs
      });
    });

    // sequence independence: cu = [0, 30, 70]; redraw the second sequence entirely
    config cp = config_for<Spec>({.B = 1, .T = 70, .H = 2, .HV = 2, .K = 8, .V = 16}, opt);
    cp.initial_state = h0;
    cp.cu_seqlens = {0, 30, 70};
    const random_inputs e(cp, 113);
    random_inputs e2 = e;
    e2.redraw_from(30, 114);
    for_each_strategy([&](auto strat) {
      for_each_algorithm<Spec>([&](auto algo) {
        INFO("packed run: ", label(algo, strat));
        const auto a = linstate::forward<Spec>(be, e.view(), algo, strat, opt);
        const auto b = linstate::forward<Spec>(be, e2.view(), algo, strat, opt);
        CHECK(max_abs_diff(first_rows(a.o, 30), first_rows(b.o, 30)) == 0.0);
        for (index_t p = 0; p < cp.partitions; ++p) CHECK(bit_equal(state_block(a.final_state, 0, p), state_block(b.final_state, 0, p)));
      });
    });
  }
}
TEST_CASE_TEMPLATE_APPLY(p11_id, all_variants);

// ------------------------------------------------------------------------------------------------
// P12 partition permutation equivariance (no ties): permuting the router's columns (and the routed
// initial states alike) permutes the routed final states and leaves o unchanged.

TEST_CASE_TEMPLATE_DEFINE("P12: permuting the router columns permutes the routed states", Spec, p12_id) {
  const linstate::options opt = options_of<Spec>();
  for (const layout& l : layouts())
    for (const bool h0 : {false, true}) {
      INFO("layout: ", l.name, ", initial_state: ", h0);
      const random_inputs d = make_data<Spec>(l, h0, 121);
      const index_t N = d.cfg.dims.N, off = d.cfg.shared ? 1 : 0, S = d.num_sequences();
      // a permutation π of 0..N−1 other than the identity (for N > 1)
      std::vector<index_t> pi(static_cast<std::size_t>(N));
      std::iota(pi.begin(), pi.end(), index_t{0});
      std::mt19937 gen(5);
      while (N > 1 && std::is_sorted(pi.begin(), pi.end())) std::shuffle(pi.begin(), pi.end(), gen);
      // new partition j takes old partition π(j): its logits and its initial state
      random_inputs dp = d;
      for (index_t tok = 0; tok < d.cfg.dims.B * d.cfg.dims.T; ++tok)
        for (index_t j = 0; j < N; ++j)
          dp.router_logits[tok * N + j] = d.router_logits[tok * N + pi[static_cast<std::size_t>(j)]];
      if (h0)
        for (index_t s = 0; s < S; ++s)
          for (index_t j = 0; j < N; ++j) {
            const auto src = state_block(d.initial_state, s, off + pi[static_cast<std::size_t>(j)]);
            std::copy(src.begin(), src.end(),
                      dp.initial_state.data() + (s * d.cfg.partitions + off + j) * static_cast<index_t>(src.size()));
          }
      for_each_strategy([&](auto strat) {
        for_each_algorithm<Spec>([&](auto algo) {
          INFO("run: ", label(algo, strat));
          const auto a = linstate::forward<Spec>(be, d.view(), algo, strat, opt);
          const auto b = linstate::forward<Spec>(be, dp.view(), algo, strat, opt);
          CHECK(max_rel_err(b.o, a.o) <= tol_same);
          // the routed state j of the permuted run is the routed state π(j) of the original
          tensor<float> back(a.final_state.shape());
          for (index_t s = 0; s < S; ++s)
            for (index_t p = 0; p < d.cfg.partitions; ++p) {
              const index_t src_p = p < off ? p : off + pi[static_cast<std::size_t>(p - off)];
              const auto src = state_block(a.final_state, s, src_p);
              std::copy(src.begin(), src.end(),
                        back.data() + (s * d.cfg.partitions + p) * static_cast<index_t>(src.size()));
            }
          CHECK(max_rel_err(b.final_state, back) <= tol_same);
        });
      });
    }
}
#if !LINSTATE_TEST_SANITIZED  // math only: the same kernels as P1-P3 on combined inputs (tests/variants/meson.build)
TEST_CASE_TEMPLATE_APPLY(p12_id, routed_variants);
#endif

// ------------------------------------------------------------------------------------------------
// P14 linearity in v: o(c·v; c·h0) = c·o(v; h0) and the states scale by c (every decay here is
// linear in (v, h0), the delta rule included).

TEST_CASE_TEMPLATE_DEFINE("P14: linearity in v", Spec, p14_id) {
  const linstate::options opt = options_of<Spec>();
  const double c = -2.5;
  for (const layout& l : layouts())
    for (const bool h0 : {false, true}) {
      INFO("layout: ", l.name, ", initial_state: ", h0);
      const random_inputs d = make_data<Spec>(l, h0, 141);
      random_inputs dc_ = d;
      dc_.v = scaled(d.v, c);
      if (h0) dc_.initial_state = scaled(d.initial_state, c);
      for_each_strategy([&](auto strat) {
        for_each_algorithm<Spec>([&](auto algo) {
          INFO("run: ", label(algo, strat));
          const auto a = linstate::forward<Spec>(be, d.view(), algo, strat, opt);
          const auto b = linstate::forward<Spec>(be, dc_.view(), algo, strat, opt);
          CHECK(max_rel_err(b.o, scaled(a.o, c)) <= tol_same);
          CHECK(max_rel_err(b.final_state, scaled(a.final_state, c)) <= tol_same);
        });
      });
    }
}
#if !LINSTATE_TEST_SANITIZED  // math only: the same kernels as P1-P3 on combined inputs (tests/variants/meson.build)
TEST_CASE_TEMPLATE_APPLY(p14_id, all_variants);
#endif

}  // namespace inv
}  // namespace
