#!/bin/bash
# session 16 call 2: main + the review's mends (one device-attribute cache; route_in_warp and sum_read_slots shared by the
# decode kernels) + combine4_kernel (the SSE forward's slot sum on 16-byte loads). N = this tree's build, A = d039d82's build.
R=$OUT/r; mkdir -p $R; D=/tmp/s16; mkdir -p $D/A $D/N
tar xzf .dev-lead/s16_base.tgz -C $D/A; tar xzf .dev-lead/s16_bin2.tgz -C $D/N
export LINSTATE_FIXTURES=$PWD/.fixtures
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*" >> $R/log.txt; }
nvidia-smi > $R/smi.txt 2>&1
timeout 60 $D/N/test_cuda > $R/test_cuda.txt 2>&1; el "test_cuda rc=$?"
P="--suite=prefill,train --tmin=32768 --tmax=65536 --Ns=4,8,16 --strategies=varlen --recurrent-tmax=0 --deadline=12"
Q="--suite=copy,decode --Ns=4,8,16 --deadline=0"
for i in 1 2; do
  timeout 60 $D/A/bench_cuda $P --out=$R/pt_A$i.csv > $R/pt_A$i.txt 2>&1; el "pt A$i rc=$?"
  timeout 60 $D/N/bench_cuda $P --out=$R/pt_N$i.csv > $R/pt_N$i.txt 2>&1; el "pt N$i rc=$?"
  timeout 30 $D/A/bench_cuda $Q --out=$R/dec_A$i.csv > $R/dec_A$i.txt 2>&1; el "dec A$i rc=$?"
  timeout 30 $D/N/bench_cuda $Q --out=$R/dec_N$i.csv > $R/dec_N$i.txt 2>&1; el "dec N$i rc=$?"
done
timeout 60 compute-sanitizer --tool memcheck $D/N/test_cuda -tc='decode*,SSE-n4k1 + shared*,chunked: SSE*,non-finite*' > $R/memcheck.txt 2>&1; el "memcheck rc=$?"
timeout 60 compute-sanitizer --tool racecheck $D/N/test_cuda -tc='decode step*' > $R/racecheck.txt 2>&1; el "racecheck rc=$?"
cd $R && tail -n 3 test_cuda.txt memcheck.txt racecheck.txt > summary.txt; cat log.txt >> summary.txt
cd $OUT && tar czf r.tgz r && cp r/summary.txt . && rm -rf r
