#!/usr/bin/env python3
"""Tables and plots of docs/benchmarks.md "Issue 11, session 15: the same-call tables" (item 7) from two
device calls' folders:

    python3 docs/data/issue11_s15/report.py docs/data/issue11_s15/call1 docs/data/issue11_s15/call3 docs/data/issue11_s15/call2 [docs/img]

call1: bench_ours_<round>.csv (bench_cuda --out=..., GLA, GDN, SSE-GDN; two rounds around the peer) and
       fla_main.json (../shared/peer/bench_fla_main.py: fla main chunk_gla and chunk_gated_delta_rule), run in
       the same device call; ncu_gla_gdn.csv (ncu --csv --page details of one prefill and one train call at
       T = 32768).
call3: bench_ours_<round>.csv (GLA and SSE-nNk1s, varlen and mask; two rounds around the peer) and
       peer_varlen.json (../shared/peer/bench_fla.py: the SSE authors' varlen strategy), same device call.
call2: ncu_gla_gdn.csv[.gz] and ncu_sse.csv[.gz] (ncu --csv --page details of one prefill and one train call at
       T = 32768: GLA, GDN and SSE-GDN n4k1s; SSE n4k1s varlen).
Prints Markdown tables; with an output folder, writes issue11_s15_times.svg (ms against T, log-log) and
issue11_s15_roofline.svg (achieved TFLOP/s against FLOP per compulsory byte, under the measured copy
bandwidth and the bf16 dense peak). Needs matplotlib for the plots.

Roofline model (stated, not measured): bytes = bench_cuda's compulsory traffic of the row (every input
read once, every output written once; training adds dO and the gradients; the `bytes` column of its
CSV). FLOP = the chunked algorithm's matrix products per 64-token chunk and head at K = V = 128:
  GLA forward: QKᵀ, Q̃H, AV, K̃ᵀV = 2C²K + 2CKV + 2C²V + 2CKV = 6.29 MFLOP;
  GLA forward + backward: the forward, its recomputation's products that the backward needs
  (W_c = Q̃ᵀ(r dO), dA = dO Vᵀ, dV = K̃ D_c + Aᵀ(r dO), dQ/dK inter products dO H_cᵀ and V D_cᵀ, the two
  triangular intra products) = 24.1 MFLOP (docs/data/issue11/plots.py's count);
  SSE top-1 + shared: two streams per token, so 2 × GLA (partial chunks of the routed streams ignored);
  gated delta rule forward (WY form): KKᵀ (2C²K), the triangular solve for [W | U] (C²(K + V)), WH (2CKV),
  QKᵀ (2C²K), QH (2CKV), AU (2C²V), KᵀU (2CKV) = 8.39 MFLOP; forward + backward counted as 3 × the
  forward (the backward's products are about twice the forward's), a stated estimate.
"""
import collections, csv, glob, json, os, sys

COPY_TBS_DEFAULT = 4.22  # replaced by the call's own copy row when present
BF16_TFLOPS = 989.        # H200 SXM dense bf16 tensor-core peak (NVIDIA's figure)
C, K, V, H = 64, 128, 128, 8


def gla_flop(mode):
    fwd = 2 * C * C * K + 2 * C * K * V + 2 * C * C * V + 2 * C * K * V
    if mode == 'fwd':
        return fwd
    bwd = fwd + 2 * C * K * V + 2 * C * C * V + (2 * C * K * V + 2 * C * C * V) + 2 * (2 * C * V * K) + 2 * (C * C * K)
    return fwd + bwd


def gdn_flop(mode):
    fwd = 2 * C * C * K + C * C * (K + V) + 2 * C * K * V + 2 * C * C * K + 2 * C * K * V + 2 * C * C * V + 2 * C * K * V
    return fwd if mode == 'fwd' else 3 * fwd


