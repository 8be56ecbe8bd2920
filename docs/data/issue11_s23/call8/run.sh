#!/bin/bash
# session 23 call 8: where delta_grad_kernel's time goes — a probe build (bbe92c5 + call8/probe.diff: bit s of
# LINSTATE_GRAD_PROBE skips a phase of the kernel; results wrong, timing only, never landed): ncu duration of
# the kernel in one GDN train call at T = 32768 with each phase skipped alone and all of them.
#   2: dK̂ = Vn Dᵀ and ⟨D, S⟩, c_i   4: the dO phase (dA, dQg, P, dQ = P K̂, dK += Pᵀ Q)   8: dB_U = Tᵀ dVn and −dB_W
#   16: the per-record loop of dB_U (dK, db, dv)   32: the dL products (dB_U Uᵀ, −dB_W Wᵀ)   64: K̂K̂ᵀ, dM and its
#   two products   128: the last per-record loop (dq, dk, dβ, dg)
R=$OUT/r; mkdir -p $R; D=/tmp/s23; mkdir -p $D/pr; tar xzf .dev-lead/s23_probe.tgz -C $D/pr
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
A="--suite=train --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=0 --delta --strategies=varlen --tmin=32768 --tmax=32768"
for m in 0 2 4 8 16 32 64 128 254 0; do
  LINSTATE_GRAD_PROBE=$m timeout 60 $NCU --clock-control none --metrics gpu__time_duration.sum,smsp__inst_executed.sum -k regex:delta_grad -c 1 --csv --page raw $D/pr/bench_cuda $A > $R/ncu_m$m.csv 2>&1
  echo "mask $m: $(grep -h delta_grad $R/ncu_m$m.csv | tail -1 | awk -F'","' '{print $(NF-1), $NF}')" >> $R/summary.txt
done
cd $R && tar czf $OUT/logs.tgz *; cp summary.txt $OUT/; rm -rf $R
