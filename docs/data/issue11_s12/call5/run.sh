#!/bin/bash
# session 12 call 5: bits (main vs s12b); bench s12a/s12b/s12c alternated; ncu of s12c's forward kernels
R=$OUT/r; mkdir -p $R; B=.dev-lead
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
$B/bits_main > $R/bits_main.txt 2>&1; $B/bits_s12b > $R/bits_s12b.txt 2>&1
A="--suite=prefill,train --tmin=8192 --tmax=65536 --Ns=4 --strategies=varlen --recurrent-tmax=0 --deadline=80"
for x in s12a s12b s12c s12c s12b s12a; do timeout 100 $B/$x/bench_cuda $A --out=$R/$x.$RANDOM.csv > $R/bench_$x.$RANDOM.txt 2>&1; done
timeout 120 $NCU --clock-control none --section SpeedOfLight --section Occupancy --section SchedulerStats --section WarpStateStats -k regex:"chunk_(intra|scan|output)" -c 3 $B/s12c/bench_cuda --suite=prefill --tmin=32768 --tmax=32768 --Ns=0 --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 > $R/ncu_fwd.txt 2>&1
timeout 120 $NCU --clock-control none --section SpeedOfLight -k regex:"chunk_(intra|output)" -c 4 $B/s12c/bench_cuda --suite=prefill --tmin=32768 --tmax=32768 --Ns=4 --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 > $R/ncu_sse.txt 2>&1
timeout 120 $NCU --clock-control none --section SpeedOfLight -k regex:"chunk_(intra|output)" -c 4 $B/s12a/bench_cuda --suite=prefill --tmin=32768 --tmax=32768 --Ns=4 --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 > $R/ncu_sse_a.txt 2>&1
echo done > $R/done.txt
cd $OUT && tar czf r.tgz r && rm -rf r
