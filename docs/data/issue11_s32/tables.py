#!/usr/bin/env python3
"""The tables of docs/benchmarks.md "Issue 11, session 32" from one device call's folder:

    python3 docs/data/issue11_s32/tables.py docs/data/issue11_s32/call5 bp3 rsc bp

(the builds as arguments: OURS, then BASE and the others for the A/B table; session 31's tables.py calls this
with its call's builds).
Reads gdn_<build><round>.csv (bench_cuda --Ns=0 --delta: GLA, GDN, SSE-GDN n4k1s rows; the builds alternated),
gla<round>.csv (bench_cuda --Ns=4,8,16: GLA and SSE-nNk1s, OURS), fla_main.json (../shared/peer/bench_fla_main.py)
and peer_varlen.json (../shared/peer/bench_fla.py, the SSE authors' varlen strategy), all from the same call.
Prints (1) OURS beside the peers, each of our cells the median of the call's rounds' medians, (2) each build's
rows and its ratio to BASE, round by round, (3) the roofline of OURS's rows at T = 32768.
"""
import csv, glob, json, os, statistics, sys

d = sys.argv[1]
ours_b = sys.argv[2] if len(sys.argv) > 2 else 'bp3'
builds = sys.argv[3:] or ['rsc', 'bp']
base = builds[0]
others = [b for b in [ours_b] + builds[1:] if b != base]


def rows(path):
    with open(path) as f:
        return [r for r in csv.DictReader(l for l in f if not l.startswith('#'))]


def table(pattern):
    out = {}
    for p in sorted(glob.glob(os.path.join(d, pattern))):
        for r in rows(p):
            out.setdefault((r['suite'], r['variant'], int(r['T'])), []).append(float(r['median_ms']))
    return out


Ts = [int(t) for t in os.environ.get('TS', '8192,16384,32768,65536').split(',')]  # TS=4096,…: other lengths
ours = table('gla[0-9].csv')
for k, v in table(f'gdn_{ours_b}[0-9].csv').items():
    ours.setdefault(k, []).extend(v)
fla = {}
if os.path.exists(os.path.join(d, 'fla_main.json')):
    for r in json.load(open(os.path.join(d, 'fla_main.json'))):
        if 'median_ms' in r:
            fla[(r['op'], r['mode'], r['T'])] = r['median_ms']
peer = {}
if os.path.exists(os.path.join(d, 'peer_varlen.json')):
    for r in json.load(open(os.path.join(d, 'peer_varlen.json')))['rows']:
        peer[(r['N'], r['pass'], r['T'])] = r['ms']


def cell(key):
    v = ours.get(key)
    return statistics.median(v) if v else None


def fmt(x, nd=3):
    return '—' if x is None else f'{x:.{nd}f}'


print('| row | peer | ' + ' | '.join(f'T = {t}: ours / peer (peer ÷ ours)' for t in Ts) + ' |')
print('|---|---|' + '---|' * len(Ts))
spec = [('GLA forward', ('prefill', 'gla'), 'fla main chunk_gla', lambda t: fla.get(('gla', 'fwd', t))),
        ('GLA forward + backward', ('train', 'gla'), 'fla main chunk_gla', lambda t: fla.get(('gla', 'fwdbwd', t))),
        ('GDN forward', ('prefill', 'gdn'), 'fla main chunk_gated_delta_rule', lambda t: fla.get(('gdn', 'fwd', t))),
        ('GDN forward + backward', ('train', 'gdn'), '(fla main refuses it)', lambda t: None)]
for n in (4, 8, 16):
    spec.append((f'SSE n{n}k1s forward', ('prefill', f'sse_n{n}k1s'), 'authors varlen', lambda t, n=n: peer.get((n, 'fwd', t))))
    spec.append((f'SSE n{n}k1s forward + backward', ('train', f'sse_n{n}k1s'), 'authors varlen', lambda t, n=n: peer.get((n, 'fwdbwd', t))))
spec.append(('SSE-GDN n4k1s forward', ('prefill', 'sse_gdn_n4k1s'), '—', lambda t: None))
spec.append(('SSE-GDN n4k1s forward + backward', ('train', 'sse_gdn_n4k1s'), '—', lambda t: None))
for name, (suite, var), pname, pf in spec:
    cells = []
    for t in Ts:
        o, p = cell((suite, var, t)), pf(t)
        cells.append(f'{fmt(o)} / {fmt(p)}' + (f' ({p / o:.2f}×)' if o and p else ''))
    print(f'| {name} | {pname} | ' + ' | '.join(cells) + ' |')
