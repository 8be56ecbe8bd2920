// examples/custom/custom.cu — the same three user policies as custom.cpp (policies.hpp: a per-value-
// channel decay, Kimi Delta Attention, a sigmoid top-k router with a selection bias), run forward and
// backward on the CUDA backend, linstate::cuda{stream}, and checked by the very checks of
// check_custom.hpp: against the fp64 reference (which evaluates each policy's own math in double) and
// fp64 finite differences, mask and varlen, B > 1 and packed cu_seqlens, the router under recurrent
// and chunked<16>. Nothing of the library is edited for the policies: this file adds only a runner that
// copies the inputs to the device, calls linstate::forward / linstate::backward there and copies the
// results back. Prints one line per check; exits 1 on any mismatch, 77 (skip) without a GPU.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include <linstate/cuda.cuh>

#include "check_custom.hpp"

namespace {

namespace ls = linstate;

void ok(cudaError_t e) {
  if (e != cudaSuccess) throw ls::error(std::string("CUDA: ") + cudaGetErrorString(e));
}

//! Device copies of host inputs (cu_seqlens stays the host span, as the API takes it).
struct device_inputs {
  std::vector<ls::device_buffer<float>> bufs;
  ls::inputs<float> in;
  explicit device_inputs(const ls::inputs<float>& host) : in(host) {
    bufs.reserve(12);
    in.q = up(host.q), in.k = up(host.k), in.v = up(host.v), in.g = up(host.g), in.beta = up(host.beta);
    in.shared.q = up(host.shared.q), in.shared.k = up(host.shared.k), in.shared.g = up(host.shared.g);
    in.shared.beta = up(host.shared.beta), in.router_logits = up(host.router_logits);
    in.router_params = up(host.router_params), in.initial_state = up(host.initial_state);
  }
  ls::tensor_view<const float> up(const ls::tensor_view<const float>& t) {
    if (t.empty()) return {};
    bufs.emplace_back(static_cast<std::size_t>(t.numel()));
    bufs.back().upload(t.data);
    return bufs.back().view(t.shape);
  }
};

//! A device buffer shaped like `t` (or nothing when `t` is empty), and its download.
struct device_out {
  ls::shape_t shape{};
  ls::device_buffer<float> buf{};
  bool on = false;
  explicit device_out(const ls::shape_t& s, bool want = true) : shape(s), on(want && s.numel() >= 0) {
    if (on) buf = ls::device_buffer<float>(static_cast<std::size_t>(s.numel()));
  }
  ls::tensor_view<float> view() const { return on ? buf.view(shape) : ls::tensor_view<float>{}; }
  ls::tensor<float> get() const {
    if (!on) return {};
    ls::tensor<float> h(shape);
    buf.download(h.data());
    return h;
  }
};

//! The runner check_gradients takes: linstate::cuda on the default stream.
struct cuda_runner {
  template <class Spec, class Algorithm, class Strategy>
  ls::result<float> forward(const ls::inputs<float>& in, const ls::options& opt) const {
    device_inputs d(in);
    device_out o({in.v.size(0), in.v.size(1), in.v.size(2), in.v.size(3)});
    device_out st(ls::state_shape<Spec>(in, opt));
    ls::forward<Spec>(ls::cuda{}, d.in, ls::outputs<float>{o.view(), st.view()}, Algorithm{}, Strategy{}, opt);
    ok(cudaDeviceSynchronize());
    return {o.get(), st.get()};
  }
  template <class Spec, class Algorithm, class Strategy>
  ls::gradient_result<float> backward(const ls::inputs<float>& in, const ls::cotangents<float>& dc,
                                      const ls::options& opt) const {
    device_inputs d(in);
    std::vector<ls::device_buffer<float>> cbuf;
    cbuf.reserve(2);
    ls::cotangents<float> dd;
    auto up = [&](const ls::tensor_view<const float>& t) -> ls::tensor_view<const float> {
      if (t.empty()) return {};
      cbuf.emplace_back(static_cast<std::size_t>(t.numel()));
      cbuf.back().upload(t.data);
      return cbuf.back().view(t.shape);
    };
    dd.o = up(dc.o), dd.final_state = up(dc.final_state);
    auto like = [](const ls::tensor_view<const float>& t) { return device_out(t.shape, !t.empty()); };
    device_out gq = like(in.q), gk = like(in.k), gv = like(in.v), gg = like(in.g), gb = like(in.beta);
    device_out sq = like(in.shared.q), sk = like(in.shared.k), sg = like(in.shared.g), sb = like(in.shared.beta);
    device_out gl = like(in.router_logits), gh(ls::state_shape<Spec>(in, opt));
    ls::gradients<float> g{gq.view(), gk.view(), gv.view(), gg.view(), gb.view(),
                           {sq.view(), sk.view(), sg.view(), sb.view()}, gl.view(), gh.view()};
    ls::backward<Spec>(ls::cuda{}, d.in, dd, g, Algorithm{}, Strategy{}, opt);
    ok(cudaDeviceSynchronize());
    ls::gradient_result<float> r;
    r.q = gq.get(), r.k = gk.get(), r.v = gv.get(), r.g = gg.get(), r.beta = gb.get();
    r.shared.q = sq.get(), r.shared.k = sk.get(), r.shared.g = sg.get(), r.shared.beta = sb.get();
    r.router_logits = gl.get(), r.initial_state = gh.get();
    return r;
  }
};

}  // namespace

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::puts("no CUDA device: skipped");
    return 77;
  }
  const bool verbose = argc > 1 && std::strcmp(argv[1], "-v") == 0;
  const cuda_runner gpu{};
  int checks = 0, failures = 0;
  auto report = [&](const custom_check::outcome& o) {
    std::fputs(o.log.c_str(), stdout);
    checks += o.checks, failures += o.failures;
  };
  try {
    report(custom_check::check_per_value_decay(gpu, verbose));
    report(custom_check::check_kda(gpu, verbose));
    report(custom_check::check_sigmoid_router(gpu, verbose));
    report(custom_check::check_router_with_kda(gpu, verbose));
  } catch (const std::exception& e) {
    std::printf("FAIL: exception: %s\n", e.what());
    return 1;
  }
  std::printf("%d checks, %d failed (linstate::cuda)\n", checks, failures);
  return failures == 0 ? 0 : 1;
}
