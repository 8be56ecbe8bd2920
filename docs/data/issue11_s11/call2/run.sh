#!/bin/bash
# device call 2 (session 11): tests, sanitizers, pieces sweep (GLA forced, delta tapered), A/B default vs main
R=$OUT/r; mkdir -p $R; B=.dev-lead
export R B
nvidia-smi > $R/smi.txt 2>&1
timeout 570 bash -c '
$B/new/test_cuda > $R/test_cuda.txt 2>&1; echo "rc=$?" >> $R/test_cuda.txt
LINSTATE_FIXTURES=$PWD/.fixtures $B/new/test_cuda_backward > $R/test_cuda_backward.txt 2>&1; echo "rc=$?" >> $R/test_cuda_backward.txt
timeout 90 compute-sanitizer --tool memcheck $B/new/test_cuda -tc="*pipelined*" > $R/memcheck_pieces.txt 2>&1
timeout 90 compute-sanitizer --tool racecheck $B/new/test_cuda -tc="*pipelined in pieces*" > $R/racecheck_pieces.txt 2>&1
timeout 60 compute-sanitizer --tool synccheck $B/new/test_cuda -tc="*pipelined in pieces*" > $R/synccheck_pieces.txt 2>&1
timeout 90 compute-sanitizer --tool memcheck $B/new/test_cuda_backward -tc="chunked backward: gated delta rule*" > $R/memcheck_bwd_gdn.txt 2>&1
CUDA_LAUNCH_BLOCKING=1 timeout 60 $B/new/test_cuda -tc="*pipelined*" > $R/launch_blocking_pieces.txt 2>&1
A="--suite=prefill,train --tmin=4096 --tmax=65536 --Ns=4 --strategies=varlen --recurrent-tmax=0 --delta --deadline=100"
for run in 1 2; do
  $B/base/bench_cuda $A --out=$R/base_$run.csv > $R/base_$run.txt 2>&1
  $B/new/bench_cuda $A --out=$R/new_$run.csv > $R/new_$run.txt 2>&1
done
for P in 1 2 3 4 5 6 8 -3 -4 -5 -6; do
  $B/new/bench_cuda --suite=prefill --tmin=4096 --tmax=65536 --Ns=4 --strategies=varlen --recurrent-tmax=0 --delta --deadline=60 --pieces=$P --out=$R/sweep_$P.csv > $R/sweep_$P.txt 2>&1
done
'
echo "rc_all=$?" > $R/done.txt
cd $OUT && tar czf r.tgz r && rm -rf r
