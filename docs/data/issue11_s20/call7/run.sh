#!/bin/bash
# session 20 call 7: build 7 = build 6 (ad049b5) with the output kernel's fp32 read-slot rows and the dv
# kernel's fp32 write-slot rows stored 16 bytes at a time (SSE's partial buffers), against build 6: every
# GPU test; memcheck of the SSE and non-finite cases; prefill and train rows alternated twice; per-kernel
# device time of build 7.
R=$OUT/r; mkdir -p $R; D=/tmp/s20; mkdir -p $D/b6 $D/b7
tar xzf .dev-lead/s20_b6.tgz -C $D/b6; tar xzf .dev-lead/s20_b7.tgz -C $D/b7
export LINSTATE_FIXTURES=$PWD/.fixtures
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu | head -1)
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
export R D NCU CS
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }; export -f ts
timeout 400 bash -c '
ts start
timeout 60 $D/b7/test_cuda > $R/test_cuda.txt 2>&1; echo "rc=$?" >> $R/test_cuda.txt; ts test_cuda
timeout 90 $D/b7/test_cuda_backward -tce="timing*" > $R/tcb.txt 2>&1; echo "rc=$?" >> $R/tcb.txt; ts tcb
P="--suite=prefill,train --tmin=8192 --tmax=65536 --Ns=4,8,16 --strategies=varlen --recurrent-tmax=0 --deadline=20"
for i in 1 2; do
  for b in b6 b7; do timeout 60 $D/$b/bench_cuda $P --out=$R/t_${b}$i.csv > $R/t_${b}$i.txt 2>&1; ts "t_$b$i rc=$?"; done
done
T1="--suite=train --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=4 --strategies=varlen"
timeout 60 $NCU --clock-control none --metrics gpu__time_duration.sum -c 600 --csv --page raw $D/b7/bench_cuda $T1 --tmin=32768 --tmax=32768 > $R/ncu_time32k.csv 2> $R/ncu_time32k.err; ts ncu32k
gzip -9 $R/ncu_time32k.csv
timeout 90 $CS --tool memcheck $D/b7/test_cuda "-tc=chunked: bf16*,chunked: SSE*,chunked: packed*,non-finite*" > $R/memcheck_f.txt 2>&1; echo "rc=$?" >> $R/memcheck_f.txt; ts memcheck_f
timeout 120 $CS --tool memcheck $D/b7/test_cuda_backward "-tc=chunked backward (bf16)*,*subsets*" > $R/memcheck_b.txt 2>&1; echo "rc=$?" >> $R/memcheck_b.txt; ts memcheck_b
'
echo "rc_all=$?" > $R/done.txt
cd $R && tail -n 4 test_cuda.txt tcb.txt memcheck_f.txt memcheck_b.txt > summary.txt 2>&1; cat times.txt >> summary.txt
tar czf $OUT/logs.tgz *; cp summary.txt $OUT/; rm -rf $R
