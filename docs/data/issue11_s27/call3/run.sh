#!/bin/bash
# session 27 call 3: racecheck of build dd (branch s27-grad-dedup, call 2) on the cases call 2's racecheck
# did not reach in its 100 s (the tensor-core delta-rule test, the two-block kernel's case, a partition
# never read). Carry .dev-lead and .fixtures.
R=$OUT/r; mkdir -p $R; D=/tmp/s27; mkdir -p $D/dd; tar xf .dev-lead/s27_dd.txz -C $D/dd
export LINSTATE_FIXTURES=$PWD/.fixtures
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
timeout 300 $CS --tool racecheck $D/dd/test_cuda_backward "-tc=*two blocks per SM*,*read by none*,*inputs on tensor cores*" > $R/racecheck_dd.txt 2>&1; echo "rc=$?" >> $R/racecheck_dd.txt
cd $R && tail -n 6 racecheck_dd.txt > summary.txt; grep "TEST CASE" racecheck_dd.txt | sort | uniq -c >> summary.txt
tar czf $OUT/logs.tgz *; cp summary.txt $OUT/; rm -rf $R
