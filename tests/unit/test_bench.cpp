// SPDX-License-Identifier: Apache-2.0
// The bookkeeping of <linstate/bench.hpp>: the state bytes a call must touch (SPEC §11 C8: the shared
// and the selected partitions at decode, not all N+1), the nominal FLOP formula per family, the I/O
// bytes, the percentiles, the JSON and Markdown output, the option checks (an exception naming the
// field), and tiny real runs on the CPU (positive, finite times; no speed is asserted anywhere).
#include <doctest/doctest.h>

#include <linstate/bench.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace lb = linstate::bench;
namespace pt = linstate::partition;
namespace rt = linstate::router;
namespace dc = linstate::decay;
using linstate::index_t;

struct gla : linstate::spec<> {};
struct sse_n4k1s : gla {
  using partition = pt::routed<4, pt::shared>;
  using router = rt::top_k<1>;
};
struct sse_n8k2 : gla {  // no shared partition, top-2
  using partition = pt::routed<8>;
  using router = rt::top_k<2>;
};
struct sse_w2r1s : sse_n4k1s {  // writes 2, reads 1
  using router = rt::top_k<2, 1>;
};
struct dense_n4 : gla {  // every partition written and read
  using partition = pt::routed<4>;
};
struct gdn : linstate::spec<> {
  using decay = dc::gated_delta_rule<true>;
};
struct sse_dyn : gla {
  using partition = pt::routed<linstate::dynamic, pt::shared>;
  using router = rt::top_k<linstate::dynamic>;
};

// the sizes of every counting test: B = 3, H = 2, HV = 4, K = 8, V = 4
constexpr double B = 3, HV = 4, K = 8, V = 4, KV4 = K * V * 4;  // KV4: bytes of one fp32 K×V state
lb::options sizes(index_t T = 1) { return {.B = 3, .T = T, .H = 2, .HV = 4, .K = 8, .V = 4}; }

std::string error_of(auto&& f) {
  try {
    f();
  } catch (const linstate::error& e) {
    return e.what();
  }
  return "(no exception)";
}

}  // namespace

TEST_CASE("bench: decode state bytes follow SPEC C8 (shared + selected partitions, read and written)") {
  const lb::counts g = lb::count<gla>(lb::mode::decode, sizes());
  CHECK(g.tokens == B);
  CHECK(g.state_bytes == B * HV * 2 * KV4);  // one state, read and written
  CHECK(g.state_bytes_all == g.state_bytes);

  const lb::counts s = lb::count<sse_n4k1s>(lb::mode::decode, sizes());
  CHECK(s.state_bytes == B * HV * 2 * (1 + 1) * KV4);  // shared + kw = 1
  CHECK(s.state_bytes_all == B * HV * 2 * 5 * KV4);    // all N + 1 = 5
  CHECK(s.state_bytes_all / s.state_bytes == doctest::Approx(2.5));
  CHECK(s.state_bytes == 2 * g.state_bytes);

  CHECK(lb::count<sse_n8k2>(lb::mode::decode, sizes()).state_bytes == B * HV * 2 * 2 * KV4);  // kw = 2, no shared
  CHECK(lb::count<sse_n8k2>(lb::mode::decode, sizes()).state_bytes_all == B * HV * 2 * 8 * KV4);
  // kw = 2, kr = 1: shared + the read one written and read, one more written only (read + written)
  CHECK(lb::count<sse_w2r1s>(lb::mode::decode, sizes()).state_bytes == B * HV * 2 * 3 * KV4);
  CHECK(lb::count<dense_n4>(lb::mode::decode, sizes()).state_bytes == B * HV * 2 * 4 * KV4);
  // a dynamic N and kw from the options
  const lb::counts d = lb::count<sse_dyn>(lb::mode::decode, {.B = 3, .H = 2, .HV = 4, .K = 8, .V = 4, .N = 16, .kw = 2});
  CHECK(d.state_bytes == B * HV * 2 * 3 * KV4);
  CHECK(d.state_bytes_all == B * HV * 2 * 17 * KV4);
  // T tokens per decode call: the token-by-token traffic
  CHECK(lb::count<sse_n4k1s>(lb::mode::decode, sizes(5)).state_bytes == 5 * s.state_bytes);
}

