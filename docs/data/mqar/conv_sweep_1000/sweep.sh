#!/bin/bash
# MQAR sweep on the GPU host's CPU: one process per (config, variant, seed), 1 thread, pinned to its own core.
cd "$(dirname "$0")"
nproc; lscpu | grep -E "Model name|^CPU\(s\)"
i=0
run() {  # name, args...
  local name=$1; shift
  ( OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive timeout 520 taskset -c $i ./mqar --threads 1 --no-diagnostics --out $OUT/o_$name "$@" > $OUT/log_$name.txt 2>&1 ) &
  i=$((i+1))
}
for v in gla sse_n4k1s sse_n8k2 gdn sse_gdn; do run c4_lr3_${v}_s1 --variants $v --seeds 1; done
for v in gla sse_n8k2 sse_gdn; do run c4_lr10_${v}_s1 --variants $v --seeds 1 --lr 1e-2; done
for v in gla sse_n8k2; do for s in 2 3; do run c4_lr3_${v}_s$s --variants $v --seeds $s; done; done
for v in gla sse_n8k2; do run c4fla_lr3_${v}_s1 --variants $v --seeds 1 --conv-init-std 0.02; done
run c0_lr3_sse_n8k2_s2 --variants sse_n8k2 --seeds 2 --short-conv 0
wait
cd $OUT && for f in log_*.txt; do echo "$f: $(grep '^== .*held-out' $f)"; done > summary.txt; cat summary.txt
tar czf logs.tgz log_*.txt o_*/results.md o_*/curves.csv && rm -rf o_* log_*.txt
