#!/usr/bin/env bash
# bench/profile.sh — issue 13, item 5: where the CPU chunked forward spends its time, and whether
# Eigen's GEMM at the chunk's shapes is the limit. Builds, with the release flags of the meson build
# (-O3 -march=native -fopenmp -DNDEBUG), into BUILD_DIR:
#   phase_profile            bench/phase_profile.cpp with LINSTATE_PHASE_TIMERS=1 (the kernels' lap timers)
#   train_profile            bench/train_profile.cpp, the same for GLA's forward and backward (training, item 4)
#   gemm_shapes_openblas     bench/gemm_shapes.cpp against OpenBLAS (Debian libopenblas-dev), if present
#   gemm_shapes_blis         the same against BLIS (Debian libblis-openmp-dev), if present
#   gemm_shapes              Eigen only, when neither is installed
# and runs them (OMP_WAIT_POLICY=passive; the BLAS libraries on one thread). Not part of the meson
# build: CI needs no BLAS.
#
#   bench/profile.sh BUILD_DIR [phase_profile options]     # e.g. --threads=1 --T=4096
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: bench/profile.sh BUILD_DIR [phase_profile options]}
shift
mkdir -p "$out"
cxx=${CXX:-g++}
flags=(-std=c++20 -O3 -march=native -fopenmp -DNDEBUG -Wno-maybe-uninitialized -I"$root/include" $(pkg-config --cflags eigen3))
build() {  # build OUT SRC [extra flags...]
  local bin=$1 src=$2
  shift 2
  if [[ ! -x $bin || $src -nt $bin ]] || [[ -n $(find "$root/include" -newer "$bin" -name '*.hpp' -print -quit) ]]; then
    echo "== building $bin" >&2
    nice "$cxx" "${flags[@]}" "$src" -o "$bin" "$@"
  fi
}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive} OPENBLAS_NUM_THREADS=1 BLIS_NUM_THREADS=1
build "$out/phase_profile" "$root/bench/phase_profile.cpp" -DLINSTATE_PHASE_TIMERS=1
build "$out/train_profile" "$root/bench/train_profile.cpp" -DLINSTATE_PHASE_TIMERS=1
blas=0
if pkg-config --exists openblas; then
  build "$out/gemm_shapes_openblas" "$root/bench/gemm_shapes.cpp" -DLINSTATE_CBLAS=1 \
    -DLINSTATE_CBLAS_NAME="\"OpenBLAS $(pkg-config --modversion openblas)\"" $(pkg-config --cflags --libs openblas)
  blas=1
fi
blis=/usr/lib/x86_64-linux-gnu/blis-openmp
if [[ -f $blis/libblis.so ]]; then
  build "$out/gemm_shapes_blis" "$root/bench/gemm_shapes.cpp" -DLINSTATE_CBLAS=1 \
    -DLINSTATE_CBLAS_NAME="\"BLIS $(dpkg-query -W -f='${Version}' libblis-openmp-dev 2>/dev/null)\"" \
    -I/usr/include/x86_64-linux-gnu/blis-openmp -L"$blis" -Wl,-rpath,"$blis" -lblis
  blas=1
fi
(( blas )) || build "$out/gemm_shapes" "$root/bench/gemm_shapes.cpp"
echo "# $(uptime)"
"$out/phase_profile" "$@"
echo; "$out/train_profile" --threads=2
for b in "$out"/gemm_shapes_openblas "$out"/gemm_shapes_blis "$out"/gemm_shapes; do
  [[ -x $b ]] && { echo; echo "\$ $b"; "$b"; }
done
# OpenBLAS 0.3.21 takes an AVX-512 Xeon it does not know (family 6 model 207) for Prescott (SSE3
# kernels); run it again with its AVX-512 kernels forced.
if [[ -x $out/gemm_shapes_openblas ]] && grep -q avx512f /proc/cpuinfo; then
  echo; echo "\$ OPENBLAS_CORETYPE=SkylakeX $out/gemm_shapes_openblas"
  OPENBLAS_CORETYPE=SkylakeX "$out/gemm_shapes_openblas"
fi
echo "# $(uptime)"