def flop(variant, mode, T):
    chunks = T // C * H
    if variant == 'gla':
        return gla_flop(mode) * chunks
    if variant.startswith('sse_n'):
        return 2 * gla_flop(mode) * chunks
    if variant == 'gdn':
        return gdn_flop(mode) * chunks
    if variant.startswith('sse_gdn'):
        return 2 * gdn_flop(mode) * chunks
    return None


def load_ours(call):
    rows = collections.defaultdict(list)
    copy = []
    for f in sorted(glob.glob(os.path.join(call, 'bench_ours_*.csv'))):
        for r in csv.DictReader(l for l in open(f) if not l.startswith('#')):
            if r['suite'] == 'copy':
                copy.append(float(r['gbps']))
                continue
            if r['suite'] not in ('prefill', 'train'):
                continue
            rows[(r['variant'], r['strategy'], r['mode'], int(r['T']))].append((float(r['median_ms']), float(r['bytes'])))
    out = {}
    for k, v in rows.items():
        ms = [x[0] for x in v]
        out[k] = dict(ms=sum(ms) / len(ms), spread=(max(ms) - min(ms)) / (sum(ms) / len(ms)), bytes=v[0][1], runs=len(ms))
    return out, (sum(copy) / len(copy) / 1e3 if copy else None)


def load_fla(call):
    fla = {}
    p = os.path.join(call, 'fla_main.json')
    if os.path.exists(p):
        for r in json.load(open(p)):
            if 'median_ms' in r:
                fla[(r['op'], r['mode'], r['T'])] = r['median_ms']
            elif 'error' in r:
                fla[(r['op'], 'fwdbwd', r['T'])] = 'refused'
    return fla


def load_peer(call):
    sse = {}
    p = os.path.join(call, 'peer_varlen.json')
    if os.path.exists(p):
        for r in json.load(open(p))['rows']:
            if r.get('suite') == 'sse' and r.get('impl') == 'varlen' and r.get('ms') is not None:
                sse[(r['N'], r['pass'], r['T'])] = r['ms']
    return sse


def ncu_kernels(path):
    """Per kernel name (template arguments cut): launches, summed duration, and the SOL / occupancy
    metrics of its longest launch."""
    if not os.path.exists(path):
        return {}
    per = collections.defaultdict(dict)
    names = {}
    import gzip
    with gzip.open(path, 'rt') as f:
        lines = [l for l in f if l.startswith('"')]
    for r in csv.DictReader(lines):
        i = r['ID']
        names[i] = r['Kernel Name']
        per[i][r['Metric Name'] if r['Section Name'] != 'Memory Workload Analysis' else 'MWA ' + r['Metric Name']] = (r['Metric Unit'], r['Metric Value'])
        per[i]['_grid'], per[i]['_block'] = ('', r['Grid Size']), ('', r['Block Size'])
    out = {}
    for i, m in per.items():
        name = names[i].split('(')[0].replace('void ', '').split('<')[0]
        if name.startswith('bench::'):  # the harness's input fills, not the library's
            continue
        def val(key, scale_us=False):
            if key not in m:
                return None
            unit, v = m[key]
            v = float(v.replace(',', ''))
            if scale_us:
                v = v / 1e3 if unit in ('ns', 'nsecond') else v * 1e3 if unit in ('ms', 'msecond') else v
            return v
        d = dict(us=val('Duration', True), sm=val('Compute (SM) Throughput'), mem=val('Memory Throughput'),
                 dram=val('DRAM Throughput'), l1=val('L1/TEX Cache Throughput'), l2=val('L2 Cache Throughput'), occ=val('Achieved Occupancy'), regs=val('Registers Per Thread'),
                 issue=val('Issue Slots Busy'), grid=m['_grid'][1], block=m['_block'][1])
        o = out.setdefault(name, dict(n=0, total=0.0, top=None))
        o['n'] += 1
        o['total'] += d['us'] or 0
        if o['top'] is None or (d['us'] or 0) > (o['top']['us'] or 0):
            o['top'] = d
    return out


