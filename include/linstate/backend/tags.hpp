// linstate/backend/tags.hpp — backends are values chosen at the call site.
#pragma once

#include "../config.hpp"

namespace linstate {

//! The Eigen CPU backend. `threads = 0` uses every OpenMP thread (when compiled with OpenMP).
//!
//! `bf16_products`: with bf16 inputs (Eigen::bfloat16), the chunked forward of the diagonal family (GLA,
//! per-head decay, no decay; SSE's partitions too) forms its matrix products on bf16 operands with fp32
//! sums, on the CPU's bf16 dot-product instruction (AVX-512 BF16 `vdpbf16ps`), where the translation
//! unit targets it (linstate::cpu_bf16_dot, backend/cpu/gemm_bf16.hpp) and K and V are multiples of 16.
//! The operands q ⊙ e^{Γ}, the entering state as read, k ⊙ e^{−Γ}, the causal scores and k ⊙ e^{γ−Γ}
//! are then rounded to bf16 before their products, as fla's kernels do (SPEC §1.3); the state and
//! every sum stay fp32. The result is within SPEC §9.3's ratio 0.005 of the fp64 reference, but no
//! longer SPEC §11 C10's "the fp32 run's output rounded once to bf16", hence off by default. Without
//! AVX-512 BF16, for other input types, other algorithms and the backward pass, it changes nothing.
//! Speed: on the Intel Xeon (model 207) of docs/benchmarks.md "Issue 13, session 10" vdpbf16ps runs at
//! half the fp32 FMA's multiply-add rate and the path is slower than the exact one (×0.89); measure
//! before setting it (bench/bf16_dot_probe.cpp, bench_prefill's BM_gla_chunked_bf16_products).
//!
//!   linstate::forward<Spec>(linstate::cpu{.bf16_products = true}, in_bf16, linstate::chunked<64>{});
struct cpu {
  int threads = 0;
  bool bf16_products = false;
};

//! How many threads forward() and backward() on `be` run a problem with enough work (at least two
//! (sequence, value head) tasks and about one K×V state update per thread): `be.threads` when
//! positive, else OpenMP's omp_get_max_threads(). It is 1 when the calling translation unit was
//! compiled without OpenMP (no -fopenmp: LINSTATE_HAS_OPENMP = 0): the CPU backend then runs on the
//! calling thread only, so a build system that drops the flag shows here.
//!
//!   if (linstate::cpu_threads() < 2) std::cerr << "linstate: built without OpenMP, one thread\n";
inline int cpu_threads(const cpu& be = {}) {
#if LINSTATE_HAS_OPENMP
  return be.threads > 0 ? be.threads : omp_get_max_threads();
#else
  (void)be;
  return 1;
#endif
}

//! The CUDA backend: work is enqueued on `stream` (a cudaStream_t, held as void* so that this header
//! needs no CUDA include; nullptr = the legacy default stream). CPU-only code can name and build it;
//! its forward() overloads live under cuda/ and are visible only to translation units that include
//! <linstate/cuda.cuh>.
struct cuda {
  void* stream = nullptr;
};

}  // namespace linstate
