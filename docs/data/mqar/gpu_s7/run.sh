#!/bin/bash
# mqar on the GPU (issue 12, session 7): the model test under memcheck, the device test, the defaults on
# the GPU over 3 seeds, then a larger regime (more pairs than a head's key dimension) while time lasts.
set -u
B=.dev-mqar
FINAL=$OUT; OUT=/tmp/o; mkdir -p $OUT
trap 'tar czf $FINAL/all.tgz -C /tmp o; cp $OUT/progress.txt $FINAL/ 2>/dev/null' EXIT
T0=${T0:-$(date +%s)}; el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi -L > $OUT/gpu.txt 2>&1; nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv >> $OUT/gpu.txt 2>&1
chmod +x $B/mqar
echo "build done at $(el) s" >> $OUT/progress.txt
( timeout 60 bash $B/device_test.sh $B/mqar /tmp/devtest 2>&1; echo "exit $?" ) > $OUT/device_test.txt
echo "device test done at $(el) s" >> $OUT/progress.txt
export OMP_WAIT_POLICY=passive
{ time timeout 120 $B/mqar --device cuda --seeds 1,2,3 --out $OUT/default ; } > $OUT/default_log.txt 2>&1
echo "defaults done at $(el) s" >> $OUT/progress.txt
# the larger regime: 64 pairs > K = 32 per head; vocab 256 (chance 1/128), T = 256; seed 1 of every variant first
for seed in 1 2 3; do
  for v in gla sse_n4k1s sse_n8k2 gdn sse_gdn; do
    [ $(el) -gt 440 ] && { echo "stopped before $v seed $seed at $(el) s" >> $OUT/progress.txt; break 2; }
    timeout $(( 500 - $(el) )) $B/mqar --device cuda --variants $v --seeds $seed --vocab 256 --seq-len 256 --pairs 64 --steps 2000 \
       --eval 256 --no-diagnostics --out $OUT/big_${v}_s$seed > $OUT/big_${v}_s$seed.log 2>&1
    echo "big $v seed $seed done at $(el) s (exit $?)" >> $OUT/progress.txt
  done
done
