#!/bin/bash
# session 19 call 1: where chunk_bwd_dqkg_kernel (and the GLA forward's kernels) spend their instructions:
# ncu source counters (SASS with executed instructions and stall samples per line) of one GLA train call at
# T = 32768, main's build (30fea0f); then the GLA rows' baseline timing.
R=$OUT/r; mkdir -p $R; D=/tmp/s19; mkdir -p $D
tar xzf .dev-lead/s19_bench0.tgz -C $D
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
echo "ncu=$NCU" > $R/times.txt; $NCU --version >> $R/times.txt 2>&1
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }
ts start
Q="--suite=train --tmin=32768 --tmax=32768 --Ns=0 --strategies=varlen --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush"
timeout 200 $NCU --clock-control none --import-source yes -k regex:'chunk_bwd_dqkg|chunk_intra|chunk_output|chunk_bwd_dv|chunk_kstate' -c 5 \
  --section SourceCounters --section WarpStateStats --section InstructionStats --section SpeedOfLight --section Occupancy \
  --section LaunchStats --section MemoryWorkloadAnalysis -o $R/gla_train32k $D/bench_cuda $Q > $R/ncu.log 2>&1; echo "ncu rc=$?" >> $R/times.txt
ts ncu
for k in chunk_bwd_dqkg chunk_intra chunk_output chunk_bwd_dv chunk_kstate; do
  timeout 60 $NCU --import $R/gla_train32k.ncu-rep -k regex:$k --page source --csv --print-source sass > $R/src_$k.csv 2> $R/src_$k.err
  gzip -f $R/src_$k.csv
done
timeout 60 $NCU --import $R/gla_train32k.ncu-rep --page details --csv > $R/details.csv 2>&1
ts export
timeout 90 $D/bench_cuda --suite=prefill,train --tmin=8192 --tmax=65536 --Ns=4 --strategies=varlen --recurrent-tmax=0 --deadline=60 --out=$R/bench.csv > $R/bench.txt 2>&1
ts bench
ls -la $R >> $R/times.txt
cd $R && tar czf $OUT/src.tgz src_*.csv.gz && tar czf $OUT/logs.tgz *.txt *.log *.err details.csv bench.csv
gzip -c gla_train32k.ncu-rep > $OUT/gla_train32k.ncu-rep.gz; cp times.txt bench.txt $OUT/
cd $OUT && split -b 15m gla_train32k.ncu-rep.gz rep_ && rm -f gla_train32k.ncu-rep.gz; rm -rf $R
