#!/bin/bash
# device call 4 (session 11): racecheck of the pipelined test to the end; GDN forward against fla main at 32768/65536
R=$OUT/r; mkdir -p $R; B=.dev-lead
export R B
timeout 570 bash -c '
A="--suite=prefill --tmin=32768 --tmax=65536 --Ns=0 --strategies=varlen --recurrent-tmax=0 --delta --deadline=60"
$B/base/bench_cuda $A --out=$R/base_1.csv > $R/base_1.txt 2>&1
$B/new/bench_cuda $A --out=$R/new_1.csv > $R/new_1.txt 2>&1
FLA_VENDOR=.fla/fla_main OPS=gdn TS=32768,65536 OUTJSON=$R/fla_main.json FLA_CACHE_RESULTS=0 TRITON_CACHE_DIR=/tmp/tc DEADLINE=150 timeout 170 python3 .fla/bench_fla_main.py > $R/fla.txt 2>&1
$B/base/bench_cuda $A --out=$R/base_2.csv > $R/base_2.txt 2>&1
$B/new/bench_cuda $A --out=$R/new_2.csv > $R/new_2.txt 2>&1
timeout 330 compute-sanitizer --tool racecheck $B/new/test_cuda -tc="*pipelined in pieces*" > $R/racecheck_pieces.txt 2>&1
'
echo "rc_all=$?" > $R/done.txt
cd $OUT && tar czf r.tgz r && rm -rf r
