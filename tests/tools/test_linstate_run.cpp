// SPDX-License-Identifier: Apache-2.0
// Tests of the linstate-run example program (examples/linstate_run.cpp), run as a child process:
//  * every fixture case, with the default settings and with every --algorithm/--strategy pair,
//    reproduces the fixture's o.npy and ht.npy and, since every fixture folder holds do.npy, the
//    gradients d*.npy of every input (dq dk dv dg [dh0] for GLA, dq1 dq2 dk1 dk2 dv dg1 dg2 deta [dh0]
//    for SSE), each with max|a - b| <= 1e-5 * max|b| (fixtures README); without do.npy only o.npy
//    and ht.npy are written;
//  * every class of malformed input (missing or bad case.json, missing field, unknown value, bad
//    .npy magic, unsupported dtype, truncated data, shape that contradicts case.json, missing file,
//    cu_seqlens.npy that disagrees with case.json, malformed do.npy, bad command line) makes it exit
//    non-zero with exactly one line on stderr that names the file, and leaves OUT_DIR untouched.
// The program is found through the environment variable LINSTATE_RUN (set by tests/tools/meson.build),
// the fixtures through LINSTATE_FIXTURES (tests/support/fixtures_path.hpp).
#include <doctest/doctest.h>

#include <linstate/io/npy.hpp>
#include <nlohmann/json.hpp>

#include "fixtures_path.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
namespace lio = linstate::io;
using json = nlohmann::json;
using bytes_t = std::vector<char>;

// --------------------------------------------------------------------------------------------
// Helpers: files, scratch folders, running the program
// --------------------------------------------------------------------------------------------

//! The linstate-run executable, or an empty path when LINSTATE_RUN is not set.
fs::path program() {
  const char* env = std::getenv("LINSTATE_RUN");
  return env && *env ? fs::path(env) : fs::path();
}

bytes_t read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return bytes_t(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_bytes(const fs::path& p, const bytes_t& b) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(b.data(), static_cast<std::streamsize>(b.size()));
  REQUIRE(out.good());
}

std::string read_text(const fs::path& p) {
  const bytes_t b = read_bytes(p);
  return std::string(b.begin(), b.end());
}

//! A fresh, empty folder under the system temp folder, removed with its contents at the end.
class scratch_dir {
 public:
  scratch_dir() {
    std::random_device rd;
    path_ = fs::temp_directory_path() /
            ("linstate-run-test-" + std::to_string(::getpid()) + "-" + std::to_string(rd()) + std::to_string(rd()));
    fs::create_directories(path_);
  }
  ~scratch_dir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  scratch_dir(const scratch_dir&) = delete;
  scratch_dir& operator=(const scratch_dir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

//! Wraps an argument in single quotes for /bin/sh.
std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

struct run_result {
  int status = -1;  // exit status, or -1 when the program did not exit normally
  std::string out, err;
};

//! Runs linstate-run with \p args; stdout and stderr are captured through files in \p scratch.
run_result run_program(const std::vector<std::string>& args, const fs::path& scratch) {
  const fs::path out = scratch / "stdout.txt", err = scratch / "stderr.txt";
  std::string cmd = shell_quote(program().string());
  for (const auto& a : args) cmd += " " + shell_quote(a);
  cmd += " >" + shell_quote(out.string()) + " 2>" + shell_quote(err.string());
  const int raw = std::system(cmd.c_str());
  run_result r;
  if (raw != -1 && WIFEXITED(raw)) r.status = WEXITSTATUS(raw);
  r.out = read_text(out);
  r.err = read_text(err);
  fs::remove(out);
  fs::remove(err);
  return r;
}

//! The case folders of the fixtures (those that hold a case.json), sorted by name.
std::vector<std::string> fixture_cases() {
  std::vector<std::string> names;
  const fs::path dir = linstate_test::fixtures_dir();
  if (dir.empty()) return names;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && fs::exists(e.path() / "case.json")) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

//! max|a - b| / max|b| for two float32 .npy files of the same shape (a: ours, b: the fixture).
double relative_error(const fs::path& ours, const fs::path& ref) {
  const lio::npy_array a = lio::read_npy(ours), b = lio::read_npy(ref);
  CHECK(a.dtype == lio::npy_dtype::f4);
  REQUIRE(a.shape == b.shape);
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  double err = 0, scale = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i])) return INFINITY;
    err = std::max(err, std::abs(x[i] - y[i]));
    scale = std::max(scale, std::abs(y[i]));
  }
  return scale > 0 ? err / scale : err;
}

