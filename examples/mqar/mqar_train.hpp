// examples/mqar/mqar_train.hpp — trains one layers::model<V> on MQAR and evaluates it: the part of
// the mqar command that is a template over the variant (one translation unit per variant includes
// it, so that the five variants compile in parallel).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include <linstate/diagnostics.hpp>
#include <linstate/layers/model.hpp>
#include <linstate/layers/train.hpp>

#include "mqar_data.hpp"

namespace mqar_cmd {

//! Everything a run needs; the same for every variant (the command fills it from its options).
struct run_config {
  mqar::options task{};
  std::uint64_t seed = 1;
  linstate::index_t d_model = 64, layers = 2, heads = 2, batch = 32;
  std::int64_t steps = 1000, eval_examples = 512, eval_every = 100, log_every = 50;
  double lr = 3e-3, weight_decay = 0.1, clip = 1.0, warmup_fraction = 0.1, lr_floor_fraction = 0.1;
  int threads = 2;
  linstate::index_t short_conv = 4;  //!< width of every token mixer's short convolution (0: none)
  double conv_init_std = -1;         //!< mixer_config::conv_init_std (< 0: PyTorch's Conv1d default)
  bool diagnostics = true;
  bool reset_rss = true;  //!< reset the process's peak RSS at the start (false while runs share the process)
  std::string load_path;  //!< a checkpoint to start from (parameters, AdamW moments, step count); "": fresh
  std::string save_path;  //!< where to write the final checkpoint (atomically); "": none
};

//! One point of the evaluation curve.
struct eval_point {
  std::int64_t step = 0;
  double accuracy = 0, loss = 0;
};

struct run_result {
  std::string variant;
  std::int64_t parameters = 0;
  std::vector<eval_point> curve;   //!< held-out accuracy at every eval_every steps and at the end
  double final_accuracy = 0, final_loss = 0;
  double train_tokens_per_s = 0;   //!< training steps only (forward, backward, clip, AdamW)
  double train_seconds = 0, total_seconds = 0;
  double step_ms_model = 0;        //!< mean ms per step in model::loss + backward
  double step_ms_mixer = 0;        //!< of which in the token mixers (forward + backward); < 0: not measured
  double step_ms_kernel = 0;       //!< of which in the state kernel (linstate::forward / backward); < 0: not measured
  std::string diagnostics;         //!< diagnostics::summarize of the first block (Markdown)
  std::string device = "cpu";      //!< where it trained: "cpu" or "cuda"
  double device_mib = 0;           //!< GPU memory the run held (cuda), MiB
  long peak_rss_kib = 0;           //!< VmHWM of the process during this run (reset at its start where Linux allows)
};

//! Resets the process's peak RSS (VmHWM) to its current RSS: "5" into /proc/self/clear_refs (Linux >= 4.0).
inline void reset_peak_rss() {
  if (FILE* f = std::fopen("/proc/self/clear_refs", "w")) {
    std::fputs("5", f);
    std::fclose(f);
  }
}

inline long peak_rss_kib() {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  long v = 0;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "VmHWM: %ld kB", &v) == 1) break;
  std::fclose(f);
  return v;
}

//! The mixer configuration every variant shares: H heads of K = V = d_model / H; softmax keys for the
//! GLA-family decays (the SSE paper's k_t = softmax(x_t W_k)), SiLU keys for the delta rule (as SSE-GDN).
template <class V>
linstate::layers::mixer_config mixer_for(const run_config& c) {
  linstate::layers::mixer_config m{};
  m.num_heads = c.heads, m.head_k = c.d_model / c.heads, m.head_v = c.d_model / c.heads;
  if constexpr (V::decay::uses_beta) m.k_map = linstate::layers::feature_map::silu;
  m.short_conv = c.short_conv, m.conv_init_std = c.conv_init_std;
  return m;
}

