// linstate/cuda/kernels/records.cuh — SSE's varlen grouping on the device: which tokens feed which
// partition, laid out so that one batched chunked call covers every (sequence, partition) stream.
//
// A *segment* is the token stream one partition of one sequence sees, in time order: all tokens of
// the sequence for the shared partition, for partition::single and for router::dense; for a routed
// partition under router::top_k only the tokens that write or read it (SPEC §4.7; a token that does
// neither is skipped, which is what keeps a frozen partition's state bit-identical). Segment id =
// part·S + s (partition-major). Every segment starts on a chunk boundary and is padded to whole
// chunks of C records; a padding record has token −1 (it neither writes nor reads).
//
//   seg_chunk [S·P + 1]      first chunk of each segment (exclusive scan of ⌈len/C⌉); [S·P] = total
//   chunk_seg [max_chunks]   segment of each chunk (chunks past the total are not written)
//   rec_tok   [max_chunks·C] token of each record (flat index b·T + t), −1 for padding
//
// How it is built (no host synchronisation; the chunk count stays on the device and the chunked
// kernels launch max_chunks blocks, the ones past the total return at once):
//   1. routed_flags_kernel: f[n·tokens + t] = 1 if token t writes or reads routed partition n;
//   2. thrust::exclusive_scan over f (one extra 0 at the end): the rank of every record inside its
//      segment and every routed segment's length — a stable counting sort by the key
//      (partition, sequence, time), which is the order the scan visits f in;
//   3. segment_chunks_kernel + thrust::exclusive_scan: seg_chunk;
//   4. chunk_seg_kernel and the two scatter kernels: chunk_seg and rec_tok.
// Thrust runs with thrust::cuda::par_nosync on the call's stream, its temporary storage drawn from
// the library's stream-ordered pool (pool_allocator below), so it neither blocks nor calls cudaFree.
#pragma once

#include <cuda_runtime.h>
#include <thrust/execution_policy.h>
#include <thrust/scan.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include <linstate/detail/problem.hpp>
#include <linstate/detail/router.hpp>

#include "../check.cuh"
#include "router.cuh"

