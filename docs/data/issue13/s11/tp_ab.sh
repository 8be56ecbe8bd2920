#!/bin/bash
# tp_ab.sh ROUNDS BIN_A BIN_B [BIN_C...] -- ARGS : train_profile binaries in rotation (order reversed every other round)
R=$1; shift; bins=(); while [ "$1" != "--" ]; do bins+=("$1"); shift; done; shift
export OMP_WAIT_POLICY=passive
echo "# $(uptime)"
for r in $(seq $R); do
  if (( r % 2 )); then order=("${bins[@]}"); else order=(); for ((i=${#bins[@]}-1;i>=0;i--)); do order+=("${bins[$i]}"); done; fi
  for b in "${order[@]}"; do echo "## $b round $r"; $b "$@"; done
done
echo "# $(uptime)"
