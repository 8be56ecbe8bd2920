// linstate/tensor.hpp — non-owning views and owning tensors, plus the library's error type.
//
// Every tensor the library reads or writes is a dense, row-major (C-order) array described by a
// pointer and a shape, exactly like the .npy files and the PyTorch tensors of the reference
// implementation. A view never owns memory; `tensor<T>` owns it and hands out views.
//
//   linstate::tensor<float> q({B, T, H, K});          // zero-filled [B,T,H,K]
//   linstate::tensor_view<const float> qv = q.view(); // what the API takes
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace linstate {

using index_t = std::int64_t;

//! Thrown for every run-time misuse (shape mismatch, bad cu_seqlens, missing input...). The message
//! names the tensors involved and their shapes. When it is thrown, no output and no state has been
//! written yet.
class error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

//! A tensor shape of rank 0..6.
class shape_t {
 public:
  static constexpr int max_rank = 6;
  constexpr shape_t() = default;
  constexpr shape_t(std::initializer_list<index_t> dims) : rank_(static_cast<int>(dims.size())) {
    if (dims.size() > max_rank) throw error("linstate: tensor rank above 6");
    std::copy(dims.begin(), dims.end(), dims_.begin());
  }
  template <class It>
  static shape_t from_range(It first, It last) {
    shape_t s;
    for (; first != last; ++first) {
      if (s.rank_ == max_rank) throw error("linstate: tensor rank above 6");
      s.dims_[s.rank_++] = static_cast<index_t>(*first);
    }
    return s;
  }
  constexpr int rank() const { return rank_; }
  constexpr index_t operator[](int i) const { return dims_[i]; }
  constexpr index_t& operator[](int i) { return dims_[i]; }
  constexpr index_t numel() const {
    index_t n = 1;
    for (int i = 0; i < rank_; ++i) n *= dims_[i];
    return n;
  }
  constexpr const index_t* begin() const { return dims_.data(); }
  constexpr const index_t* end() const { return dims_.data() + rank_; }
  friend constexpr bool operator==(const shape_t& a, const shape_t& b) {
    if (a.rank_ != b.rank_) return false;
    for (int i = 0; i < a.rank_; ++i)
      if (a.dims_[i] != b.dims_[i]) return false;
    return true;
  }
  std::string str() const {
    std::ostringstream os;
    os << '[';
    for (int i = 0; i < rank_; ++i) os << (i ? "," : "") << dims_[i];
    os << ']';
    return os.str();
  }

 private:
  std::array<index_t, max_rank> dims_{};
  int rank_ = 0;
};

//! Non-owning view of a dense row-major array. An empty view (data == nullptr) means "not given".
template <class T>
struct tensor_view {
  T* data = nullptr;
  shape_t shape{};

  constexpr tensor_view() = default;
  constexpr tensor_view(T* p, shape_t s) : data(p), shape(s) {}
  //! A view of non-const data converts to a view of const data.
  template <class U>
    requires(std::is_same_v<const U, T> && !std::is_same_v<U, T>)
  constexpr tensor_view(const tensor_view<U>& other) : data(other.data), shape(other.shape) {}

  constexpr bool empty() const { return data == nullptr; }
  constexpr int rank() const { return shape.rank(); }
  constexpr index_t size(int i) const { return shape[i]; }
  constexpr index_t numel() const { return data ? shape.numel() : 0; }
};

//! Owning dense row-major tensor (zero-initialised). Move-only in spirit, copyable for tests.
template <class T>
class tensor {
 public:
  tensor() = default;
  explicit tensor(shape_t s) : shape_(s), data_(static_cast<std::size_t>(s.numel()), T{}) {}
  tensor(shape_t s, std::vector<T> values) : shape_(s), data_(std::move(values)) {
    if (static_cast<index_t>(data_.size()) != s.numel())
      throw error("linstate: tensor" + s.str() + " built from " + std::to_string(data_.size()) + " values");
  }
  const shape_t& shape() const { return shape_; }
  index_t numel() const { return static_cast<index_t>(data_.size()); }
  T* data() { return data_.data(); }
  const T* data() const { return data_.data(); }
  T& operator[](index_t i) { return data_[static_cast<std::size_t>(i)]; }
  const T& operator[](index_t i) const { return data_[static_cast<std::size_t>(i)]; }
  std::vector<T>& values() { return data_; }
  const std::vector<T>& values() const { return data_; }
  tensor_view<T> view() { return {data_.data(), shape_}; }
  tensor_view<const T> view() const { return {data_.data(), shape_}; }
  tensor_view<const T> cview() const { return {data_.data(), shape_}; }
  bool empty() const { return data_.empty(); }

 private:
  shape_t shape_{};
  std::vector<T> data_{};
};

}  // namespace linstate
