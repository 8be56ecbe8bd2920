#!/bin/bash
# Session 8, device call 1 (issue 11, GLA family): the merged tree's GPU tests + sanitizers with the
# warp-tile intra kernel (6aa63a9), bench_cuda old (= s7 build B: main's GLA kernels before this
# session) vs new alternated twice, ncu of one GLA forward + backward of the new build.
cd "$(dirname "$0")"; D=$PWD
export LINSTATE_FIXTURES=$D/fixtures
export PATH=$PATH:/usr/local/cuda/bin
mkdir -p $OUT/r; R=$OUT/r; S=$R/summary.txt
T0=$(date +%s)
t() { local name=$1; shift; if [ $(( $(date +%s) - T0 )) -gt ${LIMIT:-200} ]; then echo "$name skipped (time)" | tee -a $S; return; fi; local s=$(date +%s.%N); "$@" > $R/$name.txt 2>&1; local rc=$?; echo "$name rc=$rc $(python3 -c "print(round($(date +%s.%N)-$s,1))")s" | tee -a $S; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > $S
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
t test_cuda timeout 120 ./test_cuda
t test_cuda_backward timeout 120 ./test_cuda_backward
t test_cuda_lead timeout 120 ./test_cuda_lead
t memcheck_lead timeout 60 $CS --tool memcheck --error-exitcode 9 ./test_cuda_lead -tc="chunked*"
B="--suite=prefill,train --tmin=8192 --tmax=65536 --Ns=4 --strategies=varlen --recurrent-tmax=0 --deadline=100"
for r in 1 2; do for v in old new; do b=./bench_cuda; [ $v = old ] && b=./bench_cuda_old; t bench_${v}_$r $b $B --out=$R/bench_${v}_$r.csv; done; done
t memcheck_fwd timeout 60 $CS --tool memcheck --error-exitcode 9 ./test_cuda -tc="chunked*"
t memcheck_bwd timeout 60 $CS --tool memcheck --error-exitcode 9 ./test_cuda_backward -tc="chunked*"
t racecheck_fwd timeout 60 $CS --tool racecheck --error-exitcode 9 ./test_cuda -tc="chunked*"
t racecheck_bwd timeout 80 $CS --tool racecheck --error-exitcode 9 ./test_cuda_backward -tc="chunked backward*"
t ncu timeout 60 $NCU --clock-control none --section SpeedOfLight --section Occupancy --section SchedulerStats --section LaunchStats -k regex:"chunk_" -c 13 ./bench_cuda --suite=train --tmin=32768 --tmax=32768 --Ns=4 --strategies=varlen --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0
cd $OUT && tar czf r.tgz r && rm -rf r