//! \brief The CPU side of a run: model<V> and AdamW on the host (linstate::cpu kernels inside the
//! token mixers). train_variant drives it through the members below; cuda_trainer<V>
//! (mqar_train_cuda.cuh) has the same members for the GPU.
template <class V>
class cpu_trainer {
 public:
  static constexpr const char* device = "cpu";
  cpu_trainer(const linstate::layers::model_config& mc, double weight_decay)
      : m_(mc), ps_(m_.parameters()), opt_(ps_, {.weight_decay = weight_decay}) {}
  std::int64_t parameters() const { return linstate::layers::count(ps_); }
  std::int64_t steps() const { return opt_.steps(); }
  //! parameters, both AdamW moments and the step count (throws linstate::error naming what is wrong)
  void load(const std::string& path) { linstate::layers::load_checkpoint(path, ps_, opt_); }
  void save(const std::string& path, const std::string& meta) { linstate::layers::save_checkpoint(path, ps_, opt_, meta); }
  //! zeroes the gradients, then model::loss (forward + cross-entropy); backward() follows
  linstate::layers::loss_result loss(const mqar::batch& b) {
    linstate::layers::zero_grad(ps_);
    return m_.loss(b.inputs, b.targets, b.B, b.T);
  }
  void backward() { m_.backward(); }
  double clip(double max_norm) { return linstate::layers::clip_grad_norm(ps_, max_norm); }
  void step(double lr) { opt_.step(lr); }
  void sync() {}  //!< waits for the queued work (the GPU's)
  //! the logits [B,T,vocab] of the last loss() or evaluate()
  std::span<const float> logits() const { return m_.logits(); }
  //! forward only (held-out examples)
  void evaluate(const mqar::batch& b) { m_.forward(b.inputs, b.B, b.T); }
  //! seconds in the token mixers / in the state kernel so far (< 0: not measured on this device)
  double mixer_seconds() const { return m_.mixer_seconds(); }
  double kernel_seconds() const { return m_.kernel_seconds(); }
  //! bytes of device memory the run holds (0: the host's memory is the process's RSS)
  double device_bytes() const { return 0; }
  //! the model with its trained parameters, on the host (diagnostics run there)
  linstate::layers::model<V>& host_model() { return m_; }

 private:
  linstate::layers::model<V> m_;
  std::vector<linstate::layers::parameter_ref<float>> ps_;
  linstate::layers::adamw<float> opt_;
};

