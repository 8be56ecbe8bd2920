#!/bin/bash
# s16-bwd call 1 (issue 11): direct stores of one-slot gradients (GLA bf16 chunked backward, the delta rule's).
# Binaries: new = this branch's build (build-bwd: bench_cuda, test_cuda, test_cuda_backward; bits_s16 against
# this tree); base = main's build (bench_cuda of /work/main/.dev-lead/s15_bin1.tgz, ce0858f; the chunked kernels
# are main's d039d82) and bits_s16 built against d039d82's headers.
R=$OUT/r; mkdir -p $R
D=.dev-bwd; mkdir -p $D/new $D/base
tar xzf $D/new.tgz -C $D/new; tar xzf $D/base.tgz -C $D/base
N=$D/new; B=$D/base/f
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
export R N B CS
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }; export -f ts
nvidia-smi > $R/smi.txt 2>&1
mkdir -p /tmp/tc_main && tar xzf .fla/tc/tc_main_autotune.tgz -C /tmp/tc_main
timeout 288 bash -c '
ts start
timeout 30 $N/test_cuda_backward > $R/test_cuda_backward.txt 2>&1; echo "rc=$?" >> $R/test_cuda_backward.txt; ts test_bwd
timeout 30 $N/test_cuda > $R/test_cuda.txt 2>&1; echo "rc=$?" >> $R/test_cuda.txt; ts test_cuda
timeout 15 $N/bits_new > $R/bits_new.txt 2>&1; timeout 15 $B/bits_base > $R/bits_base.txt 2>&1; ts bits
timeout 60 $CS --tool memcheck $N/test_cuda_backward "-tc=*chunked backward (bf16)*,*subsets*" > $R/memcheck.txt 2>&1; echo "rc=$?" >> $R/memcheck.txt; ts memcheck
A="--suite=train --tmin=8192 --tmax=65536 --Ns=0 --recurrent-tmax=0 --delta --deadline=20"
timeout 30 $B/bench_cuda $A --out=$R/base_1.csv > $R/base_1.txt 2>&1; ts base1
timeout 30 $N/bench_cuda $A --out=$R/new_1.csv > $R/new_1.txt 2>&1; ts new1
FLA_VENDOR=.fla/fla_main OPS=gla TS=8192,16384,32768,65536 OUTJSON=$R/fla_main_gla.json FLA_CACHE_RESULTS=1 TRITON_CACHE_DIR=/tmp/tc_main DEADLINE=60 timeout 70 python3 .fla/bench_fla_main.py > $R/fla_gla.txt 2>&1; ts fla
timeout 30 $B/bench_cuda $A --out=$R/base_2.csv > $R/base_2.txt 2>&1; ts base2
timeout 30 $N/bench_cuda $A --out=$R/new_2.csv > $R/new_2.txt 2>&1; ts new2
timeout 60 $CS --tool racecheck $N/test_cuda_backward "-tc=*chunked backward (bf16)*" > $R/racecheck.txt 2>&1; echo "rc=$?" >> $R/racecheck.txt; ts racecheck
'
echo "rc_all=$?" > $R/done.txt
cd $OUT && tar czf r.tgz r && rm -rf r
