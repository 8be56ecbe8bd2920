#!/bin/bash
# session 12 call 4: s12b (intra balanced + output one round of copies, 16-byte stores): tests, sanitizers; bench main/s12a/s12b alternated; ncu
R=$OUT/r; mkdir -p $R; B=.dev-lead
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
$B/s12b/test_cuda > $R/test_cuda.txt 2>&1; echo rc=$? >> $R/test_cuda.txt
LINSTATE_FIXTURES=$PWD/.fixtures $B/s12b/test_cuda_backward > $R/test_cuda_backward.txt 2>&1; echo rc=$? >> $R/test_cuda_backward.txt
timeout 150 compute-sanitizer --tool memcheck $B/s12b/test_cuda -tc='chunked*' > $R/memcheck_chunked.txt 2>&1
timeout 150 compute-sanitizer --tool racecheck $B/s12b/test_cuda -tc='chunked: bf16*,chunked: GLA*' > $R/racecheck_chunked.txt 2>&1
timeout 120 compute-sanitizer --tool memcheck $B/s12b/test_cuda_backward -tc='chunked backward (bf16)*' > $R/memcheck_bwd.txt 2>&1
timeout 120 compute-sanitizer --tool racecheck $B/s12b/test_cuda_backward -tc='chunked backward (bf16)*' > $R/racecheck_bwd.txt 2>&1
timeout 120 compute-sanitizer --tool synccheck $B/s12b/test_cuda -tc='chunked: bf16*' > $R/synccheck.txt 2>&1
A="--suite=prefill,train --tmin=8192 --tmax=65536 --Ns=4 --strategies=varlen --recurrent-tmax=0 --deadline=80"
for x in new s12a s12b s12b s12a new; do timeout 100 $B/$x/bench_cuda $A --out=$R/$x.$RANDOM.csv > $R/bench_$x.$RANDOM.txt 2>&1; done
timeout 120 $NCU --clock-control none --section SpeedOfLight --section Occupancy --section SchedulerStats --section WarpStateStats -k regex:"chunk_(intra|scan|output)" -c 3 $B/s12b/bench_cuda --suite=prefill --tmin=32768 --tmax=32768 --Ns=0 --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 > $R/ncu_fwd.txt 2>&1
timeout 120 $NCU --clock-control none --section SpeedOfLight -k regex:"chunk_" -c 14 $B/s12b/bench_cuda --suite=train --tmin=32768 --tmax=32768 --Ns=0 --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 > $R/ncu_train.txt 2>&1
echo done > $R/done.txt
cd $OUT && tar czf r.tgz r && rm -rf r
