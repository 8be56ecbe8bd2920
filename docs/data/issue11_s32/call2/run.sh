#!/bin/bash
# session 32 call 2: why s31-state-fk's SSE-GDN forward is 2-3 % slower than main's while its GDN forward is 3-5 %
# faster (call 1): ncu durations and memory counters of the SSE-GDN n4k1s forward's kernels, rsc (main's kernels)
# against fk and acc; the SSE (GLA transition) rows of rsc against wu (the GLA family's chunk kernels changed);
# the source counters of main's delta_tc_prep_kernel (the pipelined GDN forward's throughput part).
# Carry .dev-s31. Output: logs2.tgz, summary2.txt.
R=$OUT/r; mkdir -p $R; D=/tmp/s31
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }
for b in rsc fk acc wu; do mkdir -p $D/$b && tar xf .dev-s31/$b.txz -C $D/$b; done
F="--suite=prefill --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=4 --delta --strategies=varlen --tmin=32768 --tmax=32768"
M="gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread,launch__grid_size,sm__warps_active.avg.pct_of_peak_sustained_active,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,lts__t_bytes.sum,sm__cycles_active.avg"
for b in rsc fk acc; do timeout 60 $NCU --clock-control none --metrics $M -k regex:delta_tc_ --csv --page raw $D/$b/bench_cuda $F > $R/ncu_sse_$b.csv 2>&1; ts ncu_sse_$b; done
P="--suite=prefill,train --tmin=8192 --tmax=65536 --strategies=varlen --recurrent-tmax=0 --deadline=40 --Ns=4,16"
for i in 1 2; do for b in rsc wu; do timeout 90 $D/$b/bench_cuda $P --out=$R/sse_$b$i.csv > $R/sse_$b$i.txt 2>&1; ts "sse_$b$i rc=$?"; done; done
G="--suite=prefill --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=0 --delta --strategies=varlen --tmin=32768 --tmax=32768"
timeout 60 $NCU --clock-control none --section SourceCounters --section WarpStateStats --section SpeedOfLight --section MemoryWorkloadAnalysis --page details --csv -k regex:delta_tc_prep -c 1 $D/rsc/bench_cuda $G > $R/prep_details.csv 2> $R/prep_details.err; ts prep_details
timeout 60 $NCU --clock-control none --section SourceCounters --section WarpStateStats --page source --print-source sass --csv -k regex:delta_tc_prep -c 1 $D/rsc/bench_cuda $G > $R/src_prep.csv 2> $R/src_prep.err; gzip -f $R/src_prep.csv; ts src_prep
(cd $R; cat times.txt; grep -h "sse" sse_rsc1.txt | head -30) > $R/summary2.txt 2>&1
cd $R && tar czf $OUT/logs2.tgz * && cp summary2.txt $OUT/
