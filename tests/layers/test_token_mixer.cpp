// tests/layers/test_token_mixer.cpp — the token mixer (linstate/layers/token_mixer.hpp): every
// parameter gradient and dx against fp64 finite differences of the layer's own forward; the fp32
// layer against the fp64 one; its kernel part against calling linstate::forward directly; bad input.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <linstate/layers.hpp>
#include <linstate/layers/model.hpp>
#include <linstate/layers/train.hpp>
#include <random>
#include <string>
#include <vector>

#include "layer_check.hpp"

#ifndef LINSTATE_TEST_SANITIZED
extern std::atomic<long> layer_test_allocs;   // test_small_layers.cpp counts every operator new
extern std::atomic<long> layer_test_mallocs;  // and every malloc (glibc, release build)
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__)
#define LINSTATE_LAYERS_COUNT_MALLOC 1
#else
#define LINSTATE_LAYERS_COUNT_MALLOC 0
#endif
#endif

namespace {

namespace dc = linstate::decay;
namespace pt = linstate::partition;
namespace rt = linstate::router;
namespace ly = linstate::layers;
using linstate::index_t;
using linstate::tensor;

struct gla : linstate::spec<> {};
struct sse_n4k1s : gla {
  using partition = pt::routed<4, pt::shared>;
  using router = rt::top_k<1>;
};
struct sse_n8k2 : gla {
  using partition = pt::routed<8>;
  using router = rt::top_k<2>;
};
struct gdn : gla { using decay = dc::gated_delta_rule<true>; };
struct sse_gdn_n4k1s : sse_n4k1s { using decay = dc::gated_delta_rule<true>; };

// the kernel runs recurrently in these tests (T is small, so `automatic` would too; naming it keeps the
// chunked kernels out of this translation unit's compile time)
template <class V, class Real>
using mixer = ly::token_mixer<V, Real, linstate::recurrent>;

template <class V>
ly::mixer_config test_config() {
  ly::mixer_config c{.d_model = 6, .num_heads = 2, .head_k = 4, .head_v = 3, .gate_rank = 3, .adapter_rank = 2};
  c.init_std = 0.4;  // larger than fla's 0.02, so that every term of the gradient matters
  c.balance_coefficient = 0.5;
  c.seed = 7;
  if constexpr (V::decay::uses_beta) c.k_map = ly::feature_map::silu;  // SSE-GDN / GDN use SiLU keys (SPEC §4.1)
  // the output-gate forms: low rank (SSEGLA's g_proj) with the delta rule, none for SSE-n8k2, full rank otherwise
  if constexpr (V::decay::uses_beta) c.output_gate_rank = 2;
  if constexpr (V::partition::num_routed == 8) c.output_gate = false;
  // the short convolution (width 3 > 1 token of T = 6's warm-up) on the routed, shared and delta-rule forms;
  // GLA and GDN keep the plain projections
  if constexpr (V::partition::num_routed > 1) c.short_conv = 3;
  return c;
}

//! Gives the norm weight, the biases and the router generic values (fla starts them at 1, 0, and a
//! router of std 0.02 whose logits nearly tie), the same in every precision.
template <class Layer>
void perturb(Layer& L) {
  std::vector<ly::parameter_ref<typename Layer::real>> ps;
  L.collect(ps);
  ly::init_rng g(99, "perturb");
  for (auto& p : ps) {
    const bool w_r = p.name == "W_r", bias = p.name.rfind("b_g", 0) == 0 || p.name == "norm_w";
    for (index_t i = 0; i < p.value.numel(); ++i) {
      const double n = g.normal();
      if (w_r) p.value.data[i] = static_cast<typename Layer::real>(2.0 * n);
      else if (bias) p.value.data[i] += static_cast<typename Layer::real>(0.3 * n);
    }
  }
}

//! fp64 finite differences of the fp64 layer; with `fp32`, also the fp32 layer against it and its
//! kernel part against linstate::forward (these instantiate the CPU backend, the bulk of this
//! file's compile time).
template <class V, bool fp32 = true>
void check_variant(const char* name) {
  const ly::mixer_config c = test_config<V>();
  mixer<V, double> L64(c);
  perturb(L64);
  const index_t B = 2, T = 6;
  // h = 1e-3: the 4-point difference's truncation (∝ h⁴) and the fp64 rounding (∝ 1/h) both stay
  // below 1e-7 of max|g|; what is left is the ~1e-7 of reference::backward taking fp32-rounded inputs
  auto rep = layer_check::check_layer(L64, {B, T, c.d_model}, c.balance_coefficient, 11, /*h=*/1e-3, /*tol=*/1e-6);
  INFO(name << "\n" << rep.str());
  CHECK(rep.ok());

  if constexpr (fp32) {
  // the fp32 layer (linstate::forward / backward) against the fp64 one (linstate::reference)
  mixer<V, float> L32(c);
  layer_check::copy_params(L64, L32);
  auto cmp = layer_check::compare_precisions(L64, L32, {B, T, c.d_model}, c.balance_coefficient, 11);
  INFO(cmp.str());
  if (std::getenv("LAYERS_VERBOSE")) MESSAGE(name << "\n" << rep.str() << cmp.str());
  CHECK(cmp.ok(2e-5));  // observed <= 1.6e-6

  // the kernel part is linstate::forward on the layer's kernel inputs, bit for bit
  const auto& in = L32.kernel_inputs();
  const auto r = linstate::forward<V>(linstate::cpu{}, in, linstate::recurrent{}, linstate::varlen{}, c.kernel);
  const auto o = L32.kernel_output();
  REQUIRE(r.o.numel() == o.numel());
  bool same = true;
  for (index_t i = 0; i < o.numel(); ++i) same = same && r.o[i] == o.data[i];
  CHECK(same);
  }
}

}  // namespace

