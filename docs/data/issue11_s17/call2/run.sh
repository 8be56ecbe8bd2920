#!/bin/bash
# session 17 call 2: A = landed main b0c2adb (s16_binS3 bench_cuda); N = this tree (s17_bin2: 7566181's decode routing over
# registers + chunk_bwd_dqkg_kernel's Sided instance without its spill). Tests, memcheck; A/N alternated twice on the
# prefill and train rows; the peers (SSE authors' varlen, fla main chunk_gla and chunk_gated_delta_rule) between the rounds;
# our GDN / SSE-GDN and mask rows; decode experiments (GLA on the split kernel at B = 1..8, the streamed kernel's variant).
R=$OUT/r; mkdir -p $R; D=/tmp/s17; mkdir -p $D/A $D/N
tar xzf .dev-lead/s16_binS3.tgz -C $D/A; tar xzf .dev-lead/s17_bin2.tgz -C $D/N
export LINSTATE_FIXTURES=$PWD/.fixtures
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
export R D CS
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }; export -f ts
nvidia-smi > $R/smi.txt 2>&1
mkdir -p /tmp/tc_main /tmp/tc_varlen && tar xzf .fla/tc/tc_main_autotune.tgz -C /tmp/tc_main && tar xzf .fla/tc/tc_varlen_autotune.tgz -C /tmp/tc_varlen
timeout 570 bash -c '
ts start
timeout 45 $D/N/test_cuda_backward > $R/N_test_cuda_backward.txt 2>&1; echo "rc=$?" >> $R/N_test_cuda_backward.txt; ts test_bwd
P="--suite=prefill,train --tmin=8192 --tmax=65536 --Ns=4,8,16 --strategies=varlen --recurrent-tmax=0 --deadline=15"
for i in 1 2; do
  for b in A N; do timeout 40 $D/$b/bench_cuda $P --out=$R/pt_${b}$i.csv > $R/pt_${b}$i.txt 2>&1; ts pt_$b$i; done
  if [ $i = 1 ]; then
    (cd .fla/peer && OUT=$R FLA_VENDOR=$PWD FLA_CACHE_RESULTS=1 TRITON_CACHE_DIR=/tmp/tc_varlen timeout 150 python3 bench_fla.py --out $R/peer_varlen.json --suite varlen@4,8,16 --Ts 8192,16384,32768,65536 --tune varlen4 --deadline 140 > $R/peer_varlen.log 2>&1); ts peer
    FLA_VENDOR=.fla/fla_main OPS=gla,gdn TS=4096,8192,16384,32768,65536 OUTJSON=$R/fla_main.json FLA_CACHE_RESULTS=1 TRITON_CACHE_DIR=/tmp/tc_main DEADLINE=110 timeout 120 python3 .fla/bench_fla_main.py > $R/fla_main.txt 2>&1; ts fla
  fi
done
timeout 40 $D/N/bench_cuda --suite=prefill,train --tmin=4096 --tmax=65536 --Ns=4 --strategies=varlen --recurrent-tmax=0 --delta --deadline=15 --out=$R/gdn_N.csv > $R/gdn_N.txt 2>&1; ts gdn
timeout 40 $D/N/bench_cuda --suite=train --tmin=8192 --tmax=65536 --Ns=4,8,16 --strategies=mask --recurrent-tmax=0 --deadline=15 --out=$R/mask_N.csv > $R/mask_N.txt 2>&1; ts mask
Q="--suite=decode --Ns=4 --batch=1,2,4,8"
for i in 1 2; do
  for pth in split fused; do timeout 20 $D/N/bench_cuda $Q --decode-path=$pth --out=$R/dec_${pth}$i.csv > $R/dec_${pth}$i.txt 2>&1; ts dec_$pth$i; done
done
for v in 0 1 2; do timeout 20 $D/N/bench_cuda --suite=decode --Ns=8,16 --batch=16,128 --decode-variant=$v --out=$R/dec_var$v.csv > $R/dec_var$v.txt 2>&1; ts dec_var$v; done
timeout 70 $CS --tool memcheck $D/N/test_cuda_backward "-tc=*chunked backward (bf16): SSE*,*subsets*,*non-finite*" > $R/memcheck.txt 2>&1; echo "rc=$?" >> $R/memcheck.txt; ts memcheck
timeout 50 $CS --tool racecheck $D/N/test_cuda_backward "-tc=*chunked backward (bf16): SSE*,*subsets*" > $R/racecheck.txt 2>&1; echo "rc=$?" >> $R/racecheck.txt; ts racecheck
'
echo "rc_all=$?" > $R/done.txt
cd $R && tail -n 3 N_test_cuda_backward.txt memcheck.txt racecheck.txt > summary.txt 2>&1; cat times.txt >> summary.txt
cd $OUT && tar czf r.tgz r && cp r/summary.txt . && rm -rf r
