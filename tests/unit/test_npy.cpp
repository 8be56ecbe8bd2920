// SPDX-License-Identifier: Apache-2.0
// Tests of linstate/io/npy.hpp: round trips, real fixture files, hand-built headers and every
// malformed-input error.
#include <doctest/doctest.h>

#include <linstate/io/npy.hpp>

#include "../support/fixtures_path.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace {

namespace fs = std::filesystem;
using linstate::io::npy_array;
using linstate::io::npy_dtype;
using linstate::io::npy_error;
using bytes_t = std::vector<unsigned char>;

// Little-endian bytes of the given values (independent of the host byte order).
template <class T>
bytes_t le_bytes(std::initializer_list<T> values) {
  bytes_t out;
  for (T v : values) {
    unsigned char raw[sizeof(T)];
    std::memcpy(raw, &v, sizeof(T));
    if constexpr (std::endian::native == std::endian::big) std::reverse(std::begin(raw), std::end(raw));
    out.insert(out.end(), std::begin(raw), std::end(raw));
  }
  return out;
}

// A .npy image built by hand: magic, version major.minor, a 2-byte (v1) or 4-byte (other)
// header length, the header text (padded with spaces and '\n' to 64 bytes when pad is true), data.
bytes_t make_npy(int major, int minor, std::string header, const bytes_t& data = {}, bool pad = true) {
  const std::size_t len_bytes = major == 1 ? 2 : 4;
  if (pad) {
    while ((8 + len_bytes + header.size() + 1) % 64 != 0) header += ' ';
    header += '\n';
  }
  bytes_t out = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<unsigned char>(major), static_cast<unsigned char>(minor)};
  for (std::size_t i = 0; i < len_bytes; ++i)
    out.push_back(static_cast<unsigned char>((header.size() >> (8 * i)) & 0xFF));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

bytes_t read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return bytes_t(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The message of the npy_error thrown by f, or "" when nothing is thrown.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const npy_error& e) {
    return e.what();
  }
  return "";
}

// A fresh, uniquely named directory under the system temp dir, removed with its content at scope end.
struct temp_dir {
  fs::path path;
  temp_dir() {
    std::random_device rd;
    for (int i = 0; i < 100; ++i) {
      path = fs::temp_directory_path() / ("linstate_test_npy_" + std::to_string(rd()) + std::to_string(rd()));
      if (fs::create_directory(path)) return;
    }
    throw std::runtime_error("cannot create a temporary directory");
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(path)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
};

// Checks the layout rules of an image produced by the writer and returns its header text.
std::string check_written_layout(const bytes_t& b) {
  REQUIRE(b.size() >= 10);
  CHECK(b[6] == 1);
  CHECK(b[7] == 0);
  const std::size_t hlen = b[8] | (static_cast<std::size_t>(b[9]) << 8);
  const std::size_t data_start = 10 + hlen;
  REQUIRE(data_start <= b.size());
  CHECK(data_start % 64 == 0);
  CHECK(b[data_start - 1] == '\n');
  return std::string(reinterpret_cast<const char*>(b.data() + 10), hlen);
}

template <class T>
void check_roundtrip(npy_dtype expected, std::vector<std::int64_t> shape, const std::vector<T>& values,
                     std::string_view header_prefix) {
  CAPTURE(header_prefix);
  const bytes_t image = linstate::io::serialize_npy(expected, shape, values.data());
  const std::string header = check_written_layout(image);
  CHECK(header.starts_with(header_prefix));
  // The typed overload produces the same bytes.
  CHECK(linstate::io::serialize_npy<T>(shape, values.data()) == image);

  const npy_array a = linstate::io::parse_npy(image, "mem.npy");
  CHECK(a.dtype == expected);
  CHECK(a.shape == shape);
  CHECK_FALSE(a.fortran_order);
  CHECK(a.numel() == static_cast<std::int64_t>(values.size()));
  CHECK(a.data.size() == values.size() * sizeof(T));
  CHECK(a.to_vector<T>() == values);
  CHECK(a.source == "mem.npy");
}

}  // namespace

