// linstate/router/top_k.hpp — softmax router with top-k write and read sets (SSE, arXiv 2507.16577).
#pragma once
#include "../detail/kinds.hpp"

namespace linstate::router {

//! Which side of the update the router probability multiplies (SPEC §11 C2; the authors' `emulk` /
//! `emulq`). Both are independent and honoured by every algorithm and strategy.
enum class gate : unsigned { none = 0, write = 1, read = 2, both = 3 };
constexpr bool has(gate g, gate bit) { return (static_cast<unsigned>(g) & static_cast<unsigned>(bit)) != 0; }

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
//! \endverbatim
//! `NumWriter` (kw) and `NumReader` (kr) are independent; either may be linstate::dynamic (then
//! taken from linstate::options). Router logits: `[B,T,N]`, one set per token shared by all heads.
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
  static constexpr detail::router_kind kind = detail::router_kind::top_k;
  static constexpr int num_writer = NumWriter;
  static constexpr int num_reader = NumReader;
  static constexpr top_k_options options = Options;
  static constexpr const char* name = "router::top_k";
};

}  // namespace linstate::router
