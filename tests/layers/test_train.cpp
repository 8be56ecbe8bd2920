// tests/layers/test_train.cpp — the model and its trainer (<linstate/layers/model.hpp>,
// <linstate/layers/train.hpp>): the whole model's parameter gradients against fp64 finite
// differences (GLA, SSE-n4k1 + shared), the cross-entropy, AdamW against a hand-computed step, the
// schedule, clipping, checkpoints (bit-exact round trip; corrupted, truncated and mismatched files
// throw and change nothing), the loss falling on a fixed batch, and determinism from the seed.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <linstate/layers.hpp>
#include <linstate/layers/model.hpp>
#include <linstate/layers/train.hpp>
#include <random>
#include <string>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif
#include <sys/stat.h>
#include <unistd.h>

#include "layer_check.hpp"

namespace {

namespace pt = linstate::partition;
namespace rt = linstate::router;
namespace ly = linstate::layers;
using linstate::index_t;

struct gla : linstate::spec<> {};
struct sse_n4k1s : gla {
  using partition = pt::routed<4, pt::shared>;
  using router = rt::top_k<1>;
};

// recurrent: T is tiny, and naming it keeps the chunked kernels out of this translation unit
template <class V, class Real>
using tiny_model = ly::model<V, Real, linstate::recurrent>;

ly::model_config tiny_config(bool tied, index_t layers, std::uint64_t seed, double init_std) {
  ly::model_config c{.vocab = 12, .d_model = 8, .num_layers = layers, .mlp_hidden = 12, .tied_head = tied,
                     .init_std = init_std, .seed = seed};
  c.mixer = {.num_heads = 2, .head_k = 4, .head_v = 4, .gate_rank = 3, .adapter_rank = 2};
  c.mixer.balance_coefficient = 0.5;
  return c;
}

struct data {
  index_t B = 2, T = 10;
  std::vector<std::int32_t> ids, targets;
};
//! random ids; targets random, every third position ignored
data tiny_data(std::uint64_t seed, index_t B = 2, index_t T = 10, index_t vocab = 12) {
  data d{B, T, {}, {}};
  std::mt19937_64 g(seed);
  for (index_t i = 0; i < B * T; ++i) {
    d.ids.push_back(static_cast<std::int32_t>(g() % static_cast<std::uint64_t>(vocab)));
    d.targets.push_back(i % 3 == 2 ? ly::ignore_index : static_cast<std::int32_t>(g() % static_cast<std::uint64_t>(vocab)));
  }
  return d;
}

//! the norm weights and biases off their initial 1 / 0, the router's logits apart (as the layer tests)
template <class M>
void perturb(M& m) {
  auto ps = m.parameters();
  ly::init_rng g(99, "perturb");
  for (auto& p : ps) {
    const bool w_r = p.name.ends_with("W_r"), bias = p.name.find("b_g") != std::string::npos || p.name.ends_with(".w") ||
                                                     p.name.ends_with("norm_w");
    for (index_t i = 0; i < p.value.numel(); ++i) {
      const double n = g.normal();
      if (w_r) p.value.data[i] = 2.0 * n;
      else if (bias) p.value.data[i] += 0.3 * n;
    }
  }
}

//! the routing sets of every block (empty without routing)
template <class M>
std::vector<int> selections(M& m) {
  std::vector<int> s;
  for (index_t i = 0; i < m.num_layers(); ++i) {
    const auto b = layer_check::selection(m.layer(i).mixer);
    s.insert(s.end(), b.begin(), b.end());
  }
  return s;
}

//! ∂total/∂θ of every parameter tensor (largest-|g| entry and 2 random ones) against the 4-point
//! central difference of the fp64 model's loss.
template <class V>
void check_model_gradients(bool tied, index_t layers) {
  tiny_model<V, double> m(tiny_config(tied, layers, 3, 0.3));
  perturb(m);
  const data d = tiny_data(5);
  auto ps = m.parameters();
  ly::zero_grad(ps);
  m.loss(d.ids, d.targets, d.B, d.T);
  const auto sel0 = selections(m);
  m.backward();
  std::mt19937_64 gen(17);
  // h = 1e-4: at 1e-3 the 4-point difference's truncation error reaches 3e-4 of max|g| on the
  // embedding rows of SSE (a strongly curved loss there); fp64 rounding at 1e-4 stays below 1e-10
  const double h = 1e-4;
  int skipped = 0, points = 0;
  for (auto& p : ps) {
    const index_t n = p.value.numel();
    const std::vector<double> g(p.grad.data, p.grad.data + n);
    index_t arg = 0;
    double gmax = 0;
    for (index_t i = 0; i < n; ++i)
      if (std::abs(g[static_cast<std::size_t>(i)]) > gmax) gmax = std::abs(g[static_cast<std::size_t>(i)]), arg = i;
    std::vector<index_t> at{arg};
    for (int s = 0; s < 2; ++s) at.push_back(static_cast<index_t>(gen() % static_cast<std::uint64_t>(n)));
    double worst = 0;
    for (const index_t i : at) {
      double& v = p.value.data[i];
      const double v0 = v;
      bool moved = false;
      auto L = [&](double off) {
        v = v0 + off;
        const double l = m.loss(d.ids, d.targets, d.B, d.T).total;
        moved = moved || selections(m) != sel0;
        return l;
      };
      const double fd = (8 * (L(h) - L(-h)) - (L(2 * h) - L(-2 * h))) / (12 * h);
      v = v0;
      if (moved) {
        ++skipped;
        continue;
      }
      ++points;
      worst = std::max(worst, std::abs(fd - g[static_cast<std::size_t>(i)]));
    }
    const double rel = gmax > 0 ? worst / gmax : worst;
    INFO(p.name << " " << p.value.shape.str() << " max|g| " << gmax << " err " << rel);
    if (std::getenv("TRAIN_VERBOSE")) std::printf("%-28s %-8s max|g| %.3e err %.2e\n", p.name.c_str(), p.value.shape.str().c_str(), gmax, rel);
    CHECK(gmax > 0);
    CHECK(rel <= 1e-6);
  }
  INFO("skipped " << skipped << " of " << skipped + points);
  CHECK(points > 2 * skipped);
}

template <class T>
bool same_bits(const T* a, const T* b, index_t n) {
  return std::memcmp(a, b, static_cast<std::size_t>(n) * sizeof(T)) == 0;
}

std::string temp_dir() {
  char tmpl[] = "/tmp/linstate_train_XXXXXX";
  const char* d = ::mkdtemp(tmpl);
  REQUIRE(d != nullptr);
  return d;
}

}  // namespace

