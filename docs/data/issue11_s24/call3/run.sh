#!/bin/bash
# session 24 call 3: builds 0 (4c70547), 1 (fused passes), 2 (1 + L2 bulk prefetch of the gradient
# kernel's V-wide operands), 3 (0 + the same prefetch): train rows alternated twice, ncu (duration,
# instructions) of the gradient kernel of one GDN train call at 32768.
R=$OUT/r; mkdir -p $R; D=/tmp/s24; for b in b0 b1 b2 b3; do mkdir -p $D/$b; tar xzf .dev-lead/s24_$b.tgz -C $D/$b; done
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }
P="--suite=train --tmin=8192 --tmax=65536 --Ns=0 --delta --strategies=varlen --recurrent-tmax=0 --deadline=40"
for i in 1 2; do
  for b in b0 b1 b2 b3; do timeout 80 $D/$b/bench_cuda $P --out=$R/t_${b}$i.csv > $R/t_${b}$i.txt 2>&1; ts "t_$b$i rc=$?"; done
done
for b in b0 b1 b2 b3; do
  timeout 60 $NCU --clock-control none --metrics gpu__time_duration.sum,smsp__inst_executed.sum,lts__t_sector_hit_rate.pct -k regex:delta_grad -c 2 --csv --page raw $D/$b/bench_cuda --suite=train --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=0 --delta --strategies=varlen --tmin=32768 --tmax=32768 > $R/ncu_$b.csv 2>&1; ts ncu$b
done
cd $R && tar czf $OUT/logs.tgz *; rm -rf $R
