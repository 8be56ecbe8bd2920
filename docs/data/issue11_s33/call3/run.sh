#!/bin/bash
# session 33 call 3 (H200): the knobs session 32 set on an H100, checked on the H200 with main (build `main`,
# .dev-s33/main.txz): the GDN / SSE-GDN forward at 1–5 pipelined pieces (bench_cuda --pieces) at T = 16384, 32768,
# 65536, and the backward's two sequential passes at 8 against 16 warps a block (--bscan-warps), each setting
# alternated three times in the same call. Carry .dev-s33. Output: $OUT/logs3.tgz, $OUT/summary3.txt.
R=/tmp/r3; mkdir -p $R; D=/tmp/s33; CAP=${CAP:-560}
left() { [ $SECONDS -lt $((CAP - $1)) ]; }
ts() { echo "$1 $SECONDS" >> $R/times.txt; }
finish() { (cd $R; grep "NVIDIA" smi.txt | head -1; cat times.txt) > $R/summary3.txt 2>&1
  (cd $R && tar czf $OUT/logs3.tgz * && cp summary3.txt $OUT/); }
trap finish EXIT
mkdir -p $D/main && tar xf .dev-s33/main.txz -C $D/main; M=$D/main
nvidia-smi > $R/smi.txt 2>&1
F="--suite=prefill --tmin=16384 --tmax=65536 --strategies=varlen --recurrent-tmax=0 --deadline=40 --Ns=0 --delta"
for i in 1 2 3; do for n in 1 2 3 4 5; do left 30 && { timeout 40 $M/bench_cuda $F --pieces=$n --out=$R/pc${n}_$i.csv > $R/pc${n}_$i.txt 2>&1; ts "pc$n $i rc=$?"; }; done; done
B="--suite=train --tmin=16384 --tmax=65536 --strategies=varlen --recurrent-tmax=0 --deadline=40 --Ns=0 --delta"
for i in 1 2 3; do for w in 8 16; do left 40 && { timeout 50 $M/bench_cuda $B --bscan-warps=$w --out=$R/bw${w}_$i.csv > $R/bw${w}_$i.txt 2>&1; ts "bw$w $i rc=$?"; }; done; done
