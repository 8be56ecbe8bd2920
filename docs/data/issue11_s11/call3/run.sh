#!/bin/bash
# device call 3 (session 11): the landed form (GDN pipelined forward, backward passes side by side):
# tests, sanitizers, main vs new alternated around fla main (GLA and GDN) in the same call
R=$OUT/r; mkdir -p $R; B=.dev-lead
export R B
nvidia-smi > $R/smi.txt 2>&1
timeout 580 bash -c '
$B/new/test_cuda > $R/test_cuda.txt 2>&1; echo "rc=$?" >> $R/test_cuda.txt
LINSTATE_FIXTURES=$PWD/.fixtures $B/new/test_cuda_backward > $R/test_cuda_backward.txt 2>&1; echo "rc=$?" >> $R/test_cuda_backward.txt
timeout 60 compute-sanitizer --tool memcheck $B/new/test_cuda -tc="*pipelined*" > $R/memcheck_pieces.txt 2>&1
timeout 60 compute-sanitizer --tool racecheck $B/new/test_cuda -tc="*pipelined in pieces*" > $R/racecheck_pieces.txt 2>&1
timeout 40 compute-sanitizer --tool synccheck $B/new/test_cuda -tc="*pipelined in pieces*" > $R/synccheck_pieces.txt 2>&1
timeout 60 compute-sanitizer --tool memcheck $B/new/test_cuda_backward -tc="chunked backward: gated delta rule*" > $R/memcheck_bwd_gdn.txt 2>&1
CUDA_LAUNCH_BLOCKING=1 timeout 40 $B/new/test_cuda -tc="*pipelined*" > $R/launch_blocking_pieces.txt 2>&1
A="--suite=prefill,train --tmin=4096 --tmax=65536 --Ns=4 --strategies=varlen --recurrent-tmax=0 --delta --deadline=100"
$B/base/bench_cuda $A --out=$R/base_1.csv > $R/base_1.txt 2>&1
$B/new/bench_cuda $A --out=$R/new_1.csv > $R/new_1.txt 2>&1
FLA_VENDOR=.fla/fla_main OPS=gla,gdn TS=4096,8192,16384,32768,65536 OUTJSON=$R/fla_main.json FLA_CACHE_RESULTS=0 TRITON_CACHE_DIR=/tmp/tc DEADLINE=300 timeout 330 python3 .fla/bench_fla_main.py > $R/fla.txt 2>&1
$B/base/bench_cuda $A --out=$R/base_2.csv > $R/base_2.txt 2>&1
$B/new/bench_cuda $A --out=$R/new_2.csv > $R/new_2.txt 2>&1
'
echo "rc_all=$?" > $R/done.txt
cd $OUT && tar czf r.tgz r && rm -rf r
