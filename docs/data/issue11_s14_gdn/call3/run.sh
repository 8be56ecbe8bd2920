#!/bin/bash
# session 14 (GDN backward) call 3: n3 = the branch tip (63d428a), g5 = n3 + tile_mma_x3 reading adjacent pairs as
# float2; bench alternated (n3 g5 g5 n3), bits of g5 (compared here with call 2's bits_base.txt), test_cuda of the tip.
R=$OUT/r; mkdir -p $R; D=.dev-gdn
mkdir -p /tmp/b && tar xzf $D/d.tgz -C /tmp/b; B=/tmp/b
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/gpu.txt 2>&1
BA="--suite=train --tmin=32768 --tmax=32768 --Ns=4 --strategies=varlen --recurrent-tmax=0 --delta --deadline=20"
n=0
for b in n3 g5 g5 n3; do
  n=$((n+1)); run=$(( n <= 2 ? 1 : 2 ))
  timeout 25 $B/$b/bench_cuda $BA --out=$R/bench_$b.$run.csv > $R/bench_$b.$run.txt 2>&1
done
timeout 15 $B/bits_g5 > $R/bits_g5.txt 2>&1
[ -x $B/n3/test_cuda ] && { timeout 150 $B/n3/test_cuda > $R/test_cuda.txt 2>&1; echo "rc=$?" >> $R/test_cuda.txt; }
for f in $R/bench_*.txt; do grep -H "train    gdn\|train    sse_gdn" $f | sed 's/.*bench_//'; done
cat $R/bits_g5.txt; tail -n3 $R/test_cuda.txt
