// tests/layers/test_small_layers.cpp — linear, rms_norm, swiglu, embedding (+ its tied head): every
// parameter gradient and dx against fp64 finite differences; bad input; the parameter views.
#include <doctest/doctest.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <linstate/layers/embedding.hpp>  // the small layers only: this file does not compile the kernels
#include <linstate/layers/linear.hpp>
#include <linstate/layers/rms_norm.hpp>
#include <linstate/layers/swiglu.hpp>
#include <random>
#include <vector>

#include "layer_check.hpp"

#ifndef LINSTATE_TEST_SANITIZED  // ASan has its own operator new; the allocation checks run in the release build
// GCC 12 sees the replaced operator delete inlined into std::allocator and warns that free() gets
// memory from "operator new": a false positive, both are malloc/free here.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
// Every operator new of the test_layers program is counted (std::vector, std::string, …; Eigen's
// own aligned buffers come from malloc and are not): the no-allocation checks below read the count.
std::atomic<long> layer_test_allocs{0};
void* operator new(std::size_t n) {
  layer_test_allocs.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
// malloc itself too (Eigen's dynamic matrices and GEMM blocking buffers, the OpenMP runtime), with
// glibc: its own entry point behind a counter. Every operator new above is a malloc as well.
std::atomic<long> layer_test_mallocs{0};
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__)
#define LINSTATE_LAYERS_COUNT_MALLOC 1
extern "C" void* __libc_malloc(std::size_t);
extern "C" void* malloc(std::size_t n) noexcept {
  layer_test_mallocs.fetch_add(1, std::memory_order_relaxed);
  return __libc_malloc(n);
}
#else
#define LINSTATE_LAYERS_COUNT_MALLOC 0
#endif
#endif

namespace {
namespace ly = linstate::layers;
using linstate::index_t;
using linstate::tensor;

//! a few parameters of every layer away from their initial values (so that e.g. w ≠ 1 matters)
template <class Layer>
void randomise(Layer& L, double sd) {
  std::vector<ly::parameter_ref<double>> ps;
  L.collect(ps);
  ly::init_rng g(5, "randomise");
  for (auto& p : ps)
    for (index_t i = 0; i < p.value.numel(); ++i) p.value.data[i] += sd * g.normal();
}
}  // namespace

TEST_CASE("linear, rms_norm, swiglu: gradients against fp64 finite differences") {
  ly::linear<double> lin({.in = 5, .out = 3, .bias = true, .init_std = 0.5});
  randomise(lin, 0.3);
  auto r1 = layer_check::check_layer(lin, {2, 3, 5}, 0, 1, 1e-3, 1e-8, 3, {2, 3, 3});
  INFO("linear\n" << r1.str());
  CHECK(r1.ok());

  ly::rms_norm<double> nrm(6, 1e-6);
  randomise(nrm, 0.3);
  auto r2 = layer_check::check_layer(nrm, {2, 3, 6}, 0, 2, 1e-3, 1e-8);
  INFO("rms_norm\n" << r2.str());
  CHECK(r2.ok());

  ly::swiglu<double> mlp({.d_model = 4, .hidden = 7, .init_std = 0.5});
  auto r3 = layer_check::check_layer(mlp, {2, 3, 4}, 0, 3, 1e-3, 1e-8);
  INFO("swiglu\n" << r3.str());
  CHECK(r3.ok());
}

