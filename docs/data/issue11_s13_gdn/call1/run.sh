#!/bin/bash
# session 13 (GDN backward) call 1: the backward's scans at 8 / 16 warps per block (new) against 4 (base = d98c184):
# bench alternated, bit hashes, delta tests, ncu SpeedOfLight of the backward kernels, memcheck + racecheck
R=$OUT/r; mkdir -p $R; D=.dev-gdn
cd $D && tar xzf b.tgz && cd ..
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
export LINSTATE_FIXTURES=$PWD/.fixtures
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/gpu.txt 2>&1
BA="--suite=train --tmin=16384 --tmax=32768 --Ns=4 --strategies=varlen --recurrent-tmax=0 --delta --deadline=40"
for run in 1 2; do
  timeout 60 $D/base/bench_cuda $BA --out=$R/base_$run.csv > $R/base_$run.txt 2>&1
  timeout 60 $D/new/bench_cuda $BA --bscan-warps=8 --out=$R/new8_$run.csv > $R/new8_$run.txt 2>&1
  timeout 60 $D/new/bench_cuda $BA --bscan-warps=16 --out=$R/new16_$run.csv > $R/new16_$run.txt 2>&1
done
( timeout 30 $D/bits_base > $R/bits_base.txt 2>&1; timeout 30 $D/bits_new > $R/bits_new.txt 2>&1; diff $R/bits_base.txt $R/bits_new.txt > $R/bits_diff.txt 2>&1; echo "diff_rc=$?" >> $R/bits_diff.txt )
timeout 90 $D/new/test_cuda_backward -tc='*delta*' --duration=true > $R/test_bwd_delta.txt 2>&1; echo "rc=$?" >> $R/test_bwd_delta.txt
P="--suite=train --tmin=32768 --tmax=32768 --Ns=0 --strategies=varlen --recurrent-tmax=0 --delta --reps=1 --min-reps=1 --warmup=0 --deadline=0"
for b in base new; do
  timeout 60 $NCU --clock-control none --section SpeedOfLight --section LaunchStats --section Occupancy -k regex:"delta_prep|delta_tc_hstate|delta_tc_rscan|delta_grad" -c 4 $D/$b/bench_cuda $P > $R/ncu_$b.txt 2>&1
done
( timeout 150 compute-sanitizer --tool memcheck $D/new/test_cuda_backward -tc='*bf16 inputs on tensor cores*,*8 and 16 warps*,*side by side*' > $R/memcheck.txt 2>&1; echo "rc=$?" >> $R/memcheck.txt ) &
( timeout 150 compute-sanitizer --tool racecheck $D/new/test_cuda_backward -tc='*8 and 16 warps*' > $R/racecheck.txt 2>&1; echo "rc=$?" >> $R/racecheck.txt ) &
( timeout 120 $D/new/test_cuda -tc='*delta*' > $R/test_cuda_delta.txt 2>&1; echo "rc=$?" >> $R/test_cuda_delta.txt ) &
wait
for f in base_1 new8_1 new16_1 base_2 new8_2 new16_2; do grep -H "train    gdn\|train    sse_gdn" $R/$f.txt; done
cat $R/bits_diff.txt | tail -3; tail -4 $R/test_bwd_delta.txt; tail -3 $R/test_cuda_delta.txt
grep -h "ERROR SUMMARY\|RACECHECK SUMMARY\|rc=" $R/memcheck.txt $R/racecheck.txt
grep -h "delta_.*kernel\|Duration" $R/ncu_base.txt $R/ncu_new.txt | grep -v "^ *$" | head -40
cd $OUT && tar czf r.tgz r && rm -rf r