TEST_CASE("bench: prefill and train state bytes are the initial and final states") {
  const double all = B * 5 * HV * KV4;  // S·P·HV·K·V·4 for SSE n4k1s
  CHECK(lb::count<sse_n4k1s>(lb::mode::prefill, sizes(16)).state_bytes == all);  // final state written
  lb::options o = sizes(16);
  o.initial_state = true;
  CHECK(lb::count<sse_n4k1s>(lb::mode::prefill, o).state_bytes == 2 * all);
  CHECK(lb::count<sse_n4k1s>(lb::mode::train, o).state_bytes == 4 * all);  // + h0 read again, dh0 written
  o.initial_state = false, o.final_state = false;
  CHECK(lb::count<sse_n4k1s>(lb::mode::prefill, o).state_bytes == 0);
}

TEST_CASE("bench: nominal FLOPs per family") {
  // diagonal: 4·K·V per token and value head per written-and-read state
  CHECK(lb::count<gla>(lb::mode::decode, sizes()).flops == B * HV * 4 * K * V);
  CHECK(lb::count<sse_n4k1s>(lb::mode::decode, sizes()).flops == B * HV * 2 * 4 * K * V);
  // kw = 2, kr = 1: 2 states written and read (4·K·V each), one written only (2·K·V)
  CHECK(lb::count<sse_w2r1s>(lb::mode::decode, sizes()).flops == B * HV * (2 * 4 + 2) * K * V);
  // delta rule: 6·K·V (the read hᵀk on top)
  CHECK(lb::count<gdn>(lb::mode::decode, sizes()).flops == B * HV * 6 * K * V);
  // prefill: per token the same; train: 3× the forward
  const lb::counts p = lb::count<gla>(lb::mode::prefill, sizes(16));
  CHECK(p.flops == 16 * B * HV * 4 * K * V);
  CHECK(lb::count<gla>(lb::mode::train, sizes(16)).flops == 3 * p.flops);
}

TEST_CASE("bench: I/O bytes count every input once, in the input type") {
  // GLA decode, fp32: q, k [B,1,H,K]; v [B,1,HV,V]; g [B,1,HV,K]; o [B,1,HV,V]
  const double H = 2, f4 = 4;
  const double io = (2 * B * H * K + B * HV * V + B * HV * K + B * HV * V) * f4;
  CHECK(lb::count<gla>(lb::mode::decode, sizes()).io_bytes == io);
  lb::options o = sizes();
  o.dtype = lb::scalar_type::bf16;
  CHECK(lb::count<gla>(lb::mode::decode, o).io_bytes == io / 2);
  // SSE adds the shared q, k, g and the logits [B,1,N]
  const double io_sse = io + (2 * B * H * K + B * HV * K + B * 4) * f4;
  CHECK(lb::count<sse_n4k1s>(lb::mode::decode, sizes()).io_bytes == io_sse);
  // the delta rule: a per-head g and beta [B,1,HV]
  CHECK(lb::count<gdn>(lb::mode::decode, sizes()).io_bytes == (2 * B * H * K + 2 * B * HV * V + 2 * B * HV) * f4);
  // train: 3× the inputs and 2× the output (the forward, then inputs + dO read and gradients written)
  const lb::counts t = lb::count<gla>(lb::mode::train, sizes());
  CHECK(t.io_bytes == 3 * (io - B * HV * V * f4) + 2 * B * HV * V * f4);
  CHECK(t.bytes() == t.io_bytes + t.state_bytes);
}

