# The rows of a device call (suite, variant, T), every run per build (ms), and each build ÷ the first (median of
# the runs):
#   python3 runs.py DIR BUILD [BUILD ...]        e.g. python3 runs.py call1 s28_ring s28_addr s28_bar s29_dA s29_ins
# reads DIR/t_<BUILD><i>.csv for i = 1, 2, … (bench_cuda --out: the medians of each run).
import csv, os, statistics, sys
d, B = sys.argv[1], sys.argv[2:]
ms = {}
for b in B:
    i = 1
    while os.path.exists(os.path.join(d, f't_{b}{i}.csv')):
        rows = csv.DictReader(l for l in open(os.path.join(d, f't_{b}{i}.csv')) if not l.startswith('#'))
        for r in rows:
            ms.setdefault((r['suite'] + ' ' + r['variant'], int(r['T']), b), []).append(float(r['median_ms']))
        i += 1
keys = sorted({(v, t) for (v, t, b) in ms})
print('| row | T | ' + ' | '.join(f'{b} (runs)' for b in B) + ' | ' + ' | '.join(f'{b} ÷ {B[0]}' for b in B[1:]) + ' |')
print('|---|---|' + '---|' * (2 * len(B) - 1))
for v, t in keys:
    cells = [' / '.join(f'{x:.3f}' for x in ms.get((v, t, b), [])) for b in B]
    m0 = statistics.median(ms[(v, t, B[0])])
    rat = [f"{statistics.median(ms[(v, t, b)]) / m0:.3f}" if (v, t, b) in ms else '—' for b in B[1:]]
    print(f'| {v} | {t} | ' + ' | '.join(cells) + ' | ' + ' | '.join(rat) + ' |')
