#!/bin/bash
# session 12, issue 11 item 5 (decode, B = 128): device call 1. A = main's bench_cuda (c497162, unmodified);
# N = s12-dec (decode_stream_kernel): auto (the library's choice), S0/S1/S2 = --decode-path=stream with
# --decode-variant=0/1/2, T = --decode-path=three-kernel. Alternated, one process per run.
D=.dev-dec; O=$OUT; mkdir -p $O/r
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv > $O/r/gpu.txt 2>&1
B="--suite=copy,decode --Ns=4,8,16 --deadline=0"
for r in A1:base: N1:new: S0a:new:--decode-path=stream S1a:new:--decode-path=stream_--decode-variant=1 S2a:new:--decode-path=stream_--decode-variant=2 T1:new:--decode-path=three-kernel S2b:new:--decode-path=stream_--decode-variant=2 S1b:new:--decode-path=stream_--decode-variant=1 S0b:new:--decode-path=stream N2:new: A2:base:; do
  n=${r%%:*}; rest=${r#*:}; b=${rest%%:*}; x=${rest#*:}; x=${x//_/ }
  timeout 30 $D/$b/bench_cuda $B $x --out=$O/r/dec_$n.csv > $O/r/dec_$n.txt 2>&1; el "bench $n rc=$?"; done
timeout 100 $D/new/test_cuda -tc='*decode*' > $O/r/test_cuda.txt 2>&1; echo "test_cuda rc=$?" >> $O/r/test_cuda.txt; tail -4 $O/r/test_cuda.txt; el tests
timeout 60 compute-sanitizer --tool memcheck $D/new/test_cuda -tc='decode step*' > $O/r/memcheck.txt 2>&1; tail -3 $O/r/memcheck.txt; el memcheck
timeout 60 compute-sanitizer --tool racecheck $D/new/test_cuda -tc='decode step kernel*' > $O/r/racecheck.txt 2>&1; tail -3 $O/r/racecheck.txt; el racecheck
timeout 30 ncu --clock-control none --kernel-name-base demangled -k regex:'decode_stream_kernel.*top_k' -c 1 --set full --csv --page details $D/new/bench_cuda --suite=decode --batch=128 --Ns=4 --decode-path=stream --deadline=0 > $O/r/ncu_S0.csv 2> $O/r/ncu_S0.err; el "ncu rc=$?"
cd $O/r && tar czf ../r.tgz *
for f in A1 N1 S0a S1a S2a T1 A2; do echo "== $f"; grep "^decode.*graph" dec_$f.txt | awk '{print $2, $6, $9}' | tr '\n' ';'; echo; done
