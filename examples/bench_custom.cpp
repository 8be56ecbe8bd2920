// examples/bench_custom.cpp — timing variants of your own with <linstate/bench.hpp>: a decode step of
// Kimi Delta Attention and of SSE with a sigmoid top-k router (both written outside the library, in
// examples/custom/policies.hpp), and a prefill of the per-value-channel decay. Each measurement is one
// call; `std::cout << r` prints the median / p20 / p80 time, tokens/s, the state bytes the call must
// touch, bytes/s and FLOP/s against this machine's measured copy bandwidth and FMA peak.
//
//   ./bench_custom            (sizes: B = 16, H = 8, K = V = 128; prefill T = 512)
#include <iostream>

#include <linstate/bench.hpp>

#include "custom/policies.hpp"

namespace pt = linstate::partition;

struct kda_attn : linstate::spec<> {  // KDA: the gated delta rule with a per-key decay
  using decay = custom::kda<true>;
};
struct sse_sigmoid : linstate::spec<> {  // SSE n4k1 + shared with a sigmoid router and a selection bias
  using partition = pt::routed<4, pt::shared>;
  using router = custom::sigmoid_top_k<1>;
};
struct gla_v : linstate::spec<> {  // decay along the value columns
  using decay = custom::per_value_decay;
};

// KDA's write per state element: the decay (1 multiply), the read kᵀS and the rank-1 update (2
// multiply-adds): 5 FLOPs, where the library's default for a family::recurrent_only policy is 2.
template <>
struct linstate::bench::decay_flops<custom::kda<true>> {
  static constexpr double write = 5, read = 2;
};

int main() {
  namespace lb = linstate::bench;
  const auto kda = lb::decode<kda_attn>(linstate::cpu{}, {.B = 16, .H = 8, .K = 128, .V = 128, .name = "kda"});
  std::cout << kda << "\n";
  // <variant, float>: only the fp32 kernels are compiled (options.dtype: the element type at run time)
  const auto sse = lb::decode<sse_sigmoid, float>(linstate::cpu{}, {.B = 16, .H = 8, .K = 128, .V = 128, .name = "sse_sigmoid_n4k1s"});
  std::cout << sse << "\n";
  const auto pv = lb::prefill<gla_v, float>(linstate::cpu{}, {.T = 512, .name = "gla_per_value"}, linstate::recurrent{});
  std::cout << pv << "\n" << lb::markdown({kda, sse, pv});
  return kda.time.median > 0 && sse.time.median > 0 && pv.time.median > 0 ? 0 : 1;
}
