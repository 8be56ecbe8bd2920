#!/bin/bash
# session 15 call 2: ncu of the GLA and GDN rows at T = 32768; the SSE tables beside the SSE authors' code (fla 4fc9d3e6, varlen strategy, autotuned on varlen
# in this call; its autotune results kept); ncu of the SSE rows at T = 32768
R=$OUT/r; mkdir -p $R; B=.dev-lead/s15; mkdir -p $B; tar xzf .dev-lead/s15_bin1.tgz -C $B
export R B
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }; export -f ts
nvidia-smi > $R/smi.txt 2>&1
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1); export NCU
timeout 585 bash -c '
ts start
A="--suite=copy,prefill,train --tmin=4096 --tmax=65536 --Ns=4,8,16 --strategies=varlen,mask --recurrent-tmax=0 --deadline=70"
$B/f/bench_cuda $A --out=$R/bench_ours_1.csv > $R/bench_ours.1.txt 2>&1; ts ours1
cd .fla/peer && OUT=$R FLA_VENDOR=$PWD FLA_CACHE_RESULTS=1 TRITON_CACHE_DIR=/tmp/tc_varlen timeout 400 python3 bench_fla.py --out $R/peer_varlen.json --suite varlen@4,8,16 --Ts 4096,8192,16384,32768,65536 --tune varlen4 --deadline 380 > $R/peer_varlen.log 2>&1; cd - >/dev/null; ts peer
(cd /tmp/tc_varlen && find . -name "*.autotune.json" | tar czf $R/tc_varlen_autotune.tgz -T -)
timeout 70 $NCU --clock-control none --section SpeedOfLight --section ComputeWorkloadAnalysis --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis -c 60 --csv --page details $B/f/bench_cuda --suite=prefill,train --tmin=32768 --tmax=32768 --Ns=0 --recurrent-tmax=0 --delta --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush > $R/ncu_gla_gdn.csv 2> $R/ncu_gla_gdn.err; ts ncu1
timeout 60 $NCU --clock-control none --section SpeedOfLight --section ComputeWorkloadAnalysis --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis -c 40 --csv --page details $B/f/bench_cuda --suite=prefill,train --tmin=32768 --tmax=32768 --Ns=4 --strategies=varlen --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush > $R/ncu_sse.csv 2> $R/ncu_sse.err; ts ncu
'
echo "rc_all=$?" > $R/done.txt
cd $OUT && tar czf r.tgz r && rm -rf r
