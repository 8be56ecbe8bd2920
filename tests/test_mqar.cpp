// SPDX-License-Identifier: Apache-2.0
// The MQAR task generator (examples/mqar/mqar_data.hpp), checked by independent scans of what it wrote:
//  * determinism: the same (options, seed, example index) gives the same tokens whatever the batch it
//    is generated in; another seed or index gives other tokens;
//  * each query's target is the value that followed its key in the key–value section, and the key
//    occurs nowhere else; keys and values come from their disjoint vocabularies; keys are distinct
//    unless unique_keys is off (then the target is the latest pair's value);
//  * targets only at query positions (ignore_index elsewhere), num_queries of them, at even offsets
//    of the query region; shapes [B,T]; the power law puts queries near the context;
//  * accuracy counts only query positions; bad options, predictions and logits throw with the bound.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "../examples/mqar/mqar_data.hpp"

namespace {

std::string error_of(const mqar::options& o) {
  try {
    mqar::generator g(o, 1);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no error)";
}

//! Checks every property of one example; returns the number of queries.
int check_example(const mqar::options& o, const std::int32_t* in, const std::int32_t* tg) {
  const int T = o.seq_len, kv = o.num_kv_pairs, half = o.vocab_size / 2, ctx = 2 * kv;
  std::multimap<std::int32_t, std::int32_t> pairs;  // key → value, in order
  std::set<std::int32_t> keys, values;
  for (int i = 0; i < kv; ++i) {
    const std::int32_t k = in[2 * i], v = in[2 * i + 1];
    CHECK(k >= 1);
    CHECK(k < half);
    CHECK(v >= half);
    CHECK(v < o.vocab_size);
    CHECK(tg[2 * i] == mqar::ignore_index);
    CHECK(tg[2 * i + 1] == mqar::ignore_index);
    pairs.emplace(k, v);
    keys.insert(k);
    values.insert(v);
  }
  CHECK(values.size() == static_cast<std::size_t>(kv));
  if (o.unique_keys) CHECK(keys.size() == static_cast<std::size_t>(kv));
  int queries = 0;
  std::set<std::int32_t> queried;
  for (int t = ctx; t < T; ++t) {
    CHECK(in[t] >= 0);
    CHECK(in[t] < o.vocab_size);
    if (tg[t] == mqar::ignore_index) {
      CHECK(keys.count(in[t]) == 0);  // a key of the example occurs only in its pair and at its queries
      if (!o.random_non_queries) CHECK(in[t] == 0);
      continue;
    }
    ++queries;
    CHECK((t - ctx) % 2 == 0);
    REQUIRE(keys.count(in[t]) == 1);
    // the value of the latest pair with this key, found by scanning the context
    std::int32_t want = -1;
    for (int i = 0; i < kv; ++i)
      if (in[2 * i] == in[t]) want = in[2 * i + 1];
    CHECK(tg[t] == want);
    if (o.unique_keys) CHECK(queried.insert(in[t]).second);  // every key queried at most once
  }
  CHECK(queries == o.queries());
  return queries;
}

}  // namespace

TEST_CASE("mqar: shapes, targets at query positions, the stored values") {
  for (const mqar::options o : {mqar::options{}, mqar::options{.vocab_size = 40, .seq_len = 33, .num_kv_pairs = 6, .num_queries = 3},
                                mqar::options{.vocab_size = 12, .seq_len = 16, .num_kv_pairs = 2, .random_non_queries = false},
                                mqar::options{.vocab_size = 10, .seq_len = 24, .num_kv_pairs = 5, .power_a = 1.0, .unique_keys = false}}) {
    CAPTURE(o.vocab_size);
    CAPTURE(o.seq_len);
    const mqar::generator gen(o, 123);
    const mqar::batch b = gen.make_batch(0, 16);
    REQUIRE(b.B == 16);
    REQUIRE(b.T == o.seq_len);
    REQUIRE(b.inputs.size() == static_cast<std::size_t>(16 * o.seq_len));
    REQUIRE(b.targets.size() == b.inputs.size());
    int total = 0;
    for (int e = 0; e < 16; ++e)
      total += check_example(o, b.inputs.data() + e * o.seq_len, b.targets.data() + e * o.seq_len);
    CHECK(b.query_positions().size() == static_cast<std::size_t>(total));
  }
  // unique_keys = false with 4 keys for 5 pairs: some example repeats a key (and is still answered
  // with the latest value, checked above)
  const mqar::options rep{.vocab_size = 10, .seq_len = 24, .num_kv_pairs = 5, .unique_keys = false};
  const auto b = mqar::generator(rep, 5).make_batch(0, 8);
  bool repeated = false;
  for (int e = 0; e < 8; ++e) {
    std::set<std::int32_t> k;
    for (int i = 0; i < 5; ++i) k.insert(b.inputs[static_cast<std::size_t>(e * 24 + 2 * i)]);
    repeated = repeated || k.size() < 5;
  }
  CHECK(repeated);
}

