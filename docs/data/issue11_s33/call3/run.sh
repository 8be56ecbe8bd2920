#!/bin/bash
# session 33 call 3: build gp (branch s33-grad-pieces: the backward's kernels 5a and 5b pipelined in pieces) against
# main (aebfcf7) — tests (printed values compared with main's), memcheck / racecheck of the new test, the GLA / GDN /
# SSE-GDN train rows alternated three times (main, gp at the library's pieces, gp at one piece), gp at 4–64 pieces,
# ncu of gp's GDN train call at T = 32768; then, where time is left, the knobs session 32 set on an H100 (the
# forward's pieces, --pieces=1…5, and the backward scans' warps, --bscan-warps=8/16) with main.
# Carry .dev-s33 (main.txz, gp.txz), .fixtures. Output: $OUT/logs3.tgz, $OUT/summary3.txt.
R=/tmp/r3; mkdir -p $R; D=/tmp/s33; CAP=${CAP:-570}
left() { [ $SECONDS -lt $((CAP - $1)) ]; }
ts() { echo "$1 $SECONDS" >> $R/times.txt; }
same() { cmp <(grep -h MESSAGE $1 | sed "s/.*MESSAGE: //") <(grep -h MESSAGE $R/$2 | sed "s/.*MESSAGE: //") >/dev/null && echo "$2: main's printed values" || echo "$2: printed values differ from main's"; }
finish() { (cd $R; grep "NVIDIA" smi.txt | head -1; same $OLDPWD/docs/data/issue11_s31/call1/tcf_main31.txt tcf_gp.txt; same $OLDPWD/docs/data/issue11_s31/call1/tcb_main31.txt tcb_gp.txt
  tail -n 3 tc*_gp.txt memcheck_*.txt racecheck_*.txt; cat times.txt) > $R/summary3.txt 2>&1
  (cd $R && tar czf $OUT/logs3.tgz * && cp summary3.txt $OUT/); }
trap finish EXIT
for b in main gp; do mkdir -p $D/$b && tar xf .dev-s33/$b.txz -C $D/$b; done
export LINSTATE_FIXTURES=$PWD/.fixtures
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
nvidia-smi > $R/smi.txt 2>&1
timeout 100 $D/gp/test_cuda_backward -tce="timing*" > $R/tcb_gp.txt 2>&1; echo "rc=$?" >> $R/tcb_gp.txt; ts tcb_gp
timeout 100 $D/gp/test_cuda > $R/tcf_gp.txt 2>&1; echo "rc=$?" >> $R/tcf_gp.txt; ts tcf_gp
B="--suite=train --tmin=16384 --tmax=65536 --strategies=varlen --recurrent-tmax=0 --deadline=40 --Ns=0 --delta"
for i in 1 2 3; do
  timeout 50 $D/main/bench_cuda $B --out=$R/gdn_main$i.csv > $R/gdn_main$i.txt 2>&1; ts "main $i rc=$?"
  timeout 50 $D/gp/bench_cuda $B --out=$R/gdn_gp$i.csv > $R/gdn_gp$i.txt 2>&1; ts "gp $i rc=$?"
  timeout 50 $D/gp/bench_cuda $B --grad-pieces=1 --out=$R/gdn_gp1p$i.csv > $R/gdn_gp1p$i.txt 2>&1; ts "gp1p $i rc=$?"
done
S="--suite=train --tmin=32768 --tmax=65536 --strategies=varlen --recurrent-tmax=0 --deadline=30 --Ns=0 --delta"
for n in 4 8 32 64; do left 200 && { timeout 40 $D/gp/bench_cuda $S --grad-pieces=$n --out=$R/gpn$n.csv > $R/gpn$n.txt 2>&1; ts "gpn$n rc=$?"; }; done
A="--suite=train --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=0 --delta --strategies=varlen --tmin=32768 --tmax=32768"
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,launch__grid_size
left 180 && { timeout 60 $NCU --clock-control none --metrics $M -k regex:delta_grad -c 60 --csv --page raw $D/gp/bench_cuda $A > $R/ncu_gp.csv 2>&1; ts ncu_gp; }
left 150 && { timeout 40 $NCU --clock-control none --metrics $M -k regex:delta_grad -c 8 --csv --page raw $D/main/bench_cuda $A > $R/ncu_main.csv 2>&1; ts ncu_main; }
left 120 && { timeout 60 $CS --tool memcheck $D/gp/test_cuda_backward "-tc=*in pieces*" > $R/memcheck_gp.txt 2>&1; echo "rc=$?" >> $R/memcheck_gp.txt; ts memcheck; }
left 100 && { timeout 80 $CS --tool racecheck $D/gp/test_cuda_backward "-tc=*in pieces*" > $R/racecheck_gp.txt 2>&1; echo "rc=$?" >> $R/racecheck_gp.txt; ts racecheck; }
F="--suite=prefill --tmin=16384 --tmax=65536 --strategies=varlen --recurrent-tmax=0 --deadline=30 --Ns=0 --delta"
for i in 1 2; do for n in 2 3 4 5; do left 20 && { timeout 30 $D/main/bench_cuda $F --pieces=$n --out=$R/pc${n}_$i.csv > $R/pc${n}_$i.txt 2>&1; ts "pc$n $i rc=$?"; }; done; done