//! Copies the files of fixture case \p name into \p dst (created), writable, so they can be spoiled.
void copy_case(const std::string& name, const fs::path& dst) {
  fs::create_directories(dst);
  for (const auto& e : fs::directory_iterator(linstate_test::fixtures_dir() / name)) {
    if (!e.is_regular_file()) continue;
    const fs::path to = dst / e.path().filename();
    fs::copy_file(e.path(), to);
    fs::permissions(to, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::add);
  }
}

bool is_empty_dir(const fs::path& p) { return fs::is_directory(p) && fs::directory_iterator(p) == fs::directory_iterator(); }

//! Checks the error contract: non-zero exit, exactly one line on stderr, containing \p must_name.
void check_one_line_error(const run_result& r, const std::string& must_name) {
  CAPTURE(r.err);
  CHECK(r.status > 0);
  CHECK(r.err.size() > 1);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK((!r.err.empty() && r.err.back() == '\n'));
  CHECK(r.err.find(must_name) != std::string::npos);
}

// --------------------------------------------------------------------------------------------
// Ways to spoil a case
// --------------------------------------------------------------------------------------------

//! Applies \p edit to the parsed case.json and writes it back.
void edit_json(const fs::path& case_dir, const std::function<void(json&)>& edit) {
  json j = json::parse(read_text(case_dir / "case.json"));
  edit(j);
  const std::string s = j.dump(1);
  write_bytes(case_dir / "case.json", bytes_t(s.begin(), s.end()));
}

//! Replaces \p file by a valid float32 .npy of shape \p shape (zeros).
void write_zeros(const fs::path& file, const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  const std::vector<float> zeros(static_cast<std::size_t>(n), 0.f);
  fs::remove(file);
  lio::write_npy<float>(file, shape, zeros.data());
}

//! Shape of a .npy file.
std::vector<std::int64_t> shape_of(const fs::path& file) { return lio::read_npy(file).shape; }

//! One class of malformed input: which fixture to start from, how to spoil it, and which file
//! the error line must name (relative to the case folder) plus an extra word it must contain.
struct bad_input {
  const char* what;
  const char* base;  // fixture case copied first
  std::function<void(const fs::path&)> spoil;
  const char* file;  // the file the error must name
  const char* word;  // another word the error must contain ("" = none)
};

const std::string sse_case = "sse_varlen_n4k1_cuseqlens";  // SSE, packed sequences, h0
const std::string gla_case = "gla_chunk_h0";               // GLA, h0

