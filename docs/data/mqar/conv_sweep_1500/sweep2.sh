#!/bin/bash
# MQAR: wave 1 = three candidate configurations x five variants, seed 1; wave 2 = seeds 2 and 3 of the
# configuration whose worst variant did best, and seed 2 of the runner-up. One process per run, 1 thread,
# pinned to its own core. Steps 1500 (the candidate default).
cd "$(dirname "$0")"
STEPS=1500
declare -A CFG=( [c4lr10]="--short-conv 4 --lr 1e-2" [c4lr5]="--short-conv 4 --lr 5e-3" [c2lr10]="--short-conv 2 --lr 1e-2" )
VARS="gla sse_n4k1s sse_n8k2 gdn sse_gdn"
i=0
run() {  # name, args...
  local name=$1; shift
  ( OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive timeout 265 taskset -c $((i % 16)) ./mqar --threads 1 --no-diagnostics --steps $STEPS \
      --out $OUT/o_$name "$@" > $OUT/log_$name.txt 2>&1 ) &
  i=$((i+1))
}
acc() { grep -h '^== .*held-out accuracy' $OUT/log_$1.txt | sed 's/.*held-out accuracy \([0-9.]*\).*/\1/'; }
for c in c4lr10 c4lr5 c2lr10; do for v in $VARS; do run ${c}_${v}_s1 --variants $v --seeds 1 ${CFG[$c]}; done; done
run c4lr10fla_sse_gdn_s1 --variants sse_gdn --seeds 1 --short-conv 4 --lr 1e-2 --conv-init-std 0.02
wait
# score = the worst variant's accuracy (a run that did not finish counts 0)
for c in c4lr10 c4lr5 c2lr10; do
  m=1; for v in $VARS; do a=$(acc ${c}_${v}_s1); a=${a:-0}; m=$(python3 -c "print(min($m,$a))"); done
  echo "$m $c"
done | sort -rn > $OUT/scores.txt
cat $OUT/scores.txt
best=$(sed -n 1p $OUT/scores.txt | cut -d' ' -f2); second=$(sed -n 2p $OUT/scores.txt | cut -d' ' -f2)
i=0
for v in $VARS; do for s in 2 3; do run ${best}_${v}_s$s --variants $v --seeds $s ${CFG[$best]}; done; done
for v in $VARS; do run ${second}_${v}_s2 --variants $v --seeds 2 ${CFG[$second]}; done
wait
cd $OUT && for f in log_*.txt; do echo "$f: $(grep '^== .*held-out' $f)"; done > summary.txt; cat summary.txt
tar czf logs.tgz log_*.txt o_*/results.md o_*/curves.csv && rm -rf o_* log_*.txt
