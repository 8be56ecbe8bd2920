#!/bin/bash
# session 27 call 4: kernel 5b's per-row loops with a lane's loads issued before its stores. Carry .dev-lead
# and .fixtures. Builds (.dev-lead/s27_*.txz; meson setup B -Dcuda=enabled -Dmqar=false -Dbuildtype=release):
#   dd  = main 0a56046's CUDA code (before)
#   wy  = branch s27-wy-unroll (3716a03): the WY terms' and the dk stores' loops load row_batch = 2 columns
#         per lane before storing; the dot loops unrolled by 4 (the same operations in the same order)
#   wy4 = branch s27-wy-unroll4: the same with row_batch = 4 (ptxas: 8 bytes of spill in the bf16 kernel)
# wy and wy4 must print dd's tensor-core ratios digit for digit; the script compares.
R=$OUT/r; mkdir -p $R; D=/tmp/s27; B="dd wy wy4"
for b in $B; do mkdir -p $D/$b; tar xf .dev-lead/s27_$b.txz -C $D/$b; done
export LINSTATE_FIXTURES=$PWD/.fixtures
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }
for b in $B; do
  timeout 90 $D/$b/test_cuda_backward -tc="*inputs on tensor cores*" > $R/tc_$b.txt 2>&1; echo "rc=$?" >> $R/tc_$b.txt; ts tc_$b
done
for b in wy wy4; do timeout 150 $D/$b/test_cuda_backward -tce="timing*" > $R/tcb_$b.txt 2>&1; echo "rc=$?" >> $R/tcb_$b.txt; ts tcb_$b; done
P="--suite=train --tmin=8192 --tmax=65536 --Ns=0 --delta --strategies=varlen --recurrent-tmax=0 --deadline=40"
for i in 1 2 3; do
  for b in $B; do timeout 80 $D/$b/bench_cuda $P --out=$R/t_${b}$i.csv > $R/t_${b}$i.txt 2>&1; ts "t_$b$i rc=$?"; done
done
for b in $B; do
  timeout 60 $NCU --clock-control none --metrics gpu__time_duration.sum,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread -k regex:delta_grad -c 4 --csv --page raw $D/$b/bench_cuda --suite=train --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=0 --delta --strategies=varlen --tmin=32768 --tmax=32768 > $R/ncu_$b.csv 2>&1; ts ncu$b
done
T="-tc=*gated delta rule*,*two blocks per SM*,*subsets*,*read by none*"
for b in wy wy4; do
  timeout 60 $CS --tool memcheck $D/$b/test_cuda_backward "$T" > $R/memcheck_$b.txt 2>&1; echo "rc=$?" >> $R/memcheck_$b.txt; ts memcheck_$b
  timeout 200 $CS --tool racecheck $D/$b/test_cuda_backward "-tc=*two blocks per SM*,*read by none*,*inputs on tensor cores*" > $R/racecheck_$b.txt 2>&1; echo "rc=$?" >> $R/racecheck_$b.txt; ts racecheck_$b
done
cd $R && (for b in wy wy4; do cmp <(grep -h MESSAGE tc_dd.txt | sed "s/.*MESSAGE: //") <(grep -h MESSAGE tc_$b.txt | sed "s/.*MESSAGE: //") >/dev/null && echo "$b ratios: dd's digits" || echo "$b ratios differ from dd's"; done
  tail -n 3 tc_*.txt tcb_*.txt memcheck_*.txt racecheck_*.txt; grep -h "^train *gdn\|^train *sse_gdn" t_*.txt; cat times.txt) > summary.txt 2>&1
tar czf $OUT/logs.tgz *; cp summary.txt $OUT/; rm -rf $R
