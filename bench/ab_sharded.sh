#!/usr/bin/env bash
# bench/ab_sharded.sh — bench/ab.sh on a many-core machine: the rows split into SHARDS shards, each
# run by its own bench/ab.sh pinned to 2 distinct physical cores (like the project's 2-core machine),
# all at once; the samples merged into OUT_DIR/merged/ab.md.
#
#   bench/ab_sharded.sh DIR_A DIR_B OUT_DIR [ROUNDS [SHARDS [SECONDS]]]
#
# ROUNDS defaults to 9, SHARDS to (physical cores / 2) − 1, SECONDS (a time limit per shard) to 560.
# The shards share the memory system, so the machine should run nothing else.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
a=$1; b=$2; out=$3; rounds=${4:-9}
mapfile -t cpus < <(lscpu -p=CPU,CORE | grep -v '^#' | sort -t, -k2,2n -u | cut -d, -f1)
n=${5:-$(( ${#cpus[@]} / 2 - 1 ))}; limit=${6:-560}
if ((n < 1 || 2 * n > ${#cpus[@]})); then echo "ab_sharded.sh: $n shards need $((2 * n)) cores, ${#cpus[@]} found" >&2; exit 2; fi
mkdir -p "$out"
for ((i = 0; i < n; i++)); do
  AB_SHARD=$i/$n timeout "$limit" taskset -c "${cpus[$((2 * i))]},${cpus[$((2 * i + 1))]}" \
    "$here/ab.sh" "$a" "$b" "$out/shard$i" "$rounds" > "$out/shard$i.log" 2>&1 &
done
wait || true
"$here/ab.sh" --report "$out/merged" "$out"/shard*/samples.csv
