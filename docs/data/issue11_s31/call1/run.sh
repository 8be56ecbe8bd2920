#!/bin/bash
# session 31 call 1: the merged main (611f7ca: session 28–29's scan stack, s29-ds-products and s30-tcprep together) on
# the device for the first time, beside two builds of this session: fst (branch s31-state-prefetch: the forward's
# state kernel takes its W and Kd fragments half a step early) and rsc (branch s31-rscan-prefetch: the backward's
# two scans take the update's k / q / W fragments before their middle barrier). Tests (printed ratios compared with
# main's), the GDN rows alternated twice, the GLA / SSE rows around the peers (fla main's chunk_gla and
# chunk_gated_delta_rule, the SSE authors' varlen strategy; both from their cached autotune results), ncu
# durations, warp states of the GDN forward's kernels, nsys where the machine has it.
# Carry .dev-s31 (main31.txz, fst.txz, rsc.txz), .fla (the peers' sources and caches) and .fixtures.
# Output: logs1.tgz, summary1.txt.
R=$OUT/r; mkdir -p $R; D=/tmp/s31
export LINSTATE_FIXTURES=$PWD/.fixtures
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
NSYS=$(command -v nsys || ls /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-systems*/bin/nsys 2>/dev/null | head -1)
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }
CAP=${CAP:-560}  # (PEERS=0: without the two peers)
# the call's own limit (s): the optional steps below start only while they fit before it
left() { [ $SECONDS -lt $((CAP - $1)) ]; }  # whether the call has run less than CAP − $1 s
ts start
for b in main31 fst rsc; do [ -f .dev-s31/$b.txz ] && mkdir -p $D/$b && tar xf .dev-s31/$b.txz -C $D/$b; done
nvidia-smi > $R/smi.txt 2>&1; nvidia-smi -q -d CLOCK >> $R/smi.txt 2>&1; echo "ncu=$NCU nsys=$NSYS" >> $R/smi.txt
mkdir -p /tmp/tc_main /tmp/tc_varlen && tar xzf .fla/tc/tc_main_autotune.tgz -C /tmp/tc_main && tar xzf .fla/tc/tc_varlen_autotune.tgz -C /tmp/tc_varlen
M=$D/main31
timeout 100 $M/test_cuda_backward -tce="timing*" > $R/tcb_main31.txt 2>&1; echo "rc=$?" >> $R/tcb_main31.txt; ts tcb_main31
timeout 100 $M/test_cuda > $R/tcf_main31.txt 2>&1; echo "rc=$?" >> $R/tcf_main31.txt; ts tcf_main31
[ -x $D/fst/test_cuda ] && { timeout 100 $D/fst/test_cuda > $R/tcf_fst.txt 2>&1; echo "rc=$?" >> $R/tcf_fst.txt; ts tcf_fst; }
[ -x $D/rsc/test_cuda_backward ] && { timeout 100 $D/rsc/test_cuda_backward -tce="timing*" > $R/tcb_rsc.txt 2>&1; echo "rc=$?" >> $R/tcb_rsc.txt; ts tcb_rsc; }
P="--suite=prefill,train --tmin=8192 --tmax=65536 --strategies=varlen --recurrent-tmax=0 --deadline=40"
gdn() { for b in main31 fst rsc; do [ -x $D/$b/bench_cuda ] && { timeout 60 $D/$b/bench_cuda $P --Ns=0 --delta --out=$R/gdn_$b$1.csv > $R/gdn_$b$1.txt 2>&1; ts "gdn_$b$1 rc=$?"; }; done; }
gla() { timeout 90 $M/bench_cuda $P --Ns=4,8,16 --out=$R/gla$1.csv > $R/gla$1.txt 2>&1; ts "gla$1 rc=$?"; }
gdn 1; gla 1
[ "${PEERS:-1}" = 1 ] && (cd .fla/peer && FLA_VENDOR=$PWD FLA_CACHE_RESULTS=1 TRITON_CACHE_DIR=/tmp/tc_varlen timeout 170 python3 bench_fla.py --out $R/peer_varlen.json --suite varlen@4,8,16 --Ts 8192,16384,32768,65536 --tune varlen4 --deadline 160 > $R/peer_varlen.log 2>&1); ts "peer rc=$?"
[ "${PEERS:-1}" = 1 ] && FLA_VENDOR=.fla/fla_main OPS=gla,gdn TS=8192,16384,32768,65536 OUTJSON=$R/fla_main.json FLA_CACHE_RESULTS=1 TRITON_CACHE_DIR=/tmp/tc_main DEADLINE=140 timeout 150 python3 .fla/bench_fla_main.py > $R/fla_main.txt 2>&1; ts "fla rc=$?"
gla 2; gdn 2
# one GDN train call at T = 32768: ncu durations of every delta kernel, each build
A="--suite=train --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=0 --delta --strategies=varlen --tmin=32768 --tmax=32768"
for b in main31 fst rsc; do [ -x $D/$b/bench_cuda ] && { timeout 40 $NCU --clock-control none --metrics gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread -k regex:delta_ -c 16 --csv --page raw $D/$b/bench_cuda $A > $R/ncu_$b.csv 2>&1; ts ncu_$b; }; done
# compute-sanitizer on the two changed builds (what call2/run.sh runs), while the call has time
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
TF="-tc=*gated delta rule, bf16 inputs on tensor cores*,*pieces*"
left 230 && { timeout 70 $CS --tool memcheck $D/fst/test_cuda "$TF" > $R/memcheck_fst.txt 2>&1; echo "rc=$?" >> $R/memcheck_fst.txt; ts memcheck_fst; }
left 160 && { timeout 70 $CS --tool memcheck $D/rsc/test_cuda_backward "-tc=*gated delta rule*,*read by none*,*inputs on tensor cores*,*side by side*,*8 and 16 warps*" > $R/memcheck_rsc.txt 2>&1; echo "rc=$?" >> $R/memcheck_rsc.txt; ts memcheck_rsc; }
# the GDN forward's kernels (one prefill call at T = 32768), main: warp states, and durations at the base clock
F="--suite=prefill --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=0 --delta --strategies=varlen --tmin=32768 --tmax=32768"
left 110 && timeout 40 $NCU --clock-control none --section SpeedOfLight --section WarpStateStats --section Occupancy -k regex:delta_tc_ -c 12 --csv --page details $M/bench_cuda $F > $R/ncu_fwd_states.csv 2> $R/ncu_fwd_states.err; ts ncu_fwd
for k in delta_tc_state; do
  left 100 && timeout 40 $NCU --clock-control none --section SourceCounters --section WarpStateStats --page source --print-source sass --csv -k regex:$k -c 1 $M/bench_cuda $F > $R/src_$k.csv 2> $R/src_$k.err; gzip -f $R/src_$k.csv; ts src_$k
