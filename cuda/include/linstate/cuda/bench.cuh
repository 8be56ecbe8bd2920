// linstate/cuda/bench.cuh — <linstate/bench.hpp> on linstate::cuda: decode, prefill and training steps
// of any variant timed with CUDA events on the backend's stream, inputs drawn on the device, and the
// GPU's roofline (copy bandwidth, fp32 FMA and bf16 tensor-core peaks) measured by small kernels.
//
// \code
//   #include <linstate/cuda/bench.cuh>                    // from a .cu translation unit
//   cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
//   namespace lb = linstate::bench;
//   auto r = lb::decode<my_variant>(linstate::cuda{s}, {.B = 16, .H = 8, .K = 128, .V = 128, .dtype = lb::scalar_type::bf16});
//   auto g = lb::decode<my_variant>(linstate::cuda{s}, {.B = 16, .dtype = lb::scalar_type::bf16, .graph = true});
//   auto p = lb::prefill<my_variant>(linstate::cuda{s}, {.T = 32768, .dtype = lb::scalar_type::bf16, .cold_cache = true},
//                                    linstate::chunked<64>{}, linstate::varlen{});
//   std::cout << r << g << p;
// \endcode
//
// Method (what differs from the CPU's, at the top of <linstate/bench.hpp>):
// * Timing: a pair of CUDA events around each call on `be.stream`. prefill / train: the calls are
//   enqueued back to back and the host synchronises once after the last (triton's do_bench), so a call's
//   host work may overlap the previous call. decode: the host waits for each call (and for the flush
//   before it), so a step's interval holds its host work too: a latency. With cold_cache the L2 is
//   flushed before every timed call by a 256 MiB cudaMemsetAsync on the stream.
// * decode, options.graph: R steps, step r on its own state and inputs, captured into one CUDA graph;
//   R = clamp(⌈4 × L2 / state bytes of a step⌉, 4, 256) (at most 8 GiB of state sets), so no step finds
//   its state in L2; 2 untimed replays, then `reps` (0: 30) timed replays; the time is a replay's / R.
// * decode without graph also reports `host`: the host's time to enqueue one call, the calls back to
//   back (the stream synchronised every 64 calls), as many calls as were timed.
// * Inputs are drawn on the device by a counter-based generator (splitmix64, Box–Muller) with the
//   distributions of the CPU's: q, k, v, ∂L/∂o ~ N(0,1); g = logsigmoid(N(0,1)) / 16; β = σ(N(0,1));
//   router logits ~ N(0,1); router_params ~ U(±0.25); states ~ N(0, 0.1²); keys of a policy with β and
//   without l2 normalisation scaled by K^-1/2 (unit norm on average). Each tensor of a set starts 256-byte
//   aligned.
// * FLOP/s fraction: of the bf16 tensor-core peak for bf16 prefill / train of a family::diagonal policy
//   with an algorithm other than recurrent (the kernels that use tensor cores), else of the fp32 FMA peak.
// * Roofline (cuda_roofline(be), once per process and device): copy = a device-to-device cudaMemcpyAsync
//   of min(1 GiB, free memory / 4), bytes read + written, median of 20; FMA = 8 independent fmaf chains per
//   thread, 8 blocks of 256 threads per multiprocessor; tensor = wmma 16×16×16 bf16 → fp32 (the
//   instruction linstate's kernels use, mma.sync; Hopper's wgmma peak is higher), 4 independent
//   accumulators per warp, 4 blocks of 8 warps per multiprocessor; FMA and tensor: median of 5.
#pragma once

#if !defined(__CUDACC__)
#error "linstate/cuda/bench.cuh is for CUDA translation units (.cu, compiled by nvcc); CPU code includes <linstate/bench.hpp>"
#endif

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include <linstate/bench.hpp>
#include <linstate/cuda.cuh>

