#!/bin/bash
# session 12 call 9: the merged tree (a51a9bf: GLA forward kernels + decode_stream_kernel + CPU changes): GPU tests,
# sanitizers of the decode and chunked cases; ncu source view of the intra kernel (for the next session's leads)
R=$OUT/r; mkdir -p $R; B=.dev-lead
tar xzf $B/merged.tgz -C $B
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
$B/m/test_cuda > $R/test_cuda.txt 2>&1; echo rc=$? >> $R/test_cuda.txt
LINSTATE_FIXTURES=$PWD/.fixtures $B/m/test_cuda_backward > $R/test_cuda_backward.txt 2>&1; echo rc=$? >> $R/test_cuda_backward.txt
timeout 60 compute-sanitizer --tool memcheck $B/m/test_cuda -tc='decode step*,prefill, then decode*,non-finite*' > $R/memcheck_decode.txt 2>&1
timeout 60 compute-sanitizer --tool racecheck $B/m/test_cuda -tc='decode step*,non-finite*' > $R/racecheck_decode.txt 2>&1
timeout 90 $B/m/bench_cuda --suite=copy,decode,prefill,train --tmin=32768 --tmax=32768 --Ns=4 --batch=1,128 --strategies=varlen --recurrent-tmax=0 --deadline=60 > $R/bench_m.txt 2>&1
timeout 100 $NCU --clock-control none --set full --import-source yes -k regex:chunk_intra -c 1 -o $R/intra $B/m/bench_cuda --suite=prefill --tmin=32768 --tmax=32768 --Ns=0 --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 > $R/ncu_intra_log.txt 2>&1
$NCU -i $R/intra.ncu-rep --page details --csv > $R/intra_details.csv 2>&1
$NCU -i $R/intra.ncu-rep --page source --csv --print-source sass > $R/intra_src_sass.csv 2>&1
rm -f $R/intra.ncu-rep
echo done > $R/done.txt
cd $OUT && tar czf r.tgz r && rm -rf r