TEST_CASE("bench: percentiles interpolate linearly between order statistics") {
  const std::vector<double> x{1, 2, 3, 4, 5};
  CHECK(lb::percentile(x, 0.5) == doctest::Approx(3.0));
  CHECK(lb::percentile(x, 0.2) == doctest::Approx(1.8));  // numpy.percentile([1..5], 20)
  CHECK(lb::percentile(x, 0.8) == doctest::Approx(4.2));
  CHECK(lb::percentile(x, 0.0) == 1.0);
  CHECK(lb::percentile(x, 1.0) == 5.0);
  const lb::stats s = lb::summarize({5, 1, 4, 2, 3, 10});  // any order
  CHECK(s.n == 6);
  CHECK(s.median == doctest::Approx(3.5));
  CHECK(s.p20 == doctest::Approx(2.0));  // position 0.2·5 = 1
  CHECK(s.p80 == doctest::Approx(5.0));  // position 4
  CHECK(s.min == 1.0);
  CHECK(s.max == 10.0);
  CHECK(s.mean == doctest::Approx(25.0 / 6));
  CHECK(lb::summarize({7}).p20 == 7.0);
  CHECK(lb::summarize({}).n == 0);
  CHECK_THROWS_AS(lb::percentile({}, 0.5), linstate::error);
  CHECK_THROWS_AS(lb::percentile(x, 1.5), linstate::error);
}

TEST_CASE("bench: options are checked, and the message names the field") {
  auto dec = [](const lb::options& o) { return [o] { (void)lb::count<sse_n4k1s>(lb::mode::decode, o); }; };
  CHECK(error_of(dec({.B = 0})).find("options.B = 0") != std::string::npos);
  CHECK(error_of(dec({.T = -1})).find("options.T") != std::string::npos);
  CHECK(error_of(dec({.H = 0})).find("options.H") != std::string::npos);
  CHECK(error_of(dec({.H = 2, .HV = 3})).find("options.HV = 3") != std::string::npos);
  CHECK(error_of(dec({.K = 0})).find("options.K") != std::string::npos);
  CHECK(error_of(dec({.V = -2})).find("options.V") != std::string::npos);
  CHECK(error_of(dec({.N = 8})).find("options.N = 8") != std::string::npos);  // the variant fixes N = 4
  CHECK(error_of(dec({.kw = 2})).find("options.kw = 2") != std::string::npos);
  CHECK(error_of(dec({.reps = -1})).find("options.reps") != std::string::npos);
  CHECK(error_of(dec({.min_reps = 10, .max_reps = 5})).find("options.max_reps") != std::string::npos);
  CHECK(error_of(dec({.threads = -1})).find("options.threads") != std::string::npos);
  CHECK(error_of(dec({.budget_ms = 0})).find("options.budget_ms") != std::string::npos);
  CHECK(error_of([] { (void)lb::count<gla>(lb::mode::decode, {.N = 2}); }).find("options.N") != std::string::npos);
  CHECK(error_of([] { (void)lb::count<gla>(lb::mode::decode, {.kw = 1}); }).find("options.kw") != std::string::npos);
  CHECK(error_of([] { (void)lb::count<sse_dyn>(lb::mode::decode, {.kw = 1}); }).find("options.N is required") != std::string::npos);
  CHECK(error_of([] { (void)lb::count<sse_dyn>(lb::mode::decode, {.N = 4}); }).find("options.kw is required") != std::string::npos);
  // graph is a CUDA decode option
  CHECK(error_of([] { (void)lb::decode<gla>(linstate::cpu{}, {.graph = true}); }).find("options.graph") != std::string::npos);
  // the same checks run before anything is drawn or timed
  CHECK(error_of([] { (void)lb::decode<gla>(linstate::cpu{}, {.B = 0}); }).find("linstate::bench::decode: options.B") !=
        std::string::npos);
  CHECK(error_of([] { (void)lb::train<gla>(linstate::cpu{}, {.K = 0}); }).find("linstate::bench::train: options.K") !=
        std::string::npos);
}