// Under the sanitizers (LINSTATE_TEST_SANITIZED) only the fp64 path runs, for three variants: it
// drives the same buffers and sizes (the fp32 path differs only in handing them to the CPU backend,
// whose compile is the bulk of this file's), so the sanitized build does not compile the backend
// again; the optimised build runs all five variants in both precisions.
#ifdef LINSTATE_TEST_SANITIZED
constexpr bool fp32_all = false;
#else
constexpr bool fp32_all = true;
TEST_CASE("token_mixer: SSE-n8k2 without shared") { check_variant<sse_n8k2>("sse_n8k2"); }
TEST_CASE("token_mixer: GDN") { check_variant<gdn>("gdn"); }
#endif
TEST_CASE("token_mixer: GLA (single partition, dense router)") { check_variant<gla, fp32_all>("gla"); }
TEST_CASE("token_mixer: SSE-n4k1 + shared") { check_variant<sse_n4k1s, fp32_all>("sse_n4k1s"); }
TEST_CASE("token_mixer: SSE-GDN n4k1 + shared") { check_variant<sse_gdn_n4k1s, fp32_all>("sse_gdn_n4k1s"); }

#ifndef LINSTATE_TEST_SANITIZED
TEST_CASE("token_mixer: the default algorithm (automatic in a training step: chunked<64> at T > 64) against the fp64 layer") {
  // T = 80 > 64 runs the chunked kernels forward and backward inside the fp32 layer
  const ly::mixer_config c = test_config<sse_n4k1s>();
  mixer<sse_n4k1s, double> L64(c);
  perturb(L64);
  ly::token_mixer<sse_n4k1s, float> L32(c);  // Algorithm = automatic, Strategy = varlen
  layer_check::copy_params(L64, L32);
  auto cmp = layer_check::compare_precisions(L64, L32, {1, 80, c.d_model}, c.balance_coefficient, 5);
  INFO(cmp.str());
  CHECK(cmp.ok(2e-5));
  const auto r = linstate::forward<sse_n4k1s>(linstate::cpu{}, L32.kernel_inputs(), linstate::chunked<64>{},
                                              linstate::varlen{}, c.kernel);
  bool same = true;
  for (index_t i = 0; i < r.o.numel(); ++i) same = same && r.o[i] == L32.kernel_output().data[i];
  CHECK(same);
}
#endif

#ifdef LINSTATE_TEST_SANITIZED
using checked_real = double;  // the messages are the same in both precisions
#else
using checked_real = float;
#endif

