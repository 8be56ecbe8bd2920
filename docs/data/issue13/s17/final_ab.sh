#!/usr/bin/env bash
# Session 17's final in-process A/B runs: base*.so = b0c2adb's include tree, *_s17.so = a8b17be's (builds: README.md).
# Each case alternates the builds' order between runs (abba.sh); run from the folder holding the .so files.
./abba.sh 6 --T=1024 --threads=2 --rounds=16 --reps=2 -- ./base.so ./gla_s17.so
./abba.sh 6 --T=4096 --threads=2 --rounds=16 --reps=2 -- ./base.so ./gla_s17.so
./abba.sh 4 --T=16384 --threads=2 --rounds=6 --reps=1 -- ./base.so ./gla_s17.so
./abba.sh 4 --T=4096 --threads=2 --rounds=12 --reps=2 -- ./base.so ./gla_s17.so ./sse_base.so ./sse_s17.so
./abba.sh 4 --T=4096 --threads=2 --rounds=12 --reps=2 -- ./gdn_base.so ./gdn_s17.so
