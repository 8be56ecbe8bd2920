#!/usr/bin/env python3
"""Warp-stall samples of one kernel by phase (the SASS between two BAR.SYNC) and by reason, from ncu's SASS
source counters (--section SourceCounters --page source --print-source sass --csv, gzipped):

    python3 docs/data/issue11_s32/phases.py docs/data/issue11_s32/call2/src_prep.csv.gz
"""
import collections, csv, gzip, io, sys

text = gzip.open(sys.argv[1], 'rt').read().splitlines()
start = next(i for i, l in enumerate(text) if l.startswith('"Address"'))
rows = list(csv.DictReader(io.StringIO('\n'.join(text[start:]))))
num = lambda s: float(s.replace(',', '')) if s not in ('', '-') else 0.0
smp = lambda r: num(r['Warp Stall Sampling (All Samples)'])
tot = sum(smp(r) for r in rows)
reasons = [k for k in rows[0] if k.startswith('stall_') and 'Not Issued' not in k]
print(f"{len(rows)} SASS instructions, {int(tot)} samples, {sum(num(r['Instructions Executed']) for r in rows) / 1e6:.1f} M warp instructions")
st = collections.Counter()
for r in rows:
    for k in reasons: st[k] += num(r[k])
print('by reason: ' + ', '.join(f"{k[6:]} {100 * v / tot:.1f} %" for k, v in st.most_common(8)))
print('by phase (instructions [first, last], the last a BAR.SYNC): samples, warp instructions, top reasons')
bars = [i for i, r in enumerate(rows) if 'BAR.SYNC' in r['Source']] + [len(rows) - 1]
prev = 0
for b in bars:
    seg = rows[prev:b + 1]
    s = sum(smp(r) for r in seg)
    c = collections.Counter()
    for r in seg:
        for k in reasons: c[k] += num(r[k])
    print(f"  [{prev:5d}, {b:5d}] {100 * s / tot:5.1f} %  {sum(num(r['Instructions Executed']) for r in seg) / 1e6:6.2f} M  "
          + ', '.join(f"{k[6:]} {100 * v / tot:.1f}" for k, v in c.most_common(3)))
    prev = b + 1