TEST_CASE("token_mixer: bad input names the tensor and its shape") {
  const ly::mixer_config c = test_config<gla>();
  mixer<gla, checked_real> L(c);
  tensor<checked_real> x({2, 3, 5}), y({2, 3, 5});
  CHECK_THROWS_WITH_AS(L.forward(x.view(), y.view()),
                       "linstate::layers::token_mixer::forward: x has shape [2,3,5] but must be [B,T,D] with D = d_model = 6",
                       linstate::error);
  tensor<checked_real> x6({2, 3, 6}), y6({2, 4, 6}), dx({2, 3, 6});
  CHECK_THROWS_WITH_AS(L.backward(x6.view(), dx.view()),
                       "linstate::layers::token_mixer::backward: no forward call to differentiate (call forward first)",
                       linstate::error);
  CHECK_THROWS_WITH_AS(L.forward(x6.view(), y6.view()),
                       "linstate::layers::token_mixer::forward: out has shape [2,4,6] but must be [2,3,6] (like x: [B,T,D])",
                       linstate::error);
  ly::mixer_config bad = c;
  bad.num_heads = 0;
  using gla32 = mixer<gla, checked_real>;
  CHECK_THROWS_WITH_AS(gla32{bad}, "linstate::layers::token_mixer: mixer_config.num_heads = 0: must be >= 1",
                       linstate::error);
}

TEST_CASE("token_mixer: the short convolution is causal, stays within each sequence, and width 1 of weight 1 is none") {
  ly::mixer_config c = test_config<sse_n4k1s>();
  c.short_conv = 0;
  mixer<sse_n4k1s, checked_real> plain(c);
  c.short_conv = 1;
  mixer<sse_n4k1s, checked_real> unit(c);
  std::vector<ly::parameter_ref<checked_real>> pp, pu;
  plain.collect(pp), unit.collect(pu);
  CHECK(pu.size() == pp.size() + 3);
  for (auto& p : pu)
    if (p.name.rfind("conv_", 0) == 0) {
      CHECK(p.value.shape == linstate::shape_t{p.name == "conv_v" ? 2 * 3 : 2 * 4, 1});
      for (index_t j = 0; j < p.value.numel(); ++j) p.value.data[j] = 1;
    }
  const index_t B = 2, T = 5;
  tensor<checked_real> x({B, T, c.d_model}), y0({B, T, c.d_model}), y1({B, T, c.d_model}), y2({B, T, c.d_model});
  std::mt19937 gen(5);
  std::normal_distribution<double> nd;
  for (index_t i = 0; i < x.numel(); ++i) x[i] = static_cast<checked_real>(nd(gen));
  plain.forward(x.view(), y0.view());
  unit.forward(x.view(), y1.view());
  bool same = true;
  for (index_t i = 0; i < y0.numel(); ++i) same = same && y0[i] == y1[i];
  CHECK(same);  // W = 1, w = 1: every partition reads the same q, k, v as without the convolution

  c.short_conv = 4;
  c.balance_coefficient = 0;
  mixer<sse_n4k1s, checked_real> conv(c);
  conv.forward(x.view(), y1.view());
  const index_t t0 = 2;
  for (index_t d = 0; d < c.d_model; ++d) x[(0 * T + t0) * c.d_model + d] += 1;  // sequence 0, token 2
  conv.forward(x.view(), y2.view());
  bool before_same = true, after_moves = false, other_same = true;
  for (index_t t = 0; t < T; ++t)
    for (index_t d = 0; d < c.d_model; ++d) {
      const index_t i0 = (0 * T + t) * c.d_model + d, i1 = (1 * T + t) * c.d_model + d;
      if (t < t0) before_same = before_same && y1[i0] == y2[i0];
      else after_moves = after_moves || y1[i0] != y2[i0];
      other_same = other_same && y1[i1] == y2[i1];
    }
  CHECK(before_same);  // nothing before the changed token moves (and the state starts at zero per sequence)
  CHECK(after_moves);
  CHECK(other_same);   // the convolution does not reach across sequences
  ly::mixer_config bad = c;
  bad.short_conv = -1;
  using sse_t = mixer<sse_n4k1s, checked_real>;
  CHECK_THROWS_WITH_AS(sse_t{bad}, "linstate::layers::token_mixer: mixer_config.short_conv must be >= 0 (0: no convolution)",
                       linstate::error);
}