namespace linstate::bench {

//! Building blocks of the CUDA measurements (the project's bench_cuda uses them too).
namespace gpu {

inline void check(cudaError_t e, const char* what) { linstate::cuda_detail::check(e, what, "linstate::bench (cuda)"); }

//! Distributions of fill(): N(0,1)·scale, logsigmoid(N(0,1))/16, σ(N(0,1)), U(−1,1)·scale.
enum class dist : int { normal = 0, log_gate = 1, unit = 2, uniform = 3 };

__device__ __forceinline__ std::uint64_t mix64(std::uint64_t z) {  // splitmix64's finaliser
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

//! out[i] = a draw of `d` for counter (seed, i): Box–Muller on two 24-bit uniforms of one hash.
template <class Out>
__global__ void fill_kernel(Out* out, std::size_t n, std::uint64_t seed, dist d, float scale) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const std::uint64_t r = mix64(seed * 0x632be59bd9b4e019ull ^ mix64(i));
    const float u1 = (static_cast<float>(r >> 40) + 1.0f) * 0x1p-24f;  // (0, 1]
    const float u2 = static_cast<float>(r & 0xffffffu) * 0x1p-24f;     // [0, 1)
    float z = sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
    if (d == dist::log_gate) z = (fminf(z, 0.0f) - log1pf(expf(-fabsf(z)))) / 16.0f;
    if (d == dist::unit) z = 1.0f / (1.0f + expf(-z));
    if (d == dist::uniform) z = 2.0f * u2 - 1.0f;
    z *= scale;
    if constexpr (std::is_same_v<Out, float>) out[i] = z;
    else out[i] = __float2bfloat16_rn(z);
  }
}

//! Fills n elements of device memory `p` (float or Eigen::bfloat16) on stream `s`.
template <class T>
void fill(T* p, std::size_t n, std::uint64_t seed, dist d, cudaStream_t s, float scale = 1.0f) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, Eigen::bfloat16>, "linstate::bench::gpu::fill: float or bfloat16");
  if (n == 0) return;
  const unsigned blocks = static_cast<unsigned>(std::min<std::size_t>((n + 255) / 256, 132 * 32));
  if constexpr (std::is_same_v<T, float>) fill_kernel<float><<<blocks, 256, 0, s>>>(p, n, seed, d, scale);
  else fill_kernel<__nv_bfloat16><<<blocks, 256, 0, s>>>(reinterpret_cast<__nv_bfloat16*>(p), n, seed, d, scale);
  check(cudaGetLastError(), "fill_kernel");
}

inline constexpr std::size_t flush_bytes = std::size_t{256} << 20;

//! \brief CUDA-event timing of calls on one stream (the method at the top of this header).
class timer {
 public:
  //! `flush`: allocate the 256 MiB L2 flush buffer and write it before every timed call.
  timer(cudaStream_t stream, bool flush) : stream_(stream) {
    if (flush) check(cudaMalloc(&flush_, flush_bytes), "cudaMalloc(L2 flush buffer)");
  }
  ~timer() {
    if (flush_) (void)cudaFree(flush_);
    for (cudaEvent_t e : events_) (void)cudaEventDestroy(e);
  }
  timer(const timer&) = delete;
  timer& operator=(const timer&) = delete;

  //! n calls of f, each between its own pair of events, seconds. `latency`: the host waits for the
  //! flush before each call and for the call before the next one.
  template <class F>
  std::vector<double> time_calls(F&& f, int n, bool latency) {
    while (events_.size() < 2 * static_cast<std::size_t>(n)) {
      cudaEvent_t e{};
      check(cudaEventCreate(&e), "cudaEventCreate");
      events_.push_back(e);
    }
    for (int i = 0; i < n; ++i) {
      if (flush_) check(cudaMemsetAsync(flush_, i & 0xff, flush_bytes, stream_), "cudaMemsetAsync(L2 flush)");
      if (latency) check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize(flush)");
      check(cudaEventRecord(events_[2 * i], stream_), "cudaEventRecord");
      f();
      check(cudaEventRecord(events_[2 * i + 1], stream_), "cudaEventRecord");
      if (latency) check(cudaEventSynchronize(events_[2 * i + 1]), "cudaEventSynchronize");
    }
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    std::vector<double> s(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      float ms = 0;
      check(cudaEventElapsedTime(&ms, events_[2 * i], events_[2 * i + 1]), "cudaEventElapsedTime");
      s[static_cast<std::size_t>(i)] = 1e-3 * static_cast<double>(ms);
    }
    return s;
  }

