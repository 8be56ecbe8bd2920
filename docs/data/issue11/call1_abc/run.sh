#!/bin/bash
# Device call 1 (issue 11, GLA-family chunked path): tests + sanitizers on the final code, then the
# four bench_cuda builds (base = HEAD, A = intra/output split, B = + state staging, C = + backward diag
# rows) in one process order ABCD..., then ncu on one launch of each forward kernel.
cd "$(dirname "$0")"; D=$PWD
export LD_LIBRARY_PATH=$D:$LD_LIBRARY_PATH LINSTATE_FIXTURES=$D/fixtures
export PATH=$PATH:/usr/local/cuda/bin
S=$OUT/summary.txt
T0=$(date +%s)
t() { local name=$1; shift; if [ $(( $(date +%s) - T0 )) -gt ${LIMIT:-520} ]; then echo "$name skipped (time)" | tee -a $S; return; fi; local s=$(date +%s.%N); "$@" > $OUT/$name.txt 2>&1; local rc=$?; echo "$name rc=$rc $(python3 -c "print(round($(date +%s.%N)-$s,1))")s" | tee -a $S; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > $S
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
[ -x ./test_cuda ] && { t test_cuda timeout 150 ./test_cuda; t test_cuda_backward timeout 180 ./test_cuda_backward; t custom_cuda timeout 120 ./custom_cuda; }
B="--suite=prefill,train --tmin=8192 --tmax=65536 --Ns=4 --strategies=varlen --recurrent-tmax=0 --deadline=100"
for r in 1 2; do for v in base A B C; do t bench_${v}_$r ./bench_cuda_$v $B --out=$OUT/bench_${v}_$r.csv; done; done
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
t ncu_fwd timeout 100 $NCU --clock-control none --section SpeedOfLight --section Occupancy --section SchedulerStats --section LaunchStats -k regex:"chunk_(state|scan|intra|output)" -c 4 ./bench_cuda_C --suite=prefill --tmin=32768 --tmax=32768 --Ns=4 --strategies=varlen --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0
t ncu_bwd timeout 100 $NCU --clock-control none --section SpeedOfLight --section Occupancy --section SchedulerStats -k regex:"chunk_(grad|rscan|dg|state)" -c 5 ./bench_cuda_C --suite=train --tmin=32768 --tmax=32768 --Ns=4 --strategies=varlen --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0
[ -x ./test_cuda ] && t memcheck_fwd timeout 90 $CS --tool memcheck --error-exitcode 9 ./test_cuda -tc="chunked*"
[ -x ./test_cuda ] && t memcheck_bwd timeout 90 $CS --tool memcheck --error-exitcode 9 ./test_cuda_backward -tc="chunked backward (bf16)*,chunked backward (fp32*"
[ -x ./test_cuda ] && t racecheck_fwd timeout 90 $CS --tool racecheck --error-exitcode 9 ./test_cuda -tc="chunked: GLA*,chunked: SSE*,chunked: bf16*,chunked: decays*"
[ -x ./test_cuda ] && t racecheck_bwd timeout 90 $CS --tool racecheck --error-exitcode 9 ./test_cuda_backward -tc="chunked backward (bf16): GLA*"
cat $OUT/bench_*_1.txt $OUT/bench_*_2.txt > $OUT/bench_all.txt; rm -f $OUT/bench_*_[12].txt
cat $OUT/ncu_fwd.txt $OUT/ncu_bwd.txt > $OUT/ncu.txt 2>/dev/null; rm -f $OUT/ncu_fwd.txt $OUT/ncu_bwd.txt
cat $OUT/bench_*.csv > $OUT/bench_all.csv; rm -f $OUT/bench_*.csv
for f in test_cuda test_cuda_backward custom_cuda memcheck_fwd memcheck_bwd racecheck_fwd racecheck_bwd; do echo "=================== $f"; cat $OUT/$f.txt; rm -f $OUT/$f.txt; done > $OUT/tests.txt 2>&1
ls $OUT
