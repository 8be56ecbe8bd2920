#!/usr/bin/env python3
"""Markdown tables of docs/benchmarks.md "Issue 11" from one device call's files:
   python3 docs/data/issue11/tables.py docs/data/issue11/call3_final
bench_all.txt: bench_cuda's stdout of several builds run alternately (names from --out=bench_<build>_<round>.csv);
fla_main.json: ../shared/peer/bench_fla_main.py's output (same call)."""
import collections, json, os, re, sys

d = sys.argv[1]
txt = open(os.path.join(d, 'bench_all.txt')).read()
res = collections.defaultdict(list)
for b in txt.split('# bench_cuda ')[1:]:
    m = re.search(r'bench_(\w+?)_(\d)\.csv', b)
    if not m: continue
    for l in b.split('\n'):
        f = l.split()
        if len(f) > 12 and f[0] in ('prefill', 'train') and f[4] in ('fwd', 'fwdbwd'):
            v = float(f[8]) / (1000 if f[9] == 'us' else 1)
            res[(m.group(1), f[0], f[1], int(f[6]))].append(v)
builds = sorted({k[0] for k in res}, key=lambda n: (n != 'base', n))
Ts = sorted({k[3] for k in res})
fla = {}
fp = os.path.join(d, 'fla_main.json')
if os.path.exists(fp):
    for r in json.load(open(fp)):
        if 'median_ms' in r: fla[(r['op'], r['mode'], r['T'])] = r['median_ms']
mean = lambda xs: sum(xs) / len(xs)
for suite, mode in (('prefill', 'fwd'), ('train', 'fwdbwd')):
    print(f'\n**{suite} ({mode}), median ms (mean of the runs in the call)**\n')
    print('| variant | build | ' + ' | '.join(f'T={T}' for T in Ts) + ' |')
    print('|---|---|' + '---|' * len(Ts))
    for var in ('gla', 'sse_n4k1s'):
        for bld in builds:
            xs = [res.get((bld, suite, var, T)) for T in Ts]
            if not any(xs): continue
            print(f'| {var} | {bld} | ' + ' | '.join(f'{mean(x):.3f}' if x else '—' for x in xs) + ' |')
        if var == 'gla' and fla:
            print('| gla | fla main chunk_gla | ' + ' | '.join(f"{fla[('gla', mode, T)]:.3f}" if ('gla', mode, T) in fla else '—' for T in Ts) + ' |')
            last = builds[-1]
            print(f'| gla | chunk_gla ÷ {last} | ' + ' | '.join(
                f"{fla[('gla', mode, T)] / mean(res[(last, suite, 'gla', T)]):.2f}×" if ('gla', mode, T) in fla and res.get((last, suite, 'gla', T)) else '—'
                for T in Ts) + ' |')
