#!/bin/bash
# device call 1 (session 11): backward forks + delta forward pieces, A/B against main, tests, sanitizers
R=$OUT/r; mkdir -p $R; B=.dev-lead
export R B
nvidia-smi > $R/smi.txt 2>&1
timeout 560 bash -c '
$B/new/test_cuda > $R/test_cuda.txt 2>&1; echo "rc=$?" >> $R/test_cuda.txt
LINSTATE_FIXTURES=$PWD/.fixtures $B/new/test_cuda_backward > $R/test_cuda_backward.txt 2>&1; echo "rc=$?" >> $R/test_cuda_backward.txt
timeout 60 compute-sanitizer --tool memcheck $B/new/test_cuda -tc="*pipelined*" > $R/memcheck_pieces.txt 2>&1
timeout 60 compute-sanitizer --tool memcheck $B/new/test_cuda_backward -tc="chunked backward: gated delta rule? bf16*" > $R/memcheck_bwd_gdn.txt 2>&1
A="--suite=prefill,train --tmin=16384 --tmax=32768 --Ns=4 --strategies=varlen --recurrent-tmax=0 --delta --deadline=50"
for run in 1 2; do
  $B/base/bench_cuda $A --out=$R/base_$run.csv > $R/base_$run.txt 2>&1
  $B/new/bench_cuda $A --delta-pieces=1 --out=$R/new1_$run.csv > $R/new1_$run.txt 2>&1
  $B/new/bench_cuda $A --delta-pieces=4 --out=$R/new4_$run.csv > $R/new4_$run.txt 2>&1
done
for P in 2 3 6 8 12 16; do
  $B/new/bench_cuda --suite=prefill --tmin=8192 --tmax=65536 --Ns=0 --strategies=varlen --recurrent-tmax=0 --delta --deadline=30 --delta-pieces=$P --out=$R/sweep_$P.csv > $R/sweep_$P.txt 2>&1
done
'
echo "rc_all=$?" > $R/done.txt
cd $OUT && tar czf r.tgz r && rm -rf r
