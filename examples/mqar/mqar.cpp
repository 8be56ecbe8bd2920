// examples/mqar/mqar.cpp — the recall experiment of issue 12: trains GLA, SSE-n4k1 + shared,
// SSE-n8k2, GDN and SSE-GDN models of the same width on multi-query associative recall (MQAR,
// mqar_data.hpp), evaluates them on held-out examples, and writes a Markdown table, the curves (CSV)
// and an SVG plot of held-out accuracy against steps into --out. docs/mqar.md describes it.
//
//   mqar [--variants gla,sse_n4k1s,sse_n8k2,gdn,sse_gdn] [--steps N] [--seeds 1,2,3] [--vocab V]
//        [--seq-len T] [--pairs P] [--d-model D] [--layers L] [--heads H] [--batch B] [--lr LR]
//        [--short-conv W] [--conv-init-std S] [--threads N] [--eval N] [--eval-every N] [--log-every N]
//        [--out DIR] [--no-diagnostics] [--save-checkpoints] [--load FILE] [--device cpu|cuda]
#include <Eigen/Core>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <sstream>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "variants.hpp"

namespace {

using mqar_cmd::run_config;
using mqar_cmd::run_result;

struct variant_entry {
  const char* name;
  const char* label;
  run_result (*run)(const run_config&);
  run_result (*run_cuda)(const run_config&);  //!< nullptr: this build has no CUDA backend
};
#if defined(MQAR_CUDA)
#define MQAR_ON_GPU(f) f
#else
#define MQAR_ON_GPU(f) nullptr
#endif
const variant_entry all_variants[] = {
    {"gla", "GLA", mqar_cmd::run_gla, MQAR_ON_GPU(mqar_cmd::run_gla_cuda)},
    {"sse_n4k1s", "SSE-n4k1 + shared", mqar_cmd::run_sse_n4k1s, MQAR_ON_GPU(mqar_cmd::run_sse_n4k1s_cuda)},
    {"sse_n8k2", "SSE-n8k2", mqar_cmd::run_sse_n8k2, MQAR_ON_GPU(mqar_cmd::run_sse_n8k2_cuda)},
    {"gdn", "GDN", mqar_cmd::run_gdn, MQAR_ON_GPU(mqar_cmd::run_gdn_cuda)},
    {"sse_gdn", "SSE-GDN-n4k1 + shared", mqar_cmd::run_sse_gdn, MQAR_ON_GPU(mqar_cmd::run_sse_gdn_cuda)},
};

[[noreturn]] void die(const std::string& m) {
  std::fprintf(stderr, "mqar: %s\n", m.c_str());
  std::exit(2);
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char ch : s) {
    if (ch == ',') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else cur += ch;
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

long long to_int(const std::string& opt, const std::string& v, long long lo) {
  char* end = nullptr;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0') die(opt + " takes an integer, got \"" + v + "\"");
  if (x < lo) die(opt + " must be >= " + std::to_string(lo) + ", got " + v);
  return x;
}
double to_real(const std::string& opt, const std::string& v) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !std::isfinite(x) || !(x > 0)) die(opt + " takes a positive number, got \"" + v + "\"");
  return x;
}

//! Writes `text` to dir/name through a temporary file and a rename: the old file stays until the new one is complete.
void write_atomic(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string path = dir + "/" + name, tmp = path + ".tmp";
  {
    std::ofstream o(tmp, std::ios::binary | std::ios::trunc);
    o << text;
    o.flush();
    if (!o) {
      std::remove(tmp.c_str());
      die("cannot write " + tmp + " (is " + dir + " writable?)");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    die("cannot rename " + tmp + " to " + path);
  }
}

struct stats {
  double mean = 0, sd = 0, lo = 0, hi = 0;
};
stats stats_of(const std::vector<double>& v) {
  stats s;
  if (v.empty()) return s;
  s.lo = *std::min_element(v.begin(), v.end()), s.hi = *std::max_element(v.begin(), v.end());
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  if (v.size() > 1) {
    for (double x : v) s.sd += (x - s.mean) * (x - s.mean);
    s.sd = std::sqrt(s.sd / static_cast<double>(v.size() - 1));
  }
  return s;
}

std::string fmt(const char* f, double x) {
  char b[64];
  std::snprintf(b, sizeof b, f, x);
  return b;
}

const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};

