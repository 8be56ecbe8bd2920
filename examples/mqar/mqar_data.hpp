// examples/mqar/mqar_data.hpp — the multi-query associative recall task (MQAR) of Zoology (Arora et al.
// 2023, "Zoology: Measuring and Improving Recall in Efficient Language Models", arXiv 2312.04927),
// generated on the fly from a seed, and its accuracy. Standard C++ only (no linstate, no Eigen).
//
// One example of length T: num_kv_pairs key–value pairs, then a query region in which some keys appear
// again; the model must predict, at each query position, the value that followed that key earlier.
// \verbatim
//   position   0   1   2   3   4   5 | 6   7   8   9  10  11  12  13       (T = 14, 3 pairs, 3 queries)
//   inputs     k0  v0  k1  v1  k2  v2| k1  f   f   f   k0  f   k2  f       f = filler token
//   targets    -   -   -   -   -   - | v1  -   -   -   v0  -   v2  -       - = mqar::ignore_index
// \endverbatim
// - keys come from [1, V/2), values from [V/2, V) (disjoint vocabularies, as Zoology); token 0 is the
//   filler when random_non_queries is off. Keys are distinct within an example (unless unique_keys is
//   off), values are distinct within an example.
// - the queries sit at even offsets 2g of the query region, g drawn without replacement with weight
//   (g+1)^(power_a−1) (Zoology's power law: small a puts most queries close to the context; a = 1 is
//   uniform); which keys are queried is a uniform random subset (all keys by default).
// - the target is on the query token itself (next-token prediction: after reading the key the model
//   outputs its value); every other position is ignore_index.
// - filler tokens (random_non_queries) are uniform over the vocabulary minus this example's keys, so a
//   key of the example occurs only in its pair and at its queries. (Zoology's filler may, rarely, draw
//   one of the example's keys; excluding them keeps "the answer is the stored value" unambiguous.)
//
// Determinism: example i of seed s is a pure function of (options, s, i) — a counter-based generator
// (SplitMix64 of the seed, the example index and a draw counter), with its own integer and real
// conversions (no std:: distribution, whose output differs between standard libraries). Any batch can
// be regenerated in any order, on any thread, on any platform. A held-out evaluation set is another
// seed (or a range of example indices the training steps never reach).
//
// Why examples/ and not include/linstate/: the task is the recall experiment's data, not part of the
// recurrent-state library (it uses none of it, and a user of linstate's kernels or layers never needs it).
// \code
//   mqar::options opt{.vocab_size = 256, .seq_len = 64, .num_kv_pairs = 8};
//   mqar::generator gen(opt, /*seed=*/1);
//   mqar::batch b = gen.make_batch(/*first_example=*/step * 32, /*count=*/32);   // inputs, targets [32,64]
//   ... predictions [32,64] (argmax of the model's logits) ...
//   double acc = mqar::accuracy(b, predictions).value();                      // fraction of queries right
// \endcode
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace mqar {

//! The target of every position that is not a query (PyTorch's default ignore_index, as Zoology).
inline constexpr std::int32_t ignore_index = -100;

//! \brief Sizes of the task. `validate()` (called by the generator) throws std::invalid_argument
//! naming the option and the bound it breaks.
struct options {
  int vocab_size = 256;          //!< V: tokens 0..V-1; keys [1, V/2), values [V/2, V). Zoology's default is 8192
  int seq_len = 64;              //!< T: tokens per example
  int num_kv_pairs = 8;          //!< key–value pairs at the start of each example
  int num_queries = -1;          //!< keys queried per example (1..num_kv_pairs); -1: all of them (Zoology)
  double power_a = 0.01;         //!< query-gap power law (g+1)^(a-1), 0 < a; 1 = uniform gaps (Zoology: 0.01)
  bool random_non_queries = true;  //!< filler = random non-key tokens (Zoology's default); false: token 0
  bool unique_keys = true;       //!< keys distinct within an example; false: drawn with replacement (a repeated
                                 //!< key's target is the value of its latest pair)

  int queries() const { return num_queries < 0 ? num_kv_pairs : num_queries; }
  int key_vocab() const { return vocab_size / 2 - 1; }              //!< keys [1, V/2)
  int value_vocab() const { return vocab_size - vocab_size / 2; }   //!< values [V/2, V)

  void validate() const {
    auto fail = [](const std::string& m) { throw std::invalid_argument("mqar: " + m); };
    if (vocab_size < 4) fail("vocab_size must be >= 4 (keys [1, V/2), values [V/2, V)), got " + std::to_string(vocab_size));
    if (num_kv_pairs < 1) fail("num_kv_pairs must be >= 1, got " + std::to_string(num_kv_pairs));
    if (num_queries == 0 || num_queries < -1 || num_queries > num_kv_pairs)
      fail("num_queries must be in [1, num_kv_pairs = " + std::to_string(num_kv_pairs) + "] (or -1 for all), got " +
           std::to_string(num_queries));
    if (unique_keys && num_kv_pairs > key_vocab())
      fail("num_kv_pairs = " + std::to_string(num_kv_pairs) + " distinct keys need vocab_size/2 - 1 >= num_kv_pairs, but vocab_size = " +
           std::to_string(vocab_size) + " has " + std::to_string(key_vocab()) + " keys (raise vocab_size or set unique_keys = false)");
    if (num_kv_pairs > value_vocab())
      fail("num_kv_pairs = " + std::to_string(num_kv_pairs) + " distinct values need vocab_size - vocab_size/2 >= num_kv_pairs, but vocab_size = " +
           std::to_string(vocab_size) + " has " + std::to_string(value_vocab()) + " values");
    const long need = 2L * num_kv_pairs + 2L * queries();
    if (seq_len < need)
      fail("seq_len = " + std::to_string(seq_len) + " is too short: " + std::to_string(num_kv_pairs) + " pairs and " +
           std::to_string(queries()) + " queries (each followed by a filler) need seq_len >= 2*(num_kv_pairs + num_queries) = " +
           std::to_string(need));
    if (!(power_a > 0) || !std::isfinite(power_a)) fail("power_a must be finite and > 0, got " + std::to_string(power_a));
  }
};

//! \brief A batch of examples: `inputs` and `targets` `[B,T]` row-major (example b, position t at
//! b·T + t). `targets` holds the queried value at query positions and ignore_index elsewhere.
struct batch {
  std::int64_t B = 0, T = 0;
  std::vector<std::int32_t> inputs;   //!< [B,T] token ids in [0, vocab_size)
  std::vector<std::int32_t> targets;  //!< [B,T] value ids at query positions, ignore_index elsewhere

  //! Flat indices b·T + t of the query positions (targets != ignore_index), in order.
  std::vector<std::int64_t> query_positions() const {
    std::vector<std::int64_t> q;
    for (std::size_t i = 0; i < targets.size(); ++i)
      if (targets[i] != ignore_index) q.push_back(static_cast<std::int64_t>(i));
    return q;
  }
};

namespace detail {

inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

//! Counter-based stream: draw j of example key k is splitmix64(k + j·γ) — stateless apart from j.
class stream {
 public:
  explicit stream(std::uint64_t key) : key_(key) {}
  std::uint64_t next() { return splitmix64(key_ + 0x9E3779B97F4A7C15ull * ++counter_); }
  //! Uniform integer in [0, n), n >= 1, without modulo bias (rejection of the top partial block).
  std::uint64_t below(std::uint64_t n) {
    const std::uint64_t limit = std::numeric_limits<std::uint64_t>::max() - std::numeric_limits<std::uint64_t>::max() % n;
    std::uint64_t x;
    do x = next();
    while (x >= limit);
    return x % n;
  }
  //! Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1p-53; }

 private:
  std::uint64_t key_, counter_ = 0;
};

}  // namespace detail

//! \brief Generates MQAR examples on the fly: example i of a generator is a pure function of its
//! options, its seed and i.
class generator {
 public:
  generator(const options& opt, std::uint64_t seed) : opt_(opt), seed_(seed) {
    opt_.validate();
    const int space = (opt_.seq_len - 2 * opt_.num_kv_pairs) / 2;
    gap_weight_.resize(static_cast<std::size_t>(space));
    for (int g = 0; g < space; ++g) gap_weight_[static_cast<std::size_t>(g)] = std::pow(static_cast<double>(g + 1), opt_.power_a - 1.0);
  }

  const options& opts() const { return opt_; }
  std::uint64_t seed() const { return seed_; }

  //! Writes example `index` into `inputs` and `targets` (seq_len entries each).
  void example(std::uint64_t index, std::span<std::int32_t> inputs, std::span<std::int32_t> targets) const {
    const auto T = static_cast<std::size_t>(opt_.seq_len);
    if (inputs.size() != T || targets.size() != T)
      throw std::invalid_argument("mqar::generator::example: inputs and targets must hold seq_len = " + std::to_string(T) +
                                  " entries, got " + std::to_string(inputs.size()) + " and " + std::to_string(targets.size()));
    detail::stream rng(detail::splitmix64(seed_ ^ detail::splitmix64(index ^ 0x6D71617221ull)));
    const int kv = opt_.num_kv_pairs, nq = opt_.queries(), half = opt_.vocab_size / 2;
    std::vector<std::int32_t> keys = opt_.unique_keys ? distinct(rng, 1, half, kv) : with_replacement(rng, 1, half, kv);
    const std::vector<std::int32_t> values = distinct(rng, half, opt_.vocab_size, kv);
    for (int i = 0; i < kv; ++i) {
      inputs[static_cast<std::size_t>(2 * i)] = keys[static_cast<std::size_t>(i)];
      inputs[static_cast<std::size_t>(2 * i + 1)] = values[static_cast<std::size_t>(i)];
    }
    for (std::size_t t = 0; t < T; ++t) targets[t] = ignore_index;
    // which pairs are queried: a uniform subset of nq pair indices (partial Fisher–Yates)
    std::vector<int> pair(static_cast<std::size_t>(kv));
    for (int i = 0; i < kv; ++i) pair[static_cast<std::size_t>(i)] = i;
    for (int i = 0; i < nq; ++i) std::swap(pair[static_cast<std::size_t>(i)], pair[static_cast<std::size_t>(i + static_cast<int>(rng.below(static_cast<std::uint64_t>(kv - i))))]);
    // where: nq distinct gaps, sequential weighted draws without replacement
    std::vector<double> w = gap_weight_;
    const std::size_t context = static_cast<std::size_t>(2 * kv);
    for (std::size_t t = context; t < T; ++t) inputs[t] = -1;  // not yet written
    for (int q = 0; q < nq; ++q) {
      double total = 0;
      for (double x : w) total += x;
      double u = rng.uniform() * total;
      std::size_t g = 0;
      for (; g + 1 < w.size(); ++g) {
        if (w[g] > 0 && u < w[g]) break;
        u -= w[g];
      }
      while (w[g] == 0) --g;  // rounding at the end of the scan: the last gap still available
      w[g] = 0;
      const int pi = pair[static_cast<std::size_t>(q)];
      const std::size_t pos = context + 2 * g;
      inputs[pos] = keys[static_cast<std::size_t>(pi)];
      targets[pos] = latest_value(keys, values, keys[static_cast<std::size_t>(pi)]);
    }
    for (std::size_t t = context; t < T; ++t)
      if (inputs[t] < 0) inputs[t] = opt_.random_non_queries ? filler(rng, keys) : 0;
  }

  //! Examples first .. first+count-1, as one batch `[count, seq_len]`.
  batch make_batch(std::uint64_t first, std::int64_t count) const {
    if (count < 0) throw std::invalid_argument("mqar::generator::make_batch: count must be >= 0, got " + std::to_string(count));
    batch b;
    b.B = count, b.T = opt_.seq_len;
    b.inputs.resize(static_cast<std::size_t>(b.B * b.T));
    b.targets.resize(b.inputs.size());
    const auto T = static_cast<std::size_t>(b.T);
    for (std::int64_t i = 0; i < count; ++i)
      example(first + static_cast<std::uint64_t>(i), std::span<std::int32_t>(b.inputs.data() + static_cast<std::size_t>(i) * T, T),
              std::span<std::int32_t>(b.targets.data() + static_cast<std::size_t>(i) * T, T));
    return b;
  }

 private:
  //! k distinct integers of [lo, hi) in uniformly random order (Floyd's sampling, then a shuffle).
  static std::vector<std::int32_t> distinct(detail::stream& rng, int lo, int hi, int k) {
    std::vector<std::int32_t> out;
    out.reserve(static_cast<std::size_t>(k));
    const int n = hi - lo;
    for (int j = n - k; j < n; ++j) {
      const auto t = static_cast<std::int32_t>(lo + static_cast<int>(rng.below(static_cast<std::uint64_t>(j + 1))));
      bool seen = false;
      for (std::int32_t x : out) seen = seen || x == t;
      out.push_back(seen ? static_cast<std::int32_t>(lo + j) : t);
    }
    for (std::size_t i = out.size(); i > 1; --i) std::swap(out[i - 1], out[static_cast<std::size_t>(rng.below(i))]);
    return out;
  }
  static std::vector<std::int32_t> with_replacement(detail::stream& rng, int lo, int hi, int k) {
    std::vector<std::int32_t> out(static_cast<std::size_t>(k));
    for (auto& x : out) x = static_cast<std::int32_t>(lo + static_cast<int>(rng.below(static_cast<std::uint64_t>(hi - lo))));
    return out;
  }
  //! The value of the last pair holding `key` (the only one when keys are distinct).
  static std::int32_t latest_value(const std::vector<std::int32_t>& keys, const std::vector<std::int32_t>& values, std::int32_t key) {
    std::int32_t v = ignore_index;
    for (std::size_t i = 0; i < keys.size(); ++i)
      if (keys[i] == key) v = values[i];
    return v;
  }
  //! A uniform token of [0, V) that is not one of this example's keys (rejection; most draws succeed).
  std::int32_t filler(detail::stream& rng, const std::vector<std::int32_t>& keys) const {
    for (;;) {
      const auto t = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(opt_.vocab_size)));
      bool is_key = false;
      for (std::int32_t k : keys) is_key = is_key || k == t;
      if (!is_key) return t;
    }
  }

  options opt_;
  std::uint64_t seed_;
  std::vector<double> gap_weight_;  // [space] unnormalised (g+1)^(a-1)
};

