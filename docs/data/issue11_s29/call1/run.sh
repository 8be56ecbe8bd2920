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
R=$OUT/r; mkdir -p $R; D=/tmp/s29; B="s28_ring s28_addr s28_bar s29_dA s29_ins s29_norec s29_fwd"; N="s28_addr s28_bar s29_dA s29_ins s29_norec"
for b in $B; do mkdir -p $D/$b; tar xf .dev-lead/$b.txz -C $D/$b; done
export LINSTATE_FIXTURES=$PWD/.fixtures
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }
for b in $B; do
  timeout 90 $D/$b/test_cuda_backward -tc="*inputs on tensor cores*" > $R/tc_$b.txt 2>&1; echo "rc=$?" >> $R/tc_$b.txt; ts tc_$b
done
# s29_fwd changes the forward: its GPU forward tests (test_cuda: the delta rule's cases, the pipelined pieces)
timeout 120 $D/s29_fwd/test_cuda -tc="*delta*" > $R/tcf_s29_fwd.txt 2>&1; echo "rc=$?" >> $R/tcf_s29_fwd.txt; ts tcf
for b in $N; do timeout 150 $D/$b/test_cuda_backward -tce="timing*" > $R/tcb_$b.txt 2>&1; echo "rc=$?" >> $R/tcb_$b.txt; ts tcb_$b; done
P="--suite=prefill,train --tmin=8192 --tmax=65536 --Ns=0 --delta --strategies=varlen --recurrent-tmax=0 --deadline=40"
for i in 1 2 3 4; do
  for b in $B; do timeout 80 $D/$b/bench_cuda $P --out=$R/t_${b}$i.csv > $R/t_${b}$i.txt 2>&1; ts "t_$b$i rc=$?"; done
done
for b in $B; do
  timeout 60 $NCU --clock-control none --metrics gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread -k regex:delta_ -c 16 --csv --page raw $D/$b/bench_cuda --suite=train --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=0 --delta --strategies=varlen --tmin=32768 --tmax=32768 > $R/ncu_$b.csv 2>&1; ts ncu$b
done
cd $R && (for b in $N s29_fwd; do cmp <(grep -h MESSAGE tc_s28_ring.txt | sed "s/.*MESSAGE: //") <(grep -h MESSAGE tc_$b.txt | sed "s/.*MESSAGE: //") >/dev/null && echo "$b ratios: ring's digits" || echo "$b ratios differ from ring's"; done
  tail -n 3 tc_*.txt tcf_*.txt tcb_*.txt; grep -h "^train *gdn\|^train *sse_gdn\|^prefill *gdn" t_*.txt; cat times.txt) > summary.txt 2>&1
tar czf $OUT/logs1.tgz *; cp summary.txt $OUT/; rm -rf $R
