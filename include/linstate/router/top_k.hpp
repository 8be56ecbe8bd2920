// linstate/router/top_k.hpp — softmax router with top-k write and read sets (SSE, arXiv 2507.16577).
#pragma once

#include <cstdint>
#include <string>

#include "../config.hpp"
#include "../detail/router.hpp"
#include "../dynamic.hpp"
#include "../tensor.hpp"

namespace linstate::router {

//! Which side of the update the router probability multiplies (SPEC §11 C2; the authors' `emulk` /
//! `emulq`). Both are independent and honoured by every algorithm and strategy.
enum class gate : unsigned { none = 0, write = 1, read = 2, both = 3 };
LINSTATE_HOST_DEVICE constexpr bool has(gate g, gate bit) { return (static_cast<unsigned>(g) & static_cast<unsigned>(bit)) != 0; }

//! Options of the top-k router (a structural type, so it is a template argument):
//! - `gates`: multiply the key of a written partition by p (gate::write), the query of a read one
//!   by p (gate::read), both (default, as the SSE paper) or neither;
//! - `renormalize`: divide the selected probabilities by their sum (write and read set separately),
//!   so the selected mass is 1 (the slides' backup note); off by default, as the authors' code;
//! - `round_to_input`: round the fp32 probabilities to the logits' element type before selection and
//!   use the rounded values as gates, for bit-parity with the authors' bf16 mask path (SPEC §4.4);
//! - `dynamic_gates`: take `gates` from linstate::options at run time instead.
struct top_k_options {
  gate gates = gate::both;
  bool renormalize = false;
  bool round_to_input = false;
  bool dynamic_gates = false;
};

//! \brief Softmax top-k router of Sparse State Expansion (SPEC §4.4, §11 C1–C3).
//! \verbatim
//!   p_t = softmax(eta_t)                  (fp32, over the N routed partitions)
//!   W_t = top-NumWriter(p_t), R_t = top-NumReader(p_t), ties to the lowest partition index
//!   routed n ∈ W_t:  h^n = decay(h^n) + (p_t[n] if gate::write) · k_t v_tᵀ ;  n ∉ W_t: h^n frozen
//!   o_t += Σ_{n∈R_t} (p_t[n] if gate::read) · s · h^nᵀ q_t
//!   backward (SPEC §4.6): dp_n = Σ_{gated sides, n∈set} dc_n  (renormalised: dc_n/S − Σ_m dc_m p_m/S²)
//!                         dη = p ⊙ (dp − ⟨p, dp⟩)
//! \endverbatim
//! `NumWriter` (kw) and `NumReader` (kr) are independent; either may be linstate::dynamic (then
//! taken from linstate::options). Router logits: `[B,T,N]`, one set per token shared by all heads.
//! The balance loss (SPEC §4.9) balances p against the write sets.
//! \code
//! struct sse_n4k1s : gla { using partition = linstate::partition::routed<4, linstate::partition::shared>;
//!                          using router    = linstate::router::top_k<1>; };
//! struct sse_w2r1  : sse_n4k1s { using router = linstate::router::top_k<2, 1>; };
//! struct sse_plain : sse_n4k1s { using router = linstate::router::top_k<1, 1, {.gates = linstate::router::gate::none}>; };
//! \endcode
template <int NumWriter, int NumReader = NumWriter, top_k_options Options = top_k_options{}>
struct top_k {
  static_assert(NumWriter == dynamic || NumWriter >= 1,
                "linstate: router::top_k<NumWriter> needs NumWriter >= 1 (or linstate::dynamic)");
  static_assert(NumReader == dynamic || NumReader >= 1,
                "linstate: router::top_k<NumWriter, NumReader> needs NumReader >= 1 (or linstate::dynamic)");
  static constexpr bool routes = true;          //!< selects partitions per token from router_logits
  static constexpr int num_writer = NumWriter;  //!< compile-time kw (or dynamic)
  static constexpr int num_reader = NumReader;  //!< compile-time kr (or dynamic)
  static constexpr int params_per_partition = 0;  //!< takes no router_params
  static constexpr top_k_options options = Options;
  static constexpr const char* name = "router::top_k";

  //! The resolved run-time configuration (kw, kr: at most that many partitions written / read).
  struct config {
    int kw = NumWriter, kr = NumReader;
    gate gates = Options.gates;
    bool renormalize = Options.renormalize, round_to_input = Options.round_to_input;
  };

  //! Resolves kw, kr and the gates from the options (host; throws linstate::error naming the option).
  //! `balance`: for the balance loss, where kr and the gates do not enter and may stay unset.
  template <class Opt>
  static config configure(const Opt& opt, index_t N, const std::string& api, bool balance = false) {
    auto fail = [&](const std::string& m) { throw error(api + ": " + m); };
    config c;
    auto resolve = [&](int fixed, int given, const char* what, bool optional) {
      if (fixed == dynamic) {
        if (given == dynamic) {
          if (optional) return -1;
          fail(std::string("router::top_k<dynamic> needs options.") + what + " (it is not set)");
        }
        if (given < 1) fail(std::string("router::top_k<dynamic> needs options.") + what + " >= 1, got " + std::to_string(given));
        return given;
      }
      if (given != dynamic && given != fixed)
        fail(std::string("options.") + what + " = " + std::to_string(given) + " but the variant fixes it to " +
             std::to_string(fixed) + " at compile time");
      return fixed;
    };
    if (balance && NumReader == dynamic && opt.num_reader != dynamic && opt.num_reader < 1)
      fail("router::top_k<..., dynamic> needs options.num_reader >= 1, got " + std::to_string(opt.num_reader));
    c.kw = resolve(NumWriter, opt.num_writer, "num_writer", false);
    c.kr = resolve(NumReader, opt.num_reader, "num_reader", balance);
    if (c.kr < 0) c.kr = c.kw;
    if (c.kw > N || c.kr > N)
      fail("router::top_k writes kw = " + std::to_string(c.kw) + " and reads kr = " + std::to_string(c.kr) +
           " partitions per token but there are only N = " + std::to_string(N));
    if constexpr (Options.dynamic_gates) {
      if (opt.gates) c.gates = *opt.gates;
      else if (!balance) fail("router::top_k<..., {.dynamic_gates = true}> needs options.gates");
    } else {
      if (opt.gates && *opt.gates != Options.gates) fail("options.gates is set but the variant fixes the gates at compile time");
    }
    return c;
  }

