#!/bin/bash
# session 9, issue 11 item 5 (decode): device call 1. A = main's binaries (bf316a0), C = s9-dec (decode
# kernel, __launch_bounds__(512, 2)), C1 = bench_decode_cuda of the same with __launch_bounds__(512, 1);
# U = C's bench_cuda with --decode-path=three-kernel (router, recurrent, combine: the path before).
D=.dev-dec; O=$OUT; cd "$(dirname "$0")/.."
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv > $O/gpu.txt 2>&1
for r in A1:A C1:C U1:C U2:C C2:C A2:A; do n=${r%%:*}; b=${r##*:}; x=""; [ ${n:0:1} = U ] && x="--decode-path=three-kernel"
  timeout 20 $D/$b/bench_cuda --suite=copy,decode --deadline=0 $x --out=$O/dec_$n.csv > $O/dec_$n.txt 2>&1; el "bench $n rc=$?"; done
for r in A C C1 C1 C A; do timeout 8 $D/$r/bench_decode_cuda >> $O/bdc_$r.txt 2>&1; done; el bdc
timeout 35 $D/C/test_cuda > $O/test_cuda.txt 2>&1; echo "test_cuda rc=$?" >> $O/test_cuda.txt; tail -4 $O/test_cuda.txt; el tests
timeout 20 compute-sanitizer --tool memcheck $D/C/test_cuda -tc='decode*,prefill, then decode*,non-finite*' > $O/memcheck.txt 2>&1; tail -3 $O/memcheck.txt; el memcheck
timeout 20 compute-sanitizer --tool racecheck $D/C/test_cuda -tc='decode*' > $O/racecheck.txt 2>&1; tail -3 $O/racecheck.txt; el racecheck
timeout 12 ncu --clock-control none -k regex:decode_kernel -s 20 -c 1 --section SpeedOfLight --section Occupancy --section LaunchStats $D/C/bench_decode_cuda 128 > $O/ncu_C.txt 2>&1; el ncu
cd $O && tar czf all.tgz *.txt *.csv; grep -h "B=\|checks\|graph" bdc_*.txt | head -40