def limiter(d):
    """ncu's speed-of-light reading: the busier of the SM and the memory units (memory = the busiest of
    L1/shared, L2 and DRAM); under 60 % for both, the kernel waits on latency or issue, not on a unit."""
    sm, mem = d['sm'] or 0, d['mem'] or 0
    if (d['us'] or 0) < 10:
        return 'a few µs: launch and latency'
    units = {'L1/shared': d.get('l1') or 0, 'L2': d.get('l2') or 0, 'DRAM': d.get('dram') or 0}
    top = max(units, key=units.get)
    if max(sm, mem) >= 60:
        return 'SM issue (%.0f %%)' % sm if sm >= mem else '%s (%.0f %%)' % (top, units[top])
    return 'latency (SM %.0f %%, %s %.0f %%)' % (sm, top, units[top])


def fmt(x, nd=3):
    return '—' if x is None else ('%.*f' % (nd, x) if isinstance(x, float) else str(x))


def main():
    c1, c2, cn = sys.argv[1], sys.argv[2], sys.argv[3]
    img = sys.argv[4] if len(sys.argv) > 4 else None
    o1, copy1 = load_ours(c1)
    o2, copy2 = load_ours(c2)
    fla, peer = load_fla(c1), load_peer(c2)
    copy = copy1 or copy2 or COPY_TBS_DEFAULT
    Ts = sorted({k[3] for k in list(o1) + list(o2)})
    print(f'copy bandwidth measured in the calls: {fmt(copy1, 3)} / {fmt(copy2, 3)} TB/s\n')

    def roof(o, key):
        r = o.get(key)
        if not r:
            return '—'
        gbs = r['bytes'] / (r['ms'] * 1e-3) / 1e9
        f = flop(key[0], key[2], key[3])
        tf = f / (r['ms'] * 1e-3) / 1e12 if f else None
        return '%.0f GB/s (%.1f %%), %.1f TFLOP/s (%.2f %%)' % (gbs, 100 * gbs / (copy * 1e3), tf, 100 * tf / BF16_TFLOPS)

    print('**GLA and the gated delta rule against fla main (call 1), median ms; ours = mean of two runs**\n')
    print('| row | ' + ' | '.join(f'T={T}' for T in Ts) + ' |')
    print('|---|' + '---|' * len(Ts))
    for var, op, mode, label in (('gla', 'gla', 'fwd', 'GLA forward'), ('gla', 'gla', 'fwdbwd', 'GLA forward + backward'),
                                 ('gdn', 'gdn', 'fwd', 'GDN forward'), ('gdn', 'gdn', 'fwdbwd', 'GDN forward + backward'),
                                 ('sse_gdn_n4k1s', None, 'fwd', 'SSE-GDN n4k1s forward'),
                                 ('sse_gdn_n4k1s', None, 'fwdbwd', 'SSE-GDN n4k1s forward + backward')):
        ours = [o1.get((var, 'varlen', mode, T)) for T in Ts]
        print(f'| {label}, linstate | ' + ' | '.join(fmt(r['ms']) if r else '—' for r in ours) + ' |')
        if op:
            fl = [fla.get((op, mode, T)) for T in Ts]
            print(f'| {label}, fla main | ' + ' | '.join(fmt(x) for x in fl) + ' |')
            print(f'| fla ÷ linstate | ' + ' | '.join(('**%.2f×**' % (x / r['ms'])) if isinstance(x, float) and r else '—'
                                                       for x, r in zip(fl, ours)) + ' |')
    print('\n**SSE top-1 + shared against the SSE authors\' varlen strategy (call 3), median ms**\n')
    print('| row | ' + ' | '.join(f'T={T}' for T in Ts) + ' |')
    print('|---|' + '---|' * len(Ts))
    for mode, mname in (('fwd', 'forward'), ('fwdbwd', 'forward + backward')):
        for n in (4, 8, 16):
            for strat in ('varlen', 'mask'):
                rs = [o2.get((f'sse_n{n}k1s', strat, mode, T)) for T in Ts]
                print(f'| n{n} {mname}, linstate {strat} | ' + ' | '.join(fmt(r['ms']) if r else '—' for r in rs) + ' |')
            pv = [peer.get((n, mode, T)) for T in Ts]
            best = [min([r['ms'] for r in (o2.get((f'sse_n{n}k1s', s, mode, T)) for s in ('varlen', 'mask')) if r] or [None]) for T in Ts]
            print(f'| n{n} {mname}, authors varlen | ' + ' | '.join(fmt(x) for x in pv) + ' |')
            print(f'| authors ÷ linstate (best strategy) | ' + ' | '.join(('**%.2f×**' % (x / b)) if x and b else '—'
                                                                         for x, b in zip(pv, best)) + ' |')
        g = [o2.get(('gla', 'varlen', mode, T)) for T in Ts]
        print(f'| GLA {mname} (same call) | ' + ' | '.join(fmt(r['ms']) if r else '—' for r in g) + ' |')
        s4 = [o2.get(('sse_n4k1s', 'varlen', mode, T)) for T in Ts]
        print(f'| SSE n4k1s varlen ÷ GLA | ' + ' | '.join('%.3f' % (a['ms'] / b['ms']) if a and b else '—' for a, b in zip(s4, g)) + ' |')

    print('\n**Roofline of each row at T = 32768: achieved bytes/s (% of copy) and FLOP/s (% of bf16 peak)**\n')
    print('| row | ms | achieved |')
    print('|---|---|---|')
    T = 32768
    for o, var, strat in ((o1, 'gla', 'varlen'), (o1, 'gdn', 'varlen'), (o1, 'sse_gdn_n4k1s', 'varlen'),
                          (o2, 'sse_n4k1s', 'varlen'), (o2, 'sse_n8k1s', 'varlen'), (o2, 'sse_n16k1s', 'varlen'),
                          (o2, 'sse_n4k1s', 'mask')):
        for mode in ('fwd', 'fwdbwd'):
            r = o.get((var, strat, mode, T))
            if r:
                print(f'| {var} {strat} {mode} | {r["ms"]:.3f} | {roof(o, (var, strat, mode, T))} |')

    # ncu_sse.csv.gz holds GLA's kernels only: its 40 launches ran out in the GLA rows that bench_cuda runs
    # before the SSE rows, so it is not tabled; likewise ncu_gla_gdn.csv.gz never reached the GDN rows.
    for label, path in (('GLA (the 60 launches ran out before the GDN rows)', os.path.join(cn, 'ncu_gla_gdn.csv.gz')),):
        ks = ncu_kernels(path)
        if not ks:
            continue
        print(f'\n**ncu, {label}: each kernel at T = 32768 (one prefill and one train call; longest launch shown)**\n')
        print('| kernel | launches | longest µs | grid × block | regs | SM % | L1/shared % | L2 % | DRAM % | occupancy % | limited by |')
        print('|---|---|---|---|---|---|---|---|---|---|---|')
        for name, o in sorted(ks.items(), key=lambda kv: -(kv[1]['top']['us'] or 0)):
            d = o['top']
            print(f'| {name} | {o["n"]} | {fmt(d["us"], 1)} | {d["grid"]} × {d["block"]} | {fmt(d["regs"], 0)} | {fmt(d["sm"], 1)} | '
                  f'{fmt(d["l1"], 1)} | {fmt(d["l2"], 1)} | {fmt(d["dram"], 1)} | {fmt(d["occ"], 1)} | {limiter(d)} |')

    if not img:
        return
    os.makedirs(img, exist_ok=True)
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(16.5, 5.0))

    def series(ax, pts, label, style):
        pts = sorted(p for p in pts if isinstance(p[1], float))
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=label)
    ax = axes[0]
    for mode, name in (('fwd', 'forward'), ('fwdbwd', 'fwd + bwd')):
        series(ax, [(k[3], r['ms']) for k, r in o1.items() if k[0] == 'gla' and k[2] == mode], f'linstate {name}', 'o-')
        series(ax, [(k[2], v) for k, v in fla.items() if k[0] == 'gla' and k[1] == mode], f'fla main chunk_gla {name}', 's--')
    ax.set_title('GLA (call 1: fla main in the same call)')
    ax = axes[1]
    for mode, name in (('fwd', 'forward'), ('fwdbwd', 'fwd + bwd')):
        series(ax, [(k[3], r['ms']) for k, r in o1.items() if k[0] == 'gdn' and k[2] == mode], f'linstate GDN {name}', 'o-')
        series(ax, [(k[3], r['ms']) for k, r in o1.items() if k[0] == 'sse_gdn_n4k1s' and k[2] == mode], f'linstate SSE-GDN n4k1s {name}', '^-')
    series(ax, [(k[2], v) for k, v in fla.items() if k[0] == 'gdn' and k[1] == 'fwd'], 'fla main chunk_gated_delta_rule forward', 's--')
    ax.set_title('gated delta rule (fla main refuses its backward, #640)')
    ax = axes[2]
    for n in (4, 8, 16):
        series(ax, [(k[3], r['ms']) for k, r in o2.items() if k[0] == f'sse_n{n}k1s' and k[1] == 'varlen' and k[2] == 'fwdbwd'], f'linstate SSE-n{n}k1s', 'o-')
        series(ax, [(k[2], v) for k, v in peer.items() if k[0] == n and k[1] == 'fwdbwd'], f'SSE authors varlen, n{n}', 's--')
    series(ax, [(k[3], r['ms']) for k, r in o2.items() if k[0] == 'gla' and k[2] == 'fwdbwd'], 'linstate GLA (no routing)', 'k:')
    ax.set_title('SSE top-1 + shared, fwd + bwd (call 3)')
    for ax in axes:
        ax.set_xscale('log', base=2), ax.set_yscale('log')
        ax.set_xlabel('T (tokens), bf16, B = 1, H = 8, K = V = 128'), ax.set_ylabel('ms (median)')
        ax.grid(True, which='both', alpha=0.3), ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(img, 'issue11_s15_times.svg'))

    fig, ax = plt.subplots(figsize=(8, 5.5))
    grid = [10 ** (i / 20) for i in range(-10, 67)]
    ax.plot(grid, [min(copy * x, BF16_TFLOPS) for x in grid], 'k-', lw=1, label=f'roof: {copy:.2f} TB/s copy, {BF16_TFLOPS:.0f} TFLOP/s bf16')
    marks = {'gla': 'o', 'gdn': 'D', 'sse_n4k1s': 's', 'sse_n8k1s': 'v', 'sse_n16k1s': '^', 'sse_gdn_n4k1s': 'P'}
    for o in (o1, o2):
        for (var, strat, mode, T), r in sorted(o.items()):
            if T != 32768 or strat != 'varlen' or var not in marks or (o is o2 and var == 'gla'):
                continue
            f = flop(var, mode, T)
            ai, tf = f / r['bytes'], f / (r['ms'] * 1e-3) / 1e12
            ax.plot(ai, tf, marks[var], fillstyle='full' if mode == 'fwd' else 'none',
                    label=f'{var} {mode}: {tf:.1f} TFLOP/s, {r["bytes"] / (r["ms"] * 1e-3) / 1e9:.0f} GB/s')
    ax.set_xscale('log'), ax.set_yscale('log')
    ax.set_xlabel('FLOP per compulsory byte'), ax.set_ylabel('TFLOP/s achieved')
    ax.set_title('T = 32768 rows against the H200 roofline (chunked products; filled = forward)')
    ax.grid(True, which='both', alpha=0.3), ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(img, 'issue11_s15_roofline.svg'))


if __name__ == '__main__':
    main()
