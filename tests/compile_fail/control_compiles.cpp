// expect: compiles
// SPDX-License-Identifier: Apache-2.0
// Positive control for the compile_fail suite: the same kind of code as the failing cases, written
// correctly, must compile. If this fails, every "expected failure" above may be failing for the wrong
// reason (a missing include, a renamed API), so the driver's regex check is what keeps them honest.
#include <linstate/linstate.hpp>

namespace pt = linstate::partition;
namespace rt = linstate::router;

struct gla : linstate::spec<> {};
struct sse_n4k1s : gla {
  using partition = pt::routed<4, pt::shared>;
  using router = rt::top_k<1>;
};
struct sse_n4w2r4 : gla {  // kw != kr, kr = N (SPEC §11 C3)
  using partition = pt::routed<4>;
  using router = rt::top_k<2, 4, rt::top_k_options{.gates = rt::gate::write, .renormalize = true}>;
};
struct sse_dyn : gla {
  using partition = pt::routed<linstate::dynamic>;
  using router = rt::top_k<linstate::dynamic>;
};
struct gdn : gla {
  using decay = linstate::decay::gated_delta_rule<true>;
};
struct sse_n1k1 : gla {  // N = 1 and k = N are legal (SPEC §11 C3)
  using partition = pt::routed<1>;
  using router = rt::top_k<1>;
};

static_assert(linstate::Variant<sse_n4k1s> && linstate::Variant<gdn>);

void run(const linstate::inputs<float>& in, const linstate::outputs<float>& out,
         const linstate::inputs<Eigen::bfloat16>& in16, const linstate::outputs<Eigen::bfloat16>& out16) {
  linstate::forward<gla>(linstate::cpu{}, in, out);
  linstate::forward<sse_n4k1s>(linstate::cpu{}, in, out, linstate::chunked<64>{}, linstate::mask{});
  linstate::forward<sse_n4w2r4>(linstate::cpu{}, in16, out16, linstate::recurrent{}, linstate::varlen{});
  linstate::forward<sse_dyn>(linstate::cpu{}, in, out, linstate::automatic{}, linstate::varlen{},
                             linstate::options{.num_partitions = 8, .num_writer = 2, .num_reader = 2});
  linstate::forward<gdn>(linstate::cpu{}, in, out, linstate::recurrent{});
  linstate::forward<gdn>(linstate::cpu{}, in, out, linstate::chunked<64>{});  // the chunked WY form exists
  linstate::forward<sse_n1k1>(linstate::cpu{}, in, out);
  linstate::forward_in_place<sse_n4k1s>(linstate::cpu{}, in, out.final_state, out.o, linstate::recurrent{});
  auto r = linstate::forward<gdn>(linstate::cpu{}, in);
  (void)r;
}
