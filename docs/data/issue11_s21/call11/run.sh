#!/bin/bash
# session 21 call 11: test_cuda_backward of 1eeb677 plus a training-length case in the tensor-core GDN test
# (T = 4096, H = 2): the ratios printed, then the whole binary.
R=$OUT; D=/tmp/s21; mkdir -p $D/b14; tar xzf .dev-lead/s21_b14.tgz -C $D/b14
export LINSTATE_FIXTURES=$PWD/.fixtures
timeout 200 $D/b14/test_cuda_backward "-tc=*inputs on tensor cores*" > $R/tc_case.txt 2>&1; echo "rc=$?" >> $R/tc_case.txt
grep -E "MESSAGE|test cases|rc=" $R/tc_case.txt | sed 's/.*MESSAGE: //'
timeout 200 $D/b14/test_cuda_backward -tce="timing*" > $R/tcb.txt 2>&1; echo "rc=$?" >> $R/tcb.txt
tail -4 $R/tcb.txt
