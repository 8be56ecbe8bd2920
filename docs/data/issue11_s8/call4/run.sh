#!/bin/bash
# Session 8, device call 4 (issue 11, GLA family): fae4095 (__expf in the warp tiles' diagonal, the
# forward's diagonal tiles over two warps) — GPU tests + sanitizers; bench_cuda before (c55cea1 + the
# delta-rule commits = call 3's "merged") vs after, alternated twice; ncu of one GLA forward + backward.
cd "$(dirname "$0")"; D=$PWD
export LINSTATE_FIXTURES=$D/fixtures
export PATH=$PATH:/usr/local/cuda/bin
mkdir -p $OUT/r; R=$OUT/r; S=$R/summary.txt
T0=$(date +%s)
t() { local name=$1; shift; if [ $(( $(date +%s) - T0 )) -gt ${LIMIT:-150} ]; then echo "$name skipped (time)" | tee -a $S; return; fi; local s=$(date +%s.%N); "$@" > $R/$name.txt 2>&1; local rc=$?; echo "$name rc=$rc $(python3 -c "print(round($(date +%s.%N)-$s,1))")s" | tee -a $S; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > $S
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
t test_cuda timeout 120 ./test_cuda_exp
t test_cuda_backward timeout 120 ./test_cuda_backward_exp
B="--suite=prefill,train --tmin=8192 --tmax=65536 --Ns=4 --strategies=varlen --recurrent-tmax=0 --deadline=100"
for r in 1 2; do for v in merged exp; do t bench_${v}_$r ./bench_cuda_$v $B --out=$R/bench_${v}_$r.csv; cat $R/bench_${v}_$r.txt >> $R/bench_all.txt; done; done
t memcheck_fwd timeout 60 $CS --tool memcheck --error-exitcode 9 ./test_cuda_exp -tc="chunked*"
t memcheck_bwd timeout 60 $CS --tool memcheck --error-exitcode 9 ./test_cuda_backward_exp -tc="chunked backward*"
t racecheck_fwd timeout 40 $CS --tool racecheck --error-exitcode 9 ./test_cuda_exp -tc="chunked: bf16*"
t racecheck_bwd timeout 40 $CS --tool racecheck --error-exitcode 9 ./test_cuda_backward_exp -tc="chunked backward (bf16)*"
t ncu timeout 40 $NCU --clock-control none --section SpeedOfLight --section SchedulerStats -k regex:"chunk_(intra|bwd_dqk)" -c 3 ./bench_cuda_exp --suite=train --tmin=32768 --tmax=32768 --Ns=4 --strategies=varlen --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0
cd $OUT && tar czf r.tgz r && rm -rf r