TEST_CASE("token_mixer: initialisation is deterministic from the seed, as fla") {
  const ly::mixer_config c{.d_model = 16, .num_heads = 2, .head_k = 8, .head_v = 8, .seed = 3};
  mixer<sse_gdn_n4k1s, float> a(c), b(c);
  ly::mixer_config c2 = c;
  c2.seed = 4;
  mixer<sse_gdn_n4k1s, float> other(c2);
  std::vector<ly::parameter_ref<float>> pa, pb, po;
  a.collect(pa, "m."), b.collect(pb, "m."), other.collect(po, "m.");
  REQUIRE(pa.size() == pb.size());
  bool same = true, differs = false;
  for (std::size_t i = 0; i < pa.size(); ++i)
    for (index_t j = 0; j < pa[i].value.numel(); ++j) {
      same = same && pa[i].value.data[j] == pb[i].value.data[j];
      differs = differs || pa[i].value.data[j] != po[i].value.data[j];
    }
  CHECK(same);
  CHECK(differs);
  for (const auto& p : pa) {
    CHECK(p.name.rfind("m.", 0) == 0);
    if (p.name == "m.norm_w") CHECK(p.value.data[0] == 1.f);
    if (p.name == "m.A_log") CHECK(std::exp(p.value.data[0]) <= 16.f);
    if (p.name == "m.W_q") {  // N(0, 0.02²): the sample std of 256 draws within 20%
      double ss = 0;
      for (index_t j = 0; j < p.value.numel(); ++j) ss += double(p.value.data[j]) * p.value.data[j];
      CHECK(std::sqrt(ss / double(p.value.numel())) == doctest::Approx(0.02).epsilon(0.2));
    }
  }
}

#ifndef LINSTATE_TEST_SANITIZED
TEST_CASE("a tiny model trains: embedding, pre-norm SSE token mixer, residual, tied head") {
  // the task: predict the previous token (only the token mixer can carry it); plain SGD on one batch
  const index_t B = 2, T = 12, D = 8, vocab = 6;
  ly::embedding<float> emb({.vocab = vocab, .d_model = D, .init_std = 0.5, .seed = 1});
  ly::rms_norm<float> norm(D);
  mixer<sse_n4k1s, float> mix({.d_model = D, .num_heads = 2, .head_k = 4, .head_v = 4, .init_std = 0.2, .seed = 2});
  std::vector<ly::parameter_ref<float>> ps;
  emb.collect(ps, "embed."), norm.collect(ps, "blocks.0.norm."), mix.collect(ps, "blocks.0.mixer.");
  CHECK(ly::count(ps) > 0);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(B * T));
  std::mt19937_64 gen(3);
  for (auto& i : ids) i = static_cast<std::int32_t>(gen() % vocab);
  tensor<float> x0({B, T, D}), xn({B, T, D}), m({B, T, D}), x1({B, T, D}), logits({B, T, vocab});
  tensor<float> dlogits({B, T, vocab}), dx1({B, T, D}), dxn({B, T, D}), dx0({B, T, D});
  const float coef = static_cast<float>(mix.config().balance_coefficient);
  auto step = [&](float lr) {
    emb.forward(ids, x0.view());
    norm.forward(x0.cview(), xn.view());
    const float aux = mix.forward(xn.cview(), m.view());
    for (index_t i = 0; i < x1.numel(); ++i) x1[i] = x0[i] + m[i];
    emb.head(x1.cview(), logits.view());
    double ce = 0;
    index_t n = 0;
    std::fill(dlogits.values().begin(), dlogits.values().end(), 0.f);
    for (index_t b = 0; b < B; ++b)
      for (index_t t = 1; t < T; ++t, ++n) {
        float* l = logits.data() + (b * T + t) * vocab;
        float* dl = dlogits.data() + (b * T + t) * vocab;
        const float mx = *std::max_element(l, l + vocab);
        double s = 0;
        for (index_t v = 0; v < vocab; ++v) s += std::exp(double(l[v] - mx));
        const std::int32_t target = ids[static_cast<std::size_t>(b * T + t - 1)];
        ce += std::log(s) - double(l[target] - mx);
        for (index_t v = 0; v < vocab; ++v) dl[v] = static_cast<float>(std::exp(double(l[v] - mx)) / s);
        dl[target] -= 1.f;
      }
    for (float& d : dlogits.values()) d /= static_cast<float>(n);
    ly::zero_grad(ps);
    emb.head_backward(x1.cview(), dlogits.cview(), dx1.view());
    mix.backward(dx1.cview(), dxn.view());
    norm.backward(dxn.cview(), dx0.view());
    for (index_t i = 0; i < dx0.numel(); ++i) dx0[i] += dx1[i];
    emb.backward(dx0.cview());
    for (auto& p : ps)
      for (index_t i = 0; i < p.value.numel(); ++i) p.value.data[i] -= lr * p.grad.data[i];
    return ce / double(n) + coef * aux;
  };
  const double first = step(0.3f);
  double last = first;
  for (int s = 0; s < 60; ++s) last = step(0.3f);
  INFO("loss " << first << " -> " << last);
  CHECK(last < 0.7 * first);
}

