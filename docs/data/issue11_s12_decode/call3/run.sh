#!/bin/bash
# s12-dec (4719b0a / cc4b99b), built with the output-rounding fix: confirm the decode tests on the device.
# One call, about 40 s of command: test_cuda -tc='*decode*', memcheck and racecheck of the decode cases,
# and the B = 128 decode rows once (main's binary beside it, base/).
D=.dev-dec; O=$OUT; mkdir -p $O/r
timeout 100 $D/final/test_cuda -tc='*decode*,non-finite*' > $O/r/test_cuda.txt 2>&1; echo "test_cuda rc=$?" >> $O/r/test_cuda.txt; tail -4 $O/r/test_cuda.txt
timeout 70 compute-sanitizer --tool memcheck $D/final/test_cuda -tc='decode step*,prefill, then decode*,non-finite*' > $O/r/memcheck.txt 2>&1; tail -2 $O/r/memcheck.txt
timeout 70 compute-sanitizer --tool racecheck $D/final/test_cuda -tc='decode step*,non-finite*' > $O/r/racecheck.txt 2>&1; tail -2 $O/r/racecheck.txt
for r in base final final base; do timeout 30 $D/$r/bench_cuda --suite=copy,decode --Ns=4,8,16 --batch=128 --deadline=0 > $O/r/dec_$r.txt 2>&1; grep "^decode.*graph" $O/r/dec_$r.txt | awk '{print $2, $6, $9}' | tr '\n' ';'; echo; done
cd $O/r && tar czf ../r.tgz *