  //! One token: scores p (softmax of the N logits x, rounded by `round` when round_to_input), the
  //! write / read flags and the write / read weights (0 where not selected).
  template <class T, class Round>
  LINSTATE_HOST_DEVICE static void route(const config& c, int N, const T* x, const float* /*params*/, T* p, T* cw,
                                         T* cr, std::uint8_t* flags, Round round) {
    detail::softmax(x, N, p);
    if (c.round_to_input) {
      LINSTATE_UNROLL
      for (int n = 0; n < N; ++n) p[n] = round(p[n]);
    }
    LINSTATE_UNROLL
    for (int n = 0; n < N; ++n) {
      std::uint8_t f = 0;
      if (detail::in_top_k(p, N, c.kw, n)) f |= detail::route_write;
      if (detail::in_top_k(p, N, c.kr, n)) f |= detail::route_read;
      flags[n] = f;
    }
    gate_values(c, N, p, flags, cw, cr);
  }

  //! The weights of given flags, recomputed in T from the logits (the fp64 reference uses it).
  template <class T>
  LINSTATE_HOST_DEVICE static void weights(const config& c, int N, const T* x, const float* /*params*/,
                                           const std::uint8_t* flags, T* p, T* cw, T* cr) {
    detail::softmax(x, N, p);
    gate_values(c, N, p, flags, cw, cr);
  }

  //! ∂L/∂x from ∂L/∂cw, ∂L/∂cr (p: the scores route() or weights() gave; work: [N]). Rounding to the
  //! input type passes through as the identity, as the authors' kernel does.
  template <class T, class P>
  LINSTATE_HOST_DEVICE static void weights_backward(const config& c, int N, const T* /*x*/, const float* /*params*/,
                                                    const P* p, const std::uint8_t* flags, const T* dcw, const T* dcr,
                                                    T* dx, T* work) {
    T* dp = work;
    LINSTATE_UNROLL
    for (int n = 0; n < N; ++n) dp[n] = T(0);
    LINSTATE_UNROLL
    for (int side = 0; side < 2; ++side) {
      if (!has(c.gates, side == 0 ? gate::write : gate::read)) continue;
      const std::uint8_t bit = side == 0 ? detail::route_write : detail::route_read;
      const T* dc = side == 0 ? dcw : dcr;
      if (!c.renormalize) {
        LINSTATE_UNROLL
        for (int n = 0; n < N; ++n)
          if (flags[n] & bit) dp[n] += dc[n];
      } else {  // c_n = p_n / S, S = Σ_{m∈sel} p_m:  dp_m += dc_m / S − Σ_n dc_n p_n / S²  (m ∈ sel)
        T S = T(0), cross = T(0);
        LINSTATE_UNROLL
        for (int n = 0; n < N; ++n)
          if (flags[n] & bit) S += static_cast<T>(p[n]), cross += dc[n] * static_cast<T>(p[n]);
        LINSTATE_UNROLL
        for (int m = 0; m < N; ++m)
          if (flags[m] & bit) dp[m] += dc[m] / S - cross / (S * S);
      }
    }
    detail::softmax_backward(p, dp, N, dx);
  }

  //! The balance loss's gradient through the scores: dx = p ⊙ (dp − ⟨p, dp⟩).
  template <class T, class P>
  LINSTATE_HOST_DEVICE static void scores_backward(const config&, int N, const T* /*x*/, const float* /*params*/,
                                                   const P* p, const T* dp, T* dx) {
    detail::softmax_backward(p, dp, N, dx);
  }

  static std::string describe() {
    auto num = [](int x) { return x == dynamic ? std::string("dynamic") : std::to_string(x); };
    std::string s = "top_k<" + num(NumWriter) + "," + num(NumReader) + ">";
    s += std::string(" gates=") + (Options.dynamic_gates ? "dynamic"
                                   : Options.gates == gate::both ? "write+read"
                                   : Options.gates == gate::write ? "write"
                                   : Options.gates == gate::read ? "read" : "none");
    if (Options.renormalize) s += " renormalize";
    if (Options.round_to_input) s += " round_to_input";
    return s;
  }

 private:
  template <class T>
  LINSTATE_HOST_DEVICE static void gate_values(const config& c, int N, const T* p, const std::uint8_t* flags, T* cw, T* cr) {
    const bool gw = has(c.gates, gate::write), gr = has(c.gates, gate::read);
    T sw = T(0), sr = T(0);
    LINSTATE_UNROLL
    for (int n = 0; n < N; ++n) {
      if (flags[n] & detail::route_write) sw += p[n];
      if (flags[n] & detail::route_read) sr += p[n];
    }
    LINSTATE_UNROLL
    for (int n = 0; n < N; ++n) {
      const T pw = c.renormalize ? p[n] / sw : p[n];
      const T pr = c.renormalize ? p[n] / sr : p[n];
      cw[n] = (flags[n] & detail::route_write) ? (gw ? pw : T(1)) : T(0);
      cr[n] = (flags[n] & detail::route_read) ? (gr ? pr : T(1)) : T(0);
    }
  }
};

}  // namespace linstate::router
