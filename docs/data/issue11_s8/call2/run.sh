#!/bin/bash
# Session 8, device call 2 (issue 11, GLA family): GPU tests + sanitizers of the ring build (ceb91e4:
# warp-tile intra + hsbuf + fused U_c + ring scans); bench_cuda main (6aa63a9) / fused (9cfcd18) /
# ring (ceb91e4) alternated twice; ncu of one GLA forward + backward of the ring build.
cd "$(dirname "$0")"; D=$PWD
export LINSTATE_FIXTURES=$D/fixtures
export PATH=$PATH:/usr/local/cuda/bin
mkdir -p $OUT/r; R=$OUT/r; S=$R/summary.txt
T0=$(date +%s)
t() { local name=$1; shift; if [ $(( $(date +%s) - T0 )) -gt ${LIMIT:-200} ]; then echo "$name skipped (time)" | tee -a $S; return; fi; local s=$(date +%s.%N); "$@" > $R/$name.txt 2>&1; local rc=$?; echo "$name rc=$rc $(python3 -c "print(round($(date +%s.%N)-$s,1))")s" | tee -a $S; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > $S
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
t test_cuda timeout 120 ./test_cuda_ring
t test_cuda_backward timeout 120 ./test_cuda_backward_ring
t test_cuda_backward_fused timeout 120 ./test_cuda_backward_fused
B="--suite=prefill,train --tmin=8192 --tmax=65536 --Ns=4 --strategies=varlen --recurrent-tmax=0 --deadline=100"
for r in 1 2; do for v in main fused ring; do t bench_${v}_$r ./bench_cuda_$v $B --out=$R/bench_${v}_$r.csv; cat $R/bench_${v}_$r.txt >> $R/bench_all.txt; done; done
t memcheck_fwd timeout 60 $CS --tool memcheck --error-exitcode 9 ./test_cuda_ring -tc="chunked*"
t memcheck_bwd timeout 60 $CS --tool memcheck --error-exitcode 9 ./test_cuda_backward_ring -tc="chunked backward*"
t racecheck_fwd1 timeout 40 $CS --tool racecheck --error-exitcode 9 ./test_cuda_ring -tc="chunked: bf16*"
t racecheck_fwd2 timeout 40 $CS --tool racecheck --error-exitcode 9 ./test_cuda_ring -tc="chunked: GLA*"
t racecheck_bwd timeout 60 $CS --tool racecheck --error-exitcode 9 ./test_cuda_backward_ring -tc="chunked backward (bf16)*"
t ncu timeout 60 $NCU --clock-control none --section SpeedOfLight --section Occupancy --section SchedulerStats -k regex:"chunk_(intra|kstate|scan|output|rscan|bwd|dg)" -c 14 ./bench_cuda_ring --suite=train --tmin=32768 --tmax=32768 --Ns=4 --strategies=varlen --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0
cd $OUT && tar czf r.tgz r && rm -rf r
