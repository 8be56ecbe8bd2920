#!/bin/bash
# session 21 call 6: which of the delta rule backward's split-bf16 products can be plain bf16 — a probe
# test_cuda_backward (probe.diff: call site s of the WY prep / gradient kernel plain bf16 when bit s of
# X1MASK is set), the tensor-core case with each site alone, then groups.
R=$OUT; export LINSTATE_FIXTURES=$PWD/.fixtures
gunzip -c .dev-lead/probe/tcb_m.gz > /tmp/tcb_m; chmod +x /tmp/tcb_m
for m in ${MASKS:-0}; do
  echo "== $m"; X1MASK=$m timeout 60 /tmp/tcb_m "-tc=*inputs on tensor cores*" 2>&1 | grep -E "MESSAGE|test cases" | sed 's/.*MESSAGE: //'
done > $R/masks.txt
tail -5 $R/masks.txt
