#!/bin/bash
# session 17 call 5: racecheck of the final build (s17_bin4 = 3cc03b0's CUDA code) on the backward's subsets case
# (cut at 50 s in call 2) and the SSE bf16 chunked backward.
R=$OUT/r; mkdir -p $R; D=/tmp/s17; mkdir -p $D/G
tar xzf .dev-lead/s17_bin4.tgz -C $D/G
export LINSTATE_FIXTURES=$PWD/.fixtures
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
s=$(date +%s)
timeout 280 $CS --tool racecheck $D/G/test_cuda_backward "-tc=*subsets*,*chunked backward (bf16): SSE*" > $R/racecheck_bwd.txt 2>&1; echo "rc=$? $(( $(date +%s) - s )) s" >> $R/racecheck_bwd.txt
cd $R && tail -n 4 racecheck_bwd.txt > summary.txt
cd $OUT && tar czf r.tgz r && cp r/summary.txt . && rm -rf r