TEST_CASE("model: every parameter gradient against fp64 finite differences (GLA, 2 blocks, untied head)") {
  check_model_gradients<gla>(/*tied=*/false, 2);
}

TEST_CASE("model: every parameter gradient against fp64 finite differences (SSE-n4k1 + shared, tied head)") {
  check_model_gradients<sse_n4k1s>(/*tied=*/true, 1);
}

TEST_CASE("model: parameter names, the tied head, bad input") {
  tiny_model<gla, float> m(tiny_config(true, 2, 1, 0.02));
  auto ps = m.parameters();
  REQUIRE(ps.size() > 4);
  CHECK(ps.front().name == "embed.E");
  CHECK(ps.back().name == "norm_f.w");  // tied: no head.W
  CHECK(ps[1].name == "blocks.0.norm1.w");
  CHECK(!ps[1].weight_decay);
  tiny_model<gla, float> u(tiny_config(false, 1, 1, 0.02));
  CHECK(u.parameters().back().name == "head.W");
  const data d = tiny_data(1);
  CHECK_THROWS_WITH_AS(m.loss(std::span(d.ids).first(5), std::span(d.targets).first(5), d.B, d.T),
                       doctest::Contains("ids hold 5 tokens but [B,T] = [2,10]"), linstate::error);
  std::vector<std::int32_t> bad = d.targets;
  bad[3] = 12;
  CHECK_THROWS_WITH_AS(m.loss(d.ids, bad, d.B, d.T), doctest::Contains("targets[3] = 12 is outside [0, vocab = 12)"),
                       linstate::error);
  CHECK_THROWS_WITH_AS(m.backward(), doctest::Contains("call loss() first"), linstate::error);
  using gla_model = tiny_model<gla, float>;
  CHECK_THROWS_AS(gla_model(ly::model_config{.vocab = 0, .d_model = 8}), linstate::error);
}

