#!/bin/bash
# Device call 1 (issue 11, session 7, GLA family): GPU tests + sanitizers on the newest build, bench_cuda
# alternating main and the new builds (two rounds), ncu of the new backward.
cd "$(dirname "$0")"; D=$PWD
export LINSTATE_FIXTURES=$D/fixtures
export PATH=$PATH:/usr/local/cuda/bin
S=$OUT/summary.txt
T0=$(date +%s)
t() { local name=$1; shift; if [ $(( $(date +%s) - T0 )) -gt ${LIMIT:-175} ]; then echo "$name skipped (time)" | tee -a $S; return; fi; local s=$(date +%s.%N); "$@" > $OUT/$name.txt 2>&1; local rc=$?; echo "$name rc=$rc $(python3 -c "print(round($(date +%s.%N)-$s,1))")s" | tee -a $S; }
app() { local to=$1 name=$2; { echo "=================== $name"; cat $OUT/$name.txt; } >> $OUT/$to 2>&1; rm -f $OUT/$name.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > $S
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
NEW=${NEW:-C}
for v in ${TESTS:-$NEW}; do
  t test_cuda_$v timeout 60 ./test_cuda_$v; app tests.txt test_cuda_$v
  t test_cuda_backward_$v timeout 60 ./test_cuda_backward_$v; app tests.txt test_cuda_backward_$v
done
t resusage bash -c "$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump) -res-usage ./bench_cuda_$NEW | grep -A1 -E 'chunk_' | grep -A1 'gated_key.*bfloat16'"; app ncu.txt resusage
B="--suite=prefill,train --tmin=8192 --tmax=65536 --Ns=4 --strategies=varlen --recurrent-tmax=0 --deadline=100"
VARS=${VARS:-main A B C}
for r in 1 2; do for v in $VARS; do t bench_${v}_$r ./bench_cuda_$v $B --out=$OUT/bench_${v}_$r.csv; cat $OUT/bench_${v}_$r.txt >> $OUT/bench_all.txt; rm -f $OUT/bench_${v}_$r.txt; cat $OUT/bench_${v}_$r.csv >> $OUT/bench_all.csv 2>/dev/null; rm -f $OUT/bench_${v}_$r.csv; done; done
t memcheck_bwd timeout 40 $CS --tool memcheck --error-exitcode 9 ./test_cuda_backward_$NEW -tc="chunked backward (bf16)*,bf16 and fp16 inputs"; app sanitizers.txt memcheck_bwd
t memcheck_fwd timeout 30 $CS --tool memcheck --error-exitcode 9 ./test_cuda_$NEW -tc="chunked*"; app sanitizers.txt memcheck_fwd
t racecheck_bwd timeout 50 $CS --tool racecheck --error-exitcode 9 ./test_cuda_backward_$NEW -tc="chunked backward (bf16)*"; app sanitizers.txt racecheck_bwd
t racecheck_fwd timeout 40 $CS --tool racecheck --error-exitcode 9 ./test_cuda_$NEW -tc="chunked: GLA*,chunked: SSE*,chunked: bf16*,chunked: decays*,chunked: strong*"; app sanitizers.txt racecheck_fwd
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
t ncu_train timeout 40 $NCU --clock-control none --section SpeedOfLight --section Occupancy --section SchedulerStats --section LaunchStats -k regex:"chunk_" -c 13 ./bench_cuda_$NEW --suite=train --tmin=32768 --tmax=32768 --Ns=4 --strategies=varlen --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0; app ncu.txt ncu_train
t ncu_intraB timeout 20 $NCU --clock-control none --section SpeedOfLight --section Occupancy --section SchedulerStats --section LaunchStats -k regex:"chunk_intra" -c 1 ./bench_cuda_B --suite=prefill --tmin=32768 --tmax=32768 --Ns=4 --strategies=varlen --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0; app ncu.txt ncu_intraB
ls -la $OUT
