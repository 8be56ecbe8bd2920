// SPDX-License-Identifier: Apache-2.0
//! \file linstate/io/npy.hpp
//! \brief Dependency-free reader and writer for NumPy `.npy` files (format versions 1.0, 2.0, 3.0).
//!
//! Usage:
//! \code
//!   #include <linstate/io/npy.hpp>
//!   namespace lio = linstate::io;
//!
//!   lio::npy_array q = lio::read_npy("fixtures/gla_chunk/q.npy");  // throws lio::npy_error
//!   // q.dtype == lio::npy_dtype::f4, q.shape == {1, 66, 2, 32}
//!   std::vector<float> qv = q.to_vector<float>();                // C (row-major) order
//!   std::vector<double> qd = q.to_vector<double>();              // any numeric dtype -> any arithmetic T
//!
//!   const std::int64_t shape[] = {2, 3};
//!   const double values[] = {1, 2, 3, 4, 5, 6};
//!   lio::write_npy<double>("out.npy", shape, values);            // '<f8', written atomically
//! \endcode
//!
//! What the reader accepts (and checks):
//!  * the magic `\x93NUMPY`, versions 1.0 (2-byte header length), 2.0 and 3.0 (4-byte header length);
//!  * a header that is a Python dict literal with exactly the keys `descr`, `fortran_order` and `shape`
//!    in any order, single or double quoted, with or without a trailing comma; `()` is a 0-d array
//!    (one element), `(4,)` a 1-d array; Python 2 long suffixes (`3L`) are tolerated;
//!  * `descr` with byte order `<`, `|` or `=` (all read as little-endian). `>` (big-endian) is
//!    rejected unless the item is one byte wide. Structured (list) and object (`O`) dtypes, strings,
//!    complex, datetime etc. are rejected;
//!  * `fortran_order: True`: the bytes are kept as stored; `npy_array::to_vector()` returns C order;
//!  * the data size must equal `numel * itemsize` exactly (truncated data and trailing bytes fail);
//!    negative dimensions and shapes whose byte size overflows 64 bits are rejected.
//!
//! Every error is an `npy_error` whose message is one line: `"<file or name>: <problem>"`.
//!
//! bf16: NumPy has no bfloat16 type, so linstate stores bf16 tensors as their raw 16-bit patterns with
//! `descr '<u2'` (`npy_dtype::bf16_bits`). `to_vector<float>()` / `to_vector<double>()` on such an array
//! decode the bf16 values; `to_vector<T>()` with an integral `T` returns the raw bit patterns.
//! Use `float_to_bf16_bits()` to produce the patterns for `write_npy<std::uint16_t>()`.
//!
//! Byte order: files are always little-endian; the code assembles and splits values byte by byte,
//! so it also works on a big-endian host (the `void*`/`T*` buffers passed to the writer are in host
//! order).
#pragma once

#include <bit>
#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

