#!/bin/bash
# session 14 call 1: main at bcd9d81 (the merged tree of session 13, never run as one) and the branch s14-lead
# (the dq/dk kernels' shared __device__ helpers; linstate::saved_states on the GPU): bits of the GPU paths
# against session 13's base build, every GPU suite of both builds, sanitizers of the changed paths
# (test_cuda_layers and the benchmarks: call 2)
R=$OUT/r; mkdir -p $R; B=.dev-lead/s14; mkdir -p $B
tar xzf .dev-lead/s14_bin.tgz -C $B; tar xzf .dev-lead/m.tgz -C $B   # $B/main: main bcd9d81, $B/n: s14-lead; bits base: $B/m/bits (0addd08, m.tgz of session 13)
export R B LINSTATE_FIXTURES=$PWD/.fixtures
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }
export -f ts
nvidia-smi > $R/smi.txt 2>&1
timeout 580 bash -c '
ts start
$B/m/bits > $R/bits_base.txt 2>&1; $B/n/bits > $R/bits_new.txt 2>&1
diff $R/bits_base.txt $R/bits_new.txt > $R/bits_diff.txt; echo diff_rc=$? >> $R/bits_diff.txt
ts bits
for b in n main; do
  $B/$b/test_cuda_backward > $R/${b}_test_cuda_backward.txt 2>&1; echo rc=$? >> $R/${b}_test_cuda_backward.txt; ts ${b}_bwd
  $B/$b/test_cuda > $R/${b}_test_cuda.txt 2>&1; echo rc=$? >> $R/${b}_test_cuda.txt; ts ${b}_fwd
  [ -x $B/$b/test_cuda_layers ] && { $B/$b/test_cuda_layers > $R/${b}_test_cuda_layers.txt 2>&1; echo rc=$? >> $R/${b}_test_cuda_layers.txt; ts ${b}_layers; }
  if [ $b = n ]; then
    timeout 90 compute-sanitizer --tool memcheck $B/n/test_cuda_backward -tc="saved_states*,chunked backward (bf16)*" > $R/memcheck_bwd.txt 2>&1
    timeout 90 compute-sanitizer --tool racecheck $B/n/test_cuda_backward -tc="saved_states (bf16)*" > $R/racecheck_saved.txt 2>&1
    ts sanitizers
  fi
done
'
echo "rc_all=$?" > $R/done.txt
cd $OUT && tar czf r.tgz r && rm -rf r
