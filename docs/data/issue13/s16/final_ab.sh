#!/usr/bin/env bash
# Session 16's final in-process A/B runs (prefill_ab; base*.so: d039d82's include tree, *_f2.so: 91f49eb's).
# Run from the folder holding the .so files and prefill_ab (builds: README.md).
run() { echo "# $(date -u +%T) $(uptime)"; echo "\$ OMP_WAIT_POLICY=passive ./prefill_ab $*"; OMP_WAIT_POLICY=passive ./prefill_ab "$@" 2>&1 | tail -n +1; echo "# $(uptime)"; echo; }
run --T=1024 --threads=2 --rounds=16 --reps=2 ./base.so ./gla_f2.so
run --T=4096 --threads=2 --rounds=16 --reps=2 --all-pairs ./base.so ./gla_f2.so ./sse_base.so ./sse_f2.so
run --T=16384 --threads=2 --rounds=8 --reps=1 ./base.so ./gla_f2.so
run --T=4096 --threads=2 --rounds=12 --reps=2 ./gdn_base.so ./gdn_f2.so
