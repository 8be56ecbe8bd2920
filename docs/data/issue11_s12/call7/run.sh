#!/bin/bash
# session 12 call 7: s12d (U_c by mma.sync + ldmatrix.trans) vs s12c: bits, bench alternated, ncu
R=$OUT/r; mkdir -p $R; B=.dev-lead
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
$B/s12d/bits > $R/bits_s12d.txt 2>&1
A="--suite=prefill,train --tmin=8192 --tmax=65536 --Ns=4 --strategies=varlen --recurrent-tmax=0 --deadline=80"
for x in s12c s12d s12d s12c; do timeout 100 $B/$x/bench_cuda $A --out=$R/$x.$RANDOM.csv > $R/bench_$x.$RANDOM.txt 2>&1; done
timeout 120 $NCU --clock-control none --section SpeedOfLight --section Occupancy --section SchedulerStats --section WarpStateStats -k regex:"chunk_(intra|scan|output)" -c 3 $B/s12d/bench_cuda --suite=prefill --tmin=32768 --tmax=32768 --Ns=0 --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 > $R/ncu_fwd.txt 2>&1
timeout 120 $NCU --clock-control none --section SpeedOfLight -k regex:"chunk_" -c 14 $B/s12d/bench_cuda --suite=train --tmin=32768 --tmax=32768 --Ns=0 --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 > $R/ncu_train.txt 2>&1
echo done > $R/done.txt
cd $OUT && tar czf r.tgz r && rm -rf r
