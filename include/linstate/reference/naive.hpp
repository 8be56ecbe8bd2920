// linstate/reference/naive.hpp — the slow, obviously-correct fp64 reference of every variant.
//
// A per-token loop that transcribes SPEC §2.1 (GLA and the scalar/none decays), §3.1 (gated delta
// rule) and §7 (SSE: shared partition + routed partitions) in double precision, generalised by the
// same policies as the fast paths. Routing decisions (which partitions are written/read) are taken
// from the fp32 router of SPEC §11 C1 — the contract defines them on fp32 probabilities — and the
// gate values are then used in double. Ships with the library so users can test their own code:
// \code
//   auto ref = linstate::reference::forward<sse_n4k1s>(in);          // ref.o, ref.final_state (double)
// \endcode
#pragma once

#include <cmath>
#include <string>
#include <vector>

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

//! The loop itself, for a resolved problem (templated on the element type only, so every variant
//! shares one instantiation).
template <class Scalar>
result forward(const detail::problem& pb, const inputs<Scalar>& in) {
  using detail::decay_kind;
  const index_t H = pb.H, HV = pb.HV, K = pb.K, V = pb.V, N = pb.N, P = pb.P;
  detail::routing rt;
  const bool routed = pb.router == detail::router_kind::top_k;
  if (routed) detail::compute_routing(pb, in.router_logits, rt);

  result r{tensor<double>({pb.B, pb.T, HV, V}), tensor<double>(pb.state_shape())};
  auto at = [](const tensor_view<const Scalar>& t, index_t i) { return static_cast<double>(detail::to_float(t.data[i])); };
  std::vector<double> q(static_cast<std::size_t>(K)), k(static_cast<std::size_t>(K)), hk(static_cast<std::size_t>(V));

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
          if (routed && !is_shared) {
            const std::size_t i = static_cast<std::size_t>(t * N + n);
            w = rt.flags[i] & detail::route_write, rd = rt.flags[i] & detail::route_read;
            cw = rt.cw[i], cr = rt.cr[i];
          }
          for (index_t a = 0; a < K; ++a) q[a] = at(Q, (t * H + h) * K + a), k[a] = at(Kt, (t * H + h) * K + a);
          if (pb.l2norm) {
            double sq = 0, sk = 0;
            for (index_t a = 0; a < K; ++a) sq += q[a] * q[a], sk += k[a] * k[a];
            for (index_t a = 0; a < K; ++a) q[a] /= std::sqrt(sq + 1e-6), k[a] /= std::sqrt(sk + 1e-6);
          }
          if (w) {
            const double* vt = nullptr;
            (void)vt;
            if (pb.decay == decay_kind::delta) {
              // h' = e^g h ; u = β cw (v − h'ᵀk) ; h = h' + k uᵀ      (SPEC §3.1, §11 C9)
              const double e = std::exp(at(G, t * HV + hv)), b = at(Beta, t * HV + hv) * cw;
              for (index_t j = 0; j < V; ++j) hk[j] = 0;
              for (index_t a = 0; a < K; ++a)
                for (index_t j = 0; j < V; ++j) hs[a * V + j] *= e, hk[j] += k[a] * hs[a * V + j];
              for (index_t a = 0; a < K; ++a)
                for (index_t j = 0; j < V; ++j)
                  hs[a * V + j] += k[a] * b * (at(in.v, (t * HV + hv) * V + j) - hk[j]);
            } else {
              // h = diag(e^g) h + cw k vᵀ      (SPEC §2.1, §7)
              for (index_t a = 0; a < K; ++a) {
                double e = 1.0;
                if (pb.decay == decay_kind::diagonal) e = std::exp(at(G, (t * HV + hv) * K + a));
                if (pb.decay == decay_kind::scalar) e = std::exp(at(G, t * HV + hv));
                for (index_t j = 0; j < V; ++j)
                  hs[a * V + j] = e * hs[a * V + j] + cw * k[a] * at(in.v, (t * HV + hv) * V + j);
              }
            }
          }
          if (rd) {
            // o += s cr hᵀ q
            double* o = r.o.data() + (t * HV + hv) * V;
            for (index_t j = 0; j < V; ++j) {
              double acc = 0;
              for (index_t a = 0; a < K; ++a) acc += q[a] * hs[a * V + j];
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
  return naive::forward(detail::make_problem<Spec>("linstate::reference::forward", in, tensor_view<Scalar>{},
                                                   tensor_view<float>{}, "final_state", opt, false),
                        in);
}

}  // namespace linstate::reference
