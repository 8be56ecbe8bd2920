#!/bin/bash
# session 19 call 5: call 4's racecheck reported one hazard (8 accesses) in build 4's Sided chunk_bwd_dqkg_kernel between
# step 4's row-offset store and its load, across the block barrier. Racecheck of builds 2 and 4 on the SSE case alone,
# twice each, with every hazard reported.
R=$OUT/r; mkdir -p $R; D=/tmp/s19; mkdir -p $D/2 $D/4
for b in 2 4; do tar xzf .dev-lead/s19_tcb$b.tgz -C $D/$b; done
export LINSTATE_FIXTURES=$PWD/.fixtures
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for i in 1 2; do for b in 2 4; do
  timeout 60 $CS --tool racecheck --racecheck-report all --print-limit 20 $D/$b/test_cuda_backward "-tc=chunked backward (bf16): SSE*" > $R/race_${b}$i.txt 2>&1; echo "rc=$?" >> $R/race_${b}$i.txt
  echo "$b$i $(date +%s) $(grep -c Race $R/race_${b}$i.txt) $(grep SUMMARY $R/race_${b}$i.txt)" >> $R/summary.txt
done; done
cd $R && tar czf $OUT/logs.tgz *; cp summary.txt $OUT/; rm -rf $R
