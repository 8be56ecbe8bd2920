#!/bin/bash
# session 26 call 1 (not run in session 26: no device machine was lent; run after session 25's call1 and
# call2, docs/data/issue11_s25/). Carry .dev-lead and .fixtures. About 4 minutes.
#   b0  = 4c70547 (main's CUDA code; = .dev-lead/s24_b0.txz)
#   b8  = branch s25-grad-split (e747ad8; .dev-lead/s25_b8.txz): kernel 5 split into 5a + 5b
#   b12 = branch s26-grad-2cta (.dev-lead/s26_b12.txz): b8 with kernel 5b for bf16 inputs at two
#         256-thread blocks per SM (delta_grad_bf16_kernel); its test_cuda_backward has a new case
#         ("... gradient kernel at two blocks per SM against the one-block kernel")
# Every build's delta-rule cases passed under the CPU emulation in session 26 (docs/cuda.md, "The GPU
# tests on the CPU"); this call measures them and runs what the emulation cannot: the H200's bits,
# memcheck, racecheck, timing.
R=$OUT/r; mkdir -p $R; D=/tmp/s26; B="b0 b8 b12"
for b in $B; do mkdir -p $D/$b; f=$(ls .dev-lead/s2[456]_$b.t[gx]z | head -1); tar xf $f -C $D/$b 2>/dev/null || python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $f $D/$b; done
export LINSTATE_FIXTURES=$PWD/.fixtures
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }
for b in $B; do
  timeout 90 $D/$b/test_cuda_backward -tc="*inputs on tensor cores*" > $R/tc_$b.txt 2>&1; echo "rc=$?" >> $R/tc_$b.txt; ts tc_$b
done
timeout 150 $D/b12/test_cuda_backward -tce="timing*" > $R/tcb_b12.txt 2>&1; echo "rc=$?" >> $R/tcb_b12.txt; ts tcb_b12
P="--suite=train --tmin=8192 --tmax=65536 --Ns=0 --delta --strategies=varlen --recurrent-tmax=0 --deadline=40"
for i in 1 2; do
  for b in $B; do timeout 80 $D/$b/bench_cuda $P --out=$R/t_${b}$i.csv > $R/t_${b}$i.txt 2>&1; ts "t_$b$i rc=$?"; done
done
for b in b8 b12; do
  timeout 60 $NCU --clock-control none --metrics gpu__time_duration.sum,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__occupancy_limit_shared_mem -k regex:delta_grad -c 6 --csv --page raw $D/$b/bench_cuda --suite=train --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=0 --delta --strategies=varlen --tmin=32768 --tmax=32768 > $R/ncu_$b.csv 2>&1; ts ncu$b
done
T="-tc=*gated delta rule*,*two blocks per SM*,*subsets*"
timeout 150 $CS --tool memcheck $D/b12/test_cuda_backward "$T" > $R/memcheck_b12.txt 2>&1; echo "rc=$?" >> $R/memcheck_b12.txt; ts memcheck_b12
timeout 150 $CS --tool racecheck $D/b12/test_cuda_backward "-tc=*two blocks per SM*" > $R/racecheck_b12.txt 2>&1; echo "rc=$?" >> $R/racecheck_b12.txt; ts racecheck_b12
cd $R && (for b in $B; do echo "== $b"; grep -h "MESSAGE" tc_$b.txt | sed "s/.*MESSAGE: //"; done
  cmp <(grep -h MESSAGE tc_b0.txt | sed "s/.*MESSAGE: //") <(grep -h MESSAGE tc_b8.txt | sed "s/.*MESSAGE: //") && echo "b8 ratios: build 0's digits"
  grep -h "two blocks" tcb_b12.txt | sed "s/.*MESSAGE: //"
  tail -n 4 tcb_b12.txt memcheck_b12.txt racecheck_b12.txt; cat times.txt) > summary.txt 2>&1
tar czf $OUT/logs.tgz *; cp summary.txt $OUT/; rm -rf $R
