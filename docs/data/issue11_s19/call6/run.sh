#!/bin/bash
# session 19 call 6: build 2 (b61f3b5) against build 6 (build 4 with step 4's write slots in a 4-byte array instead of 8-byte row
# offsets: call 5's racecheck flagged the 8-byte offsets' store and load across the block barrier in builds 2 and 4),
# alternated twice on the prefill and train rows; the peers between the rounds (the SSE authors' varlen, fla main chunk_gla and chunk_gated_delta_rule, from
# session 15's cached tuning); our GDN rows; per-kernel device time of one GLA and one SSE n4k1s train call at
# T = 32768 and 65536 (build 6); build 6's test_cuda_backward, memcheck, racecheck (twice, every hazard reported).
R=$OUT/r; mkdir -p $R; D=/tmp/s19; mkdir -p $D/2 $D/6
for b in 2 6; do tar xzf .dev-lead/s19_bench$b.tgz -C $D/$b; tar xzf .dev-lead/s19_tcb$b.tgz -C $D/$b; done
export LINSTATE_FIXTURES=$PWD/.fixtures
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu | head -1)
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
export R D NCU CS
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }; export -f ts
nvidia-smi > $R/smi.txt 2>&1
mkdir -p /tmp/tc_main /tmp/tc_varlen && tar xzf .fla/tc/tc_main_autotune.tgz -C /tmp/tc_main && tar xzf .fla/tc/tc_varlen_autotune.tgz -C /tmp/tc_varlen
timeout 560 bash -c '
ts start
timeout 60 $D/6/test_cuda_backward -tce="timing*" > $R/tcb6.txt 2>&1; echo "rc=$?" >> $R/tcb6.txt; ts tcb6
P="--suite=prefill,train --tmin=8192 --tmax=65536 --Ns=4,8,16 --strategies=varlen --recurrent-tmax=0 --deadline=20"
for i in 1 2; do
  for b in 2 6; do timeout 60 $D/$b/bench_cuda $P --out=$R/t_${b}$i.csv > $R/t_${b}$i.txt 2>&1; ts "t_$b$i rc=$?"; done
  if [ $i = 1 ]; then
    (cd .fla/peer && FLA_VENDOR=$PWD FLA_CACHE_RESULTS=1 TRITON_CACHE_DIR=/tmp/tc_varlen timeout 150 python3 bench_fla.py --out $R/peer_varlen.json --suite varlen@4,8,16 --Ts 8192,16384,32768,65536 --tune varlen4 --deadline 140 > $R/peer_varlen.log 2>&1); ts "peer rc=$?"
    FLA_VENDOR=.fla/fla_main OPS=gla,gdn TS=4096,8192,16384,32768,65536 OUTJSON=$R/fla_main.json FLA_CACHE_RESULTS=1 TRITON_CACHE_DIR=/tmp/tc_main DEADLINE=110 timeout 120 python3 .fla/bench_fla_main.py > $R/fla_main.txt 2>&1; ts "fla rc=$?"
  fi
done
timeout 40 $D/6/bench_cuda --suite=prefill,train --tmin=4096 --tmax=65536 --Ns=4 --strategies=varlen --recurrent-tmax=0 --delta --deadline=20 --out=$R/gdn_6.csv > $R/gdn_6.txt 2>&1; ts gdn
T1="--suite=train --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=4 --strategies=varlen"
timeout 60 $NCU --clock-control none --metrics gpu__time_duration.sum -c 600 --csv --page raw $D/6/bench_cuda $T1 --tmin=32768 --tmax=32768 > $R/ncu_time32k.csv 2> $R/ncu_time32k.err; ts ncu32k
timeout 60 $NCU --clock-control none --metrics gpu__time_duration.sum -c 600 --csv --page raw $D/6/bench_cuda $T1 --tmin=65536 --tmax=65536 > $R/ncu_time64k.csv 2> $R/ncu_time64k.err; ts ncu64k
gzip -9 $R/ncu_time32k.csv $R/ncu_time64k.csv
timeout 60 $CS --tool memcheck $D/6/test_cuda_backward "-tc=chunked backward (bf16)*,chunked backward: extreme*,saved_states (bf16)*,*subsets*" > $R/memcheck.txt 2>&1; echo "rc=$?" >> $R/memcheck.txt; ts memcheck
for i in 1 2; do timeout 60 $CS --tool racecheck --racecheck-report all $D/6/test_cuda_backward "-tc=chunked backward (bf16): GLA*,chunked backward (bf16): SSE*" > $R/racecheck$i.txt 2>&1; echo "rc=$?" >> $R/racecheck$i.txt; ts racecheck$i; done
'
echo "rc_all=$?" > $R/done.txt
cd $R && tail -n 4 tcb6.txt memcheck.txt racecheck1.txt racecheck2.txt > summary.txt 2>&1; cat times.txt >> summary.txt
tar czf $OUT/logs.tgz *; cp summary.txt $OUT/; rm -rf $R