TEST_CASE("cross_entropy: hand-computed values, ignore_index, huge logits") {
  // row 0: logits (0, ln 2, ln 3) target 2 → −log(3/6); row 1 ignored; row 2: (1000, −1000, 0) target 0 → ~0
  const std::vector<float> logits = {0.f, std::log(2.f), std::log(3.f), 5.f, 5.f, 5.f, 1000.f, -1000.f, 0.f};
  const std::vector<std::int32_t> t = {2, ly::ignore_index, 0};
  std::vector<float> d(9, 7.f);
  const auto r = ly::cross_entropy<float>(logits.data(), t, 3, d.data());
  CHECK(r.count == 2);
  CHECK(r.ce == doctest::Approx(std::log(2.0) / 2).epsilon(1e-6));
  CHECK(d[0] == doctest::Approx(1.0 / 6 / 2));
  CHECK(d[2] == doctest::Approx((0.5 - 1) / 2));
  CHECK(d[3] == 0.f);
  CHECK(d[4] == 0.f);
  CHECK(d[5] == 0.f);
  CHECK(std::isfinite(d[6]));
  CHECK(d[6] == doctest::Approx(0.0).epsilon(1e-6));
  const std::vector<std::int32_t> none = {ly::ignore_index, ly::ignore_index, ly::ignore_index};
  CHECK(ly::cross_entropy<float>(logits.data(), none, 3, d.data()).ce == 0.0);
}

TEST_CASE("cross_entropy: the parallel row loop (several threads) equals one thread and the fp64 reference") {
  // M·C = 256·300 > 32768: large enough for cross_entropy's OpenMP row loop. Session 7 fixed a crash of
  // that loop (each worker thread wrote its own empty thread_local row buffer) that no test reached.
  const index_t M = 256, C = 300;
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.f, 3.f);
  std::uniform_int_distribution<std::int32_t> cls(0, static_cast<std::int32_t>(C) - 1);
  std::vector<float> logits(static_cast<std::size_t>(M * C));
  for (float& x : logits) x = nd(rng);
  std::vector<std::int32_t> t(static_cast<std::size_t>(M));
  for (index_t m = 0; m < M; ++m) t[static_cast<std::size_t>(m)] = m % 7 == 3 ? ly::ignore_index : cls(rng);
  const double scale = 0.5;
  // fp64 reference
  std::int64_t count = 0;
  double ce = 0;
  std::vector<double> dref(logits.size(), 0.0);
  for (index_t m = 0; m < M; ++m) count += t[static_cast<std::size_t>(m)] != ly::ignore_index;
  for (index_t m = 0; m < M; ++m) {
    const std::int32_t tm = t[static_cast<std::size_t>(m)];
    if (tm == ly::ignore_index) continue;
    const float* l = logits.data() + m * C;
    double mx = l[0], s = 0;
    for (index_t c = 1; c < C; ++c) mx = std::max(mx, static_cast<double>(l[c]));
    for (index_t c = 0; c < C; ++c) s += std::exp(static_cast<double>(l[c]) - mx);
    ce += std::log(s) + mx - l[tm];
    for (index_t c = 0; c < C; ++c)
      dref[static_cast<std::size_t>(m * C + c)] = (std::exp(static_cast<double>(l[c]) - mx) / s - (c == tm)) * scale / count;
  }
  ce /= static_cast<double>(count);

  auto run = [&](int threads, std::vector<float>& d) {
#if defined(_OPENMP)
    const int before = omp_get_max_threads();
    omp_set_num_threads(threads);
#endif
    d.assign(logits.size(), 7.f);
    const auto r = ly::cross_entropy<float>(logits.data(), t, C, d.data(), scale);
#if defined(_OPENMP)
    omp_set_num_threads(before);
#endif
    return r;
  };
