#!/bin/bash
# session 14 call 5: the review's mend (forward: the saved_states object empty until its kernels are enqueued;
# bind_bwd_tc_buffers without unused K, V): the whole test_cuda_backward and test_cuda, memcheck of saved_states
R=$OUT/r; mkdir -p $R; B=.dev-lead/s14; mkdir -p $B; tar xzf .dev-lead/s14_bin5.tgz -C $B
export LINSTATE_FIXTURES=$PWD/.fixtures
$B/f/test_cuda_backward > $R/test_cuda_backward.txt 2>&1; echo rc=$? >> $R/test_cuda_backward.txt
$B/f/test_cuda > $R/test_cuda.txt 2>&1; echo rc=$? >> $R/test_cuda.txt
timeout 60 compute-sanitizer --tool memcheck $B/f/test_cuda_backward -tc="saved_states*" > $R/memcheck_saved.txt 2>&1
cd $OUT && tar czf r.tgz r && rm -rf r
