// linstate/cuda/kernels/tile_mma.cuh — block-wide products of shared-memory tiles, C (+)= A·B.
//
// The chunked kernels (kernels/chunked.cuh) express every matrix product of a chunk — Q̃·H, Q̃·K̃ᵀ,
// A·V, K̃ᵀ·V — as one call of tile_mma on operands they staged in shared memory:
//
//   C[M×N] fp32 (+)= A[M×Kd] · B[Kd×N]        M, N, Kd multiples of 16
//
// with the operand element type Op chosen by the input type:
//   * __nv_bfloat16 / __half: tensor cores, mma.sync m16n8k16 with fp32 accumulators on fragments that
//     ldmatrix reads from shared memory (mma_detail). Each warp owns whole 16×16 output tiles, two
//     m16n8k16 products per 16-deep k-step, k ascending; an operand that is a transposed copy is read
//     as col_major (ldmatrix .trans where k is not contiguous), so no transposition is materialised.
//     (Until session 30 this was WMMA 16×16×16: the same two HMMA.16816 per k-step on the same
//     fragments, so the same bits, but its fragment loads compiled to generic 32-bit loads.)
//   * float: exact fp32 on the CUDA cores (no TF32, issue 4): each thread owns 4×4 output elements
//     and sums over Kd in order with fused multiply-adds.
// Layout tags: row_major means X(i, k) = X[i·ld + k]; col_major means X(i, k) = X[k·ld + i].
// Requirements (16-bit operands): A and B in shared memory, ld a multiple of 8 elements and the
// tiles 16-byte aligned (ldmatrix's rows); C (shared or global) with ldc even and 8-byte aligned —
// the kernels pad their leading dimensions to keep them.
// The caller synchronises the block before (operands written) and after (C read).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

