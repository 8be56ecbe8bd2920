#!/bin/bash
# session 29 call 1, part 3 (after run.sh and run2.sh): branch s29-ds-products (on s29-rscan-norec) — ⟨D, S⟩
# formed by kernel 5a's first role for kernel 5b (the same bits) — against s29_norec. Its archive waits in
# build-hold/ (ignored, not carried), as the call may carry no more than 64 MiB. Before the call:
#   mkdir -p build-hold/off && mv .dev-lead/*.txz build-hold/off/ && mv build-hold/off/s29_norec.txz .dev-lead/ \
#     && cp build-hold/s29_ds.txz .dev-lead/
# then carry .dev-lead and .fixtures (about 2 minutes); afterwards move the archives back.
R=$OUT/r; mkdir -p $R; D=/tmp/s29; B="s29_norec s29_ds"
for b in $B; do mkdir -p $D/$b; tar xf .dev-lead/$b.txz -C $D/$b; done
export LINSTATE_FIXTURES=$PWD/.fixtures
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }
for b in $B; do timeout 90 $D/$b/test_cuda_backward -tc="*inputs on tensor cores*" > $R/tc_$b.txt 2>&1; echo "rc=$?" >> $R/tc_$b.txt; ts tc_$b; done
timeout 150 $D/s29_ds/test_cuda_backward -tce="timing*" > $R/tcb_s29_ds.txt 2>&1; echo "rc=$?" >> $R/tcb_s29_ds.txt; ts tcb
P="--suite=train --tmin=8192 --tmax=65536 --Ns=0 --delta --strategies=varlen --recurrent-tmax=0 --deadline=40"
for i in 1 2 3 4; do for b in $B; do timeout 80 $D/$b/bench_cuda $P --out=$R/t_${b}$i.csv > $R/t_${b}$i.txt 2>&1; ts "t_$b$i rc=$?"; done; done
for b in $B; do
  timeout 60 $NCU --clock-control none --metrics gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread -k regex:delta_ -c 16 --csv --page raw $D/$b/bench_cuda --suite=train --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=0 --delta --strategies=varlen --tmin=32768 --tmax=32768 > $R/ncu_$b.csv 2>&1; ts ncu$b
done
timeout 60 $CS --tool memcheck $D/s29_ds/test_cuda_backward "-tc=*gated delta rule*,*two blocks per SM*,*read by none*" > $R/memcheck_s29_ds.txt 2>&1; echo "rc=$?" >> $R/memcheck_s29_ds.txt; ts memcheck
cd $R && (cmp <(grep -h MESSAGE tc_s29_norec.txt | sed "s/.*MESSAGE: //") <(grep -h MESSAGE tc_s29_ds.txt | sed "s/.*MESSAGE: //") >/dev/null && echo "s29_ds ratios: norec's digits" || echo "s29_ds ratios differ from norec's"
  tail -n 3 tc_*.txt tcb_*.txt memcheck_*.txt; grep -h "^train *gdn\|^train *sse_gdn" t_*.txt; cat times.txt) > summary3.txt 2>&1
tar czf $OUT/logs3.tgz *; cp summary3.txt $OUT/; rm -rf $R
