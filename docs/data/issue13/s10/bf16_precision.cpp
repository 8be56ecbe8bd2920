// docs/data/issue13/s10/bf16_precision.cpp — bf16 inputs, GLA / per-head decay / no decay, chunked<64>: fla's ratio
// RMS(x − ref)/RMS(ref) (SPEC §9.2) against the fp64 reference of the same bf16 values, for the default (exact)
// path and linstate::cpu::bf16_products; "differs": max |o_exact − o_bf16_products|.
//   g++ -std=c++20 -O2 -march=native -fopenmp -Iinclude -Itests/support $(pkg-config --cflags eigen3) docs/data/issue13/s10/bf16_precision.cpp
#include <linstate/linstate.hpp>
#include <cstdio>
#include "random_inputs.hpp"
using namespace linstate_test;
using linstate::index_t;
struct gla : linstate::spec<> {};
struct hd : gla { using decay = linstate::decay::scalar; };
struct nd : gla { using decay = linstate::decay::none; };
template <class Spec> void run(index_t T, index_t K, index_t V, float gn, bool h0) {
  config c = config_for<Spec>({.B = 2, .T = T, .H = 2, .HV = 2, .K = K, .V = V});
  c.initial_state = h0; c.gate_normalizer = gn;
  random_inputs d(c, 11);
  d.round_to<Eigen::bfloat16>();
  const cast_inputs<Eigen::bfloat16> low(d);
  const auto ref = linstate::reference::forward<Spec>(low.view());
  auto a = linstate::forward<Spec>(linstate::cpu{.threads = 1}, low.view(), linstate::chunked<64>{});
  auto b = linstate::forward<Spec>(linstate::cpu{.threads = 1, .bf16_products = true}, low.view(), linstate::chunked<64>{});
  std::printf("T=%ld K=%ld V=%ld gn=%g h0=%d  exact: o %.2e st %.2e | bf16: o %.2e st %.2e  differs %.2e\n", (long)T, (long)K, (long)V, gn, h0,
    rms_ratio(a.o, ref.o), rms_ratio(a.final_state, ref.final_state), rms_ratio(b.o, ref.o), rms_ratio(b.final_state, ref.final_state), max_abs_diff(a.o, b.o));
}
int main() {
  std::printf("cpu_bf16_dot=%d\n", (int)linstate::cpu_bf16_dot);
  for (index_t T : {1, 7, 64, 150, 1001}) run<gla>(T, 128, 128, 16.f, true);
  run<gla>(150, 32, 48, 16.f, false); run<gla>(150, 16, 16, 16.f, true); run<gla>(301, 64, 80, 0.1f, true);
  run<gla>(301, 64, 64, 1.f, false);
  run<hd>(301, 64, 64, 1.f, true); run<nd>(301, 64, 64, 1.f, true);
}
