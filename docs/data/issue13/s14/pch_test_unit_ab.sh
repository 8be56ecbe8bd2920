#!/bin/bash
# (tw = docs/data/issue13/s14/tw.sh at /tmp/s14/tw; base = bcd9d81, new = 7274777, both configured with .ci/run's release options and CXX="/tmp/s14/tw c++")
# A/B of test_unit's build (7 files): main (no precompiled header) and this branch (with), both at once, -j1 each, nice 10
cd /tmp/s14/abu
echo "# start $(date +%T) load: $(cat /proc/loadavg)"
(cd base && TW_LOG=/tmp/s14/abu/tw_base.log nice ninja -C build -j1 tests/unit/test_unit >/dev/null) &
(cd new && TW_LOG=/tmp/s14/abu/tw_new.log nice ninja -C build -j1 tests/unit/test_unit >/dev/null) &
wait
echo "# end $(date +%T) load: $(cat /proc/loadavg)"
for v in base new; do echo "## $v"; cat tw_$v.log; awk '{s+=$1} END{printf "sum CPU %.1f s\n", s}' tw_$v.log; done
