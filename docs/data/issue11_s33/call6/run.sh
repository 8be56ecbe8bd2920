#!/bin/bash
# session 33 call 6: build r2 (branch s33-bprep-rows2: delta_prep_kernel's l2norm step two rows a warp at once)
# against main (5dde6d8, build `main` = .dev-s33/main.txz) — test_cuda_backward (printed values compared with
# main's), the GDN / SSE-GDN / GLA train rows alternated three times, ncu of the backward prep (durations,
# instructions), memcheck / racecheck of the backward's tensor-core cases; then, on an H200 where time is left,
# call 2's table (into $OUT/t). Carry .dev-s33 (main.txz, r2.txz), .fixtures, .fla.
# Output: $OUT/logs6.tgz, $OUT/summary6.txt (and $OUT/t/logs2.tgz, $OUT/t/summary2.txt).
R=/tmp/r6; mkdir -p $R; D=/tmp/s33; CAP=${CAP:-580}
left() { [ $SECONDS -lt $((CAP - $1)) ]; }
ts() { echo "$1 $SECONDS" >> $R/times.txt; }
same() { cmp <(grep -h MESSAGE $1 | sed "s/.*MESSAGE: //") <(grep -h MESSAGE $R/$2 | sed "s/.*MESSAGE: //") >/dev/null && echo "$2: main's printed values" || echo "$2: printed values differ from main's"; }
for b in main r2; do mkdir -p $D/$b && tar xf .dev-s33/$b.txz -C $D/$b; done
export LINSTATE_FIXTURES=$PWD/.fixtures
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
nvidia-smi > $R/smi.txt 2>&1
timeout 100 $D/r2/test_cuda_backward -tce="timing*" > $R/tcb_r2.txt 2>&1; echo "rc=$?" >> $R/tcb_r2.txt; ts tcb_r2
B="--suite=train --tmin=8192 --tmax=65536 --strategies=varlen --recurrent-tmax=0 --deadline=40 --Ns=0 --delta"
for i in 1 2 3; do for b in main r2; do timeout 50 $D/$b/bench_cuda $B --out=$R/gdn_$b$i.csv > $R/gdn_$b$i.txt 2>&1; ts "gdn_$b$i rc=$?"; done; done
A="--suite=train --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=0 --delta --strategies=varlen --tmin=32768 --tmax=32768"
for b in main r2; do timeout 40 $NCU --clock-control none --metrics gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread,smsp__issue_active.avg.pct_of_peak_sustained_active -k regex:delta_prep_kernel -c 4 --csv --page raw $D/$b/bench_cuda $A > $R/ncu_$b.csv 2>&1; ts ncu_$b; done
timeout 60 $CS --tool memcheck $D/r2/test_cuda_backward "-tc=*inputs on tensor cores*" > $R/memcheck_r2.txt 2>&1; echo "rc=$?" >> $R/memcheck_r2.txt; ts memcheck
timeout 90 $CS --tool racecheck $D/r2/test_cuda_backward "-tc=*inputs on tensor cores*" > $R/racecheck_r2.txt 2>&1; echo "rc=$?" >> $R/racecheck_r2.txt; ts racecheck
(cd $R; grep NVIDIA smi.txt | head -1; same $OLDPWD/docs/data/issue11_s31/call1/tcb_main31.txt tcb_r2.txt; tail -n 3 tcb_r2.txt memcheck_r2.txt racecheck_r2.txt; cat times.txt) > $R/summary6.txt 2>&1
(cd $R && tar czf $OUT/logs6.tgz * && cp summary6.txt $OUT/)
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && left 230 && mkdir -p $OUT/t && OUT=$OUT/t CAP=$((CAP - SECONDS)) bash docs/data/issue11_s33/call2/run.sh
true