std::vector<bad_input> bad_inputs() {
  return {
      // --- case.json --------------------------------------------------------------------------
      {"missing case.json", "gla_chunk", [](const fs::path& d) { fs::remove(d / "case.json"); }, "case.json", "missing"},
      {"bad JSON", "gla_chunk",
       [](const fs::path& d) {
         const std::string s = "{\"kind\": \"gla\", \"B\": 1,";
         write_bytes(d / "case.json", bytes_t(s.begin(), s.end()));
       },
       "case.json", "JSON"},
      {"JSON that is not an object", "gla_chunk",
       [](const fs::path& d) {
         const std::string s = "[1, 2, 3]\n";
         write_bytes(d / "case.json", bytes_t(s.begin(), s.end()));
       },
       "case.json", "object"},
      {"missing field scale (GLA)", "gla_chunk", [](const fs::path& d) { edit_json(d, [](json& j) { j.erase("scale"); }); },
       "case.json", "scale"},
      {"missing field num_writer (SSE)", "sse_mask_n4k1",
       [](const fs::path& d) { edit_json(d, [](json& j) { j.erase("num_writer"); }); }, "case.json", "num_writer"},
      {"missing field cu_seqlens", "gla_chunk", [](const fs::path& d) { edit_json(d, [](json& j) { j.erase("cu_seqlens"); }); },
       "case.json", "cu_seqlens"},
      {"unknown kind", "gla_chunk", [](const fs::path& d) { edit_json(d, [](json& j) { j["kind"] = "foo"; }); }, "case.json",
       "foo"},
      {"unknown mode", "sse_mask_n4k1", [](const fs::path& d) { edit_json(d, [](json& j) { j["mode"] = "bar"; }); },
       "case.json", "bar"},
      {"field of the wrong type", "sse_mask_n4k1", [](const fs::path& d) { edit_json(d, [](json& j) { j["N"] = "four"; }); },
       "case.json", "'N'"},
      {"initial_state not a boolean", "gla_chunk_h0",
       [](const fs::path& d) { edit_json(d, [](json& j) { j["initial_state"] = 1; }); }, "case.json", "initial_state"},
      {"num_writer > N", "sse_mask_n4k1", [](const fs::path& d) { edit_json(d, [](json& j) { j["num_writer"] = 5; }); },
       "case.json", "num_writer"},
      {"zero size", "gla_chunk", [](const fs::path& d) { edit_json(d, [](json& j) { j["H"] = 0; }); }, "case.json", "'H'"},
      {"S contradicts B", "gla_recurrent_b2", [](const fs::path& d) { edit_json(d, [](json& j) { j["S"] = 1; }); },
       "case.json", "'S'"},
      {"cu_seqlens does not end at T", sse_case.c_str(),
       [](const fs::path& d) { edit_json(d, [](json& j) { j["cu_seqlens"] = {0, 33, 71}; }); }, "case.json", "cu_seqlens"},
      // --- .npy files -------------------------------------------------------------------------
      {"bad magic", sse_case.c_str(),
       [](const fs::path& d) {
         bytes_t b = read_bytes(d / "q2.npy");
         b[1] = 'X';
         write_bytes(d / "q2.npy", b);
       },
       "q2.npy", "magic"},
      {"unsupported dtype <f2", sse_case.c_str(),
       [](const fs::path& d) {
         // A well-formed half-precision file of the right shape: only the dtype is wrong.
         const auto shape = shape_of(d / "k2.npy");
         std::int64_t n = 1;
         for (auto x : shape) n *= x;
         const std::vector<std::uint16_t> halves(static_cast<std::size_t>(n), 0x3C00);  // 1.0
         const auto img = lio::serialize_npy(lio::npy_dtype::f2, shape, halves.data());
         write_bytes(d / "k2.npy", bytes_t(img.begin(), img.end()));
       },
       "k2.npy", "<f2"},
      {"<f2 in the header of float32 data", gla_case.c_str(),
       [](const fs::path& d) {
         bytes_t b = read_bytes(d / "g.npy");
         const std::string h(b.begin(), b.begin() + 64);
         const auto at = h.find("<f4");
         REQUIRE(at != std::string::npos);
         b[at + 2] = '2';
         write_bytes(d / "g.npy", b);
       },
       "g.npy", ""},
      {"truncated data", gla_case.c_str(),
       [](const fs::path& d) {
         bytes_t b = read_bytes(d / "v.npy");
         b.resize(b.size() - 7);
         write_bytes(d / "v.npy", b);
       },
       "v.npy", "truncated"},
      {"truncated header", sse_case.c_str(),
       [](const fs::path& d) {
         bytes_t b = read_bytes(d / "g1.npy");
         b.resize(20);
         write_bytes(d / "g1.npy", b);
       },
       "g1.npy", ""},
      {"q shape contradicts K", gla_case.c_str(),
       [](const fs::path& d) {
         auto s = shape_of(d / "q.npy");
         s[3] += 1;
         write_zeros(d / "q.npy", s);
       },
       "q.npy", "shape"},
      {"K in case.json contradicts the files", gla_case.c_str(),
       [](const fs::path& d) { edit_json(d, [](json& j) { j["K"] = 16; }); }, "q.npy", "shape"},
      {"eta shape contradicts N", sse_case.c_str(),
       [](const fs::path& d) {
         auto s = shape_of(d / "eta.npy");
         s[2] += 1;
         write_zeros(d / "eta.npy", s);
       },
       "eta.npy", "shape"},
      {"h0 without the shared partition", sse_case.c_str(),
       [](const fs::path& d) {
         auto s = shape_of(d / "h0.npy");
         s[1] -= 1;
         write_zeros(d / "h0.npy", s);
       },
       "h0.npy", "shape"},
      {"GLA h0 of rank 5", gla_case.c_str(),
       [](const fs::path& d) {
         auto s = shape_of(d / "h0.npy");
         s.insert(s.begin() + 1, 1);
         write_zeros(d / "h0.npy", s);
       },
       "h0.npy", "shape"},
      {"missing input file", sse_case.c_str(), [](const fs::path& d) { fs::remove(d / "g1.npy"); }, "g1.npy", "missing"},
      {"missing h0 with initial_state true", gla_case.c_str(), [](const fs::path& d) { fs::remove(d / "h0.npy"); },
       "h0.npy", "missing"},
      {"missing cu_seqlens.npy", sse_case.c_str(), [](const fs::path& d) { fs::remove(d / "cu_seqlens.npy"); },
       "cu_seqlens.npy", "missing"},
      {"cu_seqlens.npy disagrees with case.json", sse_case.c_str(),
       [](const fs::path& d) {
         const std::int64_t shape[] = {3};
         const std::int64_t cu[] = {0, 30, 70};
         fs::remove(d / "cu_seqlens.npy");
         lio::write_npy<std::int64_t>(d / "cu_seqlens.npy", shape, cu);
       },
       "cu_seqlens.npy", ""},
      {"cu_seqlens.npy as int32", sse_case.c_str(),
       [](const fs::path& d) {
         const std::int64_t shape[] = {3};
         const std::int32_t cu[] = {0, 33, 70};
         fs::remove(d / "cu_seqlens.npy");
         lio::write_npy<std::int32_t>(d / "cu_seqlens.npy", shape, cu);
       },
       "cu_seqlens.npy", "dtype"},
      // --- do.npy (the backward's cotangent): a bad one fails the whole run, o.npy included -----
      {"do.npy shape contradicts V", gla_case.c_str(),
       [](const fs::path& d) {
         auto s = shape_of(d / "do.npy");
         s[3] += 1;
         write_zeros(d / "do.npy", s);
       },
       "do.npy", "shape"},
      {"do.npy with the shape of q (K != V)", gla_case.c_str(),
       [](const fs::path& d) { write_zeros(d / "do.npy", shape_of(d / "q.npy")); }, "do.npy", "shape"},
      {"do.npy of rank 3", sse_case.c_str(),
       [](const fs::path& d) {
         auto s = shape_of(d / "do.npy");
         s.pop_back();
         write_zeros(d / "do.npy", s);
       },
       "do.npy", "shape"},
      {"truncated do.npy", sse_case.c_str(),
       [](const fs::path& d) {
         bytes_t b = read_bytes(d / "do.npy");
         b.resize(b.size() - 5);
         write_bytes(d / "do.npy", b);
       },
       "do.npy", "truncated"},
      {"do.npy as float16", "gla_recurrent_b2",
       [](const fs::path& d) {
         const auto shape = shape_of(d / "do.npy");
         std::int64_t n = 1;
         for (auto x : shape) n *= x;
         const std::vector<std::uint16_t> halves(static_cast<std::size_t>(n), 0x3C00);
         const auto img = lio::serialize_npy(lio::npy_dtype::f2, shape, halves.data());
         write_bytes(d / "do.npy", bytes_t(img.begin(), img.end()));
       },
       "do.npy", "dtype"},
      {"cu_seqlens.npy in an unpacked case", "gla_chunk",
       [](const fs::path& d) {
         const std::int64_t shape[] = {2};
         const std::int64_t cu[] = {0, 66};
         lio::write_npy<std::int64_t>(d / "cu_seqlens.npy", shape, cu);
       },
       "cu_seqlens.npy", ""},
  };
}

