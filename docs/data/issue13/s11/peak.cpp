// docs/data/issue13/s11/peak.cpp — one thread's FMA peak (bench/profile_util.hpp)
//   g++ -std=c++20 -O3 -march=native -Iinclude $(pkg-config --cflags eigen3) docs/data/issue13/s11/peak.cpp && ./a.out
#include "../../../../bench/profile_util.hpp"
#include <cstdio>
int main() { for (int i = 0; i < 3; ++i) std::printf("one thread FMA peak %.1f GFLOP/s\n", linstate_profile::fma_peak_one_thread() / 1e9); }
