#!/bin/bash
# For the next session's first device call: wud (branch s32-warp-uniform-delta, a159e41: uniform_warp_index() in
# the delta rule's kernels only; the same bits under the CPU emulation) against main as session 32 left it (fin,
# 4ed5ac3) — tests (prints compared with main's), the GLA / GDN / SSE-GDN rows alternated three times, ncu,
# compute-sanitizer; then, if the call has time and the card is an H200 (the issue's table must come from one), the
# same-call table with fin (by call7/run.sh). Carry .dev-s32 (fin.txz, wud.txz), .fixtures, .fla. ~5 min.
R=$OUT/r; mkdir -p $R; D=/tmp/s32; CAP=${CAP:-560}
left() { [ $SECONDS -lt $((CAP - $1)) ]; }
export LINSTATE_FIXTURES=$PWD/.fixtures
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }
for b in fin wud; do mkdir -p $D/$b && tar xf .dev-s32/$b.txz -C $D/$b; done
nvidia-smi > $R/smi.txt 2>&1
timeout 100 $D/wud/test_cuda > $R/tcf_wud.txt 2>&1; echo "rc=$?" >> $R/tcf_wud.txt; ts tcf_wud
timeout 100 $D/wud/test_cuda_backward -tce="timing*" > $R/tcb_wud.txt 2>&1; echo "rc=$?" >> $R/tcb_wud.txt; ts tcb_wud
P="--suite=prefill,train --tmin=8192 --tmax=65536 --strategies=varlen --recurrent-tmax=0 --deadline=40 --Ns=0 --delta"
for i in 1 2 3; do for b in fin wud; do timeout 60 $D/$b/bench_cuda $P --out=$R/gdn_$b$i.csv > $R/gdn_$b$i.txt 2>&1; ts "gdn_$b$i rc=$?"; done; done
A="--suite=train --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=0 --delta --strategies=varlen --tmin=32768 --tmax=32768"
for b in fin wud; do timeout 40 $NCU --clock-control none --metrics gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread -k regex:delta_ -c 16 --csv --page raw $D/$b/bench_cuda $A > $R/ncu_$b.csv 2>&1; ts ncu_$b; done
timeout 90 $CS --tool memcheck $D/wud/test_cuda_backward "-tc=*inputs on tensor cores*,*read by none*" > $R/memcheck_wud.txt 2>&1; echo "rc=$?" >> $R/memcheck_wud.txt; ts memcheck
timeout 100 $CS --tool racecheck $D/wud/test_cuda "-tc=*bf16 inputs on tensor cores*" > $R/racecheck_wud_f.txt 2>&1; echo "rc=$?" >> $R/racecheck_wud_f.txt; ts racecheck_f
timeout 100 $CS --tool racecheck $D/wud/test_cuda_backward "-tc=*inputs on tensor cores*" > $R/racecheck_wud_b.txt 2>&1; echo "rc=$?" >> $R/racecheck_wud_b.txt; ts racecheck_b
same() { cmp <(grep -h MESSAGE $1 | sed "s/.*MESSAGE: //") <(grep -h MESSAGE $R/$2 | sed "s/.*MESSAGE: //") >/dev/null && echo "$2: main's printed values" || echo "$2: printed values differ from main's"; }
(cd $R; grep NVIDIA smi.txt | head -1; same $OLDPWD/docs/data/issue11_s31/call1/tcf_main31.txt tcf_wud.txt; same $OLDPWD/docs/data/issue11_s31/call1/tcb_main31.txt tcb_wud.txt; tail -n 3 tc*_wud.txt memcheck_*.txt racecheck_*.txt; cat times.txt) > $R/summaryN.txt 2>&1
(cd $R && tar czf $OUT/logsN.tgz * && cp summaryN.txt $OUT/)
# the same-call table with fin (call7/run.sh, its output under t7/), where the card is an H200 and time is left
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && left 200 && mkdir -p $OUT/t7 && OUT=$OUT/t7 CAP=$((CAP - SECONDS)) bash docs/data/issue11_s32/call7/run.sh
