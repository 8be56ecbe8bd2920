#!/bin/bash
# session 29 call 1, part 2 (run after run.sh, on the same or a fresh machine: it unpacks its builds again):
# memcheck and racecheck, ncu --set full of the reverse scan and the states' pass, source counters. Carry .dev-lead and
# .fixtures; about 4 minutes. The builds: run.sh's header. Output: logs2.tgz, summary2.txt.
source docs/data/issue11_s29/call1/common.sh
unpack s28_bar s29_dA s29_ins s29_norec s29_fwd
timeout 120 $CS --tool memcheck $D/s29_fwd/test_cuda -tc="*pieces*" > $R/memcheck_s29_fwd.txt 2>&1; echo "rc=$?" >> $R/memcheck_s29_fwd.txt; ts memcheck_fwd
for b in s28_bar s29_dA s29_ins s29_norec; do memcheck $b; racecheck $b; done
timeout 90 $NCU --clock-control none --set full -k "regex:delta_tc_(rscan|hstate)" -c 2 --csv --page details $D/s29_norec/bench_cuda $A > $R/full_scans_norec.csv 2> $R/full_scans_norec.err; ts full
if [ -f .dev-lead/s29_li.txz ]; then
  unpack s29_li
  for k in delta_grad_bf16 delta_tc_rscan delta_grad_products delta_tc_hstate delta_prep_kernel; do
    timeout 60 $NCU --clock-control none --section SourceCounters --section WarpStateStats --page source --print-source cuda,sass --csv -k regex:$k -c 1 $D/s29_li/bench_cuda $A > $R/src_$k.csv 2> $R/src_$k.err; ts src_$k
    [ -f $R/src_$k.csv ] && gzip -f $R/src_$k.csv
  done
fi
summary() { cd $R; tail -n 3 memcheck_*.txt racecheck_*.txt; }
pack 2
