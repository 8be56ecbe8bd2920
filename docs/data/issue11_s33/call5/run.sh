#!/bin/bash
# session 33 call 5: the issue's same-call table on an H200 (call2/run.sh with main as the session ends: build `main`
# = .dev-s33/main.txz rebuilt from main after the merges, bench_cuda only). On any other card it only prints the
# card's name and stops (the issue's table must come from an H200). Carry .dev-s33, .fla.
# Output: $OUT/card.txt, and on an H200 $OUT/logs2.tgz, $OUT/summary2.txt.
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/card.txt 2>&1
grep -q H200 $OUT/card.txt || exit 0
CAP=${CAP:-580} bash docs/data/issue11_s33/call2/run.sh
