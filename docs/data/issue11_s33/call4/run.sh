#!/bin/bash
# session 33 call 4: build pv (branch s33-prep-vtile: delta_tc_prep_kernel's V tiles through tile_gather16, a
# refactor) against main (aebfcf7) — tests (printed values compared with main's), the GDN / SSE-GDN / GLA rows
# alternated three times, ncu durations of the tensor-core prep; then, where the card is an H200 and time is left,
# the issue's same-call table (call2/run.sh into $OUT/t). Carry .dev-s33 (main.txz, pv.txz), .fixtures, .fla.
# Output: $OUT/logs4.tgz, $OUT/summary4.txt (and $OUT/t/logs2.tgz, $OUT/t/summary2.txt).
R=/tmp/r4; mkdir -p $R; D=/tmp/s33; CAP=${CAP:-580}
left() { [ $SECONDS -lt $((CAP - $1)) ]; }
ts() { echo "$1 $SECONDS" >> $R/times.txt; }
same() { cmp <(grep -h MESSAGE $1 | sed "s/.*MESSAGE: //") <(grep -h MESSAGE $R/$2 | sed "s/.*MESSAGE: //") >/dev/null && echo "$2: main's printed values" || echo "$2: printed values differ from main's"; }
for b in main pv; do mkdir -p $D/$b && tar xf .dev-s33/$b.txz -C $D/$b; done
export LINSTATE_FIXTURES=$PWD/.fixtures
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
nvidia-smi > $R/smi.txt 2>&1
timeout 100 $D/pv/test_cuda > $R/tcf_pv.txt 2>&1; echo "rc=$?" >> $R/tcf_pv.txt; ts tcf_pv
timeout 100 $D/pv/test_cuda_backward -tce="timing*" > $R/tcb_pv.txt 2>&1; echo "rc=$?" >> $R/tcb_pv.txt; ts tcb_pv
P="--suite=prefill,train --tmin=8192 --tmax=65536 --strategies=varlen --recurrent-tmax=0 --deadline=40 --Ns=0 --delta"
for i in 1 2 3; do for b in main pv; do timeout 50 $D/$b/bench_cuda $P --out=$R/gdn_$b$i.csv > $R/gdn_$b$i.txt 2>&1; ts "gdn_$b$i rc=$?"; done; done
A="--suite=prefill --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=0 --delta --strategies=varlen --tmin=32768 --tmax=32768"
for b in main pv; do timeout 40 $NCU --clock-control none --metrics gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread -k regex:delta_tc_prep -c 12 --csv --page raw $D/$b/bench_cuda $A > $R/ncu_$b.csv 2>&1; ts ncu_$b; done
(cd $R; grep NVIDIA smi.txt | head -1; same $OLDPWD/docs/data/issue11_s31/call1/tcf_main31.txt tcf_pv.txt; same $OLDPWD/docs/data/issue11_s31/call1/tcb_main31.txt tcb_pv.txt; tail -n 3 tc*_pv.txt; cat times.txt) > $R/summary4.txt 2>&1
(cd $R && tar czf $OUT/logs4.tgz * && cp summary4.txt $OUT/)
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && left 230 && mkdir -p $OUT/t && OUT=$OUT/t CAP=$((CAP - SECONDS)) bash docs/data/issue11_s33/call2/run.sh
