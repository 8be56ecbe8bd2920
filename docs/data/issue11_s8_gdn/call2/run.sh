#!/bin/bash
# Issue 11, session 8, device call 2 (gated delta rule backward). Run from the repository root with
# .dev-gdn carried; binaries built on the 2-core VM (-Dbuildtype=release -Dnative=false, static cudart):
# main/ = main at 69761bf (bench_cuda), b1/ = branch s8-gdn at dbde68c (the reverse scan on tensor cores;
# bench_cuda), b2/ = b1 + the states of the backward's recomputation on tensor cores
# (delta_tc_hstate_kernel) + the blocked forward substitution in delta_prep_kernel (bench_cuda,
# test_cuda, test_cuda_backward); fixtures/ = ../shared/fixtures.
#  1. the branch's (b2) test_cuda and test_cuda_backward, whole;
#  2. memcheck and racecheck of b2's delta-rule cases (forward and backward);
#  3. bench_cuda of main, b1 and b2 alternated twice (the issue's command);
#  4. ncu of one GDN forward + backward at T = 32768 (b2).
D=$PWD/.dev-gdn
export LINSTATE_FIXTURES=$D/fixtures
export PATH=$PATH:/usr/local/cuda/bin
S=$OUT/summary.txt
T0=$(date +%s)
t() { local name=$1; shift; if [ $(( $(date +%s) - T0 )) -gt ${LIMIT:-200} ]; then echo "$name skipped (time)" | tee -a $S; return; fi; local s=$(date +%s.%N); "$@" > $OUT/$name.txt 2>&1; local rc=$?; echo "$name rc=$rc $(python3 -c "print(round($(date +%s.%N)-$s,1))")s" | tee -a $S; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > $S
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
M=$D/main
B=$D/b2
t tests bash -c "timeout 40 $B/test_cuda; echo test_cuda rc=\$?; timeout 60 $B/test_cuda_backward; echo test_cuda_backward rc=\$?"
t sanitizers bash -c "timeout 50 $CS --tool memcheck --error-exitcode 9 $B/test_cuda_backward -tc='*delta*'; echo memcheck_bwd_delta rc=\$?; timeout 40 $CS --tool racecheck --error-exitcode 9 $B/test_cuda_backward -tc='*bf16 inputs on tensor cores*'; echo racecheck_bwd_tc rc=\$?; timeout 40 $CS --tool racecheck --error-exitcode 9 $B/test_cuda_backward -tc='*in the WY form*'; echo racecheck_bwd_wy rc=\$?; timeout 40 $CS --tool memcheck --error-exitcode 9 $B/test_cuda -tc='*delta*'; echo memcheck_fwd_delta rc=\$?; timeout 40 $CS --tool racecheck --error-exitcode 9 $B/test_cuda -tc='*delta*'; echo racecheck_fwd_delta rc=\$?"
BA="--suite=prefill,train --delta --Ns=0 --strategies=varlen --recurrent-tmax=0 --tmin=8192 --tmax=32768 --deadline=60"
for i in 1 2; do
  for v in main b1 b2; do
    t bench_${v}_$i $D/$v/bench_cuda $BA --out=$OUT/b.csv
    { echo "## $v run $i"; cat $OUT/b.csv; } >> $OUT/bench_all.csv; { echo "## $v run $i"; cat $OUT/bench_${v}_$i.txt; } >> $OUT/bench_all.txt; rm -f $OUT/b.csv $OUT/bench_${v}_$i.txt
  done
done
N="--suite=train --delta --Ns=0 --strategies=varlen --recurrent-tmax=0 --tmin=32768 --tmax=32768 --reps=1 --min-reps=1 --warmup=0"
t ncu timeout 30 $NCU --clock-control none --section SpeedOfLight --section Occupancy --section WarpStateStats -k regex:"delta" -c 7 $B/bench_cuda $N
cat $S
