#!/bin/bash
# session 14 (GDN backward) call 2: base = bcd9d81 (main), n1 = base + gemm_abt_staged's split-once stage (+ dO's zero
# lo halves skipped), n2 = n1 + tile_mma_x3 skipping the zero blocks of triangular operands and unwanted upper output
# tiles, n3 = n2 + gemm_abt_staged's split form in 32-column slabs (the branch tip). bench alternated (base n1 n2 n3
# n3 n2 n1 base), bit hashes (base, n3), n3's whole test_cuda_backward, memcheck + racecheck, ncu of base and n3.
R=$OUT/r; mkdir -p $R; D=.dev-gdn
mkdir -p /tmp/b && tar xzf $D/c.tgz -C /tmp/b; B=/tmp/b
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
export LINSTATE_FIXTURES=$PWD/.fixtures
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/gpu.txt 2>&1
BA="--suite=train --tmin=32768 --tmax=32768 --Ns=4 --strategies=varlen --recurrent-tmax=0 --delta --deadline=20"
n=0
for b in base n1 n2 n3 n3 n2 n1 base; do
  n=$((n+1)); run=$(( n <= 4 ? 1 : 2 ))
  timeout 25 $B/$b/bench_cuda $BA --out=$R/bench_$b.$run.csv > $R/bench_$b.$run.txt 2>&1
done
P="--suite=train --tmin=32768 --tmax=32768 --Ns=0 --strategies=varlen --recurrent-tmax=0 --delta --reps=1 --min-reps=1 --warmup=0 --deadline=0"
for b in base n3; do
  timeout 40 $NCU --clock-control none --section SpeedOfLight --section WarpStateStats -k regex:"delta_prep|delta_tc_hstate|delta_tc_rscan|delta_grad" -c 4 $B/$b/bench_cuda $P > $R/ncu_$b.txt 2>&1
done
( timeout 110 compute-sanitizer --tool memcheck $B/n3/test_cuda_backward -tc='*bf16 inputs on tensor cores*,*8 and 16 warps*,*side by side*' > $R/memcheck.txt 2>&1; echo "rc=$?" >> $R/memcheck.txt ) &
( timeout 110 compute-sanitizer --tool racecheck $B/n3/test_cuda_backward -tc='*8 and 16 warps*' > $R/racecheck.txt 2>&1; echo "rc=$?" >> $R/racecheck.txt ) &
( timeout 110 $B/n3/test_cuda_backward > $R/test_cuda_backward.txt 2>&1; echo "rc=$?" >> $R/test_cuda_backward.txt ) &
for b in base n3; do timeout 15 $B/bits_$b > $R/bits_$b.txt 2>&1; done
diff $R/bits_base.txt $R/bits_n3.txt > $R/bits_diff_n3.txt 2>&1; echo "diff_rc=$?" >> $R/bits_diff_n3.txt
wait
( timeout 30 $B/n3/test_cuda_backward -tc='*delta*' > $R/test_bwd_delta.txt 2>&1; echo "rc=$?" >> $R/test_bwd_delta.txt )
for f in $R/bench_*.txt; do grep -H "train    gdn\|train    sse_gdn" $f | sed 's/.*bench_//'; done
tail -qn1 $R/bits_diff_*.txt; tail -3 $R/test_cuda_backward.txt $R/test_bwd_delta.txt
grep -h "ERROR SUMMARY\|RACECHECK SUMMARY\|rc=" $R/memcheck.txt $R/racecheck.txt
grep -h "^  void\|Duration" $R/ncu_*.txt | sed 's/  */ /g' | cut -c1-110
