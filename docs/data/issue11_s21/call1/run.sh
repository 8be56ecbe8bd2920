#!/bin/bash
# session 21 call 1: accuracy of the delta rule's bf16 backward with every split-bf16 product reduced to its
# hi·hi term (plain bf16 operands, fp32 accumulators): test_cuda_backward built with -DLINSTATE_X1_PROBE.
R=$OUT; export LINSTATE_FIXTURES=$PWD/.fixtures
gunzip -c .dev-lead/probe/tcb_x1.gz > /tmp/tcb_x1; chmod +x /tmp/tcb_x1
timeout 120 /tmp/tcb_x1 "-tc=*inputs on tensor cores*" > $R/x1.txt 2>&1; echo "rc=$?" >> $R/x1.txt
grep -E "ratios|passed|failed" $R/x1.txt | head -40
