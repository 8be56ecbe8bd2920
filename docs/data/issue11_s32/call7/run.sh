#!/bin/bash
# session 32 call 7: the same-call table with main as it ends the session (4ed5ac3, build fin: every merge of the
# session and the piece steps), its GLA / SSE / GDN rows before and after fla main's chunk_gla /
# chunk_gated_delta_rule and the SSE authors' varlen strategy (cached autotune results). Carry .dev-s32, .fla.
# Output: logs7.tgz, summary7.txt. Tables: python3 docs/data/issue11_s32/tables.py DIR fin fin
R=$OUT/r; mkdir -p $R; D=/tmp/s32; CAP=${CAP:-230}
left() { [ $SECONDS -lt $((CAP - $1)) ]; }
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }
mkdir -p $D/fin && tar xf .dev-s32/fin.txz -C $D/fin; M=$D/fin
nvidia-smi > $R/smi.txt 2>&1; nvidia-smi -q -d CLOCK >> $R/smi.txt 2>&1
mkdir -p /tmp/tc_main /tmp/tc_varlen && tar xzf .fla/tc/tc_main_autotune.tgz -C /tmp/tc_main && tar xzf .fla/tc/tc_varlen_autotune.tgz -C /tmp/tc_varlen
P="--suite=prefill,train --tmin=8192 --tmax=65536 --strategies=varlen --recurrent-tmax=0 --deadline=30"
timeout 40 $M/bench_cuda $P --Ns=0 --delta --out=$R/gdn_fin1.csv > $R/gdn_fin1.txt 2>&1; ts "gdn1 rc=$?"
timeout 60 $M/bench_cuda $P --Ns=4,8,16 --out=$R/gla1.csv > $R/gla1.txt 2>&1; ts "gla1 rc=$?"
(cd .fla/peer && FLA_VENDOR=$PWD FLA_CACHE_RESULTS=1 TRITON_CACHE_DIR=/tmp/tc_varlen timeout 60 python3 bench_fla.py --out $R/peer_varlen.json --suite varlen@4,8,16 --Ts 8192,16384,32768,65536 --tune varlen4 --deadline 55 > $R/peer_varlen.log 2>&1); ts "peer rc=$?"
FLA_VENDOR=.fla/fla_main OPS=gla,gdn TS=8192,16384,32768,65536 OUTJSON=$R/fla_main.json FLA_CACHE_RESULTS=1 TRITON_CACHE_DIR=/tmp/tc_main DEADLINE=100 timeout 110 python3 .fla/bench_fla_main.py > $R/fla_main.txt 2>&1; ts "fla rc=$?"
left 25 && { timeout 40 $M/bench_cuda $P --Ns=0 --delta --out=$R/gdn_fin2.csv > $R/gdn_fin2.txt 2>&1; ts "gdn2 rc=$?"; }
left 50 && { timeout 60 $M/bench_cuda $P --Ns=4,8,16 --out=$R/gla2.csv > $R/gla2.txt 2>&1; ts "gla2 rc=$?"; }
(cd $R; grep "NVIDIA" smi.txt | head -2; grep -h "^train *gdn\|^prefill *gdn" gdn_fin1.txt; tail -3 fla_main.txt peer_varlen.log; cat times.txt) > $R/summary7.txt 2>&1
cd $R && tar czf $OUT/logs7.tgz * && cp summary7.txt $OUT/
