#!/bin/bash
# Decode step time against OpenMP's wait policy, before/after binaries ABBA, while a `yes` this script
# starts (and stops, by its PID) keeps one core busy. Usage: wait_policy.sh BEFORE AFTER [args of decode_team]
before=$1 after=$2; shift 2
args=${*:---B=1,16 --threads=2 --rounds=3 --min-time=0.2}
yes > /dev/null &
busy=$!
trap 'kill $busy' EXIT
for policy in unset active passive; do
  for bin in $before $after $after $before; do
    echo "== $(date -u +%T) binary $(basename $bin) policy $policy, load $(cut -d' ' -f1-3 /proc/loadavg)"
    if [ $policy = unset ]; then env -u OMP_WAIT_POLICY $bin $args
    else OMP_WAIT_POLICY=$policy $bin $args; fi
  done
done
