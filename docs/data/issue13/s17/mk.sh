#!/bin/bash
# mk.sh TREE OUT.so [extra flags]: prefill_so.cpp against TREE's include dir
tree=$1; out=$2; shift 2
g++ -std=c++20 -O3 -march=native -fopenmp -DNDEBUG -shared -fPIC -fvisibility=hidden "$@" \
  -I$tree/include $(pkg-config --cflags eigen3) /work/s17-cpu/docs/data/issue13/s15/prefill_so.cpp -o $out
