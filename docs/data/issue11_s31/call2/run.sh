#!/bin/bash
# session 31 call 2 (on call 1's warm H100, 170 s of the 188 s left): racecheck of fst's test_cuda cases. The filter's
# comma split it into two doctest filters, "*gated delta rule" and " bf16 inputs on tensor cores*,*pieces*" as
# doctest reads them; the first case run ("… pipelined in pieces gives one pass's bits") had not finished when the
# timeout stopped it (217 assertions passed, no hazard reported before the stop). Carry .dev-s31, .fixtures.
R=$OUT; mkdir -p /tmp/s31/fst && tar xf .dev-s31/fst.txz -C /tmp/s31/fst && export LINSTATE_FIXTURES=$PWD/.fixtures
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer | head -1)
timeout 170 $CS --tool racecheck /tmp/s31/fst/test_cuda "-tc=*gated delta rule, bf16 inputs on tensor cores*,*pieces*" > $R/racecheck_fst.txt 2>&1; echo "rc=$?" >> $R/racecheck_fst.txt; tail -5 $R/racecheck_fst.txt
