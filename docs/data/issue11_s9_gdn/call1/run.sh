#!/bin/bash
# Issue 11, session 9, device call 1 (gated delta rule: the gradient kernel). Run from the repository
# root with .dev-gdn carried; binaries built on the 2-core VM (-Dbuildtype=release -Dnative=false):
# main/ = main at bf316a0 (bench_cuda); ba/ = s9-gdn ce7573a (the gradient kernel's staging: float4 loads, the
# next slab in flight while the current one is multiplied; 8 warps); b1/ = 39490da, ba + 16 warps per block
# (bench_cuda, test_cuda_backward); b2/ = 484edf0, b1 + the WY
# prep kernel at two blocks per SM (bench_cuda only: its tests come in call 2; li/bench_cuda = b2 built
# with -lineinfo for ncu); b3/ = 16464ee, b2 + the gradient kernel: dB_U from dVn tiles staged in shared memory,
# −dB_W = dB_U Sᵀ (one staged product instead of two), row sums read from a rotated start (bench_cuda only);
# fixtures/ = ../shared/fixtures.
#  1. b1's test_cuda_backward, whole;  2. bench_cuda main / ba / b1 / b2 / b3 alternated twice (the issue's command);
#  3. memcheck and racecheck of b1's delta-rule backward cases;  4. ncu of b2 (li): delta_prep_kernel and delta_grad_kernel
#     (T = 32768, one GDN forward + backward), details and the per-instruction source view.
D=$PWD/.dev-gdn
export LINSTATE_FIXTURES=$D/fixtures
export PATH=$PATH:/usr/local/cuda/bin
S=$OUT/summary.txt
T0=$(date +%s)
t() { local name=$1; shift; if [ $(( $(date +%s) - T0 )) -gt ${LIMIT:-200} ]; then echo "$name skipped (time)" | tee -a $S; return; fi; local s=$(date +%s.%N); "$@" > $OUT/$name.txt 2>&1; local rc=$?; echo "$name rc=$rc $(python3 -c "print(round($(date +%s.%N)-$s,1))")s" | tee -a $S; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > $S
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
B=$D/b1
t tests bash -c "timeout 60 $B/test_cuda_backward; echo test_cuda_backward rc=\$?"
BA="--suite=prefill,train --delta --Ns=0 --strategies=varlen --recurrent-tmax=0 --tmin=8192 --tmax=32768 --deadline=60"
for i in 1 2; do
  for v in main ba b1 b2 b3; do
    t bench_${v}_$i $D/$v/bench_cuda $BA --out=$OUT/b.csv
    { echo "## $v run $i"; cat $OUT/b.csv; } >> $OUT/bench_all.csv; { echo "## $v run $i"; cat $OUT/bench_${v}_$i.txt; } >> $OUT/bench_all.txt; rm -f $OUT/b.csv $OUT/bench_${v}_$i.txt
  done
done
t memcheck bash -c "timeout 60 $CS --tool memcheck --error-exitcode 9 $B/test_cuda_backward -tc='*delta*'; echo memcheck_bwd_delta rc=\$?"
t racecheck bash -c "timeout 40 $CS --tool racecheck --error-exitcode 9 $B/test_cuda_backward -tc='*bf16 inputs on tensor cores*'; echo racecheck_bwd_tc rc=\$?"
N="--suite=train --delta --Ns=0 --strategies=varlen --recurrent-tmax=0 --tmin=32768 --tmax=32768 --reps=1 --min-reps=1 --warmup=0"
ncu_run() {
  timeout 50 $NCU --clock-control none --import-source yes --section SpeedOfLight --section Occupancy --section WarpStateStats \
    --section SchedulerStats --section SourceCounters --section MemoryWorkloadAnalysis -k 'regex:delta_prep_kernel|delta_grad' -c 2 \
    -o $OUT/grad $D/li/bench_cuda $N
  $NCU -i $OUT/grad.ncu-rep --page details
  $NCU -i $OUT/grad.ncu-rep --page source --csv --print-source cuda,sass > $OUT/src.csv 2> $OUT/src_err.txt || \
    $NCU -i $OUT/grad.ncu-rep --page source --csv --print-source sass > $OUT/src.csv 2>> $OUT/src_err.txt
  echo "src rc=$?"; ls -la $OUT
}
t ncu ncu_run
cd $OUT && gzip -f src.csv 2>/dev/null; rm -f grad.ncu-rep; cat src_err.txt >> ncu.txt 2>/dev/null; rm -f src_err.txt; cd - >/dev/null
t racecheck_wy bash -c "timeout 40 $CS --tool racecheck --error-exitcode 9 $B/test_cuda_backward -tc='*in the WY form*'; echo racecheck_bwd_wy rc=\$?"
cat $S
cd $OUT && tar czf call1.tgz --remove-files $(ls | grep -v call1.tgz) && ls -la $OUT