  //! First call, estimate, warm-up and timed calls, as options `o` say.
  template <class F>
  detail::measured measure(F&& f, const options& o, bool latency) {
    f();
    check(cudaStreamSynchronize(stream_), "first call");
    const double est = std::max(time_calls(f, 1, latency)[0], 1e-7);
    detail::measured m;
    m.warmup = o.warmup == 0 ? 0 : std::min(o.warmup, std::max(1, static_cast<int>(std::ceil(o.warmup_ms * 1e-3 / est))));
    for (int i = 0; i < m.warmup; ++i) f();
    const int n = o.reps > 0 ? o.reps
                             : std::clamp(static_cast<int>(std::min(1e9, std::ceil(o.budget_ms * 1e-3 / est))), o.min_reps,
                                          o.max_reps);
    m.samples = time_calls(f, n, latency);
    m.time = summarize(m.samples);
    return m;
  }

  //! The host's time to enqueue each of n calls back to back (the stream synchronised every 64).
  template <class F>
  stats time_host(F&& f, int n) {
    using clock = std::chrono::steady_clock;
    std::vector<double> s;
    for (int i = 0; i < n; ++i) {
      const auto t0 = clock::now();
      f();
      s.push_back(std::chrono::duration<double>(clock::now() - t0).count());
      if (i % 64 == 63) check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize(host enqueue)");
    }
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize(host enqueue)");
    return summarize(std::move(s));
  }

  //! `steps` calls of step(r), r = 0..steps−1, captured into one CUDA graph; 2 untimed replays, then
  //! `replays` timed ones. Returns the per-step time of each replay (seconds).
  template <class Step>
  std::vector<double> time_graph(Step&& step, int steps, int replays) {
    std::string note;
    cudaGraph_t graph{};
    check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    try {
      for (int r = 0; r < steps; ++r) step(r);
    } catch (const std::exception& e) {
      note = e.what();
    }
    const cudaError_t ec = cudaStreamEndCapture(stream_, &graph);
    if (note.empty() && ec != cudaSuccess) note = std::string("cudaStreamEndCapture: ") + cudaGetErrorString(ec);
    (void)cudaGetLastError();
    if (!note.empty()) {
      if (graph) (void)cudaGraphDestroy(graph);
      throw error("linstate::bench (cuda): graph capture failed: " + note);
    }
    cudaGraphExec_t exec{};
    check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
    cudaEvent_t e0{}, e1{};
    check(cudaEventCreate(&e0), "cudaEventCreate"), check(cudaEventCreate(&e1), "cudaEventCreate");
    for (int i = 0; i < 2; ++i) check(cudaGraphLaunch(exec, stream_), "cudaGraphLaunch");
    check(cudaStreamSynchronize(stream_), "graph warm-up");
    std::vector<double> s;
    for (int i = 0; i < replays; ++i) {
      check(cudaEventRecord(e0, stream_), "cudaEventRecord");
      check(cudaGraphLaunch(exec, stream_), "cudaGraphLaunch");
      check(cudaEventRecord(e1, stream_), "cudaEventRecord");
      check(cudaEventSynchronize(e1), "cudaEventSynchronize");
      float ms = 0;
      check(cudaEventElapsedTime(&ms, e0, e1), "cudaEventElapsedTime");
      s.push_back(1e-3 * static_cast<double>(ms) / steps);
    }
    (void)cudaEventDestroy(e0), (void)cudaEventDestroy(e1);
    check(cudaGraphExecDestroy(exec), "cudaGraphExecDestroy");
    check(cudaGraphDestroy(graph), "cudaGraphDestroy");
    return s;
  }

 private:
  cudaStream_t stream_{};
  void* flush_ = nullptr;
  std::vector<cudaEvent_t> events_;
};

// --- roofline kernels ----------------------------------------------------------------------------------

//! Chains independent fmaf chains per thread; writes one value per thread (so nothing is removed).
template <int Chains>
__global__ void fma_peak_kernel(float* out, int iters, float a, float b) {
  float x[Chains];
#pragma unroll
  for (int j = 0; j < Chains; ++j) x[j] = 1e-3f * static_cast<float>(threadIdx.x + j);
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int j = 0; j < Chains; ++j) x[j] = fmaf(x[j], a, b);
  }
  float s = 0;
#pragma unroll
  for (int j = 0; j < Chains; ++j) s += x[j];
  out[static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x] = s;
}

