// SPDX-License-Identifier: Apache-2.0
//! \file examples/linstate_run.cpp
//! \brief `linstate-run`: runs one golden-data case folder (see shared/fixtures/README.md) through
//! linstate on the CPU and writes the output `o.npy` and the final state `ht.npy`; when the folder
//! holds the output cotangent `do.npy`, it also runs the backward pass and writes the gradient
//! `d<name>.npy` of every input of the case.
//!
//! \verbatim
//!   linstate-run CASE_DIR OUT_DIR [--algorithm recurrent|chunked] [--strategy mask|varlen]
//! \endverbatim
//!
//! The program is also the example of how a run-time configuration (the fields of case.json) is
//! mapped onto linstate's static variant types:
//!  * `kind` picks the variant type: `gla` (one state per head) or `sse` (N routed partitions with a
//!    top-k router plus a shared partition);
//!  * the SSE sizes N, num_writer, num_reader and the router-weight switches emulq/emulk are run-time
//!    numbers, so the SSE variant declares those policy parameters `linstate::dynamic` and receives
//!    them through `linstate::options`;
//!  * the algorithm and the strategy are tag types; a run-time choice becomes a type by calling a
//!    generic lambda with the matching tag object (`with_algorithm`, `with_strategy` below).
//!
//! Backward: with `do.npy` ([B,T,H,V], the fixed weights of the loss Σ o·do; the final state gets no
//! gradient) the program calls linstate::backward with the same variant, algorithm, strategy and
//! options, and writes, as float32 in the fixtures' shapes, `dq dk dv dg` (GLA) or
//! `dq1 dq2 dk1 dk2 dv dg1 dg2 deta` (SSE), plus `dh0` when the case has `h0`.
//!
//! Errors: every problem with the inputs (missing file or field, bad JSON, bad .npy, unsupported
//! dtype, shape that contradicts case.json, unknown value, unknown option) ends the program with a
//! non-zero status and one line on stderr, `linstate-run: <file>: <problem>`. Everything is read,
//! checked and computed (forward and backward) before anything is written, and all outputs are
//! written to temporary names and renamed into place at the end, so a failed run leaves OUT_DIR as
//! it was (a malformed `do.npy` fails the whole run: not even o.npy is written).
//! Exit status: 0 success, 1 bad input or failed run, 2 bad command line.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iostream>
#include <limits>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <linstate/io/npy.hpp>
#include <linstate/linstate.hpp>
#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using linstate::index_t;

// ============================================================================================
// Errors
// ============================================================================================

//! A problem with the inputs. The message is "<file>: <problem>"; main() prints it on one line.
struct run_error : std::runtime_error {
  run_error(const fs::path& file, const std::string& problem) : std::runtime_error(file.string() + ": " + problem) {}
};

//! A problem with the command line (exit status 2).
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

