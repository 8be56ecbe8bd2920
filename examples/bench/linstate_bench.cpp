// SPDX-License-Identifier: Apache-2.0
//! \file examples/bench/linstate_bench.cpp
//! \brief `linstate-bench`: the cost of a state update of the shipped variants, from the command line,
//! through <linstate/bench.hpp> (and <linstate/cuda/bench.cuh> for --backend cuda).
//!
//! \verbatim
//!   linstate-bench --variant gla,sse_n4k1s [--mode decode,prefill,train] [--backend cpu|cuda]
//!                  [--B 16] [--T 1] [--H 8] [--HV 8] [--K 128] [--V 128] [--N 4] [--kw 1] [--kr 1]
//!                  [--algorithm recurrent|chunked|automatic] [--strategy varlen|mask] [--dtype fp32|bf16]
//!                  [--threads 0] [--reps 0] [--warmup 10] [--budget-ms 200] [--cold-cache] [--graph]
//!                  [--initial-state] [--no-final-state] [--no-roofline] [--seed 2024]
//!                  [--json FILE] [--markdown] [--list] [--help]
//! \endverbatim
//!
//! Every (variant, mode) pair of the two lists is measured in turn. Output: the results as text
//! (operator<< of linstate::bench::result), or one Markdown table with --markdown; --json FILE writes
//! them all as JSON (`-` = stdout, then nothing else goes there). Options take `--name value` or
//! `--name=value`. Defaults: those of linstate::bench::options (B = 1, T = 1 for decode and 1024 for
//! prefill and train, H = 8, K = V = 128, fp32), algorithm recurrent for decode and automatic
//! otherwise, strategy varlen. A build without the CUDA backend refuses --backend cuda.
//! Exit status: 0 success, 1 a measurement failed (bad sizes, no GPU, ...), 2 bad command line.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "variants.hpp"

#if !defined(LINSTATE_BENCH_CUDA)
#define LINSTATE_BENCH_CUDA 0
#endif

namespace {

using namespace linstate_cli;

struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> r;
  std::size_t at = 0;
  while (at <= s.size()) {
    const std::size_t c = s.find(',', at);
    const std::string item = s.substr(at, c == std::string::npos ? std::string::npos : c - at);
    if (!item.empty()) r.push_back(item);
    if (c == std::string::npos) break;
    at = c + 1;
  }
  return r;
}

