// SPDX-License-Identifier: Apache-2.0
//! \file examples/linstate_run.cpp
//! \brief `linstate-run`: runs one golden-data case folder (see shared/fixtures/README.md) through
//! linstate on the CPU or, when built with CUDA, on the GPU (`--backend cuda`), and writes the output `o.npy` and the final state `ht.npy`; when the folder
//! holds the output cotangent `do.npy`, it also runs the backward pass and writes the gradient
//! `d<name>.npy` of every input of the case.
//!
//! \verbatim
//!   linstate-run CASE_DIR OUT_DIR [--algorithm recurrent|chunked] [--strategy mask|varlen]
//!                [--backend cpu|cuda]
//! \endverbatim
//!
//! The two backends run the same code (`linstate_run::run_case` in linstate_run.hpp, over
//! linstate::testing::cpu_runner or linstate::testing::cuda_runner): same outputs, checks and
//! messages. The GPU part is linstate_run_cuda.cu, compiled by nvcc when linstate is built with CUDA
//! (LINSTATE_RUN_CUDA = 1); without it `--backend cuda` is refused with exit status 2.
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
//! written to temporary names and moved into place at the end, all or none: a failed run leaves
//! OUT_DIR as it was (a malformed `do.npy` fails the whole run: not even o.npy is written; an output
//! name taken by a directory fails it before any file is replaced, and a failure while moving puts
//! back the files already replaced).
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
#include <linstate/testing/gradcheck.hpp>
#include <nlohmann/json.hpp>

#include "linstate_run.hpp"

#ifndef LINSTATE_RUN_CUDA
#define LINSTATE_RUN_CUDA 0
#endif

namespace linstate_run {
#if LINSTATE_RUN_CUDA
//! The case on linstate::cuda (linstate_run_cuda.cu): run_case over linstate::testing::cuda_runner.
//! Throws linstate::error when there is no usable GPU.
case_outputs run_case_cuda(const case_config& c, const case_inputs& ci, algorithm algo, strategy strat);
#endif
}  // namespace linstate_run

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using linstate::index_t;
using namespace linstate_run;

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

enum class backend { cpu, cuda };

struct command_line {
  fs::path case_dir, out_dir;
  std::optional<algorithm> algo;  // empty: the case's `mode` decides
  std::optional<strategy> strat;  // empty: mask
  backend where = backend::cpu;
  bool help = false;
};

constexpr const char* usage_text =
    "usage: linstate-run CASE_DIR OUT_DIR [--algorithm recurrent|chunked] [--strategy mask|varlen]\n"
    "                    [--backend cpu|cuda]\n"
    "\n"
    "Runs the operator described by CASE_DIR/case.json (a golden-data case folder, see\n"
    "shared/fixtures/README.md) on the CPU (or the GPU) with linstate, reading the input .npy files of the\n"
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
    "  --backend B     cpu (Eigen, OpenMP threads) or cuda (the first GPU; needs a linstate-run\n"
    "                  built with CUDA). Default: cpu. Same outputs, checks and messages.\n"
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
    } else if (auto b = value_of(i, arg, "--backend")) {
      if (*b == "cpu") cl.where = backend::cpu;
      else if (*b == "cuda") cl.where = backend::cuda;
      else throw usage_error("unknown --backend '" + *b + "' (expected cpu or cuda)");
      if (cl.where == backend::cuda && !LINSTATE_RUN_CUDA)
        throw usage_error("--backend cuda: this linstate-run was built without CUDA (configure linstate with nvcc found, -Dcuda=enabled)");
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

//! Writes every output file, all or none. Each goes to a temporary name first; then every
//! destination is checked (a directory or other non-file in the way fails the run before anything
//! is replaced); then the old files are moved aside, the new ones moved in, and the old ones
//! removed. When a move fails, the new files already in place are taken out and the old ones put
//! back, so OUT_DIR never holds a new o.npy without the matching ht.npy and gradients. Messages name
//! the real file, not the temporary.
void write_outputs(const fs::path& out_dir, const std::vector<output_file>& files) {
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) throw run_error(out_dir, "cannot create the output directory: " + ec.message());

  const std::size_t n = files.size();
  std::vector<fs::path> dest, tmp, old;
  for (const output_file& f : files) {
    dest.push_back(out_dir / f.name);
    tmp.push_back(out_dir / ("." + f.name + ".linstate-run.tmp"));
    old.push_back(out_dir / ("." + f.name + ".linstate-run.old"));
  }
  std::vector<bool> had_old(n, false), moved_in(n, false);
  auto remove_all = [](const std::vector<fs::path>& paths) {
    std::error_code ignored;
    for (const fs::path& p : paths) fs::remove(p, ignored);
  };
  // Undoes steps 3-4 for every file touched so far, then removes the temporaries.
  auto roll_back = [&] {
    std::error_code ignored;
    for (std::size_t i = 0; i < n; ++i) {
      if (moved_in[i]) fs::remove(dest[i], ignored);
      if (had_old[i]) fs::rename(old[i], dest[i], ignored);
    }
    remove_all(tmp);
  };

  // 1. every new file under its temporary name
  for (std::size_t i = 0; i < n; ++i) {
    try {
      linstate::io::write_npy<float>(tmp[i], files[i].shape, files[i].data);
    } catch (const std::exception& e) {
      remove_all(tmp);
      throw run_error(dest[i], std::string("cannot write: ") + e.what());
    }
  }
  // 2. every destination must be a regular file or absent
  for (std::size_t i = 0; i < n; ++i) {
    const fs::file_status st = fs::symlink_status(dest[i], ec);
    if (fs::exists(st) && !fs::is_regular_file(st)) {
      remove_all(tmp);
      throw run_error(dest[i], "cannot write: exists and is not a regular file (a directory?); nothing was written");
    }
  }
  // 3. the old files aside, 4. the new ones in
  for (std::size_t i = 0; i < n; ++i) {
    if (fs::exists(fs::symlink_status(dest[i], ec))) {
      fs::rename(dest[i], old[i], ec);
      if (ec) {
        roll_back();
        throw run_error(dest[i], "cannot replace: " + ec.message() + "; nothing was written");
      }
      had_old[i] = true;
    }
    fs::rename(tmp[i], dest[i], ec);
    if (ec) {
      roll_back();
      throw run_error(dest[i], "cannot write: " + ec.message() + "; nothing was written");
    }
    moved_in[i] = true;
  }
  // 5. the old files go
  remove_all(old);
}

std::string describe_run(const case_config& c, algorithm algo, strategy strat, bool backward, backend where) {
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
  if (where == backend::cuda) s += ", on linstate::cuda";
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
#if LINSTATE_RUN_CUDA
      if (cl.where == backend::cuda) r = run_case_cuda(c, in, algo, strat);
      else
#endif
        r = run_case(linstate::testing::cpu_runner{.be = linstate::cpu{}}, c, in, algo, strat);
    } catch (const linstate::error& e) {
      throw run_error(cl.case_dir, e.what());
    }
    // 3. write
    const std::vector<output_file> files = output_files(c, r);
    write_outputs(cl.out_dir, files);
    std::cout << describe_run(c, algo, strat, in.backward, cl.where) << " -> " << cl.out_dir.string() << ":";
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
