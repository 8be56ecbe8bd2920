#!/bin/bash
# session 12 call 6: s12c (= cf0ffbd): tests, sanitizers, bits
R=$OUT/r; mkdir -p $R; B=.dev-lead/s12c
$B/bits > $R/bits_s12c.txt 2>&1
$B/test_cuda > $R/test_cuda.txt 2>&1; echo rc=$? >> $R/test_cuda.txt
LINSTATE_FIXTURES=$PWD/.fixtures $B/test_cuda_backward > $R/test_cuda_backward.txt 2>&1; echo rc=$? >> $R/test_cuda_backward.txt
timeout 150 compute-sanitizer --tool memcheck $B/test_cuda -tc='chunked*' > $R/memcheck_chunked.txt 2>&1
timeout 150 compute-sanitizer --tool racecheck $B/test_cuda -tc='chunked: bf16*,chunked: GLA*' > $R/racecheck_chunked.txt 2>&1
timeout 120 compute-sanitizer --tool memcheck $B/test_cuda_backward -tc='chunked backward (bf16)*' > $R/memcheck_bwd.txt 2>&1
timeout 120 compute-sanitizer --tool racecheck $B/test_cuda_backward -tc='chunked backward (bf16)*' > $R/racecheck_bwd.txt 2>&1
timeout 120 compute-sanitizer --tool synccheck $B/test_cuda -tc='chunked: bf16*' > $R/synccheck.txt 2>&1
CUDA_LAUNCH_BLOCKING=1 timeout 120 $B/test_cuda -tc='chunked: bf16*' > $R/launch_blocking.txt 2>&1
echo done > $R/done.txt
cd $OUT && tar czf r.tgz r && rm -rf r
