// cuda/bench/bench_layers_cuda.cu — the GPU token mixer's training step (forward + backward,
// <linstate/layers/cuda_token_mixer.cuh>) timed with CUDA events, and the kernel part of it
// (linstate::forward + linstate::backward on the layer's own kernel inputs) timed the same way, so
// that the projections' and elementwise kernels' share is the difference. Sizes as docs/layers.md's
// CPU figures: B = 32, T = 256, D = 64, H = 2, K = V = 32 (or from the command line: B T).
//   bench_layers_cuda [B T]       prints one row per variant: median, min and max of 30 steps in ms
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <linstate/layers/cuda_token_mixer.cuh>
#include <string>
#include <vector>

namespace {

namespace ly = linstate::layers;
namespace pt = linstate::partition;
namespace rt = linstate::router;
using linstate::index_t;

struct gla : linstate::spec<> {};
struct sse_n4k1s : gla {
  using partition = pt::routed<4, pt::shared>;
  using router = rt::top_k<1>;
};
struct gdn : gla { using decay = linstate::decay::gated_delta_rule<true>; };

void ok(cudaError_t e) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "CUDA: %s\n", cudaGetErrorString(e));
    std::exit(1);
  }
}

struct stats {
  double median = 0, lo = 0, hi = 0;
};
template <class F>
stats time_steps(cudaStream_t s, int reps, F&& f) {
  cudaEvent_t a, b;
  ok(cudaEventCreate(&a)), ok(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) f();  // warm-up: workspaces, cuBLAS heuristics, the scratch pool
  ok(cudaStreamSynchronize(s));
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    ok(cudaEventRecord(a, s));
    f();
    ok(cudaEventRecord(b, s));
    ok(cudaEventSynchronize(b));
    float t = 0;
    ok(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  ok(cudaEventDestroy(a)), ok(cudaEventDestroy(b));
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms.front(), ms.back()};
}

template <class V>
void run(const char* name, index_t B, index_t T, cudaStream_t s) {
  ly::mixer_config c{.d_model = 64, .num_heads = 2, .head_k = 32, .head_v = 32, .seed = 1};
  if constexpr (V::decay::uses_beta) c.k_map = ly::feature_map::silu;
  ly::cuda_token_mixer<V> mix(c, s);
  const index_t D = c.d_model, n = B * T * D;
  std::vector<float> h(static_cast<std::size_t>(n));
  ly::init_rng g(5, "x");
  for (auto& e : h) e = static_cast<float>(g.normal());
  linstate::device_buffer<float> x(n), y(n), dy(n), dx(n), aux(1);
  x.upload(h.data(), s), dy.upload(h.data(), s);
  const linstate::shape_t xs{B, T, D};
  auto step = [&] {
    mix.forward(x.view(xs), y.view(xs), aux.data());
    mix.backward(dy.view(xs), dx.view(xs));
  };
  const stats layer = time_steps(s, 30, step);
  // the kernel part alone, on the last forward's inputs (same algorithm: automatic)
  const linstate::inputs<float>& in = mix.kernel_inputs();
  const index_t HV = c.num_heads * c.head_v;
  linstate::device_buffer<float> o(B * T * HV), dO(B * T * HV), gq(B * T * 64), gk(B * T * 64), gv(B * T * HV), gg(B * T * 64),
      gb(B * T * 2), sq(B * T * 64), sk(B * T * 64), sg(B * T * 64), sb(B * T * 2), gl(B * T * 4);
  ok(cudaMemsetAsync(dO.data(), 0, dO.size() * sizeof(float), s));
  linstate::gradients<float> gr;
  gr.q = gq.view(in.q.shape), gr.k = gk.view(in.k.shape), gr.v = gv.view(in.v.shape);
  if (in.g.data) gr.g = gg.view(in.g.shape);
  if (in.beta.data) gr.beta = gb.view(in.beta.shape);
  if (in.shared.q.data) {
    gr.shared.q = sq.view(in.shared.q.shape), gr.shared.k = sk.view(in.shared.k.shape);
    if (in.shared.g.data) gr.shared.g = sg.view(in.shared.g.shape);
    if (in.shared.beta.data) gr.shared.beta = sb.view(in.shared.beta.shape);
  }
  if (in.router_logits.data) gr.router_logits = gl.view(in.router_logits.shape);
  const linstate::shape_t os{B, T, c.num_heads, c.head_v};
  auto kernel = [&] {
    linstate::forward<V>(linstate::cuda{s}, in, linstate::outputs<float>{o.view(os), {}}, linstate::automatic{}, linstate::varlen{},
                         c.kernel);
    linstate::backward<V>(linstate::cuda{s}, in, linstate::cotangents<float>{.o = dO.view(os)}, gr, linstate::automatic{},
                          linstate::varlen{}, c.kernel);
  };
  const stats kern = time_steps(s, 30, kernel);
  const double tok = double(B * T);
  std::printf("%-10s B=%lld T=%lld  step median %.3f ms (min %.3f, max %.3f)  %.2f M tokens/s   kernel part median %.3f ms (%.0f %%)\n",
              name, static_cast<long long>(B), static_cast<long long>(T), layer.median, layer.lo, layer.hi,
              tok / layer.median / 1e3, kern.median, 100.0 * kern.median / layer.median);
}

}  // namespace

int main(int argc, char** argv) {
  const index_t B = argc > 2 ? std::atoll(argv[1]) : 32, T = argc > 2 ? std::atoll(argv[2]) : 256;
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("SKIP: no usable CUDA device\n");
    return 77;
  }
  cudaStream_t s;
  ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  run<gla>("GLA", B, T, s);
  run<sse_n4k1s>("SSE-n4k1s", B, T, s);
  run<gdn>("GDN", B, T, s);
  ok(cudaStreamDestroy(s));
  return 0;
}