TEST_CASE("bench: tiny real runs give positive, finite times and consistent rates") {
  const lb::options small{.B = 2, .H = 2, .K = 8, .V = 8, .reps = 3, .warmup = 1, .roofline = false};
  const lb::result g = lb::decode<gla>(linstate::cpu{.threads = 1}, small);
  CHECK(g.mode == "decode");
  CHECK(g.backend == "cpu");
  CHECK(g.algorithm == "recurrent");
  CHECK(g.strategy == "varlen");
  CHECK(g.threads == 1);
  CHECK(g.time.n == 3);
  CHECK(g.samples.size() == 3);
  CHECK(g.warmup == 1);
  for (double s : g.samples) CHECK((std::isfinite(s) && s > 0));
  CHECK(g.time.median > 0);
  CHECK(std::isfinite(g.time.median));
  CHECK(g.time.p20 <= g.time.median);
  CHECK(g.time.median <= g.time.p80);
  CHECK(g.tokens_per_s == doctest::Approx(2 / g.time.median));
  CHECK(g.bytes_per_s == doctest::Approx(g.work.bytes() / g.time.median));
  CHECK(std::isnan(g.copy_fraction));  // no roofline asked for
  CHECK(g.variant == linstate::describe<gla>());

  lb::options o = small;
  o.dtype = lb::scalar_type::bf16, o.name = "sse", o.cold_cache = true;
  const lb::result s = lb::decode<sse_n4k1s>(linstate::cpu{}, o, linstate::recurrent{}, linstate::mask{});
  CHECK(s.variant == "sse");
  CHECK(s.dtype == "bfloat16");
  CHECK(s.strategy == "mask");
  CHECK(s.cold_cache);
  CHECK(s.P == 5);
  CHECK(s.time.median > 0);
  CHECK(std::isfinite(s.time.median));

  o = small, o.T = 24;
  const lb::result p = lb::prefill<gla>(linstate::cpu{}, o, linstate::chunked<16>{});
  CHECK(p.algorithm == "chunked<16>");
  CHECK(p.T == 24);
  CHECK(p.time.median > 0);
  const lb::result t = lb::train<gla>(linstate::cpu{}, o);
  CHECK(t.mode == "train");
  CHECK(t.time.median > 0);
  CHECK(std::isfinite(t.time.median));
  CHECK(t.work.flops == 3 * p.work.flops);
}

TEST_CASE("bench: an element type given as a template argument fixes options.dtype") {
  const lb::options small{.B = 1, .H = 1, .K = 8, .V = 8, .reps = 2, .warmup = 0, .roofline = false};
  const lb::result b = lb::decode<gla, Eigen::bfloat16>(linstate::cpu{}, small);
  CHECK(b.dtype == "bfloat16");
  CHECK(b.warmup == 0);
  CHECK(b.work.io_bytes == lb::count<gla>(lb::mode::decode, {.B = 1, .H = 1, .K = 8, .V = 8, .dtype = lb::scalar_type::bf16}).io_bytes);
  lb::options wrong = small;
  wrong.dtype = lb::scalar_type::fp32;
  CHECK(error_of([&] { (void)lb::decode<gla, Eigen::bfloat16>(linstate::cpu{}, wrong); })
            .find("options.dtype = float32 but this call is compiled for bfloat16") != std::string::npos);
  CHECK(lb::decode<gla, float>(linstate::cpu{}, wrong).dtype == "float32");
}