//! Chains independent wmma 16×16×16 bf16 → fp32 accumulators per warp (sm_80 and newer; else nothing).
template <int Chains>
__global__ void mma_peak_kernel(float* out, int iters) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  namespace w = nvcuda::wmma;
  w::fragment<w::matrix_a, 16, 16, 16, __nv_bfloat16, w::row_major> a;
  w::fragment<w::matrix_b, 16, 16, 16, __nv_bfloat16, w::col_major> b;
  w::fragment<w::accumulator, 16, 16, 16, float> c[Chains];
  w::fill_fragment(a, __float2bfloat16(1e-3f));
  w::fill_fragment(b, __float2bfloat16(1e-3f));
#pragma unroll
  for (int j = 0; j < Chains; ++j) w::fill_fragment(c[j], 0.0f);
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int j = 0; j < Chains; ++j) w::mma_sync(c[j], a, b, c[j]);
  }
  float s = 0;
#pragma unroll
  for (int j = 0; j < Chains; ++j)
    for (int e = 0; e < c[j].num_elements; ++e) s += c[j].x[e];
  out[static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x] = s;
#else
  (void)iters;
  out[static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x] = 0.0f;
#endif
}

//! Measures the roofline of the current device on `stream` (see the top of this header).
inline roofline measure_roofline(cudaStream_t stream) {
  roofline rf;
  rf.backend = "cuda";
  int dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties");
  rf.device = prop.name;
  timer tm(stream, false);
  // copy bandwidth
  std::size_t free_b = 0, total_b = 0;
  check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
  const std::size_t n = std::max<std::size_t>(std::size_t{1} << 20, std::min<std::size_t>(std::size_t{1} << 30, free_b / 4) & ~std::size_t{4095});
  {
    device_buffer<char> a(n), b(n);
    check(cudaMemsetAsync(a.data(), 1, n, stream), "cudaMemsetAsync");
    auto copy = [&] { check(cudaMemcpyAsync(b.data(), a.data(), n, cudaMemcpyDeviceToDevice, stream), "cudaMemcpyAsync"); };
    copy();
    rf.copy_time = summarize(tm.time_calls(copy, 20, false));
    rf.copy_bytes = 2.0 * static_cast<double>(n);
    rf.copy_bytes_per_s = rf.copy_bytes / rf.copy_time.median;
  }
  const int sms = prop.multiProcessorCount;
  // fp32 FMA peak
  {
    constexpr int chains = 8, threads = 256, iters = 1 << 15;
    const int blocks = sms * 8;
    device_buffer<float> out(static_cast<std::size_t>(blocks) * threads);
    auto run = [&] {
      fma_peak_kernel<chains><<<blocks, threads, 0, stream>>>(out.data(), iters, 0.9999999f, 1e-7f);
      check(cudaGetLastError(), "fma_peak_kernel");
    };
    run();
    const double flops = 2.0 * chains * static_cast<double>(iters) * blocks * threads;
    rf.fma_flop_per_s = flops / summarize(tm.time_calls(run, 5, false)).median;
  }
  // bf16 tensor-core peak (wmma)
  if (prop.major >= 8) {
    constexpr int chains = 4, threads = 256, iters = 1 << 14;
    const int blocks = sms * 4;
    device_buffer<float> out(static_cast<std::size_t>(blocks) * threads);
    auto run = [&] {
      mma_peak_kernel<chains><<<blocks, threads, 0, stream>>>(out.data(), iters);
      check(cudaGetLastError(), "mma_peak_kernel");
    };
    run();
    const double flops = 2.0 * 16 * 16 * 16 * chains * static_cast<double>(iters) * blocks * (threads / 32);
    rf.tensor_flop_per_s = flops / summarize(tm.time_calls(run, 5, false)).median;
  }
  rf.method = "copy: cudaMemcpyAsync device to device of " + detail::bytes_text(static_cast<double>(n)) +
              ", bytes read + written, median of 20; FMA: 8 fmaf chains x " + std::to_string(sms * 8 * 256) +
              " threads, median of 5; tensor: wmma 16x16x16 bf16->fp32, 4 accumulators x " + std::to_string(sms * 4 * 8) +
              " warps, median of 5";
  return rf;
}

// --- device inputs ----------------------------------------------------------------------------------------