namespace linstate::io {

//! Error thrown by every function of this header. The message is a single line of the form
//! `"<file or name>: <problem>"`, e.g. `"q.npy: truncated data: expected 16896 bytes, got 100"`.
class npy_error : public std::runtime_error {
 public:
  using runtime_error::runtime_error;
};

//! Element types supported in `.npy` files. The comment gives the `descr` written for each.
enum class npy_dtype {
  f2,         //!< `'<f2'` IEEE half precision
  f4,         //!< `'<f4'` float
  f8,         //!< `'<f8'` double
  bf16_bits,  //!< `'<u2'` uint16; by linstate convention the bit patterns of bfloat16 values
  u1,         //!< `'|u1'` uint8
  i1,         //!< `'|i1'` int8
  b1,         //!< `'|b1'` bool (one byte, 0 or 1)
  i2,         //!< `'<i2'` int16
  i4,         //!< `'<i4'` int32
  i8,         //!< `'<i8'` int64
  u4,         //!< `'<u4'` uint32
  u8,         //!< `'<u8'` uint64
};

//! Size in bytes of one element of \p dt.
constexpr std::size_t itemsize(npy_dtype dt) noexcept {
  switch (dt) {
    case npy_dtype::u1:
    case npy_dtype::i1:
    case npy_dtype::b1:
      return 1;
    case npy_dtype::f2:
    case npy_dtype::bf16_bits:
    case npy_dtype::i2:
      return 2;
    case npy_dtype::f4:
    case npy_dtype::i4:
    case npy_dtype::u4:
      return 4;
    case npy_dtype::f8:
    case npy_dtype::i8:
    case npy_dtype::u8:
      return 8;
  }
  return 0;  // unreachable for valid enumerators
}

//! The `descr` string the writer uses for \p dt, e.g. `"<f4"` or `"|i1"`.
constexpr std::string_view descr(npy_dtype dt) noexcept {
  switch (dt) {
    case npy_dtype::f2:
      return "<f2";
    case npy_dtype::f4:
      return "<f4";
    case npy_dtype::f8:
      return "<f8";
    case npy_dtype::bf16_bits:
      return "<u2";
    case npy_dtype::u1:
      return "|u1";
    case npy_dtype::i1:
      return "|i1";
    case npy_dtype::b1:
      return "|b1";
    case npy_dtype::i2:
      return "<i2";
    case npy_dtype::i4:
      return "<i4";
    case npy_dtype::i8:
      return "<i8";
    case npy_dtype::u4:
      return "<u4";
    case npy_dtype::u8:
      return "<u8";
  }
  return "?";
}

//! The `npy_dtype` that `write_npy<T>` uses for the C++ element type \p T:
//! float -> f4, double -> f8, bool -> b1, signed integers -> i1/i2/i4/i8,
//! unsigned integers -> u1/bf16_bits ('<u2')/u4/u8.
template <class T>
constexpr npy_dtype npy_dtype_of() noexcept {
  using U = std::remove_cv_t<T>;
  static_assert(std::is_arithmetic_v<U>, "npy_dtype_of: T must be an arithmetic type");
  static_assert(!std::is_same_v<U, char> && !std::is_same_v<U, wchar_t> && !std::is_same_v<U, char8_t> &&
                    !std::is_same_v<U, char16_t> && !std::is_same_v<U, char32_t>,
                "npy_dtype_of: character types are not supported; use std::int8_t / std::uint8_t");
  if constexpr (std::is_same_v<U, bool>) {
    return npy_dtype::b1;
  } else if constexpr (std::is_floating_point_v<U>) {
    static_assert(std::is_same_v<U, float> || std::is_same_v<U, double>,
                  "npy_dtype_of: only float and double are supported floating-point types");
    if constexpr (std::is_same_v<U, float>)
      return npy_dtype::f4;
    else
      return npy_dtype::f8;
  } else if constexpr (std::is_signed_v<U>) {
    static_assert(sizeof(U) == 1 || sizeof(U) == 2 || sizeof(U) == 4 || sizeof(U) == 8);
    if constexpr (sizeof(U) == 1)
      return npy_dtype::i1;
    else if constexpr (sizeof(U) == 2)
      return npy_dtype::i2;
    else if constexpr (sizeof(U) == 4)
      return npy_dtype::i4;
    else
      return npy_dtype::i8;
  } else {
    static_assert(sizeof(U) == 1 || sizeof(U) == 2 || sizeof(U) == 4 || sizeof(U) == 8);
    if constexpr (sizeof(U) == 1)
      return npy_dtype::u1;
    else if constexpr (sizeof(U) == 2)
      return npy_dtype::bf16_bits;
    else if constexpr (sizeof(U) == 4)
      return npy_dtype::u4;
    else
      return npy_dtype::u8;
  }
}

//! Decodes a bfloat16 bit pattern (the upper 16 bits of an IEEE float) to float. Exact.
inline float bf16_bits_to_float(std::uint16_t bits) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

//! Rounds \p x to the nearest bfloat16 (ties to even) and returns its bit pattern.
//! NaN stays NaN (quiet), infinities stay infinities.
inline std::uint16_t float_to_bf16_bits(float x) noexcept {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  if (std::isnan(x)) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);  // keep sign, force quiet
  const std::uint32_t rounding = 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>((u + rounding) >> 16);
}

//! Decodes an IEEE binary16 (half precision) bit pattern to float. Exact.
inline float half_bits_to_float(std::uint16_t h) noexcept {
  const std::uint32_t sign = (static_cast<std::uint32_t>(h) & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1Fu;
  const std::uint32_t mant = h & 0x3FFu;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24
    const float mag = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -mag : mag;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7F800000u | (mant << 13));  // inf / NaN
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

namespace detail {

[[noreturn]] inline void npy_fail(std::string_view name, std::string_view problem) {
  std::string msg;
  msg.reserve(name.size() + 2 + problem.size());
  msg.append(name).append(": ").append(problem);
  // Keep the message on one line whatever ended up in it.
  for (char& c : msg)
    if (c == '\n' || c == '\r') c = ' ';
  throw npy_error(msg);
}

//! Makes a (possibly binary) snippet printable and short, for quoting it in an error message.
inline std::string printable(std::string_view s, std::size_t max_len = 40) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < s.size() && i < max_len; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7F && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 0xF];
    }
  }
  if (s.size() > max_len) out += "...";
  return out;
}

inline std::string shape_to_string(std::span<const std::int64_t> shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ',';
  s += ')';
  return s;
}

