#!/bin/bash
# session 15 call 1: the review's mend (GPU tests, memcheck of saved_states); the GLA and GDN tables beside fla main
# (bc3b101d, autotuned in this call; its autotune results kept for later calls); the decode helper's build
# (s15-dec: its own .dev-dec/run.sh, output under $OUT/dec)
R=$OUT/r; mkdir -p $R; B=.dev-lead/s15; mkdir -p $B; tar xzf .dev-lead/s15_bin1.tgz -C $B
export R B LINSTATE_FIXTURES=$PWD/.fixtures
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }; export -f ts
nvidia-smi > $R/smi.txt 2>&1
timeout 590 bash -c '
ts start
$B/f/test_cuda_backward > $R/test_cuda_backward.txt 2>&1; echo rc=$? >> $R/test_cuda_backward.txt; ts bwd
$B/f/test_cuda > $R/test_cuda.txt 2>&1; echo rc=$? >> $R/test_cuda.txt; ts fwd
$B/f/test_cuda_layers > $R/test_cuda_layers.txt 2>&1; echo rc=$? >> $R/test_cuda_layers.txt; ts layers
timeout 60 compute-sanitizer --tool memcheck $B/f/test_cuda_backward -tc="saved_states*" > $R/memcheck_saved.txt 2>&1; ts memcheck
A="--suite=copy,prefill,train --tmin=4096 --tmax=65536 --Ns=0 --recurrent-tmax=0 --delta --deadline=60"
$B/f/bench_cuda $A --out=$R/bench_ours_1.csv > $R/bench_ours.1.txt 2>&1; ts ours1
mkdir -p $OUT/dec; OUT=$OUT/dec timeout 160 bash .dev-dec/run.sh > $OUT/dec/stdout.txt 2>&1; ts dec
FLA_VENDOR=.fla/fla_main OPS=gla,gdn TS=4096,8192,16384,32768,65536 OUTJSON=$R/fla_main.json FLA_CACHE_RESULTS=1 TRITON_CACHE_DIR=/tmp/tc_main DEADLINE=300 timeout 330 python3 .fla/bench_fla_main.py > $R/fla.txt 2>&1; ts fla
(cd /tmp/tc_main && find . -name "*.autotune.json" | tar czf $R/tc_main_autotune.tgz -T -); du -sh /tmp/tc_main > $R/tc_size.txt 2>&1
$B/f/bench_cuda $A --out=$R/bench_ours_2.csv > $R/bench_ours.2.txt 2>&1; ts ours2
'
echo "rc_all=$?" > $R/done.txt
cd $OUT && tar czf r.tgz r && rm -rf r
