#!/bin/bash
# session 23 call 3: build 3 (build 1 + the reverse scan's record-table entries loaded a chunk ahead,
# the record formed and stored a step later) against build 1 (d2082ab): GDN / SSE-GDN train rows
# alternated twice, ncu durations of build 3's delta kernels; ncu source counters (a -lineinfo build of
# build 3's code) of delta_grad_kernel and delta_tc_rscan_kernel in one GDN train call at 32768.
R=$OUT/r; mkdir -p $R; D=/tmp/s23; for b in b1 b3 li3; do mkdir -p $D/$b; tar xzf .dev-lead/s23_$b.tgz -C $D/$b; done
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }
P="--suite=train --tmin=8192 --tmax=65536 --Ns=0 --delta --strategies=varlen --recurrent-tmax=0 --deadline=40"
for i in 1 2; do
  for b in b1 b3; do timeout 80 $D/$b/bench_cuda $P --out=$R/t_${b}$i.csv > $R/t_${b}$i.txt 2>&1; ts "t_$b$i rc=$?"; done
done
A="--suite=train --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=0 --delta --strategies=varlen --tmin=32768 --tmax=32768"
timeout 60 $NCU --clock-control none --metrics gpu__time_duration.sum,smsp__inst_executed.sum -k regex:delta -c 13 --csv --page raw $D/b3/bench_cuda $A > $R/ncu_b3.csv 2>&1; ts ncub3
for k in delta_grad delta_tc_rscan; do
timeout 150 $NCU --clock-control none --section SourceCounters --section WarpStateStats --page source --print-source cuda,sass --csv -k regex:$k -c 1 $D/li3/bench_cuda $A > $R/src_$k.csv 2> $R/src_$k.err; ts src_$k
gzip $R/src_$k.csv
done
cd $R && tar czf $OUT/logs.tgz *; rm -rf $R
