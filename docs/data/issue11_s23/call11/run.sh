#!/bin/bash
# session 23 call 11: the review mend (the bf16 copies' scratch sized and bound by one trait,
# delta_bf16_copies<Dev>; cu_src in cuda/meson.build): test_cuda, test_cuda_backward, memcheck of the
# delta-rule cases.
R=$OUT/r; mkdir -p $R; D=/tmp/s23; mkdir -p $D/bM; tar xzf .dev-lead/s23_bM.tgz -C $D/bM
export LINSTATE_FIXTURES=$PWD/.fixtures
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
timeout 90 $D/bM/test_cuda > $R/test_cuda.txt 2>&1; echo "rc=$?" >> $R/test_cuda.txt
timeout 120 $D/bM/test_cuda_backward -tce="timing*" > $R/tcb.txt 2>&1; echo "rc=$?" >> $R/tcb.txt
timeout 150 $CS --tool memcheck $D/bM/test_cuda_backward "-tc=*gated delta rule*,*delta*" > $R/memcheck.txt 2>&1; echo "rc=$?" >> $R/memcheck.txt
cd $R && (grep -h "MESSAGE" tcb.txt | grep -i gdn | sed "s/.*MESSAGE: //"; tail -n 4 test_cuda.txt tcb.txt memcheck.txt) > summary.txt 2>&1
tar czf $OUT/logs.tgz *; cp summary.txt $OUT/; rm -rf $R
