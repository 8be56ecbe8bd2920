#!/bin/bash
# session 14 call 4: fla main's chunk_gla at T = 32768 (autotuned in this call) between two runs of the
# integrated build (keeping, the default train rows) and main (bcd9d81)
R=$OUT/r; mkdir -p $R; B=.dev-lead/s14; mkdir -p $B; tar xzf .dev-lead/s14_bin3.tgz -C $B
export R B
nvidia-smi > $R/smi.txt 2>&1
timeout 580 bash -c '
A="--suite=prefill,train --tmin=32768 --tmax=32768 --Ns=4 --strategies=varlen --recurrent-tmax=0 --deadline=40"
$B/i/bench_cuda $A > $R/bench_saved.1.txt 2>&1
$B/main/bench_cuda $A > $R/bench_main.1.txt 2>&1
FLA_VENDOR=.fla/fla_main OPS=gla TS=32768 OUTJSON=$R/fla_main.json FLA_CACHE_RESULTS=0 TRITON_CACHE_DIR=/tmp/tc DEADLINE=420 timeout 470 python3 .fla/bench_fla_main.py > $R/fla.txt 2>&1
$B/main/bench_cuda $A > $R/bench_main.2.txt 2>&1
$B/i/bench_cuda $A > $R/bench_saved.2.txt 2>&1
'
echo "rc_all=$?" > $R/done.txt
cd $OUT && tar czf r.tgz r && rm -rf r
