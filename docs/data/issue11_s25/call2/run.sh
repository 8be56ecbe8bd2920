#!/bin/bash
# session 25 call 2 (for the next session, after call 1): racecheck of builds 10 and 11 (the gradient
# kernels' split, session 24's prep branch, the dO role beside the reverse scan) and ncu --set full of
# build 8's two gradient kernels (delta_grad_products_kernel, delta_grad_kernel) in one GDN train call at
# 32768. Builds: ../README.md; carry .dev-lead and .fixtures.
R=$OUT/r; mkdir -p $R; D=/tmp/s25
for b in b8 b10 b11; do mkdir -p $D/$b; f=$(ls .dev-lead/s2[45]_$b.t[gx]z | head -1); tar xf $f -C $D/$b 2>/dev/null || python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" $f $D/$b; done
export LINSTATE_FIXTURES=$PWD/.fixtures
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }
for b in b10 b11; do
  timeout 150 $CS --tool racecheck --racecheck-report all $D/$b/test_cuda_backward "-tc=*gated delta rule*" > $R/racecheck_$b.txt 2>&1; echo "rc=$?" >> $R/racecheck_$b.txt; ts racecheck_$b
done
timeout 120 $NCU --clock-control none --set full -k regex:delta_grad -c 2 --csv --page details $D/b8/bench_cuda --suite=train --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=0 --delta --strategies=varlen --tmin=32768 --tmax=32768 > $R/full_grad_b8.csv 2>&1; ts ncu_full
cd $R && (tail -n 4 racecheck_b*.txt; cat times.txt) > summary.txt 2>&1
tar czf $OUT/logs.tgz *; cp summary.txt $OUT/; rm -rf $R