//! Checks a shape and returns the number of elements. Throws on negative dimensions and when the
//! byte size (product of the non-zero dimensions times the item size) does not fit in int64, which
//! is how NumPy itself treats shapes such as (0, 2**62, 4).
inline std::int64_t checked_numel(std::span<const std::int64_t> shape, std::size_t item, std::string_view name) {
  constexpr std::int64_t max = std::numeric_limits<std::int64_t>::max();
  if (item == 0) npy_fail(name, "invalid dtype value");
  std::int64_t bytes = static_cast<std::int64_t>(item);
  bool zero = false;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    const std::int64_t d = shape[i];
    if (d < 0)
      npy_fail(name, "negative dimension " + std::to_string(d) + " at axis " + std::to_string(i) + " of shape " +
                         shape_to_string(shape));
    if (d == 0) {
      zero = true;
      continue;
    }
    if (bytes > max / d) npy_fail(name, "absurd shape " + shape_to_string(shape) + ": its byte size overflows 64 bits");
    bytes *= d;
  }
  return zero ? 0 : bytes / static_cast<std::int64_t>(item);
}

//! Maps a `descr` string to a dtype, or throws with a message explaining why it is not supported.
inline npy_dtype dtype_from_descr(std::string_view d, std::string_view name) {
  const std::string quoted = "'" + printable(d) + "'";
  if (d.empty()) npy_fail(name, "empty descr in header");
  char order = '=';
  std::string_view code = d;
  if (d[0] == '<' || d[0] == '>' || d[0] == '|' || d[0] == '=') {
    order = d[0];
    code = d.substr(1);
  }
  if (!code.empty() && code[0] == 'O')
    npy_fail(name, "object dtype " + quoted + " is not supported (the file holds pickled Python objects)");
  struct entry {
    std::string_view code;
    npy_dtype dt;
  };
  static constexpr entry table[] = {
      {"f2", npy_dtype::f2}, {"f4", npy_dtype::f4}, {"f8", npy_dtype::f8}, {"u2", npy_dtype::bf16_bits},
      {"u1", npy_dtype::u1}, {"i1", npy_dtype::i1}, {"b1", npy_dtype::b1}, {"i2", npy_dtype::i2},
      {"i4", npy_dtype::i4}, {"i8", npy_dtype::i8}, {"u4", npy_dtype::u4}, {"u8", npy_dtype::u8},
      {"e", npy_dtype::f2},  {"f", npy_dtype::f4},  {"d", npy_dtype::f8},  {"?", npy_dtype::b1},
  };
  for (const entry& e : table) {
    if (e.code != code) continue;
    if (order == '>' && itemsize(e.dt) > 1)
      npy_fail(name, "big-endian dtype " + quoted + " is not supported (re-save the array little-endian)");
    return e.dt;
  }
  npy_fail(name, "unsupported dtype " + quoted +
                     " (supported: f2 f4 f8 u2(bf16 bits) u1 i1 b1 i2 i4 i8 u4 u8, little-endian)");
}

//! Minimal parser for the Python dict literal of a `.npy` header.
class header_parser {
 public:
  header_parser(std::string_view text, std::string_view name) : s_(text), name_(name) {}

  struct result {
    npy_dtype dtype{};
    bool fortran_order = false;
    std::vector<std::int64_t> shape;
  };

  result parse() {
    result r;
    bool have_descr = false, have_fortran = false, have_shape = false;
    skip_ws();
    expect('{', "bad header: expected '{' at the start of the dict");
    skip_ws();
    while (!eat('}')) {
      if (at_end()) fail_here("bad header: unterminated dict (missing '}')");
      const std::string key = parse_string("bad header: expected a quoted key");
      skip_ws();
      expect(':', "bad header: expected ':' after key '" + printable(key) + "'");
      skip_ws();
      if (key == "descr") {
        if (have_descr) fail_here("bad header: duplicate key 'descr'");
        have_descr = true;
        if (peek() == '[' || peek() == '{')
          fail_here("structured (record) dtype is not supported: 'descr' is a list of fields");
        const std::string d = parse_string("bad header: 'descr' must be a quoted string");
        r.dtype = dtype_from_descr(d, name_);
      } else if (key == "fortran_order") {
        if (have_fortran) fail_here("bad header: duplicate key 'fortran_order'");
        have_fortran = true;
        r.fortran_order = parse_bool();
      } else if (key == "shape") {
        if (have_shape) fail_here("bad header: duplicate key 'shape'");
        have_shape = true;
        r.shape = parse_shape();
      } else {
        fail_here("bad header: unexpected key '" + printable(key) + "'");
      }
      skip_ws();
      if (eat(',')) {
        skip_ws();
        continue;
      }
      skip_ws();
      if (peek() != '}') fail_here("bad header: expected ',' or '}' after the value of '" + printable(key) + "'");
    }
    skip_ws();
    if (!at_end()) fail_here("bad header: unexpected text after the closing '}'");
    if (!have_descr) npy_fail(name_, "bad header: missing key 'descr'");
    if (!have_fortran) npy_fail(name_, "bad header: missing key 'fortran_order'");
    if (!have_shape) npy_fail(name_, "bad header: missing key 'shape'");
    return r;
  }