namespace linstate::cuda_detail {

struct row_major_t {};
struct col_major_t {};

//! ldmatrix.x4.trans: four 8 × 8 bf16 blocks of shared memory, transposed into mma fragments; lane l
//! gives the address of row l % 8 of block l / 8 (16-byte aligned rows).
__device__ __forceinline__ void ldsm_x4_trans(unsigned (&r)[4], unsigned addr) {  // addr: a shared-memory address
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_trans(unsigned (&r)[4], const void* s) {
  ldsm_x4_trans(r, static_cast<unsigned>(__cvta_generic_to_shared(s)));
}

//! ldmatrix.x4: four 8 × 8 bf16 blocks of shared memory into mma fragments, untransposed; lane l gives
//! the address of row l % 8 of block l / 8 (16-byte aligned rows).
__device__ __forceinline__ void ldsm_x4(unsigned (&r)[4], unsigned addr) {  // addr: a shared-memory address
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4(unsigned (&r)[4], const void* s) {
  ldsm_x4(r, static_cast<unsigned>(__cvta_generic_to_shared(s)));
}

//! The calling thread's warp index (threadIdx.x / 32) through a shuffle from lane 0, so that the compiler
//! knows it is the same in every lane of the warp: branches and loop bounds formed from it are then
//! warp-uniform, and the compiler puts no WARPSYNC before the ldmatrix / mma.sync / shuffles inside them
//! (session 31: 23 of them in delta_tc_state_kernel's loop). Every lane of the warp must call it together
//! (a kernel's prologue, a block-wide helper).
__device__ __forceinline__ int uniform_warp_index() {
  return __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) >> 5, 0);
}

template <class L>
__device__ __forceinline__ int tile_index(int i, int k, int ld) {
  if constexpr (std::is_same_v<L, row_major_t>) return i * ld + k;
  else return k * ld + i;
}

template <class Op>
inline constexpr bool tensor_core_op = std::is_same_v<Op, __nv_bfloat16> || std::is_same_v<Op, __half>;


namespace mma_detail {
//! d += a·b, one m16n8k16 product of 16-bit operands (bf16 or fp16) with fp32 accumulators.
template <class Op>
__device__ __forceinline__ void mma16816(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  if constexpr (std::is_same_v<Op, __nv_bfloat16>)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
//! One operand of a 16 × 16 × 16 step in shared memory, as ldmatrix.x4 reads it: `at` is this lane's
//! row address for the block at (0, 0) and `step` the bytes from one k-step's block to the next. The A
//! side (rows i, columns k) gives the fragments a0 … a3; the B side (rows k, columns n) gives b0, b1 of
//! columns 0 … 7 in registers 0, 1 and of columns 8 … 15 in 2, 3. A stored row-major and B stored as
//! the rows of Bᵀ (col_major: k contiguous) are read untransposed, the other two by .trans.
template <class L, bool IsA, class Op>
struct operand16 {
  static constexpr bool contiguous_k = std::is_same_v<L, row_major_t> == IsA;  // k runs along the stored rows
  unsigned at, step;
  __device__ __forceinline__ operand16(const Op* X, int ld, int r0, int lane) {  // r0: the block's i0 (A) or n0 (B)
    // stored (row, column) of the lane's address: r0 indexes stored rows when k is contiguous, else columns
    int sr, sc;
    if constexpr (contiguous_k) {
      sr = r0 + (IsA ? (lane & 15) : (lane & 7) + 8 * (lane >> 4));
      sc = IsA ? 8 * (lane >> 4) : 8 * ((lane >> 3) & 1);
    } else {
      sr = IsA ? (lane & 7) + 8 * (lane >> 4) : (lane & 7) + 8 * ((lane >> 3) & 1);
      sc = r0 + (IsA ? 8 * ((lane >> 3) & 1) : 8 * (lane >> 4));
    }
    at = static_cast<unsigned>(__cvta_generic_to_shared(X + sr * ld + sc));
    step = contiguous_k ? 16u * sizeof(Op) : static_cast<unsigned>(16 * ld * sizeof(Op));
  }
  __device__ __forceinline__ void load(unsigned (&r)[4], int k) const {
    if constexpr (contiguous_k) ldsm_x4(r, at + step * k);
    else ldsm_x4_trans(r, at + step * k);
  }
};
//! c (+)= A·B over Kd / 16 k-steps (A's block rows i0, B's block columns j0), k ascending: per k-step the
//! two m16n8k16 products of wmma's 16 × 16 × 16 product, on the same fragments (so the same bits).
template <class LA, class LB, class Op>
__device__ __forceinline__ void mma_steps(float (&c)[2][4], const Op* A, int lda, const Op* B, int ldb, int i0, int j0, int Kd, int lane) {
  const operand16<LA, true, Op> a(A, lda, i0, lane);
  const operand16<LB, false, Op> b(B, ldb, j0, lane);
  for (int k = 0; k < Kd / 16; ++k) {
    unsigned fa[4], fb[4];
    a.load(fa, k);
    b.load(fb, k);
    mma16816<Op>(c[0], fa, fb[0], fb[1]);
    mma16816<Op>(c[1], fa, fb[2], fb[3]);
  }
}
//! The accumulators of the 16 × 16 tile at (i0, j0) of C (row-major, ldc even): lane l holds rows
//! g = l / 4 and g + 8, columns 8h + 2(l % 4) and + 1 in c[h].
__device__ __forceinline__ void load_c(float (&c)[2][4], const float* C, int ldc, int i0, int j0, int lane) {
  const float* o = C + (i0 + (lane >> 2)) * ldc + j0 + 2 * (lane & 3);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float2 u = *reinterpret_cast<const float2*>(o + 8 * h), v = *reinterpret_cast<const float2*>(o + 8 * h + 8 * ldc);
    c[h][0] = u.x, c[h][1] = u.y, c[h][2] = v.x, c[h][3] = v.y;
  }
}
__device__ __forceinline__ void store_c(float* C, int ldc, int i0, int j0, const float (&c)[2][4], int lane) {
  float* o = C + (i0 + (lane >> 2)) * ldc + j0 + 2 * (lane & 3);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    *reinterpret_cast<float2*>(o + 8 * h) = make_float2(c[h][0], c[h][1]);
    *reinterpret_cast<float2*>(o + 8 * h + 8 * ldc) = make_float2(c[h][2], c[h][3]);
  }
}
}  // namespace mma_detail

