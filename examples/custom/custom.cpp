// examples/custom/custom.cpp — four policies a user wrote (policies.hpp: a per-value-channel decay,
// Kimi Delta Attention, a fractional delta rule, a sigmoid top-k router with a selection bias), run forward and backward on
// the CPU backend and checked against the fp64 reference and fp64 finite differences
// (check_custom.hpp says what exactly). Prints one line per check and exits 1 on any mismatch, so
// running it is a test (meson test --suite examples). `custom -v` also prints every tensor's errors.
#include <cstdio>
#include <cstring>

#include "check_custom.hpp"

int main(int argc, char** argv) {
  const bool verbose = argc > 1 && std::strcmp(argv[1], "-v") == 0;
  const linstate::testing::cpu_runner cpu{};
  int checks = 0, failures = 0;
  auto report = [&](const custom_check::outcome& o) {
    std::fputs(o.log.c_str(), stdout);
    checks += o.checks, failures += o.failures;
  };
  try {
    report(custom_check::check_per_value_decay(cpu, verbose));
    report(custom_check::check_kda(cpu, verbose));
    report(custom_check::check_fractional_delta(cpu, verbose));
    report(custom_check::check_sigmoid_router(cpu, verbose));
    report(custom_check::check_router_with_kda(cpu, verbose));
  } catch (const std::exception& e) {
    std::printf("FAIL: exception: %s\n", e.what());
    return 1;
  }
  std::printf("%d checks, %d failed (linstate::cpu)\n", checks, failures);
  return failures == 0 ? 0 : 1;
}
