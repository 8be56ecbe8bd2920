#!/bin/bash
# Not run (session 16 had no device call left): the next step of issue 11 item 1 — where chunk_bwd_dqkg_kernel's
# instructions go, per source line, on this branch's build (c381d3a's binaries: .dev-bwd/new.tgz, built with
# -lineinfo), and every kernel's time in one GLA and one GDN train call at T = 32768 (the slot-sum launches gone).
# Run from the session's checkout with carry [".dev-bwd"]; about 120 s.
R=$OUT/r; mkdir -p $R
D=.dev-bwd; mkdir -p $D/new; tar xzf $D/new.tgz -C $D/new; N=$D/new
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
T1="--suite=train --tmin=32768 --tmax=32768 --Ns=0 --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush"
timeout 60 $NCU --clock-control none --metrics gpu__time_duration.sum -c 200 --csv --page raw $N/bench_cuda $T1 --delta \
  > $R/ncu_time32k.csv 2> $R/ncu_time32k.err
timeout 150 $NCU --clock-control none --set full --import-source yes -k regex:chunk_bwd_dqkg_kernel -c 1 -o $R/dqkg \
  $N/bench_cuda $T1 > $R/ncu_dqkg.txt 2>&1
timeout 60 $NCU --import $R/dqkg.ncu-rep --page source --csv --print-source sass > $R/dqkg_source.csv 2> $R/dqkg_source.err
gzip -9 $R/*.csv; cd $OUT && tar czf r.tgz r && rm -rf r
