#!/bin/bash
# session 20 call 2: chunk_chain_kernel's depth (chunks in flight per block: 6 = call 1's build, 10, 16)
# against session 19's landed build; prefill and train rows at T = 32768 and 65536 alternated twice; ncu's
# full sections of the forward and adjoint chain kernels at depths 6 and 16.
R=$OUT/r; mkdir -p $R; D=/tmp/s20; mkdir -p $D/old $D/new $D/v
tar xzf .dev-lead/s19_bench9.tgz -C $D/old; tar xzf .dev-lead/s20_b1.tgz -C $D/new; tar xzf .dev-lead/s20_v2.tgz -C $D/v
cp $D/old/bench_cuda $D/v/bench_cuda_old; cp $D/new/bench_cuda $D/v/bench_cuda_d6
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu | head -1)
export R D NCU
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }; export -f ts
timeout 540 bash -c '
ts start
P="--suite=prefill,train --tmin=32768 --tmax=65536 --Ns=4 --strategies=varlen --recurrent-tmax=0 --deadline=20"
for i in 1 2; do
  for b in old d6 d10 d16; do timeout 60 $D/v/bench_cuda_$b $P --out=$R/t_${b}$i.csv > $R/t_${b}$i.txt 2>&1; ts "t_$b$i rc=$?"; done
done
T1="--suite=train --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=4 --strategies=varlen --tmin=32768 --tmax=32768"
for b in d6 d16; do
  timeout 100 $NCU --clock-control none --kernel-name regex:chunk_chain --launch-count 2 --set full --import-source yes --csv --page details $D/v/bench_cuda_$b $T1 > $R/ncu_full_$b.csv 2> $R/ncu_full_$b.err; ts "ncu_$b rc=$?"
done
for b in d10 d16; do
  timeout 60 $NCU --clock-control none --metrics gpu__time_duration.sum -c 600 --csv --page raw $D/v/bench_cuda_$b $T1 > $R/ncu_time32k_$b.csv 2> $R/ncu_time32k_$b.err; ts "ncut_$b"
done
gzip -9 $R/*.csv
'
echo "rc_all=$?" > $R/done.txt
cd $R && cat times.txt > summary.txt
tar czf $OUT/logs.tgz *; cp summary.txt $OUT/; rm -rf $R
