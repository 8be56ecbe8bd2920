#!/bin/bash
# session 28 call 2: the backward's two scans with a ring of three chunk buffers (tiles issued two chunks
# ahead). Carry .dev-lead and .fixtures. Builds (.dev-lead/s28_*.txz; meson setup B -Dcuda=enabled
# -Dmqar=false -Dbuildtype=release; ninja cuda/bench_cuda cuda/test_cuda_backward):
#   main = main d768493's CUDA code (before; = branch s27-wy-unroll4)
#   ring = branch s28-scan-ring: delta_tc_rscan_kernel and delta_tc_hstate_kernel with dtc_scan_stages = 3
#   chains = branch s28-scan-chains (on ring): the scans' dependent mma chains split in two accumulators
#            (k D over even / odd k-steps; the D update's qᵀ diag(s) dO apart from its Wᵀ dVn; U − W S)
# ring must print main's tensor-core ratios digit for digit (the same products in the same order); chains
# sums in another order (its ratios are the test's: ≤ 0.005).
R=$OUT/r; mkdir -p $R; D=/tmp/s28; B="main ring chains"
for b in $B; do mkdir -p $D/$b; tar xf .dev-lead/s28_$b.txz -C $D/$b; done
export LINSTATE_FIXTURES=$PWD/.fixtures
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }
for b in $B; do
  timeout 90 $D/$b/test_cuda_backward -tc="*inputs on tensor cores*" > $R/tc_$b.txt 2>&1; echo "rc=$?" >> $R/tc_$b.txt; ts tc_$b
done
for b in ring chains; do timeout 150 $D/$b/test_cuda_backward -tce="timing*" > $R/tcb_$b.txt 2>&1; echo "rc=$?" >> $R/tcb_$b.txt; ts tcb_$b; done
P="--suite=train --tmin=8192 --tmax=65536 --Ns=0 --delta --strategies=varlen --recurrent-tmax=0 --deadline=40"
for i in 1 2 3; do
  for b in $B; do timeout 80 $D/$b/bench_cuda $P --out=$R/t_${b}$i.csv > $R/t_${b}$i.txt 2>&1; ts "t_$b$i rc=$?"; done
done
for b in $B; do
  timeout 60 $NCU --clock-control none --metrics gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread -k regex:delta_ -c 12 --csv --page raw $D/$b/bench_cuda --suite=train --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=0 --delta --strategies=varlen --tmin=32768 --tmax=32768 > $R/ncu_$b.csv 2>&1; ts ncu$b
done
for b in ring chains; do
  timeout 60 $CS --tool memcheck $D/$b/test_cuda_backward "-tc=*gated delta rule*,*two blocks per SM*,*subsets*,*read by none*,*8 and 16 warps*" > $R/memcheck_$b.txt 2>&1; echo "rc=$?" >> $R/memcheck_$b.txt; ts memcheck_$b
  timeout 150 $CS --tool racecheck $D/$b/test_cuda_backward "-tc=*read by none*,*inputs on tensor cores*" > $R/racecheck_$b.txt 2>&1; echo "rc=$?" >> $R/racecheck_$b.txt; ts racecheck_$b
done
cd $R && (cmp <(grep -h MESSAGE tc_main.txt | sed "s/.*MESSAGE: //") <(grep -h MESSAGE tc_ring.txt | sed "s/.*MESSAGE: //") >/dev/null && echo "ring ratios: main's digits" || echo "ring ratios differ from main's"
  tail -n 3 tc_*.txt tcb_*.txt memcheck_*.txt racecheck_*.txt; grep -h "^train *gdn\|^train *sse_gdn" t_*.txt; cat times.txt) > summary.txt 2>&1
tar czf $OUT/logs.tgz *; cp summary.txt $OUT/; rm -rf $R
