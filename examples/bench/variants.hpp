// examples/bench/variants.hpp — the variants linstate-bench knows, and how a run-time choice of
// variant, mode, algorithm and strategy becomes a call of linstate::bench::decode / prefill / train.
//
// A .cu translation unit includes <linstate/cuda/bench.cuh> before this header, so that the calls in
// run() below see the CUDA overloads (they are qualified names, looked up where run() is defined).
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include <linstate/bench.hpp>

namespace linstate_cli {

namespace lb = linstate::bench;
namespace pt = linstate::partition;
namespace rt = linstate::router;
using linstate::dynamic;

// ---------------------------------------------------------------------------------------------
// The shipped variants (paper names; "s" = with the shared partition)
// ---------------------------------------------------------------------------------------------
struct gla : linstate::spec<> {};
struct sse_n4k1s : gla {
  using partition = pt::routed<4, pt::shared>;
  using router = rt::top_k<1>;
};
struct sse_n8k1s : gla {
  using partition = pt::routed<8, pt::shared>;
  using router = rt::top_k<1>;
};
struct sse_n16k1s : gla {
  using partition = pt::routed<16, pt::shared>;
  using router = rt::top_k<1>;
};
struct sse_n8k2 : gla {
  using partition = pt::routed<8>;
  using router = rt::top_k<2>;
};
struct sse_n8k2s : gla {
  using partition = pt::routed<8, pt::shared>;
  using router = rt::top_k<2>;
};
//! N, kw and kr from the command line (--N, --kw, --kr).
struct sse_dynamic : gla {
  using partition = pt::routed<dynamic, pt::shared>;
  using router = rt::top_k<dynamic, dynamic>;
};
struct gdn : linstate::spec<> {
  using decay = linstate::decay::gated_delta_rule<true>;
};
struct sse_gdn_n4k1s : sse_n4k1s {
  using decay = linstate::decay::gated_delta_rule<true>;
};

//! One measurement of one variant on one backend, with one element type compiled in.
using runner = lb::result (*)(lb::mode, const std::string& algorithm, const std::string& strategy, const lb::options&);
struct named_runner {
  const char* name;
  runner run;
};

//! The variants, in --list order.
struct variant_about {
  const char* name;
  const char* about;
};
inline std::vector<variant_about> variant_list() {
  return {
      {"gla", "GLA: gated_key decay, one partition"},
      {"sse_n4k1s", "SSE over GLA: N = 4 routed partitions, top-1, shared partition"},
      {"sse_n8k1s", "SSE over GLA: N = 8, top-1, shared partition"},
      {"sse_n16k1s", "SSE over GLA: N = 16, top-1, shared partition"},
      {"sse_n8k2", "SSE over GLA: N = 8, top-2, no shared partition"},
      {"sse_n8k2s", "SSE over GLA: N = 8, top-2, shared partition"},
      {"sse_dynamic", "SSE over GLA with a shared partition; N, kw, kr from --N, --kw (--kr: default kw)"},
      {"gdn", "Gated DeltaNet: gated_delta_rule<l2norm>, one partition"},
      {"sse_gdn_n4k1s", "SSE over the gated delta rule: N = 4, top-1, shared partition"},
  };
}

// The runners, one translation unit per (backend, group of variants, element type), so that each
// compiles in well under a minute (cpu_families.hpp, cuda_families.cuh).
template <class Scalar>
std::vector<named_runner> cpu_gla();
template <class Scalar>
std::vector<named_runner> cpu_sse_k2();
template <class Scalar>
std::vector<named_runner> cpu_delta();
template <class Scalar>
std::vector<named_runner> cuda_gla();
template <class Scalar>
std::vector<named_runner> cuda_sse_k2();
template <class Scalar>
std::vector<named_runner> cuda_delta();

//! f(tag) for the algorithm named `a`: recurrent, chunked (= chunked<64>) or automatic.
template <class F>
lb::result with_algorithm(const std::string& a, F&& f) {
  if (a == "recurrent") return f(linstate::recurrent{});
  if (a == "chunked" || a == "chunked<64>") return f(linstate::chunked<64>{});
  if (a == "automatic") return f(linstate::automatic{});
  throw std::invalid_argument("--algorithm " + a + ": expected recurrent, chunked or automatic");
}
//! f(tag) for the strategy named `s`: varlen or mask.
template <class F>
lb::result with_strategy(const std::string& s, F&& f) {
  if (s == "varlen") return f(linstate::varlen{});
  if (s == "mask") return f(linstate::mask{});
  throw std::invalid_argument("--strategy " + s + ": expected varlen or mask");
}

//! One measurement of V on backend `be`, element type Scalar.
template <class V, class Scalar, class Backend>
lb::result run(const Backend& be, lb::mode m, const std::string& algorithm, const std::string& strategy, const lb::options& o) {
  return with_algorithm(algorithm, [&](auto a) {
    return with_strategy(strategy, [&](auto s) {
      switch (m) {
        case lb::mode::decode: return lb::decode<V, Scalar>(be, o, a, s);
        case lb::mode::prefill: return lb::prefill<V, Scalar>(be, o, a, s);
        default: return lb::train<V, Scalar>(be, o, a, s);
      }
    });
  });
}

}  // namespace linstate_cli
