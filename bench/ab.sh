#!/usr/bin/env bash
# bench/ab.sh — A/B of two builds of the CPU benchmark programs, interleaved row by row.
#
#   bench/ab.sh DIR_A DIR_B OUT_DIR [ROUNDS] [--benchmark_filter=REGEX]
#
#   DIR_A, DIR_B  folders holding bench_decode, bench_prefill and bench_train (a Meson build's
#                 bench/ folder, or a folder of copies); LINSTATE_BENCH_PROGRAMS picks programs
#   OUT_DIR       where the raw samples (samples.csv) and the table (ab.md) go
#   ROUNDS        how many times every row runs in each build (default 5)
#   AB_SHARD=i/n  (environment) run only the rows whose index is i modulo n, so that n copies pinned
#                 to disjoint cores (taskset -c) share the rows of a many-core machine
#   bench/ab.sh --report OUT_DIR CSV...   merges the samples of several runs into OUT_DIR/ab.md
#
# Why row by row: on a shared 2-core VM the speed of the machine drifts by 10-25 % over minutes,
# so two whole-program runs taken one after the other differ by more than a refactor's effect.
# Here every benchmark row runs as its own short process, A then B then B then A ... (the order
# alternates each round), so both builds see the same drift; the ratio of a row is
# median(B) / median(A) over the rounds, and its spread is the range of the per-round ratios.
# A ratio below 1 means B is faster. Nothing else should run on the machine meanwhile.
set -euo pipefail
report_only=0
if [ "${1:-}" = --report ]; then report_only=1; out=$2; shift 2; csvs=("$@"); mkdir -p "$out"; fi
if [ $report_only = 0 ]; then
if [ $# -lt 3 ]; then sed -n '2,21p' "$0" >&2; exit 2; fi
a=$1; b=$2; out=$3; shift 3
rounds=5
if [ $# -gt 0 ] && [[ $1 != --* ]]; then rounds=$1; shift; fi
filter=${1:-}
mkdir -p "$out"
csv="$out/samples.csv"
echo "program,row,round,build,real_ns" > "$csv"

for name in ${LINSTATE_BENCH_PROGRAMS:-decode prefill train}; do
  ea="$a/bench_$name"; eb="$b/bench_$name"
  for e in "$ea" "$eb"; do [ -x "$e" ] || { echo "ab.sh: $e is missing" >&2; exit 2; }; done
  mapfile -t all_rows < <("$ea" --benchmark_list_tests ${filter:+"$filter"})
  rows=()
  for ((i = 0; i < ${#all_rows[@]}; i++)); do
    if [ -z "${AB_SHARD:-}" ] || ((i % ${AB_SHARD#*/} == ${AB_SHARD%/*})); then rows+=("${all_rows[$i]}"); fi
  done
  echo "== $name: ${#rows[@]} rows x $rounds rounds" >&2
  for row in "${rows[@]}"; do
    re="^$(printf '%s' "$row" | sed 's/[][().*+?^$|]/\\&/g')\$"
    for ((r = 0; r < rounds; r++)); do
      if ((r % 2 == 0)); then order="A B"; else order="B A"; fi
      for which in $order; do
        if [ "$which" = A ]; then e=$ea; else e=$eb; fi
        ns=$("$e" --benchmark_filter="$re" --benchmark_min_time=0.2 --benchmark_format=json 2>/dev/null |
             python3 -c 'import json,sys; d=json.load(sys.stdin)["benchmarks"][0]; m={"ns":1,"us":1e3,"ms":1e6,"s":1e9}[d["time_unit"]]; print(d["real_time"]*m)')
        echo "$name,$row,$r,$which,$ns" >> "$csv"
      done
    done
  done
done

csvs=("$csv")
fi

python3 - "$out/ab.md" "${csvs[@]}" <<'EOF'
import csv, math, statistics, sys
from collections import defaultdict
t = defaultdict(lambda: {"A": {}, "B": {}})
for f in sys.argv[2:]:
    for r in csv.DictReader(open(f)):
        t[(r["program"], r["row"])][r["build"]][int(r["round"])] = float(r["real_ns"])
lines = ["| program | row | A median (ms) | B median (ms) | B / A | per-round B / A (min-max) |",
         "|---|---|---|---|---|---|"]
logs = defaultdict(list)
for (prog, row), d in sorted(t.items(), key=lambda kv: (["decode", "prefill", "train"].index(kv[0][0]) if kv[0][0] in ("decode", "prefill", "train") else 9, kv[0][1])):
    ma, mb = statistics.median(d["A"].values()), statistics.median(d["B"].values())
    per = [d["B"][k] / d["A"][k] for k in d["A"] if k in d["B"]]
    ratio = mb / ma
    logs[prog].append(math.log(ratio))
    name = row.replace("/process_time/real_time", "")
    lines.append(f"| {prog} | `{name}` | {ma/1e6:.4g} | {mb/1e6:.4g} | {ratio:.3f} | {min(per):.3f}-{max(per):.3f} |")
lines.append("")
for prog, l in logs.items():
    within = sum(abs(x) <= math.log(1.05) for x in l)
    lines.append(f"- {prog}: geomean B / A {math.exp(sum(l)/len(l)):.3f}, {within} of {len(l)} rows within 5 %, "
                 f"worst {math.exp(max(l, key=abs)):.3f}")
open(sys.argv[1], "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
