#!/bin/bash
# device call 1 (session 12): the review cleanup's tests + bench; decode baseline; ncu source view of the GLA intra kernel and the decode kernels
R=$OUT/r; mkdir -p $R; B=.dev-lead
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
nvidia-smi > $R/smi.txt 2>&1
timeout 330 bash -c "
$B/new/test_cuda > $R/test_cuda.txt 2>&1; echo rc=\$? >> $R/test_cuda.txt
LINSTATE_FIXTURES=$PWD/.fixtures $B/new/test_cuda_backward > $R/test_cuda_backward.txt 2>&1; echo rc=\$? >> $R/test_cuda_backward.txt
timeout 60 compute-sanitizer --tool memcheck $B/new/test_cuda -tc='*pipelined*' > $R/memcheck_pieces.txt 2>&1
"
timeout 100 $B/new/bench_cuda --suite=prefill,train --tmin=16384 --tmax=65536 --Ns=0 --strategies=varlen --recurrent-tmax=0 --delta --deadline=60 --out=$R/new.csv > $R/new.txt 2>&1
timeout 60 $B/new/bench_cuda --suite=copy,decode --Ns=4,8,16 --deadline=0 --out=$R/decode.csv > $R/decode.txt 2>&1
timeout 120 $NCU --clock-control none --set full --import-source yes -k regex:chunk_intra -c 1 -o $R/intra $B/new/bench_cuda --suite=prefill --tmin=32768 --tmax=32768 --Ns=0 --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 > $R/ncu_intra_log.txt 2>&1
$NCU -i $R/intra.ncu-rep --page details --csv > $R/intra_details.csv 2>&1
$NCU -i $R/intra.ncu-rep --page source --csv --print-source cuda > $R/intra_src_cuda.csv 2>&1
$NCU -i $R/intra.ncu-rep --page source --csv --print-source sass > $R/intra_src_sass.csv 2>&1
timeout 120 $NCU --clock-control none --set full --import-source yes -k regex:"decode_kernel|recurrent_kernel|router_kernel|combine_kernel" --launch-skip 40 -c 4 -o $R/dec $B/new/bench_cuda --suite=decode --batch=128 --Ns=4 --deadline=0 --decode-reps=3 --graph-replays=2 > $R/ncu_dec_log.txt 2>&1
$NCU -i $R/dec.ncu-rep --page details --csv > $R/dec_details.csv 2>&1
$NCU -i $R/dec.ncu-rep --page source --csv --print-source cuda > $R/dec_src_cuda.csv 2>&1
echo done > $R/done.txt
cd $OUT && tar czf r.tgz r && rm -rf r
