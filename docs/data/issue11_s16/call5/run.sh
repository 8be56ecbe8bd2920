#!/bin/bash
# session 16 call 5: S3 = s16-sse as landed (call 4's S2 with the Sided instance taken for every direct store of a call
# with a shared partition). Tests, memcheck, our SSE and GLA training rows around the SSE authors' varlen (cached tuning).
R=$OUT/r; mkdir -p $R; D=/tmp/s16; mkdir -p $D/S3
tar xzf .dev-lead/s16_binS3.tgz -C $D/S3
export LINSTATE_FIXTURES=$PWD/.fixtures
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
export R D CS
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }; export -f ts
nvidia-smi > $R/smi.txt 2>&1
mkdir -p /tmp/tc_varlen && tar xzf .fla/tc/tc_varlen_autotune.tgz -C /tmp/tc_varlen
timeout 150 bash -c '
ts start
timeout 40 $D/S3/test_cuda_backward > $R/S3_test_cuda_backward.txt 2>&1; echo "rc=$?" >> $R/S3_test_cuda_backward.txt; ts test_bwd
P="--suite=train --tmin=8192 --tmax=65536 --Ns=4,8,16 --strategies=varlen --recurrent-tmax=0 --deadline=15"
timeout 30 $D/S3/bench_cuda $P --out=$R/pt_S31.csv > $R/pt_S31.txt 2>&1; ts pt_S31
(cd .fla/peer && OUT=$R FLA_VENDOR=$PWD FLA_CACHE_RESULTS=1 TRITON_CACHE_DIR=/tmp/tc_varlen timeout 65 python3 bench_fla.py --out $R/peer_varlen.json --suite varlen@4,8,16 --Ts 32768,65536 --tune varlen4 --deadline 60 > $R/peer_varlen.log 2>&1); ts peer
timeout 30 $D/S3/bench_cuda $P --out=$R/pt_S32.csv > $R/pt_S32.txt 2>&1; ts pt_S32
timeout 40 $CS --tool memcheck $D/S3/test_cuda_backward "-tc=*subsets*,*non-finite*,*chunked backward (bf16): SSE*" > $R/memcheck.txt 2>&1; echo "rc=$?" >> $R/memcheck.txt; ts memcheck
'
echo "rc_all=$?" > $R/done.txt
cd $R && tail -n 3 S3_test_cuda_backward.txt memcheck.txt > summary.txt 2>&1; cat times.txt >> summary.txt
cd $OUT && tar czf r.tgz r && cp r/summary.txt . && rm -rf r