//! C[M×N] (row-major, ldc) = (accumulate ? C : 0) + A·B. Whole block; no barrier inside.
template <class LA, class LB, class Op>
__device__ __forceinline__ void tile_mma(float* C, int ldc, const Op* A, int lda, const Op* B, int ldb, int M, int N, int Kd,
                                         bool accumulate) {
  if constexpr (tensor_core_op<Op>) {
    const int lane = static_cast<int>(threadIdx.x) & 31;
    const int warp = static_cast<int>(threadIdx.x) >> 5, nwarps = static_cast<int>(blockDim.x) >> 5;
    const int tn = N / 16, tiles = (M / 16) * tn;
    for (int tile = warp; tile < tiles; tile += nwarps) {
      const int i0 = (tile / tn) * 16, j0 = (tile % tn) * 16;
      float c[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
      if (accumulate) mma_detail::load_c(c, C, ldc, i0, j0, lane);
      mma_detail::mma_steps<LA, LB>(c, A, lda, B, ldb, i0, j0, Kd, lane);
      mma_detail::store_c(C, ldc, i0, j0, c, lane);
    }
  } else {
    static_assert(std::is_same_v<Op, float>, "tile_mma: operands are float, __nv_bfloat16 or __half");
    const int tn = N / 4, tiles = (M / 4) * tn;
    for (int tile = static_cast<int>(threadIdx.x); tile < tiles; tile += static_cast<int>(blockDim.x)) {
      const int i0 = (tile / tn) * 4, j0 = (tile % tn) * 4;
      float acc[4][4];
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int c = 0; c < 4; ++c) acc[r][c] = accumulate ? C[(i0 + r) * ldc + j0 + c] : 0.f;
      for (int k = 0; k < Kd; ++k) {
        float a[4], b[4];
#pragma unroll
        for (int r = 0; r < 4; ++r) a[r] = A[tile_index<LA>(i0 + r, k, lda)];
#pragma unroll
        for (int c = 0; c < 4; ++c) b[c] = B[tile_index<LB>(k, j0 + c, ldb)];
#pragma unroll
        for (int r = 0; r < 4; ++r)
#pragma unroll
          for (int c = 0; c < 4; ++c) acc[r][c] = fmaf(a[r], b[c], acc[r][c]);
      }
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int c = 0; c < 4; ++c) C[(i0 + r) * ldc + j0 + c] = acc[r][c];
    }
  }
}

//! C[M×N] (row-major, ldc) = A1[M×K1]·B1[K1×N] + A2[M×K2]·B2[K2×N], one accumulator per output tile
//! (the two products may take different 16-bit operand types and layouts: LA1/LB1 for the first,
//! LA2/LB2 for the second). Whole block; no barrier inside.
template <class LA1, class LB1, class LA2, class LB2, class Op1, class Op2>
__device__ __forceinline__ void tile_mma2x(float* C, int ldc, const Op1* A1, int lda1, const Op1* B1, int ldb1, int K1,
                                           const Op2* A2, int lda2, const Op2* B2, int ldb2, int K2, int M, int N) {
  static_assert(tensor_core_op<Op1> == tensor_core_op<Op2>, "tile_mma2: both products on tensor cores or both fp32");
  if constexpr (tensor_core_op<Op1>) {
    const int lane = static_cast<int>(threadIdx.x) & 31;
    const int warp = static_cast<int>(threadIdx.x) >> 5, nwarps = static_cast<int>(blockDim.x) >> 5;
    const int tn = N / 16, tiles = (M / 16) * tn;
    for (int tile = warp; tile < tiles; tile += nwarps) {
      const int i0 = (tile / tn) * 16, j0 = (tile % tn) * 16;
      float c[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
      mma_detail::mma_steps<LA1, LB1>(c, A1, lda1, B1, ldb1, i0, j0, K1, lane);
      mma_detail::mma_steps<LA2, LB2>(c, A2, lda2, B2, ldb2, i0, j0, K2, lane);
      mma_detail::store_c(C, ldc, i0, j0, c, lane);
    }
  } else {
    // exact fp32: the first product into the thread's own 4×4 elements, then the second accumulated
    tile_mma<LA1, LB1>(C, ldc, A1, lda1, B1, ldb1, M, N, K1, false);
    tile_mma<LA2, LB2>(C, ldc, A2, lda2, B2, ldb2, M, N, K2, true);  // same thread owns the same elements
  }
}

//! tile_mma2x with the same layouts for both products.
template <class LA, class LB, class Op1, class Op2>
__device__ __forceinline__ void tile_mma2(float* C, int ldc, const Op1* A1, int lda1, const Op1* B1, int ldb1, int K1,
                                          const Op2* A2, int lda2, const Op2* B2, int ldb2, int K2, int M, int N) {
  tile_mma2x<LA, LB, LA, LB>(C, ldc, A1, lda1, B1, ldb1, K1, A2, lda2, B2, ldb2, K2, M, N);
}

//! Split-bf16 products of fp32 operands on tensor cores (the "bf16x3" scheme): each fp32 operand x is
//! written as hi + lo with hi = bf16(x), lo = bf16(x − hi), and A·B ≈ A_lo·B_hi + A_hi·B_lo + A_hi·B_hi
//! by mma.sync m16n8k16 (bf16 operands, fp32 accumulators; the bf16 products are exact in fp32). The
//! dropped A_lo·B_lo and the residual x − hi − lo are below 2⁻¹⁷|x|, so each product term is within
//! about 1e-5 of its fp32 value: near-fp32 results at tensor-core speed, for the backward of bf16
//! inputs (never for fp32 inputs: those stay exact fp32, issue 4).
//! tile_mma_x3's `flags`: blocks of a split-bf16 product known to need no work (x3_a_lower, x3_a_upper,
//! x3_c_lower), and x3_plain: both operands rounded to bf16 (hi only), one product per k-step instead of
//! three — plain bf16 operands with fp32 accumulators, for a product whose caller has measured that its
//! results stay within the tolerance it needs (delta_grad_kernel).
inline constexpr unsigned x3_a_lower = 1u, x3_a_upper = 2u, x3_c_lower = 4u, x3_plain = 8u;

namespace x3_detail {
//! (x0, x1) → bf16 pairs hi (round to nearest even) and lo = bf16(x − hi), the lower index in the low half.
__device__ __forceinline__ void split2(float x0, float x1, unsigned& hi, unsigned& lo) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(x0, x1);
  const float2 hf = __bfloat1622float2(h);
  const __nv_bfloat162 l = __floats2bfloat162_rn(x0 - hf.x, x1 - hf.y);
  hi = *reinterpret_cast<const unsigned*>(&h);
  lo = *reinterpret_cast<const unsigned*>(&l);
}
//! (x0, x1) → one register of two bf16 (round to nearest even), x0 in the low half: split2's hi alone.
__device__ __forceinline__ unsigned bf2(float x0, float x1) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(x0, x1);
  return *reinterpret_cast<const unsigned*>(&h);
}
//! d += a·b, one m16n8k16 bf16 product (PTX fragment layouts: a rows g, g + 8 and columns 2t, 2t + 1,
//! + 8; b rows 2t, 2t + 1, + 8 and column g; d rows g, g + 8 and columns 2t, 2t + 1; g = lane / 4, t = lane % 4).
__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
  mma_detail::mma16816<__nv_bfloat16>(d, a, b[0], b[1]);
}
}  // namespace x3_detail

