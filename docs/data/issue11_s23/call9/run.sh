#!/bin/bash
# session 23 call 9: build 7 (build 3 + delta_grad_kernel's four per-record loops by 8 threads per
# record, all 64 records at once, each row sum in a warp's exact order: row_sum8) against build 3 (bbe92c5):
# test_cuda_backward (every case), memcheck / racecheck of the delta-rule cases, GDN / SSE-GDN train rows
# alternated twice, ncu durations of build 7's delta kernels.
R=$OUT/r; mkdir -p $R; D=/tmp/s23; for b in b3 b7; do mkdir -p $D/$b; tar xzf .dev-lead/s23_$b.tgz -C $D/$b; done
export LINSTATE_FIXTURES=$PWD/.fixtures
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }
timeout 120 $D/b7/test_cuda_backward -tce="timing*" > $R/tcb_b7.txt 2>&1; echo "rc=$?" >> $R/tcb_b7.txt; ts tcb_b7
P="--suite=train --tmin=8192 --tmax=65536 --Ns=0 --delta --strategies=varlen --recurrent-tmax=0 --deadline=40"
for i in 1 2; do
  for b in b3 b7; do timeout 80 $D/$b/bench_cuda $P --out=$R/t_${b}$i.csv > $R/t_${b}$i.txt 2>&1; ts "t_$b$i rc=$?"; done
done
A="--suite=train --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=0 --delta --strategies=varlen --tmin=32768 --tmax=32768"
timeout 60 $NCU --clock-control none --metrics gpu__time_duration.sum,smsp__inst_executed.sum -k regex:delta -c 13 --csv --page raw $D/b7/bench_cuda $A > $R/ncu_b7.csv 2>&1; ts ncub7
T="-tc=*gated delta rule*,*delta*,*8 and 16 warps*,*side by side*,*subsets*"
timeout 150 $CS --tool memcheck $D/b7/test_cuda_backward "$T" > $R/memcheck_b7.txt 2>&1; echo "rc=$?" >> $R/memcheck_b7.txt; ts memcheck
timeout 150 $CS --tool racecheck --racecheck-report all $D/b7/test_cuda_backward "-tc=*gated delta rule*" > $R/racecheck_b7.txt 2>&1; echo "rc=$?" >> $R/racecheck_b7.txt; ts racecheck
cd $R && (grep -h "MESSAGE" tcb_b7.txt | grep -i gdn | sed "s/.*MESSAGE: //"; tail -n 4 tcb_b7.txt memcheck_b7.txt racecheck_b7.txt; cat times.txt) > summary.txt 2>&1
tar czf $OUT/logs.tgz *; cp summary.txt $OUT/; rm -rf $R