//! "(1, 66, 2, 32)", the way NumPy prints a shape.
std::string shape_str(const std::vector<index_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

// ============================================================================================
// Command line
// ============================================================================================

enum class algorithm { recurrent, chunked };
enum class strategy { mask, varlen };

struct command_line {
  fs::path case_dir, out_dir;
  std::optional<algorithm> algo;  // empty: the case's `mode` decides
  std::optional<strategy> strat;  // empty: mask
  bool help = false;
};

constexpr const char* usage_text =
    "usage: linstate-run CASE_DIR OUT_DIR [--algorithm recurrent|chunked] [--strategy mask|varlen]\n"
    "\n"
    "Runs the operator described by CASE_DIR/case.json (a golden-data case folder, see\n"
    "shared/fixtures/README.md) on the CPU with linstate, reading the input .npy files of the\n"
    "folder, and writes OUT_DIR/o.npy (the output [B,T,H,V]) and OUT_DIR/ht.npy (the final state:\n"
    "GLA [S,H,K,V], SSE [S,1+N,H,K,V]) as float32. OUT_DIR is created if missing.\n"
    "\n"
    "When CASE_DIR holds do.npy (the output cotangent [B,T,H,V] of the loss sum(o * do)), the\n"
    "backward pass runs too, with the same algorithm and strategy, and OUT_DIR also receives the\n"
    "gradient of every input, float32, shaped like the input:\n"
    "  GLA: dq.npy dk.npy dv.npy dg.npy            SSE: dq1 dq2 dk1 dk2 dv dg1 dg2 deta (.npy)\n"
    "  and dh0.npy when the case has h0.npy.\n"
    "\n"
    "options:\n"
    "  --algorithm A   recurrent (token by token) or chunked (chunks of 64 tokens).\n"
    "                  Default: the case's mode (fused_recurrent -> recurrent, chunk -> chunked).\n"
    "  --strategy S    SSE strategy: mask (every partition on every token) or varlen (each\n"
    "                  partition on its routed tokens only). Default: mask. No effect on GLA.\n"
    "  -h, --help      print this help and exit.\n"
    "\n"
    "On bad input (do.npy included) nothing is written; one line on stderr names the file and\n"
    "the problem.\n";

command_line parse_command_line(int argc, char** argv) {
  command_line cl;
  std::vector<std::string> positional;
  // Takes the value of `--name VALUE` or `--name=VALUE`.
  auto value_of = [&](int& i, const std::string& arg, const std::string& name) -> std::optional<std::string> {
    if (arg == name) {
      if (i + 1 >= argc) throw usage_error("option " + name + " needs a value (try --help)");
      return std::string(argv[++i]);
    }
    if (arg.rfind(name + "=", 0) == 0) return arg.substr(name.size() + 1);
    return std::nullopt;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      cl.help = true;
    } else if (auto a = value_of(i, arg, "--algorithm")) {
      if (*a == "recurrent") cl.algo = algorithm::recurrent;
      else if (*a == "chunked") cl.algo = algorithm::chunked;
      else throw usage_error("unknown --algorithm '" + *a + "' (expected recurrent or chunked)");
    } else if (auto s = value_of(i, arg, "--strategy")) {
      if (*s == "mask") cl.strat = strategy::mask;
      else if (*s == "varlen") cl.strat = strategy::varlen;
      else throw usage_error("unknown --strategy '" + *s + "' (expected mask or varlen)");
    } else if (arg.size() > 1 && arg[0] == '-') {
      throw usage_error("unknown option '" + arg + "' (try --help)");
    } else {
      positional.push_back(arg);
    }
  }
  if (cl.help) return cl;
  if (positional.size() != 2)
    throw usage_error("expected 2 arguments CASE_DIR OUT_DIR, got " + std::to_string(positional.size()) +
                      " (try --help)");
  cl.case_dir = positional[0];
  cl.out_dir = positional[1];
  return cl;
}

// ============================================================================================
// case.json
// ============================================================================================

//! The configuration values of one case, checked for type and range.
struct case_config {
  std::string name;
  bool sse = false;                  // kind: "gla" or "sse"
  algorithm mode = algorithm::chunked;  // mode: "chunk" or "fused_recurrent"
  index_t B = 0, T = 0, H = 0, K = 0, V = 0, S = 0;
  float scale = 1.f;
  bool initial_state = false;
  std::vector<std::int64_t> cu_seqlens;  // empty when case.json has null
  // SSE only
  int N = 0, num_writer = 0, num_reader = 0;
  bool emulq = false, emulk = false;
};

//! Typed, checked access to the fields of a JSON object; every error names the file and the field.
class fields {
 public:
  fields(const json& j, fs::path file) : j_(j), file_(std::move(file)) {}

