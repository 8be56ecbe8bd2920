#!/bin/bash
# Session 9, device call 2 (issue 11, GLA family backward): main (bf316a0) vs lead (s9-lead 535f4ef: bf16 H_c/D_c
# copies, cp.async staging, fewer dq/dk instructions) vs lead2 (+ dg formed in the dq/dk kernel), alternated
# around fla main (bc3b101d chunk_gla) re-run in this call; GPU tests + sanitizers; ncu per kernel.
cd "$(dirname "$0")"; D=$PWD
export LINSTATE_FIXTURES=$D/fixtures
export PATH=$PATH:/usr/local/cuda/bin
mkdir -p $OUT/r; R=$OUT/r; S=$R/summary.txt
T0=$(date +%s)
t() { local name=$1; shift; if [ $(( $(date +%s) - T0 )) -gt ${LIMIT:-520} ]; then echo "$name skipped (time)" | tee -a $S; return; fi; local s=$(date +%s.%N); "$@" > $R/$name.txt 2>&1; local rc=$?; echo "$name rc=$rc $(python3 -c "print(round($(date +%s.%N)-$s,1))")s" | tee -a $S; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > $S
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
t test_cuda_backward_lead timeout 120 ./test_cuda_backward_lead
t test_cuda_backward_lead2 timeout 120 ./test_cuda_backward_lead2
B="--suite=prefill,train --tmin=4096 --tmax=65536 --Ns=4,8,16 --strategies=varlen --recurrent-tmax=0 --deadline=100"
for v in main lead lead2; do t bench_${v}_1 ./bench_cuda_$v $B --out=$R/bench_${v}_1.csv; cat $R/bench_${v}_1.txt >> $R/bench_all.txt; done
t fla_main env FLA_VENDOR=$D/../.fla/fla_main OPS=gla TS=4096,8192,16384,32768,65536 OUTJSON=$R/fla_main.json FLA_CACHE_RESULTS=0 TRITON_CACHE_DIR=/tmp/tc DEADLINE=330 python3 $D/../.fla/bench_fla_main.py
for v in lead2 lead main; do t bench_${v}_2 ./bench_cuda_$v $B --out=$R/bench_${v}_2.csv; cat $R/bench_${v}_2.txt >> $R/bench_all.txt; done
t memcheck_bwd timeout 60 $CS --tool memcheck --error-exitcode 9 ./test_cuda_backward_lead2 -tc="chunked backward*"
t racecheck_bwd timeout 45 $CS --tool racecheck --error-exitcode 9 ./test_cuda_backward_lead2 -tc="chunked backward (bf16)*"
NB="--suite=train --tmin=32768 --tmax=32768 --Ns=0 --strategies=varlen --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0"
for v in lead lead2; do t ncu_$v timeout 40 $NCU --clock-control none --section SpeedOfLight -k regex:"chunk_|memset" -c 16 ./bench_cuda_$v $NB; done
cd $OUT && tar czf r.tgz r && rm -rf r
