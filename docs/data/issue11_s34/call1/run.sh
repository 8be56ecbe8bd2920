#!/bin/bash
# session 34's A/B, for the next session's device (any card: the comparison is within the call): branch
# s34-kn-bf16's four commits, built one by one (k1 = 290ab01, k2 = 8b1dc8f, k3 = e4dd4fc, k4 = 020e4a4, the
# branch's head), against main (a04637a's CUDA code; `main` = session 33's build of it, copied into .dev-s34).
# Each commit moves fewer bytes through the GDN backward with the same values (the CPU emulation printed main's
# values for all of them: docs/data/issue11_s34/README.md): k1 the prep's fp32 k̂, q̂ not stored, kernel 5b
# forming them from the bf16 rows; k2 kernel 5b's Wᵀ from Wh; k3 the prep's Wh from the accumulators and no fp32
# W; k4 S in bf16 for kernel 5a's plain products. Steps: test_cuda (k4) and test_cuda_backward (k1…k4), their
# printed values compared with main's; the GLA / GDN / SSE-GDN train rows at T = 8192…65536, main k1 k2 k3 k4
# alternated three times (gdn_<build><round>.csv); ncu of one GDN train call at T = 32768, main and k4 (the delta
# kernels: duration, DRAM bytes, L2 hit rate, registers); memcheck and racecheck of k4's tensor-core backward
# cases. ~3 minutes. Carry .dev-s34 (main, k1…k4 .txz), .fixtures.
# Output: $OUT/logs1.tgz, $OUT/summary1.txt. Tables: python3 docs/data/issue11_s32/tables.py DIR k4 main k1 k2 k3 k4
R=/tmp/r1; mkdir -p $R; D=/tmp/s34; CAP=${CAP:-560}
left() { [ $SECONDS -lt $((CAP - $1)) ]; }
ts() { echo "$1 $SECONDS" >> $R/times.txt; }
same() { cmp <(grep -h MESSAGE $1 | sed "s/.*MESSAGE: //") <(grep -h MESSAGE $R/$2 | sed "s/.*MESSAGE: //") >/dev/null && echo "$2: main's printed values" || echo "$2: printed values differ from main's"; }
finish() { (cd $R; grep NVIDIA smi.txt | head -1; same $W/docs/data/issue11_s31/call1/tcf_main31.txt tcf_k4.txt
  for b in k1 k2 k3 k4; do same $W/docs/data/issue11_s31/call1/tcb_main31.txt tcb_$b.txt; done
  tail -n 3 tc*.txt memcheck_k4.txt racecheck_k4.txt; grep -h "^| gdn\|^| sse_gdn" gdn_*3.txt; cat times.txt) > $R/summary1.txt 2>&1
  (cd $R && tar czf $OUT/logs1.tgz * && cp summary1.txt $OUT/); }
W=$PWD; trap finish EXIT
for b in main k1 k2 k3 k4; do mkdir -p $D/$b && tar xf .dev-s34/$b.txz -C $D/$b; done
export LINSTATE_FIXTURES=$PWD/.fixtures
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
nvidia-smi > $R/smi.txt 2>&1
timeout 100 $D/k4/test_cuda > $R/tcf_k4.txt 2>&1; echo "rc=$?" >> $R/tcf_k4.txt; ts tcf_k4
for b in k4 k1 k2 k3; do timeout 100 $D/$b/test_cuda_backward -tce="timing*" > $R/tcb_$b.txt 2>&1; echo "rc=$?" >> $R/tcb_$b.txt; ts tcb_$b; done
B="--suite=train --tmin=8192 --tmax=65536 --strategies=varlen --recurrent-tmax=0 --deadline=40 --Ns=0 --delta"
for i in 1 2 3; do for b in main k1 k2 k3 k4; do left 30 && { timeout 50 $D/$b/bench_cuda $B --out=$R/gdn_$b$i.csv > $R/gdn_$b$i.txt 2>&1; ts "gdn_$b$i rc=$?"; }; done; done
A="--suite=train --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=0 --delta --strategies=varlen --tmin=32768 --tmax=32768"
MET=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,launch__registers_per_thread,smsp__inst_executed.sum
for b in main k4; do left 60 && { timeout 50 $NCU --clock-control none --metrics $MET -k regex:delta_ -c 16 --csv --page raw $D/$b/bench_cuda $A > $R/ncu_$b.csv 2>&1; ts ncu_$b; }; done
left 70 && { timeout 60 $CS --tool memcheck $D/k4/test_cuda_backward "-tc=*inputs on tensor cores*,*read by none*" > $R/memcheck_k4.txt 2>&1; echo "rc=$?" >> $R/memcheck_k4.txt; ts memcheck; }
left 100 && { timeout 90 $CS --tool racecheck $D/k4/test_cuda_backward "-tc=*inputs on tensor cores*" > $R/racecheck_k4.txt 2>&1; echo "rc=$?" >> $R/racecheck_k4.txt; ts racecheck; }
true