//! `sets` copies of one tensor in one device allocation, each 256-byte aligned.
template <class T>
struct slot {
  device_buffer<T> buf{};
  shape_t shape{};
  index_t stride = 0;
  void make(const shape_t& s, int sets) {
    shape = s;
    const index_t align = 256 / static_cast<index_t>(sizeof(T));
    stride = (s.numel() + align - 1) / align * align;
    buf = device_buffer<T>(static_cast<std::size_t>(stride * sets));
  }
  void make(const detail::input_shape& s, int sets) {
    if (s.given) make(s.shape, sets);
  }
  bool given() const { return !buf.empty(); }
  T* data(int set = 0) const { return buf.data() + stride * set; }
  std::size_t numel_all() const { return buf.size(); }
  tensor_view<T> view(int set = 0) const { return given() ? tensor_view<T>(data(set), shape) : tensor_view<T>{}; }
  tensor_view<const T> cview(int set = 0) const { return view(set); }
};

//! \brief Device inputs, state, outputs and gradients of variant `Spec` for one measurement, in `sets`
//! copies (decode graphs: one per captured step); the calls the benchmark times.
template <class Spec, class Scalar>
class device_workload {
 public:
  detail::resolved sizes{};
  linstate::options call{};
  int sets = 1;
  slot<Scalar> q, k, v, g, beta, sq, sk, sg, sbeta, logits, o, d_o;
  slot<Scalar> dq, dk, dv, dg, dbeta, dsq, dsk, dsg, dsbeta, dlogits;
  slot<float> params, state, h0, ht, dh0;
  bool keep_states = true;                   //!< train: options.saved_states
  mutable linstate::saved_states saved;      //!< train: what the forward keeps for the backward

  device_workload(const detail::resolved& r, const options& opt, int n_sets, cudaStream_t s)
      : sizes(r), call(r.call), sets(n_sets), keep_states(opt.saved_states) {
    using D = typename Spec::decay;
    const detail::input_shapes in = detail::shapes_of<Spec>(r);
    q.make(in.q, sets), k.make(in.k, sets), v.make(in.v, sets), g.make(in.g, sets), beta.make(in.beta, sets);
    sq.make(in.shared_q, sets), sk.make(in.shared_k, sets), sg.make(in.shared_g, sets), sbeta.make(in.shared_beta, sets);
    logits.make(in.router_logits, sets), params.make(in.router_params, 1);
    o.make(shape_t{r.B, r.T, r.HV, r.V}, sets);
    const shape_t st{r.S, r.P, r.HV, r.K, r.V};
    const bool decode = r.mode == mode::decode, train = r.mode == mode::train;
    if (decode) state.make(st, sets);
    if (!decode && opt.initial_state) h0.make(st, 1);
    if (!decode && opt.final_state) ht.make(st, 1);
    if (train) {
      d_o.make(o.shape, 1);
      dq.make(in.q, 1), dk.make(in.k, 1), dv.make(in.v, 1), dg.make(in.g, 1), dbeta.make(in.beta, 1);
      dsq.make(in.shared_q, 1), dsk.make(in.shared_k, 1), dsg.make(in.shared_g, 1), dsbeta.make(in.shared_beta, 1);
      dlogits.make(in.router_logits, 1);
      if (opt.initial_state) dh0.make(st, 1);
    }
    std::uint64_t seed = opt.seed * 0x9E3779B97F4A7C15ull;
    auto draw = [&](auto& sl, dist d, float scale = 1.0f) {
      if (sl.given()) fill(sl.data(), sl.numel_all(), ++seed, d, s, scale);
    };
    const float key_scale = D::uses_beta && !D::l2norm_qk ? 1.0f / std::sqrt(static_cast<float>(r.K)) : 1.0f;
    draw(q, dist::normal), draw(k, dist::normal, key_scale), draw(v, dist::normal), draw(g, dist::log_gate);
    draw(beta, dist::unit), draw(sq, dist::normal), draw(sk, dist::normal, key_scale), draw(sg, dist::log_gate);
    draw(sbeta, dist::unit), draw(logits, dist::normal), draw(params, dist::uniform, 0.25f);
    draw(state, dist::normal, 0.1f), draw(h0, dist::normal, 0.1f), draw(d_o, dist::normal);
    check(cudaStreamSynchronize(s), "drawing the inputs");
  }