  const json& at(const std::string& key) const {
    const auto it = j_.find(key);
    if (it == j_.end()) fail("missing field '" + key + "'");
    return *it;
  }
  std::int64_t integer(const std::string& key, std::int64_t lo, std::int64_t hi = std::numeric_limits<int>::max()) const {
    const json& v = at(key);
    if (!v.is_number_integer()) fail("field '" + key + "' must be an integer, got " + v.dump());
    // nlohmann stores non-negative literals as unsigned: rule out those beyond int64 first.
    const bool too_big = v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(hi);
    if (too_big || v.get<std::int64_t>() < lo || v.get<std::int64_t>() > hi)
      fail("field '" + key + "' = " + v.dump() + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return v.get<std::int64_t>();
  }
  double number(const std::string& key) const {
    const json& v = at(key);
    if (!v.is_number()) fail("field '" + key + "' must be a number, got " + v.dump());
    return v.get<double>();
  }
  bool boolean(const std::string& key) const {
    const json& v = at(key);
    if (!v.is_boolean()) fail("field '" + key + "' must be true or false, got " + v.dump());
    return v.get<bool>();
  }
  //! A string field that must be one of \p allowed; returns its index in \p allowed.
  std::size_t choice(const std::string& key, std::initializer_list<const char*> allowed) const {
    const json& v = at(key);
    std::string list;
    for (const char* a : allowed) list += (list.empty() ? "" : " or ") + std::string(a);
    if (!v.is_string()) fail("field '" + key + "' must be a string (" + list + "), got " + v.dump());
    std::size_t i = 0;
    for (const char* a : allowed) {
      if (v.get<std::string>() == a) return i;
      ++i;
    }
    fail("unknown " + key + " " + v.dump() + " (expected " + list + ")");
  }
  [[noreturn]] void fail(const std::string& problem) const { throw run_error(file_, problem); }

 private:
  const json& j_;
  fs::path file_;
};

case_config read_case(const fs::path& case_dir) {
  const fs::path file = case_dir / "case.json";
  std::error_code ec;
  if (!fs::is_directory(case_dir, ec)) throw run_error(case_dir, "not a directory (expected a case folder)");
  if (!fs::is_regular_file(file, ec)) throw run_error(file, "missing file (every case folder has a case.json)");
  std::ifstream in(file, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) throw run_error(file, "cannot read the file");
  json j;
  try {
    j = json::parse(text.str());
  } catch (const json::parse_error& e) {
    throw run_error(file, std::string("bad JSON: ") + e.what());
  }
  if (!j.is_object()) throw run_error(file, "bad JSON: the top level must be an object, got " + std::string(j.type_name()));

  const fields f(j, file);
  case_config c;
  c.name = j.contains("name") && j["name"].is_string() ? j["name"].get<std::string>() : case_dir.filename().string();
  c.sse = f.choice("kind", {"gla", "sse"}) == 1;
  c.mode = f.choice("mode", {"chunk", "fused_recurrent"}) == 0 ? algorithm::chunked : algorithm::recurrent;
  c.B = f.integer("B", 1), c.T = f.integer("T", 1), c.H = f.integer("H", 1);
  c.K = f.integer("K", 1), c.V = f.integer("V", 1), c.S = f.integer("S", 1);
  const double scale = f.number("scale");
  if (!std::isfinite(scale) || std::fabs(scale) > std::numeric_limits<float>::max())
    f.fail("field 'scale' = " + j["scale"].dump() + " is not a finite float32 value");
  c.scale = static_cast<float>(scale);
  c.initial_state = f.boolean("initial_state");

  // cu_seqlens: null (S = B independent sequences) or the packed offsets [0, ..., T] with B = 1.
  const json& cu = f.at("cu_seqlens");
  if (!cu.is_null()) {
    if (!cu.is_array() || cu.size() < 2) f.fail("field 'cu_seqlens' must be null or a list of at least 2 offsets, got " + cu.dump());
    for (const json& x : cu) {
      if (!x.is_number_integer()) f.fail("field 'cu_seqlens' must hold integers, got " + x.dump());
      c.cu_seqlens.push_back(x.get<std::int64_t>());
    }
    if (c.cu_seqlens.front() != 0 || c.cu_seqlens.back() != c.T || !std::is_sorted(c.cu_seqlens.begin(), c.cu_seqlens.end()))
      f.fail("field 'cu_seqlens' = " + cu.dump() + " must rise from 0 to T = " + std::to_string(c.T));
    if (c.B != 1) f.fail("packed sequences (cu_seqlens given) need B = 1, but B = " + std::to_string(c.B));
  }
  const index_t S = c.cu_seqlens.empty() ? c.B : static_cast<index_t>(c.cu_seqlens.size()) - 1;
  if (c.S != S)
    f.fail("field 'S' = " + std::to_string(c.S) + " contradicts " +
           (c.cu_seqlens.empty() ? "B = " + std::to_string(c.B) : "cu_seqlens (" + std::to_string(S) + " sequences)"));

  if (c.sse) {
    c.N = static_cast<int>(f.integer("N", 1));
    c.num_writer = static_cast<int>(f.integer("num_writer", 1, c.N));
    c.num_reader = static_cast<int>(f.integer("num_reader", 1, c.N));
    c.emulq = f.boolean("emulq");
    c.emulk = f.boolean("emulk");
    // The fixture format always has the shared partition (state partition 0).
    if (j.contains("shared_partition") && !f.boolean("shared_partition"))
      f.fail("shared_partition = false is not supported (linstate-run runs SSE with the shared partition)");
  }
  return c;
}

// ============================================================================================
// Input tensors
// ============================================================================================

//! Reads `<case_dir>/<name>.npy`, which must be float32 with exactly the shape \p want.
linstate::tensor<float> read_f32(const fs::path& case_dir, const std::string& name, const std::vector<index_t>& want) {
  const fs::path file = case_dir / (name + ".npy");
  std::error_code ec;
  if (!fs::exists(file, ec)) throw run_error(file, "missing file (the case needs it)");
  const linstate::io::npy_array a = linstate::io::read_npy(file);  // npy_error: "<file>: <problem>"
  if (a.dtype != linstate::io::npy_dtype::f4)
    throw run_error(file, "unsupported dtype '" + std::string(linstate::io::descr(a.dtype)) +
                              "' (linstate-run reads float32 '<f4' tensors)");
  if (a.shape != want) throw run_error(file, "shape " + shape_str(a.shape) + " contradicts case.json: expected " + shape_str(want));
  return {linstate::shape_t::from_range(want.begin(), want.end()), a.to_vector<float>()};
}

//! Reads `<case_dir>/cu_seqlens.npy` (int64) and checks that it holds the offsets of case.json.
void check_cu_seqlens_file(const fs::path& case_dir, const case_config& c) {
  const fs::path file = case_dir / "cu_seqlens.npy";
  std::error_code ec;
  const bool present = fs::exists(file, ec);
  if (c.cu_seqlens.empty()) {
    if (present) throw run_error(file, "present, but case.json has cu_seqlens null");
    return;
  }
  if (!present) throw run_error(file, "missing file (case.json gives cu_seqlens)");
  const linstate::io::npy_array a = linstate::io::read_npy(file);
  if (a.dtype != linstate::io::npy_dtype::i8)
    throw run_error(file, "unsupported dtype '" + std::string(linstate::io::descr(a.dtype)) + "' (expected int64 '<i8')");
  const std::vector<index_t> want{static_cast<index_t>(c.cu_seqlens.size())};
  if (a.shape != want) throw run_error(file, "shape " + shape_str(a.shape) + " contradicts case.json: expected " + shape_str(want));
  if (a.to_vector<std::int64_t>() != c.cu_seqlens) throw run_error(file, "offsets differ from cu_seqlens in case.json");
}

//! Everything one forward call reads, owned. The fixture names map onto linstate's:
//! GLA q,k,v,g as they are; SSE q2,k2,g2 -> q,k,g (routed partitions), q1,k1,g1 -> shared.q,k,g,
//! eta -> router_logits, h0 -> initial_state.
struct case_inputs {
  linstate::tensor<float> q, k, v, g, q1, k1, g1, eta, h0;
  linstate::tensor<float> dO;  // do.npy [B,T,H,V]; empty when the folder has none (no backward)
  bool backward = false;       // do.npy is present
};

//! Shape of the state as linstate sees it: [S, P, H, K, V] (P = 1 for GLA, 1 + N for SSE). The
//! fixture's GLA state [S, H, K, V] has the same memory layout, with the partition axis dropped.
std::vector<index_t> state_shape(const case_config& c, bool fixture_layout) {
  if (!c.sse) return fixture_layout ? std::vector<index_t>{c.S, c.H, c.K, c.V} : std::vector<index_t>{c.S, 1, c.H, c.K, c.V};
  return {c.S, 1 + c.N, c.H, c.K, c.V};
}

case_inputs read_inputs(const fs::path& dir, const case_config& c) {
  const std::vector<index_t> qk{c.B, c.T, c.H, c.K}, vv{c.B, c.T, c.H, c.V};
  case_inputs in;
  in.v = read_f32(dir, "v", vv);
  if (c.sse) {
    in.q = read_f32(dir, "q2", qk), in.k = read_f32(dir, "k2", qk), in.g = read_f32(dir, "g2", qk);
    in.q1 = read_f32(dir, "q1", qk), in.k1 = read_f32(dir, "k1", qk), in.g1 = read_f32(dir, "g1", qk);
    in.eta = read_f32(dir, "eta", {c.B, c.T, c.N});
  } else {
    in.q = read_f32(dir, "q", qk), in.k = read_f32(dir, "k", qk), in.g = read_f32(dir, "g", qk);
  }
  if (c.initial_state) {
    in.h0 = read_f32(dir, "h0", state_shape(c, /*fixture_layout=*/true));
    const auto s = state_shape(c, false);
    in.h0 = linstate::tensor<float>(linstate::shape_t::from_range(s.begin(), s.end()), std::move(in.h0.values()));
  }
  check_cu_seqlens_file(dir, c);
  std::error_code ec;
  if (fs::exists(dir / "do.npy", ec)) {
    in.dO = read_f32(dir, "do", vv);
    in.backward = true;
  }
  return in;
}

// ============================================================================================
// Run-time configuration -> static variant types
// ============================================================================================

namespace pt = linstate::partition;
namespace rt = linstate::router;

//! Gated Linear Attention: all four slots at their defaults.
struct gla : linstate::spec<> {};

//! SSE-GLA with every size chosen at run time: N routed partitions plus the shared one, a top-k
//! router whose kw, kr and gate use come from linstate::options.
struct sse : gla {
  using partition = pt::routed<linstate::dynamic, pt::shared>;
  using router = rt::top_k<linstate::dynamic, linstate::dynamic, rt::top_k_options{.dynamic_gates = true}>;
};

//! Calls `f` with the algorithm tag that matches the run-time choice.
template <class F>
void with_algorithm(algorithm a, F&& f) {
  if (a == algorithm::recurrent) f(linstate::recurrent{});
  else f(linstate::chunked<64>{});
}

//! Calls `f` with the strategy tag that matches the run-time choice.
template <class F>
void with_strategy(strategy s, F&& f) {
  if (s == strategy::mask) f(linstate::mask{});
  else f(linstate::varlen{});
}

//! emulk = the router probability multiplies the write (key side), emulq = the read (query side).
rt::gate gate_of(bool emulq, bool emulk) {
  if (emulq && emulk) return rt::gate::both;
  if (emulk) return rt::gate::write;
  if (emulq) return rt::gate::read;
  return rt::gate::none;
}

//! One gradient file: its name (without .npy), its shape in the fixtures' layout, its values.
struct gradient_file {
  std::string name;
  std::vector<index_t> shape;
  linstate::tensor<float> values;
};

//! The outputs, in linstate's layout: o [B,T,H,V] and the final state [S,P,H,K,V]; with do.npy also
//! the gradients, in the order they are listed by --help.
struct case_outputs {
  linstate::tensor<float> o, ht;
  std::vector<gradient_file> grads;
};

case_outputs run_case(const case_config& c, const case_inputs& ci, algorithm algo, strategy strat) {
  linstate::inputs<float> in{.q = ci.q.view(), .k = ci.k.view(), .v = ci.v.view(), .g = ci.g.view()};
  if (c.initial_state) in.initial_state = ci.h0.view();
  if (!c.cu_seqlens.empty()) in.cu_seqlens = c.cu_seqlens;

  const auto s = state_shape(c, false);
  case_outputs out{linstate::tensor<float>({c.B, c.T, c.H, c.V}),
                   linstate::tensor<float>(linstate::shape_t::from_range(s.begin(), s.end())), {}};
  const linstate::outputs<float> o{out.o.view(), out.ht.view()};

  linstate::options opt{.scale = c.scale};
  if (c.sse) {
    in.shared = {.q = ci.q1.view(), .k = ci.k1.view(), .g = ci.g1.view()};
    in.router_logits = ci.eta.view();
    opt.num_partitions = c.N;
    opt.num_writer = c.num_writer;
    opt.num_reader = c.num_reader;
    opt.gates = gate_of(c.emulq, c.emulk);
  }

  // Gradients: one tensor per input of the case, named as the fixture files (SSE: q2 -> dq2 is the
  // gradient of in.q, q1 -> dq1 that of in.shared.q, eta -> deta that of in.router_logits).
  linstate::gradients<float> gv;
  if (ci.backward) {
    const std::vector<index_t> qk{c.B, c.T, c.H, c.K}, vv{c.B, c.T, c.H, c.V};
    auto add = [&](const char* name, const std::vector<index_t>& shape) -> linstate::tensor_view<float> {
      out.grads.push_back({name, shape, linstate::tensor<float>(linstate::shape_t::from_range(shape.begin(), shape.end()))});
      return out.grads.back().values.view();
    };
    out.grads.reserve(10);  // at most 9 files; no reallocation while views into them are handed out
    if (c.sse) {
      gv.shared.q = add("dq1", qk), gv.q = add("dq2", qk);
      gv.shared.k = add("dk1", qk), gv.k = add("dk2", qk);
      gv.v = add("dv", vv);
      gv.shared.g = add("dg1", qk), gv.g = add("dg2", qk);
      gv.router_logits = add("deta", {c.B, c.T, c.N});
    } else {
      gv.q = add("dq", qk), gv.k = add("dk", qk), gv.v = add("dv", vv), gv.g = add("dg", qk);
    }
    if (c.initial_state) {
      // linstate's layout [S,P,H,K,V]; the file gets the fixture's shape (GLA drops P = 1)
      const linstate::tensor_view<float> dh0 = add("dh0", state_shape(c, /*fixture_layout=*/true));
      gv.initial_state = {dh0.data, linstate::shape_t::from_range(s.begin(), s.end())};
    }
  }
  const linstate::cotangents<float> d{.o = ci.dO.view()};

  // Two run-time choices become template arguments; forward<> and backward<> are instantiated for
  // each pair.
  with_algorithm(algo, [&](auto algorithm_tag) {
    with_strategy(strat, [&](auto strategy_tag) {
      if (c.sse) {
        linstate::forward<sse>(linstate::cpu{}, in, o, algorithm_tag, strategy_tag, opt);
        if (ci.backward) linstate::backward<sse>(linstate::cpu{}, in, d, gv, algorithm_tag, strategy_tag, opt);
      } else {
        linstate::forward<gla>(linstate::cpu{}, in, o, algorithm_tag, strategy_tag, opt);
        if (ci.backward) linstate::backward<gla>(linstate::cpu{}, in, d, gv, algorithm_tag, strategy_tag, opt);
      }
    });
  });
  return out;
}

// ============================================================================================
// Output
// ============================================================================================

//! Refuses an OUT_DIR that is the case folder itself (it would overwrite the reference o.npy/ht.npy)
//! or an existing non-directory.
void check_out_dir(const fs::path& case_dir, const fs::path& out_dir) {
  std::error_code ec;
  if (fs::exists(out_dir, ec) && !fs::is_directory(out_dir, ec))
    throw run_error(out_dir, "exists and is not a directory");
  if (fs::exists(out_dir, ec) && fs::equivalent(case_dir, out_dir, ec))
    throw run_error(out_dir, "is the case folder itself; refusing to overwrite its reference o.npy, ht.npy and d*.npy");
}

//! The files a run writes, in order: o.npy, ht.npy, then the gradients (when do.npy was given).
struct output_file {
  std::string name;  // e.g. "o.npy"
  std::vector<index_t> shape;
  const float* data;
};

std::vector<output_file> output_files(const case_config& c, const case_outputs& r) {
  std::vector<output_file> files{{"o.npy", {c.B, c.T, c.H, c.V}, r.o.data()},
                                 {"ht.npy", state_shape(c, /*fixture_layout=*/true), r.ht.data()}};
  for (const gradient_file& g : r.grads) files.push_back({g.name + ".npy", g.shape, g.values.data()});
  return files;
}

//! Writes every output file: all go to temporary names first and are renamed only when all were
//! written, so OUT_DIR never holds a new o.npy without the matching ht.npy and gradients.
void write_outputs(const fs::path& out_dir, const std::vector<output_file>& files) {
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) throw run_error(out_dir, "cannot create the output directory: " + ec.message());

