#!/bin/bash
# session 20 call 4: chunk_chain_kernel on 64 x 32 tiles of the state, eight warps (build 4) against 32 x 32
# tiles, four warps (build 3 = 0b76808): every GPU test of build 4, prefill and train rows alternated
# twice, per-kernel device time and the chain kernels' ncu sections of build 4.
R=$OUT/r; mkdir -p $R; D=/tmp/s20; mkdir -p $D/b3 $D/b4
tar xzf .dev-lead/s20_b3.tgz -C $D/b3; tar xzf .dev-lead/s20_b4.tgz -C $D/b4
export LINSTATE_FIXTURES=$PWD/.fixtures
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu | head -1)
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
export R D NCU CS
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }; export -f ts
timeout 400 bash -c '
ts start
timeout 60 $D/b4/test_cuda > $R/test_cuda.txt 2>&1; echo "rc=$?" >> $R/test_cuda.txt; ts test_cuda
timeout 90 $D/b4/test_cuda_backward -tce="timing*" > $R/tcb.txt 2>&1; echo "rc=$?" >> $R/tcb.txt; ts tcb
P="--suite=prefill,train --tmin=8192 --tmax=65536 --Ns=4,8,16 --strategies=varlen --recurrent-tmax=0 --deadline=20"
for i in 1 2; do
  for b in b3 b4; do timeout 60 $D/$b/bench_cuda $P --out=$R/t_${b}$i.csv > $R/t_${b}$i.txt 2>&1; ts "t_$b$i rc=$?"; done
done
T1="--suite=train --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=4 --strategies=varlen"
timeout 60 $NCU --clock-control none --metrics gpu__time_duration.sum -c 600 --csv --page raw $D/b4/bench_cuda $T1 --tmin=32768 --tmax=32768 > $R/ncu_time32k.csv 2> $R/ncu_time32k.err; ts ncu32k
timeout 60 $NCU --clock-control none --kernel-name regex:chunk_chain --launch-count 2 --set full --csv --page details $D/b4/bench_cuda $T1 --tmin=32768 --tmax=32768 > $R/ncu_chain.csv 2> $R/ncu_chain.err; ts ncu_chain
gzip -9 $R/ncu_time32k.csv $R/ncu_chain.csv
timeout 90 $CS --tool racecheck --racecheck-report all $D/b4/test_cuda "-tc=*chunk_chain_kernel*" > $R/racecheck_f.txt 2>&1; echo "rc=$?" >> $R/racecheck_f.txt; ts racecheck_f
'
echo "rc_all=$?" > $R/done.txt
cd $R && tail -n 4 test_cuda.txt tcb.txt racecheck_f.txt > summary.txt 2>&1; cat times.txt >> summary.txt
tar czf $OUT/logs.tgz *; cp summary.txt $OUT/; rm -rf $R
