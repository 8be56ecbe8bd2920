#!/usr/bin/env bash
# Used for the ABBA rounds of docs/benchmarks.md, "Issue 13, session 7"; BEFORE / AFTER are bench/ggml/compare.cpp
# binaries built as bench/ggml/run.sh does, with -I pointing at the include/ of the commit before and after.
# abba.sh OUTDIR BEFORE_BIN AFTER_BIN [compare args...]: runs B A A B, each one campaign, logs with uptime
set -euo pipefail
out=$1 b=$2 a=$3; shift 3
mkdir -p "$out"
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
i=0
for which in before after after before; do
  i=$((i+1))
  bin=$b; [[ $which == after ]] && bin=$a
  { echo "# round $i: $which = $bin"; echo "# $(date -u +%H:%M:%S) $(uptime)"; "$bin" "$@" 2>&1; echo "# $(date -u +%H:%M:%S) $(uptime)"; } > "$out/$i-$which.txt"
done
python3 "$(dirname "$0")/abba_table.py" "$out"