 private:
  std::string_view s_;
  std::string_view name_;
  std::size_t pos_ = 0;

  bool at_end() const noexcept { return pos_ >= s_.size(); }
  char peek() const noexcept { return at_end() ? '\0' : s_[pos_]; }
  bool eat(char c) noexcept {
    if (!at_end() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void skip_ws() noexcept {
    while (!at_end() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  [[noreturn]] void fail_here(const std::string& problem) const {
    const std::string found = at_end() ? std::string("end of header") : "'" + printable(s_.substr(pos_), 16) + "'";
    npy_fail(name_, problem + " (at header offset " + std::to_string(pos_) + ", found " + found + ")");
  }
  void expect(char c, const std::string& problem) {
    if (!eat(c)) fail_here(problem);
  }

  std::string parse_string(const std::string& problem) {
    const char q = peek();
    if (q != '\'' && q != '"') fail_here(problem);
    const std::size_t start = ++pos_;
    while (!at_end() && s_[pos_] != q) {
      if (s_[pos_] == '\\' || s_[pos_] == '\n') fail_here("bad header: unsupported character in a string");
      ++pos_;
    }
    if (at_end()) fail_here("bad header: unterminated string");
    std::string out(s_.substr(start, pos_ - start));
    ++pos_;  // closing quote
    return out;
  }

  bool parse_bool() {
    if (s_.substr(pos_).starts_with("True")) {
      pos_ += 4;
      return true;
    }
    if (s_.substr(pos_).starts_with("False")) {
      pos_ += 5;
      return false;
    }
    fail_here("bad header: 'fortran_order' must be True or False");
  }

  std::int64_t parse_dim() {
    if (peek() == '-') fail_here("bad shape syntax: negative dimension");
    if (peek() < '0' || peek() > '9') fail_here("bad shape syntax: expected a non-negative integer");
    constexpr std::int64_t max = std::numeric_limits<std::int64_t>::max();
    std::int64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      const int digit = s_[pos_] - '0';
      if (v > (max - digit) / 10) fail_here("absurd dimension in shape: does not fit in 64 bits");
      v = v * 10 + digit;
      ++pos_;
    }
    if (peek() == 'L' || peek() == 'l') ++pos_;  // Python 2 long literal, written by old numpy
    return v;
  }

  std::vector<std::int64_t> parse_shape() {
    std::vector<std::int64_t> dims;
    expect('(', "bad shape syntax: 'shape' must be a tuple such as (2, 3), (4,) or ()");
    skip_ws();
    if (eat(')')) return dims;  // () : 0-d array
    bool trailing_comma = false;
    for (;;) {
      skip_ws();
      dims.push_back(parse_dim());
      skip_ws();
      if (eat(',')) {
        skip_ws();
        if (eat(')')) {
          trailing_comma = true;
          break;
        }
        continue;
      }
      if (eat(')')) break;
      fail_here("bad shape syntax: expected ',' or ')' in the shape tuple");
    }
    if (dims.size() == 1 && !trailing_comma)
      npy_fail(name_, "bad shape syntax: (" + std::to_string(dims[0]) + ") is not a tuple; a 1-d shape is written (" +
                          std::to_string(dims[0]) + ",)");
    return dims;
  }
};

//! What `parse_prefix` finds in front of the data.
struct npy_prefix {
  header_parser::result header;
  std::size_t data_offset = 0;  //!< where the data starts
  std::size_t data_bytes = 0;   //!< numel * itemsize (already checked against the buffer size)
  int major = 0;
};

inline constexpr unsigned char npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

//! Checks magic, version, header and data size of a complete `.npy` image.
inline npy_prefix parse_prefix(std::span<const unsigned char> b, std::string_view name) {
  if (b.size() < sizeof(npy_magic) || std::memcmp(b.data(), npy_magic, sizeof(npy_magic)) != 0)
    npy_fail(name, "not a .npy file: bad magic (expected \\x93NUMPY, found '" +
                       printable(std::string_view(reinterpret_cast<const char*>(b.data()),
                                                  b.size() < 6 ? b.size() : std::size_t{6})) +
                       "')");
  if (b.size() < 8) npy_fail(name, "truncated header: the file ends inside the version field");
  const int major = b[6], minor = b[7];
  if ((major != 1 && major != 2 && major != 3) || minor != 0)
    npy_fail(name, "unsupported format version " + std::to_string(major) + "." + std::to_string(minor) +
                       " (supported: 1.0, 2.0, 3.0)");
  const std::size_t len_bytes = major == 1 ? 2 : 4;
  const std::size_t header_start = 8 + len_bytes;
  if (b.size() < header_start) npy_fail(name, "truncated header: the file ends inside the header length field");
  std::size_t header_len = 0;  // at most 2^32 - 1
  for (std::size_t i = 0; i < len_bytes; ++i) header_len |= static_cast<std::size_t>(b[8 + i]) << (8 * i);
  if (header_len > b.size() - header_start)
    npy_fail(name, "header length " + std::to_string(header_len) + " goes beyond the end of the file (" +
                       std::to_string(b.size()) + " bytes, header starts at byte " + std::to_string(header_start) +
                       ")");
  const std::string_view text(reinterpret_cast<const char*>(b.data() + header_start), header_len);
  npy_prefix p;
  p.major = major;
  p.header = header_parser(text, name).parse();
  p.data_offset = header_start + header_len;
  const std::size_t item = itemsize(p.header.dtype);
  const std::int64_t n = checked_numel(p.header.shape, item, name);
  const auto expected = static_cast<std::uint64_t>(n) * item;  // cannot overflow: checked_numel
  const std::uint64_t got = b.size() - p.data_offset;
  if (got < expected)
    npy_fail(name, "truncated data: expected " + std::to_string(expected) + " bytes, got " + std::to_string(got));
  if (got > expected)
    npy_fail(name, "trailing bytes after the data: expected " + std::to_string(expected) + " bytes, got " +
                       std::to_string(got));
  p.data_bytes = static_cast<std::size_t>(expected);
  return p;
}

//! Builds the complete header (magic, version, length, padded dict) for \p dt and \p shape.
//! Version 1.0 unless the header does not fit in 65535 bytes, then 2.0. The total length is a
//! multiple of 64 and the dict is followed by spaces and one newline, as NumPy writes it.
inline std::vector<unsigned char> make_header(npy_dtype dt, bool fortran_order, std::span<const std::int64_t> shape) {
  std::string dict = "{'descr': '";
  dict += descr(dt);
  dict += "', 'fortran_order': ";
  dict += fortran_order ? "True" : "False";
  dict += ", 'shape': ";
  dict += shape_to_string(shape);
  dict += ", }";
  for (int major = 1; major <= 2; ++major) {
    const std::size_t prefix = 8 + (major == 1 ? 2u : 4u);
    // NumPy's rule: pad with 1..64 spaces so that prefix + dict + pad + '\n' is a multiple of 64.
    const std::size_t pad = 64 - (prefix + dict.size() + 1) % 64;
    const std::size_t header_len = dict.size() + pad + 1;
    if (major == 1 && header_len > 0xFFFF) continue;
    std::vector<unsigned char> out;
    out.reserve(prefix + header_len);
    out.insert(out.end(), std::begin(npy_magic), std::end(npy_magic));
    out.push_back(static_cast<unsigned char>(major));
    out.push_back(0);
    for (std::size_t i = 0; i < prefix - 8; ++i)
      out.push_back(static_cast<unsigned char>((header_len >> (8 * i)) & 0xFF));
    out.insert(out.end(), dict.begin(), dict.end());
    out.insert(out.end(), pad, static_cast<unsigned char>(' '));
    out.push_back('\n');
    return out;
  }
  throw npy_error("<memory>: header too large");  // unreachable: a 4 GiB header cannot be built
}

//! Appends \p count items of \p item bytes from host order to little-endian.
inline void append_le(std::vector<unsigned char>& out, const unsigned char* src, std::size_t count, std::size_t item) {
  const std::size_t n = count * item;
  if constexpr (std::endian::native == std::endian::little) {
    out.insert(out.end(), src, src + n);
  } else {
    const std::size_t base = out.size();
    out.resize(base + n);
    for (std::size_t i = 0; i < count; ++i)
      for (std::size_t j = 0; j < item; ++j) out[base + i * item + j] = src[i * item + (item - 1 - j)];
  }
}

//! Little-endian load of an unsigned integer of sizeof(U) bytes.
template <class U>
U load_le(const unsigned char* p) noexcept {
  U v = 0;
  for (std::size_t i = 0; i < sizeof(U); ++i) v = static_cast<U>(v | (static_cast<U>(p[i]) << (8 * i)));
  return v;
}

template <class T>
std::string type_name() {
  if constexpr (std::is_same_v<T, bool>)
    return "bool";
  else if constexpr (std::is_floating_point_v<T>)
    return "float" + std::to_string(8 * sizeof(T));
  else
    return (std::is_signed_v<T> ? "int" : "uint") + std::to_string(8 * sizeof(T));
}

//! Converts one source value to T; integral targets are range-checked (float sources are truncated
//! toward zero; NaN, infinities and out-of-range values throw).
template <class T, class S>
T convert_value(S v, std::int64_t index, std::string_view name) {
  if constexpr (std::is_same_v<T, bool>) {
    return static_cast<bool>(v);  // non-zero (and NaN) is true
  } else if constexpr (std::is_floating_point_v<T>) {
    if constexpr (std::is_floating_point_v<S> && (sizeof(S) > sizeof(T))) {
      // Narrowing a finite value beyond T's range is undefined behaviour in C++. Do what IEEE
      // round-to-nearest does: values from max + ulp(max)/2 on become +-inf.
      constexpr T tmax = std::numeric_limits<T>::max();
      const S overflow_at =
          static_cast<S>(tmax) + (static_cast<S>(tmax) - static_cast<S>(std::nextafter(tmax, T{0}))) / 2;
      if (std::isfinite(v) && std::fabs(v) >= overflow_at)
        return v > 0 ? std::numeric_limits<T>::infinity() : -std::numeric_limits<T>::infinity();
    }
    return static_cast<T>(v);
  } else if constexpr (std::is_floating_point_v<S>) {
    const double d = std::trunc(static_cast<double>(v));
    // Exact powers of two: [lo, hi) is the representable range of T.
    const double lo = std::is_signed_v<T> ? -std::ldexp(1.0, std::numeric_limits<T>::digits) : 0.0;
    const double hi = std::ldexp(1.0, std::numeric_limits<T>::digits);
    if (!(d >= lo && d < hi))
      npy_fail(name, "cannot convert element " + std::to_string(index) + " (value " + std::to_string(v) + ") to " +
                         type_name<T>() + ": out of range");
    return static_cast<T>(d);
  } else if constexpr (std::is_same_v<S, bool>) {
    return static_cast<T>(v);
  } else {
    if (!std::in_range<T>(v))
      npy_fail(name, "cannot convert element " + std::to_string(index) + " (value " + std::to_string(v) + ") to " +
                         type_name<T>() + ": out of range");
    return static_cast<T>(v);
  }
}

}  // namespace detail

//! A `.npy` array: dtype, shape, storage order and the raw little-endian bytes.
struct npy_array {
  npy_dtype dtype = npy_dtype::f4;  //!< element type
  std::vector<std::int64_t> shape;  //!< dimensions; empty for a 0-d array
  bool fortran_order = false;       //!< true: `data` is column-major (first index fastest)
  std::vector<unsigned char> data;  //!< raw little-endian bytes, exactly numel() * itemsize(dtype)
  std::string source = "<memory>";  //!< file or name the array came from; used in error messages

  //! Number of elements: the product of `shape` (1 for a 0-d array). Throws `npy_error` for a
  //! negative dimension or a shape whose byte size overflows.
  std::int64_t numel() const { return detail::checked_numel(shape, itemsize(dtype), source); }

  //! Number of dimensions.
  std::size_t ndim() const noexcept { return shape.size(); }

  //! All elements converted to \p T, in C (row-major) order; Fortran-order data is transposed.
  //! Any dtype converts to any arithmetic \p T: floats to integers truncate toward zero, and a
  //! value outside the range of an integral \p T (or NaN/inf) throws `npy_error`. Narrowing
  //! double to float saturates to +-inf. For `npy_dtype::bf16_bits` ('<u2'), a floating-point \p T
  //! receives the decoded bfloat16 values and an integral \p T the raw 16-bit patterns.
  template <class T>
  std::vector<T> to_vector() const {
    static_assert(std::is_arithmetic_v<T>, "npy_array::to_vector<T>: T must be an arithmetic type");
    const std::int64_t n = numel();
    const std::size_t item = itemsize(dtype);
    if (data.size() / item != static_cast<std::uint64_t>(n) || data.size() % item != 0)
      detail::npy_fail(source, "data holds " + std::to_string(data.size()) + " bytes, but shape " +
                                   detail::shape_to_string(shape) + " of " + std::string(descr(dtype)) + " needs " +
                                   std::to_string(static_cast<std::uint64_t>(n) * item));
    switch (dtype) {
      case npy_dtype::f2:
        return gather<T>(
            n, [&](std::size_t i) { return half_bits_to_float(detail::load_le<std::uint16_t>(&data[2 * i])); });
      case npy_dtype::f4:
        return gather<T>(
            n, [&](std::size_t i) { return std::bit_cast<float>(detail::load_le<std::uint32_t>(&data[4 * i])); });
      case npy_dtype::f8:
        return gather<T>(
            n, [&](std::size_t i) { return std::bit_cast<double>(detail::load_le<std::uint64_t>(&data[8 * i])); });
      case npy_dtype::bf16_bits:
        if constexpr (std::is_floating_point_v<T>)
          return gather<T>(
              n, [&](std::size_t i) { return bf16_bits_to_float(detail::load_le<std::uint16_t>(&data[2 * i])); });
        else
          return gather<T>(n, [&](std::size_t i) { return detail::load_le<std::uint16_t>(&data[2 * i]); });
      case npy_dtype::u1:
        return gather<T>(n, [&](std::size_t i) { return data[i]; });
      case npy_dtype::i1:
        return gather<T>(n, [&](std::size_t i) { return std::bit_cast<std::int8_t>(data[i]); });
      case npy_dtype::b1:
        return gather<T>(n, [&](std::size_t i) { return data[i] != 0; });
      case npy_dtype::i2:
        return gather<T>(n, [&](std::size_t i) {
          return std::bit_cast<std::int16_t>(detail::load_le<std::uint16_t>(&data[2 * i]));
        });
      case npy_dtype::i4:
        return gather<T>(n, [&](std::size_t i) {
          return std::bit_cast<std::int32_t>(detail::load_le<std::uint32_t>(&data[4 * i]));
        });
      case npy_dtype::i8:
        return gather<T>(n, [&](std::size_t i) {
          return std::bit_cast<std::int64_t>(detail::load_le<std::uint64_t>(&data[8 * i]));
        });
      case npy_dtype::u4:
        return gather<T>(n, [&](std::size_t i) { return detail::load_le<std::uint32_t>(&data[4 * i]); });
      case npy_dtype::u8:
        return gather<T>(n, [&](std::size_t i) { return detail::load_le<std::uint64_t>(&data[8 * i]); });
    }
    detail::npy_fail(source, "invalid dtype value");
  }

 private:
  //! Loads element \p load(storage_index) for every C-order index, converting to T.
  template <class T, class Load>
  std::vector<T> gather(std::int64_t n, Load load) const {
    std::vector<T> out(static_cast<std::size_t>(n));
    if (!fortran_order || shape.size() < 2) {
      for (std::size_t i = 0; i < out.size(); ++i)
        out[i] = detail::convert_value<T>(load(i), static_cast<std::int64_t>(i), source);
      return out;
    }
    // Fortran order: walk the C-order multi-index like an odometer (last axis fastest) and keep
    // the column-major offset (first axis stride 1) in step with it.
    const std::size_t nd = shape.size();
    std::vector<std::size_t> fstride(nd), idx(nd, 0);
    std::size_t s = 1;
    for (std::size_t k = 0; k < nd; ++k) {
      fstride[k] = s;
      s *= static_cast<std::size_t>(shape[k]);
    }
    std::size_t f = 0;
    for (std::size_t c = 0; c < out.size(); ++c) {
      out[c] = detail::convert_value<T>(load(f), static_cast<std::int64_t>(c), source);
      for (std::size_t k = nd; k-- > 0;) {
        f += fstride[k];
        if (++idx[k] < static_cast<std::size_t>(shape[k])) break;
        f -= fstride[k] * idx[k];
        idx[k] = 0;
      }
    }
    return out;
  }
};

//! Parses a complete `.npy` image held in memory. \p name is used as the prefix of error messages.
//! Throws `npy_error` for anything malformed or unsupported (see the file comment).
inline npy_array parse_npy(std::span<const unsigned char> bytes, const std::string& name = "<memory>") {
  const detail::npy_prefix p = detail::parse_prefix(bytes, name);
  npy_array a;
  a.dtype = p.header.dtype;
  a.shape = p.header.shape;
  a.fortran_order = p.header.fortran_order;
  a.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(p.data_offset), bytes.end());
  a.source = name;
  return a;
}

//! Reads a `.npy` file. Throws `npy_error` ("<file>: <problem>") when the file cannot be read or
//! is malformed.
inline npy_array read_npy(const std::filesystem::path& file) {
  const std::string name = file.string();
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec)) detail::npy_fail(name, "cannot open: is a directory");
  std::FILE* f = std::fopen(name.c_str(), "rb");
  if (!f) detail::npy_fail(name, "cannot open: " + std::generic_category().message(errno));
  std::vector<unsigned char> bytes;
  // Read the expected size plus one byte (so the first read already sees end of file), then
  // continue in chunks in case the file grew or its size was unknown.
  std::size_t expected = 0;
  const auto size_hint = std::filesystem::file_size(file, ec);
  if (!ec && size_hint < (std::uintmax_t{1} << 40)) expected = static_cast<std::size_t>(size_hint);
  bytes.reserve(expected + 1);
  for (;;) {
    const std::size_t old = bytes.size();
    const std::size_t want = old < expected ? expected - old + 1 : std::size_t{1} << 20;
    bytes.resize(old + want);
    const std::size_t got = std::fread(bytes.data() + old, 1, want, f);
    bytes.resize(old + got);
    if (got < want) break;  // end of file or error
  }
  const bool read_error = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (read_error) detail::npy_fail(name, "read error: " + std::generic_category().message(err));
  const detail::npy_prefix p = detail::parse_prefix(bytes, name);
  npy_array a;
  a.dtype = p.header.dtype;
  a.shape = p.header.shape;
  a.fortran_order = p.header.fortran_order;
  bytes.erase(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(p.data_offset));  // keep one buffer
  a.data = std::move(bytes);
  a.source = name;
  return a;
}

