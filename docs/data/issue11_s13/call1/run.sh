#!/bin/bash
# session 13 call 1: the step_params mend (forward.cuh): whole test_cuda + test_cuda_backward, memcheck of decode cases, decode rows;
# ncu source view of the GLA backward's dq/dk, dv and dg kernels at T = 32768
R=$OUT/r; mkdir -p $R; B=.dev-lead; tar xzf $B/m.tgz -C $B
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
export R B NCU
timeout 560 bash -c '
$B/m/test_cuda > $R/test_cuda.txt 2>&1; echo rc=$? >> $R/test_cuda.txt
LINSTATE_FIXTURES=$PWD/.fixtures $B/m/test_cuda_backward > $R/test_cuda_backward.txt 2>&1; echo rc=$? >> $R/test_cuda_backward.txt
timeout 60 compute-sanitizer --tool memcheck $B/m/test_cuda -tc="decode step*,prefill, then decode*,non-finite*" > $R/memcheck_decode.txt 2>&1
timeout 40 $B/m/bench_cuda --suite=copy,decode --Ns=4 --batch=1,128 --deadline=0 > $R/decode.txt 2>&1
timeout 150 $NCU --clock-control none --set full --import-source yes -k regex:"chunk_bwd_dqk|chunk_dg|chunk_bwd_dv" -c 3 -o $R/bwd $B/m/bench_cuda --suite=train --tmin=32768 --tmax=32768 --Ns=0 --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 > $R/ncu_bwd_log.txt 2>&1
$NCU -i $R/bwd.ncu-rep --page details --csv > $R/bwd_details.csv 2>&1
$NCU -i $R/bwd.ncu-rep --page source --csv --print-source cuda > $R/bwd_src_cuda.csv 2>&1
$NCU -i $R/bwd.ncu-rep --page source --csv --print-source sass > $R/bwd_src_sass.csv 2>&1
rm -f $R/bwd.ncu-rep
'
echo "rc_all=$?" > $R/done.txt
cd $OUT && tar czf r.tgz r && rm -rf r
