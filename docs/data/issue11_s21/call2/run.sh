#!/bin/bash
# session 21 call 2: which of the delta rule's bf16 backward products can drop their lo halves: GRAD = the WY
# prep's and the gradient kernel's products plain bf16 (sequential passes split), SEQ = the two sequential passes
# plain (the rest split).
R=$OUT; export LINSTATE_FIXTURES=$PWD/.fixtures
for v in GRAD SEQ; do
gunzip -c .dev-lead/probe/tcb_$v.gz > /tmp/tcb_$v; chmod +x /tmp/tcb_$v
timeout 120 /tmp/tcb_$v "-tc=*inputs on tensor cores*" > $R/x_$v.txt 2>&1; echo "rc=$?" >> $R/x_$v.txt
echo "== $v"; grep -E "MESSAGE" $R/x_$v.txt | sed 's/.*MESSAGE: //'
done
