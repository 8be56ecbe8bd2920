// SPDX-License-Identifier: Apache-2.0
// Tests of the linstate-bench program (examples/bench/), run as a child process at small sizes:
//  * decode of GLA and SSE-n4k1s writes one JSON document whose results carry the sizes, positive
//    finite times and the state bytes of SPEC §11 C8 (SSE n4k1s: twice GLA's, 2.5× less than all 5
//    partitions), and the roofline when it is measured;
//  * prefill and train of the delta rule run (T = 16) and report their mode and algorithm;
//  * --markdown prints a table; bad command lines exit 2 with one message naming the argument; bad
//    sizes exit 1 naming the field; --backend cuda either runs (a GPU build on a GPU), or says that
//    there is no usable device (a GPU build without one), or that the build has no CUDA backend.
// The program is found through the environment variable LINSTATE_BENCH (tests/tools/meson.build).
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

struct run_result {
  int status = -1;
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

//! Runs linstate-bench with `args` (a shell-quoted string), capturing stdout and stderr.
run_result bench(const std::string& args) {
  const char* exe = std::getenv("LINSTATE_BENCH");
  REQUIRE_MESSAGE(exe, "LINSTATE_BENCH is not set");
  const fs::path dir = fs::temp_directory_path() / ("linstate_bench_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string cmd = std::string("'") + exe + "' " + args + " >'" + (dir / "out").string() + "' 2>'" + (dir / "err").string() + "'";
  const int raw = std::system(cmd.c_str());
  run_result r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = slurp(dir / "out"), r.err = slurp(dir / "err");
  return r;
}

fs::path scratch(const std::string& name) {
  return fs::temp_directory_path() / ("linstate_bench_" + std::to_string(::getpid()) + "_" + name);
}

const std::string small = " --B 2 --H 2 --K 16 --V 16 --reps 3 --warmup 1 ";

}  // namespace

TEST_CASE("linstate-bench: decode of gla and sse_n4k1s as JSON, with the C8 state bytes") {
  const fs::path out = scratch("decode.json");
  const run_result r = bench("--variant gla,sse_n4k1s --mode decode" + small + "--threads 1 --json '" + out.string() + "'");
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("linstate::bench decode gla") != std::string::npos);  // the text blocks on stdout
  const json doc = json::parse(slurp(out));
  CHECK(doc["format"] == "linstate-bench");
  REQUIRE(doc["results"].size() == 2);
  const json& g = doc["results"][0];
  const json& s = doc["results"][1];
  CHECK(g["variant"] == "gla");
  CHECK(s["variant"] == "sse_n4k1s");
  for (const json* j : {&g, &s}) {
    CHECK((*j)["mode"] == "decode");
    CHECK((*j)["backend"] == "cpu");
    CHECK((*j)["algorithm"] == "recurrent");
    CHECK((*j)["B"] == 2);
    CHECK((*j)["T"] == 1);
    CHECK((*j)["K"] == 16);
    CHECK((*j)["threads"] == 1);
    CHECK((*j)["time"]["n"] == 3);
    const double med = (*j)["time"]["median_s"].get<double>();
    CHECK(std::isfinite(med));
    CHECK(med > 0);
    CHECK((*j)["tokens_per_s"].get<double>() > 0);
    // the roofline is measured by default
    CHECK((*j)["machine"]["copy_bytes_per_s"].get<double>() > 0);
    CHECK((*j)["machine"]["fma_flop_per_s"].get<double>() > 0);
    CHECK((*j)["copy_fraction"].get<double>() > 0);
  }
  const double kv4 = 16.0 * 16 * 4;
  CHECK(g["work"]["state_bytes"].get<double>() == 2 * 2 * 2 * kv4);          // B·HV·2·K·V·4
  CHECK(s["work"]["state_bytes"].get<double>() == 2 * 2 * 2 * (1 + 1) * kv4);  // shared + kw = 1
  CHECK(s["work"]["state_bytes_all"].get<double>() == 2 * 2 * 2 * 5 * kv4);    // all N + 1
  CHECK(s["P"] == 5);
  fs::remove(out);
}

TEST_CASE("linstate-bench: prefill and train of the delta rule, Markdown, JSON on stdout") {
  const run_result r =
      bench("--variant gdn --mode prefill,train --T 16 --algorithm chunked --no-roofline --markdown" + small + "--json -");
  INFO(r.err);
  REQUIRE(r.status == 0);
  const json doc = json::parse(r.out);  // --json - : stdout holds the JSON only
  REQUIRE(doc["results"].size() == 2);
  CHECK(doc["results"][0]["mode"] == "prefill");
  CHECK(doc["results"][1]["mode"] == "train");
  CHECK(doc["results"][0]["algorithm"] == "chunked<64>");
  CHECK(doc["results"][0]["copy_fraction"].is_null());
  CHECK(doc["results"][1]["time"]["median_s"].get<double>() > 0);

  const run_result m = bench("--variant sse_dynamic --N 8 --kw 2 --mode decode --no-roofline --markdown" + small);
  INFO(m.err);
  REQUIRE(m.status == 0);
  CHECK(m.out.find("| variant | mode | backend |") == 0);
  CHECK(m.out.find("| sse_dynamic | decode | cpu |") != std::string::npos);
}

TEST_CASE("linstate-bench: errors name what is wrong") {
  run_result r = bench("--variant nosuch");
  CHECK(r.status == 2);
  CHECK(r.err.find("--variant nosuch: unknown variant") != std::string::npos);
  CHECK(r.err.find("sse_gdn_n4k1s") != std::string::npos);  // the known ones are listed

  r = bench("--variant gla --mode sideways");
  CHECK(r.status == 2);
  CHECK(r.err.find("--mode sideways") != std::string::npos);

  r = bench("--variant gla --B x");
  CHECK(r.status == 2);
  CHECK(r.err.find("--B x: not an integer") != std::string::npos);

  r = bench("--variant gla --frobnicate");
  CHECK(r.status == 2);
  CHECK(r.err.find("unknown argument '--frobnicate'") != std::string::npos);

  r = bench("--variant gla --B 0 --no-roofline");
  CHECK(r.status == 1);
  CHECK(r.err.find("options.B = 0") != std::string::npos);

  r = bench("--variant sse_dynamic --no-roofline");
  CHECK(r.status == 1);
  CHECK(r.err.find("options.N is required") != std::string::npos);

  r = bench("--variant gla --graph --no-roofline");
  CHECK(r.status == 1);
  CHECK(r.err.find("options.graph") != std::string::npos);

  r = bench("--list");
  CHECK(r.status == 0);
  CHECK(r.out.find("sse_n8k2 ") != std::string::npos);
}

TEST_CASE("linstate-bench: --backend cuda runs, or says why it cannot") {
  const run_result r = bench("--variant gla --backend cuda --B 1 --H 1 --K 16 --V 16 --reps 3 --no-roofline --json -");
  INFO(r.err);
  if (r.status == 0) {
    CHECK(json::parse(r.out)["results"][0]["backend"] == "cuda");
  } else if (r.status == 2) {
    CHECK(r.err.find("built without the CUDA backend") != std::string::npos);
  } else {
    CHECK(r.status == 1);
    CHECK(r.err.find("no usable CUDA device") != std::string::npos);
  }
}