//! The gradient files linstate-run must write for a case with do.npy: one per input of the case
//! (fixtures README), dh0 only with h0. Sorted.
std::vector<std::string> expected_gradients(const json& cfg) {
  std::vector<std::string> g = cfg["kind"] == "sse"
                                   ? std::vector<std::string>{"dq1", "dq2", "dk1", "dk2", "dv", "dg1", "dg2", "deta"}
                                   : std::vector<std::string>{"dq", "dk", "dv", "dg"};
  if (cfg["initial_state"] == true) g.push_back("dh0");
  std::sort(g.begin(), g.end());
  return g;
}

//! The d*.npy files of a fixture folder other than do.npy (the stored gradients), stems, sorted.
std::vector<std::string> stored_gradients(const fs::path& case_dir) {
  std::vector<std::string> g;
  for (const auto& e : fs::directory_iterator(case_dir)) {
    const std::string stem = e.path().stem().string();
    if (e.path().extension() == ".npy" && stem.size() > 1 && stem[0] == 'd' && stem != "do") g.push_back(stem);
  }
  std::sort(g.begin(), g.end());
  return g;
}

}  // namespace

// --------------------------------------------------------------------------------------------
// Tests
// --------------------------------------------------------------------------------------------

TEST_CASE("linstate-run: --help") {
  REQUIRE_MESSAGE(!program().empty(), "set LINSTATE_RUN to the path of the linstate-run executable");
  scratch_dir tmp;
  const run_result r = run_program({"--help"}, tmp.path());
  CHECK(r.status == 0);
  CHECK(r.out.find("usage: linstate-run CASE_DIR OUT_DIR") != std::string::npos);
  // the backward outputs are documented
  for (const char* word : {"do.npy", "dh0.npy", "deta", "dq1"}) {
    CAPTURE(word);
    CHECK(r.out.find(word) != std::string::npos);
  }
  CHECK(r.err.empty());
}

