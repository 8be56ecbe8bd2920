#!/bin/bash
# The mqar command's bad input (issue 12 item 8): each case is one line on stderr naming the problem, exit
# status 2, and nothing written (an earlier run's results and checkpoints stay as they were).
# Usage: bad_input_test.sh path/to/mqar scratch-folder
set -u
MQAR=$1 DIR=$2
rm -rf "$DIR" && mkdir -p "$DIR" || exit 1
export OMP_WAIT_POLICY=passive
TINY=(--steps 3 --vocab 16 --seq-len 16 --pairs 2 --d-model 16 --layers 1 --batch 4 --eval 8 --threads 1 --no-diagnostics)
fails=0
expect_error() {  # name, expected substring, args...
  local name=$1 want=$2; shift 2
  "$MQAR" "$@" > "$DIR/$name.out" 2> "$DIR/$name.err"
  local rc=$? lines
  lines=$(wc -l < "$DIR/$name.err")
  if [ $rc -ne 2 ] || [ "$lines" -ne 1 ] || ! grep -qF -- "$want" "$DIR/$name.err"; then
    echo "FAIL $name: exit $rc, $lines stderr line(s), wanted one containing: $want"; cat "$DIR/$name.err"; fails=$((fails+1))
  else echo "ok   $name: $(cat "$DIR/$name.err")"; fi
}
same_file() {  # name, file, saved copy
  if cmp -s "$2" "$3"; then echo "ok   $1: $2 unchanged"; else echo "FAIL $1: $2 changed"; fails=$((fails+1)); fi
}

expect_error unknown_variant 'unknown variant "glaa"' --variants glaa --out "$DIR/o1" "${TINY[@]}"
[ -e "$DIR/o1" ] && { echo "FAIL unknown_variant: created $DIR/o1"; fails=$((fails+1)); }
expect_error heads 'does not divide into --heads 3 heads' --d-model 16 --heads 3 --out "$DIR/o2" "${TINY[@]}"
expect_error not_a_number '--steps takes an integer, got "ten"' --steps ten --out "$DIR/o3"
expect_error unwritable 'cannot create the output folder' --out /proc/version/sub "${TINY[@]}"
expect_error device '--device takes cpu or cuda, got "tpu"' --device tpu --out "$DIR/o4" "${TINY[@]}"
expect_error jobs '--jobs 3 exceeds --threads 1' --jobs 3 --out "$DIR/o5" "${TINY[@]}"
if ! "$MQAR" --help | grep -q -- '--device D'; then echo "FAIL --help does not list --device"; fails=$((fails+1)); fi

# runs side by side (--jobs 2, one thread each) compute what the same runs compute one at a time on one thread
J=(--steps 4 --vocab 16 --seq-len 16 --pairs 2 --d-model 16 --layers 1 --batch 4 --eval 8 --no-diagnostics --variants gla,sse_n4k1s --seeds 1,2)
"$MQAR" "${J[@]}" --threads 2 --jobs 2 --out "$DIR/jobs2" > "$DIR/jobs2.out" 2>&1 \
  && "$MQAR" "${J[@]}" --threads 1 --jobs 1 --out "$DIR/jobs1" > "$DIR/jobs1.out" 2>&1 \
  && grep -q '2 run(s) side by side on 1 thread(s) each' "$DIR/jobs2.out" \
  && cmp -s "$DIR/jobs2/curves.csv" "$DIR/jobs1/curves.csv" \
  && echo "ok   jobs: 4 runs side by side give the curves of the same runs one at a time" \
  || { echo "FAIL jobs: side-by-side runs differ from sequential ones (or a run failed)"; tail -3 "$DIR/jobs2.out"; fails=$((fails+1)); }

# a good run with checkpoints, then loads of a truncated, a mismatched and a missing file
"$MQAR" --variants gla --seeds 1 --out "$DIR/run" --save-checkpoints "${TINY[@]}" > "$DIR/good.out" 2>&1 || {
  echo "FAIL good run:"; tail -5 "$DIR/good.out"; exit 1; }
ck=$DIR/run/gla_seed1.ckpt
[ -s "$ck" ] && [ -s "$DIR/run/results.md" ] || { echo "FAIL good run wrote no checkpoint or results"; exit 1; }
ls "$DIR/run" | grep -q '\.tmp' && { echo "FAIL a temporary file was left in $DIR/run"; fails=$((fails+1)); }
cp "$DIR/run/results.md" "$DIR/results.saved"; cp "$ck" "$DIR/ckpt.saved"
head -c $(( $(stat -c %s "$ck") / 2 )) "$ck" > "$DIR/half.ckpt"
expect_error truncated 'truncated' --variants gla --seeds 1 --load "$DIR/half.ckpt" --out "$DIR/run" "${TINY[@]}" --steps 6
expect_error mismatched 'gla_seed1.ckpt' --variants sse_n4k1s --seeds 1 --load "$ck" --out "$DIR/run" "${TINY[@]}" --steps 6
expect_error missing 'cannot open' --variants gla --seeds 1 --load "$DIR/nothing.ckpt" --out "$DIR/run" "${TINY[@]}" --steps 6
expect_error two_variants 'needs one variant and one seed' --variants gla,gdn --load "$ck" --out "$DIR/run" "${TINY[@]}"
same_file after_bad_loads "$DIR/run/results.md" "$DIR/results.saved"
same_file after_bad_loads "$ck" "$DIR/ckpt.saved"

# a good load trains on from the checkpoint's step
"$MQAR" --variants gla --seeds 1 --load "$ck" --out "$DIR/run2" "${TINY[@]}" --steps 6 > "$DIR/resume.out" 2>&1 \
  && grep -q 'step      6' "$DIR/resume.out" && ! grep -q 'step      3  loss' "$DIR/resume.out" \
  && echo "ok   resume: trained steps 4-6 from the checkpoint" || { echo "FAIL resume"; tail -5 "$DIR/resume.out"; fails=$((fails+1)); }

echo "$fails failed"
[ $fails -eq 0 ]
