#!/bin/bash
# Issue 11, session 9, device call 2 (gated delta rule: gradient kernel and WY prep). Run from the
# repository root with .dev-gdn carried; binaries built on the 2-core VM (-Dbuildtype=release -Dnative=false):
# main/ = main at bf316a0; ba, b1, b2, b3 as in run1.sh (s9-gdn commits ce7573a, 39490da, 484edf0, 16464ee);
# b5/ = s9-gdn tip 76f8cac (b3 + fewer bank conflicts in the gradient kernel's split-bf16 fragment reads
# + the prep kernel's gathered rows by 16-byte loads): bench_cuda, test_cuda, test_cuda_backward.
#  1. b5's test_cuda and test_cuda_backward, whole;
#  2. memcheck and racecheck of b5's delta-rule cases (backward: all delta cases memcheck, the tensor-core
#     case racecheck; forward: the delta cases, memcheck and racecheck);
#  3. bench_cuda main / ba / b1 / b2 / b3 / b5 alternated twice (the issue's command);
#  4. ncu (SpeedOfLight, Occupancy, WarpStateStats) of one GDN forward + backward at T = 32768: b5, all
#     delta kernels; b3, the prep and gradient kernels;
#  5. if time is left: racecheck of the fp32 WY-form backward case (stopped at 30 s).
D=$PWD/.dev-gdn
export LINSTATE_FIXTURES=$D/fixtures
export PATH=$PATH:/usr/local/cuda/bin
S=$OUT/summary.txt
T0=$(date +%s)
t() { local name=$1; shift; if [ $(( $(date +%s) - T0 )) -gt ${LIMIT:-170} ]; then echo "$name skipped (time)" | tee -a $S; return; fi; local s=$(date +%s.%N); "$@" >> $OUT/$name.txt 2>&1; local rc=$?; echo "$name rc=$rc $(python3 -c "print(round($(date +%s.%N)-$s,1))")s" | tee -a $S; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > $S
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
B=$D/b5
t tests bash -c "timeout 40 $B/test_cuda; echo test_cuda rc=\$?; timeout 60 $B/test_cuda_backward; echo test_cuda_backward rc=\$?"
t sanitizers bash -c "timeout 40 $CS --tool memcheck --error-exitcode 9 $B/test_cuda_backward -tc='*delta*'; echo memcheck_bwd_delta rc=\$?"
t sanitizers bash -c "timeout 45 $CS --tool racecheck --error-exitcode 9 $B/test_cuda_backward -tc='*bf16 inputs on tensor cores*'; echo racecheck_bwd_tc rc=\$?"
t sanitizers bash -c "timeout 30 $CS --tool memcheck --error-exitcode 9 $B/test_cuda -tc='*delta*'; echo memcheck_fwd_delta rc=\$?"
t sanitizers bash -c "timeout 40 $CS --tool racecheck --error-exitcode 9 $B/test_cuda -tc='*delta*'; echo racecheck_fwd_delta rc=\$?"
BA="--suite=prefill,train --delta --Ns=0 --strategies=varlen --recurrent-tmax=0 --tmin=8192 --tmax=32768 --deadline=60"
for i in 1 2; do
  for v in main ba b1 b2 b3 b5; do
    LIMIT=400 t bench_${v}_$i $D/$v/bench_cuda $BA --out=$OUT/b.csv
    { echo "## $v run $i"; cat $OUT/b.csv; } >> $OUT/bench_all.csv; { echo "## $v run $i"; cat $OUT/bench_${v}_$i.txt; } >> $OUT/bench_all.txt; rm -f $OUT/b.csv $OUT/bench_${v}_$i.txt
  done
done
N="--suite=train --delta --Ns=0 --strategies=varlen --recurrent-tmax=0 --tmin=32768 --tmax=32768 --reps=1 --min-reps=1 --warmup=0"
LIMIT=400 t ncu timeout 30 $NCU --clock-control none --section SpeedOfLight --section Occupancy --section WarpStateStats -k regex:delta -c 7 $B/bench_cuda $N
LIMIT=400 t ncu_b3 timeout 25 $NCU --clock-control none --section SpeedOfLight -k 'regex:delta_prep_kernel|delta_grad' -c 2 $D/b3/bench_cuda $N
LIMIT=140 t sanitizers bash -c "timeout 30 $CS --tool racecheck --error-exitcode 9 $B/test_cuda_backward -tc='*in the WY form*'; echo racecheck_bwd_wy rc=\$?"
cat $S
cd $OUT && tar czf call2.tgz --remove-files $(ls | grep -v call2.tgz) && ls -la $OUT
