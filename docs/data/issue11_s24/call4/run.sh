#!/bin/bash
# session 24 call 4 (not run in session 24: the device machine was withdrawn; for the next session).
# Build 0 (4c70547) against build 4 (0 + b4_grad_1024_threads.diff: the gradient kernel at 1024 threads,
# 32 warps, 64 registers), build 5 (0 + b5_prep_pitch.diff: the backward prep's K̂, Q rows at pitch K + 4
# for bf16) and build 6 (branch s24-prep-split: build 5 with the prep's operands split once in place and
# taken by ldmatrix, split_mma; build 7: the branch's tip, 6 with the prep at __launch_bounds__(256, 2)):
# tensor-core GDN ratios (builds 5, 6 and 7 must print build 0's digits: the same bits), test_cuda_backward, train rows alternated twice, ncu of the delta kernels of one GDN train
# call at 32768; memcheck and racecheck of build 6's delta-rule cases.
R=$OUT/r; mkdir -p $R; D=/tmp/s24; for b in b0 b4 b5 b6 b7; do mkdir -p $D/$b; tar xzf .dev-lead/s24_$b.tgz -C $D/$b; done
export LINSTATE_FIXTURES=$PWD/.fixtures
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }
for b in b0 b4 b5 b6 b7; do
  timeout 90 $D/$b/test_cuda_backward -tc="*inputs on tensor cores*" > $R/tc_$b.txt 2>&1; echo "rc=$?" >> $R/tc_$b.txt; ts tc_$b
done
for b in b4 b5 b6 b7; do timeout 150 $D/$b/test_cuda_backward -tce="timing*" > $R/tcb_$b.txt 2>&1; echo "rc=$?" >> $R/tcb_$b.txt; ts tcb_$b; done
timeout 90 $D/b6/test_cuda > $R/test_cuda_b6.txt 2>&1; echo "rc=$?" >> $R/test_cuda_b6.txt; ts test_cuda_b6
P="--suite=train --tmin=8192 --tmax=65536 --Ns=0 --delta --strategies=varlen --recurrent-tmax=0 --deadline=40"
for i in 1 2; do
  for b in b0 b4 b5 b6 b7; do timeout 80 $D/$b/bench_cuda $P --out=$R/t_${b}$i.csv > $R/t_${b}$i.txt 2>&1; ts "t_$b$i rc=$?"; done
done
for b in b0 b4 b5 b6 b7; do
  timeout 60 $NCU --clock-control none --metrics gpu__time_duration.sum,smsp__inst_executed.sum -k regex:delta -c 13 --csv --page raw $D/$b/bench_cuda --suite=train --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=0 --delta --strategies=varlen --tmin=32768 --tmax=32768 > $R/ncu_$b.csv 2>&1; ts ncu$b
done
T="-tc=*gated delta rule*,*delta*,*8 and 16 warps*,*side by side*,*subsets*"
timeout 150 $CS --tool memcheck $D/b6/test_cuda_backward "$T" > $R/memcheck_b6.txt 2>&1; echo "rc=$?" >> $R/memcheck_b6.txt; ts memcheck
timeout 150 $CS --tool racecheck --racecheck-report all $D/b6/test_cuda_backward "-tc=*gated delta rule*" > $R/racecheck_b6.txt 2>&1; echo "rc=$?" >> $R/racecheck_b6.txt; ts racecheck
cd $R && (for b in b0 b4 b5 b6 b7; do echo "== $b"; grep -h "MESSAGE" tc_$b.txt | sed "s/.*MESSAGE: //"; done; for b in b5 b6 b7; do cmp <(grep -h MESSAGE tc_b0.txt | sed "s/.*MESSAGE: //") <(grep -h MESSAGE tc_$b.txt | sed "s/.*MESSAGE: //") && echo "$b ratios: build 0's digits"; done; tail -n 4 tcb_b*.txt test_cuda_b6.txt memcheck_b6.txt racecheck_b6.txt; cat times.txt) > summary.txt 2>&1
tar czf $OUT/logs.tgz *; cp summary.txt $OUT/; rm -rf $R
