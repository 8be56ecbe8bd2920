// SPDX-License-Identifier: Apache-2.0
//! \file tests/support/fixture_case.hpp
//! \brief Loads one golden-data case folder (`shared/fixtures/<case>/`) for the tests.
//!
//! A case folder holds `case.json` (every configuration value) and `.npy` arrays: inputs, outputs
//! (`o`, `ht`), gradients (`d*`), and for SSE the routing masks `sel_write` / `sel_read`. The format
//! is described in `shared/fixtures/README.md`. Usage:
//! \code
//!   #include "fixture_case.hpp"
//!   for (const auto& dir : linstate_test::list_fixture_cases(linstate_test::fixtures_dir())) {
//!     const linstate_test::fixture_case c = linstate_test::load_fixture_case(dir);
//!     const linstate::inputs<float> in = c.make_inputs();   // views into c: keep c alive
//!     const linstate::options opt = c.make_options();       // scale (+ N, kw, kr, gates for SSE)
//!     auto r = linstate::forward<my_variant>(linstate::cpu{}, in, linstate::recurrent{}, linstate::varlen{}, opt);
//!     double err = linstate_test::max_rel_err(r.o.values(), c.at("o").values);   // ≤ 1e-5 expected
//!   }
//! \endcode
//!
//! Name mapping onto the library (SPEC §4.3, fixtures README):
//!  * GLA:  q, k, v, g → in.q, in.k, in.v, in.g; h0 `[S,H,K,V]` → in.initial_state `[S,1,H,K,V]`.
//!  * SSE:  q2, k2, g2 → in.q, in.k, in.g (routed partitions); q1, k1, g1 → in.shared.{q,k,g};
//!          v → in.v; eta → in.router_logits; h0 `[S,1+N,H,K,V]` → in.initial_state unchanged
//!          (partition 0 = shared in both the fixtures and linstate).
//! `ht` has the same element order as the library's final state `[S,P,H,K,V]` in both cases, so the
//! flat vectors can be compared directly.
//!
//! Every failure to load (missing file, bad JSON, shape that contradicts case.json) throws
//! `std::runtime_error` with a message naming the case and the file, so a broken fixture is never
//! mistaken for a passing test.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <linstate/io/npy.hpp>
#include <linstate/linstate.hpp>
#include <nlohmann/json.hpp>

#include "fixtures_path.hpp"

namespace linstate_test {

//! One `.npy` file of a case, converted to float (C order) with its shape.
struct fixture_array {
  std::vector<std::int64_t> shape;  //!< as stored in the file
  std::vector<float> values;        //!< numel(shape) values, row-major

  //! The library's shape type for this array.
  linstate::shape_t lshape() const { return linstate::shape_t::from_range(shape.begin(), shape.end()); }
  //! A read-only view with the stored shape.
  linstate::tensor_view<const float> view() const { return {values.data(), lshape()}; }
  //! A read-only view with another shape of the same element count (e.g. GLA h0 [S,H,K,V] → [S,1,H,K,V]).
  linstate::tensor_view<const float> view_as(linstate::shape_t s) const {
    if (s.numel() != static_cast<linstate::index_t>(values.size()))
      throw std::runtime_error("fixture_array::view_as: shape " + s.str() + " does not hold " +
                               std::to_string(values.size()) + " values");
    return {values.data(), s};
  }
};

//! One fixture case folder, fully loaded.
struct fixture_case {
  std::filesystem::path dir;   //!< the case folder
  std::string name;            //!< case.json "name" (the folder name if absent)
  std::string kind;            //!< "gla" or "sse"
  std::string mode;            //!< "chunk" or "fused_recurrent" (how the producer computed it)
  std::string implementation;  //!< SSE: "mask" or "varlen"; empty for GLA

  std::int64_t B = 0, T = 0, H = 0, K = 0, V = 0;  //!< sizes (H heads for q/k and v alike)
  std::int64_t S = 0;                              //!< number of sequences (B, or cu_seqlens.size()-1)
  int N = 0;                                       //!< SSE: routed partitions (0 for GLA)
  int num_writer = 0, num_reader = 0;              //!< SSE: kw, kr (0 for GLA)
  bool emulq = false;                              //!< SSE: router probability multiplies the read (query)
  bool emulk = false;                              //!< SSE: router probability multiplies the write (key)
  double scale = 0.0;                              //!< read scale (K^-1/2 in every public case)
  bool initial_state = false;                      //!< h0.npy given (else the states start at zero)
  std::vector<std::int64_t> cu_seqlens;            //!< [S+1] packed offsets, or empty