namespace linstate::cuda_detail {

//! Thrust's temporary storage from a stream-ordered pool (cudaMallocFromPoolAsync / cudaFreeAsync).
struct pool_allocator {
  using value_type = char;
  cudaStream_t stream;
  cudaMemPool_t pool;
  const char* api;
  char* allocate(std::ptrdiff_t n) {
    void* p = nullptr;
    check(cudaMallocFromPoolAsync(&p, static_cast<std::size_t>(n), pool, stream), "cudaMallocFromPoolAsync (thrust)", api);
    return static_cast<char*>(p);
  }
  void deallocate(char* p, std::size_t) { (void)cudaFreeAsync(p, stream); }
};

//! The device view of the record table (see the top of this file).
struct record_table {
  int C = 64;
  int S = 1, P = 1;
  const index_t* seg_chunk = nullptr;  // [S·P + 1]
  const int* chunk_seg = nullptr;      // [max_chunks]
  const int* rec_tok = nullptr;        // [max_chunks·C]
  index_t max_chunks = 0;
};

//! Token range [t0, t1) of sequence s: packed offsets when given, else s·T.
__device__ __forceinline__ void sequence_range(const index_t* seq, index_t T, index_t s, index_t& t0, index_t& t1) {
  t0 = seq ? seq[s] : s * T;
  t1 = seq ? seq[s + 1] : (s + 1) * T;
}

//! Sequence of token t (binary search in the packed offsets; s = t / T when unpacked).
__device__ __forceinline__ index_t sequence_of(const index_t* seq, index_t T, index_t S, index_t t) {
  if (!seq) return t / T;
  index_t lo = 0, hi = S;  // seq[lo] <= t < seq[hi]; empty sequences are skipped by taking the last
  while (hi - lo > 1) {
    const index_t mid = (lo + hi) / 2;
    if (seq[mid] <= t) lo = mid;
    else hi = mid;
  }
  return lo;
}

// (static: a kernel that is not a template has internal linkage, so that several .cu files of one
// program can include this header; each gets its own copy.)
static __global__ void routed_flags_kernel(const std::uint32_t* meta, index_t tokens, int N, int* f) {
  const index_t i = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x;  // n·tokens + t
  if (i > tokens * N) return;
  if (i == tokens * N) {
    f[i] = 0;  // the scan's extra element: its result is the total
    return;
  }
  const index_t n = i / tokens, t = i % tokens;
  f[i] = (meta[t * N + n] & (detail::route_write | detail::route_read)) ? 1 : 0;
}

//! Chunks of each segment; `rank` is the exclusive scan of the routed flags (null without routing).
static __global__ void segment_chunks_kernel(const index_t* seq, index_t T, int S, int P, int first_routed, index_t tokens,
                                      const int* rank, int C, index_t* chunks) {
  const int seg = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (seg > S * P) return;
  if (seg == S * P) {
    chunks[seg] = 0;
    return;
  }
  const int part = seg / S, s = seg % S;
  index_t t0, t1;
  sequence_range(seq, T, s, t0, t1);
  index_t len = t1 - t0;
  if (part >= first_routed) {
    const index_t base = static_cast<index_t>(part - first_routed) * tokens;
    len = rank[base + t1] - rank[base + t0];
  }
  chunks[seg] = (len + C - 1) / C;
}

static __global__ void chunk_seg_kernel(const index_t* seg_chunk, int* chunk_seg) {
  const int seg = static_cast<int>(blockIdx.x);
  for (index_t c = seg_chunk[seg] + threadIdx.x; c < seg_chunk[seg + 1]; c += blockDim.x) chunk_seg[c] = seg;
}

//! Records of the identity partitions [0, first_routed): every token, in order.
static __global__ void identity_records_kernel(const index_t* seq, index_t T, int S, index_t tokens, int first_routed,
                                        const index_t* seg_chunk, int C, int* rec_tok) {
  const index_t i = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x;  // part·tokens + t
  if (i >= tokens * first_routed) return;
  const int part = static_cast<int>(i / tokens);
  const index_t t = i % tokens;
  const index_t s = sequence_of(seq, T, S, t);
  index_t t0, t1;
  sequence_range(seq, T, s, t0, t1);
  rec_tok[seg_chunk[part * S + s] * C + (t - t0)] = static_cast<int>(t);
}

//! Records of the routed partitions: token t goes to position rank(t) − rank(t0) of its segment.
static __global__ void routed_records_kernel(const index_t* seq, index_t T, int S, index_t tokens, int N, int first_routed,
                                      const int* f_rank, const std::uint32_t* meta, const index_t* seg_chunk, int C,
                                      int* rec_tok) {
  const index_t i = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x;  // n·tokens + t
  if (i >= tokens * N) return;
  const index_t n = i / tokens, t = i % tokens;
  if (!(meta[t * N + n] & (detail::route_write | detail::route_read))) return;
  const index_t s = sequence_of(seq, T, S, t);
  index_t t0, t1;
  sequence_range(seq, T, s, t0, t1);
  const index_t base = n * tokens;
  const int seg = static_cast<int>((first_routed + n) * S + s);
  rec_tok[seg_chunk[seg] * C + (f_rank[base + t] - f_rank[base + t0])] = static_cast<int>(t);
}

//! Scratch bytes and the chunk bound of a record table (host arithmetic only).
struct record_plan {
  int first_routed = 0;    // partitions [0, first_routed) see every token
  index_t max_chunks = 0;  // upper bound of the chunk count (grids are this large)
  std::size_t flag_count = 0;
};

inline record_plan plan_records(const detail::problem& pb, int C) {
  record_plan rp;
  const bool routed = pb.routed;
  rp.first_routed = routed ? (pb.shared ? 1 : 0) : static_cast<int>(pb.P);
  index_t identity_chunks = 0;
  for (std::size_t s = 0; s + 1 < pb.seq.size(); ++s) identity_chunks += (pb.seq[s + 1] - pb.seq[s] + C - 1) / C;
  rp.max_chunks = identity_chunks * rp.first_routed;
  if (routed) {
    // The write and read sets are top-kw and top-kr of one ranking, hence nested: a token touches
    // max(kw, kr) routed partitions at most; each routed segment adds at most one partial chunk.
    const index_t per_token = std::min<index_t>(pb.N, std::max(pb.kw, pb.kr));
    rp.max_chunks += (pb.tokens() * per_token + C - 1) / C + pb.N * pb.S;
    rp.flag_count = static_cast<std::size_t>(pb.tokens() * pb.N + 1);
  }
  return rp;
}

//! Enqueues steps 1–4 above into caller-provided device arrays.
inline void build_records(const detail::problem& pb, const record_plan& rp, int C, const index_t* seq,
                          const std::uint32_t* meta, int* flags, index_t* seg_chunk, int* chunk_seg, int* rec_tok,
                          cudaStream_t stream, cudaMemPool_t pool, const char* api) {
  const index_t tokens = pb.tokens();
  const int S = static_cast<int>(pb.S), P = static_cast<int>(pb.P), N = static_cast<int>(pb.N);
  const auto policy = thrust::cuda::par_nosync(pool_allocator{stream, pool, api}).on(stream);
  constexpr int threads = 256;
  auto blocks = [](index_t n) { return static_cast<unsigned>((n + threads - 1) / threads); };
  if (rp.flag_count) {
    routed_flags_kernel<<<blocks(tokens * N + 1), threads, 0, stream>>>(meta, tokens, N, flags);
    check_launch("routed_flags_kernel", api);
    thrust::exclusive_scan(policy, flags, flags + rp.flag_count, flags);
  }
  segment_chunks_kernel<<<blocks(S * P + 1), threads, 0, stream>>>(seq, pb.T, S, P, rp.first_routed, tokens, flags, C,
                                                                   seg_chunk);
  check_launch("segment_chunks_kernel", api);
  thrust::exclusive_scan(policy, seg_chunk, seg_chunk + S * P + 1, seg_chunk);
  chunk_seg_kernel<<<static_cast<unsigned>(S * P), 128, 0, stream>>>(seg_chunk, chunk_seg);
  check_launch("chunk_seg_kernel", api);
  check(cudaMemsetAsync(rec_tok, 0xff, static_cast<std::size_t>(rp.max_chunks * C) * sizeof(int), stream),
        "cudaMemsetAsync(records)", api);
  if (rp.first_routed > 0 && tokens > 0) {
    identity_records_kernel<<<blocks(tokens * rp.first_routed), threads, 0, stream>>>(seq, pb.T, S, tokens, rp.first_routed,
                                                                                       seg_chunk, C, rec_tok);
    check_launch("identity_records_kernel", api);
  }
  if (rp.flag_count && tokens > 0) {
    routed_records_kernel<<<blocks(tokens * N), threads, 0, stream>>>(seq, pb.T, S, tokens, N, rp.first_routed, flags, meta,
                                                                      seg_chunk, C, rec_tok);
    check_launch("routed_records_kernel", api);
  }
}

}  // namespace linstate::cuda_detail
