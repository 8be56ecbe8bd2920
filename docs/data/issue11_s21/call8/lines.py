#!/usr/bin/env python3
"""Per CUDA source line: share of instructions executed and of warp stall samples, from an ncu
`--page source --print-source cuda,sass --csv` export (call8/run.sh). Usage: lines.py FILE.csv[.gz] [N]"""
import csv, collections, gzip, sys

fn = sys.argv[1]
top = int(sys.argv[2]) if len(sys.argv) > 2 else 25
rows = list(csv.reader((gzip.open if fn.endswith('.gz') else open)(fn, 'rt')))
cur, hdr, agg = None, None, collections.defaultdict(lambda: [0, 0, ''])
tot_i = tot_s = 0
for r in rows:
    if not r:
        continue
    if r[0] == 'File Path':
        cur = r[1].split('/')[-1]
        continue
    if r[0] == 'Line No':
        hdr = r
        continue
    if hdr is None or not r[0].isdigit() or len(r) < 8:
        continue
    try:
        ie = int(r[hdr.index('Instructions Executed')] or 0)
        ss = int(r[hdr.index('Warp Stall Sampling (All Samples)')] or 0)
    except ValueError:
        continue
    a = agg[(cur, int(r[0]))]
    a[0] += ie
    a[1] += ss
    a[2] = r[1].strip()[:100]
    tot_i += ie
    tot_s += ss
print(f'{fn}: {tot_i} instructions executed, {tot_s} stall samples')
print('| instructions % | stall samples % | line | source |\n|---|---|---|---|')
for (f, l), (ie, ss, src) in sorted(agg.items(), key=lambda kv: -kv[1][0])[:top]:
    print(f'| {100 * ie / tot_i:.1f} | {100 * ss / tot_s:.1f} | {f}:{l} | `{src}` |')
