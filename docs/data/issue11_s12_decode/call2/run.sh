#!/bin/bash
# session 12, issue 11 item 5 (decode, B = 128): device call 2. A = main's bench_cuda (c497162, unmodified);
# N = s12-dec as landed (auto: the library's choice); V1/V2 = --decode-path=stream --decode-variant=1/2
# (decode_stream_kernel at every size, 64- / 128-register variant); T = --decode-path=three-kernel.
# Alternated, one process per run; then test_cuda (all cases), memcheck, racecheck, ncu.
D=.dev-dec; O=$OUT; mkdir -p $O/r
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv > $O/r/gpu.txt 2>&1
B="--suite=copy,decode --Ns=4,8,16 --deadline=0"
for r in A1:base: N1:new: V1a:new:--decode-path=stream_--decode-variant=1 V2a:new:--decode-path=stream_--decode-variant=2 T1:new:--decode-path=three-kernel V2b:new:--decode-path=stream_--decode-variant=2 V1b:new:--decode-path=stream_--decode-variant=1 N2:new: A2:base:; do
  n=${r%%:*}; rest=${r#*:}; b=${rest%%:*}; x=${rest#*:}; x=${x//_/ }
  timeout 30 $D/$b/bench_cuda $B $x --out=$O/r/dec_$n.csv > $O/r/dec_$n.txt 2>&1; el "bench $n rc=$?"; done
timeout 120 $D/new/test_cuda > $O/r/test_cuda.txt 2>&1; echo "test_cuda rc=$?" >> $O/r/test_cuda.txt; tail -4 $O/r/test_cuda.txt; el tests
timeout 70 compute-sanitizer --tool memcheck $D/new/test_cuda -tc='decode step*,prefill, then decode*,non-finite*' > $O/r/memcheck.txt 2>&1; tail -3 $O/r/memcheck.txt; el memcheck
timeout 70 compute-sanitizer --tool racecheck $D/new/test_cuda -tc='decode step*,non-finite*' > $O/r/racecheck.txt 2>&1; tail -3 $O/r/racecheck.txt; el racecheck
timeout 30 ncu --clock-control none --kernel-name-base demangled -k regex:'decode_stream_kernel.*top_k' -c 1 --set full --csv --page details $D/new/bench_cuda --suite=decode --batch=128 --Ns=4 --deadline=0 > $O/r/ncu_N_n4.csv 2> $O/r/ncu_N_n4.err; el "ncu rc=$?"
cd $O/r && tar czf ../r.tgz *
for f in A1 N1 V1a V2a T1 N2 A2; do echo "== $f"; grep "^decode.*graph" dec_$f.txt | awk '{print $2, $6, $9}' | tr '\n' ';'; echo; done