#if !defined(_OPENMP)
  MESSAGE("built without OpenMP: the row loop runs on one thread only");
#endif
  std::vector<float> d1, d3;
  const auto r1 = run(1, d1);
  const auto r3 = run(3, d3);  // more threads than rows per thread would need, and than a 2-core machine has
  CHECK(r1.count == count);
  CHECK(r3.count == count);
  CHECK(r1.ce == doctest::Approx(ce).epsilon(1e-6));
  CHECK(r3.ce == r1.ce);  // rows are independent and summed in row order: the same bits
  CHECK(r3.total == r1.total);
  CHECK(std::memcmp(d1.data(), d3.data(), d1.size() * sizeof(float)) == 0);
  double err = 0;
  for (std::size_t i = 0; i < d3.size(); ++i) err = std::max(err, std::abs(static_cast<double>(d3[i]) - dref[i]));
  CHECK(err <= 1e-8);  // |dlogits| ≤ scale / count ≈ 2.3e-3 here; fp32 rounding of that is ~1e-10
  for (index_t c = 0; c < C; ++c) CHECK(d3[static_cast<std::size_t>(3 * C + c)] == 0.f);  // row 3 is ignored
  // the calling thread's kept row buffer still serves a later, smaller call
  const std::vector<std::int32_t> t2(t.begin(), t.begin() + 2);
  std::vector<float> d2(static_cast<std::size_t>(2 * C));
  const auto r2 = ly::cross_entropy<float>(logits.data(), t2, C, d2.data());
  CHECK(r2.count == 2);
  CHECK(std::isfinite(r2.ce));
}

TEST_CASE("adamw: two steps against a hand computation (bias correction, decoupled decay, no decay on norms)") {
  std::vector<float> w = {1.f, -2.f}, gw = {0.5f, -1.f}, n = {3.f}, gn = {2.f};
  std::vector<ly::parameter_ref<float>> ps = {{"W", {w.data(), {2}}, {gw.data(), {2}}, true},
                                              {"norm.w", {n.data(), {1}}, {gn.data(), {1}}, false}};
  ly::adamw<float> opt(ps, {.beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.1});
  const double lr = 0.01;
  // by hand, element W[0] (g = 0.5 both steps) and norm.w (g = 2, then 1)
  double th = 1, m = 0, v = 0, thn = 3, mn = 0, vn = 0;
  const double gns[2] = {2, 1};
  for (int t = 1; t <= 2; ++t) {
    gn[0] = static_cast<float>(gns[t - 1]);
    opt.step(lr);
    m = 0.9 * m + 0.1 * 0.5, v = 0.99 * v + 0.01 * 0.25;
    th = th * (1 - lr * 0.1) - lr * (m / (1 - std::pow(0.9, t))) / (std::sqrt(v / (1 - std::pow(0.99, t))) + 1e-8);
    mn = 0.9 * mn + 0.1 * gns[t - 1], vn = 0.99 * vn + 0.01 * gns[t - 1] * gns[t - 1];
    thn = thn - lr * (mn / (1 - std::pow(0.9, t))) / (std::sqrt(vn / (1 - std::pow(0.99, t))) + 1e-8);
    CHECK(w[0] == doctest::Approx(th).epsilon(1e-6));
    CHECK(n[0] == doctest::Approx(thn).epsilon(1e-6));
    CHECK(opt.first_moment(0)[0] == doctest::Approx(m));
    CHECK(opt.second_moment(1)[0] == doctest::Approx(vn));
  }
  // the first step of Adam moves by ≈ lr·sign(g) (plus the decay)
  CHECK(opt.steps() == 2);
  CHECK(w[1] == doctest::Approx(-2.0 * (1 - 0.001) * (1 - 0.001) + 2 * 0.01).epsilon(1e-4));
  CHECK_THROWS_AS(ly::adamw<float>(ps, {.beta1 = 1.0}), linstate::error);
}

