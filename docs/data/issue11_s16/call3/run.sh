#!/bin/bash
# session 16 call 3: A = d039d82's build (bench_cuda); M = main after the merge of s16-bwd (aedae03's decode helpers with
# the publish hook, 0bea7e7's combine4, s16-bwd's one-slot direct stores); S = s16-sse (M + SSE's one-slot gradients
# stored directly, nan_rows_kernel; its test_cuda holds the decode kernels of M). Tests, sanitizers, A/M/S alternated, both peers from their cached tuning, ncu.
R=$OUT/r; mkdir -p $R; D=/tmp/s16; mkdir -p $D/A $D/M $D/S
tar xzf .dev-lead/s16_base.tgz -C $D/A; tar xzf .dev-lead/s16_binM.tgz -C $D/M; tar xzf .dev-lead/s16_binS.tgz -C $D/S
export LINSTATE_FIXTURES=$PWD/.fixtures
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
export R D CS NCU
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }; export -f ts
nvidia-smi > $R/smi.txt 2>&1
mkdir -p /tmp/tc_main /tmp/tc_varlen && tar xzf .fla/tc/tc_main_autotune.tgz -C /tmp/tc_main && tar xzf .fla/tc/tc_varlen_autotune.tgz -C /tmp/tc_varlen
timeout 560 bash -c '
ts start
timeout 40 $D/S/test_cuda_backward > $R/S_test_cuda_backward.txt 2>&1; echo "rc=$?" >> $R/S_test_cuda_backward.txt; ts test_bwd
timeout 30 $D/S/test_cuda > $R/S_test_cuda.txt 2>&1; echo "rc=$?" >> $R/S_test_cuda.txt; ts test_cuda
P="--suite=prefill,train --tmin=8192 --tmax=65536 --Ns=4,8,16 --strategies=varlen --recurrent-tmax=0 --deadline=15"
Q="--suite=copy,decode --Ns=4,8,16 --deadline=0"
for i in 1 2; do
  for b in A M S; do timeout 45 $D/$b/bench_cuda $P --out=$R/pt_${b}$i.csv > $R/pt_${b}$i.txt 2>&1; ts pt_$b$i; done
  for b in A S; do timeout 25 $D/$b/bench_cuda $Q --out=$R/dec_${b}$i.csv > $R/dec_${b}$i.txt 2>&1; ts dec_$b$i; done
  if [ $i = 1 ]; then
    (cd .fla/peer && OUT=$R FLA_VENDOR=$PWD FLA_CACHE_RESULTS=1 TRITON_CACHE_DIR=/tmp/tc_varlen timeout 140 python3 bench_fla.py --out $R/peer_varlen.json --suite varlen@4,8,16 --Ts 8192,16384,32768,65536 --tune varlen4 --deadline 130 > $R/peer_varlen.log 2>&1); ts peer
    FLA_VENDOR=.fla/fla_main OPS=gla TS=8192,16384,32768,65536 OUTJSON=$R/fla_main_gla.json FLA_CACHE_RESULTS=1 TRITON_CACHE_DIR=/tmp/tc_main DEADLINE=60 timeout 70 python3 .fla/bench_fla_main.py > $R/fla_gla.txt 2>&1; ts fla
  fi
done
timeout 60 $CS --tool memcheck $D/S/test_cuda_backward "-tc=*chunked backward (bf16)*,*subsets*,*non-finite*" > $R/memcheck.txt 2>&1; echo "rc=$?" >> $R/memcheck.txt; ts memcheck
timeout 50 $CS --tool racecheck $D/S/test_cuda_backward "-tc=*chunked backward (bf16): SSE*,*non-finite*" > $R/racecheck.txt 2>&1; echo "rc=$?" >> $R/racecheck.txt; ts racecheck
T1="--suite=train --tmin=32768 --tmax=32768 --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush"
timeout 25 $NCU --clock-control none --metrics gpu__time_duration.sum -c 400 --csv --page raw $D/S/bench_cuda $T1 --Ns=4 --strategies=varlen > $R/ncu_timeS.csv 2> $R/ncu_timeS.err; ts ncu_time
SKIP=$(python3 -c "
import csv,io,sys
L=[l for l in open(\"$R/ncu_timeS.csv\") if l.startswith(chr(34))]
rd=list(csv.reader(io.StringIO(\"\".join(L)))); k=rd[0].index(\"Kernel Name\")
n=[r[k] for r in rd[2:]]; print([i for i,x in enumerate(n) if \"router_kernel\" in x][0])" 2>>$R/ncu_timeS.err)
echo "skip=$SKIP" >> $R/times.txt
[ -n "$SKIP" ] && timeout 70 $NCU --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats --launch-skip $SKIP -c 34 --csv --page details $D/S/bench_cuda $T1 --Ns=4 --strategies=varlen > $R/ncu_sse.csv 2> $R/ncu_sse.err; ts ncu_sse
timeout 60 $NCU --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats -k regex:delta -c 16 --csv --page details $D/S/bench_cuda $T1 --Ns=0 --delta > $R/ncu_gdn.csv 2> $R/ncu_gdn.err; ts ncu_gdn
gzip -9 $R/ncu_*.csv
'
echo "rc_all=$?" > $R/done.txt
cd $R && tail -n 3 S_test_cuda_backward.txt S_test_cuda.txt memcheck.txt racecheck.txt > summary.txt 2>&1; cat times.txt >> summary.txt
cd $OUT && tar czf r.tgz r && cp r/summary.txt . && rm -rf r
