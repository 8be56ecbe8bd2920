#!/bin/bash
# Device call 1 (issue 11, gated delta rule): GPU tests and sanitizers of the final code, bench_cuda of
# three builds alternated twice — before (b9c060d), tc (the bf16 tensor-core forward), after (tc + the
# exact sequential kernels' cp.async staging) — and ncu SpeedOfLight/Occupancy of one GDN forward +
# backward at T = 32768 for before and after. Run from the repository root, build-hB-dev and
# build-dev4/fixtures carried.
D=$PWD/build-hB-dev
export LINSTATE_FIXTURES=$PWD/build-dev4/fixtures
export PATH=$PATH:/usr/local/cuda/bin
S=$OUT/summary.txt
T0=$(date +%s)
t() { local name=$1; shift; if [ $(( $(date +%s) - T0 )) -gt ${LIMIT:-480} ]; then echo "$name skipped (time)" | tee -a $S; return; fi; local s=$(date +%s.%N); "$@" > $OUT/$name.txt 2>&1; local rc=$?; echo "$name rc=$rc $(python3 -c "print(round($(date +%s.%N)-$s,1))")s" | tee -a $S; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > $S
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
t tests timeout 150 bash -c "$D/test_cuda; echo test_cuda rc=\$?; $D/test_cuda_backward; echo test_cuda_backward rc=\$?"
B="--suite=prefill,train --delta --Ns=0 --strategies=varlen --recurrent-tmax=0 --tmin=8192 --tmax=32768 --deadline=60"
for i in 1 2; do
  for v in before tc after; do
    bin=$D/bench_cuda_$v; [ $v = after ] && bin=$D/bench_cuda
    t bench_${v}_$i $bin $B --out=$OUT/b.csv; cat $OUT/b.csv >> $OUT/bench_all.csv; cat $OUT/bench_${v}_$i.txt >> $OUT/bench_all.txt; rm -f $OUT/b.csv $OUT/bench_${v}_$i.txt
  done
done
t sanitizers bash -c "timeout 60 $CS --tool memcheck --error-exitcode 9 $D/test_cuda -tc='*delta*'; echo memcheck_fwd rc=\$?; timeout 60 $CS --tool memcheck --error-exitcode 9 $D/test_cuda_backward -tc='*delta*'; echo memcheck_bwd rc=\$?; timeout 90 $CS --tool racecheck --error-exitcode 9 $D/test_cuda -tc='*tensor cores, against*'; echo racecheck_fwd rc=\$?; timeout 90 $CS --tool racecheck --error-exitcode 9 $D/test_cuda_backward -tc='*gated delta rule in the WY*'; echo racecheck_bwd rc=\$?"
N="--suite=train --delta --Ns=0 --strategies=varlen --recurrent-tmax=0 --tmin=32768 --tmax=32768 --reps=1 --min-reps=1 --warmup=0"
t ncu_before timeout 60 $NCU --clock-control none --section SpeedOfLight --section Occupancy -k regex:"delta" -c 7 $D/bench_cuda_before $N
t ncu_after timeout 60 $NCU --clock-control none --section SpeedOfLight --section Occupancy -k regex:"delta" -c 7 $D/bench_cuda $N
cat $OUT/ncu_after.txt >> $OUT/ncu_before.txt; mv $OUT/ncu_before.txt $OUT/ncu.txt; rm -f $OUT/ncu_after.txt
ls $OUT
