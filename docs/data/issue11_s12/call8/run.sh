#!/bin/bash
# session 12 call 8 (final): the landed build (fin = 91fff64): GPU tests, sanitizers, bits; main (c497162) and fin
# alternated around fla main (bc3b101d; GLA and GDN) in the same call
R=$OUT/r; mkdir -p $R; B=.dev-lead
tar xzf $B/final.tgz -C $B
export R B
nvidia-smi > $R/smi.txt 2>&1
$B/fin/bits > $R/bits_fin.txt 2>&1
timeout 580 bash -c '
$B/fin/test_cuda > $R/test_cuda.txt 2>&1; echo "rc=$?" >> $R/test_cuda.txt
LINSTATE_FIXTURES=$PWD/.fixtures $B/fin/test_cuda_backward > $R/test_cuda_backward.txt 2>&1; echo "rc=$?" >> $R/test_cuda_backward.txt
timeout 100 compute-sanitizer --tool memcheck $B/fin/test_cuda -tc="chunked*" > $R/memcheck_chunked.txt 2>&1
timeout 100 compute-sanitizer --tool racecheck $B/fin/test_cuda -tc="chunked: bf16*,chunked: GLA*" > $R/racecheck_chunked.txt 2>&1
timeout 60 compute-sanitizer --tool racecheck $B/fin/test_cuda_backward -tc="chunked backward (bf16)*" > $R/racecheck_bwd.txt 2>&1
timeout 60 compute-sanitizer --tool memcheck $B/fin/test_cuda_backward -tc="chunked backward (bf16)*" > $R/memcheck_bwd.txt 2>&1
CUDA_LAUNCH_BLOCKING=1 timeout 60 $B/fin/test_cuda -tc="chunked: bf16*" > $R/launch_blocking.txt 2>&1
A="--suite=prefill,train --tmin=4096 --tmax=65536 --Ns=4,8,16 --strategies=varlen --recurrent-tmax=0 --delta --deadline=100"
$B/new/bench_cuda $A --out=$R/main_1.csv > $R/bench_main.1.txt 2>&1
$B/fin/bench_cuda $A --out=$R/fin_1.csv > $R/bench_fin.1.txt 2>&1
FLA_VENDOR=.fla/fla_main OPS=gla,gdn TS=4096,8192,16384,32768,65536 OUTJSON=$R/fla_main.json FLA_CACHE_RESULTS=0 TRITON_CACHE_DIR=/tmp/tc DEADLINE=300 timeout 330 python3 .fla/bench_fla_main.py > $R/fla.txt 2>&1
$B/fin/bench_cuda $A --out=$R/fin_2.csv > $R/bench_fin.2.txt 2>&1
$B/new/bench_cuda $A --out=$R/main_2.csv > $R/bench_main.2.txt 2>&1
'
echo "rc_all=$?" > $R/done.txt
cd $OUT && tar czf r.tgz r && rm -rf r