//! Held-out accuracy against steps: per variant the mean over seeds (solid) and each seed (faint).
std::string svg_plot(const std::vector<std::pair<std::string, std::vector<run_result>>>& by_variant, std::int64_t steps,
                     double chance, const std::string& title) {
  const double W = 720, H = 440, L = 60, R = 200, Tp = 40, Bt = 50, pw = W - L - R, ph = H - Tp - Bt;
  auto X = [&](double s) { return L + pw * (steps > 0 ? s / static_cast<double>(steps) : 0); };
  auto Y = [&](double a) { return Tp + ph * (1 - a); };
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H << "\" viewBox=\"0 0 " << W << " " << H
    << "\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  o << "<text x=\"" << L << "\" y=\"22\" font-size=\"14\">" << title << "</text>\n";
  for (int i = 0; i <= 5; ++i) {
    const double a = i / 5.0;
    o << "<line x1=\"" << L << "\" y1=\"" << Y(a) << "\" x2=\"" << L + pw << "\" y2=\"" << Y(a) << "\" stroke=\"#ddd\"/>\n";
    o << "<text x=\"" << L - 8 << "\" y=\"" << Y(a) + 4 << "\" text-anchor=\"end\">" << fmt("%.1f", a) << "</text>\n";
  }
  for (int i = 0; i <= 5; ++i) {
    const double s = static_cast<double>(steps) * i / 5.0;
    o << "<text x=\"" << X(s) << "\" y=\"" << Tp + ph + 18 << "\" text-anchor=\"middle\">" << fmt("%.0f", s) << "</text>\n";
  }
  o << "<rect x=\"" << L << "\" y=\"" << Tp << "\" width=\"" << pw << "\" height=\"" << ph << "\" fill=\"none\" stroke=\"#333\"/>\n";
  o << "<text x=\"" << L + pw / 2 << "\" y=\"" << H - 12 << "\" text-anchor=\"middle\">training step</text>\n";
  o << "<text transform=\"translate(16," << Tp + ph / 2 << ") rotate(-90)\" text-anchor=\"middle\">held-out accuracy</text>\n";
  o << "<line x1=\"" << L << "\" y1=\"" << Y(chance) << "\" x2=\"" << L + pw << "\" y2=\"" << Y(chance)
    << "\" stroke=\"#888\" stroke-dasharray=\"4 4\"/>\n";
  o << "<text x=\"" << L + pw - 4 << "\" y=\"" << Y(chance) - 4 << "\" text-anchor=\"end\" fill=\"#888\">chance</text>\n";
  for (std::size_t vi = 0; vi < by_variant.size(); ++vi) {
    const auto& [label, runs] = by_variant[vi];
    const char* col = colors[vi % 6];
    for (const auto& r : runs) {
      o << "<polyline fill=\"none\" stroke=\"" << col << "\" stroke-opacity=\"0.3\" stroke-width=\"1\" points=\"";
      for (const auto& p : r.curve) o << X(static_cast<double>(p.step)) << "," << Y(p.accuracy) << " ";
      o << "\"/>\n";
    }
    if (!runs.empty()) {
      o << "<polyline fill=\"none\" stroke=\"" << col << "\" stroke-width=\"2\" points=\"";
      for (std::size_t k = 0; k < runs[0].curve.size(); ++k) {
        double a = 0;
        int n = 0;
        for (const auto& r : runs)
          if (k < r.curve.size()) a += r.curve[k].accuracy, ++n;
        o << X(static_cast<double>(runs[0].curve[k].step)) << "," << Y(a / std::max(1, n)) << " ";
      }
      o << "\"/>\n";
    }
    const double ly = Tp + 10 + 20.0 * static_cast<double>(vi);
    o << "<line x1=\"" << L + pw + 12 << "\" y1=\"" << ly << "\" x2=\"" << L + pw + 36 << "\" y2=\"" << ly << "\" stroke=\"" << col
      << "\" stroke-width=\"2\"/>\n";
    o << "<text x=\"" << L + pw + 42 << "\" y=\"" << ly + 4 << "\">" << label << "</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

void usage() {
  std::printf(
      "mqar: train GLA / SSE / GDN models on multi-query associative recall and compare their held-out accuracy\n"
      "  --variants LIST   comma-separated of gla,sse_n4k1s,sse_n8k2,gdn,sse_gdn (default: all five)\n"
      "  --steps N         training steps per run (default 1500)\n"
      "  --seeds LIST      comma-separated seeds, one run per seed and variant (default 1)\n"
      "  --vocab V         vocabulary size (default 64; keys [1, V/2), values [V/2, V))\n"
      "  --seq-len T       tokens per example (default 32)\n"
      "  --pairs P         key-value pairs per example (default 4; every key is queried)\n"
      "  --d-model D       model width (default 64)\n"
      "  --layers L        blocks (default 2)\n"
      "  --heads H         heads of the token mixer, K = V = D/H (default 2)\n"
      "  --batch B         examples per step (default 64)\n"
      "  --lr LR           peak learning rate (default 5e-3; warm-up 10%%, cosine to 10%%)\n"
      "  --short-conv W    width of the token mixers' causal short convolution on q, k, v (default 4; 0: none)\n"
      "  --conv-init-std S its init N(0, S^2) (fla's models: 0.02); default: PyTorch's Conv1d U(+-1/sqrt(W))\n"
      "  --threads N       CPU threads in all (default 2)\n"
      "  --jobs J          runs (variant, seed) trained side by side, each on threads/J threads (default: the smaller\n"
      "                    of --threads and the number of runs; 1 with --device cuda or --load)\n"
      "  --eval N          held-out examples (default 512)\n"
      "  --eval-every N    steps between evaluations (default steps/10)\n"
      "  --log-every N     steps between progress lines (default steps/20)\n"
      "  --out DIR         folder for results.md, curves.csv, accuracy.svg (default mqar_out; created)\n"
      "  --no-diagnostics  skip the state diagnostics of the first block\n"
      "  --save-checkpoints  write DIR/<variant>_seed<S>.ckpt after each run (parameters, AdamW state; atomic)\n"
      "  --load FILE       start from a checkpoint (one variant, one seed): trains on from its step to --steps\n"
      "  --device D        cpu (default) or cuda: the whole model, AdamW and clipping on the GPU (a build with nvcc);\n"
      "                    the same initial parameters, data and checkpoint format as on the CPU\n"
      "On a shared or loaded machine set OMP_WAIT_POLICY=passive: spinning OpenMP threads slow training by 10x or more there.\n");
}

}  // namespace

int main(int argc, char** argv) {
  run_config c;
  // the defaults (docs/mqar.md, "How the defaults were chosen"): short convolution of width 4, peak lr 5e-3,
  // 1500 steps; the five variants' seed-1 runs took 15.8 min on one core each of the GPU host's Xeon
  c.task.vocab_size = 64, c.task.seq_len = 32, c.task.num_kv_pairs = 4;
  c.batch = 64, c.steps = 1500, c.lr = 5e-3, c.short_conv = 4;
  std::vector<std::string> names;
  for (const auto& v : all_variants) names.push_back(v.name);
  std::vector<std::uint64_t> seeds = {1};
  std::string out = "mqar_out";
  std::int64_t eval_every = 0, log_every = 0, jobs = 0;
  std::string load, device = "cpu";
  bool save_ckpt = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      usage();
      return 0;
    }
    if (a == "--save-checkpoints") {
      save_ckpt = true;
      continue;
    }
    if (a == "--no-diagnostics") {
      c.diagnostics = false;
      continue;
    }
    if (i + 1 >= argc) die("option " + a + " needs a value (see --help)");
    const std::string v = argv[++i];
    if (a == "--variants") names = split(v);
    else if (a == "--steps") c.steps = to_int(a, v, 1);
    else if (a == "--seeds") {
      seeds.clear();
      for (const auto& s : split(v)) seeds.push_back(static_cast<std::uint64_t>(to_int(a, s, 0)));
    } else if (a == "--vocab") c.task.vocab_size = static_cast<int>(to_int(a, v, 4));
    else if (a == "--seq-len") c.task.seq_len = static_cast<int>(to_int(a, v, 1));
    else if (a == "--pairs") c.task.num_kv_pairs = static_cast<int>(to_int(a, v, 1));
    else if (a == "--d-model") c.d_model = to_int(a, v, 1);
    else if (a == "--layers") c.layers = to_int(a, v, 1);
    else if (a == "--heads") c.heads = to_int(a, v, 1);
    else if (a == "--batch") c.batch = to_int(a, v, 1);
    else if (a == "--lr") c.lr = to_real(a, v);
    else if (a == "--short-conv") c.short_conv = to_int(a, v, 0);
    else if (a == "--conv-init-std") c.conv_init_std = to_real(a, v);
    else if (a == "--threads") c.threads = static_cast<int>(to_int(a, v, 1));
    else if (a == "--jobs") jobs = to_int(a, v, 1);
    else if (a == "--eval") c.eval_examples = to_int(a, v, 1);
    else if (a == "--eval-every") eval_every = to_int(a, v, 1);
    else if (a == "--log-every") log_every = to_int(a, v, 1);
    else if (a == "--out") out = v;
    else if (a == "--load") load = v;
    else if (a == "--device") device = v;
    else die("unknown option " + a + " (see --help)");
  }
  std::vector<const variant_entry*> chosen;
  for (const auto& n : names) {
    const variant_entry* e = nullptr;
    for (const auto& v : all_variants)
      if (n == v.name) e = &v;
    if (!e) die("unknown variant \"" + n + "\" (known: gla, sse_n4k1s, sse_n8k2, gdn, sse_gdn)");
    chosen.push_back(e);
  }
  if (chosen.empty()) die("--variants names no variant");
  if (device != "cpu" && device != "cuda") die("--device takes cpu or cuda, got \"" + device + "\"");
  if (device == "cuda" && !chosen.front()->run_cuda)
    die("--device cuda: this mqar was built without the CUDA backend (build it where nvcc is found: meson setup -Dcuda=enabled)");
  if (seeds.empty()) die("--seeds names no seed");
  if (!load.empty() && (chosen.size() != 1 || seeds.size() != 1))
    die("--load " + load + " needs one variant and one seed (--variants V --seeds S)");
  if (c.d_model % c.heads != 0)
    die("--d-model " + std::to_string(c.d_model) + " does not divide into --heads " + std::to_string(c.heads) + " heads");
  try {
    c.task.validate();
  } catch (const std::exception& e) {
    die(e.what());
  }
  c.eval_every = eval_every ? eval_every : std::max<std::int64_t>(1, c.steps / 10);
  c.log_every = log_every ? log_every : std::max<std::int64_t>(1, c.steps / 20);
  // the output folder: created, and checked writable before any training
  if (::mkdir(out.c_str(), 0755) != 0 && errno != EEXIST) die("cannot create the output folder " + out + ": " + std::strerror(errno));
  if (::access(out.c_str(), W_OK) != 0) die("the output folder " + out + " is not writable");
  // the runs, in the order of the table; --jobs of them side by side, each on threads/jobs threads
  struct task {
    std::size_t variant, seed;
  };
  std::vector<task> tasks;
  for (std::size_t vi = 0; vi < chosen.size(); ++vi)
    for (std::size_t si = 0; si < seeds.size(); ++si) tasks.push_back({vi, si});
  if (device == "cuda" || !load.empty()) {
    if (jobs > 1) die("--jobs " + std::to_string(jobs) + " needs --device cpu and no --load (runs one at a time there)");
    jobs = 1;
  }
  if (!jobs) jobs = std::min<std::int64_t>(c.threads, static_cast<std::int64_t>(tasks.size()));
  jobs = std::max<std::int64_t>(1, std::min<std::int64_t>(jobs, static_cast<std::int64_t>(tasks.size())));
  if (jobs > c.threads) die("--jobs " + std::to_string(jobs) + " exceeds --threads " + std::to_string(c.threads));
  const int per_job = static_cast<int>(c.threads / jobs);
