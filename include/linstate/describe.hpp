// linstate/describe.hpp — the resolved slots of a variant as text (for test names, benchmarks, logs).
#pragma once

#include <string>

#include "concepts.hpp"
#include "router/top_k.hpp"

namespace linstate {

//! `describe<sse_n4k1s>()` → "state=dense<float> decay=gated_key router=top_k<1,1> partition=routed<4,shared>"
template <Variant Spec>
std::string describe() {
  using D = typename Spec::decay;
  using R = typename Spec::router;
  using P = typename Spec::partition;
  auto num = [](int x) { return x == dynamic ? std::string("dynamic") : std::to_string(x); };
  std::string s = "state=dense<float> decay=";
  if constexpr (requires { D::name; }) {
    const std::string name = D::name;
    s += name.rfind("decay::", 0) == 0 ? name.substr(7) : name;
  } else {
    s += "(unnamed)";
  }
  s += " router=";
  if constexpr (R::kind == detail::router_kind::top_k) {
    s += "top_k<" + num(R::num_writer) + "," + num(R::num_reader) + ">";
    s += std::string(" gates=") + (R::options.dynamic_gates ? "dynamic"
                                   : R::options.gates == router::gate::both ? "write+read"
                                   : R::options.gates == router::gate::write ? "write"
                                   : R::options.gates == router::gate::read ? "read" : "none");
    if (R::options.renormalize) s += " renormalize";
    if (R::options.round_to_input) s += " round_to_input";
  } else {
    s += "dense";
  }
  s += " partition=";
  if constexpr (P::is_single) s += "single";
  else s += "routed<" + num(P::num_routed) + (P::has_shared ? ",shared>" : ">");
  return s;
}

}  // namespace linstate
