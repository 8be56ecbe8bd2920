#!/bin/bash
# session 33 call 2 (H200): the issue's same-call table with main (aebfcf7: session 32's main + the delta kernels'
# uniform warp index; build `main` = .dev-s33/main.txz, bench_cuda/test_cuda/test_cuda_backward), T = 4096…65536:
# our GLA / SSE / GDN rows before and after fla main's chunk_gla / chunk_gated_delta_rule and the SSE authors'
# varlen strategy (cached autotune results in .fla/tc); then ncu of one forward + backward call of each variant
# at T = 32768 (what limits each kernel), and the decode suite where time is left. Carry .dev-s33, .fla.
# Output: $OUT/logs2.tgz, $OUT/summary2.txt. Tables: TS=4096,8192,16384,32768,65536 python3 docs/data/issue11_s32/tables.py DIR main main; python3 docs/data/issue11_s33/ncu_limits.py DIR
R=/tmp/r2; mkdir -p $R; D=/tmp/s33; CAP=${CAP:-560}
left() { [ $SECONDS -lt $((CAP - $1)) ]; }
ts() { echo "$1 $SECONDS" >> $R/times.txt; }
finish() { (cd $R; grep "NVIDIA" smi.txt | head -2; grep -h "^train *gdn\|^prefill *gdn" gdn_main1.txt; tail -n 3 fla_main.txt peer_varlen.log; cat times.txt) > $R/summary2.txt 2>&1
  (cd $R && tar czf $OUT/logs2.tgz * && cp summary2.txt $OUT/); }
trap finish EXIT
mkdir -p $D/main && tar xf .dev-s33/main.txz -C $D/main; M=$D/main
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
nvidia-smi > $R/smi.txt 2>&1; nvidia-smi -q -d CLOCK >> $R/smi.txt 2>&1
mkdir -p /tmp/tc_main /tmp/tc_varlen && tar xzf .fla/tc/tc_main_autotune.tgz -C /tmp/tc_main && tar xzf .fla/tc/tc_varlen_autotune.tgz -C /tmp/tc_varlen
P="--suite=prefill,train --tmin=4096 --tmax=65536 --strategies=varlen --recurrent-tmax=0 --deadline=30"
timeout 40 $M/bench_cuda $P --Ns=0 --delta --out=$R/gdn_main1.csv > $R/gdn_main1.txt 2>&1; ts "gdn1 rc=$?"
timeout 60 $M/bench_cuda $P --Ns=4,8,16 --out=$R/gla1.csv > $R/gla1.txt 2>&1; ts "gla1 rc=$?"
(cd .fla/peer && FLA_VENDOR=$PWD FLA_CACHE_RESULTS=1 TRITON_CACHE_DIR=/tmp/tc_varlen timeout 75 python3 bench_fla.py --out $R/peer_varlen.json --suite varlen@4,8,16 --Ts 4096,8192,16384,32768,65536 --tune varlen4 --deadline 70 > $R/peer_varlen.log 2>&1); ts "peer rc=$?"
FLA_VENDOR=.fla/fla_main OPS=gla,gdn TS=8192,16384,32768,65536,4096 OUTJSON=$R/fla_main.json FLA_CACHE_RESULTS=1 TRITON_CACHE_DIR=/tmp/tc_main DEADLINE=110 timeout 120 python3 .fla/bench_fla_main.py > $R/fla_main.txt 2>&1; ts "fla rc=$?"
left 25 && { timeout 40 $M/bench_cuda $P --Ns=0 --delta --out=$R/gdn_main2.csv > $R/gdn_main2.txt 2>&1; ts "gdn2 rc=$?"; }
left 40 && { timeout 60 $M/bench_cuda $P --Ns=4,8,16 --out=$R/gla2.csv > $R/gla2.txt 2>&1; ts "gla2 rc=$?"; }
A="--suite=train --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --strategies=varlen --tmin=32768 --tmax=32768"
MET=gpu__time_duration.sum,launch__grid_size,launch__block_size,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__throughput.avg.pct_of_peak_sustained_elapsed,gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,l1tex__throughput.avg.pct_of_peak_sustained_active,smsp__average_warp_latency_issue_stalled_barrier.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio
left 100 && { timeout 90 $NCU --clock-control none --metrics $MET -c 80 --csv --page raw $M/bench_cuda $A --Ns=4 > $R/ncu_gla_sse.csv 2>&1; ts ncu_gla_sse; }
left 100 && { timeout 90 $NCU --clock-control none --metrics $MET -k regex:delta_ -c 40 --csv --page raw $M/bench_cuda $A --Ns=0 --delta > $R/ncu_gdn.csv 2>&1; ts ncu_gdn; }
left 40 && { timeout 40 $M/bench_cuda --suite=decode,copy --deadline=30 --out=$R/decode.csv > $R/decode.txt 2>&1; ts "decode rc=$?"; }
