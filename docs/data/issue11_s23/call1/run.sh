#!/bin/bash
# session 23 call 1: build 1 (the prep's bf16 copies of W, A and the k, q rows for the backward's two
# tensor-core scans; fragments by ldmatrix) and build 2 (1 + the reverse scan's records loaded a chunk
# ahead) against build 0 (main, d3cae32): tests of builds 1 and 2 (the tensor-core GDN case's printed
# ratios: the same bits as main's), memcheck / racecheck of the delta-rule cases, GDN and SSE-GDN
# prefill / train rows alternated twice, ncu (duration, instructions) of the delta kernels of one GDN
# train call at 32768, ncu source counters of build 0's gradient kernel. (As first run, its files came
# back one by one and past the count limit; the timing rows were run again in call 2.)
R=$OUT/r; mkdir -p $R; D=/tmp/s23; for b in b0 b1 b2; do mkdir -p $D/$b; tar xzf .dev-lead/s23_$b.tgz -C $D/$b; done
export LINSTATE_FIXTURES=$PWD/.fixtures
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
export R D CS NCU
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }; export -f ts
timeout 570 bash -c '
ts start
for b in b1 b2; do timeout 90 $D/$b/test_cuda_backward -tce="timing*" > $R/tcb_$b.txt 2>&1; echo "rc=$?" >> $R/tcb_$b.txt; ts tcb_$b; done
timeout 60 $D/b2/test_cuda > $R/test_cuda.txt 2>&1; echo "rc=$?" >> $R/test_cuda.txt; ts test_cuda
P="--suite=prefill,train --tmin=8192 --tmax=65536 --Ns=0 --delta --strategies=varlen --recurrent-tmax=0 --deadline=40"
for i in 1 2; do
  for b in b0 b1 b2; do timeout 80 $D/$b/bench_cuda $P --out=$R/t_${b}$i.csv > $R/t_${b}$i.txt 2>&1; ts "t_$b$i rc=$?"; done
done
timeout 80 $D/b2/bench_cuda $P --bscan-warps=16 --out=$R/t_b2w16.csv > $R/t_b2w16.txt 2>&1; ts "t_b2w16 rc=$?"
for b in b0 b1 b2; do
timeout 60 $NCU --clock-control none --metrics gpu__time_duration.sum,smsp__inst_executed.sum -k regex:delta -c 13 --csv --page raw $D/$b/bench_cuda --suite=train --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=0 --delta --strategies=varlen --tmin=32768 --tmax=32768 > $R/ncu_$b.csv 2>&1; ts ncu$b
done
timeout 90 $CS --tool memcheck $D/b2/test_cuda_backward "-tc=*inputs on tensor cores*,*8 and 16 warps*,*side by side*,*subsets*" > $R/memcheck_b.txt 2>&1; echo "rc=$?" >> $R/memcheck_b.txt; ts memcheck_b
timeout 90 $CS --tool racecheck --racecheck-report all $D/b2/test_cuda_backward "-tc=*inputs on tensor cores*" > $R/racecheck_b.txt 2>&1; echo "rc=$?" >> $R/racecheck_b.txt; ts racecheck_b
A="--suite=train --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=0 --delta --strategies=varlen --tmin=32768 --tmax=32768"
timeout 120 $NCU --clock-control none --section SourceCounters --section WarpStateStats --page source --print-source cuda,sass --csv -k regex:delta_grad -c 1 $D/b0/bench_cuda $A > $R/src_delta_grad_b0.csv 2> $R/src_delta_grad_b0.err; ts src_grad
gzip $R/src_delta_grad_b0.csv
'
echo "rc_all=$?" > $R/done.txt
cd $R && (for b in b1 b2; do echo "== $b"; grep -h "MESSAGE" tcb_$b.txt | grep -i gdn | sed "s/.*MESSAGE: //"; done; tail -n 4 tcb_b1.txt tcb_b2.txt test_cuda.txt memcheck_b.txt racecheck_b.txt) > summary.txt 2>&1; cat times.txt >> summary.txt
cd $R && tar czf $OUT/logs.tgz * && cp summary.txt $OUT/; rm -rf $R
