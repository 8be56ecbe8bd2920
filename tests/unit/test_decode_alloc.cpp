// SPDX-License-Identifier: Apache-2.0
// A CPU decode step allocates nothing on the heap (issue 13, item 2): linstate::forward_in_place with
// T = 1 and linstate::recurrent{}, once its threads have run one step. Its own program, because it
// replaces the global operator new (and, with glibc and no sanitizer, malloc) with counting versions.
// The step's result is checked too (against linstate::forward on the same inputs), so that a step
// that skipped its work could not pass.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include <linstate/linstate.hpp>
#include <linstate/testing/inputs.hpp>

namespace {
std::atomic<long> g_allocs{0};
std::atomic<bool> g_counting{false};
inline void note() {
  if (g_counting.load(std::memory_order_relaxed)) g_allocs.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

// operator new, all the forms the library can reach (the aligned ones: Eigen's fixed-size members)
void* operator new(std::size_t n) {
  note();
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return ::operator new(n); }
void* operator new(std::size_t n, std::align_val_t a) {
  note();
  const std::size_t al = static_cast<std::size_t>(a);
  if (void* p = std::aligned_alloc(al, (std::max<std::size_t>(n, 1) + al - 1) / al * al)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n, std::align_val_t a) { return ::operator new(n, a); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

// malloc itself (Eigen's dynamic matrices, the OpenMP runtime): glibc's own entry point behind a
// counter. Not under the sanitizers, which replace malloc themselves.
#if defined(__GLIBC__) && !defined(LINSTATE_TEST_SANITIZED) && !defined(__SANITIZE_ADDRESS__)
#define LINSTATE_COUNT_MALLOC 1
extern "C" void* __libc_malloc(std::size_t);
extern "C" void* malloc(std::size_t n) noexcept {
  note();
  return __libc_malloc(n);
}
#else
#define LINSTATE_COUNT_MALLOC 0
#endif

namespace {

using linstate::index_t;

struct gla : linstate::spec<> {};
struct gdn : linstate::spec<> {
  using decay = linstate::decay::gated_delta_rule<false>;
};
struct gdn_l2 : linstate::spec<> {
  using decay = linstate::decay::gated_delta_rule<true>;
};

constexpr index_t H = 4, K = 64, V = 64;

//! Whether a decode step of B sequences runs on a team of `threads` (driver.hpp's work threshold).
bool on_team(index_t B, int threads) {
  return linstate::cpu_detail::forward_team(B * H, threads, static_cast<double>(B * H * K * V));
}

struct step_result {
  linstate::tensor<float> o, state;
};

//! Heap allocations of `steps` decode steps after one warm-up step, and the largest difference of
//! the last step's o and state from linstate::forward (recurrent) over the same token and state.
//! Returns the last step's o and state.
template <class Spec>
step_result check_decode(index_t B, int threads) {
  CAPTURE(B);
  CAPTURE(threads);
  auto data = linstate::testing::random_inputs<Spec>({.B = B, .T = 1, .H = H, .HV = H, .K = K, .V = V}, 7);
  linstate::inputs<float> in = data.view();
  const linstate::tensor<float> h0 = data.initial_state;  // the state before every step
  in.initial_state = {};
  linstate::tensor<float> state = h0;
  linstate::tensor<float> o({B, 1, H, V});
  const linstate::cpu be{.threads = threads};

  linstate::forward_in_place<Spec>(be, in, state.view(), o.view(), linstate::recurrent{});  // warm-up
  const int steps = 20;
  g_allocs = 0;
  g_counting = true;
  for (int i = 0; i < steps; ++i) {
    std::copy(h0.values().begin(), h0.values().end(), state.values().begin());
    linstate::forward_in_place<Spec>(be, in, state.view(), o.view(), linstate::recurrent{});
  }
  g_counting = false;
  CHECK(g_allocs.load() == 0);

  // the step did its work: the same as forward from h0
  linstate::inputs<float> in0 = data.view();
  const auto want = linstate::forward<Spec>(be, in0, linstate::recurrent{});
  float d_o = 0.f, d_s = 0.f, m_o = 0.f;
  for (index_t i = 0; i < o.numel(); ++i)
    d_o = std::max(d_o, std::abs(o.data()[i] - want.o.data()[i])), m_o = std::max(m_o, std::abs(want.o.data()[i]));
  for (index_t i = 0; i < state.numel(); ++i) d_s = std::max(d_s, std::abs(state.data()[i] - want.final_state.data()[i]));
  CHECK(m_o > 0.f);
  CHECK(d_o == 0.f);
  CHECK(d_s == 0.f);
  return {std::move(o), std::move(state)};
}

bool bit_equal(const linstate::tensor<float>& a, const linstate::tensor<float>& b) {
  return a.numel() == b.numel() && std::memcmp(a.data(), b.data(), static_cast<std::size_t>(a.numel()) * sizeof(float)) == 0;
}

//! Every decode check of one variant at B, with 1 and 2 threads; the two give the same bits.
template <class Spec>
void check_threads(index_t B) {
  CAPTURE(B);
  const step_result one = check_decode<Spec>(B, 1);
  const step_result two = check_decode<Spec>(B, 2);
  CHECK(bit_equal(one.o, two.o));
  CHECK(bit_equal(one.state, two.state));
}

}  // namespace

TEST_CASE("decode steps allocate nothing on the heap (operator new" "/malloc counted)") {
  const std::string counted = LINSTATE_COUNT_MALLOC ? "yes" : "no (operator new only)";
  MESSAGE("malloc counted too: " << counted);
  // B = 1 and 16 run on the calling thread whatever the thread count (below the threshold: a step
  // never waits on a team); B = 64 (2^20 state elements) on a team of two when two threads are given
  CHECK(!on_team(1, 2));
  CHECK(!on_team(16, 2));
  CHECK(on_team(64, 2));
  CHECK(!on_team(64, 1));
  for (index_t B : {1, 16, 64}) {
    check_threads<gla>(B);
    check_threads<gdn>(B);
    check_threads<gdn_l2>(B);
  }
}

TEST_CASE("the allocation counter counts") {
  g_allocs = 0;
  g_counting = true;
  auto* v = new std::vector<float>(1000);
  g_counting = false;
  CHECK(g_allocs.load() >= 2);
  delete v;
}

namespace {
struct gla_scalar : linstate::spec<> {
  using decay = linstate::decay::scalar;
};

//! max |a − b| / max |b| of a linstate tensor against the fp64 reference's.
double rel_err(const linstate::tensor<float>& a, const linstate::tensor<double>& b) {
  double d = 0, m = 0;
  for (index_t i = 0; i < a.numel(); ++i)
    d = std::max(d, std::abs(double(a.data()[i]) - b.data()[i])), m = std::max(m, std::abs(b.data()[i]));
  return m > 0 ? d / m : d;
}

//! The recurrent kernel's paths, each against the fp64 reference. The diagonal family on states that
//! stay in cache (a small decode call; a prefill of several tokens per sequence) runs its written and
//! read steps by column blocks (kernels.hpp zstep::diagonal_step, V a multiple of the vector's 8 or 16
//! floats: blocks of up to 64 columns on AVX2 builds, 128 on AVX-512 ones, which take it for streamed
//! states too when V ≤ 128); a decode call whose states exceed driver.hpp's resident_states keeps the
//! row sweep (AVX2; AVX-512 with V > 128). The delta rule runs zstep::delta_step (blocks of up to 32
//! columns on AVX2, 128 on AVX-512: one block, several, a remainder block) where V is a multiple of
//! the vector, the row loops elsewhere (V = 36; V = 40 on AVX-512 builds; builds without the kernels).
template <class Spec>
void check_recurrent_paths(index_t B, index_t T, index_t Hh, index_t KK, index_t VV) {
  CAPTURE(B);
  CAPTURE(T);
  CAPTURE(Hh);
  CAPTURE(KK);
  CAPTURE(VV);
  const bool resident = T > 1 || static_cast<double>(B * Hh * KK * VV) <= linstate::cpu_detail::resident_states;
  CAPTURE(resident);
  auto data = linstate::testing::random_inputs<Spec>({.B = B, .T = T, .H = Hh, .HV = Hh, .K = KK, .V = VV}, 9);
  const auto ref = linstate::reference::forward<Spec>(data.view());
  for (int threads : {1, 2}) {
    CAPTURE(threads);
    const auto r = linstate::forward<Spec>(linstate::cpu{.threads = threads}, data.view(), linstate::recurrent{});
    CHECK(rel_err(r.o, ref.o) <= 1e-5);  // SPEC §9.3
    CHECK(rel_err(r.final_state, ref.final_state) <= 1e-5);
  }
}
}  // namespace

TEST_CASE("recurrent kernel: column-blocked steps (states in cache) and the row sweep against the fp64 reference") {
  CHECK(static_cast<double>(1 * 8 * 128 * 128) <= linstate::cpu_detail::resident_states);
  CHECK(static_cast<double>(64 * 8 * 128 * 128) > linstate::cpu_detail::resident_states);
  for (index_t VV : {64, 128, 40, 36}) {  // 40: blocks of 8 on AVX2, the row sweep on AVX-512; 36: the row sweep
    check_recurrent_paths<gla>(1, 1, 8, 128, VV);         // a small decode step: blocked
    check_recurrent_paths<gla>(3, 17, 2, 64, VV);         // prefill, several tokens per sequence: blocked
    check_recurrent_paths<gla>(64, 1, 8, 128, VV);        // 2^23 state elements: the row sweep
    check_recurrent_paths<gla_scalar>(1, 1, 4, 32, VV);   // per-head decay
    check_recurrent_paths<gla_scalar>(2, 9, 2, 128, VV);
  }
  for (index_t VV : {128, 64, 256, 48, 40, 36}) {  // the delta rule: one block, several, a remainder block, none
    check_recurrent_paths<gdn>(1, 1, 8, 128, VV);    // a small decode step
    check_recurrent_paths<gdn_l2>(3, 5, 2, 64, VV);  // several tokens per sequence, l2-normalised q and k
    check_recurrent_paths<gdn>(64, 1, 8, 128, VV);   // 2^23 state elements, streamed
  }
  check_recurrent_paths<gla>(16, 1, 8, 128, 256);  // streamed, V > 128: the row sweep on AVX-512 builds too
}
