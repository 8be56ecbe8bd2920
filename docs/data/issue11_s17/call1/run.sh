#!/bin/bash
# session 17 call 1: A = landed main (b0c2adb: s16_binS3 bench_cuda); N = this tree (decode routing over registers when
# the partition policy fixes N, the token's q/k/g/v loaded before the routing). Tests + sanitizers on the decode cases,
# decode rows A/N alternated twice.
R=$OUT/r; mkdir -p $R; D=/tmp/s17; mkdir -p $D/A $D/N
tar xzf .dev-lead/s16_binS3.tgz -C $D/A; tar xzf .dev-lead/s17_bin1.tgz -C $D/N
export LINSTATE_FIXTURES=$PWD/.fixtures
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
export R D CS
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }; export -f ts
nvidia-smi > $R/smi.txt 2>&1
timeout 330 bash -c '
ts start
timeout 60 $D/N/test_cuda > $R/N_test_cuda.txt 2>&1; echo "rc=$?" >> $R/N_test_cuda.txt; ts test_cuda
Q="--suite=copy,decode --Ns=4,8,16 --deadline=0"
for i in 1 2; do
  for b in A N; do timeout 25 $D/$b/bench_cuda $Q --out=$R/dec_${b}$i.csv > $R/dec_${b}$i.txt 2>&1; ts dec_$b$i; done
done
timeout 25 $D/N/bench_cuda $Q --batch=1 --decode-path=split --out=$R/dec_Nsplit.csv > $R/dec_Nsplit.txt 2>&1; ts dec_Nsplit
timeout 70 $CS --tool memcheck $D/N/test_cuda "-tc=*decode*,non-finite*" > $R/memcheck.txt 2>&1; echo "rc=$?" >> $R/memcheck.txt; ts memcheck
timeout 70 $CS --tool racecheck $D/N/test_cuda "-tc=decode step: N fixed*,decode step: unselected*" > $R/racecheck.txt 2>&1; echo "rc=$?" >> $R/racecheck.txt; ts racecheck
'
echo "rc_all=$?" > $R/done.txt
cd $R && tail -n 3 N_test_cuda.txt memcheck.txt racecheck.txt > summary.txt 2>&1; cat times.txt >> summary.txt
cd $OUT && tar czf r.tgz r && cp r/summary.txt . && rm -rf r
