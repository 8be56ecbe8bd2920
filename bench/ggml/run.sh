#!/usr/bin/env bash
# bench/ggml/run.sh — linstate against ggml's CPU ops, in one process, on identical inputs (issue 13).
#
# Gets ggml's source from a registry package at run time (the llama-cpp-python source distribution on
# PyPI vendors llama.cpp, whose ggml has ggml_gated_linear_attn and ggml_gated_delta_net), builds
# ggml's CPU backend (static, OpenMP, -O3, -march=native) and bench/ggml/compare.cpp into an ignored
# folder, then runs the comparison. Nothing it downloads or builds is committed (vendor/ and build*/
# are in .gitignore). Not part of the meson build: CI needs neither the network nor ggml.
#
#   bench/ggml/run.sh [compare options]     # e.g. --campaigns=4 --threads=2 --rows=gla_prefill
#
# Environment: LLAMA_CPP_PYTHON_VERSION (default 0.3.36), LINSTATE_GGML_DIR (default vendor/ggml),
# LINSTATE_GGML_BUILD (default build-ggml), CXX (default g++). OMP_WAIT_POLICY defaults to passive.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
ver=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
dl=${LINSTATE_GGML_DIR:-$root/vendor/ggml}
out=${LINSTATE_GGML_BUILD:-$root/build-ggml}
cxx=${CXX:-g++}
mkdir -p "$dl" "$out"

sdist="$dl/llama_cpp_python-$ver.tar.gz"
src="$dl/llama_cpp_python-$ver"
if [[ ! -f $sdist ]]; then
  echo "== downloading llama-cpp-python $ver (source distribution) into $dl" >&2
  python3 -m pip download --no-deps --no-binary=:all: "llama-cpp-python==$ver" -d "$dl" >&2
fi
ggml="$src/vendor/llama.cpp/ggml"
if [[ ! -f $ggml/CMakeLists.txt ]]; then
  echo "== unpacking ggml from $sdist" >&2
  tar xzf "$sdist" -C "$dl" "llama_cpp_python-$ver/vendor/llama.cpp/ggml" \
    "llama_cpp_python-$ver/.git/modules/vendor/llama.cpp/HEAD"
fi
# The vendored llama.cpp commit (the submodule's HEAD, shipped in the sdist) and ggml's own version.
commit=$(cat "$src/.git/modules/vendor/llama.cpp/HEAD" 2>/dev/null || echo unknown)
gver=$(sed -n 's/^set(GGML_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\))$/\2/p' "$ggml/CMakeLists.txt" | paste -sd.)

if [[ ! -f $out/ggml/src/libggml-cpu.a ]]; then
  echo "== building ggml's CPU backend into $out/ggml (static, OpenMP, Release = -O3, native)" >&2
  # The sdist leaves out ggml.pc.in, which a top-level ggml configure reads: an empty one does (no
  # pkg-config file is installed). GIT_EXE is /bin/true so that ggml does not take this repository's
  # commit for its own (the sdist has no .git of ggml; its commit is recorded below from the sdist).
  [[ -f $ggml/ggml.pc.in ]] || : >"$ggml/ggml.pc.in"
  cmake -S "$ggml" -B "$out/ggml" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DGIT_EXE=/bin/true \
    -DGGML_OPENMP=ON -DGGML_NATIVE=ON -DGGML_BACKEND_DL=OFF -DGGML_BUILD_TESTS=OFF \
    -DGGML_BUILD_EXAMPLES=OFF -DGGML_METAL=OFF -DGGML_CUDA=OFF -DGGML_VULKAN=OFF >"$out/cmake.log"
  nice cmake --build "$out/ggml" --target ggml-cpu ggml-base ggml -j "$(nproc)" >"$out/build.log"
fi

lib="$out/ggml/src"
bin="$out/compare"
if [[ ! -x $bin || $root/bench/ggml/compare.cpp -nt $bin ]] || [[ -n $(find "$root/include" -newer "$bin" -name '*.hpp' -print -quit) ]]; then
  echo "== building bench/ggml/compare.cpp" >&2
  nice "$cxx" -std=c++20 -O3 -march=native -fopenmp -DNDEBUG -Wno-maybe-uninitialized \
    -DLINSTATE_GGML_PACKAGE="\"llama-cpp-python $ver\"" -DLINSTATE_GGML_COMMIT="\"$commit\"" \
    -DLINSTATE_GGML_VERSION="\"$gver\"" \
    -I"$root/include" $(pkg-config --cflags eigen3) -I"$ggml/include" \
    "$root/bench/ggml/compare.cpp" -o "$bin" \
    "$lib/libggml.a" "$lib/libggml-cpu.a" "$lib/libggml-base.a" -lpthread -lm
fi
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
exec "$bin" "$@"
