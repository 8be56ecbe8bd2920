#!/bin/bash
# session 24 call 1: build 0 (4c70547, session 23's last) against build 1 (the gradient kernel's V-long
# products in two fused passes): the tensor-core GDN test's printed ratios of both (same bits expected),
# test_cuda_backward of build 1, train rows alternated twice, ncu (duration, instructions) of the delta
# kernels of one GDN train call at 32768, memcheck and racecheck of build 1's delta-rule cases.
R=$OUT/r; mkdir -p $R; D=/tmp/s24; for b in b0 b1; do mkdir -p $D/$b; tar xzf .dev-lead/s24_$b.tgz -C $D/$b; done
export LINSTATE_FIXTURES=$PWD/.fixtures
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }
for b in b0 b1; do timeout 90 $D/$b/test_cuda_backward -tc="*inputs on tensor cores*" > $R/tc_$b.txt 2>&1; echo "rc=$?" >> $R/tc_$b.txt; ts tc_$b; done
timeout 150 $D/b1/test_cuda_backward -tce="timing*" > $R/tcb_b1.txt 2>&1; echo "rc=$?" >> $R/tcb_b1.txt; ts tcb
P="--suite=train --tmin=8192 --tmax=65536 --Ns=0 --delta --strategies=varlen --recurrent-tmax=0 --deadline=40"
for i in 1 2; do
  for b in b0 b1; do timeout 80 $D/$b/bench_cuda $P --out=$R/t_${b}$i.csv > $R/t_${b}$i.txt 2>&1; ts "t_$b$i rc=$?"; done
done
for b in b0 b1; do
  timeout 60 $NCU --clock-control none --metrics gpu__time_duration.sum,smsp__inst_executed.sum -k regex:delta -c 13 --csv --page raw $D/$b/bench_cuda --suite=train --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=0 --delta --strategies=varlen --tmin=32768 --tmax=32768 > $R/ncu_$b.csv 2>&1; ts ncu$b
done
T="-tc=*gated delta rule*,*delta*,*8 and 16 warps*,*side by side*,*subsets*"
timeout 150 $CS --tool memcheck $D/b1/test_cuda_backward "$T" > $R/memcheck.txt 2>&1; echo "rc=$?" >> $R/memcheck.txt; ts memcheck
timeout 150 $CS --tool racecheck --racecheck-report all $D/b1/test_cuda_backward "-tc=*gated delta rule*,*8 and 16 warps*" > $R/racecheck.txt 2>&1; echo "rc=$?" >> $R/racecheck.txt; ts racecheck
cd $R && (for b in b0 b1; do echo "== $b"; grep -h "MESSAGE" tc_$b.txt | sed "s/.*MESSAGE: //"; tail -n 3 tc_$b.txt; done; tail -n 4 tcb_b1.txt memcheck.txt racecheck.txt; for b in b0 b1; do echo "== ncu $b"; grep -h '"delta' ncu_$b.csv | awk -F'","' '{print $5, $(NF-1), $NF}' | cut -c1-160; done; cat times.txt) > summary.txt 2>&1
tar czf $OUT/logs.tgz *; cp summary.txt $OUT/; rm -rf $R
