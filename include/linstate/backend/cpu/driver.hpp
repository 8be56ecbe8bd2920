// linstate/backend/cpu/driver.hpp — splits a forward call into (sequence, value head) tasks, builds
// each partition's token stream, and runs them on OpenMP threads.
#pragma once

#include <algorithm>
#include <cstring>
#include <vector>

#include "../../algorithm.hpp"
#include "../../backend/tags.hpp"
#include "../../detail/problem.hpp"
#include "../../detail/saved_states.hpp"
#include "generic.hpp"
#include "kernels.hpp"

namespace linstate::cpu_detail {

//! Token streams of the routed partitions, one per (sequence, partition), built once per call.
struct routed_streams {
  std::vector<index_t> token;
  std::vector<float> cw, cr;
  std::vector<std::uint8_t> flags;
  std::vector<index_t> begin;  // [S*N+1] offsets into the arrays above

  stream get(index_t s, index_t n, index_t N) const {
    const std::size_t i = static_cast<std::size_t>(s * N + n);
    const index_t b = begin[i], e = begin[i + 1];
    return {e - b, token.data() + b, cw.data() + b, cr.data() + b, flags.data() + b};
  }
};

//! mask: every token of the sequence (unselected ones with write = read = 0);
//! varlen: only the tokens that write or read the partition, in time order.
inline void build_routed_streams(const problem& pb, const detail::routing& rt, bool gather, routed_streams& rs) {
  const index_t N = pb.N;
  rs.begin.assign(static_cast<std::size_t>(pb.S * N + 1), 0);
  rs.token.clear(), rs.cw.clear(), rs.cr.clear(), rs.flags.clear();
  // room for the most a call can hold (mask: every token in every partition), so that a reused
  // routed_streams never grows while the shapes repeat, whatever the router chose this time
  const auto most = static_cast<std::size_t>(pb.tokens() * N);
  rs.token.reserve(most), rs.cw.reserve(most), rs.cr.reserve(most), rs.flags.reserve(most);
  for (index_t s = 0; s < pb.S; ++s)
    for (index_t n = 0; n < N; ++n) {
      for (index_t t = pb.seq[static_cast<std::size_t>(s)]; t < pb.seq[static_cast<std::size_t>(s + 1)]; ++t) {
        const std::size_t i = static_cast<std::size_t>(t * N + n);
        if (gather && rt.flags[i] == 0) continue;
        rs.token.push_back(t), rs.cw.push_back(rt.cw[i]), rs.cr.push_back(rt.cr[i]), rs.flags.push_back(rt.flags[i]);
      }
      rs.begin[static_cast<std::size_t>(s * N + n + 1)] = static_cast<index_t>(rs.token.size());
    }
}

template <class Algorithm>
constexpr index_t chunk_size_of() {
  if constexpr (requires { Algorithm::chunk_size; }) return Algorithm::chunk_size;
  else return 0;
}

//! The team size of the drivers' parallel regions: linstate::cpu_threads (backend/tags.hpp).
inline int thread_count(const cpu& be) { return cpu_threads(be); }

//! The forward driver forks a team only above this many state elements touched per call (tokens ×
//! HV·K·V × the states each token touches; 2^19 = 2 MiB of fp32 state): below it a call, a decode step
//! in particular, runs on the calling thread and never waits on a team. On the 2-core Zen 3 VM of
//! issue 13, with the other core busy, a team of two did not pay at 2^19 elements (one GLA decode step
//! at B = 4, H = 8, K = V = 128) and did from 2^20 (B = 8); below, with OpenMP's default or active
//! wait policy, a step in a team cost about 20 ms instead of 0.1 ms (docs/benchmarks.md, "Issue 13,
//! session 8").
inline constexpr double team_threshold = 524288.0;

//! State elements (all of a call's states together) up to which a decode step's states are taken to
//! stay in cache from step to step (2 MiB of fp32: about one core's L2 and its share of the L3 on the
//! Zen 3 VM of issue 13; measured: docs/benchmarks.md, "Issue 13, session 9").
inline constexpr double resident_states = 524288.0;

//! Whether the forward driver runs a call of `tasks` (sequence, value head) tasks and `work` state
//! elements touched on a team of `nthreads`.
constexpr bool forward_team(index_t tasks, int nthreads, double work) {
  return tasks > 1 && nthreads > 1 && work > team_threshold;
}

//! Called first inside the drivers' parallel regions: the kernels' Eigen products must stay on the
//! calling thread. Without it, a team of one (threads = 1, or work below the threshold) is an
//! inactive region and Eigen would fork a nested team for every small product. The setting is local
//! to this thread's task and ends with the region.
inline void keep_eigen_on_this_thread() {
#if LINSTATE_HAS_OPENMP
  omp_set_num_threads(1);
#endif
}

//! The lockstep forms' division of a call: each sequence's value heads cut into `blocks` blocks of
//! consecutive heads (one per thread of the team, at most HV), job = sequence · blocks + block.
//! lockstep_blocks is called inside the parallel region (it reads the team's size).
inline index_t lockstep_blocks(index_t HV) {
#if LINSTATE_HAS_OPENMP
  const index_t team = omp_get_num_threads();
#else
  const index_t team = 1;
#endif
  return std::min<index_t>(HV, team);
}
struct head_block {
  index_t s, hv0, hv1;  // sequence, value heads [hv0, hv1)
  index_t tok0, len;    // the sequence's first token and length
};
inline head_block head_block_of(const problem& pb, index_t job, index_t blocks) {
  const index_t s = job / blocks, b = job % blocks;
  const index_t tok0 = pb.seq[static_cast<std::size_t>(s)];
  return {s, pb.HV * b / blocks, pb.HV * (b + 1) / blocks, tok0, pb.seq[static_cast<std::size_t>(s + 1)] - tok0};
}

//! The lockstep forms' copies of a block's states with padded rows (one thread's; see run's lockstep loops).
struct padded_state_buffer {
  std::vector<float> h;
};

//! A per-thread object of type Scratch, kept from call to call (sized on first use, then reused).
template <class Scratch>
Scratch& thread_scratch() {
  static thread_local Scratch s;
  return s;
}

//! The states of value heads [hv0, hv1) (head hv's [K,V] at st0 + hv·K·V) copied into this thread's
//! padded_state_buffer with rows of ldh floats; returns the copy (head hv's at + (hv − hv0)·K·ldh).
inline float* padded_states_in(const float* st0, index_t hv0, index_t hv1, index_t K, index_t V, index_t ldh) {
  std::vector<float>& hp = thread_scratch<padded_state_buffer>().h;
  hp.resize(static_cast<std::size_t>((hv1 - hv0) * K * ldh));
  for (index_t hv = hv0; hv < hv1; ++hv)
    for (index_t a = 0; a < K; ++a) std::copy_n(st0 + (hv * K + a) * V, V, hp.data() + ((hv - hv0) * K + a) * ldh);
  return hp.data();
}
//! padded_states_in's copy written back.
inline void padded_states_out(const float* hpad, float* st0, index_t hv0, index_t hv1, index_t K, index_t V, index_t ldh) {
  for (index_t hv = hv0; hv < hv1; ++hv)
    for (index_t a = 0; a < K; ++a) std::copy_n(hpad + ((hv - hv0) * K + a) * ldh, V, st0 + (hv * K + a) * V);
}

//! The fp32 output accumulator of one task, n zeros: up to `small` floats a per-thread buffer kept from
//! call to call (so a decode step touches no heap), beyond that a buffer of this call's own (so a long
//! prefill leaves no large buffer behind in every thread).
struct acc_buffer {
  static constexpr std::size_t small = std::size_t{1} << 16;
  struct kept {
    std::vector<float> v;
  };
  std::vector<float> own;
  //! Sizes this thread's kept buffer for n floats now (every thread of a team at the start of the region,
  //! whether or not the schedule gives it a task on this call: else a thread's first task on a later call
  //! would allocate).
  static void reserve(std::size_t n) {
    if (n <= small) thread_scratch<kept>().v.reserve(n);
  }
  float* zeros(std::size_t n) {
    std::vector<float>& b = n <= small ? thread_scratch<kept>().v : own;
    b.assign(n, 0.f);
    return b.data();
  }
};

//! Buffers a call fills once, outside its parallel region, in proportion to its tokens (routing,
//! routed streams, router gradients): up to acc_buffer::small elements the calling thread's own,
//! kept from call to call (a decode or training step then allocates nothing once its shapes
//! repeat), beyond that the call's own (a long prefill leaves nothing large behind). `Buffers` is a
//! struct of the call's vectors, one type per kind of call.
template <class Buffers>
struct call_buffers {
  Buffers own;
  Buffers& get(index_t elements) {
    return static_cast<std::size_t>(elements) <= acc_buffer::small ? thread_scratch<Buffers>() : own;
  }
};

//! The forward driver's call buffers.
struct forward_buffers {
  detail::routing rt;
  routed_streams rs;
};

//! The stream partition p of sequence s sees: every token with weight 1 (shared partition, single
//! partition, dense router), or the routed stream built for (s, n).
inline stream partition_stream(const problem& pb, index_t s, index_t p, bool routed, const routed_streams& rs) {
  const index_t tok0 = pb.seq[static_cast<std::size_t>(s)];
  const index_t len = pb.seq[static_cast<std::size_t>(s + 1)] - tok0;
  if ((pb.shared && p == 0) || !routed) return stream{len, nullptr, nullptr, nullptr, nullptr, tok0};
  return rs.get(s, p - (pb.shared ? 1 : 0), pb.N);
}

//! Runs the forward pass with the state updated in place ([S,P,HV,K,V] fp32) and o written.
//! `chunk` = 0 selects the recurrent kernel. `keep` (may be null): where the chunked diagonal family's
//! single-partition calls copy the state entering every chunk for the backward (linstate::saved_states;
//! `variant`: the variant's tag); other calls leave it empty. The kernel is chosen by the decay policy's family:
//! diagonal and delta have their own recurrent and chunked kernels, recurrent_only runs the generic
//! recurrence from the policy's `step` (chunk is always 0 for it: the API refuses chunked<C>).
template <class D, class R, class Scalar>
void run(const cpu& be, const detail::problem_for<R>& pb, const inputs<Scalar>& in, float* state, Scalar* o,
         index_t chunk, bool gather, saved_states* keep = nullptr, const void* variant = nullptr) {
  constexpr bool generic = detail::is_generic<D>;
  const index_t S = pb.S, HV = pb.HV, K = pb.K, V = pb.V, P = pb.P, H = pb.H, GW = pb.gate_width();
  call_buffers<forward_buffers> cb;
  forward_buffers& fb = cb.get(R::routes ? pb.tokens() * pb.N : 0);
  detail::routing& rt = fb.rt;
  routed_streams& rs = fb.rs;
  const bool routed = pb.routed;
  if constexpr (R::routes) {
    detail::compute_routing(pb, in, rt);
    build_routed_streams(pb, rt, gather, rs);
  }

  const source<Scalar> main_src{in.q.data, in.k.data, in.g.data, in.beta.data, in.v.data};
  const source<Scalar> shared_src{in.shared.q.data, in.shared.k.data, in.shared.g.data, in.shared.beta.data, in.v.data};
  const index_t tasks = S * HV;
  // Threads pay only when there is enough work to amortise the fork and join (team_threshold).
  // `work` counts state elements touched.
  const double states_per_token = routed ? (pb.shared ? 1.0 : 0.0) + std::max(pb.kw, pb.kr) : static_cast<double>(P);
  const double work = static_cast<double>(pb.tokens()) * static_cast<double>(HV * K * V) * states_per_token;
  const int nthreads = thread_count(be);
  const bool parallel = forward_team(tasks, nthreads, work);
  // The recurrent kernel's state stays in the core's caches from step to step when a task runs several
  // tokens of its sequence (its state reused token after token) or when all the call's states are
  // small (a small decode step, whose states the next step finds in cache): then the diagonal family
  // runs the column-blocked step (kernels.hpp zstep::diagonal_step); a decode step that streams
  // larger states from memory keeps the one sequential sweep per state (on AVX-512 builds with V ≤ 128
  // the blocked step is that sweep: one block per row).
  const bool resident = pb.tokens() > S || static_cast<double>(S * P * HV * K * V) <= resident_states;
  (void)nthreads;
  (void)parallel;
  (void)H, (void)GW;  // read by the chunked lockstep loop only
  // One partition that sees every token (GLA, GDN and the other single-state variants), chunked:
  // each thread takes a block of value heads of a sequence and runs them chunk by chunk in lockstep,
  // so a chunk's input rows of neighbouring heads, which share pages (a token's heads are contiguous),
  // are read together instead of one head's rows a page apart over the whole sequence; and each output
  // row, which comes from exactly one chunk, is written straight into `o` (no fp32 accumulator). The
  // same operations on the same values as run_chunked, in another order across heads only.
  const bool lockstep = !generic && chunk > 0 && P == 1 && !routed;
  // Several partitions (SSE: the shared one and the routed ones, whose streams are the same for every
  // head, as the router decides per token), chunked: the same lockstep over a block of value heads,
  // partition after partition; the output rows of the block's heads are summed in one fp32 accumulator
  // [len, heads of the block, V] (a token's rows side by side, as in o), in the same order over the
  // partitions as the task-per-head loop, so the same values.
  const bool lockstep_multi = !generic && chunk > 0 && !lockstep;
  // the states kept for the backward: the state entering chunk n of (sequence s, head hv) is copied,
  // transposed ([V,K], as the backward's products read it), to saved + offset(s, hv) + n·K·V before the
  // chunk runs (the same values the chunk then reads)
  using sa = detail::saved_states_access;
  float* saved = nullptr;
  if (keep) {
    if (lockstep && !is_delta<D>) saved = sa::prepare(*keep, variant, pb, in, chunk);
    else sa::invalidate(*keep);
  }
  index_t longest = 0;  // the longest sequence (the task loop's accumulator holds one)
  for (index_t s = 0; s < S; ++s)
    longest = std::max(longest, pb.seq[static_cast<std::size_t>(s + 1)] - pb.seq[static_cast<std::size_t>(s)]);

#if LINSTATE_HAS_OPENMP
#pragma omp parallel num_threads(nthreads) if (parallel)
#endif
  {
    keep_eigen_on_this_thread();
    // The recurrent kernels' scratch is kept per thread from call to call (a few K- and V-vectors):
    // with the output accumulator's (acc_buffer) and the problem's inline offsets (seq_offsets), a
    // decode step (T = 1, recurrent) allocates nothing on the heap once a thread has run one.
    recurrent_scratch& rsc = thread_scratch<recurrent_scratch>();
    generic_scratch& gsc = thread_scratch<generic_scratch>();
    // the chunked kernels' scratch (a few chunk × K / V matrices) is kept per thread too
    chunk_scratch& csc = thread_scratch<chunk_scratch>();
    delta_scratch& dsc = thread_scratch<delta_scratch>();
    if constexpr (generic) gsc.reserve(K, V, pb.gate_width());
    else if (chunk == 0) rsc.reserve(K, V), rsc.blocked = resident;
    else if constexpr (is_delta<D>) dsc.reserve(chunk, K, V), dsc.next.clear();
    else {
      csc.reserve(chunk, K, V);
      csc.next.clear();  // no prefetch unless the lockstep loop below names the next chunk's rows
      // the bf16-product path (tags.hpp linstate::cpu::bf16_products; kernels.hpp chunk_step)
      csc.bf16_products = cpu_bf16_dot && be.bf16_products && std::is_same_v<Scalar, Eigen::bfloat16>;
      if (csc.bf16_products) csc.reserve_bf16(chunk, K, V);
    }
    // the chunked lockstep loops: names the input rows of the chunk [cn, cn + chunk) of stream st, head hn,
    // for chunk_step to prefetch during its products (none past the stream's end)
    // (and, where the loop over partitions adds to them in place, o's rows: out = o's row of token 0, head hn)
    [[maybe_unused]] auto name_next = [&](const source<Scalar>& src, const stream& st, index_t cn, index_t hn,
                                          const Scalar* out = nullptr) {
      gemm::prefetch_lines& nx = is_delta<D> ? dsc.next : csc.next;
      nx.clear();
      if (cn >= st.n) return;
      const index_t hk = pb.key_head(hn), sz = sizeof(Scalar);
      nx.start(st.token, st.first, cn, std::min(chunk, st.n - cn));
      nx.add(src.q + hk * K, H * K * sz, K * sz);
      nx.add(src.k + hk * K, H * K * sz, K * sz);
      nx.add(src.v + hn * V, HV * V * sz, V * sz);
      if (src.g && GW > 0) nx.add(src.g + hn * GW, HV * GW * sz, GW * sz);
      else if (src.beta) nx.add(src.beta + hn, HV * sz, sz);  // (with g: β's rows share g's lines' pages)
      if (out) nx.add(out, HV * V * sz, V * sz, true);
    };
    acc_buffer o_acc;
    if (!lockstep && !lockstep_multi) acc_buffer::reserve(static_cast<std::size_t>(longest * V));
    if (lockstep_multi) {
      if constexpr (!generic) {
        const index_t blocks = lockstep_blocks(HV);
#if LINSTATE_HAS_OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
        for (index_t job = 0; job < S * blocks; ++job) {
          const head_block hb = head_block_of(pb, job, blocks);
          const index_t s = hb.s, hv0 = hb.hv0, hv1 = hb.hv1, nb = hv1 - hv0, tok0 = hb.tok0, len = hb.len;
          if (len == 0) continue;
          // fp32 outputs with a shared partition (which reads every token): o itself is the accumulator. The
          // shared partition's rows are stored as 0 + O (the accumulator's first sum, -0 made +0), the routed
          // partitions' rows added after them in the same order: the same values as through the fp32
          // accumulator, without zeroing it, reading it back and holding it beside o (docs/benchmarks.md,
          // "Issue 13, session 12").
          constexpr bool fp32_out = std::is_same_v<Scalar, float>;
          const bool direct = fp32_out && pb.shared;
          float* const acc = direct ? nullptr : o_acc.zeros(static_cast<std::size_t>(len * nb * V));
          float* const o32 = reinterpret_cast<float*>(o);  // used only when Scalar is float
          for (index_t p = 0; p < P; ++p) {
            const bool is_shared = pb.shared && p == 0;
            const source<Scalar>& src = is_shared ? shared_src : main_src;
            const stream st = partition_stream(pb, s, p, routed, rs);
            // the partition's states in this thread's copies with padded rows, as in the single-partition
            // loop below (L1 set conflicts of 128-float rows)
            float* const st0 = state + (s * P + p) * HV * K * V;
            const index_t ldh = padded_cols(V);
            const bool padded = ldh != V && st.n > 0;
            float* const hpad = padded ? padded_states_in(st0, hv0, hv1, K, V, ldh) : nullptr;
            for (index_t c0 = 0; c0 < st.n; c0 += chunk)
              for (index_t hv = hv0; hv < hv1; ++hv) {
                float* const rows = direct ? o32 + (tok0 * HV + hv) * V : acc + (hv - hv0) * V;
                const target tg{pb.key_head(hv), hv, padded ? hpad + (hv - hv0) * K * ldh : st0 + hv * K * V, rows, tok0,
                                padded ? ldh : V};
                // the next (chunk, head) of this partition, as the single-partition loop below (none across
                // partitions)
                {
                  const index_t hn = hv + 1 < hv1 ? hv + 1 : hv0;
                  name_next(src, st, hv + 1 < hv1 ? c0 : c0 + chunk, hn, direct ? o + hn * V : nullptr);
                }
                bool any_r;
                if constexpr (is_delta<D>) any_r = chunk_step_delta<D>(pb, src, st, tg, c0, chunk, dsc);
                else any_r = chunk_step<D>(pb, src, st, tg, c0, chunk, csc);
                const index_t m = std::min(chunk, st.n - c0);
                const RowMat& O = is_delta<D> ? dsc.O : csc.O;
                LINSTATE_PHASE_START;
                if (direct && is_shared) {  // every step of the shared stream reads: o's rows = 0 + O
                  for (index_t i = 0; i < m; ++i) {
                    float* __restrict dst = rows + (c0 + i) * HV * V;
                    const float* __restrict a = O.row(i).data();
                    if (any_r)
                      for (index_t j = 0; j < V; ++j) dst[j] = 0.f + a[j];
                    else
                      std::fill(dst, dst + V, 0.f);
                  }
                } else if (any_r) {
                  add_read_rows(st, c0, m, O, tg, V, direct ? HV * V : nb * V);
                }
                LINSTATE_PHASE(store);
              }
            if (padded) padded_states_out(hpad, st0, hv0, hv1, K, V, ldh);
          }
          (is_delta<D> ? dsc.next : csc.next).clear();
          if (!direct)
            for (index_t t = 0; t < len; ++t)
              for (index_t hv = hv0; hv < hv1; ++hv) {
                Scalar* dst = o + ((tok0 + t) * HV + hv) * V;
                const float* a = acc + (t * nb + hv - hv0) * V;
                for (index_t j = 0; j < V; ++j) dst[j] = detail::from_float<Scalar>(a[j]);
              }
        }
      }
    } else if (lockstep) {
      if constexpr (!generic) {
        const index_t blocks = lockstep_blocks(HV);
#if LINSTATE_HAS_OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
        for (index_t job = 0; job < S * blocks; ++job) {
          const head_block hb = head_block_of(pb, job, blocks);
          const index_t s = hb.s, hv0 = hb.hv0, hv1 = hb.hv1, tok0 = hb.tok0, len = hb.len;
          const stream st{len, nullptr, nullptr, nullptr, nullptr, tok0};
          // The states run in this thread's copies with padded rows (kernels.hpp padded_cols: the
          // products' panels of a 128-float-wide state conflict in L1 otherwise), copied in before the
          // sequence's first chunk and back after its last: the same values, elsewhere.
          const index_t ldh = padded_cols(V);
          const bool padded = ldh != V && len > 0;
          float* const hpad = padded ? padded_states_in(state + s * HV * K * V, hv0, hv1, K, V, ldh) : nullptr;
          for (index_t c0 = 0; c0 < len; c0 += chunk)
            for (index_t hv = hv0; hv < hv1; ++hv) {
              const target tg{pb.key_head(hv), hv,
                              padded ? hpad + (hv - hv0) * K * ldh : state + (s * HV + hv) * K * V, nullptr, tok0,
                              padded ? ldh : V};
              if (saved) gemm::transpose(K, V, tg.state, tg.ld, saved + sa::offset(*keep, s, hv) + (c0 / chunk) * K * V, K);
              // the rows of the (chunk, head) this thread runs next, read from memory while this one's products
              // run (gemm::prefetch_lines): the next head of the block, or the block's first head in the next chunk
              // (not o's rows, which this loop only writes: prefetching them for writing measured ×1.02 slower
              // in GLA prefill, docs/benchmarks.md "Issue 13, session 16")
              name_next(main_src, st, hv + 1 < hv1 ? c0 : c0 + chunk, hv + 1 < hv1 ? hv + 1 : hv0);
              bool any_r;
              if constexpr (is_delta<D>) any_r = chunk_step_delta<D>(pb, main_src, st, tg, c0, chunk, dsc);
              else any_r = chunk_step<D>(pb, main_src, st, tg, c0, chunk, csc);
              if (!any_r) continue;
              const RowMat& O = is_delta<D> ? dsc.O : csc.O;
              LINSTATE_PHASE_START;
              const index_t m = std::min(chunk, len - c0);
              for (index_t i = 0; i < m; ++i) {
                Scalar* dst = o + ((tok0 + c0 + i) * HV + hv) * V;
                const float* a = O.row(i).data();
                for (index_t j = 0; j < V; ++j) dst[j] = detail::from_float<Scalar>(a[j] + 0.f);  // + 0: as 0 + O in o_acc
              }
              LINSTATE_PHASE(store);
            }
          if (padded) padded_states_out(hpad, state + s * HV * K * V, hv0, hv1, K, V, ldh);
          (is_delta<D> ? dsc.next : csc.next).clear();
        }
      }
    } else {
#if LINSTATE_HAS_OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
      for (index_t task = 0; task < tasks; ++task) {
        const index_t s = task / HV, hv = task % HV;
        const index_t tok0 = pb.seq[static_cast<std::size_t>(s)];
        const index_t len = pb.seq[static_cast<std::size_t>(s + 1)] - tok0;
        if (len == 0) continue;
        float* const acc = o_acc.zeros(static_cast<std::size_t>(len * V));
        for (index_t p = 0; p < P; ++p) {
          const bool is_shared = pb.shared && p == 0;
          const source<Scalar>& src = is_shared ? shared_src : main_src;
          const stream st = partition_stream(pb, s, p, routed, rs);
          if (st.n == 0) continue;
          const target tg{pb.key_head(hv), hv, state + ((s * P + p) * HV + hv) * K * V, acc, tok0};
          if constexpr (generic) run_recurrent_generic<D>(pb, src, st, tg, gsc);
          else if (chunk == 0) run_recurrent<D>(pb, src, st, tg, rsc);
          else if constexpr (is_delta<D>) run_chunked_delta<D>(pb, src, st, tg, chunk, dsc);
          else run_chunked<D>(pb, src, st, tg, chunk, csc);
        }
        for (index_t t = 0; t < len; ++t) {
          Scalar* dst = o + ((tok0 + t) * HV + hv) * V;
          const float* a = acc + t * V;
          for (index_t j = 0; j < V; ++j) dst[j] = detail::from_float<Scalar>(a[j]);
        }
      }
    }
  }
}

}  // namespace linstate::cpu_detail
