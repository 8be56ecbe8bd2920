#!/usr/bin/env bash
# bench/ir_ab.sh — A/B of two builds of the CPU benchmark programs by the instructions each benchmark
# row executes per iteration (valgrind's callgrind): the machine-independent complement of
# bench/ab.sh's wall-clock A/B.
#
#   bench/ir_ab.sh DIR_A DIR_B OUT_DIR [--benchmark_filter=REGEX]
#
#   DIR_A, DIR_B  folders holding bench_decode, bench_prefill and bench_train; LINSTATE_BENCH_PROGRAMS
#                 picks programs (default "decode prefill train"). Valgrind has no AVX-512: build both
#                 for AVX2, e.g. meson setup B -Dbuildtype=release -Dnative=false -Dcpp_args=-march=x86-64-v3
#   OUT_DIR       the counts (ir.csv) and the table (ir.md)
#   VALGRIND      (environment) the valgrind launcher (default: valgrind)
#
# Why: on a shared VM a row's wall time moves by 10-30 % between runs of the same binary, more than a
# refactor's effect (docs/benchmarks.md, "Issue 9"). The number of instructions a row executes does
# not. Each program runs once per build under callgrind, every selected row with exactly one
# iteration (--benchmark_min_time=0); callgrind writes a dump when Google Benchmark's timing loop
# starts (State::StartKeepRunning) and another when it ends (State::FinishKeepRunning). A dump
# resets the counters of every thread, so dump 2n holds every instruction of every thread inside
# row n's loop: one forward (decode step, prefill) or one forward + backward (train), and the odd
# dumps hold what ran between loops. (Callgrind's --zero-before resets the calling thread only: an
# OpenMP worker's start-up work, e.g. the roofline measurement, would land in the first row.)
# OMP_WAIT_POLICY=passive in both builds, so a waiting OpenMP thread sleeps instead of spinning (a
# spin's length depends on the scheduler).
# Instruction counts are not time: memory traffic and code layout are not in them. They show whether
# two builds do the same work, and they repeat to the instruction (run a build against itself).
set -euo pipefail
if [ $# -lt 3 ]; then sed -n '2,27p' "$0" >&2; exit 2; fi
a=$1; b=$2; out=$3; shift 3
filter=${1:-}
vg=${VALGRIND:-valgrind}
command -v "$vg" > /dev/null || { echo "ir_ab.sh: valgrind is missing (apt-get install valgrind)" >&2; exit 2; }
mkdir -p "$out/raw"
export OMP_WAIT_POLICY=passive

pids=()
for name in ${LINSTATE_BENCH_PROGRAMS:-decode prefill train}; do
  for which in A B; do
    if [ $which = A ]; then e="$a/bench_$name"; else e="$b/bench_$name"; fi
    [ -x "$e" ] || { echo "ir_ab.sh: $e is missing" >&2; exit 2; }
    base="$out/raw/${name}_$which"
    rm -f "$base".cg*
    "$vg" --tool=callgrind --callgrind-out-file="$base.cg" --separate-threads=no \
      --dump-before='benchmark::State::StartKeepRunning()' --dump-before='benchmark::State::FinishKeepRunning()' \
      "$e" ${filter:+"$filter"} --benchmark_min_time=0 --benchmark_format=json > "$base.json" 2> "$base.log" &
    pids+=($!)
  done
done
for p in "${pids[@]}"; do wait "$p"; done

python3 - "$out" ${LINSTATE_BENCH_PROGRAMS:-decode prefill train} <<'EOF'
import glob, json, math, re, sys
out, progs = sys.argv[1], sys.argv[2:]
rows = {}  # (program, row) -> {build: instructions per iteration}
csv = ["program,row,build,iterations,ir,ir_per_iteration"]
for prog in progs:
    for which in "AB":
        base = f"{out}/raw/{prog}_{which}"
        bench = json.load(open(base + ".json"))["benchmarks"]
        dumps = sorted(glob.glob(base + ".cg.*"), key=lambda f: int(f.rsplit(".", 1)[1]))[1::2]  # the loops
        if len(dumps) != len(bench):
            sys.exit(f"ir_ab.sh: {base}: {len(dumps)} dumps for {len(bench)} rows (a row ran more than one loop?)")
        for d, f in zip(bench, dumps):
            ir = next(int(l.split()[1]) for l in open(f) if l.startswith(("summary:", "totals:")))
            it = d["iterations"]
            rows.setdefault((prog, d["name"]), {})[which] = ir / it
            csv.append(f"{prog},{d['name']},{which},{it},{ir},{ir / it:.1f}")
open(f"{out}/ir.csv", "w").write("\n".join(csv) + "\n")
lines = ["| program | row | A instructions / iteration | B instructions / iteration | B / A |", "|---|---|---|---|---|"]
logs = {}
for (prog, row), d in rows.items():
    if "A" in d and "B" in d:
        r = d["B"] / d["A"]
        logs.setdefault(prog, []).append(math.log(r))
        lines.append(f"| {prog} | `{row.replace('/process_time/real_time', '')}` | {d['A']:.4g} | {d['B']:.4g} | {r:.4f} |")
lines.append("")
for prog, l in logs.items():
    lines.append(f"- {prog}: {len(l)} rows, geomean B / A {math.exp(sum(l) / len(l)):.4f}, range "
                 f"{math.exp(min(l)):.4f}-{math.exp(max(l)):.4f}, {sum(abs(x) <= math.log(1.05) for x in l)} within 5 %, "
                 f"{sum(abs(x) <= math.log(1.01) for x in l)} within 1 %")
open(f"{out}/ir.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