  //! Every floating-point `.npy` file of the folder, by stem: "q", "v", "h0", "o", "ht", "dq", ...
  std::map<std::string, fixture_array> arrays;
  //! SSE routing masks `[B,T,N]`, 0/1 (int8 in the files): partitions written / read at each token.
  std::vector<std::int8_t> sel_write, sel_read;
  std::vector<std::int64_t> sel_shape;  //!< shape of sel_write / sel_read ([B,T,N]); empty for GLA

  bool is_sse() const { return kind == "sse"; }
  bool is_gla() const { return kind == "gla"; }
  bool has(const std::string& stem) const { return arrays.count(stem) != 0; }

  //! The array of file `<stem>.npy`; throws if the case has no such file.
  const fixture_array& at(const std::string& stem) const {
    const auto it = arrays.find(stem);
    if (it == arrays.end()) throw std::runtime_error(name + ": no " + stem + ".npy in " + dir.string());
    return it->second;
  }

  //! Partitions in the state: 1 for GLA, 1 + N for SSE (shared partition first).
  std::int64_t num_state_partitions() const { return is_sse() ? 1 + N : 1; }
  //! The library's state shape `[S,P,H,K,V]`.
  linstate::shape_t state_shape() const { return {S, num_state_partitions(), H, K, V}; }

  //! The router gate use the case describes (SPEC §11 C2): gate::write iff emulk, gate::read iff emulq.
  linstate::router::gate gates() const {
    using linstate::router::gate;
    const unsigned bits = (emulk ? static_cast<unsigned>(gate::write) : 0u) | (emulq ? static_cast<unsigned>(gate::read) : 0u);
    return static_cast<gate>(bits);
  }

  //! Options for the case: the scale, and for SSE the run-time N, kw, kr and gates. They are meant for
  //! variants that declare those parameters linstate::dynamic, i.e.
  //! `partition::routed<dynamic, shared>` and `router::top_k<dynamic, dynamic, {.dynamic_gates = true}>`
  //! (the library rejects a run-time value for a parameter fixed at compile time).
  linstate::options make_options() const {
    linstate::options o;
    o.scale = static_cast<float>(scale);
    if (is_sse()) {
      o.num_partitions = N;
      o.num_writer = num_writer;
      o.num_reader = num_reader;
      o.gates = gates();
    }
    return o;
  }

  //! Views of the case's inputs in the library's terms (see the name mapping at the top of this file).
  //! The views point into this object: it must outlive them and must not be modified meanwhile.
  linstate::inputs<float> make_inputs() const {
    linstate::inputs<float> in;
    in.v = at("v").view();  // [B,T,H,V]
    if (is_gla()) {
      in.q = at("q").view();  // [B,T,H,K]
      in.k = at("k").view();  // [B,T,H,K]
      in.g = at("g").view();  // [B,T,H,K] log-decay
    } else if (is_sse()) {
      in.q = at("q2").view();  // [B,T,H,K] routed partitions
      in.k = at("k2").view();
      in.g = at("g2").view();
      in.shared.q = at("q1").view();  // [B,T,H,K] shared partition
      in.shared.k = at("k1").view();
      in.shared.g = at("g1").view();
      in.router_logits = at("eta").view();  // [B,T,N]
    } else {
      throw std::runtime_error(name + ": unknown kind '" + kind + "'");
    }
    if (initial_state) in.initial_state = at("h0").view_as(state_shape());  // [S,P,H,K,V]
    if (!cu_seqlens.empty()) in.cu_seqlens = std::span<const std::int64_t>(cu_seqlens);
    return in;
  }
};

namespace fixture_detail {

inline std::runtime_error load_error(const std::filesystem::path& dir, const std::string& what) {
  return std::runtime_error("fixture " + dir.string() + ": " + what);
}

//! An integer field that may be absent or null (GLA cases carry no N / num_writer / ...).
inline int opt_int(const nlohmann::json& j, const char* key, int fallback) {
  const auto it = j.find(key);
  return (it == j.end() || it->is_null()) ? fallback : it->get<int>();
}
inline bool opt_bool(const nlohmann::json& j, const char* key, bool fallback) {
  const auto it = j.find(key);
  return (it == j.end() || it->is_null()) ? fallback : it->get<bool>();
}
inline std::string opt_string(const nlohmann::json& j, const char* key, const std::string& fallback) {
  const auto it = j.find(key);
  return (it == j.end() || it->is_null()) ? fallback : it->get<std::string>();
}
//! A required field; throws naming the case when absent.
template <class T>
T req(const nlohmann::json& j, const char* key, const std::filesystem::path& dir) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) throw load_error(dir, std::string("case.json has no field '") + key + "'");
  return it->get<T>();
}

