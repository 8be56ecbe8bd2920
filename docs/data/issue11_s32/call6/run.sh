#!/bin/bash
# session 32 call 6: b4 (branch s32-bprep-vec: the backward prep's l2norm step and W operand four adjacent elements a
# lane) against main after the merge (.dev-s32/bp3.txz: the merged tree's build) — test_cuda_backward (prints
# compared with main's), the GDN / SSE-GDN rows alternated three times, ncu durations, memcheck and racecheck of the
# backward, the backward prep's source counters; main's forward at 2-5 pieces alternated three times.
# Carry .dev-s32, .fixtures. Output: logs6.tgz, summary6.txt.
R=$OUT/r; mkdir -p $R; D=/tmp/s32
export LINSTATE_FIXTURES=$PWD/.fixtures
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }
for b in bp3 b4; do mkdir -p $D/$b && tar xf .dev-s32/$b.txz -C $D/$b; done
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $R/smi.txt 2>&1
timeout 100 $D/b4/test_cuda_backward -tce="timing*" > $R/tcb_b4.txt 2>&1; echo "rc=$?" >> $R/tcb_b4.txt; ts tcb_b4
P="--suite=prefill,train --tmin=8192 --tmax=65536 --strategies=varlen --recurrent-tmax=0 --deadline=40 --Ns=0 --delta"
for i in 1 2 3; do for b in bp3 b4; do timeout 60 $D/$b/bench_cuda $P --out=$R/gdn_$b$i.csv > $R/gdn_$b$i.txt 2>&1; ts "gdn_$b$i rc=$?"; done; done
A="--suite=train --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=0 --delta --strategies=varlen --tmin=32768 --tmax=32768"
for b in bp3 b4; do timeout 40 $NCU --clock-control none --metrics gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread,launch__grid_size -k regex:delta_ -c 16 --csv --page raw $D/$b/bench_cuda $A > $R/ncu_$b.csv 2>&1; ts ncu_$b; done
for i in 1 2 3; do for pc in 2 3 4 5; do timeout 30 $D/bp3/bench_cuda --suite=prefill --tmin=32768 --tmax=65536 --Ns=0 --delta --strategies=varlen --recurrent-tmax=0 --deadline=10 --pieces=$pc --out=$R/pieces${pc}_$i.csv > $R/pieces${pc}_$i.txt 2>&1; done; done; ts pieces
timeout 100 $CS --tool memcheck $D/b4/test_cuda_backward "-tc=*inputs on tensor cores*,*read by none*" > $R/memcheck_b4.txt 2>&1; echo "rc=$?" >> $R/memcheck_b4.txt; ts memcheck_b4
timeout 100 $CS --tool racecheck $D/b4/test_cuda_backward "-tc=*inputs on tensor cores*" > $R/racecheck_b4.txt 2>&1; echo "rc=$?" >> $R/racecheck_b4.txt; ts racecheck_b4
timeout 40 $NCU --clock-control none --section SourceCounters --section WarpStateStats --page source --print-source sass --csv -k regex:delta_prep -c 1 $D/b4/bench_cuda $A > $R/src_prep_b4.csv 2> $R/src_prep_b4.err; gzip -f $R/src_prep_b4.csv; ts src_prep
same() { cmp <(grep -h MESSAGE $1 | sed "s/.*MESSAGE: //") <(grep -h MESSAGE $R/$2 | sed "s/.*MESSAGE: //") >/dev/null && echo "$2: main's printed values" || echo "$2: printed values differ from main's"; }
(cd $R; cat smi.txt; same $OLDPWD/docs/data/issue11_s31/call1/tcb_main31.txt tcb_b4.txt; tail -n 3 tcb_b4.txt memcheck_*.txt racecheck_*.txt; grep -h "gdn" gdn_*1.txt | grep -v "^#"; cat times.txt) > $R/summary6.txt 2>&1
cd $R && tar czf $OUT/logs6.tgz * && cp summary6.txt $OUT/
