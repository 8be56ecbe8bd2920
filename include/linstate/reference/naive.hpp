// linstate/reference/naive.hpp — the slow, obviously-correct fp64 reference of every variant.
//
// A per-token loop over every (sequence, value head, partition) stream in double precision that
// evaluates the decay policy's own `step` (linstate/transition.hpp: SPEC §2.1 for the diagonal family,
// §3.1 for the delta rule, the user's math for any other) column by column, and SSE's structure (§7:
// shared partition + routed partitions) from the partition and router policies. Routing decisions (which partitions are written/read) are taken
// from the fp32 router of SPEC §11 C1 — the contract defines them on fp32 probabilities — and the
// gate values are then used in double. Ships with the library so users can test their own code:
// \code
//   auto ref = linstate::reference::forward<sse_n4k1s>(in);          // ref.o, ref.final_state (double)
// \endcode
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include <algorithm>

#include "../concepts.hpp"
#include "../detail/numeric.hpp"
#include "../detail/problem.hpp"
#include "../io_types.hpp"

namespace linstate::reference {

struct result {
  tensor<double> o;            //!< [B,T,HV,V]
  tensor<double> final_state;  //!< [S,P,HV,K,V]
};

namespace naive {

//! The rows token t gives the transition, in double: k̂ (or k), the gate row, β, the write weight.
template <class D, class Scalar>
struct token64 {
  std::vector<double> k, g;
  token<double> x;
  token64(index_t K, index_t GW) : k(static_cast<std::size_t>(K)), g(static_cast<std::size_t>(std::max<index_t>(GW, 1))) {}
};

inline double at64(const auto& t, index_t i) { return static_cast<double>(detail::to_float(t.data[i])); }

//! x̂ = x / sqrt(Σx² + 1e-6) in double when the policy declares l2norm_qk (a copy otherwise).
template <class D>
void normalize64(std::vector<double>& x) {
  if constexpr (D::l2norm_qk) {
    double ss = 0;
    for (double e : x) ss += e * e;
    const double r = math::l2_inverse_norm(ss);
    for (double& e : x) e *= r;
  }
}

//! The loop itself, for a resolved problem: the policy's own `step` in double (templated on the decay
//! policy and the element type only, so every variant over the same transition shares it).
template <class D, class R, class Scalar>
result forward(const detail::problem_for<R>& pb, const inputs<Scalar>& in) {
  const index_t H = pb.H, HV = pb.HV, K = pb.K, V = pb.V, N = pb.N, P = pb.P, GW = pb.gate_width();
  detail::routing rt;
  if constexpr (R::routes) detail::compute_routing(pb, in, rt);

  result r{tensor<double>({pb.B, pb.T, HV, V}), tensor<double>(pb.state_shape())};
  std::vector<double> q(static_cast<std::size_t>(K));
  token64<D, Scalar> tk(K, GW);

  for (index_t s = 0; s < pb.S; ++s)
    for (index_t hv = 0; hv < HV; ++hv) {
      const index_t h = pb.key_head(hv);
      for (index_t p = 0; p < P; ++p) {
        const bool is_shared = pb.shared && p == 0;
        const index_t n = p - (pb.shared ? 1 : 0);  // routed index
        const auto& Q = is_shared ? in.shared.q : in.q;
        const auto& Kt = is_shared ? in.shared.k : in.k;
        const auto& G = is_shared ? in.shared.g : in.g;
        const auto& Beta = is_shared ? in.shared.beta : in.beta;
        double* hs = r.final_state.data() + ((s * P + p) * HV + hv) * K * V;
        for (index_t i = 0; i < K * V; ++i)
          hs[i] = in.initial_state.empty() ? 0.0 : static_cast<double>(in.initial_state.data[((s * P + p) * HV + hv) * K * V + i]);
        for (index_t t = pb.seq[static_cast<std::size_t>(s)]; t < pb.seq[static_cast<std::size_t>(s + 1)]; ++t) {
          bool w = true, rd = true;
          double cw = 1.0, cr = 1.0;
          if (pb.routed && !is_shared) {
            const std::size_t i = static_cast<std::size_t>(t * N + n);
            w = rt.flags[i] & detail::route_write, rd = rt.flags[i] & detail::route_read;
            cw = rt.cw[i], cr = rt.cr[i];
          }
          if (w) {  // every column j: s_j ← T_t(s_j) + k_t w_{t,j}, the policy's step in double
            for (index_t a = 0; a < K; ++a) tk.k[static_cast<std::size_t>(a)] = at64(Kt, (t * H + h) * K + a);
            normalize64<D>(tk.k);
            for (index_t a = 0; a < GW; ++a) tk.g[static_cast<std::size_t>(a)] = at64(G, (t * HV + hv) * GW + a);
            token<double> x;
            x.K = K, x.k = tk.k.data(), x.g = GW ? tk.g.data() : nullptr, x.w = cw;
            if constexpr (D::uses_beta) x.beta = at64(Beta, t * HV + hv);
            for (index_t j = 0; j < V; ++j) D::step(x, j, at64(in.v, (t * HV + hv) * V + j), column<double>{hs + j, V});
          }
          if (rd) {  // o += s cr hᵀ q̂
            for (index_t a = 0; a < K; ++a) q[static_cast<std::size_t>(a)] = at64(Q, (t * H + h) * K + a);
            normalize64<D>(q);
            double* o = r.o.data() + (t * HV + hv) * V;
            for (index_t j = 0; j < V; ++j) {
              double acc = 0;
              for (index_t a = 0; a < K; ++a) acc += q[static_cast<std::size_t>(a)] * hs[a * V + j];
              o[j] += static_cast<double>(pb.scale) * cr * acc;
            }
          }
        }
      }
    }
  return r;
}

}  // namespace naive

template <class Spec, InputScalar Scalar>
result forward(const inputs<Scalar>& in, const options& opt = {}) {
  static_assert(detail::validate<Spec>());
  return naive::forward<typename Spec::decay>(
      detail::make_problem<Spec>("linstate::reference::forward", in, tensor_view<Scalar>{}, tensor_view<float>{},
                                 "final_state", opt, false),
      in);
}

}  // namespace linstate::reference