inline void expect_shape(const fixture_case& c, const std::string& stem, const std::vector<std::int64_t>& want) {
  const auto it = c.arrays.find(stem);
  if (it == c.arrays.end()) throw load_error(c.dir, stem + ".npy is missing");
  if (it->second.shape != want) {
    auto str = [](const std::vector<std::int64_t>& s) {
      std::string r = "[";
      for (std::size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
      return r + "]";
    };
    throw load_error(c.dir, stem + ".npy has shape " + str(it->second.shape) + " but case.json implies " + str(want));
  }
}

}  // namespace fixture_detail

//! Loads the case folder \p dir: case.json and every `.npy` file in it. Checks that the files the
//! case needs exist and that their shapes agree with case.json; throws std::runtime_error otherwise.
inline fixture_case load_fixture_case(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  using fixture_detail::load_error;
  fixture_case c;
  c.dir = dir;

  // --- case.json -------------------------------------------------------------------------------
  const fs::path json_path = dir / "case.json";
  std::ifstream f(json_path);
  if (!f) throw load_error(dir, "cannot open case.json");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    throw load_error(dir, std::string("case.json is not valid JSON: ") + e.what());
  }
  try {
    c.name = fixture_detail::opt_string(j, "name", dir.filename().string());
    c.kind = fixture_detail::req<std::string>(j, "kind", dir);
    c.mode = fixture_detail::opt_string(j, "mode", "");
    c.implementation = fixture_detail::opt_string(j, "implementation", "");
    c.B = fixture_detail::req<std::int64_t>(j, "B", dir);
    c.T = fixture_detail::req<std::int64_t>(j, "T", dir);
    c.H = fixture_detail::req<std::int64_t>(j, "H", dir);
    c.K = fixture_detail::req<std::int64_t>(j, "K", dir);
    c.V = fixture_detail::req<std::int64_t>(j, "V", dir);
    c.S = fixture_detail::req<std::int64_t>(j, "S", dir);
    c.scale = fixture_detail::req<double>(j, "scale", dir);
    c.initial_state = fixture_detail::req<bool>(j, "initial_state", dir);
    c.N = fixture_detail::opt_int(j, "N", 0);
    c.num_writer = fixture_detail::opt_int(j, "num_writer", 0);
    c.num_reader = fixture_detail::opt_int(j, "num_reader", 0);
    c.emulq = fixture_detail::opt_bool(j, "emulq", false);
    c.emulk = fixture_detail::opt_bool(j, "emulk", false);
    if (const auto it = j.find("cu_seqlens"); it != j.end() && !it->is_null())
      c.cu_seqlens = it->get<std::vector<std::int64_t>>();
  } catch (const nlohmann::json::exception& e) {
    throw load_error(dir, std::string("case.json has a field of the wrong type: ") + e.what());
  }
  if (!c.is_gla() && !c.is_sse()) throw load_error(dir, "case.json kind is '" + c.kind + "', expected gla or sse");
  if (c.is_sse() && (c.N < 1 || c.num_writer < 1 || c.num_reader < 1))
    throw load_error(dir, "an sse case needs N, num_writer and num_reader >= 1 in case.json");

  // --- every .npy file ---------------------------------------------------------------------------
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (!entry.is_regular_file() || entry.path().extension() != ".npy") continue;
    const std::string stem = entry.path().stem().string();
    const linstate::io::npy_array a = linstate::io::read_npy(entry.path());  // throws npy_error
    if (stem == "cu_seqlens") {
      // The boundaries are in case.json too; the two must agree.
      const auto cu = a.to_vector<std::int64_t>();
      if (cu != c.cu_seqlens) throw load_error(dir, "cu_seqlens.npy differs from case.json cu_seqlens");
    } else if (stem == "sel_write" || stem == "sel_read") {
      (stem == "sel_write" ? c.sel_write : c.sel_read) = a.to_vector<std::int8_t>();
      c.sel_shape = a.shape;
    } else {
      c.arrays[stem] = fixture_array{a.shape, a.to_vector<float>()};
    }
  }
  if (ec) throw load_error(dir, "cannot list the folder: " + ec.message());
  if (!c.cu_seqlens.empty() && !fs::exists(dir / "cu_seqlens.npy"))
    throw load_error(dir, "case.json gives cu_seqlens but cu_seqlens.npy is missing");

  // --- consistency with case.json ----------------------------------------------------------------
  const std::int64_t B = c.B, T = c.T, H = c.H, K = c.K, V = c.V, S = c.S;
  if (!c.cu_seqlens.empty()) {
    if (B != 1) throw load_error(dir, "cu_seqlens given with B != 1");
    if (static_cast<std::int64_t>(c.cu_seqlens.size()) != S + 1 || c.cu_seqlens.front() != 0 || c.cu_seqlens.back() != T)
      throw load_error(dir, "cu_seqlens does not hold S+1 offsets from 0 to T");
  } else if (S != B) {
    throw load_error(dir, "S != B without cu_seqlens");
  }
  const std::vector<std::int64_t> tok_k{B, T, H, K}, tok_v{B, T, H, V};
  std::vector<std::int64_t> state{S, H, K, V};  // GLA [S,H,K,V]
  if (c.is_gla()) {
    for (const char* s : {"q", "k", "g"}) fixture_detail::expect_shape(c, s, tok_k);
  } else {
    for (const char* s : {"q1", "k1", "g1", "q2", "k2", "g2"}) fixture_detail::expect_shape(c, s, tok_k);
    fixture_detail::expect_shape(c, "eta", {B, T, c.N});
    state = {S, 1 + c.N, H, K, V};  // SSE [S,1+N,H,K,V]
    const std::vector<std::int64_t> sel{B, T, c.N};
    const auto numel = static_cast<std::size_t>(B * T * c.N);
    if (c.sel_shape != sel || c.sel_write.size() != numel || c.sel_read.size() != numel)
      throw load_error(dir, "sel_write.npy / sel_read.npy missing or not [B,T,N]");
  }
  fixture_detail::expect_shape(c, "v", tok_v);
  fixture_detail::expect_shape(c, "o", tok_v);
  fixture_detail::expect_shape(c, "ht", state);
  if (c.initial_state) fixture_detail::expect_shape(c, "h0", state);
  else if (c.has("h0")) throw load_error(dir, "h0.npy present but case.json says initial_state = false");
  return c;
}