#endif

#ifndef LINSTATE_TEST_SANITIZED
TEST_CASE("token_mixer: a step allocates nothing after the first") {
  // The layer reuses its buffers when the shapes repeat, and so do the kernel calls
  // (linstate::forward / backward / balance_loss keep their routing, streams and scratch per thread
  // while they are small). The kernel runs on one thread here: with two, a thread's buffers are made
  // the first time that thread gets a task of each kind, which depends on the scheduling.
  ly::mixer_config c = test_config<sse_n4k1s>();
  c.backend.threads = 1;
  mixer<sse_n4k1s, float> L(c);
  tensor<float> x({2, 6, c.d_model}), y({2, 6, c.d_model}), dy({2, 6, c.d_model}), dx({2, 6, c.d_model});
  std::mt19937_64 gen(1);
  std::normal_distribution<float> nd;
  for (float& v : x.values()) v = nd(gen);
  for (float& v : dy.values()) v = nd(gen);
  auto step = [&] {
    const long a = layer_test_allocs.load();
    L.forward(x.cview(), y.view());
    L.backward(dy.cview(), dx.view());
    return layer_test_allocs.load() - a;
  };
  step();
  const long mallocs0 = layer_test_mallocs.load();
  const long second = step(), third = step();
  const long mallocs = layer_test_mallocs.load() - mallocs0;  // read before any CHECK (doctest's logging allocates)
  CHECK(second == 0);
  CHECK(third == 0);
  if (LINSTATE_LAYERS_COUNT_MALLOC) CHECK(mallocs == 0);
  // the same kernel calls made directly, into buffers allocated beforehand: none either
  const linstate::inputs<float>& in = L.kernel_inputs();
  auto like = [](const linstate::tensor_view<const float>& t) { return t.empty() ? tensor<float>() : tensor<float>(t.shape); };
  auto view = [](tensor<float>& t) { return t.empty() ? linstate::tensor_view<float>{} : t.view(); };
  tensor<float> o = like(in.v), dO = like(in.v), gq = like(in.q), gk = like(in.k), gv = like(in.v), gg = like(in.g),
                sq = like(in.shared.q), sk = like(in.shared.k), sg = like(in.shared.g), gl = like(in.router_logits),
                dl = like(in.router_logits);
  linstate::gradients<float> gr{view(gq), view(gk), view(gv), view(gg), {}, {view(sq), view(sk), view(sg), {}}, view(gl), {}};
  tensor<float> st(linstate::state_shape<sse_n4k1s>(in, c.kernel));  // as the layer: a final state of its own
  const long a = layer_test_allocs.load();
  linstate::forward<sse_n4k1s>(c.backend, in, linstate::outputs<float>{o.view(), st.view()}, linstate::recurrent{},
                               linstate::varlen{}, c.kernel);
  (void)linstate::balance_loss<sse_n4k1s>(in.router_logits, c.kernel);
  linstate::backward<sse_n4k1s>(c.backend, in, linstate::cotangents<float>{.o = dO.view()}, gr, linstate::recurrent{},
                                linstate::varlen{}, c.kernel);
  (void)linstate::balance_loss<sse_n4k1s>(in.router_logits, dl.view(), 0.5f, linstate::gradient_write::overwrite, c.kernel);
  const long kernel = layer_test_allocs.load() - a;
  MESSAGE("token_mixer<sse_n4k1s> step (forward + backward, B = 2, T = 6): " << second
          << " operator-new allocations; the kernel calls alone make " << kernel);
  CHECK(kernel == 0);
}
#endif