TEST_CASE("cosine_schedule: warm-up, peak, cosine, floor") {
  const ly::cosine_schedule s{.peak = 1.0, .warmup = 4, .total = 14, .floor = 0.1};
  CHECK(s(0) == doctest::Approx(0.25));
  CHECK(s(3) == doctest::Approx(1.0));
  CHECK(s(4) == doctest::Approx(1.0));
  CHECK(s(9) == doctest::Approx(0.1 + 0.9 * 0.5));  // halfway: (1 + cos π/2)/2
  CHECK(s(14) == doctest::Approx(0.1));
  CHECK(s(100) == doctest::Approx(0.1));
  const ly::cosine_schedule flat{.peak = 2.0, .warmup = 0, .total = 1};
  CHECK(flat(0) == doctest::Approx(2.0));
}

TEST_CASE("clip_grad_norm: the global norm, scaled only above max_norm") {
  std::vector<float> a = {3.f, 0.f}, ga = {3.f, 0.f}, b = {0.f}, gb = {4.f};
  std::vector<ly::parameter_ref<float>> ps = {{"a", {a.data(), {2}}, {ga.data(), {2}}, true},
                                              {"b", {b.data(), {1}}, {gb.data(), {1}}, true}};
  CHECK(ly::grad_norm(ps) == doctest::Approx(5.0));
  CHECK(ly::clip_grad_norm(ps, 10.0) == doctest::Approx(5.0));
  CHECK(ga[0] == 3.f);
  CHECK(ly::clip_grad_norm(ps, 1.0) == doctest::Approx(5.0));
  CHECK(ga[0] == doctest::Approx(0.6));
  CHECK(gb[0] == doctest::Approx(0.8));
  CHECK(ly::grad_norm(ps) == doctest::Approx(1.0));
  CHECK_THROWS_AS(ly::clip_grad_norm(ps, 0.0), linstate::error);
}

TEST_CASE("training: a few AdamW steps lower the loss on a fixed batch; the same seed gives the same losses") {
  auto run = [](std::uint64_t seed, int steps) {
    tiny_model<gla, float> m(tiny_config(false, 1, seed, 0.1));
    auto ps = m.parameters();
    ly::adamw<float> opt(ps, {.weight_decay = 0.01});
    const ly::cosine_schedule lr{.peak = 3e-2, .warmup = 2, .total = steps};
    const data d = tiny_data(seed + 100);
    std::vector<double> losses;
    for (int s = 0; s < steps; ++s) losses.push_back(ly::train_step(m, ps, opt, d.ids, d.targets, d.B, d.T, lr(s), 1.0).total);
    return losses;
  };
  const auto a = run(1, 25), b = run(1, 25), c = run(2, 25);
  INFO("loss " << a.front() << " -> " << a.back());
  CHECK(a.back() < 0.5 * a.front());
  CHECK(a == b);  // bit for bit
  CHECK(a != c);
}