//! Runs every fixture case with every algorithm and strategy, plus \p backend_args (e.g. --backend
//! cuda), and checks the outputs and gradients against the fixtures.
void check_every_case(const std::vector<std::string>& backend_args) {
  REQUIRE_MESSAGE(!program().empty(), "set LINSTATE_RUN to the path of the linstate-run executable");
  const std::vector<std::string> cases = fixture_cases();
  REQUIRE_MESSAGE(!cases.empty(), "no fixture cases found (set LINSTATE_FIXTURES)");
  const fs::path fixtures = linstate_test::fixtures_dir();
  const std::vector<std::vector<std::string>> option_sets = {
      {},  // defaults: the case's mode, mask
      {"--algorithm", "recurrent", "--strategy", "mask"},
      {"--algorithm", "recurrent", "--strategy", "varlen"},
      {"--algorithm=chunked", "--strategy=mask"},
      {"--algorithm", "chunked", "--strategy", "varlen"},
  };
  scratch_dir tmp;
  int runs = 0, gradient_checks = 0, expected_gradient_checks = 0;
  for (const std::string& name : cases) {
    const json cfg = json::parse(read_text(fixtures / name / "case.json"));
    // every public case holds do.npy and the gradients of all its inputs (README), so the backward runs
    REQUIRE(fs::exists(fixtures / name / "do.npy"));
    const std::vector<std::string> grads = expected_gradients(cfg);
    CAPTURE(name);
    REQUIRE(stored_gradients(fixtures / name) == grads);
    expected_gradient_checks += static_cast<int>(grads.size() * option_sets.size());
    for (std::size_t i = 0; i < option_sets.size(); ++i) {
      const fs::path out = tmp.path() / (name + "-" + std::to_string(i));  // does not exist yet: created
      std::vector<std::string> args{(fixtures / name).string(), out.string()};
      args.insert(args.end(), option_sets[i].begin(), option_sets[i].end());
      args.insert(args.end(), backend_args.begin(), backend_args.end());
      const run_result r = run_program(args, tmp.path());
      CAPTURE(name);
      CAPTURE(i);
      CAPTURE(r.err);
      REQUIRE(r.status == 0);
      CHECK(r.err.empty());
      // Exactly the outputs and one gradient per input, nothing left behind (no temporaries).
      std::vector<std::string> files, expected{"ht.npy", "o.npy"};
      for (const auto& e : fs::directory_iterator(out)) files.push_back(e.path().filename().string());
      for (const std::string& g : grads) expected.push_back(g + ".npy");
      std::sort(files.begin(), files.end());
      std::sort(expected.begin(), expected.end());
      CHECK(files == expected);
      for (const std::string& array : expected) {
        CAPTURE(array);
        if (!fs::exists(out / array)) continue;  // already reported by the list check
        CHECK(relative_error(out / array, fixtures / name / array) <= 1e-5);
        gradient_checks += array[0] == 'd';
      }
      CHECK(r.out.find("forward + backward") != std::string::npos);
      if (i == 0) {  // the defaults follow the case: mode picks the algorithm, SSE uses mask
        const bool chunk = cfg["mode"] == "chunk";
        CHECK(r.out.find(chunk ? "chunked<64>" : "recurrent") != std::string::npos);
        if (cfg["kind"] == "sse") CHECK(r.out.find("mask") != std::string::npos);
      }
      ++runs;
    }
  }
  CHECK(runs == static_cast<int>(cases.size() * option_sets.size()));
  CHECK(gradient_checks == expected_gradient_checks);
}

