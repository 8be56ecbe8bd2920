#!/bin/bash
# session 20 call 1: chunk_chain_kernel (U_c and the hand-off in one pass; forward, the backward's
# recomputation and the adjoint) against session 19's landed build (s19 build 9 = b57bb8c, the kernels of
# f375136): every GPU test, the chain tests under memcheck and racecheck, prefill and train rows
# alternated twice, per-kernel device time of the new build.
R=$OUT/r; mkdir -p $R; D=/tmp/s20; mkdir -p $D/old $D/new
tar xzf .dev-lead/s19_bench9.tgz -C $D/old; tar xzf .dev-lead/s20_b1.tgz -C $D/new
export LINSTATE_FIXTURES=$PWD/.fixtures
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu | head -1)
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
export R D NCU CS
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }; export -f ts
nvidia-smi > $R/smi.txt 2>&1
timeout 540 bash -c '
ts start
timeout 60 $D/new/test_cuda > $R/test_cuda.txt 2>&1; echo "rc=$?" >> $R/test_cuda.txt; ts test_cuda
timeout 90 $D/new/test_cuda_backward -tce="timing*" > $R/tcb.txt 2>&1; echo "rc=$?" >> $R/tcb.txt; ts tcb
P="--suite=prefill,train --tmin=8192 --tmax=65536 --Ns=4,8,16 --strategies=varlen --recurrent-tmax=0 --deadline=20"
for i in 1 2; do
  for b in old new; do timeout 60 $D/$b/bench_cuda $P --out=$R/t_${b}$i.csv > $R/t_${b}$i.txt 2>&1; ts "t_$b$i rc=$?"; done
done
T1="--suite=train --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=4 --strategies=varlen"
timeout 60 $NCU --clock-control none --metrics gpu__time_duration.sum -c 600 --csv --page raw $D/new/bench_cuda $T1 --tmin=32768 --tmax=32768 > $R/ncu_time32k.csv 2> $R/ncu_time32k.err; ts ncu32k
gzip -9 $R/ncu_time32k.csv
timeout 90 $CS --tool memcheck $D/new/test_cuda "-tc=*chunk_chain_kernel*,chunked: bf16*,chunked: in-place*" > $R/memcheck_f.txt 2>&1; echo "rc=$?" >> $R/memcheck_f.txt; ts memcheck_f
timeout 90 $CS --tool memcheck $D/new/test_cuda_backward "-tc=*chunk_chain_kernel*,chunked backward (bf16)*,saved_states (bf16)*" > $R/memcheck_b.txt 2>&1; echo "rc=$?" >> $R/memcheck_b.txt; ts memcheck_b
timeout 90 $CS --tool racecheck --racecheck-report all $D/new/test_cuda "-tc=*chunk_chain_kernel*" > $R/racecheck_f.txt 2>&1; echo "rc=$?" >> $R/racecheck_f.txt; ts racecheck_f
timeout 90 $CS --tool racecheck --racecheck-report all $D/new/test_cuda_backward "-tc=*chunk_chain_kernel*" > $R/racecheck_b.txt 2>&1; echo "rc=$?" >> $R/racecheck_b.txt; ts racecheck_b
'
echo "rc_all=$?" > $R/done.txt
cd $R && tail -n 4 test_cuda.txt tcb.txt memcheck_f.txt memcheck_b.txt racecheck_f.txt racecheck_b.txt > summary.txt 2>&1; cat times.txt >> summary.txt
tar czf $OUT/logs.tgz *; cp summary.txt $OUT/; rm -rf $R
