#!/bin/bash
# The mqar command on the GPU (--device cuda) against the CPU: the same initial model and data give the
# same held-out loss before training (up to fp32 summation order) and close curves after a few steps; a
# checkpoint saved on the GPU loads and trains on on the CPU and on the GPU; the GPU run's bad input.
# Exits 77 (Meson's SKIP) without a GPU.   Usage: device_test.sh path/to/mqar scratch-folder
set -u
MQAR=$1 DIR=$2
nvidia-smi -L 2>/dev/null | grep -q '^GPU' || { echo "SKIP: no GPU (nvidia-smi lists none)"; exit 77; }
"$MQAR" --help | grep -q -- '--device D' || { echo "FAIL: --help lists no --device"; exit 1; }
rm -rf "$DIR" && mkdir -p "$DIR" || exit 1
export OMP_WAIT_POLICY=passive
T=(--steps 8 --vocab 16 --seq-len 16 --pairs 2 --d-model 16 --layers 2 --batch 8 --eval 32 --no-diagnostics --seeds 1,2)
fails=0
"$MQAR" "${T[@]}" --threads 1 --out "$DIR/cpu" > "$DIR/cpu.out" 2>&1 || { echo "FAIL cpu run"; tail -3 "$DIR/cpu.out"; exit 1; }
"$MQAR" "${T[@]}" --device cuda --out "$DIR/gpu" > "$DIR/gpu.out" 2>&1 || { echo "FAIL gpu run"; tail -3 "$DIR/gpu.out"; exit 1; }
grep -q 'GPU memory MiB' "$DIR/gpu/results.md" || { echo "FAIL: the GPU table has no GPU memory column"; fails=$((fails+1)); }
# curves.csv: variant,seed,step,heldout_accuracy,heldout_loss — step 0 within 1e-5 (relative), the last step within 2e-2
paste -d, "$DIR/cpu/curves.csv" "$DIR/gpu/curves.csv" | awk -F, -v out="$DIR/compare.txt" '
  NR > 1 { if ($1 != $6 || $2 != $7 || $3 != $8) { bad++; next }
           d = ($5 - $10); if (d < 0) d = -d; r = d / ($5 > 1e-9 ? $5 : 1e-9);
           tol = ($3 == 0) ? 1e-5 : 2e-2; n++; if (r > tol) bad++;
           if (r > worst[$3 == 0]) worst[$3 == 0] = r }
  END { printf "%d rows compared, %d beyond tolerance; worst relative difference of the held-out loss: step 0 %.2e, later %.2e\n",
               n, bad, worst[1], worst[0] > out; exit (bad > 0 || n == 0) }' \
  && echo "ok   cpu vs gpu: $(cat "$DIR/compare.txt")" || { echo "FAIL cpu vs gpu: $(cat "$DIR/compare.txt" 2>/dev/null)"; fails=$((fails+1)); }
# a checkpoint saved on the GPU trains on on either device
C=(--variants sse_n4k1s --seeds 1 --vocab 16 --seq-len 16 --pairs 2 --d-model 16 --layers 2 --batch 8 --eval 32 --no-diagnostics)
"$MQAR" "${C[@]}" --steps 4 --device cuda --save-checkpoints --out "$DIR/g4" > "$DIR/g4.out" 2>&1 \
  && "$MQAR" "${C[@]}" --steps 8 --threads 1 --load "$DIR/g4/sse_n4k1s_seed1.ckpt" --out "$DIR/c8" > "$DIR/c8.out" 2>&1 \
  && "$MQAR" "${C[@]}" --steps 8 --device cuda --load "$DIR/g4/sse_n4k1s_seed1.ckpt" --out "$DIR/g8" > "$DIR/g8.out" 2>&1 \
  && grep -q 'step      8' "$DIR/c8.out" && grep -q 'step      8' "$DIR/g8.out" \
  && echo "ok   checkpoint: saved on the GPU at step 4, trained on to step 8 on the CPU and on the GPU" \
  || { echo "FAIL checkpoint across devices"; tail -2 "$DIR"/g4.out "$DIR"/c8.out "$DIR"/g8.out; fails=$((fails+1)); }
err=$("$MQAR" "${C[@]}" --device cuda --jobs 2 --threads 2 --out "$DIR/j" 2>&1 >/dev/null); rc=$?
[ $rc -eq 2 ] && [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] && printf '%s' "$err" | grep -q 'needs --device cpu' \
  && echo "ok   jobs on the GPU: $err" || { echo "FAIL jobs on the GPU: exit $rc: $err"; fails=$((fails+1)); }
echo "$fails failed"
[ $fails -eq 0 ]