  inputs<Scalar> in(int set = 0) const {
    inputs<Scalar> i;
    i.q = q.cview(set), i.k = k.cview(set), i.v = v.cview(set), i.g = g.cview(set), i.beta = beta.cview(set);
    i.shared = {sq.cview(set), sk.cview(set), sg.cview(set), sbeta.cview(set)};
    i.router_logits = logits.cview(set), i.router_params = params.cview(0), i.initial_state = h0.cview(0);
    return i;
  }
  gradients<Scalar> grads() const {
    return {dq.view(), dk.view(), dv.view(), dg.view(), dbeta.view(), {dsq.view(), dsk.view(), dsg.view(), dsbeta.view()},
            dlogits.view(), dh0.view()};
  }

  template <class Algorithm, class Strategy>
  void decode(const cuda& be, int set, Algorithm a, Strategy s) const {
    linstate::forward_in_place<Spec>(be, in(set), state.view(set), o.view(set), a, s, call);
  }
  template <class Algorithm, class Strategy>
  void prefill(const cuda& be, Algorithm a, Strategy s) const {
    linstate::forward<Spec>(be, in(), outputs<Scalar>{o.view(), ht.view()}, a, s, call);
  }
  template <class Algorithm, class Strategy>
  void train(const cuda& be, Algorithm a, Strategy s) const {
    const inputs<Scalar> i = in();
    const cotangents<Scalar> d{d_o.cview(), tensor_view<const float>{}};
    if (keep_states) {  // the calls that keep: saved_states.hpp (bf16 chunked, GLA family); the others recompute
      linstate::forward<Spec>(be, i, outputs<Scalar>{o.view(), ht.view()}, saved, a, s, call);
      linstate::backward<Spec>(be, i, d, grads(), saved, a, s, call);
    } else {
      linstate::forward<Spec>(be, i, outputs<Scalar>{o.view(), ht.view()}, a, s, call);
      linstate::backward<Spec>(be, i, d, grads(), a, s, call);
    }
  }
};

}  // namespace gpu

//! \brief The GPU's copy bandwidth, fp32 FMA peak and bf16 tensor-core peak, measured on `be.stream`
//! the first time per device and remembered for the process (thread-safe).
inline roofline cuda_roofline(const linstate::cuda& be = {}) {
  int dev = 0;
  gpu::check(cudaGetDevice(&dev), "cudaGetDevice");
  static std::mutex m;
  static std::map<int, roofline> known;
  const std::lock_guard<std::mutex> lock(m);
  auto it = known.find(dev);
  if (it == known.end()) it = known.emplace(dev, gpu::measure_roofline(static_cast<cudaStream_t>(be.stream))).first;
  return it->second;
}

