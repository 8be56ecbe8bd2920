#!/bin/bash
# session 23 call 10: the landed code (build F = 7bf9dfb's CUDA, the same kernels as bbe92c5): test_cuda,
# test_cuda_backward, memcheck and racecheck of the delta-rule and chunked backward cases; train rows of
# build 0 (d3cae32) and F alternated twice.
R=$OUT/r; mkdir -p $R; D=/tmp/s23; for b in b0 bF; do mkdir -p $D/$b; tar xzf .dev-lead/s23_$b.tgz -C $D/$b; done
export LINSTATE_FIXTURES=$PWD/.fixtures
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }
timeout 90 $D/bF/test_cuda > $R/test_cuda.txt 2>&1; echo "rc=$?" >> $R/test_cuda.txt; ts test_cuda
timeout 120 $D/bF/test_cuda_backward -tce="timing*" > $R/tcb.txt 2>&1; echo "rc=$?" >> $R/tcb.txt; ts tcb
P="--suite=train --tmin=8192 --tmax=65536 --Ns=0 --delta --strategies=varlen --recurrent-tmax=0 --deadline=40"
for i in 1 2; do
  for b in b0 bF; do timeout 80 $D/$b/bench_cuda $P --out=$R/t_${b}$i.csv > $R/t_${b}$i.txt 2>&1; ts "t_$b$i rc=$?"; done
done
T="-tc=*gated delta rule*,*delta*,*8 and 16 warps*,*side by side*,*subsets*"
timeout 150 $CS --tool memcheck $D/bF/test_cuda_backward "$T" > $R/memcheck.txt 2>&1; echo "rc=$?" >> $R/memcheck.txt; ts memcheck
timeout 150 $CS --tool racecheck --racecheck-report all $D/bF/test_cuda_backward "-tc=*gated delta rule*,*8 and 16 warps*" > $R/racecheck.txt 2>&1; echo "rc=$?" >> $R/racecheck.txt; ts racecheck
cd $R && (grep -h "MESSAGE" tcb.txt | grep -i gdn | sed "s/.*MESSAGE: //"; tail -n 4 test_cuda.txt tcb.txt memcheck.txt racecheck.txt; cat times.txt) > summary.txt 2>&1
tar czf $OUT/logs.tgz *; cp summary.txt $OUT/; rm -rf $R
