#!/bin/bash
# session 28 call 3: the backward scans' copies at compile-time offsets. Carry .dev-lead and .fixtures.
# Builds (.dev-lead/s28_*.txz; meson setup B -Dcuda=enabled -Dmqar=false -Dbuildtype=release; ninja
# cuda/bench_cuda cuda/test_cuda_backward):
#   ring = main 06ec3fc's CUDA code (before; = branch s28-scan-ring, call 2)
#   addr = branch s28-scan-addr: the two scans' rows at the constant pitch of chunk_max_k, the W / k / q / A
#          copies by row_copy (compile-time row steps, immediate shared offsets)
#   bar  = branch s28-rscan-2bar (on addr): the reverse scan at two barriers per chunk instead of three (the
#          per-record work beside dVn's products, d_i formed by the lanes that use it, D stored after its update)
#   li   = addr built with -Dcuda_args=-lineinfo (bench_cuda only): source counters of the backward kernels
# addr and bar must print ring's tensor-core ratios digit for digit (the same products in the same order).
R=$OUT/r; mkdir -p $R; D=/tmp/s28; B="ring addr bar"
for b in $B; do mkdir -p $D/$b; tar xf .dev-lead/s28_$b.txz -C $D/$b; done
export LINSTATE_FIXTURES=$PWD/.fixtures
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }
for b in $B; do
  timeout 90 $D/$b/test_cuda_backward -tc="*inputs on tensor cores*" > $R/tc_$b.txt 2>&1; echo "rc=$?" >> $R/tc_$b.txt; ts tc_$b
done
for b in addr bar; do timeout 150 $D/$b/test_cuda_backward -tce="timing*" > $R/tcb_$b.txt 2>&1; echo "rc=$?" >> $R/tcb_$b.txt; ts tcb_$b; done
P="--suite=train --tmin=8192 --tmax=65536 --Ns=0 --delta --strategies=varlen --recurrent-tmax=0 --deadline=40"
for i in 1 2 3; do
  for b in $B; do timeout 80 $D/$b/bench_cuda $P --out=$R/t_${b}$i.csv > $R/t_${b}$i.txt 2>&1; ts "t_$b$i rc=$?"; done
done
for b in $B; do
  timeout 60 $NCU --clock-control none --metrics gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread -k regex:delta_ -c 12 --csv --page raw $D/$b/bench_cuda --suite=train --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=0 --delta --strategies=varlen --tmin=32768 --tmax=32768 > $R/ncu_$b.csv 2>&1; ts ncu$b
done
for b in addr bar; do
  timeout 60 $CS --tool memcheck $D/$b/test_cuda_backward "-tc=*gated delta rule*,*two blocks per SM*,*subsets*,*read by none*,*8 and 16 warps*" > $R/memcheck_$b.txt 2>&1; echo "rc=$?" >> $R/memcheck_$b.txt; ts memcheck_$b
  timeout 150 $CS --tool racecheck $D/$b/test_cuda_backward "-tc=*read by none*,*inputs on tensor cores*" > $R/racecheck_$b.txt 2>&1; echo "rc=$?" >> $R/racecheck_$b.txt; ts racecheck_$b
done
timeout 90 $NCU --clock-control none --set full -k regex:delta_tc_rscan -c 1 --csv --page details $D/addr/bench_cuda --suite=train --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=0 --delta --strategies=varlen --tmin=32768 --tmax=32768 > $R/full_rscan_addr.csv 2> $R/full_rscan_addr.err; ts full
mkdir -p $D/li && tar xf .dev-lead/s28_li.txz -C $D/li
A="--suite=train --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=0 --delta --strategies=varlen --tmin=32768 --tmax=32768"
for k in delta_grad_bf16 delta_tc_rscan delta_grad_products delta_tc_hstate delta_prep_kernel; do
  timeout 60 $NCU --clock-control none --section SourceCounters --section WarpStateStats --page source --print-source cuda,sass --csv -k regex:$k -c 1 $D/li/bench_cuda $A > $R/src_$k.csv 2> $R/src_$k.err; ts src_$k
  [ -f $R/src_$k.csv ] && gzip -f $R/src_$k.csv
done
cd $R && (for b in addr bar; do cmp <(grep -h MESSAGE tc_ring.txt | sed "s/.*MESSAGE: //") <(grep -h MESSAGE tc_$b.txt | sed "s/.*MESSAGE: //") >/dev/null && echo "$b ratios: ring's digits" || echo "$b ratios differ from ring's"; done
  tail -n 3 tc_*.txt tcb_*.txt memcheck_*.txt racecheck_*.txt; grep -h "^train *gdn\|^train *sse_gdn" t_*.txt; cat times.txt) > summary.txt 2>&1
tar czf $OUT/logs.tgz *; cp summary.txt $OUT/; rm -rf $R
