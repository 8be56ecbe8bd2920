// examples/mqar/variants.hpp — the five variants of the recall experiment, one translation unit each
// (variant_<name>.cpp), so that they compile in parallel.
#pragma once

#include <linstate/linstate.hpp>

#include "mqar_train.hpp"

namespace mqar_cmd {

namespace variants {
namespace dc = linstate::decay;
namespace pt = linstate::partition;
namespace rt = linstate::router;
struct gla : linstate::spec<> {};                               // one partition, GLA's key gate
struct sse_n4k1s : gla {                                        // 4 routed partitions + a shared one, top-1
  using partition = pt::routed<4, pt::shared>;
  using router = rt::top_k<1>;
};
struct sse_n8k2 : gla {                                         // 8 routed partitions, top-2
  using partition = pt::routed<8>;
  using router = rt::top_k<2>;
};
struct gdn : gla { using decay = dc::gated_delta_rule<true>; }; // gated delta rule, one partition
struct sse_gdn : sse_n4k1s { using decay = dc::gated_delta_rule<true>; };  // SSE-n4k1 + shared over the delta rule
}  // namespace variants

run_result run_gla(const run_config&);
run_result run_sse_n4k1s(const run_config&);
run_result run_sse_n8k2(const run_config&);
run_result run_gdn(const run_config&);
run_result run_sse_gdn(const run_config&);
#if defined(MQAR_CUDA)  // the same on the GPU (variant_*_cuda.cu, mqar_train_cuda.cuh): --device cuda
run_result run_gla_cuda(const run_config&);
run_result run_sse_n4k1s_cuda(const run_config&);
run_result run_sse_n8k2_cuda(const run_config&);
run_result run_gdn_cuda(const run_config&);
run_result run_sse_gdn_cuda(const run_config&);
#endif

}  // namespace mqar_cmd
