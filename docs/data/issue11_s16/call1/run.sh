#!/bin/bash
# session 16 call 1 (issue 11 item 7): ncu of every kernel of one train call at T = 32768 (GLA, SSE n4k1s varlen, GDN,
# SSE-GDN n4k1s), kernel durations of GLA and SSE n4k1s train at T = 65536, fla main's GDN forward at T = 4K…64K from the
# cached tuning beside ours (before and after it). Binaries: main ce0858f's build (the chunk kernels are main's).
R=$OUT/r; mkdir -p $R; B=.dev-lead/s15; mkdir -p $B; tar xzf .dev-lead/s15_bin1.tgz -C $B
export R B
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }; export -f ts
nvidia-smi > $R/smi.txt 2>&1
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1); export NCU
mkdir -p /tmp/tc_main && tar xzf .fla/tc/tc_main_autotune.tgz -C /tmp/tc_main
timeout 420 bash -c '
ts start
T1="--suite=train --tmin=32768 --tmax=32768 --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush"
timeout 130 $NCU --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats -c 400 --csv --page details $B/f/bench_cuda $T1 --Ns=4 --strategies=varlen --delta > $R/ncu_train32k.csv 2> $R/ncu_train32k.err; ts ncu32k
gzip -9 $R/ncu_train32k.csv
T2="--suite=train --tmin=65536 --tmax=65536 --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush"
timeout 60 $NCU --clock-control none --metrics gpu__time_duration.sum -c 600 --csv --page raw $B/f/bench_cuda $T2 --Ns=4 --strategies=varlen > $R/ncu_time64k.csv 2> $R/ncu_time64k.err; ts ncu64k
timeout 40 $NCU --clock-control none --metrics gpu__time_duration.sum -c 600 --csv --page raw $B/f/bench_cuda $T1 --Ns=4 --strategies=varlen > $R/ncu_time32k.csv 2> $R/ncu_time32k.err; ts ncu32kt
gzip -9 $R/ncu_time64k.csv $R/ncu_time32k.csv
A="--suite=prefill --tmin=4096 --tmax=65536 --Ns=0 --strategies=varlen --recurrent-tmax=0 --delta --deadline=20"
$B/f/bench_cuda $A --out=$R/bench_ours_1.csv > $R/bench_ours.1.txt 2>&1; ts ours1
FLA_VENDOR=.fla/fla_main OPS=gdn TS=4096,8192,16384,32768,65536 OUTJSON=$R/fla_main_gdn.json FLA_CACHE_RESULTS=1 TRITON_CACHE_DIR=/tmp/tc_main DEADLINE=85 timeout 90 python3 .fla/bench_fla_main.py > $R/fla_gdn.txt 2>&1; ts fla
$B/f/bench_cuda $A --out=$R/bench_ours_2.csv > $R/bench_ours.2.txt 2>&1; ts ours2
'
echo "rc_all=$?" > $R/done.txt
cd $OUT && tar czf r.tgz r && rm -rf r
