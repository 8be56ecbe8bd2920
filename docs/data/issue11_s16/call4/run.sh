#!/bin/bash
# session 16 call 4: S2 = s16-sse with chunk_bwd_dqkg_kernel's Sided instance (the one-partition instance is the merged
# main's code again); M = main after the merge of s16-bwd (call 3's). Tests, memcheck, M/S2 alternated (the peers ran in call 3).
R=$OUT/r; mkdir -p $R; D=/tmp/s16; mkdir -p $D/M $D/S2
tar xzf .dev-lead/s16_binM.tgz -C $D/M; tar xzf .dev-lead/s16_binS2.tgz -C $D/S2
export LINSTATE_FIXTURES=$PWD/.fixtures
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
export R D CS
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }; export -f ts
nvidia-smi > $R/smi.txt 2>&1
mkdir -p /tmp/tc_main /tmp/tc_varlen && tar xzf .fla/tc/tc_main_autotune.tgz -C /tmp/tc_main && tar xzf .fla/tc/tc_varlen_autotune.tgz -C /tmp/tc_varlen
timeout 200 bash -c '
ts start
timeout 40 $D/S2/test_cuda_backward > $R/S2_test_cuda_backward.txt 2>&1; echo "rc=$?" >> $R/S2_test_cuda_backward.txt; ts test_bwd
P="--suite=prefill,train --tmin=8192 --tmax=65536 --Ns=4,8,16 --strategies=varlen --recurrent-tmax=0 --deadline=15"
for i in 1 2; do
  for b in M S2; do timeout 40 $D/$b/bench_cuda $P --out=$R/pt_${b}$i.csv > $R/pt_${b}$i.txt 2>&1; ts pt_$b$i; done
done
timeout 60 $CS --tool memcheck $D/S2/test_cuda_backward "-tc=*chunked backward (bf16)*,*subsets*,*non-finite*" > $R/memcheck.txt 2>&1; echo "rc=$?" >> $R/memcheck.txt; ts memcheck
'
echo "rc_all=$?" > $R/done.txt
cd $R && tail -n 3 S2_test_cuda_backward.txt memcheck.txt > summary.txt 2>&1; cat times.txt >> summary.txt
cd $OUT && tar czf r.tgz r && cp r/summary.txt . && rm -rf r
