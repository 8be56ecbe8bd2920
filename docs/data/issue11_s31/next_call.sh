#!/bin/bash
# For the next session's first device call (not run in session 31: no device time was left): branch s31-state-fk
# (fba3d52 + e0ee014: the forward's state kernel with K a compile-time constant, e^{G_C} in phase (3), the warp index
# through a shuffle; the same bits) and s31-state-acc (5edbb9c on it: shorter mma chains, another summation order)
# and s31-warp-uniform (84bd7f5 on fk: uniform_warp_index() in every chunk kernel; the same bits) against main
# (f656fb0 = .dev-s31/rsc.txz's bench_cuda: main31 with the merged scans). Carry .dev-s31 (rsc.txz, fk.txz, acc.txz,
# wu.txz) and .fixtures; about 4 minutes. Output: logsN.tgz, summaryN.txt.
R=$OUT/r; mkdir -p $R; D=/tmp/s31
export LINSTATE_FIXTURES=$PWD/.fixtures
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }
for b in rsc fk acc wu; do mkdir -p $D/$b && tar xf .dev-s31/$b.txz -C $D/$b; done
timeout 100 $D/wu/test_cuda_backward -tce="timing*" > $R/tcb_wu.txt 2>&1; echo "rc=$?" >> $R/tcb_wu.txt; ts tcb_wu
for b in fk acc wu; do timeout 100 $D/$b/test_cuda > $R/tcf_$b.txt 2>&1; echo "rc=$?" >> $R/tcf_$b.txt; ts tcf_$b; done
P="--suite=prefill,train --tmin=8192 --tmax=65536 --strategies=varlen --recurrent-tmax=0 --deadline=40 --Ns=0 --delta"  # GLA, GDN, SSE-GDN n4k1s rows
for i in 1 2 3; do for b in rsc fk acc wu; do timeout 60 $D/$b/bench_cuda $P --out=$R/gdn_$b$i.csv > $R/gdn_$b$i.txt 2>&1; ts "gdn_$b$i rc=$?"; done; done
A="--suite=train --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=0 --delta --strategies=varlen --tmin=32768 --tmax=32768"
for b in rsc fk acc wu; do timeout 40 $NCU --clock-control none --metrics gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread -k regex:delta_ -c 16 --csv --page raw $D/$b/bench_cuda $A > $R/ncu_$b.csv 2>&1; ts ncu_$b; done
# doctest splits -tc at commas: one filter per name part
timeout 90 $CS --tool memcheck $D/fk/test_cuda "-tc=*bf16 inputs on tensor cores*" > $R/memcheck_fk.txt 2>&1; echo "rc=$?" >> $R/memcheck_fk.txt; ts memcheck_fk
timeout 120 $CS --tool racecheck $D/fk/test_cuda "-tc=*bf16 inputs on tensor cores*" > $R/racecheck_fk.txt 2>&1; echo "rc=$?" >> $R/racecheck_fk.txt; ts racecheck_fk
(cd $R; tail -n 3 tcf_fk.txt tcf_acc.txt tcf_wu.txt tcb_wu.txt memcheck_fk.txt racecheck_fk.txt; grep -h "^prefill *gdn" gdn_*1.txt; cat times.txt) > $R/summaryN.txt 2>&1
cd $R && tar czf $OUT/logsN.tgz * && cp summaryN.txt $OUT/
