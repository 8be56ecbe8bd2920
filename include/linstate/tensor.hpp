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

//! Non-owning view of a dense row-major array.
//!
//! "Given" and "empty": a view is *empty* — the tensor was not given — when it has no data although
//! its shape has elements; a default-constructed view (no data, rank-0 shape of one element) is the
//! usual way to say so. A view whose shape has a zero extent (T = 0, B = 0) is *given* and has no
//! elements, whatever its pointer: a zero-element allocation (an empty std::vector, cudaMalloc of 0
//! bytes) may well have a null one. So an empty batch is a valid call, not a missing tensor.
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

  //! True when the tensor was not given: no data for a shape that has elements (see above).
  constexpr bool empty() const { return data == nullptr && shape.numel() != 0; }
  constexpr int rank() const { return shape.rank(); }
  constexpr index_t size(int i) const { return shape[i]; }
  //! Elements of a given view; 0 for an empty one.
  constexpr index_t numel() const { return empty() ? 0 : shape.numel(); }
};

//! Owning dense row-major tensor (zero-initialised). Move-only in spirit, copyable for tests.
//! empty() means what it means for a view: default-constructed (no shape, no data), so `t.empty() ?
//! tensor_view{} : t.view()` maps an absent tensor to an absent view, and a tensor of a zero-sized
//! shape (say {B, 0, H, K}) to a given, zero-element view.
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
  //! True for a default-constructed tensor (no data although its shape has elements), false for a
  //! zero-sized shape.
  bool empty() const { return data_.empty() && shape_.numel() != 0; }

 private:
  shape_t shape_{};
  std::vector<T> data_{};
};

}  // namespace linstate
