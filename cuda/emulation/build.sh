#!/usr/bin/env bash
# cuda/emulation/build.sh — builds linstate's GPU test programs for the CPU emulation
# (emulation.hpp; docs/cuda.md, "The GPU tests on the CPU"):
#   bash cuda/emulation/build.sh [--root TREE] [--depfile FILE] [--suffix S] OUT [test_cuda] [test_cuda_backward]
# into OUT/<name><S> (--root: the linstate tree whose sources to build, default this one — a branch's
# worktree, say; --depfile: a make rule naming every source they were built from, for ninja),
# compiled by g++ from a copy of cuda/ that rewrite.pl has rewritten (OUT/src), with the CUDA
# toolkit's headers (CUDA_HOME, default /usr/local/cuda; no nvcc, no libcudart, no GPU).
# Run them as the GPU programs (test_cuda_backward finds the fixtures by LINSTATE_FIXTURES).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
depfile="" suffix=""
while [ $# -gt 0 ]; do
  case $1 in
    --depfile) depfile=$2; shift 2 ;;
    --suffix) suffix=$2; shift 2 ;;
    --root) root=$(cd "$2" && pwd); shift 2 ;;
    *) break ;;
  esac
done
out=$1; shift
cuda_inc=${CUDA_HOME:-/usr/local/cuda}/include
[ -f "$cuda_inc/cuda_runtime.h" ] || { echo "build.sh: no CUDA headers at $cuda_inc (set CUDA_HOME)" >&2; exit 1; }
CXX=${CXX:-g++}
mkdir -p "$out"
rm -rf "$out/src.new" && mkdir -p "$out/src.new"
cp -r "$root/cuda/include" "$root/cuda/tests" "$out/src.new/"
find "$out/src.new" -name '*.cu' -o -name '*.cuh' | while read -r f; do perl "$here/rewrite.pl" < "$f" > "$f.tmp" && mv "$f.tmp" "$f"; done
rm -rf "$out/src" && mv "$out/src.new" "$out/src"
flags=(-std=c++20 -w -fno-pie)
inc=(-I "$root/include" -I "$root/tests/support" -I "$root/cuda/tests" $(pkg-config --cflags eigen3))
emu=(-include "$here/emulation.hpp" -I "$here/shim" -I "$out/src/include" -I "$cuda_inc")
$CXX "${flags[@]}" -O1 -I "$cuda_inc" -c "$here/scheduler.cpp" -o "$out/scheduler.o"
$CXX "${flags[@]}" -O1 -I "$cuda_inc" -c "$here/runtime.cpp" -o "$out/runtime.o"
for t in "$@"; do
  case $t in
    test_cuda) refs=(cpu_reference) ;;
    test_cuda_backward) refs=(cpu_reference_backward cpu_reference_backward_delta) ;;
    *) echo "build.sh: unknown program $t" >&2; exit 1 ;;
  esac
  objs=()
  for r in "${refs[@]}"; do
    $CXX "${flags[@]}" -O2 "${inc[@]}" -c "$root/cuda/tests/$r.cpp" -o "$out/$r.o"
    objs+=("$out/$r.o")
  done
  # (-O1: the emulated kernels run several times faster than at -O0 and build in about three minutes)
  $CXX "${flags[@]}" -O1 "${emu[@]}" "${inc[@]}" -x c++ -c "$out/src/tests/$t.cu" -o "$out/$t.o"
  $CXX -no-pie "$out/$t.o" "${objs[@]}" "$out/scheduler.o" "$out/runtime.o" -o "$out/$t$suffix"
done
if [ -n "$depfile" ]; then
  {
    for t in "$@"; do printf '%s ' "$out/$t$suffix"; done
    printf ':'
    find "$root/cuda/include" "$root/cuda/tests" "$root/include" "$root/tests/support" "$here" -type f | sort | sed 's/^/ /' | tr -d '\n'
    printf '\n'
  } > "$depfile"
fi
