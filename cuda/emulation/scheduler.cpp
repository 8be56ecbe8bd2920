// cuda/emulation/scheduler.cpp — the fibers, barriers, warp collectives and graph capture of the CPU
// emulation (emulation.hpp says what is emulated and how).
#include "emulation.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

extern "C" void emu_ctx_switch(void** from_sp, void* to_sp);
extern "C" void fiber_entry();
asm(R"(
.text
.globl emu_ctx_switch
.type emu_ctx_switch,@function
emu_ctx_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
)");

namespace linstate_emu {
fiber* cur = nullptr;
namespace {
constexpr std::size_t stack_bytes = 256 * 1024;
constexpr std::size_t smem_bytes = 256 * 1024;
alignas(1024) unsigned char g_smem[smem_bytes];  // in .bss: below 4 GiB in a non-PIE binary
void* sched_sp = nullptr;
std::vector<fiber> fibers;
const std::function<void()>* body = nullptr;
int live = 0;
unsigned long long progress = 0;  // barrier and warp-collective arrivals, fibers finished
// block barrier
int bar_gen = 0, bar_arrived = 0, bar_acc = 0, bar_op = 0, bar_result = 0;
// named barriers
struct nbar { int gen = 0, arrived = 0; };
nbar named[16];
// warps
struct warp_state {
  int gen = 0, arrived = 0, live = 32;
  wop op = wop::sync;
  wslot slot[32];
};
std::vector<warp_state> warps;
const char* kname = "";

void fiber_main() {
  (*body)();
  cur->done = true;
  --live;
  --warps[cur->warp].live;
  // a barrier whose waiters are all the remaining live fibers is complete
  emu_ctx_switch(&cur->sp, sched_sp);
  fail("finished fiber resumed");
}
}  // namespace

extern "C" void emu_fiber_entry_c() { fiber_main(); }

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "linstate emulation: %s (kernel %s, block %u,%u,%u thread %d)\n", what, kname, blockIdx.x, blockIdx.y,
               blockIdx.z,
               cur ? cur->linear : -1);
  std::abort();
}
[[noreturn]] void unsupported(const char* what) { fail((std::string("unsupported: ") + what).c_str()); }

unsigned char* dyn_smem() { return g_smem; }

void yield() { emu_ctx_switch(&cur->sp, sched_sp); }

int block_sync(int op, int pred) {
  const int gen = bar_gen;
  if (bar_arrived == 0) bar_acc = op == 2 ? 1 : 0, bar_op = op;
  if (op == 1) bar_acc |= (pred != 0);
  else if (op == 2) bar_acc &= (pred != 0);
  else if (op == 3) bar_acc += (pred != 0);
  ++bar_arrived, ++progress;
  if (bar_arrived == live) {
    bar_result = bar_acc, bar_arrived = 0, ++bar_gen;
    return bar_result;
  }
  while (bar_gen == gen) yield();
  return bar_result;
}

void named_barrier(int id, int count) {
  if (id == 0) {
    block_sync(0, 0);
    return;
  }
  nbar& b = named[id];
  const int gen = b.gen;
  ++progress;
  if (++b.arrived == count) {
    b.arrived = 0, ++b.gen;
    return;
  }
  while (b.gen == gen) yield();
}

wslot& warp_begin() { return warps[cur->warp].slot[cur->lane]; }

static float bf(unsigned short h) { return __uint_as_float(static_cast<unsigned>(h) << 16); }
static float hf(unsigned short h) {
  __half x;
  std::memcpy(&x, &h, 2);
  return __half2float(x);
}