TEST_CASE("linstate-run reproduces every fixture case, forward and gradients, with every algorithm and strategy") {
  check_every_case({});
}

// --backend cuda: a linstate-run built without CUDA refuses it (exit 2, one line); one built with
// CUDA but on a machine without a GPU fails the run with one line naming the missing device; on a
// GPU it must reproduce every case as the CPU does (same outputs, tolerances and messages).
TEST_CASE("linstate-run --backend cuda: every fixture case on the GPU, or a clear refusal") {
  REQUIRE_MESSAGE(!program().empty(), "set LINSTATE_RUN to the path of the linstate-run executable");
  REQUIRE_MESSAGE(!linstate_test::fixtures_dir().empty(), "no fixtures found (set LINSTATE_FIXTURES)");
  scratch_dir tmp;
  const fs::path out = tmp.path() / "probe";
  const run_result r =
      run_program({(linstate_test::fixtures_dir() / "gla_chunk").string(), out.string(), "--backend", "cuda"}, tmp.path());
  CAPTURE(r.err);
  if (r.status == 2) {
    check_one_line_error(r, "built without CUDA");
    CHECK(!fs::exists(out));
    MESSAGE("linstate-run was built without CUDA: --backend cuda refused as documented");
  } else if (r.status == 1 && r.err.find("no usable CUDA device") != std::string::npos) {
    check_one_line_error(r, "no usable CUDA device");
    CHECK(!fs::exists(out / "o.npy"));
    MESSAGE("no GPU here: --backend cuda fails the run with one line, the GPU cases are not run");
  } else {
    REQUIRE(r.status == 0);
    CHECK(r.out.find("on linstate::cuda") != std::string::npos);
    check_every_case({"--backend", "cuda"});
  }
}

TEST_CASE("linstate-run: the outputs are written all or none (an output name taken by a directory)") {
  REQUIRE_MESSAGE(!program().empty(), "set LINSTATE_RUN to the path of the linstate-run executable");
  REQUIRE_MESSAGE(!linstate_test::fixtures_dir().empty(), "no fixtures found (set LINSTATE_FIXTURES)");
  const std::string case_dir = (linstate_test::fixtures_dir() / "gla_chunk").string();
  scratch_dir tmp;
  for (const char* blocked : {"ht.npy", "o.npy", "dg.npy"}) {
    CAPTURE(blocked);
    const fs::path out = tmp.path() / (std::string("out-") + blocked);
    const bool o_blocked = std::string(blocked) == "o.npy";
    fs::create_directories(out / blocked);                                     // a directory where an output must go
    if (!o_blocked) write_bytes(out / "o.npy", bytes_t{'o', 'l', 'd'});        // and old outputs of an earlier run
    write_bytes(out / "dq.npy", bytes_t{'o', 'l', 'd'});
    const run_result r = run_program({case_dir, out.string()}, tmp.path());
    check_one_line_error(r, (out / blocked).string());
    CHECK(r.err.find(".tmp") == std::string::npos);  // the real file is named, not the temporary
    // nothing replaced, nothing added, nothing left behind
    if (!o_blocked) CHECK(read_bytes(out / "o.npy") == bytes_t{'o', 'l', 'd'});
    CHECK(read_bytes(out / "dq.npy") == bytes_t{'o', 'l', 'd'});
    CHECK(fs::is_directory(out / blocked));
    std::vector<std::string> files;
    for (const auto& e : fs::directory_iterator(out)) files.push_back(e.path().filename().string());
    std::sort(files.begin(), files.end());
    std::vector<std::string> want{"dq.npy", "o.npy"};
    if (!o_blocked) want.push_back(blocked);
    std::sort(want.begin(), want.end());
    CHECK(files == want);
  }
}

