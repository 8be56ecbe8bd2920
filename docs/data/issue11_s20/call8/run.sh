#!/bin/bash
# session 20 call 8 (review mends: cp_async16 / ldsm_x4_trans shared with the chain kernel, one update body
# in its hand-off, the tests' misaligned copies in gpu_support.cuh): every GPU test of build 8, memcheck and
# racecheck of the chain cases, and the prefill / train rows of build 8 against build 7 (8ddba1a) alternated
# twice (the adjoint chain's SASS changed: one select instead of two copies of the update).
R=$OUT/r; mkdir -p $R; D=/tmp/s20; mkdir -p $D/b7 $D/b8
tar xzf .dev-lead/s20_b7.tgz -C $D/b7; tar xzf .dev-lead/s20_b8.tgz -C $D/b8
export LINSTATE_FIXTURES=$PWD/.fixtures
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
export R D CS
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }; export -f ts
timeout 400 bash -c '
ts start
timeout 60 $D/b8/test_cuda > $R/test_cuda.txt 2>&1; echo "rc=$?" >> $R/test_cuda.txt; ts test_cuda
timeout 90 $D/b8/test_cuda_backward -tce="timing*" > $R/tcb.txt 2>&1; echo "rc=$?" >> $R/tcb.txt; ts tcb
P="--suite=prefill,train --tmin=8192 --tmax=65536 --Ns=4,16 --strategies=varlen --recurrent-tmax=0 --deadline=20"
for i in 1 2; do
  for b in b7 b8; do timeout 60 $D/$b/bench_cuda $P --out=$R/t_${b}$i.csv > $R/t_${b}$i.txt 2>&1; ts "t_$b$i rc=$?"; done
done
timeout 90 $CS --tool memcheck $D/b8/test_cuda "-tc=*chunk_chain_kernel*" > $R/memcheck_f.txt 2>&1; echo "rc=$?" >> $R/memcheck_f.txt; ts memcheck_f
timeout 90 $CS --tool memcheck $D/b8/test_cuda_backward "-tc=*chunk_chain_kernel*" > $R/memcheck_b.txt 2>&1; echo "rc=$?" >> $R/memcheck_b.txt; ts memcheck_b
timeout 60 $CS --tool racecheck --racecheck-report all $D/b8/test_cuda_backward "-tc=*chunk_chain_kernel*" > $R/racecheck_b.txt 2>&1; echo "rc=$?" >> $R/racecheck_b.txt; ts racecheck_b
'
echo "rc_all=$?" > $R/done.txt
cd $R && tail -n 4 test_cuda.txt tcb.txt memcheck_f.txt memcheck_b.txt racecheck_b.txt > summary.txt 2>&1; cat times.txt >> summary.txt
tar czf $OUT/logs.tgz *; cp summary.txt $OUT/; rm -rf $R
