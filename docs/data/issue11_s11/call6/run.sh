#!/bin/bash
# device call 6 (session 11): the pipeline's prep pieces on one stream (1) or alternating with a second (2)
R=$OUT/r; mkdir -p $R; B=.dev-lead
export R B
timeout 400 bash -c '
for run in 1 2; do
for S in 1 2; do
for P in 0 2 3 4 6; do
  $B/new/bench_cuda --suite=prefill --tmin=8192 --tmax=65536 --Ns=0 --strategies=varlen --recurrent-tmax=0 --delta --deadline=30 --pieces=$P --prep-streams=$S --out=$R/s${S}_p${P}_$run.csv > $R/s${S}_p${P}_$run.txt 2>&1
done; done; done
'
echo "rc_all=$?" > $R/done.txt
cd $OUT && tar czf r.tgz r && rm -rf r