TEST_CASE("embedding and its tied head: gradients") {
  ly::embedding<double> emb({.vocab = 7, .d_model = 4, .init_std = 1.0});
  const std::vector<std::int32_t> ids = {3, 0, 3, 6, 1, 3};  // id 3 three times: the gradient sums
  tensor<double> y({2, 3, 4}), dy({2, 3, 4}), logits({2, 3, 7}), dlogits({2, 3, 7}), dh({2, 3, 4});
  std::mt19937_64 gen(4);
  std::normal_distribution<double> nd;
  for (double& v : dy.values()) v = nd(gen);
  for (double& v : dlogits.values()) v = nd(gen);
  // L = Σ y·dy + Σ head(y)·dlogits: both uses of E at once
  auto loss = [&] {
    emb.forward(ids, y.view());
    emb.head(y.view(), logits.view());
    double s = 0;
    for (index_t i = 0; i < y.numel(); ++i) s += y[i] * dy[i];
    for (index_t i = 0; i < logits.numel(); ++i) s += logits[i] * dlogits[i];
    return s;
  };
  std::vector<ly::parameter_ref<double>> ps;
  emb.collect(ps, "embed.");
  REQUIRE(ps.size() == 1);
  CHECK(ps[0].name == "embed.E");
  ly::zero_grad(ps);
  loss();
  emb.head_backward(y.view(), dlogits.view(), dh.view());
  for (index_t i = 0; i < dy.numel(); ++i) dh[i] += dy[i];
  emb.backward(dh.view());
  const std::vector<double> g(ps[0].grad.data, ps[0].grad.data + ps[0].grad.numel());
  double worst = 0, gmax = 0;
  for (index_t i = 0; i < ps[0].value.numel(); ++i) {
    double& v = ps[0].value.data[i];
    const double v0 = v, h = 1e-3;
    auto at = [&](double o) { return v = v0 + o, loss(); };
    const double fd = (8 * (at(h) - at(-h)) - (at(2 * h) - at(-2 * h))) / (12 * h);
    v = v0;
    worst = std::max(worst, std::abs(fd - g[static_cast<std::size_t>(i)]));
    gmax = std::max(gmax, std::abs(g[static_cast<std::size_t>(i)]));
  }
  CHECK(worst <= 1e-8 * gmax);
  // without the head, a row no id reads gets no gradient
  ly::zero_grad(ps);
  emb.forward(ids, y.view());
  emb.backward(dy.view());
  for (index_t j = 0; j < 4; ++j) CHECK(ps[0].grad.data[2 * 4 + j] == 0.0);
}

TEST_CASE("small layers: bad input names the tensor and its shape") {
  ly::linear<float> lin({.in = 5, .out = 3});
  tensor<float> x({2, 4}), y({2, 3});
  CHECK_THROWS_WITH_AS(lin.forward(x.view(), y.view()),
                       "linstate::layers::linear::forward: x has shape [2,4] but must be [...,in] with in = 5",
                       linstate::error);
  ly::embedding<float> emb({.vocab = 4, .d_model = 2});
  tensor<float> e({1, 2, 2});
  const std::vector<std::int32_t> ids = {1, 4};
  CHECK_THROWS_WITH_AS(emb.forward(ids, e.view()),
                       "linstate::layers::embedding::forward: ids[1] = 4 is outside [0, vocab = 4)", linstate::error);
  ly::swiglu<float> mlp({.d_model = 4, .hidden = 8});
  tensor<float> d({1, 4});
  CHECK_THROWS_WITH_AS(mlp.backward(d.view(), d.view()),
                       "linstate::layers::swiglu::backward: no forward call to differentiate (call forward first)",
                       linstate::error);
  CHECK_THROWS_WITH_AS(ly::rms_norm<float>(0), "linstate::layers::rms_norm: the width must be >= 1, got 0", linstate::error);
}

#ifndef LINSTATE_TEST_SANITIZED
TEST_CASE("linear, rms_norm, swiglu, embedding: no allocation after the first step") {
  // MQAR's sizes (B·T = 2048 rows, D = 64, F = 176): large enough that an Eigen product of all the
  // rows would put its packed blocks on the heap (ops::gemm_rows keeps them on the stack)
  const index_t B = 64, T = 32, D = 64, F = 176, C = 64;
  ly::embedding<float> emb({.vocab = C, .d_model = D});
  ly::rms_norm<float> nrm(D);
  ly::swiglu<float> mlp({.d_model = D, .hidden = F});
  ly::linear<float> lin({.in = D, .out = C, .bias = true});
  std::vector<std::int32_t> ids(static_cast<std::size_t>(B * T));
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int32_t>((i * 7) % C);
  tensor<float> x({B, T, D}), n({B, T, D}), h({B, T, D}), l({B, T, C}), dl({B, T, C}), dh({B, T, D}), dn({B, T, D}),
      dx({B, T, D});
  for (float& v : dl.values()) v = 0.1f;
  auto step = [&] {
    emb.forward(ids, x.view());
    nrm.forward(x.cview(), n.view());
    mlp.forward(n.cview(), h.view());
    lin.forward(h.cview(), l.view());
    lin.backward(dl.cview(), dh.view());
    mlp.backward(dh.cview(), dn.view());
    nrm.backward(dn.cview(), dx.view());
    emb.backward(dx.cview());
  };
  step();
  const long before = layer_test_allocs.load(), mallocs = layer_test_mallocs.load();
  for (int i = 0; i < 3; ++i) step();
  CHECK(layer_test_allocs.load() - before == 0);
  if (LINSTATE_LAYERS_COUNT_MALLOC) CHECK(layer_test_mallocs.load() - mallocs == 0);
}
#endif