static void warp_compute(warp_state& w, int base_lanes) {
  wslot* s = w.slot;
  switch (w.op) {
    case wop::sync:
      break;
    case wop::once: {
      void* args[32];
      for (int l = 0; l < 32; ++l) args[l] = s[l].ptr;
      s[0].fn(args);
      break;
    }
    case wop::ballot: {
      unsigned m = 0;
      for (int l = 0; l < base_lanes; ++l) m |= (s[l].v ? 1u : 0u) << l;
      for (int l = 0; l < 32; ++l) s[l].r = m;
      break;
    }
    case wop::shfl_idx:
    case wop::shfl_xor:
    case wop::shfl_down:
    case wop::shfl_up: {
      std::uint64_t v[32];
      for (int l = 0; l < 32; ++l) v[l] = s[l].v;
      for (int l = 0; l < 32; ++l) {
        const int wdt = s[l].width, seg = l / wdt * wdt, p = s[l].param;
        int src = l;
        if (w.op == wop::shfl_idx) src = seg + (p % wdt);
        else if (w.op == wop::shfl_xor) src = l ^ p, src = (src / wdt * wdt == seg) ? src : l;
        else if (w.op == wop::shfl_down) src = (l + p < seg + wdt) ? l + p : l;
        else src = (l - p >= seg) ? l - p : l;
        s[l].r = v[src];
      }
      break;
    }
    case wop::mma_bf16:
    case wop::mma_f16: {
      float A[16][16], B[16][8];
      auto lo = [](unsigned u) { return static_cast<unsigned short>(u & 0xffffu); };
      auto hi = [](unsigned u) { return static_cast<unsigned short>(u >> 16); };
      const bool f16 = w.op == wop::mma_f16;
      auto cv = [&](unsigned short h) { return f16 ? hf(h) : bf(h); };
      for (int l = 0; l < 32; ++l) {
        const int g = l >> 2, t2 = (l & 3) * 2;
        const unsigned* a = s[l].a;
        A[g][t2] = cv(lo(a[0])), A[g][t2 + 1] = cv(hi(a[0]));
        A[g + 8][t2] = cv(lo(a[1])), A[g + 8][t2 + 1] = cv(hi(a[1]));
        A[g][t2 + 8] = cv(lo(a[2])), A[g][t2 + 9] = cv(hi(a[2]));
        A[g + 8][t2 + 8] = cv(lo(a[3])), A[g + 8][t2 + 9] = cv(hi(a[3]));
        const unsigned* b = s[l].b;
        B[t2][g] = cv(lo(b[0])), B[t2 + 1][g] = cv(hi(b[0]));
        B[t2 + 8][g] = cv(lo(b[1])), B[t2 + 9][g] = cv(hi(b[1]));
      }
      for (int l = 0; l < 32; ++l) {
        const int g = l >> 2, t2 = (l & 3) * 2;
        const int rr[4] = {g, g, g + 8, g + 8}, cc[4] = {t2, t2 + 1, t2, t2 + 1};
        for (int e = 0; e < 4; ++e) {
          double acc = 0;
          for (int k = 0; k < 16; ++k) acc += static_cast<double>(A[rr[e]][k]) * B[k][cc[e]];
          s[l].d[e] = static_cast<float>(acc + s[l].c[e]);
        }
      }
      break;
    }
    case wop::ldsm4:
    case wop::ldsm4t: {
      const bool tr = w.op == wop::ldsm4t;
      for (int l = 0; l < 32; ++l) {
        const int g = l >> 2, t = l & 3;
        for (int m = 0; m < 4; ++m) {
          unsigned short e0, e1;
          if (!tr) {  // row g of matrix m, elements 2t, 2t + 1
            const auto* row = reinterpret_cast<const unsigned short*>(static_cast<std::uintptr_t>(s[8 * m + g].addr));
            e0 = row[2 * t], e1 = row[2 * t + 1];
          } else {  // rows 2t, 2t + 1 of matrix m, element g
            const auto* r0 = reinterpret_cast<const unsigned short*>(static_cast<std::uintptr_t>(s[8 * m + 2 * t].addr));
            const auto* r1 = reinterpret_cast<const unsigned short*>(static_cast<std::uintptr_t>(s[8 * m + 2 * t + 1].addr));
            e0 = r0[g], e1 = r1[g];
          }
          s[l].m[m] = static_cast<unsigned>(e0) | (static_cast<unsigned>(e1) << 16);
        }
      }
      break;
    }
  }
}

void warp_finish(wop op) {
  warp_state& w = warps[cur->warp];
  if (w.arrived == 0) w.op = op;
  else if (w.op != op) fail("warp lanes at different collectives (divergence)");
  const int gen = w.gen;
  ++progress;
  if (++w.arrived == w.live) {
    if (w.live != 32 && op != wop::sync && op != wop::ballot) fail("warp collective with exited lanes");
    warp_compute(w, 32);
    w.arrived = 0, ++w.gen;
    return;
  }
  while (w.gen == gen) yield();
}

struct graph_t {
  std::vector<std::function<void()>> ops;
};
static graph_t* capturing = nullptr;
bool record(const std::function<void()>& op) {
  if (!capturing) return false;
  capturing->ops.push_back(op);
  return true;
}