namespace detail {

//! The timed call (decode: on state and input set `set`); the only part that depends on the
//! algorithm and the strategy.
template <class Spec, mode M, class Scalar, class Algorithm, class Strategy>
void cuda_call(const gpu::device_workload<Spec, Scalar>& w, const linstate::cuda& be, int set) {
  if constexpr (M == mode::decode) w.decode(be, set, Algorithm{}, Strategy{});
  else if constexpr (M == mode::prefill) w.prefill(be, Algorithm{}, Strategy{});
  else w.train(be, Algorithm{}, Strategy{});
}

template <class Spec, mode M, class Scalar>
result run_cuda_typed(const linstate::cuda& be, const options& o, const char* api,
                      void (*call_fn)(const gpu::device_workload<Spec, Scalar>&, const linstate::cuda&, int),
                      const std::string& algorithm, const char* strategy, bool tensor_cores) {
  const resolved rs = resolve<Spec>(M, o, api, /*cuda_backend=*/true);
  if (o.threads != 0) bench_fail(api, "options.threads = " + std::to_string(o.threads) + ": threads are for the CPU backend");
  const cudaStream_t stream = static_cast<cudaStream_t>(be.stream);
  int dev = 0, l2 = 0;
  gpu::check(cudaGetDevice(&dev), "cudaGetDevice");
  cudaDeviceProp prop{};
  gpu::check(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties");
  gpu::check(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev), "cudaDeviceGetAttribute(L2)");

  result r = describe_run<Spec>(rs, o, "cuda", algorithm, strategy);
  r.device = prop.name;
  int sets = 1;
  if (M == mode::decode && o.graph) {
    const double l2b = l2 > 0 ? l2 : 60.0 * (1 << 20);
    const double set_bytes = static_cast<double>(rs.S * rs.P * rs.HV * rs.K * rs.V) * 4;
    index_t R = std::clamp(static_cast<index_t>(std::ceil(4 * l2b / std::max(r.work.state_bytes, 1.0))), index_t{4}, index_t{256});
    R = std::max<index_t>(2, std::min<index_t>(R, static_cast<index_t>(8.0 * (1ull << 30) / set_bytes)));
    sets = static_cast<int>(R);
  }
  const gpu::device_workload<Spec, Scalar> w(rs, o, sets, stream);
  gpu::timer tm(stream, o.cold_cache && !o.graph);
  auto f = [&] { call_fn(w, be, 0); };
  if (M == mode::decode && o.graph) {
    // One eager call first: the backend creates its memory pool and scratch on a stream's first
    // call, which is not allowed while the stream is being captured.
    call_fn(w, be, 0);
    gpu::check(cudaStreamSynchronize(stream), "decode warm-up before capture");
    r.samples = tm.time_graph([&](int s) { call_fn(w, be, s); }, sets, o.reps > 0 ? o.reps : 30);
    r.time = summarize(r.samples), r.graph_steps = sets, r.warmup = 2;
  } else {
    measured m = tm.measure(f, o, /*latency=*/M == mode::decode);
    r.time = m.time, r.samples = std::move(m.samples), r.warmup = m.warmup;
    if (M == mode::decode) r.host = tm.time_host(f, r.time.n);
  }
  if (tensor_cores) r.peak_kind = "tensor_bf16";
  if (o.roofline) r.machine = cuda_roofline(be);
  else r.machine.backend = "cuda", r.machine.device = r.device;
  finish(r);
  return r;
}

template <class Spec, mode M, class Scalar, class DefaultAlgorithm, class... Tags>
result run_cuda(const linstate::cuda& be, const options& o, const char* api) {
  using A = typename tags_of<DefaultAlgorithm, Tags...>::algorithm;
  using S = typename tags_of<DefaultAlgorithm, Tags...>::strategy;
  check_tags<A, S>();
  return with_dtype<Scalar>(o, api, [&](auto type, const options& oo) {
    using T = typename decltype(type)::type;
    // the kernels that use tensor cores: bf16 prefill / train of the diagonal family, chunk-parallel
    constexpr bool tc = M != mode::decode && std::is_same_v<T, Eigen::bfloat16> &&
                        std::is_same_v<typename Spec::decay::family, family::diagonal> && !std::is_same_v<A, recurrent>;
    return run_cuda_typed<Spec, M, T>(be, oo, api, &cuda_call<Spec, M, T, A, S>, algorithm_name<A>(), S::name, tc);
  });
}

}  // namespace detail

//! \brief Times decode steps of `Spec` on the GPU (forward_in_place, algorithm recurrent{} unless given;
//! options.graph: per step inside a CUDA graph). Arguments as for the CPU overload, element type too.
template <class Spec, class Scalar = runtime_dtype, class... Args>
result decode(const linstate::cuda& be, const options& o = {}, Args&&...) {
  return detail::run_cuda<Spec, mode::decode, Scalar, recurrent, Args...>(be, o, "linstate::bench::decode (cuda)");
}
//! \brief Times a forward pass of `Spec` over T tokens on the GPU (algorithm automatic{} unless given).
template <class Spec, class Scalar = runtime_dtype, class... Args>
result prefill(const linstate::cuda& be, const options& o = {}, Args&&...) {
  return detail::run_cuda<Spec, mode::prefill, Scalar, automatic, Args...>(be, o, "linstate::bench::prefill (cuda)");
}
//! \brief Times a forward and a backward pass of `Spec` over T tokens on the GPU.
template <class Spec, class Scalar = runtime_dtype, class... Args>
result train(const linstate::cuda& be, const options& o = {}, Args&&...) {
  return detail::run_cuda<Spec, mode::train, Scalar, automatic, Args...>(be, o, "linstate::bench::train (cuda)");
}

}  // namespace linstate::bench
