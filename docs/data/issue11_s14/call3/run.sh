#!/bin/bash
# session 14 call 3: the integrated tree (s14-lead = main + the dq/dk helpers + saved_states on the GPU, merged
# with s14-gdn at 9db009a): bits against session 13's base build, every GPU suite, sanitizers of the changed
# paths, and the T = 32768 rows of main and the integrated build (keeping / recomputing), GLA, SSE, GDN, SSE-GDN
R=$OUT/r; mkdir -p $R; B=.dev-lead/s14; mkdir -p $B
tar xzf .dev-lead/s14_bin3.tgz -C $B; tar xzf .dev-lead/m.tgz -C $B   # $B/i: integrated, $B/main: bcd9d81, $B/m/bits: 0addd08
export R B LINSTATE_FIXTURES=$PWD/.fixtures
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }
export -f ts
nvidia-smi > $R/smi.txt 2>&1
timeout 580 bash -c '
ts start
$B/m/bits > $R/bits_base.txt 2>&1; $B/i/bits > $R/bits_new.txt 2>&1
diff $R/bits_base.txt $R/bits_new.txt > $R/bits_diff.txt; echo diff_rc=$? >> $R/bits_diff.txt
ts bits
$B/i/test_cuda_backward > $R/test_cuda_backward.txt 2>&1; echo rc=$? >> $R/test_cuda_backward.txt; ts bwd
$B/i/test_cuda > $R/test_cuda.txt 2>&1; echo rc=$? >> $R/test_cuda.txt; ts fwd
$B/i/test_cuda_layers > $R/test_cuda_layers.txt 2>&1; echo rc=$? >> $R/test_cuda_layers.txt; ts layers
timeout 100 compute-sanitizer --tool memcheck $B/i/test_cuda_backward -tc="saved_states*,chunked backward (bf16)*,*delta*" > $R/memcheck_bwd.txt 2>&1
timeout 80 compute-sanitizer --tool racecheck $B/i/test_cuda_backward -tc="saved_states (bf16)*" > $R/racecheck_saved.txt 2>&1
ts sanitizers
A="--suite=prefill,train --tmin=32768 --tmax=32768 --Ns=4 --strategies=varlen --recurrent-tmax=0 --delta --deadline=40"
$B/i/bench_cuda $A > $R/bench_saved.1.txt 2>&1
$B/main/bench_cuda $A > $R/bench_main.1.txt 2>&1
$B/i/bench_cuda $A --saved-states=0 > $R/bench_rec.1.txt 2>&1
$B/i/bench_cuda $A --saved-states=0 > $R/bench_rec.2.txt 2>&1
$B/main/bench_cuda $A > $R/bench_main.2.txt 2>&1
$B/i/bench_cuda $A > $R/bench_saved.2.txt 2>&1
ts bench
'
echo "rc_all=$?" > $R/done.txt
cd $OUT && tar czf r.tgz r && rm -rf r
