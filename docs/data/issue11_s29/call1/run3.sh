#!/bin/bash
# session 29 call 1, part 3 (after run.sh and run2.sh): branch s29-ds-products (on s29-rscan-norec) — ⟨D, S⟩
# formed by kernel 5a's first role for kernel 5b (the same bits) — against s29_norec. Its archive waits in
# build-hold/ (ignored, not carried), as the call may carry no more than 64 MiB. Before the call:
#   mkdir -p build-hold/off && mv .dev-lead/*.txz build-hold/off/ && mv build-hold/off/s29_norec.txz .dev-lead/ \
#     && cp build-hold/s29_ds.txz .dev-lead/
# then carry .dev-lead and .fixtures (about 2 minutes); afterwards move the archives back. Output: logs3.tgz, summary3.txt.
source docs/data/issue11_s29/call1/common.sh
B="s29_norec s29_ds"
unpack $B
tc $B
tcb s29_ds
rows train $B
durations $B
memcheck s29_ds
summary() { same_digits s29_norec s29_ds; cd $R; tail -n 3 tc_*.txt tcb_*.txt memcheck_*.txt; grep -h "^train *gdn\|^train *sse_gdn" t_*.txt; }
pack 3
