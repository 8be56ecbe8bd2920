#!/bin/bash
# session 24 call 4: build 0 (4c70547) against build 4 (0 with the gradient kernel at 1024 threads,
# 32 warps, 64 registers) and build 5 (0 with the backward prep's K̂, Q rows at pitch K + 4 for bf16):
# their tensor-core GDN ratios and test_cuda_backward, train rows alternated twice, ncu (duration,
# instructions) of the delta kernels of one GDN train call at 32768.
R=$OUT/r; mkdir -p $R; D=/tmp/s24; for b in b0 b4 b5; do mkdir -p $D/$b; tar xzf .dev-lead/s24_$b.tgz -C $D/$b; done
export LINSTATE_FIXTURES=$PWD/.fixtures
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }
for b in b4 b5; do
  timeout 150 $D/$b/test_cuda_backward -tce="timing*" > $R/tcb_$b.txt 2>&1; echo "rc=$?" >> $R/tcb_$b.txt; ts tcb_$b
  timeout 90 $D/$b/test_cuda_backward -tc="*inputs on tensor cores*" > $R/tc_$b.txt 2>&1; echo "rc=$?" >> $R/tc_$b.txt; ts tc_$b
done
P="--suite=train --tmin=8192 --tmax=65536 --Ns=0 --delta --strategies=varlen --recurrent-tmax=0 --deadline=40"
for i in 1 2; do
  for b in b0 b4 b5; do timeout 80 $D/$b/bench_cuda $P --out=$R/t_${b}$i.csv > $R/t_${b}$i.txt 2>&1; ts "t_$b$i rc=$?"; done
done
for b in b0 b4 b5; do
  timeout 60 $NCU --clock-control none --metrics gpu__time_duration.sum,smsp__inst_executed.sum -k regex:delta -c 13 --csv --page raw $D/$b/bench_cuda --suite=train --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=0 --delta --strategies=varlen --tmin=32768 --tmax=32768 > $R/ncu_$b.csv 2>&1; ts ncu$b
done
cd $R && (for b in b4 b5; do echo "== $b"; grep -h "MESSAGE" tc_$b.txt | sed "s/.*MESSAGE: //"; tail -n 4 tcb_$b.txt; done; cat times.txt) > summary.txt 2>&1
tar czf $OUT/logs.tgz *; cp summary.txt $OUT/; rm -rf $R
