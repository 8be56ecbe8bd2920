#!/bin/bash
# Session 8, device call 3 (issue 11): the merged tree (GLA dqk warp tiles 7018c68 + the delta rule's
# tensor-core backward passes) — GPU tests + sanitizers; bench_cuda main (b85e5e0, the ring build) vs
# merged, alternated around fla main (bc3b101d: chunk_gla, chunk_gated_delta_rule) re-run in this call;
# ncu of one GLA forward + backward of the merged build.
cd "$(dirname "$0")"; D=$PWD
export LINSTATE_FIXTURES=$D/fixtures
export PATH=$PATH:/usr/local/cuda/bin
mkdir -p $OUT/r; R=$OUT/r; S=$R/summary.txt
T0=$(date +%s)
t() { local name=$1; shift; if [ $(( $(date +%s) - T0 )) -gt ${LIMIT:-540} ]; then echo "$name skipped (time)" | tee -a $S; return; fi; local s=$(date +%s.%N); "$@" > $R/$name.txt 2>&1; local rc=$?; echo "$name rc=$rc $(python3 -c "print(round($(date +%s.%N)-$s,1))")s" | tee -a $S; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > $S
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
t test_cuda timeout 120 ./test_cuda_merged
t test_cuda_backward timeout 120 ./test_cuda_backward_merged
B="--suite=prefill,train --tmin=8192 --tmax=65536 --Ns=4 --strategies=varlen --recurrent-tmax=0 --delta --deadline=100"
for v in main merged; do t bench_${v}_1 ./bench_cuda_$v $B --out=$R/bench_${v}_1.csv; cat $R/bench_${v}_1.txt >> $R/bench_all.txt; done
t fla_main env FLA_VENDOR=$D/../.fla/fla_main OPS=gla,gdn TS=8192,16384,32768,65536 OUTJSON=$R/fla_main.json FLA_CACHE_RESULTS=0 TRITON_CACHE_DIR=/tmp/tc DEADLINE=380 python3 $D/../.fla/bench_fla_main.py
for v in main merged; do t bench_${v}_2 ./bench_cuda_$v $B --out=$R/bench_${v}_2.csv; cat $R/bench_${v}_2.txt >> $R/bench_all.txt; done
t memcheck_bwd timeout 60 $CS --tool memcheck --error-exitcode 9 ./test_cuda_backward_merged -tc="chunked backward*"
t racecheck_bwd timeout 60 $CS --tool racecheck --error-exitcode 9 ./test_cuda_backward_merged -tc="chunked backward (bf16)*"
t ncu timeout 60 $NCU --clock-control none --section SpeedOfLight --section Occupancy --section SchedulerStats -k regex:"chunk_(intra|kstate|scan|output|rscan|bwd|dg)" -c 11 ./bench_cuda_merged --suite=train --tmin=32768 --tmax=32768 --Ns=4 --strategies=varlen --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0
cd $OUT && tar czf r.tgz r && rm -rf r
