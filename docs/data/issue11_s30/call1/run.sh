#!/bin/bash
# session 30 call 1: the decision call — main against the top of session 28–29's backward stack (s29_norec), s29_ds
# (on norec), s29_fwd (the forward's state pass) and s30_tcprep (tile_mma's 16-bit products and the tensor-core
# prep's by ldmatrix + mma.sync instead of WMMA). Carry .dev-lead (these five archives only: the 64 MiB a call
# carries) and .fixtures. The shared steps: ../../issue11_s29/call1/common.sh. Output: logs1.tgz, summary1.txt.
#   s28_ring  = main's CUDA code (06ec3fc; main at 041ec50 has the same kernels)
#   s29_norec = branch s29-rscan-norec 7d40234 (s28-scan-addr, s28-rscan-2bar, s29-dA-gated, s29-scan-instr under it)
#   s29_ds    = branch s29-ds-products 9a9aea7 (on norec)
#   s29_fwd   = branch s29-fwd-state 45101d1 (on main; bench_cuda, test_cuda_backward, test_cuda)
#   s30_tcprep = branch s30-tcprep 9c1b8f4 (on main; bench_cuda, test_cuda, test_cuda_backward)
source docs/data/issue11_s29/call1/common.sh
unpack s28_ring s29_norec s29_ds s29_fwd s30_tcprep
tc s28_ring s29_norec s29_ds s30_tcprep
tcb s29_norec s29_ds s30_tcprep
# the forward's GPU tests: every test_cuda case of s30_tcprep (tile_mma is the GLA family's too), the delta cases of s29_fwd
timeout 200 $D/s30_tcprep/test_cuda > $R/tcf_s30_tcprep.txt 2>&1; echo "rc=$?" >> $R/tcf_s30_tcprep.txt; ts tcf_tcprep
timeout 120 $D/s29_fwd/test_cuda -tc="*delta*" > $R/tcf_s29_fwd.txt 2>&1; echo "rc=$?" >> $R/tcf_s29_fwd.txt; ts tcf_fwd
ALT="1 2 3" rows prefill,train s28_ring s29_norec s29_ds s29_fwd s30_tcprep
# SSE over GLA (n4k1s) for tile_mma's users: prefill and train, ring against tcprep, alternated twice
for i in 1 2; do for b in s28_ring s30_tcprep; do
  timeout 60 $D/$b/bench_cuda --suite=prefill,train --tmin=8192 --tmax=65536 --Ns=4 --strategies=varlen --recurrent-tmax=0 --deadline=30 --out=$R/sse_${b}$i.csv > $R/sse_${b}$i.txt 2>&1; ts "sse_$b$i rc=$?"
done; done
durations s28_ring s29_norec s29_ds s30_tcprep
memcheck s29_ds
racecheck s29_ds
timeout 150 $CS --tool memcheck $D/s30_tcprep/test_cuda "-tc=*chunked: bf16 and fp16 inputs on tensor cores*,*gated delta rule, bf16 inputs on tensor cores*,*pieces*" > $R/memcheck_tcf_s30_tcprep.txt 2>&1; echo "rc=$?" >> $R/memcheck_tcf_s30_tcprep.txt; ts memcheck_tcf
summary() {
  same_digits s28_ring s29_norec s29_ds s30_tcprep; cd $R; tail -n 3 tc_*.txt tcb_*.txt tcf_*.txt memcheck_*.txt racecheck_*.txt
  grep -h "^train *gdn\|^train *sse_gdn\|^prefill *gdn\|^train *gla\|^prefill *gla" t_*.txt | head -80
}
pack 1
