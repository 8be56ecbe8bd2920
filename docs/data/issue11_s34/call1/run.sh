#!/bin/bash
# session 34's A/B, for the next session's device (any card: the comparison is within the call). Builds
# (.dev-s34): main = a04637a's CUDA code (session 33's build; bench_cuda); k1 = 290ab01, k2 = 8b1dc8f, k3 =
# e4dd4fc (bench_cuda), k4 = 020e4a4 (bench_cuda, test_cuda_backward) — branch s34-kn-bf16's four commits, fewer
# bytes through the GDN backward with the same values; dk = branch s34-delta-kept (b7dcf7d, on k4; bench_cuda,
# test_cuda, test_cuda_backward) — the delta family's training forward keeps the backward's recomputation
# (saved_states), the backward starts at its reverse scan; bench_cuda's train rows use saved_states by default,
# so `dk` is the kept path and `dk0` (--saved-states=0) the recomputing one (k4's code and fo's) in the same
# binary; fo = branch s34-fwd-overlap (bc80948, on main; bench_cuda, test_cuda) — the pieced GDN forward's outputs
# wait for their own piece's state pass only (dk has it too).
# Steps: dk's and fo's test_cuda, dk's and k4's test_cuda_backward, their printed values compared with main's
# (dk's new forward test prints eight lines of its own, "training forward", left out of the comparison); the GLA /
# GDN / SSE-GDN prefill and train rows at T = 8192…65536, main k1 k2 k3 k4 dk dk0 fo alternated three times
# (gdn_<build><round>.csv); ncu of one GDN train call at T = 32768 (main, k4, dk: the delta kernels' durations,
# DRAM bytes, L2 hit rate, registers); memcheck and racecheck of the tensor-core backward cases and of dk's new
# cases. ~4 minutes. Carry .dev-s34, .fixtures. Output: $OUT/logs1.tgz, $OUT/summary1.txt.
# Tables: python3 docs/data/issue11_s32/tables.py DIR dk main k1 k2 k3 k4 dk0 fo
R=/tmp/r1; mkdir -p $R; D=/tmp/s34; CAP=${CAP:-560}
left() { [ $SECONDS -lt $((CAP - $1)) ]; }
ts() { echo "$1 $SECONDS" >> $R/times.txt; }
msgs() { grep -h MESSAGE $1 | sed "s/.*MESSAGE: //" | grep -v "training forward"; }
same() { cmp <(msgs $1) <(msgs $R/$2) >/dev/null && echo "$2: main's printed values" || echo "$2: printed values differ from main's"; }
finish() { (cd $R; grep NVIDIA smi.txt | head -1; for b in dk fo; do same $W/docs/data/issue11_s31/call1/tcf_main31.txt tcf_$b.txt; done
  for b in k4 dk; do same $W/docs/data/issue11_s31/call1/tcb_main31.txt tcb_$b.txt; done; grep -h "training forward" tcf_dk.txt | sed "s/.*MESSAGE: //"
  tail -n 3 tc*.txt memcheck_*.txt racecheck_*.txt; grep -h "^| gdn\|^| sse_gdn" gdn_*3.txt; cat times.txt) > $R/summary1.txt 2>&1
  (cd $R && tar czf $OUT/logs1.tgz * && cp summary1.txt $OUT/); }
W=$PWD; trap finish EXIT
for b in main k1 k2 k3 k4 dk fo; do mkdir -p $D/$b && tar xf .dev-s34/$b.txz -C $D/$b; done
export LINSTATE_FIXTURES=$PWD/.fixtures
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
nvidia-smi > $R/smi.txt 2>&1
for b in dk fo; do timeout 100 $D/$b/test_cuda > $R/tcf_$b.txt 2>&1; echo "rc=$?" >> $R/tcf_$b.txt; ts tcf_$b; done
for b in dk k4; do timeout 100 $D/$b/test_cuda_backward -tce="timing*" > $R/tcb_$b.txt 2>&1; echo "rc=$?" >> $R/tcb_$b.txt; ts tcb_$b; done
B="--suite=prefill,train --tmin=8192 --tmax=65536 --strategies=varlen --recurrent-tmax=0 --deadline=40 --Ns=0 --delta"
run() { timeout 50 $D/$1/bench_cuda $B $3 --out=$R/gdn_$2.csv > $R/gdn_$2.txt 2>&1; ts "gdn_$2 rc=$?"; }
for i in 1 2 3; do for b in main k1 k2 k3 k4 dk fo; do left 40 && run $b $b$i; done; left 40 && run dk dk0$i --saved-states=0; done
A="--suite=train --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=0 --delta --strategies=varlen --tmin=32768 --tmax=32768"
MET=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,launch__registers_per_thread,smsp__inst_executed.sum
for b in main k4 dk fo; do left 60 && { timeout 50 $NCU --clock-control none --metrics $MET -k regex:delta_ -c 16 --csv --page raw $D/$b/bench_cuda $A > $R/ncu_$b.csv 2>&1; ts ncu_$b; }; done
left 70 && { timeout 60 $CS --tool memcheck $D/dk/test_cuda_backward "-tc=*inputs on tensor cores*,*read by none*,*training forward keeps*" > $R/memcheck_dkb.txt 2>&1; echo "rc=$?" >> $R/memcheck_dkb.txt; ts memcheck_b; }
left 50 && { timeout 40 $CS --tool memcheck $D/dk/test_cuda "-tc=*training forward*" > $R/memcheck_dkf.txt 2>&1; echo "rc=$?" >> $R/memcheck_dkf.txt; ts memcheck_f; }
left 100 && { timeout 90 $CS --tool racecheck $D/dk/test_cuda_backward "-tc=*inputs on tensor cores*,*training forward keeps*" > $R/racecheck_dkb.txt 2>&1; echo "rc=$?" >> $R/racecheck_dkb.txt; ts racecheck_b; }
left 50 && { timeout 40 $CS --tool racecheck $D/dk/test_cuda "-tc=*training forward*" > $R/racecheck_dkf.txt 2>&1; echo "rc=$?" >> $R/racecheck_dkf.txt; ts racecheck_f; }
true