//! Correct / queried counts; value() = correct / total (NaN when there is no query).
struct accuracy_result {
  std::int64_t correct = 0, total = 0;
  double value() const { return total > 0 ? static_cast<double>(correct) / static_cast<double>(total) : std::nan(""); }
};

//! \brief Accuracy of predicted tokens `[B,T]`: the fraction of query positions (targets !=
//! ignore_index) where the prediction equals the target. Other positions are not looked at.
inline accuracy_result accuracy(const batch& b, std::span<const std::int32_t> predictions) {
  if (predictions.size() != b.targets.size())
    throw std::invalid_argument("mqar::accuracy: predictions hold " + std::to_string(predictions.size()) +
                                " tokens but the batch is [B,T] = [" + std::to_string(b.B) + "," + std::to_string(b.T) + "]");
  accuracy_result r;
  for (std::size_t i = 0; i < b.targets.size(); ++i)
    if (b.targets[i] != ignore_index) ++r.total, r.correct += predictions[i] == b.targets[i];
  return r;
}

//! \brief Accuracy of logits `[B,T,vocab]`: the prediction is the argmax over the vocabulary (the lowest
//! index among equal maxima), at query positions only.
inline accuracy_result accuracy_from_logits(const batch& b, std::span<const float> logits, int vocab_size) {
  if (vocab_size < 1 || logits.size() != b.targets.size() * static_cast<std::size_t>(vocab_size))
    throw std::invalid_argument("mqar::accuracy_from_logits: logits hold " + std::to_string(logits.size()) +
                                " values but must be [B,T,vocab] = [" + std::to_string(b.B) + "," + std::to_string(b.T) + "," +
                                std::to_string(vocab_size) + "]");
  accuracy_result r;
  const auto V = static_cast<std::size_t>(vocab_size);
  for (std::size_t i = 0; i < b.targets.size(); ++i) {
    if (b.targets[i] == ignore_index) continue;
    const float* row = logits.data() + i * V;
    std::size_t best = 0;
    for (std::size_t v = 1; v < V; ++v)
      if (row[v] > row[best]) best = v;
    ++r.total, r.correct += static_cast<std::int32_t>(best) == b.targets[i];
  }
  return r;
}

}  // namespace mqar
