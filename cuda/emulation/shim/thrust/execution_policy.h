// cuda/emulation/shim/thrust/execution_policy.h — the Thrust that records.cuh uses, for the CPU
// emulation (emulation.hpp, force-included before it): thrust::cuda::par_nosync(alloc).on(stream)
// and thrust::exclusive_scan over device pointers, which are host memory there.
#pragma once
#include <type_traits>
namespace thrust {
namespace cuda {
struct emulated_policy {
  template <class S>
  emulated_policy on(S) const { return *this; }
};
struct par_nosync_t {
  template <class A>
  emulated_policy operator()(A&&) const { return {}; }
  template <class S>
  emulated_policy on(S) const { return {}; }
};
inline constexpr par_nosync_t par_nosync{};
}  // namespace cuda
//! (inside a stream capture the scan is recorded for the graph, as the launches around it are)
template <class P, class I, class O>
O exclusive_scan(const P&, I first, I last, O out) {
  const auto scan = [first, last, out] {
    using T = std::remove_cvref_t<decltype(*first)>;
    T acc{};
    O o = out;
    for (I i = first; i != last; ++i, ++o) {
      const T v = *i;
      *o = acc;
      acc = acc + v;
    }
  };
  if (!::linstate_emu::record(scan)) scan();
  return out + (last - first);
}
}  // namespace thrust