TEST_CASE("linstate-run: without do.npy only the forward outputs are written") {
  REQUIRE_MESSAGE(!program().empty(), "set LINSTATE_RUN to the path of the linstate-run executable");
  REQUIRE_MESSAGE(!linstate_test::fixtures_dir().empty(), "no fixtures found (set LINSTATE_FIXTURES)");
  for (const std::string name : {"gla_chunk_h0", "sse_mask_n8k2"}) {
    CAPTURE(name);
    scratch_dir tmp;
    const fs::path case_dir = tmp.path() / "case", out = tmp.path() / "out";
    copy_case(name, case_dir);
    fs::remove(case_dir / "do.npy");
    const run_result r = run_program({case_dir.string(), out.string(), "--strategy", "varlen"}, tmp.path());
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    std::vector<std::string> files;
    for (const auto& e : fs::directory_iterator(out)) files.push_back(e.path().filename().string());
    std::sort(files.begin(), files.end());
    CHECK(files == std::vector<std::string>{"ht.npy", "o.npy"});
    CHECK(relative_error(out / "o.npy", case_dir / "o.npy") <= 1e-5);
    CHECK(r.out.find("forward + backward") == std::string::npos);
  }
}

TEST_CASE("linstate-run: the gradients follow do.npy (a scaled cotangent scales every gradient)") {
  // Guards against a program that would copy or ignore do.npy: with do -> 2·do every gradient doubles
  // (the loss Σ o·do is linear in do), and o / ht do not change.
  REQUIRE_MESSAGE(!program().empty(), "set LINSTATE_RUN to the path of the linstate-run executable");
  REQUIRE_MESSAGE(!linstate_test::fixtures_dir().empty(), "no fixtures found (set LINSTATE_FIXTURES)");
  const std::string name = "sse_mask_n4k1";
  scratch_dir tmp;
  const fs::path case_dir = tmp.path() / "case", out = tmp.path() / "out";
  copy_case(name, case_dir);
  const lio::npy_array d = lio::read_npy(case_dir / "do.npy");
  std::vector<float> twice = d.to_vector<float>();
  for (float& x : twice) x *= 2.f;
  fs::remove(case_dir / "do.npy");
  lio::write_npy<float>(case_dir / "do.npy", d.shape, twice.data());
  const run_result r = run_program({case_dir.string(), out.string()}, tmp.path());
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  CHECK(relative_error(out / "o.npy", case_dir / "o.npy") <= 1e-5);
  const json cfg = json::parse(read_text(case_dir / "case.json"));
  for (const std::string& g : expected_gradients(cfg)) {
    CAPTURE(g);
    const auto ours = lio::read_npy(out / (g + ".npy")).to_vector<double>();
    const auto ref = lio::read_npy(case_dir / (g + ".npy")).to_vector<double>();
    REQUIRE(ours.size() == ref.size());
    double err = 0, scale = 0;
    for (std::size_t i = 0; i < ours.size(); ++i) {
      err = std::max(err, std::abs(ours[i] - 2 * ref[i]));
      scale = std::max(scale, std::abs(2 * ref[i]));
    }
    REQUIRE(scale > 0);
    CHECK(err <= 1e-5 * scale);
  }
}

