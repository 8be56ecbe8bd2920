// cuda/emulation/shim/mma.h — nvcuda::wmma 16×16×16 for the CPU emulation (emulation.hpp): every lane
// holds the whole tile (no lane mapping: the kernels never index a fragment's elements by lane), loads
// it and stores it itself; a product is formed once per warp (lane 0's operands, which every lane
// holds too) and copied into every lane's accumulator.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
namespace nvcuda::wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };
template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
  static constexpr int rows = std::is_same_v<Use, matrix_b> ? K : M;
  static constexpr int cols = std::is_same_v<Use, matrix_a> ? K : N;
  static constexpr int num_elements = rows * cols;
  float x[rows * cols];  // row-major, values in fp32 (operands are bf16/fp16 exact in fp32)
};
inline float wf(float v) { return v; }
inline float wf(__nv_bfloat16 v) { return __bfloat162float(v); }
inline float wf(__half v) { return __half2float(v); }
template <class Use, int M, int N, int K, class T, class Layout, class P>
void load_matrix_sync(fragment<Use, M, N, K, T, Layout>& f, const P* p, unsigned ld) {
  using F = fragment<Use, M, N, K, T, Layout>;
  for (int i = 0; i < F::rows; ++i)
    for (int j = 0; j < F::cols; ++j)
      f.x[i * F::cols + j] = wf(std::is_same_v<Layout, col_major> ? p[j * ld + i] : p[i * ld + j]);
}
template <int M, int N, int K>
void load_matrix_sync(fragment<accumulator, M, N, K, float>& f, const float* p, unsigned ld, layout_t l) {
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) f.x[i * N + j] = l == mem_col_major ? p[j * ld + i] : p[i * ld + j];
}
template <int M, int N, int K>
void store_matrix_sync(float* p, const fragment<accumulator, M, N, K, float>& f, unsigned ld, layout_t l) {
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) (l == mem_col_major ? p[j * ld + i] : p[i * ld + j]) = f.x[i * N + j];
}
template <class Use, int M, int N, int K, class T, class L>
void fill_fragment(fragment<Use, M, N, K, T, L>& f, float v) {
  for (auto& e : f.x) e = v;
}
template <int M, int N, int K, class T, class LA, class LB>
void mma_sync(fragment<accumulator, M, N, K, float>& d, const fragment<matrix_a, M, N, K, T, LA>& a,
              const fragment<matrix_b, M, N, K, T, LB>& b, const fragment<accumulator, M, N, K, float>& c) {
  // the lanes hold the same tiles: one product (lane 0's operands), copied into every lane's d
  struct args_t {
    fragment<accumulator, M, N, K, float>* d;
    const fragment<matrix_a, M, N, K, T, LA>* a;
    const fragment<matrix_b, M, N, K, T, LB>* b;
    const fragment<accumulator, M, N, K, float>* c;
  } mine{&d, &a, &b, &c};
  ::linstate_emu::warp_once(
      [](void* const* lanes) {
        const args_t& l0 = *static_cast<const args_t*>(lanes[0]);
        float r[M * N];
        for (int i = 0; i < M; ++i)
          for (int j = 0; j < N; ++j) {
            double s = 0;
            for (int k = 0; k < K; ++k) s += static_cast<double>(l0.a->x[i * K + k]) * l0.b->x[k * N + j];
            r[i * N + j] = static_cast<float>(s + l0.c->x[i * N + j]);
          }
        for (int l = 0; l < 32; ++l) std::memcpy(static_cast<const args_t*>(lanes[l])->d->x, r, sizeof r);
      },
      &mine);
}
}  // namespace nvcuda::wmma
