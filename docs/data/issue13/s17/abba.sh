#!/usr/bin/env bash
# abba.sh N ARGS -- A.so B.so ...: N prefill_ab runs (--all-pairs), the builds' order reversed every other run
n=$1; shift; args=(); while [ "$1" != "--" ]; do args+=("$1"); shift; done; shift; libs=("$@")
for ((i = 0; i < n; i++)); do
  if ((i % 2)); then ord=(); for ((j = ${#libs[@]} - 1; j >= 0; j--)); do ord+=("${libs[j]}"); done; else ord=("${libs[@]}"); fi
  ./ab.sh "${args[@]}" --all-pairs "${ord[@]}"
done