done
left 90 && timeout 40 $NCU --clock-control base --metrics gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second -k regex:delta_tc_ -c 12 --csv --page raw $M/bench_cuda $F > $R/ncu_fwd_base.csv 2>&1; ts ncu_base
# fst's state blocks alone on their SMs (--state-alone=1) against the default, alternated twice, every piece count of the library's
for i in 1 2; do for al in 0 1; do
  left 80 && [ -x $D/fst/bench_cuda ] && timeout 30 $D/fst/bench_cuda --suite=prefill --tmin=16384 --tmax=65536 --Ns=0 --delta --strategies=varlen --recurrent-tmax=0 --deadline=10 --state-alone=$al --out=$R/alone${al}_$i.csv > $R/alone${al}_$i.txt 2>&1
done; done; ts alone
for b in main31 fst; do for pc in 1 2 3 4 5; do
  left 90 && [ -x $D/$b/bench_cuda ] && timeout 30 $D/$b/bench_cuda --suite=prefill --tmin=16384 --tmax=65536 --Ns=0 --delta --strategies=varlen --recurrent-tmax=0 --deadline=10 --pieces=$pc --out=$R/pieces_$b$pc.csv > $R/pieces_$b$pc.txt 2>&1
done; done; ts pieces
left 140 && { timeout 80 $CS --tool racecheck $D/rsc/test_cuda_backward "-tc=*read by none*,*inputs on tensor cores*" > $R/racecheck_rsc.txt 2>&1; echo "rc=$?" >> $R/racecheck_rsc.txt; ts racecheck_rsc; }
if [ -n "$NSYS" ] && left 120; then
  timeout 60 $NSYS profile -t cuda -o $R/fwd --force-overwrite true $M/bench_cuda --suite=prefill,train --tmin=32768 --tmax=32768 --Ns=0 --delta --strategies=varlen --recurrent-tmax=0 --reps=3 --min-reps=3 --warmup=1 --deadline=0 > $R/nsys.txt 2>&1
  timeout 40 $NSYS stats -r cuda_gpu_trace -f csv -o $R/trace $R/fwd.nsys-rep >> $R/nsys.txt 2>&1; ts nsys
  gzip -f $R/trace*.csv; rm -f $R/fwd.sqlite
fi
same() { cmp <(grep -h MESSAGE $R/$1 | sed "s/.*MESSAGE: //") <(grep -h MESSAGE $R/$2 | sed "s/.*MESSAGE: //") >/dev/null && echo "$2: $1's printed values" || echo "$2: printed values differ from $1's"; }
(cd $R; same tcf_main31.txt tcf_fst.txt; same tcb_main31.txt tcb_rsc.txt; tail -n 3 tcb_*.txt tcf_*.txt memcheck_*.txt racecheck_*.txt; grep -h "^train *gdn\|^prefill *gdn" gdn_*1.txt | head -40; tail -5 fla_main.txt peer_varlen.log; cat times.txt) > $R/summary1.txt 2>&1
cd $R && tar czf $OUT/logs1.tgz * && cp summary1.txt $OUT/
