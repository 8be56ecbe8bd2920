// linstate/backend/cpu/backward_driver.hpp — the backward pass on the CPU: (sequence, key head)
// tasks on OpenMP threads, each running every value head of its group and every partition's stream
// backwards, then the router's gradient (SPEC §4.6) from the per-step weight gradients.
#pragma once

#include <algorithm>
#include <type_traits>
#include <vector>

#include "backward_kernels.hpp"
#include "chunked_backward.hpp"
#include "chunked_delta_backward.hpp"
#include "driver.hpp"

namespace linstate::cpu_detail {

//! ∂L/∂logits from ∂L/∂(write weight) and ∂L/∂(read weight) of every (token, partition), summed
//! over heads, through the router policy's own backward (R::weights_backward, per token).
template <class R, class Scalar>
void router_backward(const detail::problem_for<R>& pb, const inputs<Scalar>& in, const detail::routing& rt,
                     const float* dcw, const float* dcr, float* dlogits, std::vector<float>& x, std::vector<float>& work) {
  const index_t N = pb.N;
  x.resize(static_cast<std::size_t>(N)), work.resize(static_cast<std::size_t>(N));
  for (index_t t = 0; t < pb.tokens(); ++t) {
    const std::size_t o = static_cast<std::size_t>(t * N);
    for (index_t n = 0; n < N; ++n) x[static_cast<std::size_t>(n)] = detail::to_float(in.router_logits.data[o + n]);
    R::weights_backward(pb.rcfg(), static_cast<int>(N), x.data(), in.router_params.data, rt.prob.data() + o,
                        rt.flags.data() + o, dcw + o, dcr + o, dlogits + o, work.data());
  }
}

template <class Scalar>
void store(tensor_view<Scalar> dst, index_t offset, const float* src, index_t n) {
  if (dst.empty()) return;
  for (index_t i = 0; i < n; ++i) dst.data[offset + i] = detail::from_float<Scalar>(src[i]);
}

//! The backward driver's call buffers (call_buffers, driver.hpp).
struct backward_buffers {
  detail::routing rt;
  routed_streams rs;
  std::vector<float> dcw_all, dcr_all, dl, x, work;
};

//! One task's gradient rows (a sequence's tokens × K or V), per thread: kept from call to call while
//! they are small (acc_buffer::small floats each), the task's own beyond.
struct backward_task_buffers {
  std::vector<float> dq[2], dk[2], dg[2], dbeta[2], dv, dcw_step, dcr_step;
};

template <class D, class R, class Scalar>
void run_backward(const cpu& be, const detail::problem_for<R>& pb, const inputs<Scalar>& in, const cotangents<Scalar>& dout,
                  const gradients<Scalar>& gr, index_t chunk, bool gather, const saved_states* saved = nullptr) {
  const index_t S = pb.S, H = pb.H, HV = pb.HV, K = pb.K, V = pb.V, P = pb.P, N = pb.N, G = HV / H;
  constexpr bool generic = detail::is_generic<D>;
  const index_t gk = std::max<index_t>(pb.gate_width(), 1);  // gate entries per (token, value head)
  const bool routed = pb.routed;
  call_buffers<backward_buffers> cb;
  backward_buffers& bb = cb.get(R::routes ? HV * pb.tokens() * N : 0);
  detail::routing& rt = bb.rt;
  routed_streams& rs = bb.rs;
  if constexpr (R::routes) {
    detail::compute_routing(pb, in, rt);
    build_routed_streams(pb, rt, gather, rs);
  }
  // per (value head, token, partition) weight gradients, each slot written by one task only
  std::vector<float>&dcw_all = bb.dcw_all, &dcr_all = bb.dcr_all;
  if (routed) {
    dcw_all.assign(static_cast<std::size_t>(HV * pb.tokens() * N), 0.f);
    dcr_all.assign(dcw_all.size(), 0.f);
  }
  const source<Scalar> main_src{in.q.data, in.k.data, in.g.data, in.beta.data, in.v.data};
  const source<Scalar> shared_src{in.shared.q.data, in.shared.k.data, in.shared.g.data, in.shared.beta.data, in.v.data};
  const index_t tasks = S * H;
  const int nthreads = thread_count(be);
  const bool parallel = tasks > 1 && nthreads > 1;
  (void)nthreads, (void)parallel;
  const index_t segment = chunk > 0 ? chunk : 64;
  // The GLA family's chunked backward with one partition that every token reads and writes, fp32
  // gradients and one value head per key head: each gradient row is written once, by the task of its
  // head, straight into the caller's tensors (no per-task fp32 rows to zero, add into and copy out).
  bool direct = false;
  if constexpr (std::is_same_v<Scalar, float> && !generic && !is_delta<D>)
    direct = chunk > 0 && P == 1 && !routed && !pb.shared && G == 1 && !gr.q.empty() && !gr.k.empty() && !gr.v.empty() &&
             (pb.gate_width() == 0 || !gr.g.empty());

#if LINSTATE_HAS_OPENMP
#pragma omp parallel num_threads(nthreads) if (parallel)
#endif
  {
    keep_eigen_on_this_thread();
    // the kernels' scratch (bounded by K, V and the chunk or segment) is kept per thread from call to
    // call, as in the forward driver: a training step whose shapes repeat allocates nothing
    // (the recurrent segment's states, (segment + 1)·K·V floats, are kept only up to 1 Mi floats)
    recurrent_bwd_scratch own_rsc;
    recurrent_bwd_scratch& rsc = (segment + 1) * K * V <= (index_t{1} << 20) ? thread_scratch<recurrent_bwd_scratch>() : own_rsc;
    chunk_bwd_scratch& csc = thread_scratch<chunk_bwd_scratch>();
    delta_bwd_scratch& dsc = thread_scratch<delta_bwd_scratch>();
    generic_scratch& gsc = thread_scratch<generic_scratch>();
    if constexpr (generic) gsc.reserve(K, V, pb.gate_width());
    else if (chunk == 0) rsc.reserve(K, V, segment);
    else if constexpr (is_delta<D>) dsc.reserve(chunk, K, V);
    else {
      csc.reserve(chunk, K, V);
      // the chunk states' recomputation runs the forward's chunk step (chunked_backward.hpp), with the
      // forward driver's choice of products
      csc.fwd.bf16_products = cpu_bf16_dot && be.bf16_products && std::is_same_v<Scalar, Eigen::bfloat16>;
      if (csc.fwd.bf16_products) csc.fwd.reserve_bf16(chunk, K, V);
    }
    backward_task_buffers own;
#if LINSTATE_HAS_OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
    for (index_t task = 0; task < tasks; ++task) {
      const index_t s = task / H, h = task % H;
      const index_t tok0 = pb.seq[static_cast<std::size_t>(s)];
      const index_t len = pb.seq[static_cast<std::size_t>(s + 1)] - tok0;
      if constexpr (std::is_same_v<Scalar, float> && !generic && !is_delta<D>) {
        if (direct) {
          const index_t hv = h, off = (s * HV + hv) * K * V;
          bwd_target<Scalar> tg;
          tg.h = h, tg.hv = hv, tg.tok0 = tok0, tg.dO = dout.o.data;
          tg.h0 = in.initial_state.empty() ? nullptr : in.initial_state.data + off;
          tg.dht = dout.final_state.empty() ? nullptr : dout.final_state.data + off;
          tg.dh0 = gr.initial_state.empty() ? nullptr : gr.initial_state.data + off;
          tg.dq = gr.q.data + (tok0 * H + h) * K, tg.ld_q = H * K;
          tg.dk = gr.k.data + (tok0 * H + h) * K, tg.ld_k = H * K;
          tg.dv = gr.v.data + (tok0 * HV + hv) * V, tg.ld_v = HV * V;
          if (!gr.g.empty()) tg.dg = gr.g.data + (tok0 * HV + hv) * gk, tg.ld_g = HV * gk;
          tg.assign = true;  // dcw, dcr: null (no router)
          if (saved) tg.chunk_states = detail::saved_states_access::data(*saved) + detail::saved_states_access::offset(*saved, s, hv);
          run_chunked_backward<D>(pb, main_src, partition_stream(pb, s, 0, routed, rs), tg, chunk, csc);
          continue;
        }
      }
      const bool small = static_cast<std::size_t>(len * std::max({K, V, gk})) <= acc_buffer::small;
      backward_task_buffers& tb = small ? thread_scratch<backward_task_buffers>() : own;
      auto& dq = tb.dq;
      auto& dk = tb.dk;
      auto& dg = tb.dg;
      auto& dbeta = tb.dbeta;
      auto& dv = tb.dv;
      auto& dcw_step = tb.dcw_step;
      auto& dcr_step = tb.dcr_step;
      // a routed stream holds at most the sequence's tokens: room for that once, so that streams that
      // grow from step to step (the router learns) do not reallocate
      dcw_step.reserve(static_cast<std::size_t>(len)), dcr_step.reserve(static_cast<std::size_t>(len));
      for (int fam = 0; fam < 2; ++fam) {
        dq[fam].assign(static_cast<std::size_t>(len * K), 0.f);
        dk[fam].assign(static_cast<std::size_t>(len * K), 0.f);
      }
      for (index_t hv = h * G; hv < (h + 1) * G; ++hv) {
        dv.assign(static_cast<std::size_t>(len * V), 0.f);
        for (int fam = 0; fam < 2; ++fam) {
          dg[fam].assign(static_cast<std::size_t>(len * gk), 0.f);
          dbeta[fam].assign(static_cast<std::size_t>(len), 0.f);
        }
        for (index_t p = 0; p < P; ++p) {
          const bool is_shared = pb.shared && p == 0;
          const int fam = is_shared ? 1 : 0;
          const index_t n = p - (pb.shared ? 1 : 0);
          const stream st = partition_stream(pb, s, p, routed, rs);
          dcw_step.assign(static_cast<std::size_t>(st.n), 0.f);
          dcr_step.assign(static_cast<std::size_t>(st.n), 0.f);
          const index_t off = ((s * P + p) * HV + hv) * K * V;
          bwd_target<Scalar> tg;
          tg.h = h, tg.hv = hv, tg.tok0 = tok0, tg.dO = dout.o.data;
          tg.h0 = in.initial_state.empty() ? nullptr : in.initial_state.data + off;
          tg.dht = dout.final_state.empty() ? nullptr : dout.final_state.data + off;
          tg.dh0 = gr.initial_state.empty() ? nullptr : gr.initial_state.data + off;
          tg.dq = dq[fam].data(), tg.dk = dk[fam].data(), tg.dv = dv.data();
          tg.dg = dg[fam].data(), tg.dbeta = dbeta[fam].data();
          tg.dcw = dcw_step.data(), tg.dcr = dcr_step.data();
          // the forward kept the chunk states of single-partition calls only (linstate::saved_states)
          if (saved && P == 1 && !routed)
            tg.chunk_states = detail::saved_states_access::data(*saved) + detail::saved_states_access::offset(*saved, s, hv);
          const source<Scalar>& src = is_shared ? shared_src : main_src;
          if constexpr (generic) run_recurrent_generic_backward<D>(pb, src, st, tg, segment, gsc);
          else if (chunk == 0) run_recurrent_backward<D>(pb, src, st, tg, segment, rsc);
          else if constexpr (is_delta<D>) run_chunked_delta_backward<D>(pb, src, st, tg, chunk, dsc);
          else run_chunked_backward<D>(pb, src, st, tg, chunk, csc);
          if (routed && !is_shared)
            for (index_t i = 0; i < st.n; ++i) {
              const std::size_t at = static_cast<std::size_t>((hv * pb.tokens() + st.tok(i)) * N + n);
              dcw_all[at] += dcw_step[static_cast<std::size_t>(i)];
              dcr_all[at] += dcr_step[static_cast<std::size_t>(i)];
            }
        }
        for (index_t t = 0; t < len; ++t) {
          const index_t tt = tok0 + t;
          store(gr.v, (tt * HV + hv) * V, dv.data() + t * V, V);
          store(gr.g, (tt * HV + hv) * gk, dg[0].data() + t * gk, gk);
          store(gr.shared.g, (tt * HV + hv) * gk, dg[1].data() + t * gk, gk);
          store(gr.beta, tt * HV + hv, dbeta[0].data() + t, 1);
          store(gr.shared.beta, tt * HV + hv, dbeta[1].data() + t, 1);
        }
      }
      for (index_t t = 0; t < len; ++t) {
        const index_t tt = tok0 + t;
        store(gr.q, (tt * H + h) * K, dq[0].data() + t * K, K);
        store(gr.k, (tt * H + h) * K, dk[0].data() + t * K, K);
        store(gr.shared.q, (tt * H + h) * K, dq[1].data() + t * K, K);
        store(gr.shared.k, (tt * H + h) * K, dk[1].data() + t * K, K);
      }
    }
  }
  if (routed && !gr.router_logits.empty()) {
    for (index_t hv = 1; hv < HV; ++hv)  // sum over value heads
      for (index_t i = 0; i < pb.tokens() * N; ++i)
        dcw_all[static_cast<std::size_t>(i)] += dcw_all[static_cast<std::size_t>(hv * pb.tokens() * N + i)],
            dcr_all[static_cast<std::size_t>(i)] += dcr_all[static_cast<std::size_t>(hv * pb.tokens() * N + i)];
    std::vector<float>& dl = bb.dl;
    dl.assign(static_cast<std::size_t>(pb.tokens() * N), 0.f);
    if constexpr (R::routes) router_backward(pb, in, rt, dcw_all.data(), dcr_all.data(), dl.data(), bb.x, bb.work);
    store(gr.router_logits, 0, dl.data(), pb.tokens() * N);
  }
}

}  // namespace linstate::cpu_detail
