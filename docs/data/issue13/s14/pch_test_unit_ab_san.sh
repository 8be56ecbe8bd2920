#!/bin/bash
# A/B of test_unit's ASan + UBSan build (.ci/run's options) (7 files): main (no precompiled header) and this branch (with), both at once, -j1 each, nice 10
cd /tmp/s14/abu
echo "# start $(date +%T) load: $(cat /proc/loadavg)"
(cd base && TW_LOG=/tmp/s14/abu/tw_san_base.log nice ninja -C build-san -j1 tests/unit/test_unit >/dev/null) &
(cd new && TW_LOG=/tmp/s14/abu/tw_san_new.log nice ninja -C build-san -j1 tests/unit/test_unit >/dev/null) &
wait
echo "# end $(date +%T) load: $(cat /proc/loadavg)"
for v in base new; do echo "## $v"; cat tw_san_$v.log; awk '{s+=$1} END{printf "sum CPU %.1f s\n", s}' tw_$v.log; done
