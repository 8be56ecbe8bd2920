#!/bin/bash
# session 12 call 2: intra kernel split (s12a) vs main (new) — bench alternated, ncu of the new intra kernel
R=$OUT/r; mkdir -p $R; B=.dev-lead
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
A="--suite=prefill,train --tmin=8192 --tmax=65536 --Ns=4 --strategies=varlen --recurrent-tmax=0 --deadline=80"
for x in new s12a s12a new; do timeout 100 $B/$x/bench_cuda $A --out=$R/$x.$RANDOM.csv > $R/bench_$x.$RANDOM.txt 2>&1; done
timeout 120 $NCU --clock-control none --set full --import-source yes -k regex:chunk_intra -c 1 -o $R/intra $B/s12a/bench_cuda --suite=prefill --tmin=32768 --tmax=32768 --Ns=0 --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 > $R/ncu_intra_log.txt 2>&1
$NCU -i $R/intra.ncu-rep --page details --csv > $R/intra_details.csv 2>&1
$NCU -i $R/intra.ncu-rep --page source --csv --print-source sass > $R/intra_src_sass.csv 2>&1
rm -f $R/intra.ncu-rep
echo done > $R/done.txt
cd $OUT && tar czf r.tgz r && rm -rf r
