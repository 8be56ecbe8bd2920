# Medians (ms) by (suite, variant, T) from bench_cuda's stdout files bench_<build>.<n>.txt in a call folder,
# the mean of each build's runs (the spread between runs in brackets when over 0.5 %):
#   python3 docs/data/issue11_s12/tab.py docs/data/issue11_s12/call5
import collections, glob, os, re, sys
unit = {'us': 1e-3, 'ms': 1.0, 's': 1e3}
runs = collections.defaultdict(lambda: collections.defaultdict(list))
for f in sorted(glob.glob(os.path.join(sys.argv[1], 'bench_*.txt'))):
    build = os.path.basename(f)[len('bench_'):].split('.')[0]
    for line in open(f):
        t = line.split()
        if len(t) > 10 and t[0] in ('prefill', 'train') and t[9] in unit:
            runs[build][(t[0], t[1], int(t[6]))].append(float(t[8]) * unit[t[9]])
builds = list(runs)
keys = sorted(set().union(*[r.keys() for r in runs.values()]), key=lambda k: (k[0], k[1], k[2]))
print('| suite | variant | T | ' + ' | '.join(builds) + ' |')
print('|' + '---|' * (3 + len(builds)))
for k in keys:
    cells = []
    for b in builds:
        v = runs[b].get(k)
        if not v: cells.append('—'); continue
        m = sum(v) / len(v); spread = (max(v) - min(v)) / m
        cells.append('%.3f' % m + (' (±%.1f %%)' % (50 * spread) if spread > 0.005 else ''))
    print('| %s | %s | %d | ' % k + ' | '.join(cells) + ' |')