#if defined(_OPENMP)
  omp_set_num_threads(per_job);
#endif
  Eigen::setNbThreads(1);  // the layers split their products over the threads themselves (layers/ops.hpp)

  std::printf("mqar: device %s, vocab %d, seq_len %d, %d pairs (%d queries), d_model %lld, %lld layers, %lld heads, batch %lld, "
              "%lld steps, lr %.1e, %d threads: %lld run(s) side by side on %d thread(s) each, seeds",
              device.c_str(), c.task.vocab_size, c.task.seq_len, c.task.num_kv_pairs, c.task.queries(), static_cast<long long>(c.d_model),
              static_cast<long long>(c.layers), static_cast<long long>(c.heads), static_cast<long long>(c.batch),
              static_cast<long long>(c.steps), c.lr, c.threads, static_cast<long long>(jobs), per_job);
  for (auto s : seeds) std::printf(" %llu", static_cast<unsigned long long>(s));
  std::printf("\n");

  std::vector<std::vector<run_result>> results(chosen.size(), std::vector<run_result>(seeds.size()));
  std::mutex out_mutex;  // the end-of-run lines of side-by-side runs
  std::string error;     // the first run's error (a one-line message)
  auto run_task = [&](const task& t) {
    const variant_entry* e = chosen[t.variant];
    const std::uint64_t s = seeds[t.seed];
    run_config rc = c;
    rc.seed = s;
    rc.threads = per_job;
    rc.reset_rss = jobs == 1;
    rc.diagnostics = c.diagnostics && t.seed == 0;
    rc.load_path = load;
    if (save_ckpt) rc.save_path = out + "/" + e->name + "_seed" + std::to_string(s) + ".ckpt";
    {
      std::lock_guard<std::mutex> lk(out_mutex);
      std::printf("== %s, seed %llu\n", e->label, static_cast<unsigned long long>(s));
      std::fflush(stdout);
    }
    run_result r;
    try {
      r = device == "cuda" ? e->run_cuda(rc) : e->run(rc);
    } catch (const std::exception& ex) {
      std::lock_guard<std::mutex> lk(out_mutex);
      if (error.empty()) error = std::string(e->name) + ": " + ex.what();
      return;
    }
    std::lock_guard<std::mutex> lk(out_mutex);
    std::printf("== %s, seed %llu: %lld parameters, held-out accuracy %.4f, %.0f training tokens/s, %.1f s\n", e->label,
                static_cast<unsigned long long>(s), static_cast<long long>(r.parameters), r.final_accuracy, r.train_tokens_per_s,
                r.total_seconds);
    if (!r.diagnostics.empty()) std::printf("%s\n", r.diagnostics.c_str());
    std::fflush(stdout);
    results[t.variant][t.seed] = std::move(r);
  };
  if (jobs == 1) {
    for (const auto& t : tasks) {
      run_task(t);
      if (!error.empty()) die(error);
    }
  } else {
    std::atomic<std::size_t> next{0};
    std::vector<std::thread> workers;
    for (std::int64_t j = 0; j < jobs; ++j)
      workers.emplace_back([&] {
#if defined(_OPENMP)
        omp_set_num_threads(per_job);  // this thread's OpenMP teams
#endif
        for (std::size_t i; (i = next.fetch_add(1)) < tasks.size();) {
          {
            std::lock_guard<std::mutex> lk(out_mutex);
            if (!error.empty()) return;
          }
          run_task(tasks[i]);
        }
      });
    for (auto& w : workers) w.join();
    if (!error.empty()) die(error);
  }
  std::vector<std::pair<std::string, std::vector<run_result>>> by_variant;
  std::string diag_md;
  for (std::size_t vi = 0; vi < chosen.size(); ++vi) {
    by_variant.push_back({chosen[vi]->label, std::move(results[vi])});
    const auto& first = by_variant.back().second.front();
    if (!first.diagnostics.empty())
      diag_md += "### " + std::string(chosen[vi]->label) + " (block 0, seed " + std::to_string(seeds.front()) + ")\n\n" +
                 first.diagnostics + "\n";
  }

  // results
  const double chance = 1.0 / c.task.value_vocab();
  std::ostringstream md, csv;
  md << "# MQAR results\n\n"
     << "vocab " << c.task.vocab_size << ", seq_len " << c.task.seq_len << ", " << c.task.num_kv_pairs << " key-value pairs ("
     << c.task.queries() << " queries), d_model " << c.d_model << ", " << c.layers << " layers, " << c.heads << " heads, batch "
     << c.batch << ", " << c.steps << " steps, peak lr " << c.lr << " (warm-up 10 %, cosine to 10 %), AdamW wd " << c.weight_decay
     << ", clip " << c.clip << ", short convolution " << (c.short_conv ? "width " + std::to_string(c.short_conv) : std::string("off"))
     << ", " << (device == "cuda" ? std::string("on the GPU (--device cuda)")
                                  : std::to_string(c.threads) + " threads (" + std::to_string(jobs) + " run(s) side by side)")
     << "; held-out set: " << c.eval_examples
     << " examples of another generator seed. Chance (uniform over the values): " << fmt("%.4f", chance) << ".\n\n"
     << "| variant | parameters | held-out accuracy, mean ± sd (min–max) | per seed | held-out loss | training tokens/s | s per run "
        "| ms per step: model (token mixers / of which state kernel) | peak RSS MiB |"
     << (device == "cuda" ? " GPU memory MiB |\n" : "\n") << "|---|---:|---|---|---:|---:|---:|---|---:|"
     << (device == "cuda" ? "---:|\n" : "\n");
  csv << "variant,seed,step,heldout_accuracy,heldout_loss\n";
  for (std::size_t vi = 0; vi < by_variant.size(); ++vi) {
    const auto& [label, runs] = by_variant[vi];
    std::vector<double> acc, loss, tps, secs, ms_model, ms_mixer, ms_kernel, gpu_mib;
    long rss = 0;
    std::string per;
    for (std::size_t k = 0; k < runs.size(); ++k) {
      acc.push_back(runs[k].final_accuracy), loss.push_back(runs[k].final_loss), tps.push_back(runs[k].train_tokens_per_s),
          secs.push_back(runs[k].total_seconds);
      ms_model.push_back(runs[k].step_ms_model), ms_mixer.push_back(runs[k].step_ms_mixer),
          ms_kernel.push_back(runs[k].step_ms_kernel), rss = std::max(rss, runs[k].peak_rss_kib);
      gpu_mib.push_back(runs[k].device_mib);
      per += (k ? ", " : "") + fmt("%.3f", runs[k].final_accuracy);
      for (const auto& p : runs[k].curve)
        csv << chosen[vi]->name << "," << seeds[k] << "," << p.step << "," << fmt("%.6f", p.accuracy) << "," << fmt("%.6f", p.loss) << "\n";
    }
    const stats a = stats_of(acc);
    md << "| " << label << " | " << runs.front().parameters << " | " << fmt("%.3f", a.mean) << " ± " << fmt("%.3f", a.sd) << " ("
       << fmt("%.3f", a.lo) << "–" << fmt("%.3f", a.hi) << ") | " << per << " | " << fmt("%.3f", stats_of(loss).mean) << " | "
       << fmt("%.0f", stats_of(tps).mean) << " | " << fmt("%.0f", stats_of(secs).mean) << " | " << fmt("%.1f", stats_of(ms_model).mean)
       << (stats_of(ms_mixer).lo < 0 ? std::string(" (not split on the GPU)")
                                      : " (" + fmt("%.1f", stats_of(ms_mixer).mean) + " / " + fmt("%.1f", stats_of(ms_kernel).mean) + ")")
       << " | " << rss / 1024 << " |" << (device == "cuda" ? " " + fmt("%.0f", stats_of(gpu_mib).hi) + " |\n" : "\n");
  }
  md << "\nms per step: model::loss + backward + the gradient norm's clipping (not AdamW), means over the steps after the "
        "first; the token mixers' forward and backward are part of it, the state kernel part of those (measured on the CPU "
        "only). Peak RSS: the process's VmHWM, reset at the start of each run when runs go one at a time (the largest over a variant's seeds); with runs side by side it is the process's peak so far, for all of them together. GPU "
        "memory: cudaMemGetInfo's memory in use at the end of a run less before its model was built (the largest over seeds).\n\nPlot: accuracy.svg (held-out accuracy against steps; solid: mean over seeds, faint: each seed). Curves: curves.csv.\n";
  if (!diag_md.empty()) md << "\n## State diagnostics of the first block (8 held-out examples)\n\n" << diag_md;
  write_atomic(out, "results.md", md.str());
  write_atomic(out, "curves.csv", csv.str());
  write_atomic(out, "accuracy.svg",
               svg_plot(by_variant, c.steps, chance,
                        "MQAR: vocab " + std::to_string(c.task.vocab_size) + ", T " + std::to_string(c.task.seq_len) + ", " +
                            std::to_string(c.task.num_kv_pairs) + " pairs, d_model " + std::to_string(c.d_model) + ", " +
                            std::to_string(seeds.size()) + " seed(s)"));
  std::printf("\n%s\nwrote %s/results.md, %s/curves.csv, %s/accuracy.svg\n", md.str().c_str(), out.c_str(), out.c_str(), out.c_str());
  return 0;
}
