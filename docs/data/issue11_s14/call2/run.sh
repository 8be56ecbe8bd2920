#!/bin/bash
# session 14 call 2: fla main's chunk_gla (autotuned in this call) beside the branch s14-lead keeping
# (saved_states, the default train rows) and recomputing (--saved-states=0), and main (bcd9d81):
# prefill and train, GLA and SSE n4k1s, T = 8192 … 65536, alternated (saved rec main | fla | main rec saved); the branch's test_cuda_layers
R=$OUT/r; mkdir -p $R; B=.dev-lead/s14; mkdir -p $B; tar xzf .dev-lead/s14_bin.tgz -C $B
export R B LINSTATE_FIXTURES=$PWD/.fixtures
nvidia-smi > $R/smi.txt 2>&1
timeout 590 bash -c '
$B/n/test_cuda_layers > $R/n_test_cuda_layers.txt 2>&1; echo rc=$? >> $R/n_test_cuda_layers.txt
A="--suite=prefill,train --tmin=8192 --tmax=65536 --Ns=4 --strategies=varlen --recurrent-tmax=0 --deadline=40"
$B/n/bench_cuda $A > $R/bench_saved.1.txt 2>&1
$B/n/bench_cuda $A --saved-states=0 > $R/bench_rec.1.txt 2>&1
$B/main/bench_cuda $A > $R/bench_main.1.txt 2>&1
FLA_VENDOR=.fla/fla_main OPS=gla TS=8192,16384,32768,65536 OUTJSON=$R/fla_main.json FLA_CACHE_RESULTS=0 TRITON_CACHE_DIR=/tmp/tc DEADLINE=225 timeout 245 python3 .fla/bench_fla_main.py > $R/fla.txt 2>&1
$B/main/bench_cuda $A > $R/bench_main.2.txt 2>&1
$B/n/bench_cuda $A --saved-states=0 > $R/bench_rec.2.txt 2>&1
$B/n/bench_cuda $A > $R/bench_saved.2.txt 2>&1
'
echo "rc_all=$?" > $R/done.txt
cd $OUT && tar czf r.tgz r && rm -rf r