TEST_SUITE("io.npy") {
  TEST_CASE("dtype tables") {
    using linstate::io::descr;
    using linstate::io::itemsize;
    using linstate::io::npy_dtype_of;
    CHECK(itemsize(npy_dtype::f2) == 2);
    CHECK(itemsize(npy_dtype::f4) == 4);
    CHECK(itemsize(npy_dtype::f8) == 8);
    CHECK(itemsize(npy_dtype::bf16_bits) == 2);
    CHECK(itemsize(npy_dtype::u1) == 1);
    CHECK(itemsize(npy_dtype::i1) == 1);
    CHECK(itemsize(npy_dtype::b1) == 1);
    CHECK(itemsize(npy_dtype::i2) == 2);
    CHECK(itemsize(npy_dtype::i4) == 4);
    CHECK(itemsize(npy_dtype::i8) == 8);
    CHECK(itemsize(npy_dtype::u4) == 4);
    CHECK(itemsize(npy_dtype::u8) == 8);
    CHECK(descr(npy_dtype::bf16_bits) == "<u2");
    CHECK(descr(npy_dtype::i1) == "|i1");
    CHECK(descr(npy_dtype::b1) == "|b1");
    static_assert(npy_dtype_of<float>() == npy_dtype::f4);
    static_assert(npy_dtype_of<double>() == npy_dtype::f8);
    static_assert(npy_dtype_of<std::int8_t>() == npy_dtype::i1);
    static_assert(npy_dtype_of<std::int32_t>() == npy_dtype::i4);
    static_assert(npy_dtype_of<std::int64_t>() == npy_dtype::i8);
    static_assert(npy_dtype_of<long long>() == npy_dtype::i8);
    static_assert(npy_dtype_of<std::uint16_t>() == npy_dtype::bf16_bits);
    static_assert(npy_dtype_of<bool>() == npy_dtype::b1);
  }

  TEST_CASE("serialize/parse round trip: f4 f8 i8 i1 u2") {
    check_roundtrip<float>(npy_dtype::f4, {2, 3},
                           {1.5f, -2.f, 0.f, 3.25f, 1e-30f, -std::numeric_limits<float>::infinity()},
                           "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }");
    check_roundtrip<double>(npy_dtype::f8, {5}, {1.0, -1e300, 0.1, 2.5, 7.0},
                            "{'descr': '<f8', 'fortran_order': False, 'shape': (5,), }");
    check_roundtrip<std::int64_t>(
        npy_dtype::i8, {2, 1, 2},
        {0, -1, std::numeric_limits<std::int64_t>::max(), std::numeric_limits<std::int64_t>::min()},
        "{'descr': '<i8', 'fortran_order': False, 'shape': (2, 1, 2), }");
    check_roundtrip<std::int8_t>(npy_dtype::i1, {4}, {0, 1, -128, 127},
                                 "{'descr': '|i1', 'fortran_order': False, 'shape': (4,), }");
    check_roundtrip<std::uint16_t>(npy_dtype::bf16_bits, {3}, {0x3F80, 0xC000, 0xFFFF},
                                   "{'descr': '<u2', 'fortran_order': False, 'shape': (3,), }");
    check_roundtrip<float>(npy_dtype::f4, {}, {42.f}, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }");
    check_roundtrip<double>(npy_dtype::f8, {0, 4}, {}, "{'descr': '<f8', 'fortran_order': False, 'shape': (0, 4), }");
    check_roundtrip<std::int32_t>(npy_dtype::i4, {2}, {-7, 1 << 30},
                                  "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }");
  }

  TEST_CASE("writer switches to v2.0 when the header exceeds 65535 bytes") {
    const std::vector<std::int64_t> shape(22000, 1);  // "1, " x 22000 > 65535 characters
    const float value = 3.5f;
    const bytes_t image = linstate::io::serialize_npy(npy_dtype::f4, shape, &value);
    REQUIRE(image.size() > 12);
    CHECK(image[6] == 2);
    CHECK(image[7] == 0);
    const std::size_t hlen = image[8] | (static_cast<std::size_t>(image[9]) << 8) |
                             (static_cast<std::size_t>(image[10]) << 16) | (static_cast<std::size_t>(image[11]) << 24);
    CHECK(hlen > 65535);
    CHECK((12 + hlen) % 64 == 0);
    CHECK(image[12 + hlen - 1] == '\n');
    const npy_array a = linstate::io::parse_npy(image);
    CHECK(a.shape == shape);
    CHECK(a.to_vector<float>() == std::vector<float>{3.5f});
  }

  TEST_CASE("write_npy / read_npy round trip through files") {
    temp_dir dir;
    const std::vector<std::int64_t> shape{3, 4};
    std::vector<float> f(12);
    std::vector<double> d(12);
    std::vector<std::int64_t> i8(12);
    std::vector<std::int8_t> i1(12);
    std::vector<std::uint16_t> u2(12);
    for (std::size_t i = 0; i < 12; ++i) {
      const int k = static_cast<int>(i);
      f[i] = 0.25f * static_cast<float>(k) - 1.f;
      d[i] = std::sqrt(static_cast<double>(k)) * (k % 2 ? -1 : 1);
      i8[i] = (std::int64_t{1} << 40) * (k - 6);
      i1[i] = static_cast<std::int8_t>(k * 21 - 128);
      u2[i] = linstate::io::float_to_bf16_bits(f[i]);
    }
    linstate::io::write_npy<float>(dir.path / "f.npy", shape, f.data());
    linstate::io::write_npy<double>(dir.path / "d.npy", shape, d.data());
    linstate::io::write_npy<std::int64_t>(dir.path / "i8.npy", shape, i8.data());
    linstate::io::write_npy<std::int8_t>(dir.path / "i1.npy", shape, i1.data());
    linstate::io::write_npy<std::uint16_t>(dir.path / "u2.npy", shape, std::span<const std::uint16_t>(u2));
    // Only the five files: no temporaries left behind.
    CHECK(dir.entries() == std::vector<std::string>{"d.npy", "f.npy", "i1.npy", "i8.npy", "u2.npy"});

    const npy_array af = linstate::io::read_npy(dir.path / "f.npy");
    CHECK(af.dtype == npy_dtype::f4);
    CHECK(af.shape == shape);
    CHECK(af.to_vector<float>() == f);
    CHECK(af.source == (dir.path / "f.npy").string());
    CHECK(read_file(dir.path / "f.npy") == linstate::io::serialize_npy(npy_dtype::f4, shape, f.data()));
    CHECK(fs::file_size(dir.path / "f.npy") == 128 + 12 * 4);

    const npy_array ad = linstate::io::read_npy(dir.path / "d.npy");
    CHECK(ad.dtype == npy_dtype::f8);
    CHECK(ad.to_vector<double>() == d);

    const npy_array a8 = linstate::io::read_npy(dir.path / "i8.npy");
    CHECK(a8.dtype == npy_dtype::i8);
    CHECK(a8.to_vector<std::int64_t>() == i8);

    const npy_array a1 = linstate::io::read_npy(dir.path / "i1.npy");
    CHECK(a1.dtype == npy_dtype::i1);
    CHECK(a1.to_vector<std::int8_t>() == i1);

    const npy_array a2 = linstate::io::read_npy(dir.path / "u2.npy");
    CHECK(a2.dtype == npy_dtype::bf16_bits);
    CHECK(a2.to_vector<std::uint16_t>() == u2);  // integral T: the raw bit patterns
    CHECK(a2.to_vector<float>() == f);           // floating T: decoded bf16 (these values are exact in bf16)

    // Overwriting an existing file replaces it.
    const std::vector<std::int64_t> shape2{2};
    const float two[] = {9.f, 8.f};
    linstate::io::write_npy<float>(dir.path / "f.npy", shape2, two);
    CHECK(linstate::io::read_npy(dir.path / "f.npy").to_vector<float>() == std::vector<float>{9.f, 8.f});
    CHECK(dir.entries().size() == 5);
  }

  TEST_CASE("write_npy into a missing directory throws and creates nothing") {
    temp_dir dir;
    const fs::path target = dir.path / "no_such_dir" / "x.npy";
    const std::vector<std::int64_t> shape{2};
    const double v[] = {1.0, 2.0};
    CHECK_THROWS_WITH_AS(linstate::io::write_npy<double>(target, shape, v),
                         doctest::Contains("cannot create temporary file"), npy_error);
    const std::string msg = error_of([&] { linstate::io::write_npy<double>(target, shape, v); });
    CHECK(msg.starts_with(target.string() + ": "));
    CHECK(dir.entries().empty());
    CHECK_FALSE(fs::exists(dir.path / "no_such_dir"));

    // Span overload: size mismatch is an error, and nothing is written.
    const std::vector<float> three{1.f, 2.f, 3.f};
    CHECK_THROWS_WITH_AS(linstate::io::write_npy<float>(dir.path / "y.npy", shape, std::span<const float>(three)),
                         doctest::Contains("data has 3 elements"), npy_error);
    CHECK(dir.entries().empty());
  }

  TEST_CASE("real fixture files") {
    const fs::path fx = linstate_test::fixtures_dir();
    REQUIRE_MESSAGE(!fx.empty(), "fixtures directory not found (../shared/fixtures, or set LINSTATE_FIXTURES)");
    SUBCASE("gla_chunk/q.npy: f4 [1,66,2,32]") {
      const fs::path file = fx / "gla_chunk" / "q.npy";
      const npy_array q = linstate::io::read_npy(file);
      CHECK(q.dtype == npy_dtype::f4);
      CHECK(q.shape == std::vector<std::int64_t>{1, 66, 2, 32});
      CHECK_FALSE(q.fortran_order);
      CHECK(q.numel() == 4224);
      CHECK(q.data.size() == 16896);
      const std::vector<float> v = q.to_vector<float>();
      REQUIRE(v.size() == 4224);
      CHECK(std::all_of(v.begin(), v.end(), [](float x) { return std::isfinite(x) && std::fabs(x) < 10.f; }));
      CHECK(std::any_of(v.begin(), v.end(), [](float x) { return x != 0.f; }));
      const std::vector<double> vd = q.to_vector<double>();
      CHECK(std::equal(v.begin(), v.end(), vd.begin(), [](float a, double b) { return static_cast<double>(a) == b; }));
      // Our writer reproduces numpy's file byte for byte.
      CHECK(linstate::io::serialize_npy(q.dtype, q.shape, v.data()) == read_file(file));
      // Truncating the real file is detected with the expected message.
      bytes_t cut = read_file(file);
      cut.resize(128 + 100);
      CHECK_THROWS_WITH_AS(linstate::io::parse_npy(cut, "q.npy"),
                           doctest::Contains("q.npy: truncated data: expected 16896 bytes, got 100"), npy_error);
    }
    SUBCASE("gla_chunk_cuseqlens_h0/cu_seqlens.npy: i8") {
      const npy_array c = linstate::io::read_npy(fx / "gla_chunk_cuseqlens_h0" / "cu_seqlens.npy");
      CHECK(c.dtype == npy_dtype::i8);
      CHECK(c.shape == std::vector<std::int64_t>{4});
      CHECK(c.to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 13, 83, 100});
      CHECK(c.to_vector<int>() == std::vector<int>{0, 13, 83, 100});
      CHECK(c.to_vector<double>() == std::vector<double>{0, 13, 83, 100});
    }
  }

  TEST_CASE("hand-built v2.0 and v3.0 headers") {
    const bytes_t data = le_bytes<float>({1.f, 2.f, 3.f});
    for (int major : {2, 3}) {
      CAPTURE(major);
      const bytes_t image = make_npy(major, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", data);
      CHECK((image.size() - data.size()) % 64 == 0);
      const npy_array a = linstate::io::parse_npy(image);
      CHECK(a.dtype == npy_dtype::f4);
      CHECK(a.shape == std::vector<std::int64_t>{3});
      CHECK(a.to_vector<float>() == std::vector<float>{1.f, 2.f, 3.f});
    }
    // The header need not be padded to 64 bytes (old writers used 16).
    const npy_array b = linstate::io::parse_npy(
        make_npy(1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,)}\n", data, false));
    CHECK(b.to_vector<double>() == std::vector<double>{1.0, 2.0, 3.0});
  }

  TEST_CASE("0-d arrays") {
    const npy_array a = linstate::io::parse_npy(
        make_npy(1, 0, "{'descr': '<f8', 'fortran_order': False, 'shape': (), }", le_bytes<double>({-2.5})));
    CHECK(a.shape.empty());
    CHECK(a.ndim() == 0);
    CHECK(a.numel() == 1);
    CHECK(a.to_vector<double>() == std::vector<double>{-2.5});
    CHECK(a.to_vector<float>() == std::vector<float>{-2.5f});
    CHECK(a.to_vector<int>() == std::vector<int>{-2});  // truncation toward zero
    // A 0-d array holds exactly one element.
    CHECK_THROWS_WITH_AS(
        linstate::io::parse_npy(make_npy(1, 0, "{'descr': '<f8', 'fortran_order': False, 'shape': (), }", {})),
        doctest::Contains("truncated data: expected 8 bytes, got 0"), npy_error);
  }

  TEST_CASE("fortran_order True is transposed to C order") {
    // The 2x3 matrix [[1,2,3],[4,5,6]] stored column-major: 1 4 2 5 3 6.
    const npy_array a =
        linstate::io::parse_npy(make_npy(1, 0, "{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }",
                                         le_bytes<std::int32_t>({1, 4, 2, 5, 3, 6})));
    CHECK(a.fortran_order);
    CHECK(a.to_vector<std::int32_t>() == std::vector<std::int32_t>{1, 2, 3, 4, 5, 6});
    CHECK(a.to_vector<double>() == std::vector<double>{1, 2, 3, 4, 5, 6});

    // 3-d: element (i,j,k) of a (2,3,4) array is stored at i + 2*j + 6*k; give it the value of its C index.
    std::vector<double> fdata(24);
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j)
        for (int k = 0; k < 4; ++k) fdata[static_cast<std::size_t>(i + 2 * j + 6 * k)] = (i * 3 + j) * 4 + k;
    bytes_t raw;
    for (double x : fdata) {
      const bytes_t b = le_bytes<double>({x});
      raw.insert(raw.end(), b.begin(), b.end());
    }
    const npy_array b =
        linstate::io::parse_npy(make_npy(1, 0, "{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3, 4), }", raw));
    std::vector<double> expected(24);
    for (int c = 0; c < 24; ++c) expected[static_cast<std::size_t>(c)] = c;
    CHECK(b.to_vector<double>() == expected);
    CHECK(b.to_vector<float>() == std::vector<float>(expected.begin(), expected.end()));

    // 1-d Fortran data is the same as C data.
    const npy_array c = linstate::io::parse_npy(
        make_npy(1, 0, "{'descr': '|u1', 'fortran_order': True, 'shape': (3,), }", bytes_t{7, 8, 9}));
    CHECK(c.to_vector<int>() == std::vector<int>{7, 8, 9});
  }

  TEST_CASE("header variants: key order, quotes, whitespace, byte-order marks") {
    const bytes_t two_f4 = le_bytes<float>({0.5f, -0.5f});
    const char* headers[] = {
        "{'shape': (2,), 'fortran_order': False, 'descr': '<f4'}",
        "{'fortran_order': False, 'shape': (2,), 'descr': '<f4', }",
        "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2,)}",
        "  {  'descr' :'=f4' ,'fortran_order':False,'shape':( 2 , ) ,  }  ",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2L,), }",
    };
    for (const char* h : headers) {
      CAPTURE(h);
      const npy_array a = linstate::io::parse_npy(make_npy(1, 0, h, two_f4));
      CHECK(a.dtype == npy_dtype::f4);
      CHECK(a.shape == std::vector<std::int64_t>{2});
      CHECK(a.to_vector<float>() == std::vector<float>{0.5f, -0.5f});
    }
    // '|' and '>' are both fine for one-byte types.
    for (const char* d : {"|i1", "<i1", ">i1", "=i1"}) {
      CAPTURE(d);
      const npy_array a = linstate::io::parse_npy(make_npy(
          1, 0, std::string("{'descr': '") + d + "', 'fortran_order': False, 'shape': (2,), }", bytes_t{0xFF, 5}));
      CHECK(a.dtype == npy_dtype::i1);
      CHECK(a.to_vector<int>() == std::vector<int>{-1, 5});
    }
    const npy_array m =
        linstate::io::parse_npy(make_npy(1, 0, "{'descr': '<i2', 'fortran_order': False, 'shape': (2, 0, 3), }", {}));
    CHECK(m.numel() == 0);
    CHECK(m.to_vector<float>().empty());
  }

  TEST_CASE("dtype conversions") {
    // f2: 1.0, -2.0, 65504 (max), smallest subnormal, +inf
    const npy_array h =
        linstate::io::parse_npy(make_npy(1, 0, "{'descr': '<f2', 'fortran_order': False, 'shape': (5,), }",
                                         le_bytes<std::uint16_t>({0x3C00, 0xC000, 0x7BFF, 0x0001, 0x7C00})));
    const std::vector<float> hv = h.to_vector<float>();
    CHECK(hv[0] == 1.f);
    CHECK(hv[1] == -2.f);
    CHECK(hv[2] == 65504.f);
    CHECK(hv[3] == std::ldexp(1.f, -24));
    CHECK(std::isinf(hv[4]));

    // bf16 helpers: exact decode and round-to-nearest-even encode.
    CHECK(linstate::io::bf16_bits_to_float(0x3F80) == 1.f);
    CHECK(linstate::io::float_to_bf16_bits(1.f) == 0x3F80);
    CHECK(linstate::io::float_to_bf16_bits(1.f + std::ldexp(1.f, -8)) == 0x3F80);  // tie -> even
    CHECK(linstate::io::float_to_bf16_bits(1.f + 3 * std::ldexp(1.f, -8)) == 0x3F82);
    CHECK(std::isnan(linstate::io::bf16_bits_to_float(linstate::io::float_to_bf16_bits(std::nanf("")))));

    // b1 and u8 / u4 / i2
    const npy_array b = linstate::io::parse_npy(
        make_npy(1, 0, "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", bytes_t{1, 0, 1}));
    CHECK(b.to_vector<int>() == std::vector<int>{1, 0, 1});
    CHECK(b.to_vector<bool>() == std::vector<bool>{true, false, true});
    CHECK(b.to_vector<float>() == std::vector<float>{1.f, 0.f, 1.f});
    const npy_array u =
        linstate::io::parse_npy(make_npy(1, 0, "{'descr': '<u8', 'fortran_order': False, 'shape': (1,), }",
                                         le_bytes<std::uint64_t>({~std::uint64_t{0}})));
    CHECK(u.to_vector<std::uint64_t>() == std::vector<std::uint64_t>{~std::uint64_t{0}});
    CHECK_THROWS_WITH_AS(u.to_vector<std::int64_t>(), doctest::Contains("out of range"), npy_error);
    CHECK(u.to_vector<double>()[0] == std::ldexp(1.0, 64));

    // f8 -> integers: out of range and NaN fail; f8 -> f4 saturates to inf.
    const npy_array d =
        linstate::io::parse_npy(make_npy(1, 0, "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }",
                                         le_bytes<double>({-1.9, 1e300, std::nan("")})),
                                "d.npy");
    CHECK_THROWS_WITH_AS(d.to_vector<std::int32_t>(), doctest::Contains("d.npy: cannot convert element 1"), npy_error);
    const std::vector<float> df = d.to_vector<float>();
    CHECK(df[0] == static_cast<float>(-1.9));
    CHECK(df[1] == std::numeric_limits<float>::infinity());
    CHECK(std::isnan(df[2]));
    const npy_array small = linstate::io::parse_npy(
        make_npy(1, 0, "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", le_bytes<double>({-1.9, 255.5})));
    CHECK(small.to_vector<std::int16_t>() == std::vector<std::int16_t>{-1, 255});
    CHECK_THROWS_WITH_AS(small.to_vector<std::uint8_t>(), doctest::Contains("cannot convert element 0"), npy_error);

    // A hand-made npy_array whose data does not match its shape is rejected.
    npy_array bad;
    bad.dtype = npy_dtype::f4;
    bad.shape = {3};
    bad.data.resize(8);
    CHECK_THROWS_WITH_AS(bad.to_vector<float>(), doctest::Contains("<memory>: data holds 8 bytes"), npy_error);
  }

  TEST_CASE("malformed input: every error names the file and the problem") {
    const std::string ok_header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }";
    const bytes_t data16 = le_bytes<float>({1.f, 2.f, 3.f, 4.f});
    const auto parse = [](const bytes_t& b) { return linstate::io::parse_npy(b, "bad.npy"); };
    const auto hdr = [&](const std::string& header, const bytes_t& data) {
      return parse(make_npy(1, 0, header, data));
    };
    const auto hdr4 = [&](const std::string& header) { return hdr(header, data16); };

    // Sanity: the good file parses.
    CHECK(hdr4(ok_header).numel() == 4);

    bytes_t bad_magic = make_npy(1, 0, ok_header, data16);
    bad_magic[1] = 'X';
    CHECK_THROWS_WITH_AS(parse(bad_magic), doctest::Contains("bad.npy: not a .npy file: bad magic"), npy_error);
    CHECK_THROWS_WITH_AS(parse(bytes_t{}), doctest::Contains("bad magic"), npy_error);
    CHECK_THROWS_WITH_AS(parse(bytes_t{0x93, 'N', 'U', 'M', 'P', 'Y', 1}), doctest::Contains("truncated header"),
                         npy_error);
    CHECK_THROWS_WITH_AS(parse(bytes_t{0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 5}),
                         doctest::Contains("header length field"), npy_error);

    CHECK_THROWS_WITH_AS(parse(make_npy(4, 0, ok_header, data16)),
                         doctest::Contains("bad.npy: unsupported format version 4.0"), npy_error);
    CHECK_THROWS_WITH_AS(parse(make_npy(1, 1, ok_header, data16)), doctest::Contains("unsupported format version 1.1"),
                         npy_error);

    bytes_t long_header = make_npy(1, 0, ok_header, {});
    long_header[8] = 0xFF;
    long_header[9] = 0x7F;
    CHECK_THROWS_WITH_AS(parse(long_header),
                         doctest::Contains("bad.npy: header length 32767 goes beyond the end of the file"), npy_error);
    bytes_t long_header_v2 = make_npy(2, 0, ok_header, {});
    long_header_v2[11] = 0x80;
    CHECK_THROWS_WITH_AS(parse(long_header_v2), doctest::Contains("header length 2147483"), npy_error);

    CHECK_THROWS_WITH_AS(hdr4("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 2), }"),
                         doctest::Contains("bad.npy: big-endian dtype '>f4' is not supported"), npy_error);
    CHECK_THROWS_WITH_AS(hdr4("{'descr': [('a', '<f4'), ('b', '<i4')], 'fortran_order': False, 'shape': (2,), }"),
                         doctest::Contains("bad.npy: structured (record) dtype is not supported"), npy_error);
    CHECK_THROWS_WITH_AS(hdr("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", bytes_t(16)),
                         doctest::Contains("bad.npy: object dtype '|O' is not supported"), npy_error);
    CHECK_THROWS_WITH_AS(hdr4("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }"),
                         doctest::Contains("unsupported dtype '<c8'"), npy_error);
    CHECK_THROWS_WITH_AS(hdr4("{'descr': 42, 'fortran_order': False, 'shape': (2, 2), }"),
                         doctest::Contains("'descr' must be a quoted string"), npy_error);

    CHECK_THROWS_WITH_AS(hdr4("{'descr': '<f4', 'fortran_order': False, }"),
                         doctest::Contains("bad.npy: bad header: missing key 'shape'"), npy_error);
    CHECK_THROWS_WITH_AS(hdr4("{'descr': '<f4', 'shape': (2, 2), }"), doctest::Contains("missing key 'fortran_order'"),
                         npy_error);
    CHECK_THROWS_WITH_AS(hdr4("{'fortran_order': False, 'shape': (2, 2), }"), doctest::Contains("missing key 'descr'"),
                         npy_error);
    CHECK_THROWS_WITH_AS(hdr4("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), 'shape': (4,), }"),
                         doctest::Contains("duplicate key 'shape'"), npy_error);
    CHECK_THROWS_WITH_AS(hdr4("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), 'extra': 1, }"),
                         doctest::Contains("unexpected key 'extra'"), npy_error);
    CHECK_THROWS_WITH_AS(hdr4("{'descr': '<f4', 'fortran_order': 0, 'shape': (2, 2), }"),
                         doctest::Contains("'fortran_order' must be True or False"), npy_error);
    CHECK_THROWS_WITH_AS(hdr4("'descr': '<f4', 'fortran_order': False, 'shape': (2, 2)"),
                         doctest::Contains("expected '{'"), npy_error);
    CHECK_THROWS_WITH_AS(hdr4("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), "),
                         doctest::Contains("unterminated dict"), npy_error);
    CHECK_THROWS_WITH_AS(hdr4("{'descr': '<f4' 'fortran_order': False, 'shape': (2, 2), }"),
                         doctest::Contains("expected ',' or '}'"), npy_error);
    CHECK_THROWS_WITH_AS(hdr4("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), } x"),
                         doctest::Contains("unexpected text after the closing '}'"), npy_error);

    CHECK_THROWS_WITH_AS(hdr4("{'descr': '<f4', 'fortran_order': False, 'shape': [2, 2], }"),
                         doctest::Contains("bad.npy: bad shape syntax: 'shape' must be a tuple"), npy_error);
    CHECK_THROWS_WITH_AS(hdr4("{'descr': '<f4', 'fortran_order': False, 'shape': (2 2), }"),
                         doctest::Contains("bad shape syntax: expected ',' or ')'"), npy_error);
    CHECK_THROWS_WITH_AS(hdr4("{'descr': '<f4', 'fortran_order': False, 'shape': (2, , 2), }"),
                         doctest::Contains("bad shape syntax: expected a non-negative integer"), npy_error);
    CHECK_THROWS_WITH_AS(hdr4("{'descr': '<f4', 'fortran_order': False, 'shape': (4), }"),
                         doctest::Contains("bad shape syntax: (4) is not a tuple"), npy_error);
    CHECK_THROWS_WITH_AS(hdr4("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -2), }"),
                         doctest::Contains("negative dimension"), npy_error);
    CHECK_THROWS_WITH_AS(hdr4("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }"),
                         doctest::Contains("absurd dimension"), npy_error);
    CHECK_THROWS_WITH_AS(hdr4("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }"),
                         doctest::Contains("bad.npy: absurd shape (4294967296, 4294967296): its byte size overflows"),
                         npy_error);
    CHECK_THROWS_WITH_AS(hdr4("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4294967296, 4294967296), }"),
                         doctest::Contains("absurd shape"), npy_error);

    CHECK_THROWS_WITH_AS(hdr(ok_header, bytes_t(8)),
                         doctest::Contains("bad.npy: truncated data: expected 16 bytes, got 8"), npy_error);
    CHECK_THROWS_WITH_AS(hdr(ok_header, bytes_t(17)),
                         doctest::Contains("bad.npy: trailing bytes after the data: expected 16 bytes, got 17"),
                         npy_error);

    // File-level errors name the file.
    temp_dir dir;
    const fs::path missing = dir.path / "missing.npy";
    CHECK_THROWS_WITH_AS(linstate::io::read_npy(missing),
                         doctest::Contains((missing.string() + ": cannot open: No such file or directory").c_str()),
                         npy_error);
    CHECK_THROWS_WITH_AS(linstate::io::read_npy(dir.path), doctest::Contains("is a directory"), npy_error);
    {
      bytes_t cut = make_npy(1, 0, ok_header, data16);
      cut.pop_back();
      std::ofstream(dir.path / "cut.npy", std::ios::binary)
          .write(reinterpret_cast<const char*>(cut.data()), static_cast<std::streamsize>(cut.size()));
    }
    CHECK_THROWS_WITH_AS(
        linstate::io::read_npy(dir.path / "cut.npy"),
        doctest::Contains(((dir.path / "cut.npy").string() + ": truncated data: expected 16 bytes, got 15").c_str()),
        npy_error);
  }

  TEST_CASE("error messages are one line and start with the name") {
    std::string long_garbage = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }\n\n\x01\x02 more text\n";
    const std::vector<bytes_t> cases = {
        bytes_t{'\n', '\n', '\n', '\n', '\n', '\n', '\n', '\n'},
        make_npy(1, 0, long_garbage, bytes_t(16), false),
        make_npy(1, 0, "{'descr': '\n', 'fortran_order': False, 'shape': (2, 2), }", bytes_t(16)),
        make_npy(1, 0, "{'descr': '<f\x01\x7f', 'fortran_order': False, 'shape': (2, 2), }", bytes_t(16)),
        make_npy(1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,\n\n", bytes_t(16), false),
    };
    for (const bytes_t& b : cases) {
      const std::string msg = error_of([&] { (void)linstate::io::parse_npy(b, "x.npy"); });
      CAPTURE(msg);
      CHECK(msg.starts_with("x.npy: "));
      CHECK(msg.find('\n') == std::string::npos);
      CHECK(msg.find('\r') == std::string::npos);
    }
  }

}  // TEST_SUITE
