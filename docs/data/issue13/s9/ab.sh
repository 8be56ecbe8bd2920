#!/bin/bash
# ab.sh A B ROUNDS ARGS...: runs A and B ROUNDS times each, alternating (A B, B A, A B, ...), each with ARGS;
# prints the medians of their process CPU per call (the 6th field of their output line) and the ratio A/B.
A=$1; B=$2; R=$3; shift 3
export OMP_WAIT_POLICY=passive
echo "# $(uptime)"
for i in $(seq $R); do
  if (( i % 2 )); then o="$A $B"; else o="$B $A"; fi
  for x in $o; do echo "$x $($x "$@")"; done
done > ${AB_LOG:-/tmp/ab_last.txt}
AB_LOG=${AB_LOG:-/tmp/ab_last.txt} python3 - "$A" "$B" <<'PY'
import sys,statistics as st
A,B=sys.argv[1],sys.argv[2]
d={A:[],B:[]}
for l in open(__import__('os').environ['AB_LOG']):
    f=l.split(); d[f[0]].append(float(f[5]))
ma,mb=st.median(d[A]),st.median(d[B])
print(f"A {A}: {ma:.2f} ms CPU {sorted(d[A])}\nB {B}: {mb:.2f} ms CPU {sorted(d[B])}\nA/B = {ma/mb:.3f}")
PY
echo "# $(uptime)"
