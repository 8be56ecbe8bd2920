// linstate/testing/cuda_runner.cuh — runs host inputs on the CUDA backend and brings the results back.
//
// The GPU counterpart of linstate::testing::cpu_runner (<linstate/testing/gradcheck.hpp>): the same
// two member templates, host tensors in, owning host tensors out, so that anything written against a
// runner — linstate::testing::check_gradients, `linstate-run --backend cuda`, a user's own checks —
// runs on the GPU unchanged. Each call copies every given input to the device (cu_seqlens stays the
// host span, as the API takes it), calls linstate::forward / linstate::backward on
// linstate::cuda{stream}, copies the outputs back and synchronises the stream. It is meant for
// checks and tools, not for speed: it allocates and copies on every call.
// \code
//   #include <linstate/cuda.cuh>
//   #include <linstate/testing/cuda_runner.cuh>
//   const linstate::testing::cuda_runner gpu{};                                 // default stream
//   linstate::result<float> r = gpu.forward<my_variant, linstate::chunked<64>, linstate::mask>(in, opt);
//   auto report = linstate::testing::check_gradients<my_variant>(data, {}, gpu);  // on the GPU
// \endcode
// Errors: CUDA failures throw linstate::error naming the call; the library's own checks throw as
// for any linstate::cuda call.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <vector>

#include "../cuda.cuh"

namespace linstate::testing {

namespace cuda_runner_detail {

inline void ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw error(std::string("linstate::testing::cuda_runner: ") + what + ": " + cudaGetErrorString(e));
}

//! Device copies of host tensors; views of them stay valid while *this lives.
struct uploads {
  std::vector<device_buffer<float>> bufs;
  cudaStream_t stream = nullptr;
  explicit uploads(cudaStream_t s, std::size_t n = 16) : stream(s) { bufs.reserve(n); }
  tensor_view<const float> up(const tensor_view<const float>& t) {
    if (t.empty()) return {};
    bufs.emplace_back(static_cast<std::size_t>(t.numel()));
    bufs.back().upload(t.data, stream);
    return bufs.back().view(t.shape);
  }
  //! Every tensor of `host` on the device.
  inputs<float> all(const inputs<float>& host) {
    inputs<float> in = host;
    in.q = up(host.q), in.k = up(host.k), in.v = up(host.v), in.g = up(host.g), in.beta = up(host.beta);
    in.shared.q = up(host.shared.q), in.shared.k = up(host.shared.k), in.shared.g = up(host.shared.g);
    in.shared.beta = up(host.shared.beta), in.router_logits = up(host.router_logits);
    in.router_params = up(host.router_params), in.initial_state = up(host.initial_state);
    return in;
  }
};

//! A device output shaped `shape` (or none when `want` is false), and its download.
struct download {
  shape_t shape{};
  device_buffer<float> buf{};
  bool on = false;
  explicit download(const shape_t& s, bool want = true) : shape(s), on(want) {
    if (on) buf = device_buffer<float>(static_cast<std::size_t>(s.numel()));
  }
  tensor_view<float> view() const { return on ? buf.view(shape) : tensor_view<float>{}; }
  tensor<float> get(cudaStream_t stream) const {
    if (!on) return {};
    tensor<float> h(shape);
    buf.download(h.data(), stream);
    return h;
  }
};

}  // namespace cuda_runner_detail

//! Runs linstate::forward / linstate::backward on linstate::cuda{stream} (host tensors in and out).
struct cuda_runner {
  cudaStream_t stream = nullptr;

  template <class Spec, class Algorithm, class Strategy>
  result<float> forward(const inputs<float>& host, const options& opt) const {
    using namespace cuda_runner_detail;
    uploads u(stream);
    const inputs<float> in = u.all(host);
    download o({host.v.size(0), host.v.size(1), host.v.size(2), host.v.size(3)}), st(state_shape<Spec>(host, opt));
    linstate::forward<Spec>(cuda{stream}, in, outputs<float>{o.view(), st.view()}, Algorithm{}, Strategy{}, opt);
    result<float> r{o.get(stream), st.get(stream)};
    ok(cudaStreamSynchronize(stream), "forward");
    return r;
  }

  template <class Spec, class Algorithm, class Strategy>
  gradient_result<float> backward(const inputs<float>& host, const cotangents<float>& dc, const options& opt) const {
    using namespace cuda_runner_detail;
    uploads u(stream);
    const inputs<float> in = u.all(host);
    cotangents<float> d;
    d.o = u.up(dc.o), d.final_state = u.up(dc.final_state);
    auto like = [](const tensor_view<const float>& t) { return download(t.shape, !t.empty()); };
    download gq = like(host.q), gk = like(host.k), gv = like(host.v), gg = like(host.g), gb = like(host.beta);
    download sq = like(host.shared.q), sk = like(host.shared.k), sg = like(host.shared.g), sb = like(host.shared.beta);
    download gl = like(host.router_logits), gh(state_shape<Spec>(host, opt));  // dh0 always, as the CPU overload
    gradients<float> g{gq.view(), gk.view(), gv.view(), gg.view(), gb.view(),
                       {sq.view(), sk.view(), sg.view(), sb.view()}, gl.view(), gh.view()};
    linstate::backward<Spec>(cuda{stream}, in, d, g, Algorithm{}, Strategy{}, opt);
    gradient_result<float> r;
    r.q = gq.get(stream), r.k = gk.get(stream), r.v = gv.get(stream), r.g = gg.get(stream), r.beta = gb.get(stream);
    r.shared.q = sq.get(stream), r.shared.k = sk.get(stream), r.shared.g = sg.get(stream);
    r.shared.beta = sb.get(stream), r.router_logits = gl.get(stream), r.initial_state = gh.get(stream);
    ok(cudaStreamSynchronize(stream), "backward");
    return r;
  }
};

}  // namespace linstate::testing
