#!/bin/bash
# session 13 call 2: chunk_bwd_dqkg_kernel (dA, dq, dk, dg fused for bf16 gated_key): bits base vs new, GPU tests,
# sanitizers of the bf16 backward, train rows base/new alternated, ncu of the new kernel
R=$OUT/r; mkdir -p $R; B=.dev-lead; tar xzf $B/m.tgz -C $B; tar xzf $B/n.tgz -C $B
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
export R B NCU
timeout 580 bash -c '
$B/m/bits > $R/bits_base.txt 2>&1; $B/n/bits > $R/bits_new.txt 2>&1
LINSTATE_FIXTURES=$PWD/.fixtures $B/n/test_cuda_backward > $R/test_cuda_backward.txt 2>&1; echo rc=$? >> $R/test_cuda_backward.txt
$B/n/test_cuda > $R/test_cuda.txt 2>&1; echo rc=$? >> $R/test_cuda.txt
timeout 90 compute-sanitizer --tool memcheck $B/n/test_cuda_backward -tc="chunked backward (bf16)*" > $R/memcheck_bwd.txt 2>&1
timeout 120 compute-sanitizer --tool racecheck $B/n/test_cuda_backward -tc="chunked backward (bf16)*" > $R/racecheck_bwd.txt 2>&1
A="--suite=train --tmin=4096 --tmax=65536 --Ns=4,8,16 --strategies=varlen --recurrent-tmax=0 --deadline=60"
$B/m/bench_cuda $A --out=$R/base_1.csv > $R/bench_base.1.txt 2>&1
$B/n/bench_cuda $A --out=$R/new_1.csv > $R/bench_new.1.txt 2>&1
$B/n/bench_cuda $A --out=$R/new_2.csv > $R/bench_new.2.txt 2>&1
$B/m/bench_cuda $A --out=$R/base_2.csv > $R/bench_base.2.txt 2>&1
timeout 100 $NCU --clock-control none --set full --import-source yes -k regex:"chunk_bwd_dqkg|chunk_bwd_dv" -c 2 -o $R/bwd $B/n/bench_cuda --suite=train --tmin=32768 --tmax=32768 --Ns=0 --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 > $R/ncu_bwd_log.txt 2>&1
$NCU -i $R/bwd.ncu-rep --page details --csv > $R/bwd_details.csv 2>&1
$NCU -i $R/bwd.ncu-rep --page source --csv --print-source sass > $R/bwd_src_sass.csv 2>&1
rm -f $R/bwd.ncu-rep
'
echo "rc_all=$?" > $R/done.txt
cd $OUT && tar czf r.tgz r && rm -rf r
