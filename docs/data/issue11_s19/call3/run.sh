#!/bin/bash
# session 19 call 3: chunk_bwd_dqkg_kernel, three builds alternated twice (train rows):
#   1 = 190368a (floor bits in flight, dg by row groups);
#   2 = 1 + the inter products' epilogue with one branch per role, dqk_warp_tiles' epilogue with one accurate
#       exponential per element, dg's row offsets formed once per row;
#   3 = 2 + the off-diagonal intra sources pre-scaled once per sub-chunk (scaled_sources) and read by ldmatrix.
# Then builds 2 and 3: test_cuda_backward; build 3: memcheck, racecheck and ncu source counters of the kernel.
R=$OUT/r; mkdir -p $R; D=/tmp/s19; mkdir -p $D/1 $D/2 $D/3
tar xzf .dev-lead/s19_bench1.tgz -C $D/1
for b in 2 3; do tar xzf .dev-lead/s19_bench$b.tgz -C $D/$b; tar xzf .dev-lead/s19_tcb$b.tgz -C $D/$b; done
export LINSTATE_FIXTURES=$PWD/.fixtures
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu | head -1)
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }
ts start
Q="--suite=prefill,train --tmin=8192 --tmax=65536 --Ns=4,16 --strategies=varlen --recurrent-tmax=0 --deadline=40"
for i in 1 2; do for b in 1 2 3; do
  timeout 60 $D/$b/bench_cuda $Q --out=$R/t_${b}$i.csv > $R/t_${b}$i.txt 2>&1; ts "bench$b$i rc=$?"
done; done
for b in 2 3; do
  timeout 100 $D/$b/test_cuda_backward -tce="timing*" > $R/tcb$b.txt 2>&1; echo "rc=$?" >> $R/tcb$b.txt; ts tcb$b
done
timeout 60 $CS --tool memcheck $D/3/test_cuda_backward "-tc=chunked backward (bf16)*,chunked backward: extreme*,saved_states (bf16)*" > $R/memcheck.txt 2>&1; echo "rc=$?" >> $R/memcheck.txt; ts memcheck
timeout 90 $CS --tool racecheck $D/3/test_cuda_backward "-tc=chunked backward (bf16): GLA*,chunked backward (bf16): SSE*" > $R/racecheck.txt 2>&1; echo "rc=$?" >> $R/racecheck.txt; ts racecheck
Q1="--suite=train --tmin=32768 --tmax=32768 --Ns=0 --strategies=varlen --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush"
timeout 100 $NCU --clock-control none --import-source yes -k regex:'chunk_bwd_dqkg' -c 1 --section SourceCounters --section WarpStateStats \
  --section SpeedOfLight --section Occupancy -o $R/dqkg3 $D/3/bench_cuda $Q1 > $R/ncu.log 2>&1; ts "ncu rc=$?"
timeout 60 $NCU --import $R/dqkg3.ncu-rep --page source --csv --print-source cuda,sass > $R/src_dqkg3_cs.csv 2> $R/src_cs.err
timeout 60 $NCU --import $R/dqkg3.ncu-rep --page details --csv > $R/details3.csv 2>&1
ts export
cd $R && gzip -f src_*.csv; rm -f dqkg3.ncu-rep; tail -n 4 tcb2.txt tcb3.txt memcheck.txt racecheck.txt > summary.txt 2>&1; cat times.txt >> summary.txt
tar czf $OUT/logs.tgz *.txt *.csv *.log *.err *.gz; cp summary.txt $OUT/; rm -rf $R
