#!/usr/bin/env bash
# bench/compile_times.sh — compile time of one translation unit per use of linstate (the probes of
# bench/compile_probe.cpp, plus one CUDA TU when nvcc is found), as a Markdown table: CPU seconds
# (user + sys, which a busy machine disturbs less than wall time) and wall seconds, per TU, median of
# REPS compiles (default 3). Flags: a consumer's optimised build, g++ -std=c++20 -O2 -fopenmp (and
# nvcc -O2 -arch=sm_90 for the CUDA TU).
#
#   bench/compile_times.sh [REPS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
reps=${1:-3}
cxx=${CXX:-g++}
eigen=$(pkg-config --cflags-only-I eigen3 | sed 's/-I/-isystem /g')
flags=(-std=c++20 -O2 -fopenmp -I"$root/include" $eigen)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
names=("" "#include <linstate/linstate.hpp> only" "GLA decode (forward_in_place)" "GLA prefill (forward, automatic)"
       "GLA forward + backward" "SSE-n4k1s forward + backward, mask + varlen" "GLA forward, fp32 + bf16 + fp16 inputs")

# time_one LABEL CMD...: one table row
time_one() {
  local label=$1; shift
  local cpu=() wall=()
  for ((r = 0; r < reps; r++)); do
    /usr/bin/time -f '%U %S %e' -o "$tmp/t" "$@" >/dev/null 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
    read -r u s e < "$tmp/t"
    cpu+=("$(python3 -c "print($u + $s)")"); wall+=("$e")
  done
  python3 - "$label" "${cpu[*]}" "${wall[*]}" <<'PY'
import statistics, sys
c = [float(x) for x in sys.argv[2].split()]; w = [float(x) for x in sys.argv[3].split()]
print(f"| {sys.argv[1]} | {statistics.median(c):.1f} | {statistics.median(w):.1f} |")
PY
}

echo "| translation unit | CPU s (user + sys) | wall s |"
echo "|---|---|---|"
for p in 1 2 3 4 5 6; do
  time_one "${names[$p]}" "$cxx" "${flags[@]}" -DLINSTATE_PROBE=$p -c "$root/bench/compile_probe.cpp" -o "$tmp/p.o"
done
time_one "GLA + SSE-n4k1s + SSE-GDN forward + backward (issue 9's probe)" "$cxx" "${flags[@]}" -c "$root/bench/compile_probe.cpp" -o "$tmp/p.o"
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
if [ -x "$nvcc" ]; then
  time_one "CUDA: GLA forward on linstate::cuda (nvcc, tests/consumers/cmake/consumer_cuda.cu)" \
    "$nvcc" -std=c++20 -O2 -arch=sm_90 --expt-relaxed-constexpr -Xcompiler=-fopenmp -I"$root/include" -I"$root/cuda/include" \
    $eigen -c "$root/tests/consumers/cmake/consumer_cuda.cu" -o "$tmp/c.o"
fi
echo
echo "$("$cxx" --version | head -1); $(nproc) cores; $(date -u +%Y-%m-%d)"
