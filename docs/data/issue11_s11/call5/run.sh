#!/bin/bash
# device call 5 (session 11): the backward's side-by-side passes against one stream, bit for bit; serialised launches
R=$OUT/r; mkdir -p $R; B=.dev-lead
export R B
timeout 500 bash -c '
LINSTATE_FIXTURES=$PWD/.fixtures $B/new/test_cuda_backward > $R/test_cuda_backward.txt 2>&1; echo "rc=$?" >> $R/test_cuda_backward.txt
timeout 120 compute-sanitizer --tool memcheck $B/new/test_cuda_backward -tc="*side by side*" > $R/memcheck_side.txt 2>&1
CUDA_LAUNCH_BLOCKING=1 timeout 120 $B/new/test_cuda_backward -tc="chunked backward: *delta rule*" > $R/launch_blocking_bwd.txt 2>&1; echo "rc=$?" >> $R/launch_blocking_bwd.txt
'
echo "rc_all=$?" > $R/done.txt
cd $OUT && tar czf r.tgz r && rm -rf r
