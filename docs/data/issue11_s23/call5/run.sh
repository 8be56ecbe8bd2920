#!/bin/bash
# session 23 call 5: where build 4's racecheck hazards are (SASS of delta_tc_hstate_kernel<bf16, 8>
# around the reported offsets), one tensor-core case at a time under racecheck.
R=$OUT/r; mkdir -p $R; D=/tmp/s23; mkdir -p $D/b4; tar xzf .dev-lead/s23_b4.tgz -C $D/b4
export LINSTATE_FIXTURES=$PWD/.fixtures
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
OBJ=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
$OBJ -sass $D/b4/test_cuda_backward > $R/all.sass 2>&1
awk '/Function : .*delta_tc_hstate_kernel.*Li8E/{f=1} f&&/Function : /&&!/delta_tc_hstate_kernel.*Li8E/{f=0} f' $R/all.sass > $R/hstate8.sass
rm $R/all.sass
timeout 120 $CS --tool racecheck --racecheck-report all --print-limit 20 $D/b4/test_cuda_backward "-tc=*inputs on tensor cores*" -s > $R/race_tc.txt 2>&1
cd $R && tar czf $OUT/logs.tgz *; rm -rf $R
