#!/usr/bin/env bash
# tests/consumers/run.sh — builds and runs one downstream project against linstate, the way a user
# would consume it:
#   meson      a Meson project with linstate as a subproject (subprojects/linstate -> the source tree)
#   pkgconfig  a Makefile over `pkg-config linstate`, against a staged install of BUILD_DIR
#   cmake      a CMake project over find_package(linstate), against a staged install of BUILD_DIR;
#              with LINSTATE_CONSUMER_CUDA=1 also its GPU program (linstate::cuda; exit 77 = no GPU)
#
#   tests/consumers/run.sh KIND SOURCE_ROOT BUILD_DIR WORK_DIR
#
# The staged install is `meson install --destdir WORK_DIR/stage` of BUILD_DIR (headers, linstate.pc,
# linstate-cuda.pc, the CMake package, linstate-run): nothing outside WORK_DIR is touched. The program
# is tests/consumers/consumer.cpp, copied next to the project's build file; it checks that OpenMP
# reached it and the CPU backend uses both threads, and its results against the fp64 reference.
# Exit status: the program's (0 ok, 1 failed check), 77 when a tool the kind needs is missing.
set -euo pipefail
kind=$1; src=$(cd "$2" && pwd); build=$(cd "$3" && pwd); work=$4
here="$src/tests/consumers"
need() { command -v "$1" >/dev/null || { echo "consumer $kind: $1 not found: skipped"; exit 77; }; }
rm -rf "$work"; mkdir -p "$work/src"
cp -r "$here/$kind/." "$here/consumer.cpp" "$work/src/"

stage() {
  meson install -C "$build" --no-rebuild --quiet --destdir "$work/stage" >/dev/null
  prefix="$work/stage$(meson introspect "$build" --buildoptions |
    python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))')"
}

case "$kind" in
  meson)
    need meson; need ninja
    mkdir -p "$work/src/subprojects"; ln -s "$src" "$work/src/subprojects/linstate"
    meson setup "$work/build" "$work/src" >"$work/setup.log" || { cat "$work/setup.log"; exit 1; }
    ninja -C "$work/build" >"$work/build.log" || { cat "$work/build.log"; exit 1; }
    # linstate as a subproject builds only what the consumer uses: none of its tests, benchmarks, examples.
    own=$(ninja -C "$work/build" -t targets all | grep -E '^subprojects/linstate/(tests|bench|examples|cuda)/' || true)
    if [ -n "$own" ]; then echo "FAIL: the linstate subproject builds its own programs:"; echo "$own"; exit 1; fi
    "$work/build/consumer" "meson subproject"
    ;;
  pkgconfig)
    need pkg-config; need make
    stage
    export PKG_CONFIG_PATH="$(dirname "$(find "$prefix" -name linstate.pc | head -1)")"
    echo "pkg-config --cflags --libs linstate: $(pkg-config --cflags --libs linstate)"
    make -C "$work/src" CXX="${CXX:-c++}" >"$work/build.log" || { cat "$work/build.log"; exit 1; }
    "$work/src/consumer" "pkg-config"
    ;;
  cmake)
    need cmake
    stage
    cuda=OFF; [ "${LINSTATE_CONSUMER_CUDA:-0}" = 1 ] && cuda=ON
    cmake -S "$work/src" -B "$work/build" -DCMAKE_PREFIX_PATH="$prefix" -DCONSUMER_CUDA=$cuda \
      >"$work/setup.log" || { cat "$work/setup.log"; exit 1; }
    cmake --build "$work/build" >"$work/build.log" || { cat "$work/build.log"; exit 1; }
    "$work/build/consumer" "cmake find_package"
    if [ "$cuda" = ON ]; then "$work/build/consumer_cuda"; fi
    ;;
  *) echo "run.sh: unknown kind '$kind' (meson, pkgconfig or cmake)" >&2; exit 2 ;;
esac