void run_grid(const cfg_t& c, const char* name, const std::function<void()>& b) {
  if (capturing) {
    const cfg_t cc = c;
    const std::function<void()> bb = b;
    capturing->ops.push_back([cc, name, bb] { run_grid(cc, name, bb); });
    return;
  }
  kname = name;
  const unsigned nt = c.block.x * c.block.y * c.block.z;
  if (nt == 0 || nt > 1024) fail("bad block size");
  if (c.smem > smem_bytes) fail("dynamic shared memory above 256 KiB");
  if (c.grid.x == 0 || c.grid.y == 0 || c.grid.z == 0) return;
  static std::vector<unsigned char*> stacks;
  while (stacks.size() < nt) {
    void* p = mmap(nullptr, stack_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) fail("mmap stack");
    stacks.push_back(static_cast<unsigned char*>(p));
  }
  fibers.assign(nt, fiber{});
  warps.assign((nt + 31) / 32, warp_state{});
  body = &b;
  for (unsigned z = 0; z < c.grid.z; ++z)
    for (unsigned y = 0; y < c.grid.y; ++y)
      for (unsigned x = 0; x < c.grid.x; ++x) {
        blockIdx = make_uint3(x, y, z), blockDim = c.block, gridDim = c.grid;
        // each block's dynamic shared memory starts as 0xff bytes (NaN as floats): a read before any
        // write shows in the results instead of reading the previous block's values
        std::memset(g_smem, 0xff, c.smem);
        live = static_cast<int>(nt);
        bar_gen = bar_arrived = 0;
        for (auto& n : named) n = nbar{};
        for (std::size_t w = 0; w < warps.size(); ++w) {
          warps[w] = warp_state{};
          warps[w].live = static_cast<int>(std::min<unsigned>(32, nt - 32 * w));
        }
        for (unsigned i = 0; i < nt; ++i) {
          fiber& f = fibers[i];
          f = fiber{};
          f.linear = static_cast<int>(i), f.lane = static_cast<int>(i % 32), f.warp = static_cast<int>(i / 32);
          f.tid = make_uint3(i % c.block.x, (i / c.block.x) % c.block.y, i / (c.block.x * c.block.y));
          f.stack = stacks[i];
          auto* top = reinterpret_cast<std::uint64_t*>(f.stack + stack_bytes);  // 16-aligned
          top[-2] = reinterpret_cast<std::uint64_t>(&fiber_entry);               // return address
          for (int r = 3; r <= 8; ++r) top[-r] = 0;                               // rbp … r15
          std::uint32_t ctl[2] = {0x1f80u, 0x037fu};
          std::memcpy(&top[-9], ctl, 8);
          f.sp = &top[-9];
        }
        int remaining = static_cast<int>(nt), idle = 0;
        while (remaining > 0) {
          const unsigned long long before = progress + static_cast<unsigned long long>(remaining);
          bool any = false;
          for (unsigned i = 0; i < nt; ++i) {
            fiber& f = fibers[i];
            if (f.done) continue;
            cur = &f;
            threadIdx = f.tid;
            emu_ctx_switch(&sched_sp, f.sp);
            any = true;
            if (f.done) --remaining;
          }
          // a barrier all live fibers wait on completes when the last arrives; one that lost fibers to
          // exits completes here
          if (remaining > 0 && bar_arrived > 0 && bar_arrived == live) bar_result = bar_acc, bar_arrived = 0, ++bar_gen;
          for (auto& w : warps)
            if (w.arrived > 0 && w.arrived == w.live) {
              if (w.op != wop::sync && w.op != wop::ballot) fail("warp collective with exited lanes");
              warp_compute(w, 32), w.arrived = 0, ++w.gen;
            }
          if (!any) break;
          if (progress + static_cast<unsigned long long>(remaining) == before) {
            if (++idle > 100000) {
              std::fprintf(stderr, "linstate emulation: no progress (deadlock or a wait on another block): block barrier %d/%d arrived\n", bar_arrived, live);
              fail("deadlock");
            }
          } else {
            idle = 0;
          }
        }
        cur = nullptr;
      }
}
}  // namespace linstate_emu

asm(R"(
.text
.globl fiber_entry
.type fiber_entry,@function
fiber_entry:
  subq $8, %rsp
  call emu_fiber_entry_c
  ud2
)");

extern "C" {
cudaError_t cudaStreamBeginCapture(cudaStream_t, cudaStreamCaptureMode) {
  if (linstate_emu::capturing) linstate_emu::fail("nested stream capture");
  linstate_emu::capturing = new linstate_emu::graph_t;
  return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t, cudaGraph_t* g) {
  *g = reinterpret_cast<cudaGraph_t>(linstate_emu::capturing);
  linstate_emu::capturing = nullptr;
  return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* e, cudaGraph_t g, unsigned long long) {
  *e = reinterpret_cast<cudaGraphExec_t>(new linstate_emu::graph_t(*reinterpret_cast<linstate_emu::graph_t*>(g)));
  return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t) {
  for (auto& op : reinterpret_cast<linstate_emu::graph_t*>(e)->ops) op();
  return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t g) { delete reinterpret_cast<linstate_emu::graph_t*>(g); return cudaSuccess; }
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e) { delete reinterpret_cast<linstate_emu::graph_t*>(e); return cudaSuccess; }
}
