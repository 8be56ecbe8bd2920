#!/usr/bin/env python3
"""Per-kernel device time of one train call, from ncu's `--metrics gpu__time_duration.sum --csv --page raw`
output of bench_cuda --suite=train (GLA row, then SSE rows): rows are split where bench_cuda's input
fill kernels run, calls by the count of chunk_bwd_dqkg_kernel launches (one per train call).
Usage: kernels.py ncu_time32k.csv.gz [more …]  — prints one markdown table per file."""
import csv, gzip, io, sys
from collections import OrderedDict


def rows_of(path):
    lines = [l for l in gzip.open(path, 'rt') if l.startswith('"')]
    rd = list(csv.reader(io.StringIO(''.join(lines))))
    hdr, data = rd[0], rd[2:]
    ki, ti = hdr.index('Kernel Name'), hdr.index('gpu__time_duration.sum')
    seq = []
    for r in data:
        name = r[ki].split('(')[0].split('<')[0].replace('void ', '').split('::')[-1]
        seq.append((name, float(r[ti].replace(',', '')) / 1000.0))  # ns → µs
    groups, cur, in_fill = [], [], False
    for name, us in seq:
        if name == 'fill_kernel':
            if not in_fill and cur:
                groups.append(cur)
                cur = []
            in_fill = True
            continue
        in_fill = False
        cur.append((name, us))
    if cur:
        groups.append(cur)
    return groups


def table(path, labels):
    print(f'\n`{path}`\n')
    groups = rows_of(path)
    per = []
    for g in groups:
        calls = max(1, sum(1 for n, _ in g if n == 'chunk_bwd_dqkg_kernel'))
        agg = OrderedDict()
        for n, us in g:
            a = agg.setdefault(n, [0, 0.0])
            a[0] += 1
            a[1] += us
        per.append((calls, agg))
    names = OrderedDict()
    for _, agg in per:
        for n in agg:
            names[n] = 1
    lab = labels[:len(per)] + [f'row {i}' for i in range(len(labels), len(per))]
    print('| kernel | ' + ' | '.join(f'{l}: launches, µs per call' for l in lab) + ' |')
    print('|---|' + '---|' * len(per))
    tot = [0.0] * len(per)
    for n in names:
        cells = []
        for i, (calls, agg) in enumerate(per):
            if n in agg:
                c, us = agg[n]
                cells.append(f'{c // calls if c % calls == 0 else c / calls:g} × → {us / calls:.0f}')
                tot[i] += us / calls
            else:
                cells.append('')
        print(f'| {n} | ' + ' | '.join(cells) + ' |')
    print('| **sum (kernels one after another under ncu)** | ' + ' | '.join(f'**{t:.0f}**' for t in tot) + ' |')


if __name__ == '__main__':
    for p in sys.argv[1:]:
        table(p, ['GLA', 'SSE n4k1s varlen'])
