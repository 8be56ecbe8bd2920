#!/bin/bash
# For the next session (H200 only: on any other card it writes the card's name to $OUT/card.txt and stops, ~80 s of
# budget): the issue's same-call table with main (call2/run.sh: our rows at T = 4096…65536 before and after fla main
# and the SSE authors, ncu of GLA + SSE n4k1s's first 80 launches and of the delta kernels, decode), then ncu of SSE
# n4k1s's backward kernels, which call 2's capture did not reach (ncu_sse_bwd.csv; ncu_limits.py reads it:
# python3 docs/data/issue11_s33/ncu_limits.py --unique DIR ncu_sse_bwd.csv). Carry .dev-s33 (main.txz: main's
# bench_cuda), .fla. Output: $OUT/card.txt, $OUT/logs2.tgz, $OUT/summary2.txt, $OUT/ncu_sse_bwd.csv.
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/card.txt 2>&1
grep -q H200 $OUT/card.txt || exit 0
CAP=470 bash docs/data/issue11_s33/call2/run.sh
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
MET=$(grep -o '^MET=[^ ]*' docs/data/issue11_s33/call2/run.sh | cut -d= -f2)
A="--suite=train --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --strategies=varlen --tmin=32768 --tmax=32768 --Ns=4"
[ $SECONDS -lt 520 ] && timeout 70 $NCU --clock-control none --metrics $MET -k 'regex:chunk_bwd|chunk_chain|combine|slot_sum|router_bwd|chunk_dg' \
  -c 40 --csv --page raw /tmp/s33/main/bench_cuda $A > $OUT/ncu_sse_bwd.csv 2>&1
true