//! C[M×N] (row-major, ldc) = (accumulate ? C : 0) + A·B with fp32 operands (shared or global memory,
//! layouts as tile_mma) by the split-bf16 scheme above. M, N, Kd multiples of 16; no alignment
//! needed. Each warp owns whole 16×16 output tiles (the same tiles, and the same lanes for each
//! element, on every call of the same shape). `flags` (x3_a_lower, x3_a_upper, x3_c_lower) names the
//! 16×16 blocks that need no product: A's blocks above (a_lower: A(i, k) = 0 for k > i) or below
//! (a_upper: A(i, k) = 0 for k < i) its diagonal hold exact zeros, whose products would add nothing to
//! the accumulators (so the results are the same bits); c_lower: C's tiles above the diagonal are not
//! wanted (left as they are). Whole block; no barrier inside.
template <class LA, class LB>
__device__ __forceinline__ void tile_mma_x3(float* C, int ldc, const float* A, int lda, const float* B, int ldb, int M, int N,
                                            int Kd, bool accumulate, unsigned flags = 0) {
  using x3_detail::split2;
  using x3_detail::mma_bf16_16816;
  const int warp = static_cast<int>(threadIdx.x) >> 5, nwarps = static_cast<int>(blockDim.x) >> 5;
  const int lane = static_cast<int>(threadIdx.x) & 31, g = lane >> 2, t2 = (lane & 3) * 2;
  const int tn = N / 16, tiles = (M / 16) * tn;
  auto a = [&](int i, int k) { return A[tile_index<LA>(i, k, lda)]; };
  auto b = [&](int k, int j) { return B[tile_index<LB>(k, j, ldb)]; };
  for (int tile = warp; tile < tiles; tile += nwarps) {
    const int i0 = (tile / tn) * 16, j0 = (tile % tn) * 16;
    if ((flags & x3_c_lower) && j0 > i0) continue;
    // the k-steps whose A block is not known to be zero
    const int kb = (flags & x3_a_upper) ? i0 : 0, ke = (flags & x3_a_lower) ? min(Kd, i0 + 16) : Kd;
    float d[2][4];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int j = j0 + 8 * h + t2;
      float* c0 = C + (i0 + g) * ldc + j;
      float* c1 = C + (i0 + g + 8) * ldc + j;
      d[h][0] = accumulate ? c0[0] : 0.f, d[h][1] = accumulate ? c0[1] : 0.f;
      d[h][2] = accumulate ? c1[0] : 0.f, d[h][3] = accumulate ? c1[1] : 0.f;
    }
    for (int k0 = kb; k0 < ke; k0 += 16) {
      if (flags & x3_plain) {  // hi only: one product
        unsigned ah[4];
        ah[0] = x3_detail::bf2(a(i0 + g, k0 + t2), a(i0 + g, k0 + t2 + 1));
        ah[1] = x3_detail::bf2(a(i0 + g + 8, k0 + t2), a(i0 + g + 8, k0 + t2 + 1));
        ah[2] = x3_detail::bf2(a(i0 + g, k0 + t2 + 8), a(i0 + g, k0 + t2 + 9));
        ah[3] = x3_detail::bf2(a(i0 + g + 8, k0 + t2 + 8), a(i0 + g + 8, k0 + t2 + 9));
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int j = j0 + 8 * h + g;
          const unsigned bh[2] = {x3_detail::bf2(b(k0 + t2, j), b(k0 + t2 + 1, j)), x3_detail::bf2(b(k0 + t2 + 8, j), b(k0 + t2 + 9, j))};
          mma_bf16_16816(d[h], ah, bh);
        }
        continue;
      }
      unsigned ah[4], al[4];
      split2(a(i0 + g, k0 + t2), a(i0 + g, k0 + t2 + 1), ah[0], al[0]);
      split2(a(i0 + g + 8, k0 + t2), a(i0 + g + 8, k0 + t2 + 1), ah[1], al[1]);
      split2(a(i0 + g, k0 + t2 + 8), a(i0 + g, k0 + t2 + 9), ah[2], al[2]);
      split2(a(i0 + g + 8, k0 + t2 + 8), a(i0 + g + 8, k0 + t2 + 9), ah[3], al[3]);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int j = j0 + 8 * h + g;
        unsigned bh[2], bl[2];
        split2(b(k0 + t2, j), b(k0 + t2 + 1, j), bh[0], bl[0]);
        split2(b(k0 + t2 + 8, j), b(k0 + t2 + 9, j), bh[1], bl[1]);
        mma_bf16_16816(d[h], al, bh);
        mma_bf16_16816(d[h], ah, bl);
        mma_bf16_16816(d[h], ah, bh);
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int j = j0 + 8 * h + t2;
      float* c0 = C + (i0 + g) * ldc + j;
      float* c1 = C + (i0 + g + 8) * ldc + j;
      c0[0] = d[h][0], c0[1] = d[h][1], c1[0] = d[h][2], c1[1] = d[h][3];
    }
  }
}