long long integer(const std::string& flag, const std::string& v) {
  std::size_t used = 0;
  long long x = 0;
  try {
    x = std::stoll(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != v.size()) throw usage_error(flag + " " + v + ": not an integer");
  return x;
}

double number(const std::string& flag, const std::string& v) {
  std::size_t used = 0;
  double x = 0;
  try {
    x = std::stod(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != v.size()) throw usage_error(flag + " " + v + ": not a number");
  return x;
}

//! The runners of a backend and element type, in one list.
std::vector<named_runner> table(const std::string& backend, linstate::bench::scalar_type t) {
  const bool bf = t == linstate::bench::scalar_type::bf16;
  std::vector<std::vector<named_runner>> groups;
  if (backend == "cpu") {
    if (bf) groups = {cpu_gla<Eigen::bfloat16>(), cpu_sse_k2<Eigen::bfloat16>(), cpu_delta<Eigen::bfloat16>()};
    else groups = {cpu_gla<float>(), cpu_sse_k2<float>(), cpu_delta<float>()};
  }
#if LINSTATE_BENCH_CUDA
  if (backend == "cuda") {
    if (bf) groups = {cuda_gla<Eigen::bfloat16>(), cuda_sse_k2<Eigen::bfloat16>(), cuda_delta<Eigen::bfloat16>()};
    else groups = {cuda_gla<float>(), cuda_sse_k2<float>(), cuda_delta<float>()};
  }
#endif
  std::vector<named_runner> all;
  for (const auto& g : groups) all.insert(all.end(), g.begin(), g.end());
  return all;
}

void print_help() {
  std::printf(
      "linstate-bench: the cost of a state update (decode step, prefill, training step) of linstate's variants\n"
      "  --variant a,b,...        variants (--list shows them)\n"
      "  --mode decode,prefill,train   (default decode)\n"
      "  --backend cpu|cuda       (cuda: %s)\n"
      "  --B --T --H --HV --K --V sizes (defaults: B 1, T 1 for decode and 1024 otherwise, H 8, HV = H, K 128, V 128)\n"
      "  --N --kw --kr            partitions and top-k for sse_dynamic\n"
      "  --algorithm recurrent|chunked|automatic   (default: recurrent for decode, automatic otherwise)\n"
      "  --strategy varlen|mask   (default varlen)\n"
      "  --dtype fp32|bf16        input and output type (state: fp32)\n"
      "  --threads N              CPU threads (0: every OpenMP thread)\n"
      "  --reps N --warmup N --budget-ms X   timed calls (0: as many as fit in budget-ms), warm-up calls\n"
      "  --cold-cache             flush the last-level cache (GPU: L2) before every timed call\n"
      "  --graph                  CUDA decode: per-step time inside a CUDA graph of R steps\n"
      "  --initial-state --no-final-state   prefill/train: start from a random state / do not write the final one\n"
      "  --no-roofline            do not measure the copy bandwidth and FMA peak\n"
      "  --seed N                 input seed\n"
      "  --json FILE              write the results as JSON (- = stdout)\n"
      "  --markdown               print one Markdown table instead of the text blocks\n"
      "  --list                   list the variants\n",
      LINSTATE_BENCH_CUDA ? "built in" : "not in this build");
}

struct command {
  std::vector<std::string> variants, modes{"decode"};
  std::string backend = "cpu", strategy = "varlen", json;
  std::optional<std::string> algorithm;
  bool markdown = false, list = false, help = false;
  linstate::bench::options o;
};

command parse(int argc, char** argv) {
  command c;
  std::vector<std::string> args(argv + 1, argv + argc);
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i], value;
    bool has_value = false;
    if (const auto eq = flag.find('='); flag.rfind("--", 0) == 0 && eq != std::string::npos)
      value = flag.substr(eq + 1), flag = flag.substr(0, eq), has_value = true;
    auto val = [&]() -> const std::string& {
      if (!has_value) {
        if (i + 1 >= args.size()) throw usage_error(flag + " needs a value");
        value = args[++i], has_value = true;
      }
      return value;
    };
    auto flag_only = [&] {
      if (has_value) throw usage_error(flag + " takes no value");
    };
    auto& o = c.o;
    if (flag == "--help" || flag == "-h") flag_only(), c.help = true;
    else if (flag == "--list") flag_only(), c.list = true;
    else if (flag == "--variant") c.variants = split(val());
    else if (flag == "--mode") c.modes = split(val());
    else if (flag == "--backend") c.backend = val();
    else if (flag == "--algorithm") c.algorithm = val();
    else if (flag == "--strategy") c.strategy = val();
    else if (flag == "--B") o.B = integer(flag, val());
    else if (flag == "--T") o.T = integer(flag, val());
    else if (flag == "--H") o.H = integer(flag, val());
    else if (flag == "--HV") o.HV = integer(flag, val());
    else if (flag == "--K") o.K = integer(flag, val());
    else if (flag == "--V") o.V = integer(flag, val());
    else if (flag == "--N") o.N = static_cast<int>(integer(flag, val()));
    else if (flag == "--kw") o.kw = static_cast<int>(integer(flag, val()));
    else if (flag == "--kr") o.kr = static_cast<int>(integer(flag, val()));
    else if (flag == "--threads") o.threads = static_cast<int>(integer(flag, val()));
    else if (flag == "--reps") o.reps = static_cast<int>(integer(flag, val()));
    else if (flag == "--warmup") o.warmup = static_cast<int>(integer(flag, val()));
    else if (flag == "--budget-ms") o.budget_ms = number(flag, val());
    else if (flag == "--seed") o.seed = static_cast<std::uint64_t>(integer(flag, val()));
    else if (flag == "--dtype") {
      const std::string d = val();
      if (d == "fp32" || d == "float32") o.dtype = linstate::bench::scalar_type::fp32;
      else if (d == "bf16" || d == "bfloat16") o.dtype = linstate::bench::scalar_type::bf16;
      else throw usage_error("--dtype " + d + ": expected fp32 or bf16");
    } else if (flag == "--cold-cache") flag_only(), o.cold_cache = true;
    else if (flag == "--graph") flag_only(), o.graph = true;
    else if (flag == "--initial-state") flag_only(), o.initial_state = true;
    else if (flag == "--no-final-state") flag_only(), o.final_state = false;
    else if (flag == "--no-roofline") flag_only(), o.roofline = false;
    else if (flag == "--json") c.json = val();
    else if (flag == "--markdown") flag_only(), c.markdown = true;
    else throw usage_error("unknown argument '" + args[i] + "' (--help lists the options)");
  }
  if (c.help || c.list) return c;
  if (c.variants.empty()) throw usage_error("--variant is required (--list shows the variants)");
  if (c.backend != "cpu" && c.backend != "cuda") throw usage_error("--backend " + c.backend + ": expected cpu or cuda");
  for (const auto& m : c.modes)
    if (m != "decode" && m != "prefill" && m != "train") throw usage_error("--mode " + m + ": expected decode, prefill or train");
  if (c.algorithm && *c.algorithm != "recurrent" && *c.algorithm != "chunked" && *c.algorithm != "automatic")
    throw usage_error("--algorithm " + *c.algorithm + ": expected recurrent, chunked or automatic");
  if (c.strategy != "varlen" && c.strategy != "mask") throw usage_error("--strategy " + c.strategy + ": expected varlen or mask");
  if (c.backend == "cuda" && !LINSTATE_BENCH_CUDA)
    throw usage_error(
        "--backend cuda: this linstate-bench was built without the CUDA backend (configure linstate with nvcc "
        "found, -Dcuda=auto or enabled, to build it with both backends)");
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  command c;
  try {
    c = parse(argc, argv);
  } catch (const usage_error& e) {
    std::fprintf(stderr, "linstate-bench: %s\n", e.what());
    return 2;
  }
  if (c.help) return print_help(), 0;
  if (c.list) {
    for (const variant_about& v : variant_list()) std::printf("%-14s %s\n", v.name, v.about);
    return 0;
  }
  const std::vector<named_runner> runners = table(c.backend, c.o.dtype.value_or(linstate::bench::scalar_type::fp32));
  std::vector<const named_runner*> chosen;
  for (const auto& name : c.variants) {
    const named_runner* found = nullptr;
    for (const named_runner& e : runners)
      if (name == e.name) found = &e;
    if (!found) {
      std::string known;
      for (const variant_about& v : variant_list()) known += std::string(known.empty() ? "" : ", ") + v.name;
      std::fprintf(stderr, "linstate-bench: --variant %s: unknown variant (known: %s)\n", name.c_str(), known.c_str());
      return 2;
    }
    chosen.push_back(found);
  }

  const bool json_stdout = c.json == "-";
  std::vector<linstate::bench::result> results;
  for (const named_runner* e : chosen)
    for (const auto& m : c.modes) {
      const auto mode = m == "decode" ? linstate::bench::mode::decode : m == "prefill" ? linstate::bench::mode::prefill
                                                                                          : linstate::bench::mode::train;
      const std::string algorithm = c.algorithm ? *c.algorithm : mode == linstate::bench::mode::decode ? "recurrent" : "automatic";
      linstate::bench::options o = c.o;
      o.name = e->name;
      try {
        results.push_back(e->run(mode, algorithm, c.strategy, o));
      } catch (const std::exception& ex) {
        std::fprintf(stderr, "linstate-bench: %s %s on %s: %s\n", e->name, m.c_str(), c.backend.c_str(), ex.what());
        return 1;
      }
      if (!c.markdown && !json_stdout) std::cout << results.back() << std::flush;
    }
  if (c.markdown && !json_stdout) std::cout << linstate::bench::markdown(results);
  if (!c.json.empty()) {
    const std::string doc = linstate::bench::to_json(results);
    if (json_stdout) {
      std::cout << doc;
    } else {
      std::ofstream f(c.json, std::ios::trunc);
      f << doc;
      f.close();
      if (!f) {
        std::fprintf(stderr, "linstate-bench: --json %s: cannot write the file\n", c.json.c_str());
        return 1;
      }
    }
  }
  return 0;
}
