#!/bin/bash
# session 14 (GDN backward) call 1: base = bcd9d81 (main), ring = the records ring (s13 patch, = c1), g1 = ring +
# gemm_abt_staged's split-once stage (+ dO's zero lo halves skipped), g2 = g1 + tile_mma_x3's tiles in pairs sharing
# B's splits, g3 = g2 + tile_mma_x3 skipping the zero blocks of triangular operands and unwanted upper output tiles,
# g4 = g3 + gemm_abt_staged's split form in 32-column slabs. bench alternated (base ring g1 g2 g3 g4 g4 g3 g2 g1 ring
# base), bit hashes of all six, ring's delta tests, memcheck + racecheck of ring's changed scans.
R=$OUT/r; mkdir -p $R; D=.dev-gdn
mkdir -p /tmp/b && tar xzf $D/b.tgz -C /tmp/b; B=/tmp/b
export LINSTATE_FIXTURES=$PWD/.fixtures
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/gpu.txt 2>&1
BA="--suite=train --tmin=32768 --tmax=32768 --Ns=4 --strategies=varlen --recurrent-tmax=0 --delta --deadline=20"
n=0
for b in base ring g1 g2 g3 g4 g4 g3 g2 g1 ring base; do
  n=$((n+1)); run=$(( n <= 6 ? 1 : 2 ))
  timeout 25 $B/$b/bench_cuda $BA --out=$R/bench_$b.$run.csv > $R/bench_$b.$run.txt 2>&1
done
( timeout 70 compute-sanitizer --tool memcheck $B/ring/test_cuda_backward -tc='*bf16 inputs on tensor cores*,*8 and 16 warps*,*side by side*' > $R/memcheck_ring.txt 2>&1; echo "rc=$?" >> $R/memcheck_ring.txt ) &
( timeout 70 compute-sanitizer --tool racecheck $B/ring/test_cuda_backward -tc='*8 and 16 warps*' > $R/racecheck_ring.txt 2>&1; echo "rc=$?" >> $R/racecheck_ring.txt ) &
( timeout 60 $B/ring/test_cuda_backward -tc='*delta*' > $R/test_bwd_delta_ring.txt 2>&1; echo "rc=$?" >> $R/test_bwd_delta_ring.txt ) &
for b in base ring g2 g3 g4; do timeout 15 $B/bits_$b > $R/bits_$b.txt 2>&1; done
for b in ring g2 g3 g4; do diff $R/bits_base.txt $R/bits_$b.txt > $R/bits_diff_$b.txt 2>&1; echo "diff_rc=$?" >> $R/bits_diff_$b.txt; done
wait
for f in $R/bench_*.txt; do grep -H "train    gdn\|train    sse_gdn" $f | sed 's/.*bench_//'; done
tail -qn1 $R/bits_diff_*.txt; tail -3 $R/test_bwd_delta_*.txt
grep -h "ERROR SUMMARY\|RACECHECK SUMMARY\|rc=" $R/memcheck_ring.txt $R/racecheck_ring.txt
