// linstate/cuda/balance_loss.cuh — linstate::balance_loss on linstate::cuda (SPEC §4.9, §11 C11).
//
// The same loss, options, checks and gradient as the CPU's linstate::balance_loss
// (include/linstate/balance_loss.hpp) on device logits, with one difference: the CPU returns the loss
// as a float, which on the GPU would need a host round trip; here the loss is WRITTEN to a device
// float (`loss`, a pointer to device memory) on `be.stream`, and the call returns without
// synchronising. The gradient goes into `d_logits` (device, the logits' shape and element type),
// replacing or adding to it (gradient_write::overwrite / accumulate), so that a training step can
// fold the balance term into the router gradient linstate::backward wrote:
// \code
//   linstate::backward<sse>(linstate::cuda{stream}, in, linstate::cotangents<bf16>{.o = dO}, grads);
//   linstate::balance_loss<sse>(linstate::cuda{stream}, in.router_logits, aux_dev, grads.router_logits, 0.01f,
//                               linstate::gradient_write::accumulate);        // aux_dev: float* on the GPU
// \endcode
// Other differences: non-finite logits are not refused (that needs reading them): such a token
// makes the loss and every gradient entry NaN (linstate::check_router_logits tests them, with a sync).
// N ≤ 256. Scratch: one stream-ordered allocation (probabilities and write masks, 8·B·T·N bytes, plus
// partial sums). Deterministic: fixed-order sums, in double like the CPU.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <string>

#include <linstate/balance_loss.hpp>
#include <linstate/backend/tags.hpp>

#include "buffer.cuh"
#include "check.cuh"
#include "detail/scalar.cuh"
#include "detail/scratch.cuh"
#include "forward.cuh"
#include "kernels/balance.cuh"

