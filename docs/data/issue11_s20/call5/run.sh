#!/bin/bash
# session 20 call 5: build 5 = build 3's chain kernel in its general form (32 x 32 tiles, 8 stages) with the
# read slots summed by the output kernel (no combine pass) and dv's write slots by the dv kernel (no slot
# sum for v), against build 3 (0b76808): every GPU test; memcheck of the SSE, non-finite and chain cases;
# racecheck of the chain cases; prefill and train rows alternated twice with the peers between the rounds
# (fla main: chunk_gla; the SSE authors' varlen); per-kernel device time of build 5.
R=$OUT/r; mkdir -p $R; D=/tmp/s20; mkdir -p $D/b3 $D/b5
tar xzf .dev-lead/s20_b3.tgz -C $D/b3; tar xzf .dev-lead/s20_b5.tgz -C $D/b5
export LINSTATE_FIXTURES=$PWD/.fixtures
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu | head -1)
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
export R D NCU CS
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }; export -f ts
nvidia-smi > $R/smi.txt 2>&1
mkdir -p /tmp/tc_main /tmp/tc_varlen && tar xzf .fla/tc/tc_main_autotune.tgz -C /tmp/tc_main && tar xzf .fla/tc/tc_varlen_autotune.tgz -C /tmp/tc_varlen
timeout 560 bash -c '
ts start
timeout 60 $D/b5/test_cuda > $R/test_cuda.txt 2>&1; echo "rc=$?" >> $R/test_cuda.txt; ts test_cuda
timeout 90 $D/b5/test_cuda_backward -tce="timing*" > $R/tcb.txt 2>&1; echo "rc=$?" >> $R/tcb.txt; ts tcb
P="--suite=prefill,train --tmin=8192 --tmax=65536 --Ns=4,8,16 --strategies=varlen --recurrent-tmax=0 --deadline=20"
for i in 1 2; do
  for b in b3 b5; do timeout 60 $D/$b/bench_cuda $P --out=$R/t_${b}$i.csv > $R/t_${b}$i.txt 2>&1; ts "t_$b$i rc=$?"; done
  if [ $i = 1 ]; then
    (cd .fla/peer && FLA_VENDOR=$PWD FLA_CACHE_RESULTS=1 TRITON_CACHE_DIR=/tmp/tc_varlen timeout 150 python3 bench_fla.py --out $R/peer_varlen.json --suite varlen@4,8,16 --Ts 8192,16384,32768,65536 --tune varlen4 --deadline 140 > $R/peer_varlen.log 2>&1); ts "peer rc=$?"
    FLA_VENDOR=.fla/fla_main OPS=gla TS=8192,16384,32768,65536 OUTJSON=$R/fla_main.json FLA_CACHE_RESULTS=1 TRITON_CACHE_DIR=/tmp/tc_main DEADLINE=110 timeout 120 python3 .fla/bench_fla_main.py > $R/fla_main.txt 2>&1; ts "fla rc=$?"
  fi
done
T1="--suite=train --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=4 --strategies=varlen"
timeout 60 $NCU --clock-control none --metrics gpu__time_duration.sum -c 600 --csv --page raw $D/b5/bench_cuda $T1 --tmin=32768 --tmax=32768 > $R/ncu_time32k.csv 2> $R/ncu_time32k.err; ts ncu32k
gzip -9 $R/ncu_time32k.csv
timeout 90 $CS --tool memcheck $D/b5/test_cuda "-tc=*chunk_chain_kernel*,chunked: bf16*,chunked: SSE*,chunked: packed*,non-finite*,*SSE-n4k1 + shared*" > $R/memcheck_f.txt 2>&1; echo "rc=$?" >> $R/memcheck_f.txt; ts memcheck_f
timeout 120 $CS --tool memcheck $D/b5/test_cuda_backward "-tc=*chunk_chain_kernel*,chunked backward (bf16)*,saved_states (bf16)*,*subsets*" > $R/memcheck_b.txt 2>&1; echo "rc=$?" >> $R/memcheck_b.txt; ts memcheck_b
timeout 90 $CS --tool racecheck --racecheck-report all $D/b5/test_cuda "-tc=*chunk_chain_kernel*" > $R/racecheck_f.txt 2>&1; echo "rc=$?" >> $R/racecheck_f.txt; ts racecheck_f
timeout 90 $CS --tool racecheck --racecheck-report all $D/b5/test_cuda_backward "-tc=*chunk_chain_kernel*" > $R/racecheck_b.txt 2>&1; echo "rc=$?" >> $R/racecheck_b.txt; ts racecheck_b
'
echo "rc_all=$?" > $R/done.txt
cd $R && tail -n 4 test_cuda.txt tcb.txt memcheck_f.txt memcheck_b.txt racecheck_f.txt racecheck_b.txt > summary.txt 2>&1; cat times.txt >> summary.txt
tar czf $OUT/logs.tgz *; cp summary.txt $OUT/; rm -rf $R