//! The case folders under \p root (every sub-folder; sorted by name). A sub-folder without case.json
//! is returned too, so that loading it fails loudly instead of the case being skipped.
inline std::vector<std::filesystem::path> list_fixture_cases(const std::filesystem::path& root) {
  namespace fs = std::filesystem;
  std::vector<fs::path> out;
  if (root.empty()) return out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec))
    if (entry.is_directory()) out.push_back(entry.path());
  if (ec) throw std::runtime_error("cannot list fixtures folder " + root.string() + ": " + ec.message());
  std::sort(out.begin(), out.end());
  return out;
}

//! max|a − b| / max|b| over two arrays of equal length (any arithmetic element types): the fixtures'
//! relative error (README: pass if ≤ 1e-5). When b is all zero, it is 0 if a is also all zero and
//! +inf otherwise. NaN anywhere gives NaN (which fails every `≤` check). Throws on a length mismatch.
template <class RangeA, class RangeB>
double max_rel_err(const RangeA& actual, const RangeB& expected) {
  const auto n = static_cast<std::size_t>(std::size(actual));
  if (n != static_cast<std::size_t>(std::size(expected)))
    throw std::invalid_argument("max_rel_err: " + std::to_string(n) + " values vs " +
                                std::to_string(std::size(expected)) + " expected");
  double err = 0.0, ref = 0.0;
  auto ia = std::begin(actual);
  auto ib = std::begin(expected);
  for (std::size_t i = 0; i < n; ++i, ++ia, ++ib) {
    const double a = static_cast<double>(*ia), b = static_cast<double>(*ib);
    const double d = std::abs(a - b);
    if (std::isnan(d)) return std::numeric_limits<double>::quiet_NaN();
    err = std::max(err, d);
    ref = std::max(ref, std::abs(b));
  }
  if (ref == 0.0) return err == 0.0 ? 0.0 : std::numeric_limits<double>::infinity();
  return err / ref;
}

}  // namespace linstate_test
