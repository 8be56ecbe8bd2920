#!/bin/bash
# session 23 call 6: build 5 (build 3 + a producer warp in each of the backward's two tensor-core scans,
# a ring of three chunk buffers: the producer forms chunk c ± 2's records and issues its copies in three
# parts, one after each of the step's barriers, and waits for chunk c ± 1 before the next step; build 4's
# form, two buffers, the compute warps at named barriers, was slower and racecheck flagged it: calls 4, 5)
# against build 3 (bbe92c5): the tensor-core GDN test (printed ratios), the 8 / 16-warp, side-by-side and
# subset cases, memcheck / racecheck of them, GDN / SSE-GDN train rows alternated twice (and build 5 at 16
# compute warps), ncu durations of build 5's delta kernels.
R=$OUT/r; mkdir -p $R; D=/tmp/s23; for b in b3 b5; do mkdir -p $D/$b; tar xzf .dev-lead/s23_$b.tgz -C $D/$b; done
export LINSTATE_FIXTURES=$PWD/.fixtures
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }
T="-tc=*inputs on tensor cores*,*8 and 16 warps*,*side by side*,*subsets*"
timeout 90 $D/b5/test_cuda_backward "$T" > $R/tc_b5.txt 2>&1; echo "rc=$?" >> $R/tc_b5.txt; ts tc_b5
timeout 100 $CS --tool racecheck --racecheck-report all $D/b5/test_cuda_backward "-tc=*inputs on tensor cores*,*8 and 16 warps*" > $R/racecheck_b5.txt 2>&1; echo "rc=$?" >> $R/racecheck_b5.txt; ts racecheck
P="--suite=train --tmin=8192 --tmax=65536 --Ns=0 --delta --strategies=varlen --recurrent-tmax=0 --deadline=40"
for i in 1 2; do
  for b in b3 b5; do timeout 80 $D/$b/bench_cuda $P --out=$R/t_${b}$i.csv > $R/t_${b}$i.txt 2>&1; ts "t_$b$i rc=$?"; done
done
timeout 80 $D/b5/bench_cuda $P --bscan-warps=16 --out=$R/t_b5w16.csv > $R/t_b5w16.txt 2>&1; ts "t_b5w16 rc=$?"
A="--suite=train --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=0 --delta --strategies=varlen --tmin=32768 --tmax=32768"
timeout 60 $NCU --clock-control none --metrics gpu__time_duration.sum,smsp__inst_executed.sum -k regex:delta -c 13 --csv --page raw $D/b5/bench_cuda $A > $R/ncu_b5.csv 2>&1; ts ncub5
timeout 100 $CS --tool memcheck $D/b5/test_cuda_backward "$T" > $R/memcheck_b5.txt 2>&1; echo "rc=$?" >> $R/memcheck_b5.txt; ts memcheck
cd $R && (grep -h "MESSAGE" tc_b5.txt | sed "s/.*MESSAGE: //"; tail -n 4 tc_b5.txt memcheck_b5.txt racecheck_b5.txt; cat times.txt) > summary.txt 2>&1
tar czf $OUT/logs.tgz *; cp summary.txt $OUT/; rm -rf $R