//! Serializes an array to a complete `.npy` image (version 1.0, or 2.0 if the header exceeds 65535
//! bytes; header padded so the data starts on a 64-byte boundary; C order). \p data points to
//! numel(shape) elements of \p dt in host byte order (ignored when numel is 0).
inline std::vector<unsigned char> serialize_npy(npy_dtype dt, std::span<const std::int64_t> shape, const void* data) {
  const std::size_t item = itemsize(dt);
  if (item == 0) detail::npy_fail("<memory>", "invalid dtype value");
  const auto n = static_cast<std::size_t>(detail::checked_numel(shape, item, "<memory>"));
  if (n > 0 && data == nullptr) detail::npy_fail("<memory>", "data pointer is null");
  std::vector<unsigned char> out = detail::make_header(dt, false, shape);
  out.reserve(out.size() + n * item);
  if (n > 0) detail::append_le(out, static_cast<const unsigned char*>(data), n, item);
  return out;
}

//! Same as `serialize_npy(npy_dtype_of<T>(), shape, data)`.
template <class T>
std::vector<unsigned char> serialize_npy(std::span<const std::int64_t> shape, const T* data) {
  return serialize_npy(npy_dtype_of<T>(), shape, static_cast<const void*>(data));
}

//! Writes `data` (numel(shape) elements, C order) to \p file as `.npy`, with the dtype given by
//! `npy_dtype_of<T>()`: float '<f4', double '<f8', std::int8_t '|i1', std::int32_t '<i4',
//! std::int64_t '<i8', std::uint16_t '<u2' (e.g. bf16 bit patterns), and the other integer sizes.
//! The bytes go to a temporary file in the same directory, which is then renamed over \p file,
//! so a failure never leaves a half-written \p file (nor the temporary). Throws `npy_error`.
template <class T>
void write_npy(const std::filesystem::path& file, std::span<const std::int64_t> shape, const T* data) {
  namespace fs = std::filesystem;
  const std::string name = file.string();
  constexpr npy_dtype dt = npy_dtype_of<T>();
  constexpr std::size_t item = itemsize(dt);
  const auto n = static_cast<std::size_t>(detail::checked_numel(shape, item, name));
  if (n > 0 && data == nullptr) detail::npy_fail(name, "data pointer is null");
  if (file.filename().empty()) detail::npy_fail(name, "cannot write: the path has no file name");
  const std::vector<unsigned char> header = detail::make_header(dt, false, shape);

  // Create a fresh temporary next to the target ("x": fail rather than reuse an existing file).
  std::random_device rd;
  std::FILE* f = nullptr;
  fs::path tmp;
  int open_errno = 0;
  for (int attempt = 0; attempt < 16 && !f; ++attempt) {
    const unsigned long long tag = (static_cast<unsigned long long>(rd()) << 32) ^ rd();
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", tag);
    tmp = file;
    tmp += std::string(".tmp-") + hex;
    f = std::fopen(tmp.string().c_str(), "wbx");
    open_errno = errno;
    if (!f && open_errno != EEXIST) break;
  }
  if (!f)
    detail::npy_fail(
        name, "cannot create temporary file '" + tmp.string() + "': " + std::generic_category().message(open_errno));

  bool ok = std::fwrite(header.data(), 1, header.size(), f) == header.size();
  int err = errno;
  if (ok && n > 0) {
    const auto* src = reinterpret_cast<const unsigned char*>(data);
    if constexpr (std::endian::native == std::endian::little || item == 1) {
      ok = std::fwrite(src, item, n, f) == n;
      err = errno;
    } else {
      std::vector<unsigned char> chunk;
      constexpr std::size_t per_chunk = (std::size_t{1} << 20) / item;
      for (std::size_t i = 0; ok && i < n; i += per_chunk) {
        const std::size_t m = n - i < per_chunk ? n - i : per_chunk;
        chunk.clear();
        detail::append_le(chunk, src + i * item, m, item);
        ok = std::fwrite(chunk.data(), 1, chunk.size(), f) == chunk.size();
        err = errno;
      }
    }
  }
  if (ok && std::fflush(f) != 0) {
    ok = false;
    err = errno;
  }
  if (std::fclose(f) != 0 && ok) {
    ok = false;
    err = errno;
  }
  std::error_code ec;
  if (!ok) {
    fs::remove(tmp, ec);
    detail::npy_fail(name, "write error: " + std::generic_category().message(err));
  }
  fs::rename(tmp, file, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    detail::npy_fail(name, "cannot rename the temporary file into place: " + ec.message());
  }
}

//! Convenience overload taking the data as a span (its size must equal numel(shape)).
template <class T>
void write_npy(const std::filesystem::path& file, std::span<const std::int64_t> shape, std::span<const T> data) {
  const std::int64_t n = detail::checked_numel(shape, sizeof(T), file.string());
  if (static_cast<std::uint64_t>(n) != data.size())
    detail::npy_fail(file.string(), "data has " + std::to_string(data.size()) + " elements, shape " +
                                        detail::shape_to_string(shape) + " needs " + std::to_string(n));
  write_npy<T>(file, shape, data.data());
}

}  // namespace linstate::io