TEST_CASE("checkpoints: a bit-exact round trip; corrupted, truncated and mismatched files throw and change nothing") {
  const std::string dir = temp_dir(), path = dir + "/model.ckpt";
  const data d = tiny_data(9);
  tiny_model<sse_n4k1s, float> m(tiny_config(true, 1, 4, 0.1));
  auto ps = m.parameters();
  ly::adamw<float> opt(ps);
  for (int s = 0; s < 3; ++s) ly::train_step(m, ps, opt, d.ids, d.targets, d.B, d.T, 1e-2, 1.0);
  ly::save_checkpoint(path, ps, opt, "variant=sse_n4k1s");

  tiny_model<sse_n4k1s, float> m2(tiny_config(true, 1, 77, 0.1));  // another seed: other values
  auto ps2 = m2.parameters();
  ly::adamw<float> opt2(ps2);
  const auto info = ly::load_checkpoint(path, ps2, opt2);
  CHECK(info.steps == 3);
  CHECK(info.meta == "variant=sse_n4k1s");
  CHECK(opt2.steps() == 3);
  bool same = true;
  for (std::size_t i = 0; i < ps.size(); ++i) {
    const index_t n = ps[i].value.numel();
    same = same && same_bits(ps[i].value.data, ps2[i].value.data, n) &&
           same_bits(opt.first_moment(i).data(), opt2.first_moment(i).data(), n) &&
           same_bits(opt.second_moment(i).data(), opt2.second_moment(i).data(), n);
  }
  CHECK(same);
  // training on from both gives the same loss, bit for bit
  ly::train_step(m, ps, opt, d.ids, d.targets, d.B, d.T, 1e-2, 1.0);
  ly::train_step(m2, ps2, opt2, d.ids, d.targets, d.B, d.T, 1e-2, 1.0);
  CHECK(m.loss(d.ids, d.targets, d.B, d.T).total == m2.loss(d.ids, d.targets, d.B, d.T).total);

  // what a failed load must leave alone
  const std::vector<float> before(ps2[0].value.data, ps2[0].value.data + ps2[0].value.numel());
  auto unchanged = [&] { return same_bits(before.data(), ps2[0].value.data, ps2[0].value.numel()) && opt2.steps() == 4; };
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto write = [&](const std::string& p, const std::vector<char>& b) {
    std::ofstream o(p, std::ios::binary | std::ios::trunc);
    o.write(b.data(), static_cast<std::streamsize>(b.size()));
  };
  std::vector<char> flipped = bytes;
  flipped[flipped.size() / 2] ^= 0x10;
  write(dir + "/flipped.ckpt", flipped);
  CHECK_THROWS_WITH_AS(ly::load_checkpoint(dir + "/flipped.ckpt", ps2, opt2), doctest::Contains("checksum mismatch"),
                       linstate::error);
  CHECK(unchanged());
  write(dir + "/short.ckpt", std::vector<char>(bytes.begin(), bytes.begin() + 30));
  CHECK_THROWS_WITH_AS(ly::load_checkpoint(dir + "/short.ckpt", ps2, opt2), doctest::Contains("short.ckpt"), linstate::error);
  CHECK(unchanged());
  write(dir + "/junk.ckpt", std::vector<char>(64, 'x'));
  CHECK_THROWS_WITH_AS(ly::load_checkpoint(dir + "/junk.ckpt", ps2, opt2), doctest::Contains("bad magic"), linstate::error);
  CHECK_THROWS_WITH_AS(ly::load_checkpoint(dir + "/missing.ckpt", ps2, opt2), doctest::Contains("cannot open"),
                       linstate::error);
  // another model: 2 blocks instead of 1, or another width
  {
    tiny_model<sse_n4k1s, float> other(tiny_config(true, 2, 4, 0.1));
    auto po = other.parameters();
    ly::adamw<float> oo(po);
    CHECK_THROWS_WITH_AS(ly::load_checkpoint(path, po, oo), doctest::Contains("parameters but the model has"), linstate::error);
    auto wide_cfg = tiny_config(true, 1, 4, 0.1);
    wide_cfg.mlp_hidden = 16;
    tiny_model<sse_n4k1s, float> wide(wide_cfg);
    auto pw = wide.parameters();
    ly::adamw<float> ow(pw);
    CHECK_THROWS_WITH_AS(ly::load_checkpoint(path, pw, ow), doctest::Contains("blocks.0.mlp.W_gate has shape [8,12] but the model's is [8,16]"),
                         linstate::error);
    tiny_model<gla, float> g(tiny_config(true, 1, 4, 0.1));
    auto pg = g.parameters();
    ly::adamw<float> og(pg);
    CHECK_THROWS_WITH_AS(ly::load_checkpoint(path, pg, og), doctest::Contains("parameters but the model has"), linstate::error);
  }
  // a save that cannot complete leaves the old file and no temporary behind
  CHECK_THROWS_WITH_AS(ly::save_checkpoint(dir + "/no/such/dir/x.ckpt", ps, opt), doctest::Contains("cannot create a temporary file"),
                       linstate::error);
  ly::save_checkpoint(path, ps, opt);  // overwrite in place
  for (const char* f : {"/model.ckpt", "/flipped.ckpt", "/short.ckpt", "/junk.ckpt"}) std::remove((dir + f).c_str());
  CHECK(::rmdir(dir.c_str()) == 0);  // empty: no temporary file was left behind
}
