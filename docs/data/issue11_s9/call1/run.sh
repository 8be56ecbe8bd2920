#!/bin/bash
# Session 9, device call 1 (issue 11, GLA family backward): s9-lead (bf16 H_c/D_c copies, cp.async staging,
# batched dg) — GPU tests + sanitizers; bench_cuda main vs lead alternated twice; ncu of the backward kernels.
cd "$(dirname "$0")"; D=$PWD
export LINSTATE_FIXTURES=$D/fixtures
export PATH=$PATH:/usr/local/cuda/bin
mkdir -p $OUT/r; R=$OUT/r; S=$R/summary.txt
T0=$(date +%s)
t() { local name=$1; shift; if [ $(( $(date +%s) - T0 )) -gt ${LIMIT:-200} ]; then echo "$name skipped (time)" | tee -a $S; return; fi; local s=$(date +%s.%N); "$@" > $R/$name.txt 2>&1; local rc=$?; echo "$name rc=$rc $(python3 -c "print(round($(date +%s.%N)-$s,1))")s" | tee -a $S; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > $S
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
t test_cuda_backward timeout 120 ./test_cuda_backward_lead
B="--suite=prefill,train --tmin=8192 --tmax=65536 --Ns=4 --strategies=varlen --recurrent-tmax=0 --deadline=100"
for r in 1 2; do for v in main lead; do t bench_${v}_$r ./bench_cuda_$v $B --out=$R/bench_${v}_$r.csv; cat $R/bench_${v}_$r.txt >> $R/bench_all.txt; done; done
t memcheck_bwd timeout 60 $CS --tool memcheck --error-exitcode 9 ./test_cuda_backward_lead -tc="chunked backward*"
t racecheck_bwd timeout 45 $CS --tool racecheck --error-exitcode 9 ./test_cuda_backward_lead -tc="chunked backward (bf16)*"
NB="--suite=train --tmin=32768 --tmax=32768 --Ns=0 --strategies=varlen --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0"
for v in main lead; do t ncu_$v timeout 40 $NCU --clock-control none --section SpeedOfLight -k regex:"chunk_" -c 16 ./bench_cuda_$v $NB; done
t ncu_dqk timeout 60 $NCU --clock-control none --set full --import-source yes -o $R/dqk -k regex:"chunk_bwd_dqk" -c 1 ./bench_cuda_lead $NB
t ncu_dqk_details timeout 30 $NCU -i $R/dqk.ncu-rep --page details --print-details all
t ncu_dqk_source timeout 30 $NCU -i $R/dqk.ncu-rep --page source --csv --print-source cuda,sass
t ncu_dqk_source2 timeout 30 $NCU -i $R/dqk.ncu-rep --page source --csv --print-source cuda
cd $OUT && tar czf r.tgz r && rm -rf r
