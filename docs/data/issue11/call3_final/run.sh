#!/bin/bash
# Device call 3 (issue 11, final): GPU tests + sanitizers on the final code (G), bench_cuda
cd "$(dirname "$0")"; D=$PWD
export LD_LIBRARY_PATH=$D:$LD_LIBRARY_PATH LINSTATE_FIXTURES=$D/fixtures
export PATH=$PATH:/usr/local/cuda/bin:/opt/torch/.venv/bin
S=$OUT/summary.txt
T0=$(date +%s)
t() { local name=$1; shift; if [ $(( $(date +%s) - T0 )) -gt ${LIMIT:-545} ]; then echo "$name skipped (time)" | tee -a $S; return; fi; local s=$(date +%s.%N); "$@" > $OUT/$name.txt 2>&1; local rc=$?; echo "$name rc=$rc $(python3 -c "print(round($(date +%s.%N)-$s,1))")s" | tee -a $S; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > $S
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
t test_cuda timeout 120 ./test_cuda
t test_cuda_backward timeout 150 ./test_cuda_backward
t custom_cuda timeout 120 ./custom_cuda
cat $OUT/test_cuda.txt $OUT/test_cuda_backward.txt $OUT/custom_cuda.txt > $OUT/tests_main.txt 2>/dev/null; rm -f $OUT/test_cuda.txt $OUT/test_cuda_backward.txt $OUT/custom_cuda.txt
B="--suite=prefill,train --tmin=8192 --tmax=65536 --Ns=4 --strategies=varlen --recurrent-tmax=0 --deadline=100"
for v in G base C E2 F2; do t bench_${v}_1 ./bench_cuda_$v $B --out=$OUT/bench_${v}_1.csv; cat $OUT/bench_${v}_1.txt >> $OUT/bench_all.txt; cat $OUT/bench_${v}_1.csv >> $OUT/bench_all.csv; rm -f $OUT/bench_${v}_1.txt $OUT/bench_${v}_1.csv; done
t memcheck_fwd timeout 50 $CS --tool memcheck --error-exitcode 9 ./test_cuda -tc="chunked*"
{ echo "=================== memcheck_fwd"; cat $OUT/memcheck_fwd.txt; } >> $OUT/sanitizers.txt 2>&1; rm -f $OUT/memcheck_fwd.txt
t memcheck_bwd timeout 50 $CS --tool memcheck --error-exitcode 9 ./test_cuda_backward -tc="chunked backward*"
{ echo "=================== memcheck_bwd"; cat $OUT/memcheck_bwd.txt; } >> $OUT/sanitizers.txt 2>&1; rm -f $OUT/memcheck_bwd.txt
t racecheck_fwd timeout 50 $CS --tool racecheck --error-exitcode 9 ./test_cuda -tc="chunked: GLA*,chunked: SSE*,chunked: bf16*,chunked: decays*,chunked: strong*"
{ echo "=================== racecheck_fwd"; cat $OUT/racecheck_fwd.txt; } >> $OUT/sanitizers.txt 2>&1; rm -f $OUT/racecheck_fwd.txt
t racecheck_bwd timeout 50 $CS --tool racecheck --error-exitcode 9 ./test_cuda_backward -tc="chunked backward (bf16): GLA*,chunked backward: strong*"
{ echo "=================== racecheck_bwd"; cat $OUT/racecheck_bwd.txt; } >> $OUT/sanitizers.txt 2>&1; rm -f $OUT/racecheck_bwd.txt
for v in G base C E2 F2; do t bench_${v}_2 ./bench_cuda_$v $B --out=$OUT/bench_${v}_2.csv; cat $OUT/bench_${v}_2.txt >> $OUT/bench_all.txt; cat $OUT/bench_${v}_2.csv >> $OUT/bench_all.csv; rm -f $OUT/bench_${v}_2.txt $OUT/bench_${v}_2.csv; done
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
t resusage bash -c "$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump) -res-usage ./bench_cuda_G | grep -A1 -E \"scan_kernel|intra_kernel|kstate_kernel|output_kernel|grad_kernel\" | grep -A1 bfloat16"
t ncu_fwd timeout 60 $NCU --clock-control none --section SpeedOfLight --section Occupancy --section SchedulerStats -k regex:"chunk_(intra|kstate|scan|output|grad|rscan|state|dg)" -c 11 ./bench_cuda_G --suite=train --tmin=32768 --tmax=32768 --Ns=4 --strategies=varlen --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0
cat $OUT/resusage.txt >> $OUT/ncu_fwd.txt; rm -f $OUT/resusage.txt
ls $OUT
