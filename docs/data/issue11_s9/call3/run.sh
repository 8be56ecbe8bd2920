#!/bin/bash
# Session 9, device call 3: the merged main (GLA backward + delta rule + decode) — every GPU test suite,
# memcheck/racecheck of the changed paths; bench_cuda SSE/GLA rows around the SSE authors' varlen peer
# (4fc9d3e6, ../shared/peer/run_device.sh varlen) re-run in this call.
cd "$(dirname "$0")"; D=$PWD
export LINSTATE_FIXTURES=$D/fixtures
export PATH=$PATH:/usr/local/cuda/bin
R=$OUT; S=$R/summary.txt
T0=$(date +%s)
t() { local name=$1; shift; if [ $(( $(date +%s) - T0 )) -gt ${LIMIT:-520} ]; then echo "$name skipped (time)" | tee -a $S; return; fi; local s=$(date +%s.%N); "$@" >> $R/log.txt 2>&1; local rc=$?; echo "$name rc=$rc $(python3 -c "print(round($(date +%s.%N)-$s,1))")s" | tee -a $S; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > $S
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
t test_cuda timeout 120 ./test_cuda_m
t test_cuda_backward timeout 120 ./test_cuda_backward_m
t memcheck_fwd timeout 60 $CS --tool memcheck --error-exitcode 9 ./test_cuda_m -tc="*decode*"
t racecheck_fwd timeout 40 $CS --tool racecheck --error-exitcode 9 ./test_cuda_m -tc="*decode*"
t memcheck_bwd timeout 60 $CS --tool memcheck --error-exitcode 9 ./test_cuda_backward_m -tc="chunked backward*"
B="--suite=train --tmin=8192 --tmax=32768 --Ns=4,8,16 --strategies=varlen --recurrent-tmax=0 --deadline=60"
t bench_m_1 ./bench_cuda_lead $B --out=$R/bench_m_1.csv
t peer env FLA_VENDOR=$D/../.peer NS=4,8,16 TS=8192,16384,32768 DEADLINE=420 OUT=$R bash $D/../.peer/run_device.sh varlen
t bench_m_2 ./bench_cuda_lead $B --out=$R/bench_m_2.csv