#ifndef LINSTATE_TEST_SANITIZED
TEST_CASE("model: a training step allocates nothing after the first (issue 12, item 7)") {
  // the whole train_step of model.hpp / train.hpp: embedding, two blocks (token mixer with short
  // convolution + SwiGLU), tied head, cross-entropy, backward, clipping, AdamW; the kernel on one thread
  ly::model_config cfg{.vocab = 32, .d_model = 32, .num_layers = 2, .seed = 3};
  cfg.mixer = {.num_heads = 2, .head_k = 16, .head_v = 16};
  cfg.mixer.short_conv = 4;
  cfg.mixer.backend.threads = 1;
  ly::model<sse_n4k1s> m(cfg);
  auto ps = m.parameters();
  ly::adamw<float> opt(ps, {.weight_decay = 0.1});
  const index_t B = 8, T = 24;
  std::vector<std::int32_t> ids(static_cast<std::size_t>(B * T)), tg(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i)
    ids[i] = static_cast<std::int32_t>((i * 5 + 1) % 32), tg[i] = i % 3 ? static_cast<std::int32_t>((i * 7) % 32) : -100;
  double first = 0, last = 0;
  for (int i = 0; i < 2; ++i) first = ly::train_step(m, ps, opt, ids, tg, B, T, 1e-3, 1.0).total;
  const long news = layer_test_allocs.load(), mallocs0 = layer_test_mallocs.load();
  for (int i = 0; i < 3; ++i) last = ly::train_step(m, ps, opt, ids, tg, B, T, 1e-3, 1.0).total;
  const long n_new = layer_test_allocs.load() - news, n_malloc = layer_test_mallocs.load() - mallocs0;
  CHECK(n_new == 0);
  if (LINSTATE_LAYERS_COUNT_MALLOC) CHECK(n_malloc == 0);
  CHECK(last < first);  // the steps trained (so they did their work)
}
#endif

#ifndef LINSTATE_TEST_SANITIZED
TEST_CASE("token_mixer: bit-identical results whatever the buffers' addresses") {
  // Two layers with the same parameters, fed the same values from buffers at different alignments:
  // the vectorised pointwise passes must not depend on where the data lies (ops::pointwise).
  const ly::mixer_config c = test_config<sse_n4k1s>();
  mixer<sse_n4k1s, float> a(c);
  std::vector<float> pad(3);  // shifts the next allocations
  mixer<sse_n4k1s, float> b(c);
  const index_t B = 2, T = 7, n = B * T * c.d_model;
  std::vector<float> xa(n), xb(n + 1), dya(n), dyb(n + 1), ya(n), yb(n + 1), dxa(n), dxb(n + 1);
  std::mt19937_64 gen(8);
  std::normal_distribution<float> nd;
  for (index_t i = 0; i < n; ++i) xa[i] = xb[i + 1] = nd(gen), dya[i] = dyb[i + 1] = nd(gen);
  const linstate::shape_t s{B, T, c.d_model};
  auto cv = [&](std::vector<float>& v, index_t off) { return linstate::tensor_view<const float>(v.data() + off, s); };
  auto mv = [&](std::vector<float>& v, index_t off) { return linstate::tensor_view<float>(v.data() + off, s); };
  std::vector<ly::parameter_ref<float>> pa, pb;
  a.collect(pa), b.collect(pb);
  ly::zero_grad(pa), ly::zero_grad(pb);
  CHECK(a.forward(cv(xa, 0), mv(ya, 0)) == b.forward(cv(xb, 1), mv(yb, 1)));
  a.backward(cv(dya, 0), mv(dxa, 0)), b.backward(cv(dyb, 1), mv(dxb, 1));
  bool same = true;
  for (index_t i = 0; i < n; ++i) same = same && ya[i] == yb[i + 1] && dxa[i] == dxb[i + 1];
  for (std::size_t p = 0; p < pa.size(); ++p)
    for (index_t i = 0; i < pa[p].grad.numel(); ++i) same = same && pa[p].grad.data[i] == pb[p].grad.data[i];
  CHECK(same);
}
#endif
