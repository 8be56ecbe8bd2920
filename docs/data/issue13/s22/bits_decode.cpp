// Hashes of the recurrent forward's o and final state over shapes and variants (bits before/after).
#include <cstdio>
#include <cstring>
#include <cstdint>
#include <linstate/linstate.hpp>
#include <linstate/testing/inputs.hpp>
using linstate::index_t;
struct gla : linstate::spec<> {};
struct gla_scalar : linstate::spec<> { using decay = linstate::decay::scalar; };
struct gdn : linstate::spec<> { using decay = linstate::decay::gated_delta_rule<false>; };
struct gdn_l2 : linstate::spec<> { using decay = linstate::decay::gated_delta_rule<true>; };
template <class T> std::uint64_t h64(const linstate::tensor<T>& t) {
  std::uint64_t h = 1469598103934665603ull; const unsigned char* p = (const unsigned char*)t.data();
  for (std::size_t i = 0; i < sizeof(T) * t.numel(); ++i) h = (h ^ p[i]) * 1099511628211ull; return h; }
template <class Spec> void run(const char* name) {
  for (index_t V : {128, 64, 256, 48, 40}) for (index_t B : {1, 16, 64}) for (index_t T : {1, 5}) for (int th : {1, 2}) {
    if (B == 64 && T == 5) continue;
    auto data = linstate::testing::random_inputs<Spec>({.B = B, .T = T, .H = 8, .HV = 8, .K = 128, .V = V}, 7);
    auto r = linstate::forward<Spec>(linstate::cpu{.threads = th}, data.view(), linstate::recurrent{});
    std::printf("%s V=%ld B=%ld T=%ld th=%d o=%016llx s=%016llx\n", name, (long)V, (long)B, (long)T, th,
                (unsigned long long)h64(r.o), (unsigned long long)h64(r.final_state));
  }
}
int main() { run<gla>("gla"); run<gla_scalar>("gla_scalar"); run<gdn>("gdn"); run<gdn_l2>("gdn_l2"); }
