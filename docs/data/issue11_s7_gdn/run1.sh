#!/bin/bash
# NOTE: this call ran out of its 200 s while building test_cuda_backward on the GPU machine (the
# build alone took longer than the call): nothing was measured. run2.sh is the call whose output is here.
# Issue 11, session 7, device call 1 (gated delta rule backward). Run from the repository root with
# .dev-gdn carried: src-main/ = `git archive` of main (d2431a9), src-b/ = of the branch (03b24ab
# split-bf16 products + c3f10b7 8- or 16-column sequential tiles: the two change disjoint kernels, so
# ncu's per-kernel times attribute each), fixtures/ = ../shared/fixtures. (The 2-core VM was too
# loaded to build both there in time.)
#  0. build main and the branch on the GPU machine (16 cores);
#  1. memcheck of main's delta-rule test cases (forward and backward suites);
#  2. the branch's GPU suites (test_cuda, test_cuda_backward), whole;
#  3. bench_cuda of main and the branch alternated twice (the issue's command);
#  4. ncu SpeedOfLight of one GDN forward + backward at T = 32768 (branch, main);
#  5. memcheck and racecheck of the branch's delta-rule cases (as far as the time allows).
D=$PWD/.dev-gdn
export LINSTATE_FIXTURES=$D/fixtures
export PATH=$PATH:/usr/local/cuda/bin
S=$OUT/summary.txt
T0=$(date +%s)
t() { local name=$1; shift; if [ $(( $(date +%s) - T0 )) -gt ${LIMIT:-180} ]; then echo "$name skipped (time)" | tee -a $S; return; fi; local s=$(date +%s.%N); "$@" > $OUT/$name.txt 2>&1; local rc=$?; echo "$name rc=$rc $(python3 -c "print(round($(date +%s.%N)-$s,1))")s" | tee -a $S; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > $S
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
TG="cuda/test_cuda cuda/test_cuda_backward cuda/bench_cuda"
O="-Dcuda=enabled -Dbench=true -Dexamples=false -Dmqar=false -Dnative=false"
t build bash -c "meson setup /tmp/bm $D/src-main $O > /dev/null && meson setup /tmp/bb $D/src-b $O > /dev/null && { ninja -C /tmp/bm -j8 $TG > /tmp/bm.log 2>&1 & ninja -C /tmp/bb -j8 $TG; r=\$?; wait \$!; echo bb=\$r bm=\$?; tail -2 /tmp/bm.log; }"
M=/tmp/bm/cuda; B=/tmp/bb/cuda
t memcheck_main bash -c "timeout 35 $CS --tool memcheck --error-exitcode 9 $M/test_cuda -tc='*delta*'; echo memcheck_main_fwd rc=\$?; timeout 35 $CS --tool memcheck --error-exitcode 9 $M/test_cuda_backward -tc='*delta*'; echo memcheck_main_bwd rc=\$?"
t tests bash -c "timeout 30 $B/test_cuda; echo test_cuda rc=\$?; timeout 45 $B/test_cuda_backward; echo test_cuda_backward rc=\$?"
BA="--suite=prefill,train --delta --Ns=0 --strategies=varlen --recurrent-tmax=0 --tmin=8192 --tmax=32768 --deadline=60"
for i in 1 2; do
  for v in main b; do
    bin=$B/bench_cuda; [ $v = main ] && bin=$M/bench_cuda
    t bench_${v}_$i $bin $BA --out=$OUT/b.csv
    { echo "## $v run $i"; cat $OUT/b.csv; } >> $OUT/bench_all.csv; { echo "## $v run $i"; cat $OUT/bench_${v}_$i.txt; } >> $OUT/bench_all.txt; rm -f $OUT/b.csv $OUT/bench_${v}_$i.txt
  done
done
N="--suite=train --delta --Ns=0 --strategies=varlen --recurrent-tmax=0 --tmin=32768 --tmax=32768 --reps=1 --min-reps=1 --warmup=0"
t ncu timeout 25 $NCU --clock-control none --section SpeedOfLight --section Occupancy --section WarpStateStats -k regex:"delta" -c 7 $B/bench_cuda $N
t ncu_main timeout 20 $NCU --clock-control none --section SpeedOfLight -k regex:"delta" -c 7 $M/bench_cuda $N
cat $OUT/ncu_main.txt >> $OUT/ncu.txt 2>/dev/null; rm -f $OUT/ncu_main.txt
t sanitizers bash -c "timeout 30 $CS --tool memcheck --error-exitcode 9 $B/test_cuda_backward -tc='*delta*'; echo memcheck_bwd rc=\$?; timeout 25 $CS --tool racecheck --error-exitcode 9 $B/test_cuda_backward -tc='*bf16 inputs on tensor cores, every*'; echo racecheck_bwd_bf16 rc=\$?; timeout 20 $CS --tool memcheck --error-exitcode 9 $B/test_cuda -tc='*delta*'; echo memcheck_fwd rc=\$?"
cat $S
