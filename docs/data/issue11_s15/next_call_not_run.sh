#!/bin/bash
# session 15 call 4 (if device time is left): ncu of every kernel of one train call (forward + backward) at
# T = 32768 for GLA, SSE n4k1s varlen, GDN and SSE-GDN n4k1s; fla main's GDN forward at every T with the
# autotune results cached in call 1
R=$OUT/r; mkdir -p $R; B=.dev-lead/s15; mkdir -p $B; tar xzf .dev-lead/s15_bin1.tgz -C $B
export R B
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }; export -f ts
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1); export NCU
mkdir -p /tmp/tc_main && tar xzf .fla/tc/tc_main_autotune.tgz -C /tmp/tc_main
timeout 195 bash -c '
ts start
timeout 80 $NCU --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats -c 400 --csv --page details $B/f/bench_cuda --suite=train --tmin=32768 --tmax=32768 --Ns=4 --strategies=varlen --recurrent-tmax=0 --delta --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush > $R/ncu_train.csv 2> $R/ncu_train.err; ts ncu
gzip -9 $R/ncu_train.csv
A="--suite=prefill --tmin=4096 --tmax=65536 --Ns=0 --strategies=varlen --recurrent-tmax=0 --delta --deadline=20"
$B/f/bench_cuda $A --out=$R/bench_ours_1.csv > $R/bench_ours.1.txt 2>&1
FLA_VENDOR=.fla/fla_main OPS=gdn TS=4096,8192,16384,32768,65536 OUTJSON=$R/fla_main_gdn.json FLA_CACHE_RESULTS=1 TRITON_CACHE_DIR=/tmp/tc_main DEADLINE=85 timeout 90 python3 .fla/bench_fla_main.py > $R/fla_gdn.txt 2>&1; ts fla
$B/f/bench_cuda $A --out=$R/bench_ours_2.csv > $R/bench_ours.2.txt 2>&1; ts ours
'
echo "rc_all=$?" > $R/done.txt
cd $OUT && tar czf r.tgz r && rm -rf r
