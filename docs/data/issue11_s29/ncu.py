# Per kernel of one GDN train call (ncu_<BUILD>.csv of a device call: -k regex:delta_, gpu__time_duration.sum,
# smsp__inst_executed.sum, launch__registers_per_thread), µs per build, kernels of the same name summed
# (the forward's pieces), instructions in millions:
#   python3 ncu.py DIR BUILD [BUILD ...]        e.g. python3 ncu.py call1 s28_ring s28_bar s29_dA s29_ins s29_norec
import csv, os, re, sys
d, B = sys.argv[1], sys.argv[2:]
def num(x):
    return float(x.replace(',', '')) if x.strip() else 0.0
tab, order = {}, []
for b in B:
    lines = open(os.path.join(d, f'ncu_{b}.csv')).read().splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith('"ID"'))
    rows = list(csv.reader(lines[start:]))
    head = rows[0]
    ci = {k: head.index(k) for k in ('Kernel Name', 'gpu__time_duration.sum', 'smsp__inst_executed.sum', 'launch__registers_per_thread')}
    for r in rows[1:]:
        if len(r) < len(head) or not r[0].strip():
            continue
        name = re.sub(r'^void ', '', r[ci['Kernel Name']]).split('<')[0].split('(')[0]
        t = num(r[ci['gpu__time_duration.sum']]) / 1000.0  # ns → µs
        n = num(r[ci['smsp__inst_executed.sum']]) / 1e6
        k = (name, b)
        if name not in order:
            order.append(name)
        a = tab.setdefault(k, [0.0, 0.0, 0, r[ci['launch__registers_per_thread']]])
        a[0] += t; a[1] += n; a[2] += 1
print('| kernel | ' + ' | '.join(f'{b}: µs (launches; M instructions)' for b in B) + ' |')
print('|---|' + '---|' * len(B))
for name in order:
    cells = []
    for b in B:
        a = tab.get((name, b))
        cells.append(f'{a[0]:.1f} ({a[2]}; {a[1]:.1f})' if a else '—')
    print(f'| {name} | ' + ' | '.join(cells) + ' |')
