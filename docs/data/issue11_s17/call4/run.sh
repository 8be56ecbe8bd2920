#!/bin/bash
# session 17 call 4: A = b0c2adb's bench_cuda; F = a2b9d00's (call 3's build); G = this tree (s17_bin4: F + router_kernel and
# router_bwd_kernel over registers when N is fixed at compile time). Tests, memcheck; F/G (and A) alternated on the training
# rows, the SSE authors' varlen between the rounds; decode rows A/F/G alternated (host rows); ncu device time at 65536.
R=$OUT/r; mkdir -p $R; D=/tmp/s17; mkdir -p $D/A $D/F $D/G
tar xzf .dev-lead/s17_A_bench.tgz -C $D/A; tar xzf .dev-lead/s17_F_bench.tgz -C $D/F; tar xzf .dev-lead/s17_bin4.tgz -C $D/G
export LINSTATE_FIXTURES=$PWD/.fixtures
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
export R D CS NCU
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }; export -f ts
nvidia-smi > $R/smi.txt 2>&1
mkdir -p /tmp/tc_varlen && tar xzf .fla/tc/tc_varlen_autotune.tgz -C /tmp/tc_varlen
timeout 420 bash -c '
ts start
timeout 60 $D/G/test_cuda > $R/G_test_cuda.txt 2>&1; echo "rc=$?" >> $R/G_test_cuda.txt; ts test_cuda
timeout 60 $D/G/test_cuda_backward > $R/G_test_cuda_backward.txt 2>&1; echo "rc=$?" >> $R/G_test_cuda_backward.txt; ts test_bwd
P="--suite=prefill,train --tmin=8192 --tmax=65536 --Ns=4,8,16 --strategies=varlen --recurrent-tmax=0 --deadline=15"
for i in 1 2; do
  for b in F G A; do timeout 40 $D/$b/bench_cuda $P --out=$R/pt_${b}$i.csv > $R/pt_${b}$i.txt 2>&1; ts pt_$b$i; done
  if [ $i = 1 ]; then
    (cd .fla/peer && OUT=$R FLA_VENDOR=$PWD FLA_CACHE_RESULTS=1 TRITON_CACHE_DIR=/tmp/tc_varlen timeout 150 python3 bench_fla.py --out $R/peer_varlen.json --suite varlen@4,8,16 --Ts 8192,16384,32768,65536 --tune varlen4 --deadline 140 > $R/peer_varlen.log 2>&1); ts peer
  fi
done
Q="--suite=decode --Ns=4 --batch=1,8,128 --deadline=0"
for i in 1 2 3; do
  for b in A F G; do timeout 20 $D/$b/bench_cuda $Q --out=$R/dec_${b}$i.csv > $R/dec_${b}$i.txt 2>&1; ts dec_$b$i; done
done
timeout 60 $CS --tool memcheck $D/G/test_cuda "-tc=*SSE*,*router*,*dynamic*" > $R/memcheck.txt 2>&1; echo "rc=$?" >> $R/memcheck.txt; ts memcheck
timeout 60 $CS --tool memcheck $D/G/test_cuda_backward "-tc=*chunked backward (bf16): SSE*,*non-finite*,*router*" > $R/memcheck_bwd.txt 2>&1; echo "rc=$?" >> $R/memcheck_bwd.txt; ts memcheck_bwd
T2="--suite=train --tmin=65536 --tmax=65536 --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --strategies=varlen"
timeout 40 $NCU --clock-control none --metrics gpu__time_duration.sum -c 600 --csv --page raw $D/G/bench_cuda $T2 --Ns=4,16 > $R/ncu_time64k.csv 2> $R/ncu_time64k.err; ts ncu64k
gzip -9 $R/ncu_time64k.csv
'
echo "rc_all=$?" > $R/done.txt
cd $R && tail -n 3 G_test_cuda.txt G_test_cuda_backward.txt memcheck.txt memcheck_bwd.txt > summary.txt 2>&1; cat times.txt >> summary.txt
cd $OUT && tar czf r.tgz r && cp r/summary.txt . && rm -rf r
