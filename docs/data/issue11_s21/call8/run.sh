#!/bin/bash
# session 21 call 8: ncu source view (per CUDA source line: instructions executed, warp stall samples) of
# build 11's delta_grad_kernel and delta_tc_rscan_kernel, one GDN train call at T = 32768.
R=$OUT; D=/tmp/s21; mkdir -p $D/b11; tar xzf .dev-lead/s21_b11.tgz -C $D/b11
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
A="--suite=train --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=0 --delta --strategies=varlen --tmin=32768 --tmax=32768"
for k in delta_grad delta_tc_rscan; do
timeout 200 $NCU --clock-control none --section SourceCounters --section WarpStateStats --page source --print-source cuda,sass --csv -k regex:$k -c 1 $D/b11/bench_cuda $A > $R/src_$k.csv 2> $R/src_$k.err
echo "$k rc=$? $(wc -l < $R/src_$k.csv) lines"
done
grep -m3 "^\"" $R/src_delta_grad.csv | cut -c1-700
