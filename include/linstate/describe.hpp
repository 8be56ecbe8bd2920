// linstate/describe.hpp — the resolved slots of a variant as text (for test names, benchmarks, logs).
#pragma once

#include <string>

#include "concepts.hpp"

namespace linstate {

//! `describe<sse_n4k1s>()` → "state=dense<float> decay=gated_key router=top_k<1,1> partition=routed<4,shared>"
template <Variant Spec>
std::string describe() {
  using D = typename Spec::decay;
  using R = typename Spec::router;
  using P = typename Spec::partition;
  auto num = [](int x) { return x == dynamic ? std::string("dynamic") : std::to_string(x); };
  std::string s = "state=dense<float> decay=";
  {
    const std::string name = D::name;
    s += name.rfind("decay::", 0) == 0 ? name.substr(7) : name;
  }
  s += " router=";
  if constexpr (requires { R::describe(); }) s += R::describe();
  else {
    const std::string name = R::name;
    s += name.rfind("router::", 0) == 0 ? name.substr(8) : name;
  }
  s += " partition=";
  if constexpr (P::is_single) s += "single";
  else s += "routed<" + num(P::num_routed) + (P::has_shared ? ",shared>" : ">");
  return s;
}

}  // namespace linstate
