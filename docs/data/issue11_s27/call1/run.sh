#!/bin/bash
# session 27 call 1: the builds of sessions 25 and 26, rebuilt in session 27 (.dev-lead/s27_b*.txz; the
# earlier sessions' archives were lost with their machine), measured side by side. Carry .dev-lead and
# .fixtures. Builds (README.md beside this folder):
#   b0  = main's CUDA code (4c70547's)           b8  = s25-grad-split (e747ad8): kernel 5 split in 5a + 5b
#   b12 = s26-grad-2cta (daf59d5): b8 + kernel 5b for bf16 at two 256-thread blocks per SM
#   b13 = s27-combo (065b934): b12 merged with s24-prep-split (session 24's prep split: split_mma, the
#         prep at two blocks per SM)
#   b14 = s27-combo2 (355012f): b13 merged with s25-dA-beside (3943fee: 5a's dO role after the states'
#         pass, on the side stream beside the reverse scan)
# (sessions 25-26's builds 10 = 8 + the prep split and 11 = 8 + the dO role are left out: the carry's
# 64 MiB; 13 against 12 and 14 against 13 measure the same two changes)
# Build 8 must print build 0's tensor-core ratios digit for digit, 13 and 14 build 12's (12's 5b
# adds its row dot products in another order: its last digits may differ from 0's); the script compares.
R=$OUT/r; mkdir -p $R; D=/tmp/s27; B="b0 b8 b12 b13 b14"
for b in $B; do mkdir -p $D/$b; tar xf .dev-lead/s27_$b.txz -C $D/$b; done
export LINSTATE_FIXTURES=$PWD/.fixtures
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }
ok() { [ $SECONDS -lt ${1:-470} ] || { echo "skipped at ${SECONDS}s: $2" >> $R/times.txt; false; }; }  # the call's 600 s
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
for b in $B; do
  timeout 90 $D/$b/test_cuda_backward -tc="*inputs on tensor cores*" > $R/tc_$b.txt 2>&1; echo "rc=$?" >> $R/tc_$b.txt; ts tc_$b
done
for b in b8 b12 b13 b14; do timeout 150 $D/$b/test_cuda_backward -tce="timing*" > $R/tcb_$b.txt 2>&1; echo "rc=$?" >> $R/tcb_$b.txt; ts tcb_$b; done
timeout 150 $D/b12/test_cuda > $R/test_cuda_b12.txt 2>&1; echo "rc=$?" >> $R/test_cuda_b12.txt; ts test_cuda_b12
P="--suite=train --tmin=8192 --tmax=65536 --Ns=0 --delta --strategies=varlen --recurrent-tmax=0 --deadline=40"
for i in 1 2 3; do
  for b in $B; do timeout 80 $D/$b/bench_cuda $P --out=$R/t_${b}$i.csv > $R/t_${b}$i.txt 2>&1; ts "t_$b$i rc=$?"; done
done
for b in $B; do
  timeout 60 $NCU --clock-control none --metrics gpu__time_duration.sum,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__occupancy_limit_shared_mem,lts__t_sector_hit_rate.pct -k regex:delta -c 15 --csv --page raw $D/$b/bench_cuda --suite=train --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=0 --delta --strategies=varlen --tmin=32768 --tmax=32768 > $R/ncu_$b.csv 2>&1; ts ncu$b
done
ok 400 ncu_full && timeout 90 $NCU --clock-control none --set full -k regex:delta_grad -c 3 --csv --page details $D/b12/bench_cuda --suite=train --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=0 --delta --strategies=varlen --tmin=32768 --tmax=32768 > $R/full_grad_b12.csv 2>&1; ts ncu_full
T="-tc=*gated delta rule*,*two blocks per SM*,*subsets*,*read by none*"
for b in b8 b12 b13 b14; do
  ok 450 memcheck_$b && timeout 60 $CS --tool memcheck $D/$b/test_cuda_backward "$T" > $R/memcheck_$b.txt 2>&1; echo "rc=$?" >> $R/memcheck_$b.txt; ts memcheck_$b
done
for b in b14 b12; do
  ok 480 racecheck_$b && timeout $((540 - SECONDS)) $CS --tool racecheck $D/$b/test_cuda_backward "-tc=*two blocks per SM*,*read by none*,*gated delta rule*" > $R/racecheck_$b.txt 2>&1; echo "rc=$?" >> $R/racecheck_$b.txt; ts racecheck_$b
done
cd $R && (for b in $B; do echo "== $b"; grep -h "MESSAGE" tc_$b.txt | sed "s/.*MESSAGE: //"; done
  for b in b8 b12; do cmp <(grep -h MESSAGE tc_b0.txt | sed "s/.*MESSAGE: //") <(grep -h MESSAGE tc_$b.txt | sed "s/.*MESSAGE: //") >/dev/null && echo "$b ratios: build 0's digits" || echo "$b ratios differ from build 0's"; done
  for b in b13 b14; do cmp <(grep -h MESSAGE tc_b12.txt | sed "s/.*MESSAGE: //") <(grep -h MESSAGE tc_$b.txt | sed "s/.*MESSAGE: //") >/dev/null && echo "$b ratios: build 12's digits" || echo "$b ratios differ from build 12's"; done
  grep -h "two blocks" tcb_b12.txt | sed "s/.*MESSAGE: //"
  tail -n 3 tcb_b*.txt test_cuda_b12.txt memcheck_b*.txt racecheck_b*.txt; cat smi.txt times.txt) > summary.txt 2>&1
tar czf $OUT/logs.tgz *; cp summary.txt $OUT/; rm -rf $R
