#!/bin/bash
# session 21 call 4: ncu details (warp states, scheduler, memory, source counters) of build 9's backward
# sequential passes and the forward's state kernel, one GDN train call at T = 32768.
R=$OUT; D=/tmp/s21; mkdir -p $D/b9; tar xzf .dev-lead/s21_b9.tgz -C $D/b9
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
A="--suite=train --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=0 --delta --strategies=varlen --tmin=32768 --tmax=32768"
S="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section InstructionStats --section SourceCounters"
timeout 200 $NCU --clock-control none $S -k regex:"delta_tc_(hstate|rscan)" -c 2 $D/b9/bench_cuda $A > $R/ncu_seq.txt 2>&1
echo "rc=$?" >> $R/ncu_seq.txt
grep -E "delta_tc_|Duration|Stall|Warp Cycles Per Issued|Issue Slot|Eligible|No Eligible|Active Warps|Executed Instructions  |Registers|Shared Memory Configuration|L2 Cache Throughput|Mem Busy|Max Bandwidth|Compute \(SM\)" $R/ncu_seq.txt | head -150; grep -A12 -i "stall" $R/ncu_seq.txt | head -80