namespace linstate {
namespace cuda_detail {

inline void require_device_pointer(const std::string& api, const char* name, const void* p) {
  cudaPointerAttributes at{};
  check(cudaPointerGetAttributes(&at, p), "cudaPointerGetAttributes", api.c_str());
  if (at.type == cudaMemoryTypeUnregistered)
    detail::fail(api, std::string(name) + " is host memory; the CUDA balance_loss writes it on the device (a float in "
                                          "cudaMalloc'ed, pinned or managed memory)");
}

template <class Spec, class Scalar>
void balance_loss(const cuda& be, const tensor_view<const Scalar>& logits, float* loss, const tensor_view<Scalar>* d_logits,
                  float coefficient, gradient_write mode, const options& opt) {
  static_assert(detail::validate_balance<Spec>());
  using Dev = device_scalar_t<Scalar>;
  const std::string api = "linstate::balance_loss (cuda)";
  using R = typename Spec::router;
  const auto pb = detail::make_balance_problem<Spec>(api, logits, opt, /*host_data=*/false);
  if (d_logits) {
    if (d_logits->empty())
      detail::fail(api, "d_logits is required: expected " + logits.shape.str() +
                            " (like router_logits); for the value alone call balance_loss(cuda, router_logits, loss, options)");
    if (!(d_logits->shape == logits.shape))
      detail::fail(api, "d_logits has shape " + d_logits->shape.str() + " but must be " + logits.shape.str() +
                            " (like router_logits)");
    if (!std::isfinite(coefficient)) detail::fail(api, "coefficient must be finite, got " + std::to_string(coefficient));
    const auto bytes = static_cast<std::size_t>(logits.numel()) * sizeof(Scalar);
    if (detail::overlaps(logits.data, bytes, d_logits->data, bytes))
      detail::fail(api, "d_logits " + d_logits->shape.str() + " overlaps router_logits " + logits.shape.str());
  } else if (loss == nullptr) {
    detail::fail(api, "loss is required: a pointer to one float in device memory");
  }
  if (pb.N > max_router_partitions)
    detail::fail(api, "N = " + std::to_string(pb.N) + " routed partitions, but the CUDA router handles at most " +
                          std::to_string(max_router_partitions));
  require_device(api, "router_logits", logits);
  if (d_logits) require_device(api, "d_logits", *d_logits);
  if (loss) require_device_pointer(api, "loss", loss);

  const cudaStream_t stream = stream_of(be);
  const index_t M = pb.tokens();
  const int N = static_cast<int>(pb.N);
  if (M == 0) {  // no token: aux = 0 and an empty gradient (as the CPU)
    if (loss) check(cudaMemsetAsync(loss, 0, sizeof(float), stream), "cudaMemsetAsync(loss)", api.c_str());
    return;
  }
  const index_t chunks = (M + balance_chunk - 1) / balance_chunk;
  scratch_layout lay;
  const std::size_t at_p = lay.add(static_cast<std::size_t>(M * N) * sizeof(float));
  const std::size_t at_w = lay.add(static_cast<std::size_t>(M * N) * sizeof(float));
  const std::size_t at_part = lay.add(static_cast<std::size_t>(chunks * 2 * N) * sizeof(double));
  const std::size_t at_dp = lay.add(static_cast<std::size_t>(N) * sizeof(double));
  device_buffer<unsigned char> scratch(lay.bytes, stream, scratch_pool(api.c_str()));
  float* prob = reinterpret_cast<float*>(scratch.data() + at_p);
  float* wmask = reinterpret_cast<float*>(scratch.data() + at_w);
  double* partial = reinterpret_cast<double*>(scratch.data() + at_part);
  double* dp = reinterpret_cast<double*>(scratch.data() + at_dp);

  constexpr int threads = 128;
  const unsigned token_blocks = static_cast<unsigned>((M + threads - 1) / threads);
  balance_probs_kernel<R, Dev><<<token_blocks, threads, 0, stream>>>(pb.rcfg(), device_ptr(logits.data), M, N, prob, wmask);
  check_launch("balance_probs_kernel", api.c_str());
  constexpr int col_threads = 64;
  balance_colsum_kernel<<<dim3(static_cast<unsigned>(chunks), static_cast<unsigned>((N + col_threads - 1) / col_threads)),
                          col_threads, 0, stream>>>(prob, wmask, M, N, partial);
  check_launch("balance_colsum_kernel", api.c_str());
  balance_final_kernel<<<1, max_router_partitions, 0, stream>>>(partial, chunks, M, N, pb.kw, loss, dp);
  check_launch("balance_final_kernel", api.c_str());
  if (d_logits) {
    balance_grad_kernel<R, Dev><<<token_blocks, threads, 0, stream>>>(pb.rcfg(), device_ptr(logits.data), prob, M, N, dp,
                                                                      coefficient, mode == gradient_write::accumulate,
                                                                      device_ptr(d_logits->data));
    check_launch("balance_grad_kernel", api.c_str());
  }
}

}  // namespace cuda_detail

//! \brief The balance loss of SSE (SPEC §4.9) on device `router_logits` `[B,T,N]`, written to the
//! device float `*loss` on `be.stream` (no synchronisation; the CPU overload returns it instead).
//! Same options and checks as the CPU overload, except that the logits' finiteness is not checked.
template <class Spec, InputScalar Scalar>
void balance_loss(const cuda& be, const tensor_view<const Scalar>& router_logits, float* loss, const options& opt = {}) {
  cuda_detail::balance_loss<Spec, Scalar>(be, router_logits, loss, nullptr, 1.f, gradient_write::overwrite, opt);
}

//! Same as above for a view of non-const logits.
template <class Spec, InputScalar Scalar>
void balance_loss(const cuda& be, const tensor_view<Scalar>& router_logits, float* loss, const options& opt = {}) {
  balance_loss<Spec>(be, tensor_view<const Scalar>(router_logits), loss, opt);
}

//! \brief The balance loss and `coefficient · ∂aux/∂router_logits` into device `d_logits` (replace or
//! add, `mode`), as the CPU overload; the loss goes to the device float `*loss` (may be null: the
//! gradient alone). Every check is made before anything is enqueued (on error `d_logits` is untouched).
template <class Spec, InputScalar Scalar>
void balance_loss(const cuda& be, const tensor_view<const Scalar>& router_logits, float* loss,
                  const tensor_view<Scalar>& d_logits, float coefficient = 1.f,
                  gradient_write mode = gradient_write::overwrite, const options& opt = {}) {
  cuda_detail::balance_loss<Spec, Scalar>(be, router_logits, loss, &d_logits, coefficient, mode, opt);
}

//! Same as above for a view of non-const logits.
template <class Spec, InputScalar Scalar>
void balance_loss(const cuda& be, const tensor_view<Scalar>& router_logits, float* loss,
                  const tensor_view<Scalar>& d_logits, float coefficient = 1.f,
                  gradient_write mode = gradient_write::overwrite, const options& opt = {}) {
  balance_loss<Spec>(be, tensor_view<const Scalar>(router_logits), loss, d_logits, coefficient, mode, opt);
}

}  // namespace linstate
