#!/bin/bash
# issue 11 session 15 (s15-dec), the one device call: decode at small batch — one launch (decode_split.cuh).
# A = main 0ce5142's bench_cuda (built unmodified before the branch's edits); N = s15-dec (auto);
# F = s15-dec with --decode-path=fused (decode.cuh at B = 1 and 16: what main runs there for N <= 8).
D=.dev-dec; R=/tmp/r; mkdir -p $R
(cd $D && tar xzf bins.tgz)
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R/log.txt; }
left() { [ $(( $(date +%s) - t0 )) -lt $1 ]; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv > $R/gpu.txt 2>&1
$D/host_probe > $R/host_probe.txt 2>&1; el "host_probe rc=$?"; cat $R/host_probe.txt
timeout 45 $D/test_cuda -tc='*decode*,non-finite*' > $R/test_cuda.txt 2>&1; echo "rc=$?" >> $R/test_cuda.txt; el "tests"; tail -4 $R/test_cuda.txt
B="--suite=copy,decode --Ns=4,8,16 --deadline=0"
timeout 30 $D/bench_cuda_main $B --out=$R/dec_A1.csv > $R/dec_A1.txt 2>&1; el "bench A1 rc=$?"
timeout 30 $D/bench_cuda $B --out=$R/dec_N1.csv > $R/dec_N1.txt 2>&1; el "bench N1 rc=$?"
timeout 30 compute-sanitizer --tool memcheck $D/test_cuda -tc='decode step: unselected*,*then decode steps*' > $R/memcheck.txt 2>&1; el "memcheck rc=$?"; tail -2 $R/memcheck.txt
left 135 && { timeout 30 compute-sanitizer --tool racecheck $D/test_cuda -tc='decode step: unselected*' > $R/racecheck.txt 2>&1; el "racecheck rc=$?"; tail -2 $R/racecheck.txt; }
left 140 && { timeout 20 $D/bench_cuda $B --batch=1,16 --decode-path=fused --out=$R/dec_F1.csv > $R/dec_F1.txt 2>&1; el "bench F1 rc=$?"; }
left 145 && { timeout 20 compute-sanitizer --tool memcheck $D/test_cuda -tc='decode step kernel*' > $R/memcheck2.txt 2>&1; el "memcheck2 rc=$?"; tail -2 $R/memcheck2.txt; }
cd $R && tar czf $OUT/r.tgz * && cp log.txt $OUT/
for f in A1 N1 F1; do [ -f $R/dec_$f.txt ] && { echo "== $f"; grep "^decode " $R/dec_$f.txt | awk '$6<=16 {print $2, $5, $6, $9}' | tr '\n' ';'; echo; }; done