TEST_CASE("bench: the CPU roofline is measured once and positive") {
  const lb::roofline r = lb::cpu_roofline(1);
  CHECK(r.backend == "cpu");
  CHECK(r.threads == 1);
  CHECK(r.copy_bytes_per_s > 0);
  CHECK(std::isfinite(r.copy_bytes_per_s));
  CHECK(r.fma_flop_per_s > 0);
  CHECK(r.copy_time.n == 7);
  CHECK(lb::cpu_roofline(1).copy_bytes_per_s == r.copy_bytes_per_s);  // remembered, not measured again
  const lb::result g = lb::decode<gla>(linstate::cpu{.threads = 1}, {.B = 1, .H = 1, .K = 8, .V = 8, .reps = 3});
  CHECK(g.machine.measured());
  CHECK(g.copy_fraction == doctest::Approx(g.bytes_per_s / r.copy_bytes_per_s));
  CHECK(g.flop_fraction == doctest::Approx(g.flop_per_s / r.fma_flop_per_s));
  CHECK(g.peak_kind == "fma");
}

TEST_CASE("bench: JSON output parses and holds the fields; Markdown has the columns") {
  lb::result a = lb::decode<sse_n4k1s>(linstate::cpu{.threads = 1},
                                       {.B = 2, .H = 1, .K = 8, .V = 8, .reps = 3, .roofline = false, .name = "sse \"n4\""});
  lb::result b = a;
  b.variant = "other", b.machine.copy_bytes_per_s = 1e9, b.machine.fma_flop_per_s = 1e9;
  lb::detail::finish(b);

  const auto doc = nlohmann::json::parse(lb::to_json(std::vector<lb::result>{a, b}));
  CHECK(doc["format"] == "linstate-bench");
  REQUIRE(doc["results"].size() == 2);
  const auto& j = doc["results"][0];
  CHECK(j["variant"] == "sse \"n4\"");  // escaped and back
  for (const char* key : {"variant", "spec", "mode", "backend", "device", "algorithm", "strategy", "dtype", "B", "T", "H", "HV", "K",
                          "V", "N", "P", "kw", "kr", "threads", "cold_cache", "time", "host", "samples_s", "work", "machine",
                          "tokens_per_s", "bytes_per_s", "state_bytes_per_s", "flop_per_s", "copy_fraction", "peak_kind",
                          "flop_fraction"})
    CHECK_MESSAGE(j.contains(key), key);
  CHECK(j["time"]["median_s"].get<double>() == doctest::Approx(a.time.median));
  CHECK(j["time"]["n"] == 3);
  CHECK(j["samples_s"].size() == 3);
  CHECK(j["work"]["state_bytes"].get<double>() == a.work.state_bytes);
  CHECK(j["work"]["state_bytes_all"].get<double>() == a.work.state_bytes_all);
  CHECK(j["work"]["flops"].get<double>() == a.work.flops);
  CHECK(j["P"] == 5);
  CHECK(j["copy_fraction"].is_null());  // no roofline: null, not NaN
  CHECK(doc["results"][1]["copy_fraction"].get<double>() == doctest::Approx(b.bytes_per_s / 1e9));
  CHECK(nlohmann::json::parse(lb::to_json(a))["mode"] == "decode");

  const std::string md = lb::markdown({a, b});
  std::istringstream lines(md);
  std::string head, rule, row1, row2, extra;
  std::getline(lines, head), std::getline(lines, rule), std::getline(lines, row1), std::getline(lines, row2);
  CHECK_FALSE(std::getline(lines, extra));
  for (const char* col : {"| variant |", "| mode |", "| median |", "| p20 |", "| p80 |", "| tokens/s |", "| state bytes |",
                          "| bytes/s |", "| % of copy |", "| FLOP/s |", "| % of peak |"})
    CHECK_MESSAGE(head.find(col) != std::string::npos, col);
  auto cells = [](const std::string& s) { return std::count(s.begin(), s.end(), '|'); };
  CHECK(cells(rule) == cells(head));
  CHECK(cells(row1) == cells(head));
  CHECK(row2.find("| other |") == 0);

  std::ostringstream text;
  text << a;
  CHECK(text.str().find("median") != std::string::npos);
  CHECK(text.str().find("read + written per step") != std::string::npos);
  CHECK(text.str().find("(all 5 partitions") != std::string::npos);
}
