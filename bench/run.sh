#!/usr/bin/env bash
# bench/run.sh — runs bench_decode, bench_prefill and bench_train (LINSTATE_BENCH_PROGRAMS picks) the way the docs figures are taken, keeps the
# JSON, and prints the medians as Markdown tables.
#
#   bench/run.sh [BUILD_DIR [OUT_DIR]] [--benchmark_* flags passed to both programs]
#
#   BUILD_DIR  a configured Meson build directory (default: build); the two programs are (re)built
#   OUT_DIR    where <name>.json go (default: BUILD_DIR/bench-results)
#
# Each benchmark runs 5 times for at least 0.2 s each; only the aggregates (mean, median, stddev,
# cv) are kept. Take figures on a quiet machine: the OpenMP threads of the library spin while they
# wait, so a busy machine slows the 2-thread rows far more than the 1-thread ones.
# Examples:
#   bench/run.sh                                        # everything, build/ -> build/bench-results/
#   bench/run.sh /tmp/build-bench /tmp/res --benchmark_filter='sse_n4k1s'
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
positional=()
flags=()
for a in "$@"; do
  case "$a" in
    --*) flags+=("$a") ;;
    *) positional+=("$a") ;;
  esac
done
build=${positional[0]:-$root/build}
out=${positional[1]:-$build/bench-results}

if [ ! -f "$build/build.ninja" ]; then
  echo "run.sh: $build is not a Meson build directory; first: meson setup $build" >&2
  exit 2
fi
ninja -C "$build" bench/bench_decode bench/bench_prefill bench/bench_train >/dev/null
mkdir -p "$out"

for name in ${LINSTATE_BENCH_PROGRAMS:-decode prefill train}; do
  exe="$build/bench/bench_$name"
  echo "== $name: $exe -> $out/$name.json" >&2
  "$exe" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true --benchmark_min_time=0.2 \
    --benchmark_out="$out/$name.json" --benchmark_out_format=json ${flags[@]+"${flags[@]}"} >&2
done

# Medians as Markdown: one table per program. The "/process_time/real_time" suffix Google
# Benchmark adds to every name (wall-clock timing, process CPU time) is left out of the table.
jsons=(); for name in ${LINSTATE_BENCH_PROGRAMS:-decode prefill train}; do jsons+=("$out/$name.json"); done
python3 - "${jsons[@]}" <<'EOF'
import json, sys

def si(x, unit=""):
    for div, p in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.3g} {p}{unit}"
    return f"{x:.3g} {unit}".rstrip()

def binary(x, unit="B"):
    for div, p in ((2**40, "Ti"), (2**30, "Gi"), (2**20, "Mi"), (2**10, "Ki")):
        if abs(x) >= div:
            return f"{x / div:.3g} {p}{unit}"
    return f"{x:.3g} {unit}"

for path in sys.argv[1:]:
    with open(path) as f:
        doc = json.load(f)
    ctx = doc["context"]
    rows = [b for b in doc["benchmarks"] if b.get("aggregate_name") == "median"]
    cv = {b["run_name"]: b["real_time"] for b in doc["benchmarks"] if b.get("aggregate_name") == "cv"}
    decode = any("state_bytes" in b for b in rows)
    print(f"\n### {path.rsplit('/', 1)[-1]}: medians of {rows[0]['repetitions'] if rows else 0} repetitions "
          f"({ctx['date']}, {ctx['num_cpus']} CPUs at {ctx['mhz_per_cpu']} MHz, load {ctx.get('load_avg', '?')})\n")
    head = ["benchmark", "time", "cv", "tokens/s", "FLOPS"]
    if decode:
        head += ["state traffic/s", "state bytes/step", "all N+1 bytes/step", "saving"]
    head += ["label"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for b in rows:
        name = b["run_name"].replace("/process_time", "").replace("/real_time", "")
        cells = [f"`{name}`", f"{b['real_time']:.4g} {b['time_unit']}",
                 f"{100 * cv.get(b['run_name'], float('nan')):.1f}%",
                 si(b.get("items_per_second", 0.0)), si(b.get("FLOPS", 0.0), "FLOP/s")]
        if decode:
            sb, sa = b.get("state_bytes", 0.0), b.get("state_bytes_all", 0.0)
            cells += [binary(b.get("bytes_per_second", 0.0), "B/s"), binary(sb), binary(sa),
                      f"{sa / sb:.2f}x" if sb else "-"]
        cells += [b.get("label", "")]
        print("| " + " | ".join(cells) + " |")
EOF
