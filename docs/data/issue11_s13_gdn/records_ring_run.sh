#!/bin/bash
# session 13 (GDN backward) call 3 (short; the session's device budget is low): s1 = faf7d1c (8-warp scans), new = the
# records ring + copies issued right after (A): bench alternated, bit hashes against d98c184, delta tests, test_cuda, sanitizers
R=$OUT/r; mkdir -p $R; D=.dev-gdn
cd $D && tar xzf b.tgz && cd ..
export LINSTATE_FIXTURES=$PWD/.fixtures
BA="--suite=train --tmin=32768 --tmax=32768 --Ns=4 --strategies=varlen --recurrent-tmax=0 --delta --deadline=30"
for run in 1 2; do
  for b in s1 new; do timeout 30 $D/$b/bench_cuda $BA --out=$R/${b}_$run.csv > $R/${b}_$run.txt 2>&1; done
done
( timeout 20 $D/bits_base > $R/bits_base.txt 2>&1; timeout 20 $D/bits_new > $R/bits_new.txt 2>&1; diff $R/bits_base.txt $R/bits_new.txt > $R/bits_diff.txt 2>&1; echo "diff_rc=$?" >> $R/bits_diff.txt )
( timeout 45 compute-sanitizer --tool memcheck $D/new/test_cuda_backward -tc='*bf16 inputs on tensor cores*,*8 and 16 warps*' > $R/memcheck.txt 2>&1; echo "rc=$?" >> $R/memcheck.txt ) &
( timeout 45 compute-sanitizer --tool racecheck $D/new/test_cuda_backward -tc='*8 and 16 warps*' > $R/racecheck.txt 2>&1; echo "rc=$?" >> $R/racecheck.txt ) &
( timeout 45 $D/new/test_cuda_backward -tc='*delta*' > $R/test_bwd_delta.txt 2>&1; echo "rc=$?" >> $R/test_bwd_delta.txt ) &
( timeout 45 $D/new/test_cuda > $R/test_cuda.txt 2>&1; echo "rc=$?" >> $R/test_cuda.txt ) &
wait
for b in s1 new; do for run in 1 2; do grep -H "train    gdn\|train    sse_gdn" $R/${b}_$run.txt; done; done
tail -1 $R/bits_diff.txt; tail -3 $R/test_bwd_delta.txt $R/test_cuda.txt
grep -h "ERROR SUMMARY\|RACECHECK SUMMARY\|rc=" $R/memcheck.txt $R/racecheck.txt
cd $OUT && tar czf r.tgz r && rm -rf r
