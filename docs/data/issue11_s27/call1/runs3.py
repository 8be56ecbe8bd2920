# The train rows of a call, runs 1 / 2 / 3 per build (ms), and each build ÷ the first (means of the three):
#   python3 runs3.py [DIR [BUILD ...]]     (default: this folder, builds b0 b8 b12 b13 b14)
#   python3 runs3.py ../call2 b13 dd
import csv, os, sys
d = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
B = sys.argv[2:] or ['b0', 'b8', 'b12', 'b13', 'b14']
ms = {}
for b in B:
    for i in (1, 2, 3):
        rows = csv.DictReader(l for l in open(os.path.join(d, f't_{b}{i}.csv')) if not l.startswith('#'))
        for r in rows:
            ms.setdefault((r['variant'], int(r['T']), b), []).append(float(r['median_ms']))
keys = sorted({(v, t) for (v, t, b) in ms})
print('| row | T | ' + ' | '.join(f'{b} (runs 1 / 2 / 3)' for b in B) + ' | ' + ' | '.join(f'{b} ÷ {B[0]}' for b in B[1:]) + ' |')
print('|---|---|' + '---|' * (2 * len(B) - 1))
for v, t in keys:
    cells = [' / '.join(f'{x:.3f}' for x in ms[(v, t, b)]) for b in B]
    m0 = sum(ms[(v, t, B[0])]) / 3
    rat = [f"{sum(ms[(v, t, b)]) / 3 / m0:.3f}" for b in B[1:]]
    print(f'| {v} | {t} | ' + ' | '.join(cells) + ' | ' + ' | '.join(rat) + ' |')
