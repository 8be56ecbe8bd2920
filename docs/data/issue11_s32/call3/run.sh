#!/bin/bash
# session 32 call 3: pa (branch s32-prep-async: the forward's tensor-core prep with its row copies by cp.async,
# the cumsum beside them, V loaded a phase early) and bp (branch s32-bprep-vload = pa + s31's compile-time-K
# state kernel where the grid leaves room + the backward prep's V tiles loaded a phase early) against main
# (.dev-s31/rsc.txz: main's kernels). Tests (printed values compared with main's, docs/data/issue11_s31/call1),
# the GLA / GDN / SSE-GDN rows alternated three times, ncu durations, compute-sanitizer, source counters of
# the two preps. Carry .dev-s31 (rsc.txz), .dev-s32 (pa.txz, bp.txz), .fixtures. Output: logs3.tgz, summary3.txt.
R=$OUT/r; mkdir -p $R; D=/tmp/s32
export LINSTATE_FIXTURES=$PWD/.fixtures
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }
mkdir -p $D/rsc $D/pa $D/bp && tar xf .dev-s31/rsc.txz -C $D/rsc && tar xf .dev-s32/pa.txz -C $D/pa && tar xf .dev-s32/bp.txz -C $D/bp
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $R/smi.txt 2>&1
timeout 100 $D/pa/test_cuda > $R/tcf_pa.txt 2>&1; echo "rc=$?" >> $R/tcf_pa.txt; ts tcf_pa
timeout 100 $D/bp/test_cuda > $R/tcf_bp.txt 2>&1; echo "rc=$?" >> $R/tcf_bp.txt; ts tcf_bp
timeout 100 $D/bp/test_cuda_backward -tce="timing*" > $R/tcb_bp.txt 2>&1; echo "rc=$?" >> $R/tcb_bp.txt; ts tcb_bp
P="--suite=prefill,train --tmin=8192 --tmax=65536 --strategies=varlen --recurrent-tmax=0 --deadline=40 --Ns=0 --delta"
for i in 1 2 3; do for b in rsc pa bp; do timeout 60 $D/$b/bench_cuda $P --out=$R/gdn_$b$i.csv > $R/gdn_$b$i.txt 2>&1; ts "gdn_$b$i rc=$?"; done; done
A="--suite=train --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=0 --delta --strategies=varlen --tmin=32768 --tmax=32768"
for b in rsc pa bp; do timeout 40 $NCU --clock-control none --metrics gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread,launch__grid_size -k regex:delta_ -c 16 --csv --page raw $D/$b/bench_cuda $A > $R/ncu_$b.csv 2>&1; ts ncu_$b; done
F="--suite=prefill --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=4 --delta --strategies=varlen --tmin=32768 --tmax=32768"
for b in rsc bp; do timeout 60 $NCU --clock-control none --metrics gpu__time_duration.sum,launch__registers_per_thread,launch__grid_size,lts__t_sector_hit_rate.pct,dram__bytes_read.sum -k regex:delta_tc_ --csv --page raw $D/$b/bench_cuda $F > $R/ncu_sse_$b.csv 2>&1; ts ncu_sse_$b; done
# doctest splits -tc at commas: one filter per name part
timeout 90 $CS --tool memcheck $D/bp/test_cuda "-tc=*bf16 inputs on tensor cores*" > $R/memcheck_bp_f.txt 2>&1; echo "rc=$?" >> $R/memcheck_bp_f.txt; ts memcheck_bp_f
timeout 120 $CS --tool racecheck $D/bp/test_cuda "-tc=*bf16 inputs on tensor cores*" > $R/racecheck_bp_f.txt 2>&1; echo "rc=$?" >> $R/racecheck_bp_f.txt; ts racecheck_bp_f
timeout 120 $CS --tool memcheck $D/bp/test_cuda_backward "-tc=*inputs on tensor cores*,*read by none*" > $R/memcheck_bp_b.txt 2>&1; echo "rc=$?" >> $R/memcheck_bp_b.txt; ts memcheck_bp_b
timeout 120 $CS --tool racecheck $D/bp/test_cuda_backward "-tc=*inputs on tensor cores*" > $R/racecheck_bp_b.txt 2>&1; echo "rc=$?" >> $R/racecheck_bp_b.txt; ts racecheck_bp_b
G="--suite=train --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=0 --delta --strategies=varlen --tmin=32768 --tmax=32768"
timeout 60 $NCU --clock-control none --section SourceCounters --section WarpStateStats --page source --print-source sass --csv -k regex:delta_tc_prep -c 1 $D/bp/bench_cuda $G > $R/src_tcprep_bp.csv 2> $R/src_tcprep_bp.err; gzip -f $R/src_tcprep_bp.csv; ts src_tcprep
timeout 60 $NCU --clock-control none --section SourceCounters --section WarpStateStats --page source --print-source sass --csv -k regex:delta_prep -c 1 $D/bp/bench_cuda $G > $R/src_prep_bp.csv 2> $R/src_prep_bp.err; gzip -f $R/src_prep_bp.csv; ts src_prep
(cd $R; cat smi.txt; tail -n 3 tcf_*.txt tcb_*.txt memcheck_*.txt racecheck_*.txt; grep -h "gdn" gdn_*1.txt | grep -v "^#"; cat times.txt) > $R/summary3.txt 2>&1
cd $R && tar czf $OUT/logs3.tgz * && cp summary3.txt $OUT/
