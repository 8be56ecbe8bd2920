#!/usr/bin/env python3
"""Session 16 (s16-bwd): before / after table of the train rows of one device call.
usage: tab.py DIR   (DIR holds base_1.csv, new_1.csv, base_2.csv, new_2.csv and optionally fla_main_gla.json)"""
import csv, json, os, sys

d = sys.argv[1]

def rows(name):
    out = {}
    p = os.path.join(d, name)
    if not os.path.exists(p):
        return out
    with open(p) as f:
        for r in csv.DictReader(x for x in f if not x.startswith('#')):
            if r['suite'] != 'train':
                continue
            out[(r['variant'], r['strategy'], r['algorithm'], int(r['T']))] = float(r['median_ms'])
    return out

runs = {k: rows(f'{k}.csv') for k in ('base_1', 'new_1', 'base_2', 'new_2')}
keys = sorted(set().union(*[set(v) for v in runs.values()]), key=lambda k: (k[0], k[1], k[2], k[3]))
print('| variant | T | base run 1 | base run 2 | new run 1 | new run 2 | base mean | new mean | new ÷ base |')
print('|---|---|---|---|---|---|---|---|---|')
for k in keys:
    v = [runs[r].get(k) for r in ('base_1', 'base_2', 'new_1', 'new_2')]
    f = lambda x: '—' if x is None else f'{x:.3f}'
    b = [x for x in v[:2] if x is not None]
    n = [x for x in v[2:] if x is not None]
    bm = sum(b) / len(b) if b else None
    nm = sum(n) / len(n) if n else None
    ratio = f'{nm / bm:.3f}' if bm and nm else '—'
    print(f'| {k[0]} {k[1]} {k[2]} | {k[3]} | {f(v[0])} | {f(v[1])} | {f(v[2])} | {f(v[3])} | {f(bm)} | {f(nm)} | {ratio} |')
fj = os.path.join(d, 'fla_main_gla.json')
if os.path.exists(fj):
    fla = {(r['T'], r['mode']): r['median_ms'] for r in json.load(open(fj))}
    print()
    print('| T | fla main GLA forward + backward | linstate base (mean) | linstate new (mean) | fla ÷ new |')
    print('|---|---|---|---|---|')
    for T in sorted({t for t, _ in fla}):
        k = ('gla', 'varlen', 'chunked', T)
        b = [runs[r][k] for r in ('base_1', 'base_2') if k in runs[r]]
        n = [runs[r][k] for r in ('new_1', 'new_2') if k in runs[r]]
        if (T, 'fwdbwd') in fla and b and n:
            fm, bm, nm = fla[(T, 'fwdbwd')], sum(b) / len(b), sum(n) / len(n)
            print(f'| {T} | {fm:.3f} | {bm:.3f} | {nm:.3f} | {fm / nm:.2f}× |')
