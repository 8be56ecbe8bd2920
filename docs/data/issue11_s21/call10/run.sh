#!/bin/bash
# session 21 call 10: build 13 (the backward scans' copies to shared addresses formed once) against builds
# 12 (1eeb677) and 8 (fe9d5dd): test_cuda_backward,
# memcheck / racecheck of the delta-rule cases, GDN and SSE-GDN prefill / train rows alternated twice,
# ncu (duration, instructions) of the delta kernels in one GDN train call at 32768.
R=$OUT/r; mkdir -p $R; D=/tmp/s21; mkdir -p $D/b8 $D/b12 $D/b13
tar xzf .dev-lead/s20_b8_bench.tgz -C $D/b8; tar xzf .dev-lead/s21_b12.tgz -C $D/b12; tar xzf .dev-lead/s21_b13.tgz -C $D/b13
export LINSTATE_FIXTURES=$PWD/.fixtures
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
export R D CS NCU
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }; export -f ts
timeout 560 bash -c '
ts start
timeout 90 $D/b13/test_cuda_backward -tce="timing*" > $R/tcb.txt 2>&1; echo "rc=$?" >> $R/tcb.txt; ts tcb
P="--suite=prefill,train --tmin=8192 --tmax=65536 --Ns=0 --delta --strategies=varlen --recurrent-tmax=0 --deadline=40"
for i in 1 2; do
  for b in b8 b12 b13; do timeout 80 $D/$b/bench_cuda $P --out=$R/t_${b}$i.csv > $R/t_${b}$i.txt 2>&1; ts "t_$b$i rc=$?"; done
done
for b in b12 b13; do
timeout 60 $NCU --clock-control none --metrics gpu__time_duration.sum,smsp__inst_executed.sum -k regex:delta -c 13 --csv --page raw $D/$b/bench_cuda --suite=train --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=0 --delta --strategies=varlen --tmin=32768 --tmax=32768 > $R/ncu_$b.csv 2>&1; ts ncu$b
done
timeout 90 $CS --tool memcheck $D/b13/test_cuda_backward "-tc=*inputs on tensor cores*,*8 and 16 warps*,*side by side*,*subsets*" > $R/memcheck_b.txt 2>&1; echo "rc=$?" >> $R/memcheck_b.txt; ts memcheck_b
timeout 90 $CS --tool racecheck --racecheck-report all $D/b13/test_cuda_backward "-tc=*inputs on tensor cores*" > $R/racecheck_b.txt 2>&1; echo "rc=$?" >> $R/racecheck_b.txt; ts racecheck_b
'
echo "rc_all=$?" > $R/done.txt
cd $R && (grep -h "MESSAGE" tcb.txt | grep -i gdn | sed "s/.*MESSAGE: //"; tail -n 4 tcb.txt memcheck_b.txt racecheck_b.txt) > summary.txt 2>&1; cat times.txt >> summary.txt
tar czf $OUT/logs.tgz *; cp summary.txt $OUT/; rm -rf $R
