#!/bin/bash
# Issue 11, session 7, device call 2 (gated delta rule backward). Run from the repository root with
# .dev-gdn carried, the binaries built on the 2-core VM (-Dbuildtype=release -Dnative=false, static
# cudart): main/ = main at d2431a9 (bench_cuda, test_cuda_backward if it was ready), b/ = branch s7-gdn-ts8 (03b24ab
# split-bf16 products + c3f10b7 8- or 16-column sequential tiles: the two change disjoint kernels, so
# ncu's per-kernel times attribute each; test_cuda, test_cuda_backward, bench_cuda); fixtures/ =
# ../shared/fixtures. (Call 1 built both on the GPU machine and ran out of its 200 s in the build.)
#  1. memcheck of main's delta-rule backward cases (they run delta_state_kernel<float> and
#     delta_rscan_kernel with the cp.async staging of 251fb26);
#  2. the branch's GPU suites (test_cuda, test_cuda_backward), whole;
#  3. bench_cuda of main and the branch alternated twice (the issue's command);
#  4. ncu of one GDN forward + backward at T = 32768 (branch);
#  5. memcheck and racecheck of the branch's delta-rule cases;
#  6. ncu of main (as 4), if the time allows.
D=$PWD/.dev-gdn
export LINSTATE_FIXTURES=$D/fixtures
export PATH=$PATH:/usr/local/cuda/bin
S=$OUT/summary.txt
T0=$(date +%s)
t() { local name=$1; shift; if [ $(( $(date +%s) - T0 )) -gt ${LIMIT:-150} ]; then echo "$name skipped (time)" | tee -a $S; return; fi; local s=$(date +%s.%N); "$@" > $OUT/$name.txt 2>&1; local rc=$?; echo "$name rc=$rc $(python3 -c "print(round($(date +%s.%N)-$s,1))")s" | tee -a $S; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > $S
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
M=$D/main; B=$D/b
# (main's test_cuda_backward: its nvcc object built here, linked with the branch's object of the
# unchanged cpu_reference_backward.cpp; without it, memcheck runs main's bench_cuda: a bf16 GDN forward
# + backward at T = 1024, which runs the same exact backward kernels in their bf16 instantiation)
t memcheck_main bash -c "if [ -x $M/test_cuda_backward ]; then timeout 40 $CS --tool memcheck --error-exitcode 9 $M/test_cuda_backward -tc='*delta*'; echo memcheck_main_bwd rc=\$?; else timeout 30 $CS --tool memcheck --error-exitcode 9 $M/bench_cuda --suite=train --delta --Ns=0 --strategies=varlen --recurrent-tmax=0 --tmin=1024 --tmax=1024 --reps=1 --min-reps=1 --warmup=0; echo memcheck_main_bench rc=\$?; fi"
t tests bash -c "timeout 30 $B/test_cuda; echo test_cuda rc=\$?; timeout 45 $B/test_cuda_backward; echo test_cuda_backward rc=\$?"
BA="--suite=prefill,train --delta --Ns=0 --strategies=varlen --recurrent-tmax=0 --tmin=8192 --tmax=32768 --deadline=60"
for i in 1 2; do
  for v in main b; do
    t bench_${v}_$i $D/$v/bench_cuda $BA --out=$OUT/b.csv
    { echo "## $v run $i"; cat $OUT/b.csv; } >> $OUT/bench_all.csv; { echo "## $v run $i"; cat $OUT/bench_${v}_$i.txt; } >> $OUT/bench_all.txt; rm -f $OUT/b.csv $OUT/bench_${v}_$i.txt
  done
done
N="--suite=train --delta --Ns=0 --strategies=varlen --recurrent-tmax=0 --tmin=32768 --tmax=32768 --reps=1 --min-reps=1 --warmup=0"
t ncu timeout 25 $NCU --clock-control none --section SpeedOfLight --section Occupancy --section WarpStateStats -k regex:"delta" -c 7 $B/bench_cuda $N
t sanitizers bash -c "timeout 40 $CS --tool memcheck --error-exitcode 9 $B/test_cuda_backward -tc='*delta*'; echo memcheck_bwd rc=\$?; timeout 30 $CS --tool racecheck --error-exitcode 9 $B/test_cuda_backward -tc='*bf16 inputs on tensor cores, every*'; echo racecheck_bwd_bf16 rc=\$?"
t ncu_main timeout 20 $NCU --clock-control none --section SpeedOfLight -k regex:"delta" -c 7 $M/bench_cuda $N
cat $OUT/ncu_main.txt >> $OUT/ncu.txt 2>/dev/null; rm -f $OUT/ncu_main.txt
cat $S
