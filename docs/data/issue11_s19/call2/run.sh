#!/bin/bash
# session 19 call 2: chunk_bwd_dqkg_kernel's floor bits with every load in flight and dg's suffix sums by
# row groups (build 1) against main's build (0): the train rows alternated twice; build 1's
# test_cuda_backward, memcheck and racecheck of the bf16 chunked cases; ncu source counters of build 1's
# dqkg kernel with the CUDA lines.
R=$OUT/r; mkdir -p $R; D=/tmp/s19; mkdir -p $D/0 $D/1
tar xzf .dev-lead/s19_bench0.tgz -C $D/0; tar xzf .dev-lead/s19_bench1.tgz -C $D/1; tar xzf .dev-lead/s19_tcb1.tgz -C $D/1
export LINSTATE_FIXTURES=$PWD/.fixtures
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu | head -1)
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }
ts start
Q="--suite=prefill,train --tmin=16384 --tmax=65536 --Ns=4 --strategies=varlen --recurrent-tmax=0 --deadline=40"
for i in 1 2; do for b in 0 1; do
  timeout 60 $D/$b/bench_cuda $Q --out=$R/t_${b}$i.csv > $R/t_${b}$i.txt 2>&1; ts "bench$b$i rc=$?"
done; done
timeout 150 $D/1/test_cuda_backward -tce="timing*" > $R/test_cuda_backward.txt 2>&1; echo "rc=$?" >> $R/test_cuda_backward.txt; ts tcb
timeout 60 $CS --tool memcheck $D/1/test_cuda_backward "-tc=chunked backward (bf16)*,chunked backward: extreme*" > $R/memcheck.txt 2>&1; echo "rc=$?" >> $R/memcheck.txt; ts memcheck
timeout 90 $CS --tool racecheck $D/1/test_cuda_backward "-tc=chunked backward (bf16): GLA*,chunked backward (bf16): SSE*" > $R/racecheck.txt 2>&1; echo "rc=$?" >> $R/racecheck.txt; ts racecheck
Q1="--suite=train --tmin=32768 --tmax=32768 --Ns=0 --strategies=varlen --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush"
timeout 100 $NCU --clock-control none --import-source yes -k regex:'chunk_bwd_dqkg' -c 1 --section SourceCounters --section WarpStateStats \
  --section SpeedOfLight --section Occupancy -o $R/dqkg1 $D/1/bench_cuda $Q1 > $R/ncu.log 2>&1; ts "ncu rc=$?"
timeout 60 $NCU --import $R/dqkg1.ncu-rep --page source --csv --print-source cuda,sass > $R/src_dqkg1_cs.csv 2> $R/src_cs.err
timeout 60 $NCU --import $R/dqkg1.ncu-rep --page source --csv --print-source sass > $R/src_dqkg1.csv 2> $R/src.err
timeout 60 $NCU --import $R/dqkg1.ncu-rep --page details --csv > $R/details1.csv 2>&1
ts export
cd $R && gzip -f src_*.csv; tail -n 4 test_cuda_backward.txt memcheck.txt racecheck.txt > summary.txt 2>&1; cat times.txt >> summary.txt
tar czf $OUT/logs.tgz *.txt *.csv *.log *.err *.gz; cp summary.txt $OUT/; rm -rf $R
