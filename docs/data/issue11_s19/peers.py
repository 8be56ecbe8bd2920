#!/usr/bin/env python3
"""Session 19: the same-call tables against the peers from one device call's outputs.
usage: peers.py DIR BUILD   (DIR holds t_BUILD1.txt, t_BUILD2.txt — bench_cuda's prefill and train rows, ours = the
mean of the two runs —, peer_varlen.json (the SSE authors' varlen strategy, ../shared/peer/bench_fla.py), fla_main.json
(../shared/peer/bench_fla_main.py: chunk_gla, chunk_gated_delta_rule) and gdn_BUILD.txt (bench_cuda --delta))."""
import json, os, statistics as st, sys

d, b = sys.argv[1], sys.argv[2]


def ours(path):
    out = {}
    for l in open(path):
        p = l.split()
        if len(p) > 9 and p[0] in ('prefill', 'train') and p[6].isdigit():
            v = float(p[8]); v = v / 1000 if p[9] == 'us' else v
            out[(p[1], 'fwd' if p[0] == 'prefill' else 'fwdbwd', int(p[6]))] = v
    return out


runs = [ours(os.path.join(d, f't_{b}{i}.txt')) for i in (1, 2)]
me = {k: st.mean(r[k] for r in runs) for k in runs[0]}
gdn = ours(os.path.join(d, f'gdn_{b}.txt'))
pv = json.load(open(os.path.join(d, 'peer_varlen.json')))['rows']
auth = {(f"sse_n{r['N']}k1s", r['pass'], r['T']): r['ms'] for r in pv if 'ms' in r}
fm = json.load(open(os.path.join(d, 'fla_main.json')))
fla = {(r['op'], r['mode'], r['T']): r['median_ms'] for r in fm if 'median_ms' in r}
Ts = [8192, 16384, 32768, 65536]


def table(title, rows):
    print(f'\n**{title}**\n')
    print('| row | ' + ' | '.join(f'T={t}' for t in Ts) + ' |')
    print('|---|' + '---|' * len(Ts))
    for name, f in rows:
        print(f'| {name} | ' + ' | '.join(f(t) for t in Ts) + ' |')


def ms(x):
    return f'{x:.3f}' if x is not None else '—'


def ratio(a, b):
    return f'**{a / b:.2f}×**' if a is not None and b is not None else '—'


rows = []
for n in (4, 8, 16):
    v = f'sse_n{n}k1s'
    rows += [(f'n{n} forward + backward, linstate', lambda t, v=v: ms(me.get((v, 'fwdbwd', t)))),
             (f'n{n} forward + backward, authors', lambda t, v=v: ms(auth.get((v, 'fwdbwd', t)))),
             ('authors ÷ linstate', lambda t, v=v: ratio(auth.get((v, 'fwdbwd', t)), me.get((v, 'fwdbwd', t))))]
rows.append(('n4 / n8 / n16 forward, authors ÷ linstate', lambda t: ' / '.join(
    f"{auth[(f'sse_n{n}k1s', 'fwd', t)] / me[(f'sse_n{n}k1s', 'fwd', t)]:.2f}" for n in (4, 8, 16)) + '×'))
rows.append(('n4k1s ÷ GLA, forward + backward', lambda t: f"{me[('sse_n4k1s', 'fwdbwd', t)] / me[('gla', 'fwdbwd', t)]:.3f}"))
table('SSE top-1 + shared against the SSE authors\' varlen strategy (item 3), ms', rows)
table('GLA against fla main (`chunk_gla`, item 1), ms', [
    ('GLA forward, linstate', lambda t: ms(me.get(('gla', 'fwd', t)))),
    ('GLA forward, fla main', lambda t: ms(fla.get(('gla', 'fwd', t)))),
    ('fla ÷ linstate', lambda t: ratio(fla.get(('gla', 'fwd', t)), me.get(('gla', 'fwd', t)))),
    ('GLA forward + backward, linstate', lambda t: ms(me.get(('gla', 'fwdbwd', t)))),
    ('GLA forward + backward, fla main', lambda t: ms(fla.get(('gla', 'fwdbwd', t)))),
    ('fla ÷ linstate', lambda t: ratio(fla.get(('gla', 'fwdbwd', t)), me.get(('gla', 'fwdbwd', t))))])
Ts = [4096, 8192, 16384, 32768, 65536]
table('The gated delta rule against fla main (`chunk_gated_delta_rule`, item 2), ms', [
    ('GDN forward, linstate', lambda t: ms(gdn.get(('gdn', 'fwd', t)))),
    ('GDN forward, fla main', lambda t: ms(fla.get(('gdn', 'fwd', t)))),
    ('fla ÷ linstate', lambda t: ratio(fla.get(('gdn', 'fwd', t)), gdn.get(('gdn', 'fwd', t)))),
    ('GDN forward + backward, linstate (fla main refuses its backward, #640)', lambda t: ms(gdn.get(('gdn', 'fwdbwd', t)))),
    ('SSE-GDN n4k1s forward + backward, linstate (no peer)', lambda t: ms(gdn.get(('sse_gdn_n4k1s', 'fwdbwd', t))))])