TEST_CASE("mqar: deterministic for a seed, whatever the batch an example is generated in") {
  const mqar::options o{.vocab_size = 64, .seq_len = 32, .num_kv_pairs = 4};
  const mqar::generator a(o, 42), a2(o, 42), c(o, 43);
  const auto b1 = a.make_batch(10, 6), b2 = a2.make_batch(10, 6), one = a.make_batch(13, 1), other = c.make_batch(10, 6);
  CHECK(b1.inputs == b2.inputs);
  CHECK(b1.targets == b2.targets);
  CHECK(std::equal(one.inputs.begin(), one.inputs.end(), b1.inputs.begin() + 3 * 32));  // example 13 alone = row 3
  CHECK(std::equal(one.targets.begin(), one.targets.end(), b1.targets.begin() + 3 * 32));
  CHECK(b1.inputs != other.inputs);
  const auto shifted = a.make_batch(11, 6);
  CHECK(b1.inputs != shifted.inputs);
  // the first example of seed 42 is pinned: a change of the generator's stream shows here
  const auto first = a.make_batch(0, 1);
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a of the tokens
  for (std::int32_t x : first.inputs) h = (h ^ static_cast<std::uint64_t>(x + 1000)) * 1099511628211ull;
  for (std::int32_t x : first.targets) h = (h ^ static_cast<std::uint64_t>(x + 1000)) * 1099511628211ull;
  MESSAGE("fingerprint of seed 42, example 0: " << h);
  CHECK(h == 7579813065878735091ull);
}

TEST_CASE("mqar: the power law puts queries near the context; a = 1 spreads them") {
  const int kv = 4, T = 2 * kv + 2 * 32;  // 32 query slots
  auto mean_gap = [&](double a) {
    const mqar::generator g(mqar::options{.vocab_size = 64, .seq_len = T, .num_kv_pairs = kv, .num_queries = 1, .power_a = a}, 9);
    const auto b = g.make_batch(0, 400);
    double s = 0;
    for (std::int64_t q : b.query_positions()) s += static_cast<double>((q % T - 2 * kv) / 2);
    return s / 400.0;
  };
  const double near = mean_gap(0.01), uniform = mean_gap(1.0);
  CHECK(near == doctest::Approx(6.97).epsilon(0.15));  // Σ g (g+1)^-0.99 / Σ (g+1)^-0.99 over 32 slots = 6.97
  CHECK(uniform == doctest::Approx(15.5).epsilon(0.1));
}

TEST_CASE("mqar: accuracy counts query positions only") {
  const mqar::options o{.vocab_size = 32, .seq_len = 20, .num_kv_pairs = 3};
  const auto b = mqar::generator(o, 7).make_batch(0, 4);
  std::vector<std::int32_t> pred(b.inputs.size(), 0);
  CHECK(mqar::accuracy(b, pred).correct == 0);
  CHECK(mqar::accuracy(b, pred).total == 12);
  pred = b.targets;  // right everywhere that counts (ignore_index elsewhere does not matter)
  CHECK(mqar::accuracy(b, pred).value() == 1.0);
  const auto q = b.query_positions();
  pred[static_cast<std::size_t>(q[0])] += 1, pred[static_cast<std::size_t>(q[5])] = 0;
  CHECK(mqar::accuracy(b, pred).value() == doctest::Approx(10.0 / 12));
  // logits: argmax = the target at 9 of the 12 queries, lowest index among ties
  std::vector<float> logits(b.inputs.size() * 32, 0.f);
  for (std::size_t i = 0; i < q.size(); ++i) {
    const auto pos = static_cast<std::size_t>(q[i]);
    if (i < 9) logits[pos * 32 + static_cast<std::size_t>(b.targets[pos])] = 1.f;
    // i >= 9: all zero → argmax 0, never a value
  }
  CHECK(mqar::accuracy_from_logits(b, logits, 32).value() == doctest::Approx(0.75));
  CHECK_THROWS_WITH_AS(mqar::accuracy(b, std::vector<std::int32_t>(3)), doctest::Contains("[B,T] = [4,20]"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(mqar::accuracy_from_logits(b, logits, 31), doctest::Contains("[4,20,31]"), std::invalid_argument);
  CHECK(std::isnan(mqar::accuracy_result{}.value()));
}

TEST_CASE("mqar: options are validated with the bound they break") {
  CHECK(error_of({.vocab_size = 3}).find("vocab_size must be >= 4") != std::string::npos);
  CHECK(error_of({.num_kv_pairs = 0}).find("num_kv_pairs must be >= 1") != std::string::npos);
  CHECK(error_of({.num_kv_pairs = 4, .num_queries = 5}).find("num_queries must be in [1, num_kv_pairs = 4]") != std::string::npos);
  CHECK(error_of({.vocab_size = 16, .seq_len = 64, .num_kv_pairs = 8}).find("vocab_size/2 - 1 >= num_kv_pairs") != std::string::npos);
  CHECK(error_of({.vocab_size = 16, .seq_len = 64, .num_kv_pairs = 8, .unique_keys = false}) == "(no error)");
  CHECK(error_of({.vocab_size = 256, .seq_len = 30, .num_kv_pairs = 8}).find("seq_len >= 2*(num_kv_pairs + num_queries) = 32") !=
        std::string::npos);
  CHECK(error_of({.power_a = 0.0}).find("power_a") != std::string::npos);
  CHECK(error_of({.vocab_size = 256, .seq_len = 32, .num_kv_pairs = 8}) == "(no error)");
  const mqar::generator g(mqar::options{}, 1);
  std::vector<std::int32_t> small(10), right(64);
  CHECK_THROWS_WITH_AS(g.example(0, small, right), doctest::Contains("seq_len = 64"), std::invalid_argument);
}
