# common.sh — sourced by run.sh, run2.sh and run3.sh (session 29, call 1): where the output goes, the tools,
# and the steps the parts share. Each step writes its log under $R and a line "<step> <seconds>" to times.txt.
R=$OUT/r; mkdir -p $R; D=/tmp/s29
export LINSTATE_FIXTURES=$PWD/.fixtures
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
ts() { echo "$1 $(date +%s)" >> $R/times.txt; }
# one GDN train call at T = 32768 (ncu's runs)
A="--suite=train --recurrent-tmax=0 --reps=1 --min-reps=1 --warmup=0 --deadline=0 --no-flush --Ns=0 --delta --strategies=varlen --tmin=32768 --tmax=32768"
# BUILD ... : the builds' binaries from .dev-lead/BUILD.txz into $D/BUILD
unpack() { for b in "$@"; do mkdir -p $D/$b; tar xf .dev-lead/$b.txz -C $D/$b; done; }
# BUILD ... : the tensor-core test (its printed ratios) → tc_BUILD.txt
tc() { for b in "$@"; do timeout 90 $D/$b/test_cuda_backward -tc="*inputs on tensor cores*" > $R/tc_$b.txt 2>&1; echo "rc=$?" >> $R/tc_$b.txt; ts tc_$b; done; }
# BUILD ... : every test_cuda_backward case but timing → tcb_BUILD.txt
tcb() { for b in "$@"; do timeout 150 $D/$b/test_cuda_backward -tce="timing*" > $R/tcb_$b.txt 2>&1; echo "rc=$?" >> $R/tcb_$b.txt; ts tcb_$b; done; }
# SUITES BUILD ... : the delta-rule rows (T = 8K…64K) of SUITES, the builds alternated four times → t_BUILD<i>.csv
rows() {
  local P="--suite=$1 --tmin=8192 --tmax=65536 --Ns=0 --delta --strategies=varlen --recurrent-tmax=0 --deadline=40"; shift
  for i in 1 2 3 4; do for b in "$@"; do timeout 80 $D/$b/bench_cuda $P --out=$R/t_${b}$i.csv > $R/t_${b}$i.txt 2>&1; ts "t_$b$i rc=$?"; done; done
}
# BUILD ... : ncu durations, instructions and registers of every delta kernel of the call $A → ncu_BUILD.csv
durations() {
  for b in "$@"; do
    timeout 60 $NCU --clock-control none --metrics gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread -k regex:delta_ -c 16 --csv --page raw $D/$b/bench_cuda $A > $R/ncu_$b.csv 2>&1; ts ncu$b
  done
}
# BUILD ... : memcheck of the delta rule's backward cases → memcheck_BUILD.txt
memcheck() {
  for b in "$@"; do
    timeout 60 $CS --tool memcheck $D/$b/test_cuda_backward "-tc=*gated delta rule*,*two blocks per SM*,*subsets*,*read by none*,*8 and 16 warps*,*side by side*" > $R/memcheck_$b.txt 2>&1; echo "rc=$?" >> $R/memcheck_$b.txt; ts memcheck_$b
  done
}
# BUILD ... : racecheck of the tensor-core backward → racecheck_BUILD.txt
racecheck() {
  for b in "$@"; do
    timeout 150 $CS --tool racecheck $D/$b/test_cuda_backward "-tc=*read by none*,*inputs on tensor cores*" > $R/racecheck_$b.txt 2>&1; echo "rc=$?" >> $R/racecheck_$b.txt; ts racecheck_$b
  done
}
# BASE BUILD ... : whether each build's tensor-core ratios are BASE's digit for digit
same_digits() {
  local base=$1; shift
  for b in "$@"; do
    cmp <(grep -h MESSAGE $R/tc_$base.txt | sed "s/.*MESSAGE: //") <(grep -h MESSAGE $R/tc_$b.txt | sed "s/.*MESSAGE: //") >/dev/null \
      && echo "$b ratios: $base's digits" || echo "$b ratios differ from $base's"
  done
}
# N: summaryN.txt (what the part's summary function prints, then times.txt) and every log as logsN.tgz into $OUT
pack() { (summary; cat $R/times.txt) > $R/summary$1.txt 2>&1; cd $R && tar czf $OUT/logs$1.tgz * && cp summary$1.txt $OUT/; cd - >/dev/null; rm -rf $R; }
