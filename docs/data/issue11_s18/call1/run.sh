#!/bin/bash
# session 18 call 1: the review mends (router.cuh's route_in_warp with one lambda body for NC > 0 and NC = 0;
# test_cuda_backward.cu's bf16_call): every GPU test, memcheck and racecheck on the decode/router cases.
R=$OUT/r; mkdir -p $R; D=/tmp/s18; mkdir -p $D
tar xzf .dev-lead/s18_bin.tgz -C $D
export LINSTATE_FIXTURES=$PWD/.fixtures
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
export R D CS
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }; export -f ts
timeout 300 bash -c '
ts start
timeout 40 $D/test_cuda > $R/test_cuda.txt 2>&1; echo "rc=$?" >> $R/test_cuda.txt; ts test_cuda
timeout 150 $D/test_cuda_backward -tce="timing*" > $R/test_cuda_backward.txt 2>&1; echo "rc=$?" >> $R/test_cuda_backward.txt; ts test_cuda_backward
timeout 45 $CS --tool memcheck $D/test_cuda "-tc=*decode*,non-finite*,*router*" > $R/memcheck.txt 2>&1; echo "rc=$?" >> $R/memcheck.txt; ts memcheck
timeout 45 $CS --tool racecheck $D/test_cuda "-tc=decode step: N fixed*,decode step: unselected*,*router_params*" > $R/racecheck.txt 2>&1; echo "rc=$?" >> $R/racecheck.txt; ts racecheck
'
echo "rc_all=$?" > $R/done.txt
cd $R && tail -n 3 test_cuda.txt test_cuda_backward.txt memcheck.txt racecheck.txt > summary.txt 2>&1; cat times.txt >> summary.txt
cd $OUT && cp -r r/. . && rm -rf r
