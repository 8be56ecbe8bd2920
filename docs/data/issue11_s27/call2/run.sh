#!/bin/bash
# session 27 call 2. Carry .dev-lead and .fixtures. Builds (.dev-lead/s27_*.txz, meson setup B -Dcuda=enabled
# -Dmqar=false -Dbuildtype=release):
#   b13 = main 0547498's CUDA code (call 1's build 13)
#   dd  = branch s27-grad-dedup: b13 with the phases that kernel 5b's two forms (delta_grad_kernel,
#         delta_grad_bf16_kernel) share moved into delta_grad_phase:: functions (a refactor: the same
#         operations in the same order; ptxas: the same registers, no spill)
#   li  = 0547498's bench_cuda with -Dcuda_args=-lineinfo (the profiles)
#  1. dd against b13: the tensor-core test's printed ratios (the same digits expected), every
#     test_cuda_backward case of dd, the train rows alternated three times, memcheck and racecheck of dd's
#     delta-rule cases;
#  2. main's tunables on the new kernels: --bscan-warps 8 / 16 (the backward's two scans), --pieces 1 / 2 / 4
#     (the forward's pipeline; 0, the library's choice, is the rows of 1.), GDN, SSE-GDN at T = 32768;
#  3. ncu --set full (details page) of the five backward kernels of one GDN train call at 32768;
#  4. ncu source counters (stall samples per source line) of delta_grad_bf16_kernel, delta_tc_rscan_kernel
#     and delta_prep_kernel.
R=$OUT/r; mkdir -p $R; D=/tmp/s27
for b in b13 dd li; do mkdir -p $D/$b; tar xf .dev-lead/s27_$b.txz -C $D/$b; done
export LINSTATE_FIXTURES=$PWD/.fixtures
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }
ok() { [ $SECONDS -lt ${1:-470} ] || { echo "skipped at ${SECONDS}s: $2" >> $R/times.txt; false; }; }
for b in b13 dd; do
  timeout 90 $D/$b/test_cuda_backward -tc="*inputs on tensor cores*" > $R/tc_$b.txt 2>&1; echo "rc=$?" >> $R/tc_$b.txt; ts tc_$b
done
timeout 150 $D/dd/test_cuda_backward -tce="timing*" > $R/tcb_dd.txt 2>&1; echo "rc=$?" >> $R/tcb_dd.txt; ts tcb_dd
P="--suite=train --tmin=8192 --tmax=65536 --Ns=0 --delta --strategies=varlen --recurrent-tmax=0 --deadline=40"
for i in 1 2 3; do
  for b in b13 dd; do timeout 80 $D/$b/bench_cuda $P --out=$R/t_${b}$i.csv > $R/t_${b}$i.txt 2>&1; ts "t_$b$i rc=$?"; done
done
T="-tc=*gated delta rule*,*two blocks per SM*,*subsets*,*read by none*"
timeout 60 $CS --tool memcheck $D/dd/test_cuda_backward "$T" > $R/memcheck_dd.txt 2>&1; echo "rc=$?" >> $R/memcheck_dd.txt; ts memcheck_dd
timeout 100 $CS --tool racecheck $D/dd/test_cuda_backward "-tc=*two blocks per SM*,*read by none*,*gated delta rule*" > $R/racecheck_dd.txt 2>&1; echo "rc=$?" >> $R/racecheck_dd.txt; ts racecheck_dd
P="--suite=train --tmin=32768 --tmax=32768 --Ns=0 --delta --strategies=varlen --recurrent-tmax=0 --deadline=40"
for i in 1 2; do
  for o in "bscan-warps=16" "pieces=1" "pieces=2" "pieces=4"; do
    n=${o/=/}; ok 330 k_$n && timeout 60 $D/b13/bench_cuda $P --$o --out=$R/k_${n}_$i.csv > $R/k_${n}_$i.txt 2>&1; ts "k_${n}_$i"
  done
done
A="--suite=train --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=0 --delta --strategies=varlen --tmin=32768 --tmax=32768"
ok 380 full && timeout 120 $NCU --clock-control none --set full -k "regex:delta_prep_kernel|delta_tc_hstate|delta_tc_rscan|delta_grad" -c 5 --csv --page details $D/li/bench_cuda $A > $R/full_bwd.csv 2> $R/full_bwd.err; ts full
for k in delta_grad_bf16 delta_tc_rscan delta_prep_kernel; do
  ok 500 src_$k && timeout $((570 - SECONDS)) $NCU --clock-control none --section SourceCounters --section WarpStateStats --page source --print-source cuda,sass --csv -k regex:$k -c 1 $D/li/bench_cuda $A > $R/src_$k.csv 2> $R/src_$k.err; ts src_$k
  [ -f $R/src_$k.csv ] && gzip -f $R/src_$k.csv
done
cd $R && (for b in b13 dd; do echo "== $b"; grep -h "MESSAGE" tc_$b.txt | sed "s/.*MESSAGE: //"; done
  cmp <(grep -h MESSAGE tc_b13.txt | sed "s/.*MESSAGE: //") <(grep -h MESSAGE tc_dd.txt | sed "s/.*MESSAGE: //") >/dev/null && echo "dd ratios: build 13's digits" || echo "dd ratios differ from build 13's"
  tail -n 3 tcb_dd.txt memcheck_dd.txt racecheck_dd.txt; grep -h "^train" t_*.txt k_*.txt; cat times.txt) > summary.txt 2>&1
tar czf $OUT/logs.tgz *; cp summary.txt $OUT/; rm -rf $R
