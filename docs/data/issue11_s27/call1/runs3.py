# the train rows of call 1, runs 1 / 2 / 3 per build (ms) and each build ÷ build 0 (mean of the three):
# python3 runs3.py
import csv
B = ['b0', 'b8', 'b12', 'b13', 'b14']
ms = {}
for b in B:
    for i in (1, 2, 3):
        rows = csv.DictReader(l for l in open(f't_{b}{i}.csv') if not l.startswith('#'))
        for r in rows:
            ms.setdefault((r['variant'], int(r['T']), b), []).append(float(r['median_ms']))
keys = sorted({(v, t) for (v, t, b) in ms})
print('| row | T | ' + ' | '.join(f'{b} (runs 1 / 2 / 3)' for b in B) + ' | ' + ' | '.join(f'{b} ÷ b0' for b in B[1:]) + ' |')
print('|---|---|' + '---|' * (2 * len(B) - 1))
for v, t in keys:
    cells = [' / '.join(f'{x:.3f}' for x in ms[(v, t, b)]) for b in B]
    m0 = sum(ms[(v, t, 'b0')]) / 3
    rat = [f"{sum(ms[(v, t, b)]) / 3 / m0:.3f}" for b in B[1:]]
    print(f'| {v} | {t} | ' + ' | '.join(cells) + ' | ' + ' | '.join(rat) + ' |')