//! tile_mma on fp32 operands for a kernel whose inputs have element type Dev: for bf16 inputs the
//! split-bf16 tensor-core products (tile_mma_x3) where M, N and Kd are multiples of 16; otherwise, and
//! for every other input type, tile_mma's exact fp32 (which ignores `flags`: it computes every tile, exactly).
//! (A kernel's calls of one shape always take the same branch, so element ownership is stable across its calls.)
template <class Dev, class LA, class LB>
__device__ __forceinline__ void tile_mma_f32(float* C, int ldc, const float* A, int lda, const float* B, int ldb, int M, int N,
                                             int Kd, bool accumulate, unsigned flags = 0) {
  if constexpr (std::is_same_v<Dev, __nv_bfloat16>) {
    if (((M | N | Kd) & 15) == 0) {
      tile_mma_x3<LA, LB>(C, ldc, A, lda, B, ldb, M, N, Kd, accumulate, flags);
      return;
    }
  }
  tile_mma<LA, LB>(C, ldc, A, lda, B, ldb, M, N, Kd, accumulate);
}

//! Operand element type for input element type Dev: the tensor-core types stay, fp32 stays fp32.
template <class Dev>
using operand_t = Dev;

//! fp32 → operand type (round to nearest even).
template <class Op>
__device__ __forceinline__ Op to_op(float x) {
  if constexpr (std::is_same_v<Op, __nv_bfloat16>) return __float2bfloat16_rn(x);
  else if constexpr (std::is_same_v<Op, __half>) return __float2half_rn(x);
  else return x;
}

}  // namespace linstate::cuda_detail
