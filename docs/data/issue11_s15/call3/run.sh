#!/bin/bash
# session 15 call 3: the SSE authors' varlen strategy (fla 4fc9d3e6), its autotuning resumed from the results that
# call 2 cached before its timeout (FLA_CACHE_RESULTS=1), between two runs of our SSE rows
R=$OUT/r; mkdir -p $R; B=.dev-lead/s15; mkdir -p $B; tar xzf .dev-lead/s15_bin1.tgz -C $B
export R B
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }; export -f ts
nvidia-smi > $R/smi.txt 2>&1
mkdir -p /tmp/tc_varlen && tar xzf .fla/tc/tc_varlen_autotune.tgz -C /tmp/tc_varlen
timeout 370 bash -c '
ts start
A="--suite=copy,prefill,train --tmin=4096 --tmax=65536 --Ns=4,8,16 --strategies=varlen,mask --recurrent-tmax=0 --deadline=70"
$B/f/bench_cuda $A --out=$R/bench_ours_1.csv > $R/bench_ours.1.txt 2>&1; ts ours1
cd .fla/peer && FLA_VENDOR=$PWD FLA_CACHE_RESULTS=1 TRITON_CACHE_DIR=/tmp/tc_varlen timeout 300 python3 bench_fla.py --out $R/peer_varlen.json --suite varlen@4,8,16 --Ts 32768,8192,16384,65536,4096 --tune varlen4 --deadline 285 > $R/peer_varlen.log 2>&1; cd - >/dev/null; ts peer
(cd /tmp/tc_varlen && find . -name "*.autotune.json" | tar czf $R/tc_varlen_autotune.tgz -T -)
$B/f/bench_cuda $A --out=$R/bench_ours_2.csv > $R/bench_ours.2.txt 2>&1; ts ours2
'
echo "rc_all=$?" > $R/done.txt
cd $OUT && tar czf r.tgz r && rm -rf r
