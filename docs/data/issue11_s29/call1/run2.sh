#!/bin/bash
# session 29 call 1, part 2 (run after run.sh, on the same or a fresh machine: it unpacks its builds again):
# memcheck and racecheck, ncu --set full of the reverse scan and the states' pass, source counters. Carry .dev-lead and
# .fixtures; about 4 minutes. The builds: run.sh's header.
R=$OUT/r; mkdir -p $R; D=/tmp/s29; B="s28_ring s28_addr s28_bar s29_dA s29_ins s29_norec s29_fwd"; N="s28_addr s28_bar s29_dA s29_ins s29_norec"
for b in $B; do mkdir -p $D/$b; tar xf .dev-lead/$b.txz -C $D/$b; done
export LINSTATE_FIXTURES=$PWD/.fixtures
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }
timeout 120 $CS --tool memcheck $D/s29_fwd/test_cuda -tc="*pieces*" > $R/memcheck_s29_fwd.txt 2>&1; echo "rc=$?" >> $R/memcheck_s29_fwd.txt; ts memcheck_fwd
for b in s28_bar s29_dA s29_ins s29_norec; do
  timeout 60 $CS --tool memcheck $D/$b/test_cuda_backward "-tc=*gated delta rule*,*two blocks per SM*,*subsets*,*read by none*,*8 and 16 warps*,*side by side*" > $R/memcheck_$b.txt 2>&1; echo "rc=$?" >> $R/memcheck_$b.txt; ts memcheck_$b
  timeout 150 $CS --tool racecheck $D/$b/test_cuda_backward "-tc=*read by none*,*inputs on tensor cores*" > $R/racecheck_$b.txt 2>&1; echo "rc=$?" >> $R/racecheck_$b.txt; ts racecheck_$b
done
A="--suite=train --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=0 --delta --strategies=varlen --tmin=32768 --tmax=32768"
timeout 90 $NCU --clock-control none --set full -k "regex:delta_tc_(rscan|hstate)" -c 2 --csv --page details $D/s29_norec/bench_cuda $A > $R/full_scans_norec.csv 2> $R/full_scans_norec.err; ts full
if [ -f .dev-lead/s29_li.txz ]; then
  mkdir -p $D/li && tar xf .dev-lead/s29_li.txz -C $D/li
  for k in delta_grad_bf16 delta_tc_rscan delta_grad_products delta_tc_hstate delta_prep_kernel; do
    timeout 60 $NCU --clock-control none --section SourceCounters --section WarpStateStats --page source --print-source cuda,sass --csv -k regex:$k -c 1 $D/li/bench_cuda $A > $R/src_$k.csv 2> $R/src_$k.err; ts src_$k
    [ -f $R/src_$k.csv ] && gzip -f $R/src_$k.csv
  done
fi
cd $R && (tail -n 3 memcheck_*.txt racecheck_*.txt; cat times.txt) > summary2.txt 2>&1
tar czf $OUT/logs2.tgz *; cp summary2.txt $OUT/; rm -rf $R
