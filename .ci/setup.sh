#!/usr/bin/env bash
# Installs what linstate's build needs (idempotent; Debian 12). Sourced by .ci/run and .ci/demo.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
LINSTATE_PKGS=(meson ninja-build pkg-config cmake make g++ python3 libeigen3-dev doctest-dev libbenchmark-dev nlohmann-json3-dev)
missing=()
for p in "${LINSTATE_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  echo "[setup] installing: ${missing[*]}"
  $SUDO apt-get update -qq </dev/null
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null >/dev/null
fi
# nvcc (CUDA 13, wheel-style install) lives outside the default PATH: the CUDA backend is built when it is found.
if [ -x /usr/local/cuda/bin/nvcc ]; then
  case ":$PATH:" in *:/usr/local/cuda/bin:*) ;; *) export PATH="$PATH:/usr/local/cuda/bin" ;; esac
fi
