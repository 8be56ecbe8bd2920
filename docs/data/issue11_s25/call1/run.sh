#!/bin/bash
# session 25 call 1 (not run in session 25: no device machine was lent; for the next session). It takes in
# session 24's call 4 (builds 0, 4, 5, 6, 7) and adds session 25's builds 8, 9, 10:
#   bP  = 15089bd (session 23 before its review mend 746d468, which sized and bound the backward's bf16
#         copies by one trait: host code only, the same buffers) — the "before" of that commit's figures
#   b0  = 4c70547 (= main's CUDA code since session 23, 746d468 included)
#   b4  = 0 + issue11_s24/call4/b4_grad_1024_threads.diff (the gradient kernel at 1024 threads)
#   b5  = 0 + issue11_s24/call4/b5_prep_pitch.diff (the backward prep's K̂, Q rows at pitch K + 4)
#   b6  = branch s24-prep-split at 55fc19e (the prep's operands split once in place, split_mma)
#   b7  = s24-prep-split's tip 7527d66 (b6 with the prep at __launch_bounds__(256, 2))
#   b8  = branch s25-grad-split (e747ad8): the V-long products in delta_grad_products_kernel (3 roles per
#         chunk, 8 warps, two blocks per SM), the rest in delta_grad_kernel; its test_cuda_backward has a
#         new case (a routed partition written by every token and read by none)
#   b9  = branch s25-prep-plain: b8 with the WY prep's four products on plain bf16 operands (a probe:
#         speed and the ratios it gives; not the same bits)
#   b10 = branch s25-split-prepsplit: b8 merged with s24-prep-split's tip (b7 + b8)
#   b11 = branch s25-dA-beside (3943fee): b8 with 5a's dO role (dA, dQg; gathering dO itself) after the
#         states' pass on the side stream, beside the reverse scan
# (racecheck of b10 and b11 and ncu --set full of b8's gradient kernels: call2/run.sh, ~5 minutes)
# Builds P, 5, 6, 7, 8, 10, 11 must print build 0's ratios digit for digit (the same bits); the script compares.
R=$OUT/r; mkdir -p $R; D=/tmp/s25; B="bP b0 b4 b5 b6 b7 b8 b9 b10 b11"
for b in $B; do mkdir -p $D/$b; f=$(ls .dev-lead/s2[45]_$b.t[gx]z | head -1); tar xf $f -C $D/$b 2>/dev/null || python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $f $D/$b; done
export LINSTATE_FIXTURES=$PWD/.fixtures
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }
for b in $B; do
  timeout 90 $D/$b/test_cuda_backward -tc="*inputs on tensor cores*" > $R/tc_$b.txt 2>&1; echo "rc=$?" >> $R/tc_$b.txt; ts tc_$b
done
for b in b4 b5 b6 b7 b8 b9 b10 b11; do timeout 150 $D/$b/test_cuda_backward -tce="timing*" > $R/tcb_$b.txt 2>&1; echo "rc=$?" >> $R/tcb_$b.txt; ts tcb_$b; done
for b in b8; do timeout 120 $D/$b/test_cuda > $R/test_cuda_$b.txt 2>&1; echo "rc=$?" >> $R/test_cuda_$b.txt; ts test_cuda_$b; done
P="--suite=train --tmin=8192 --tmax=65536 --Ns=0 --delta --strategies=varlen --recurrent-tmax=0 --deadline=40"
for i in 1 2; do
  for b in $B; do timeout 80 $D/$b/bench_cuda $P --out=$R/t_${b}$i.csv > $R/t_${b}$i.txt 2>&1; ts "t_$b$i rc=$?"; done
done
for b in $B; do
  timeout 60 $NCU --clock-control none --metrics gpu__time_duration.sum,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active -k regex:delta -c 15 --csv --page raw $D/$b/bench_cuda --suite=train --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=0 --delta --strategies=varlen --tmin=32768 --tmax=32768 > $R/ncu_$b.csv 2>&1; ts ncu$b
done
T="-tc=*gated delta rule*,*delta*,*8 and 16 warps*,*side by side*,*subsets*"
for b in b8 b10 b11; do
  timeout 150 $CS --tool memcheck $D/$b/test_cuda_backward "$T" > $R/memcheck_$b.txt 2>&1; echo "rc=$?" >> $R/memcheck_$b.txt; ts memcheck_$b
done
cd $R && (for b in $B; do echo "== $b"; grep -h "MESSAGE" tc_$b.txt | sed "s/.*MESSAGE: //"; done
  for b in bP b5 b6 b7 b8 b10 b11; do cmp <(grep -h MESSAGE tc_b0.txt | sed "s/.*MESSAGE: //") <(grep -h MESSAGE tc_$b.txt | sed "s/.*MESSAGE: //") && echo "$b ratios: build 0's digits"; done
  tail -n 4 tcb_b*.txt test_cuda_b*.txt memcheck_b*.txt; cat times.txt) > summary.txt 2>&1
tar czf $OUT/logs.tgz *; cp summary.txt $OUT/; rm -rf $R