  std::vector<fs::path> tmp;
  for (const output_file& f : files) tmp.push_back(out_dir / ("." + f.name + ".linstate-run.tmp"));
  auto clean = [&] {
    std::error_code ignored;
    for (const fs::path& t : tmp) fs::remove(t, ignored);
  };
  try {
    for (std::size_t i = 0; i < files.size(); ++i) linstate::io::write_npy<float>(tmp[i], files[i].shape, files[i].data);
  } catch (...) {
    clean();
    throw;
  }
  for (std::size_t i = 0; i < files.size(); ++i) {
    fs::rename(tmp[i], out_dir / files[i].name, ec);
    if (ec) {
      clean();
      throw run_error(out_dir / files[i].name, "cannot write: " + ec.message());
    }
  }
}

std::string describe_run(const case_config& c, algorithm algo, strategy strat, bool backward) {
  std::string s = c.name + ": ";
  if (c.sse)
    s += "sse N=" + std::to_string(c.N) + " writers=" + std::to_string(c.num_writer) + " readers=" +
         std::to_string(c.num_reader) + " emulq=" + (c.emulq ? "1" : "0") + " emulk=" + (c.emulk ? "1" : "0") +
         (strat == strategy::mask ? ", mask" : ", varlen");
  else
    s += "gla";
  s += algo == algorithm::recurrent ? ", recurrent" : ", chunked<64>";
  s += ", B=" + std::to_string(c.B) + " T=" + std::to_string(c.T) + " H=" + std::to_string(c.H) +
       " K=" + std::to_string(c.K) + " V=" + std::to_string(c.V) + " S=" + std::to_string(c.S);
  s += backward ? ", forward + backward" : ", forward";
  return s;
}

