#!/bin/bash
# session 24 call 2: where delta_grad_kernel's time goes (build 1 with -lineinfo): ncu --set full of one
# GDN train call's gradient kernel at T = 32768 (details page), and its source counters (stall samples per line).
R=$OUT/r; mkdir -p $R; D=/tmp/s24; mkdir -p $D/li; tar xzf .dev-lead/s24_b1li.tgz -C $D/li
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }
A="--suite=train --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=0 --delta --strategies=varlen --tmin=32768 --tmax=32768"
timeout 150 $NCU --clock-control none --set full -k regex:delta_grad -c 1 --csv --page details $D/li/bench_cuda $A > $R/full_grad.csv 2> $R/full_grad.err; ts full
timeout 150 $NCU --clock-control none --section SourceCounters --section WarpStateStats --page source --print-source cuda,sass --csv -k regex:delta_grad -c 1 $D/li/bench_cuda $A > $R/src_grad.csv 2> $R/src_grad.err; ts src
gzip $R/src_grad.csv
cd $R && tar czf $OUT/logs.tgz *; rm -rf $R
