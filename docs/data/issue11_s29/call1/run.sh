#!/bin/bash
# session 29 call 1 (for the next session with a device machine; part 2: run2.sh): session 28's two builds and session 29's
# two, against main. Carry .dev-lead and .fixtures. Builds (meson setup B -Dcuda=enabled -Dmqar=false
# -Dbuildtype=release; ninja cuda/bench_cuda cuda/test_cuda_backward; the two binaries in .dev-lead/NAME.txz):
#   s28_ring = main's CUDA code (06ec3fc, = 472e40b's; before)
#   s28_addr = branch s28-scan-addr: the two scans' rows at the constant pitch of chunk_max_k, the W / k / q / A
#              copies by row_copy (compile-time row steps, immediate shared offsets)
#   s28_bar  = branch s28-rscan-2bar (on addr): both scans at two barriers per chunk instead of three
#   s29_dA   = branch s29-dA-gated (on bar): the gradient kernels' dO role beside the reverse scan, only where
#              the two scans run side by side (GDN at B = 1, H = 8; not SSE-GDN n4k1s)
#   s29_ins  = branch s29-scan-instr (on dA): the scans' per-chunk offsets moved, not formed; two k-steps' B
#              fragments by one ldmatrix; at 8 warps kernels with K = 128 a compile-time constant
#   s29_norec = branch s29-rscan-norec (on ins): the reverse scan reads no record table (the prep writes s_i and
#              the dO rows' tokens)
#   s29_fwd  = branch s29-fwd-state (on main, apart from the stack): the forward's state pass stores through
#              pointers moved a chunk per step
#   s29_li   = s29_norec with -Dcuda_args=-lineinfo (bench_cuda only): source counters of the backward kernels
# Every build must print ring's tensor-core ratios digit for digit (the same products in the same order).
# The rows: prefill (forward) and train (forward + backward) of GDN, SSE-GDN n4k1s and GLA.
# Output: logs1.tgz, summary1.txt (the shared steps: common.sh).
source docs/data/issue11_s29/call1/common.sh
B="s28_ring s28_addr s28_bar s29_dA s29_ins s29_norec s29_fwd"; N="s28_addr s28_bar s29_dA s29_ins s29_norec"
unpack $B
tc $B
# s29_fwd changes the forward: its GPU forward tests (test_cuda: the delta rule's cases, the pipelined pieces)
timeout 120 $D/s29_fwd/test_cuda -tc="*delta*" > $R/tcf_s29_fwd.txt 2>&1; echo "rc=$?" >> $R/tcf_s29_fwd.txt; ts tcf
tcb $N
rows prefill,train $B
durations $B
summary() { same_digits s28_ring $N s29_fwd; cd $R; tail -n 3 tc_*.txt tcf_*.txt tcb_*.txt; grep -h "^train *gdn\|^train *sse_gdn\|^prefill *gdn" t_*.txt; }
pack 1