//! Prints an error as exactly one line on stderr.
void print_error(std::string msg) {
  std::replace(msg.begin(), msg.end(), '\n', ' ');
  std::replace(msg.begin(), msg.end(), '\r', ' ');
  std::cerr << "linstate-run: " << msg << '\n';
}

}  // namespace

int main(int argc, char** argv) {
  command_line cl;
  try {
    cl = parse_command_line(argc, argv);
  } catch (const usage_error& e) {
    print_error(e.what());
    return 2;
  }
  if (cl.help) {
    std::cout << usage_text;
    return 0;
  }
  try {
    // 1. read and check everything
    const case_config c = read_case(cl.case_dir);
    const case_inputs in = read_inputs(cl.case_dir, c);
    check_out_dir(cl.case_dir, cl.out_dir);
    const algorithm algo = cl.algo.value_or(c.mode);
    const strategy strat = cl.strat.value_or(strategy::mask);
    // 2. compute (linstate::error names the tensors; prefix the case folder)
    case_outputs r;
    try {
      r = run_case(c, in, algo, strat);
    } catch (const linstate::error& e) {
      throw run_error(cl.case_dir, e.what());
    }
    // 3. write
    const std::vector<output_file> files = output_files(c, r);
    write_outputs(cl.out_dir, files);
    std::cout << describe_run(c, algo, strat, in.backward) << " -> " << cl.out_dir.string() << ":";
    for (const output_file& f : files) std::cout << ' ' << f.name;
    std::cout << '\n';
    return 0;
  } catch (const std::bad_alloc&) {
    print_error(cl.case_dir.string() + ": out of memory");
  } catch (const std::exception& e) {
    print_error(e.what());  // run_error and npy_error already read "<file>: <problem>"
  }
  return 1;
}
