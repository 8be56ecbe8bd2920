#!/bin/bash
# session 32 call 5: bp3 (branch s32-state-fk-only: pa + the compile-time-K state kernel where the grid leaves room,
# its two other changes in that instance only + the backward prep's V tiles early + its read-backs batched) against
# main (.dev-s31/rsc.txz: main's kernels) and bp (call 3's), the GLA / GDN / SSE-GDN rows alternated three times;
# bp3's tests (prints compared with main's), ncu durations, compute-sanitizer on the backward, the forward at 1-5
# pieces, the backward prep's source counters; then (CAP permitting) the same-call table: bp3's GLA / SSE / GDN rows
# around fla main and the SSE authors (call4/run.sh's steps). Carry .dev-s31, .dev-s32, .fixtures, .fla.
# Output: logs5.tgz, summary5.txt.
R=$OUT/r; mkdir -p $R; D=/tmp/s32; CAP=${CAP:-580}
left() { [ $SECONDS -lt $((CAP - $1)) ]; }
export LINSTATE_FIXTURES=$PWD/.fixtures
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
NSYS=$(command -v nsys || ls /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-systems*/bin/nsys 2>/dev/null | head -1)
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }
for b in rsc; do mkdir -p $D/$b && tar xf .dev-s31/$b.txz -C $D/$b; done
for b in bp bp3; do mkdir -p $D/$b && tar xf .dev-s32/$b.txz -C $D/$b; done
nvidia-smi > $R/smi.txt 2>&1; nvidia-smi -q -d CLOCK >> $R/smi.txt 2>&1; echo "ncu=$NCU nsys=$NSYS" >> $R/smi.txt
timeout 100 $D/bp3/test_cuda > $R/tcf_bp3.txt 2>&1; echo "rc=$?" >> $R/tcf_bp3.txt; ts tcf_bp3
timeout 100 $D/bp3/test_cuda_backward -tce="timing*" > $R/tcb_bp3.txt 2>&1; echo "rc=$?" >> $R/tcb_bp3.txt; ts tcb_bp3
P="--suite=prefill,train --tmin=8192 --tmax=65536 --strategies=varlen --recurrent-tmax=0 --deadline=40 --Ns=0 --delta"
for i in 1 2 3; do for b in rsc bp bp3; do timeout 60 $D/$b/bench_cuda $P --out=$R/gdn_$b$i.csv > $R/gdn_$b$i.txt 2>&1; ts "gdn_$b$i rc=$?"; done; done
A="--suite=train --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=0 --delta --strategies=varlen --tmin=32768 --tmax=32768"
timeout 40 $NCU --clock-control none --metrics gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread,launch__grid_size -k regex:delta_ -c 16 --csv --page raw $D/bp3/bench_cuda $A > $R/ncu_bp3.csv 2>&1; ts ncu_bp3
F="--suite=prefill --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=4 --delta --strategies=varlen --tmin=32768 --tmax=32768"
timeout 60 $NCU --clock-control none --metrics gpu__time_duration.sum,launch__registers_per_thread,launch__grid_size -k regex:delta_tc_ --csv --page raw $D/bp3/bench_cuda $F > $R/ncu_sse_bp3.csv 2>&1; ts ncu_sse_bp3
for pc in 1 2 3 4 5; do timeout 30 $D/bp3/bench_cuda --suite=prefill --tmin=16384 --tmax=65536 --Ns=0 --delta --strategies=varlen --recurrent-tmax=0 --deadline=10 --pieces=$pc --out=$R/pieces_bp3$pc.csv > $R/pieces_bp3$pc.txt 2>&1; done; ts pieces
timeout 100 $CS --tool memcheck $D/bp3/test_cuda_backward "-tc=*inputs on tensor cores*,*read by none*" > $R/memcheck_bp3_b.txt 2>&1; echo "rc=$?" >> $R/memcheck_bp3_b.txt; ts memcheck_bp3_b
timeout 100 $CS --tool racecheck $D/bp3/test_cuda_backward "-tc=*inputs on tensor cores*" > $R/racecheck_bp3_b.txt 2>&1; echo "rc=$?" >> $R/racecheck_bp3_b.txt; ts racecheck_bp3_b
left 60 && { timeout 40 $NCU --clock-control none --section SourceCounters --section WarpStateStats --page source --print-source sass --csv -k regex:delta_prep -c 1 $D/bp3/bench_cuda $A > $R/src_prep_bp3.csv 2> $R/src_prep_bp3.err; gzip -f $R/src_prep_bp3.csv; ts src_prep; }
# the same-call table (call4/run.sh's steps) with bp3
if [ "${PEERS:-1}" = 1 ] && left 330; then
  mkdir -p /tmp/tc_main /tmp/tc_varlen && tar xzf .fla/tc/tc_main_autotune.tgz -C /tmp/tc_main && tar xzf .fla/tc/tc_varlen_autotune.tgz -C /tmp/tc_varlen
  M=$D/bp3; P2="--suite=prefill,train --tmin=8192 --tmax=65536 --strategies=varlen --recurrent-tmax=0 --deadline=40"
  timeout 90 $M/bench_cuda $P2 --Ns=4,8,16 --out=$R/gla1.csv > $R/gla1.txt 2>&1; ts "gla1 rc=$?"
  (cd .fla/peer && FLA_VENDOR=$PWD FLA_CACHE_RESULTS=1 TRITON_CACHE_DIR=/tmp/tc_varlen timeout 130 python3 bench_fla.py --out $R/peer_varlen.json --suite varlen@4,8,16 --Ts 8192,16384,32768,65536 --tune varlen4 --deadline 120 > $R/peer_varlen.log 2>&1); ts "peer rc=$?"
  FLA_VENDOR=.fla/fla_main OPS=gla,gdn TS=8192,16384,32768,65536 OUTJSON=$R/fla_main.json FLA_CACHE_RESULTS=1 TRITON_CACHE_DIR=/tmp/tc_main DEADLINE=110 timeout 120 python3 .fla/bench_fla_main.py > $R/fla_main.txt 2>&1; ts "fla rc=$?"
  left 40 && { timeout 90 $M/bench_cuda $P2 --Ns=4,8,16 --out=$R/gla2.csv > $R/gla2.txt 2>&1; ts "gla2 rc=$?"; }
fi
same() { cmp <(grep -h MESSAGE $1 | sed "s/.*MESSAGE: //") <(grep -h MESSAGE $R/$2 | sed "s/.*MESSAGE: //") >/dev/null && echo "$2: main's printed values" || echo "$2: printed values differ from main's"; }
(cd $R; head -12 smi.txt | tail -3; same $OLDPWD/docs/data/issue11_s31/call1/tcf_main31.txt tcf_bp3.txt; same $OLDPWD/docs/data/issue11_s31/call1/tcb_main31.txt tcb_bp3.txt; tail -n 3 tc*_bp3.txt memcheck_*.txt racecheck_*.txt; grep -h "gdn" gdn_*1.txt | grep -v "^#"; tail -3 fla_main.txt peer_varlen.log; cat times.txt) > $R/summary5.txt 2>&1
cd $R && tar czf $OUT/logs5.tgz * && cp summary5.txt $OUT/
