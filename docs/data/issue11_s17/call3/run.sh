#!/bin/bash
# session 17 call 3: A = landed main b0c2adb (s16_binS3 bench_cuda); F = this tree (s17_bin3: 7566181 + 63a51d5 + GLA's small
# decode steps on the split kernel, the streamed kernel's 128-register variant for N fixed at compile time, the
# single-slot rule written through the diagonal one). All three CUDA test programs, sanitizers on the decode cases,
# decode rows A/F alternated twice, ncu device time per kernel of SSE n4k1s and n16k1s train calls at T = 65536.
R=$OUT/r; mkdir -p $R; D=/tmp/s17; mkdir -p $D/A $D/F
tar xzf .dev-lead/s16_binS3.tgz -C $D/A; tar xzf .dev-lead/s17_bin3.tgz -C $D/F
export LINSTATE_FIXTURES=$PWD/.fixtures
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
export R D CS NCU
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }; export -f ts
nvidia-smi > $R/smi.txt 2>&1
timeout 400 bash -c '
ts start
timeout 60 $D/F/test_cuda > $R/F_test_cuda.txt 2>&1; echo "rc=$?" >> $R/F_test_cuda.txt; ts test_cuda
timeout 60 $D/F/test_cuda_backward > $R/F_test_cuda_backward.txt 2>&1; echo "rc=$?" >> $R/F_test_cuda_backward.txt; ts test_bwd
Q="--suite=copy,decode --Ns=4,8,16 --batch=1,2,4,8,16,128 --deadline=0"
for i in 1 2; do
  for b in A F; do timeout 30 $D/$b/bench_cuda $Q --out=$R/dec_${b}$i.csv > $R/dec_${b}$i.txt 2>&1; ts dec_$b$i; done
done
timeout 60 $CS --tool memcheck $D/F/test_cuda "-tc=*decode*,non-finite*" > $R/memcheck.txt 2>&1; echo "rc=$?" >> $R/memcheck.txt; ts memcheck
timeout 60 $CS --tool racecheck $D/F/test_cuda "-tc=decode step: N fixed*,decode step: unselected*" > $R/racecheck.txt 2>&1; echo "rc=$?" >> $R/racecheck.txt; ts racecheck
timeout 40 $CS --tool memcheck $D/F/test_cuda_backward "-tc=*subsets*" > $R/memcheck_bwd.txt 2>&1; echo "rc=$?" >> $R/memcheck_bwd.txt; ts memcheck_bwd
T2="--suite=train --tmin=65536 --tmax=65536 --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --strategies=varlen"
timeout 60 $NCU --clock-control none --metrics gpu__time_duration.sum -c 600 --csv --page raw $D/F/bench_cuda $T2 --Ns=4,16 > $R/ncu_time64k.csv 2> $R/ncu_time64k.err; ts ncu64k
gzip -9 $R/ncu_time64k.csv
'
echo "rc_all=$?" > $R/done.txt
cd $R && tail -n 3 F_test_cuda.txt F_test_cuda_backward.txt memcheck.txt racecheck.txt memcheck_bwd.txt > summary.txt 2>&1; cat times.txt >> summary.txt
cd $OUT && tar czf r.tgz r && cp r/summary.txt . && rm -rf r