TEST_CASE("linstate-run: malformed inputs give one error line naming the file and write nothing") {
  REQUIRE_MESSAGE(!program().empty(), "set LINSTATE_RUN to the path of the linstate-run executable");
  REQUIRE_MESSAGE(!linstate_test::fixtures_dir().empty(), "no fixtures found (set LINSTATE_FIXTURES)");
  for (const bad_input& bad : bad_inputs()) {
    CAPTURE(bad.what);
    scratch_dir tmp;
    const fs::path case_dir = tmp.path() / "case";
    copy_case(bad.base, case_dir);
    bad.spoil(case_dir);

    // OUT_DIR exists and is empty: it must stay empty.
    const fs::path out = tmp.path() / "out";
    fs::create_directories(out);
    const run_result r = run_program({case_dir.string(), out.string()}, tmp.path());
    check_one_line_error(r, (case_dir / bad.file).string());
    if (*bad.word) CHECK(r.err.find(bad.word) != std::string::npos);
    CHECK(is_empty_dir(out));

    // OUT_DIR does not exist: it must not be created; with options given the result is the same.
    const fs::path missing = tmp.path() / "not-created";
    const run_result r2 =
        run_program({case_dir.string(), missing.string(), "--algorithm", "recurrent", "--strategy", "varlen"}, tmp.path());
    check_one_line_error(r2, (case_dir / bad.file).string());
    CHECK(!fs::exists(missing));
  }
}

TEST_CASE("linstate-run: bad command lines give one error line and write nothing") {
  REQUIRE_MESSAGE(!program().empty(), "set LINSTATE_RUN to the path of the linstate-run executable");
  REQUIRE_MESSAGE(!linstate_test::fixtures_dir().empty(), "no fixtures found (set LINSTATE_FIXTURES)");
  const std::string case_dir = (linstate_test::fixtures_dir() / "gla_chunk").string();
  scratch_dir tmp;
  const fs::path out = tmp.path() / "out";
  fs::create_directories(out);
  struct bad_command {
    std::vector<std::string> args;
    const char* word;  // the error must contain it
  };
  const std::vector<bad_command> commands = {
      {{case_dir, out.string(), "--frobnicate"}, "--frobnicate"},
      {{case_dir, out.string(), "--algorithm", "fast"}, "fast"},
      {{case_dir, out.string(), "--strategy=dense"}, "dense"},
      {{case_dir, out.string(), "--backend", "tpu"}, "tpu"},
      {{case_dir, out.string(), "--algorithm"}, "--algorithm"},
      {{case_dir}, "OUT_DIR"},
      {{case_dir, out.string(), "extra"}, "OUT_DIR"},
      {{}, "OUT_DIR"},
  };
  for (const bad_command& c : commands) {
    std::string joined;
    for (const auto& a : c.args) joined += a + " ";
    CAPTURE(joined);
    const run_result r = run_program(c.args, tmp.path());
    check_one_line_error(r, c.word);
    CHECK(is_empty_dir(out));
  }
}

TEST_CASE("linstate-run: a missing case folder or an unusable OUT_DIR is an error") {
  REQUIRE_MESSAGE(!program().empty(), "set LINSTATE_RUN to the path of the linstate-run executable");
  REQUIRE_MESSAGE(!linstate_test::fixtures_dir().empty(), "no fixtures found (set LINSTATE_FIXTURES)");
  scratch_dir tmp;
  const fs::path out = tmp.path() / "out";
  fs::create_directories(out);

  // A case folder that does not exist.
  const fs::path nowhere = tmp.path() / "no-such-case";
  run_result r = run_program({nowhere.string(), out.string()}, tmp.path());
  check_one_line_error(r, nowhere.string());
  CHECK(is_empty_dir(out));

  // OUT_DIR is the case folder: the reference o.npy / ht.npy must not be overwritten.
  const fs::path case_dir = tmp.path() / "case";
  copy_case("gla_chunk", case_dir);
  const bytes_t o_before = read_bytes(case_dir / "o.npy");
  r = run_program({case_dir.string(), case_dir.string()}, tmp.path());
  check_one_line_error(r, case_dir.string());
  CHECK(read_bytes(case_dir / "o.npy") == o_before);

  // OUT_DIR is an existing file.
  const fs::path file = tmp.path() / "a-file";
  write_bytes(file, bytes_t{'x'});
  r = run_program({case_dir.string(), file.string()}, tmp.path());
  check_one_line_error(r, file.string());
  CHECK(read_bytes(file) == bytes_t{'x'});
}