# SSE n4k1s ÷ GLA (item 3's 2.2 bound), forward + backward
r = [cell(('train', 'sse_n4k1s', t)) / cell(('train', 'gla', t)) for t in Ts if cell(('train', 'sse_n4k1s', t)) and cell(('train', 'gla', t))]
print('\nSSE n4k1s ÷ GLA, forward + backward: ' + ', '.join(f'{x:.2f}' for x in r))
names = [base] + others
print('\n| row | T | ' + ' | '.join(names + [f'{b} ÷ {base}' for b in others]) + ' |')
print('|---|---|' + '---|' * (len(names) + len(others)))
per = {b: [table(f'gdn_{b}{i}.csv') for i in (1, 2, 3)] for b in names}
for suite in ('prefill', 'train'):
    for var in ('gdn', 'sse_gdn_n4k1s', 'gla'):
        for t in Ts:
            k = (suite, var, t)
            vals = {b: [x[k][0] for x in per[b] if k in x] for b in per}
            if not vals[base]:
                continue
            ratio = lambda b: '—' if not vals[b] else ' / '.join(f'{a / m:.3f}' for a, m in zip(vals[b], vals[base]))
            print(f'| {suite} {var} | {t} | ' + ' | '.join(' / '.join(f'{x:.3f}' for x in vals[b]) or '—' for b in names) +
                  ' | ' + ' | '.join(ratio(b) for b in others) + ' |')

# (3) roofline of OURS's rows at T = 32768 (item 7): achieved bytes/s of bench_cuda's compulsory traffic against
# the call's copy bandwidth (the SSE peer's 1 GiB device-to-device copy), and TFLOP/s of session 15's FLOP model
# (docs/data/issue11_s15/report.py: per 64-token chunk and head at K = V = 128) against the bf16 dense peak
C, K_, V_, H = 64, 128, 128, 8
gla_f = 2 * C * C * K_ + 2 * C * K_ * V_ + 2 * C * C * V_ + 2 * C * K_ * V_
gla_b = gla_f + 2 * C * K_ * V_ + 2 * C * C * V_ + (2 * C * K_ * V_ + 2 * C * C * V_) + 2 * (2 * C * V_ * K_) + 2 * (C * C * K_)
gdn_f = 2 * C * C * K_ + C * C * (K_ + V_) + 2 * C * K_ * V_ + 2 * C * C * K_ + 2 * C * K_ * V_ + 2 * C * C * V_ + 2 * C * K_ * V_
flop = {('prefill', 'gla'): gla_f, ('train', 'gla'): gla_f + gla_b, ('prefill', 'gdn'): gdn_f, ('train', 'gdn'): 3 * gdn_f,
        ('prefill', 'sse_n4k1s'): 2 * gla_f, ('train', 'sse_n4k1s'): 2 * (gla_f + gla_b),
        ('prefill', 'sse_gdn_n4k1s'): 2 * gdn_f, ('train', 'sse_gdn_n4k1s'): 6 * gdn_f}
copy = 3.0
try:
    copy = json.load(open(os.path.join(d, 'peer_varlen.json')))['meta']['copy_bw_TBps']
except Exception:
    pass
peak = 989.
byts = {}
for p in glob.glob(os.path.join(d, 'gla[0-9].csv')) + glob.glob(os.path.join(d, f'gdn_{ours_b}[0-9].csv')):
    for r in rows(p):
        byts[(r['suite'], r['variant'], int(r['T']))] = int(r['bytes'])
print(f'\n| row (T = 32768) | ms | compulsory MB | GB/s | of copy ({copy:.2f} TB/s) | TFLOP/s | of bf16 peak |')
print('|---|---|---|---|---|---|---|')
for (suite, var), fl in flop.items():
    k = (suite, var, 32768)
    ms = cell(k)
    if ms is None or k not in byts:
        continue
    gbs = byts[k] / ms / 1e6
    tf = fl * (32768 // C) * H / ms / 1e9
    print(f'| {suite} {var} | {ms:.3f} | {byts[k] / 1e6:.0f} | {gbs:.0f} | {100 * gbs / (copy * 1e3):.1f} % | {tf:.1f} | {100 * tf / peak:.1f} % |')
