#!/bin/bash
# compiler wrapper: logs user+sys CPU seconds of each compile/link to $TW_LOG (default /tmp/s14/tw.log)
log=${TW_LOG:-/tmp/s14/tw.log}
out=""; prev=""
for a in "$@"; do [ "$prev" = "-o" ] && out=$a; prev=$a; done
tf=$(mktemp)
/usr/bin/time -f "%U %S %e" -o "$tf" "$@"; rc=$?
read u s e < "$tf"; rm -f "$tf"
echo "$(awk -v u=$u -v s=$s 'BEGIN{printf "%.2f", u+s}') $e $PWD/$out" >> "$log"
exit $rc
