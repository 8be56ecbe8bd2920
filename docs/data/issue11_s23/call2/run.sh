#!/bin/bash
# session 23 call 2: call 1's tests (printed ratios) and timing rows again (call 1's files past the
# count limit did not come back): builds 0, 1, 2 alternated twice, build 2 at 16 warps per scan block.
R=$OUT/r; mkdir -p $R; D=/tmp/s23; for b in b0 b1 b2; do mkdir -p $D/$b; tar xzf .dev-lead/s23_$b.tgz -C $D/$b; done
export LINSTATE_FIXTURES=$PWD/.fixtures
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }
for b in b1 b2; do timeout 90 $D/$b/test_cuda_backward -tc="*inputs on tensor cores*" > $R/tc_$b.txt 2>&1; echo "rc=$?" >> $R/tc_$b.txt; ts tc_$b; done
P="--suite=prefill,train --tmin=8192 --tmax=65536 --Ns=0 --delta --strategies=varlen --recurrent-tmax=0 --deadline=40"
for i in 1 2; do
  for b in b0 b1 b2; do timeout 80 $D/$b/bench_cuda $P --out=$R/t_${b}$i.csv > $R/t_${b}$i.txt 2>&1; ts "t_$b$i rc=$?"; done
done
timeout 80 $D/b2/bench_cuda $P --bscan-warps=16 --out=$R/t_b2w16.csv > $R/t_b2w16.txt 2>&1; ts "t_b2w16 rc=$?"
cd $R && (for b in b1 b2; do echo "== $b"; grep -h "MESSAGE" tc_$b.txt | sed "s/.*MESSAGE: //"; tail -n 3 tc_$b.txt; done; cat times.txt) > summary.txt 2>&1
tar czf $OUT/logs.tgz *; cp summary.txt $OUT/; rm -rf $R
