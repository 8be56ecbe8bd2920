// examples/bench/cpu_families.hpp — linstate-bench's runners on the CPU; each cpu_<family>_<type>.cpp
// instantiates one family for one element type.
#pragma once

#include "variants.hpp"

namespace linstate_cli {

template <class V, class Scalar>
lb::result run_cpu(lb::mode m, const std::string& algorithm, const std::string& strategy, const lb::options& o) {
  return run<V, Scalar>(linstate::cpu{}, m, algorithm, strategy, o);
}

template <class Scalar>
std::vector<named_runner> cpu_gla() {  // GLA and SSE top-1 + shared
  return {{"gla", &run_cpu<gla, Scalar>}, {"sse_n4k1s", &run_cpu<sse_n4k1s, Scalar>},
          {"sse_n8k1s", &run_cpu<sse_n8k1s, Scalar>}, {"sse_n16k1s", &run_cpu<sse_n16k1s, Scalar>}};
}

template <class Scalar>
std::vector<named_runner> cpu_sse_k2() {  // SSE top-2, and N / kw / kr at run time
  return {{"sse_n8k2", &run_cpu<sse_n8k2, Scalar>}, {"sse_n8k2s", &run_cpu<sse_n8k2s, Scalar>},
          {"sse_dynamic", &run_cpu<sse_dynamic, Scalar>}};
}

template <class Scalar>
std::vector<named_runner> cpu_delta() {  // the gated delta rule
  return {{"gdn", &run_cpu<gdn, Scalar>}, {"sse_gdn_n4k1s", &run_cpu<sse_gdn_n4k1s, Scalar>}};
}

}  // namespace linstate_cli