//! \brief Trains one model of variant V on MQAR with the given trainer (cpu_trainer<V> or cuda_trainer<V>):
//! the same data stream, schedule, evaluation, checkpoints and diagnostics on either device.
template <class V, class Trainer>
run_result train_variant(const std::string& name, const run_config& c) {
  namespace ly = linstate::layers;
  using clock = std::chrono::steady_clock;
  if (c.reset_rss) reset_peak_rss();
  const auto t_start = clock::now();
  ly::model_config mc{.vocab = c.task.vocab_size, .d_model = c.d_model, .num_layers = c.layers, .seed = c.seed};
  mc.mixer = mixer_for<V>(c);
  Trainer tr(mc, c.weight_decay);
  const ly::cosine_schedule sched{.peak = c.lr,
                                  .warmup = static_cast<std::int64_t>(c.warmup_fraction * static_cast<double>(c.steps)),
                                  .total = c.steps,
                                  .floor = c.lr * c.lr_floor_fraction};
  // training data: seed-derived stream 1; held-out: stream 2 (another generator seed, never trained on)
  std::int64_t first_step = 0;
  if (!c.load_path.empty()) {  // throws linstate::error naming a truncated, corrupted or mismatched file
    tr.load(c.load_path);
    first_step = tr.steps();
  }
  const mqar::generator train_gen(c.task, c.seed * 1000003ull + 1), eval_gen(c.task, c.seed * 1000003ull + 2);
  const std::int64_t B = c.batch;

  run_result r;
  r.variant = name;
  r.device = Trainer::device;
  r.parameters = tr.parameters();
  auto evaluate = [&](std::int64_t step) {
    std::int64_t correct = 0, total = 0;
    double loss = 0;
    std::int64_t counted = 0;
    for (std::int64_t first = 0; first < c.eval_examples; first += B) {
      const std::int64_t n = std::min<std::int64_t>(B, c.eval_examples - first);
      const mqar::batch b = eval_gen.make_batch(static_cast<std::uint64_t>(first), n);
      tr.evaluate(b);
      const auto lg = tr.logits();
      const auto a = mqar::accuracy_from_logits(b, lg, c.task.vocab_size);
      correct += a.correct, total += a.total;
      const auto ce = ly::cross_entropy<float>(lg.data(), b.targets, c.task.vocab_size, nullptr);
      loss += ce.ce * static_cast<double>(ce.count), counted += ce.count;
    }
    eval_point p{step, total ? static_cast<double>(correct) / static_cast<double>(total) : 0.0,
                 counted ? loss / static_cast<double>(counted) : 0.0};
    r.curve.push_back(p);
    std::printf("  [%s seed %llu] eval step %6lld  held-out loss %.4f  accuracy %.4f\n", name.c_str(),
                static_cast<unsigned long long>(c.seed), static_cast<long long>(step), p.loss, p.accuracy);
    std::fflush(stdout);
    return p;
  };

  double train_s = 0, model_s = 0, model_s_after_first = 0, mixer_s = 0, kernel_s = 0;
  std::int64_t window_tokens = 0;
  double window_s = 0, window_loss = 0, window_acc = 0;
  int window_n = 0;
  evaluate(0);
  for (std::int64_t s = first_step; s < c.steps; ++s) {
    const mqar::batch b = train_gen.make_batch(static_cast<std::uint64_t>(s * B), B);
    const double mixer0 = tr.mixer_seconds(), kernel0 = tr.kernel_seconds();
    const auto t0 = clock::now();
    const auto l = tr.loss(b);
    tr.backward();
    const double gn = tr.clip(c.clip);  // reads the norm: on the GPU it waits for the backward
    const auto t1 = clock::now();
    if (std::isfinite(l.total) && std::isfinite(gn)) tr.step(sched(s));
    tr.sync();  // the GPU's AdamW is queued: the step ends when it has run
    const auto t2 = clock::now();
    const double acc = mqar::accuracy_from_logits(b, tr.logits(), c.task.vocab_size).value();
    const double dt = std::chrono::duration<double>(t2 - t0).count();
    train_s += dt, model_s += std::chrono::duration<double>(t1 - t0).count();
    if (s > first_step) {  // the first step allocates the buffers: not in the split
      model_s_after_first += std::chrono::duration<double>(t1 - t0).count();
      mixer_s += tr.mixer_seconds() - mixer0, kernel_s += tr.kernel_seconds() - kernel0;
    }
    window_s += dt, window_tokens += B * c.task.seq_len;
    window_loss += l.total, window_acc += acc, ++window_n;
    if ((s + 1) % c.log_every == 0 || s + 1 == c.steps) {
      std::printf("  [%s seed %llu] step %6lld  loss %.4f  train acc %.4f  lr %.2e  |g| %.3f  %.0f tokens/s\n", name.c_str(),
                  static_cast<unsigned long long>(c.seed), static_cast<long long>(s + 1), window_loss / window_n,
                  window_acc / window_n, sched(s), gn, static_cast<double>(window_tokens) / window_s);
      std::fflush(stdout);
      window_tokens = 0, window_s = 0, window_loss = 0, window_acc = 0, window_n = 0;
    }
    if ((s + 1) % c.eval_every == 0 && s + 1 != c.steps) evaluate(s + 1);
  }
  const eval_point last = evaluate(c.steps);
  if (!c.save_path.empty()) tr.save(c.save_path, "mqar " + name + " seed " + std::to_string(c.seed));
  r.final_accuracy = last.accuracy, r.final_loss = last.loss;
  r.train_seconds = train_s;
  const std::int64_t ran = c.steps - first_step;  // steps this run trained (all of them without --load)
  r.train_tokens_per_s = train_s > 0 ? static_cast<double>(ran * B * c.task.seq_len) / train_s : 0;
  r.step_ms_model = ran > 0 ? 1e3 * model_s / static_cast<double>(ran) : 0;
  if (ran > 1) {  // the split over the steps after the first (model_s_after_first covers the same steps)
    const double n = static_cast<double>(ran - 1), scale = model_s_after_first > 0 ? 1e3 / n : 0;
    r.step_ms_mixer = tr.mixer_seconds() < 0 ? -1 : scale * mixer_s;
    r.step_ms_kernel = tr.kernel_seconds() < 0 ? -1 : scale * kernel_s;
    r.step_ms_model = 1e3 * model_s_after_first / n;
  }
  r.device_mib = tr.device_bytes() / (1024.0 * 1024.0);

  if (c.diagnostics) {
    // the first block's token mixer on 8 held-out examples (on the host): its kernel inputs and final states
    auto& hm = tr.host_model();
    const std::int64_t n = std::min<std::int64_t>(8, std::max<std::int64_t>(1, c.eval_examples));
    const mqar::batch b = eval_gen.make_batch(0, n);
    hm.forward(b.inputs, n, c.task.seq_len);
    auto& mix = hm.layer(0).mixer;
    const auto& in = mix.kernel_inputs();
    const auto fr = linstate::forward<V>(linstate::cpu{}, in, linstate::automatic{}, linstate::varlen{}, mix.config().kernel);
    std::ostringstream os;
    os << linstate::diagnostics::summarize<V>(in, fr.final_state.cview(), mix.config().kernel);
    r.diagnostics = os.str();
  }
  r.total_seconds = std::chrono::duration<double>(clock::now() - t_start).count();
  r.peak_rss_kib = peak_rss_kib();
  return r;
}

}  // namespace mqar_cmd
