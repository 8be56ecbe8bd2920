#!/usr/bin/env python3
"""Plots of docs/benchmarks.md "Issue 11" (item 7) from one device call's files:

    python3 docs/data/issue11/plots.py <call folder> <build> <out folder> [peer_sse_varlen.json]

<call folder>: bench_<build>_<round>.csv (bench_cuda --out=..., one or more rounds: medians are averaged
over the rounds) and fla_main.json (../shared/peer/bench_fla_main.py run in the same device call).
[peer_sse_varlen.json]: the SSE authors' varlen timings (../shared/peer/run_device.sh varlen); when it
was not run in the same call the legend says "recorded", with its date.
Writes <out>/issue11_times.svg (ms against T, log-log) and <out>/issue11_roofline.svg (achieved TFLOP/s
against FLOP per compulsory byte, with the measured copy-bandwidth roof and the bf16 dense peak).
Needs matplotlib (pip install matplotlib)."""
import collections, csv, glob, json, os, sys

import matplotlib

matplotlib.use('Agg')
import matplotlib.pyplot as plt

COPY_TBS = 4.22     # measured copy bandwidth, bench_cuda --suite=copy (docs/benchmarks.md, "Decode step")
BF16_TFLOPS = 989.  # H200 SXM dense bf16 tensor-core peak (NVIDIA's figure)
C, K, V = 64, 128, 128


def flop_per_chunk(mode):
    """FLOP of the GLA chunked products per 64-token chunk and head (K = V = 128): the forward's QKᵀ,
    Q̃H, AV and K̃ᵀV (6.29 M); forward + backward adds the recomputation (the same four), W_c = Q̃ᵀ(r dO),
    dA = dO vᵀ, dv = K̃D_c + Aᵀ(r dO), the inter dq/dk products dO H_cᵀ and v D_cᵀ and the two intra
    products (lower triangles, half a C×C×K product each)."""
    fwd = 2 * C * C * K + 2 * C * K * V + 2 * C * C * V + 2 * C * K * V
    if mode == 'fwd':
        return fwd
    bwd = fwd + 2 * C * K * V + 2 * C * C * V + (2 * C * K * V + 2 * C * C * V) + 2 * (2 * C * V * K) + 2 * (C * C * K)
    return fwd + bwd


def load(call, build):
    rows = collections.defaultdict(list)
    for f in sorted(glob.glob(os.path.join(call, f'bench_{build}_*.csv'))):
        for r in csv.DictReader(l for l in open(f) if not l.startswith('#')):
            rows[(r['variant'], r['mode'], int(r['T']))].append((float(r['median_ms']), float(r['bytes'])))
    return {k: (sum(x[0] for x in v) / len(v), v[0][1]) for k, v in rows.items()}


def main():
    call, build, out = sys.argv[1:4]
    peer = sys.argv[4] if len(sys.argv) > 4 else None
    ours = load(call, build)
    fla = {}
    fp = os.path.join(call, 'fla_main.json')
    if os.path.exists(fp):
        for r in json.load(open(fp)):
            if 'median_ms' in r:
                fla[(r['op'], r['mode'], r['T'])] = r['median_ms']
    sse = {}
    peer_label = 'SSE authors varlen'
    if peer:
        pj = json.load(open(peer))
        same = os.path.dirname(os.path.abspath(peer)) == os.path.abspath(call)
        if not same:
            peer_label += ' (recorded earlier)'
        for r in pj['rows']:  # ../shared/peer/bench_fla.py's rows
            if r.get('suite') == 'sse' and r.get('impl') == 'varlen' and r.get('ms') is not None:
                sse[(r['N'], r['pass'], r['T'])] = r['ms']
    os.makedirs(out, exist_ok=True)

    has = [any(v == 'gla' for v, _, _ in ours), any(v == 'gdn' for v, _, _ in ours), any(v.startswith('sse_n') for v, _, _ in ours)]
    fig, shown = plt.subplots(1, sum(has), figsize=(5.4 * sum(has), 4.8), squeeze=False)
    it = iter(shown[0])
    axes = [next(it) if h else None for h in has]
    def series(ax, pts, label, style):
        pts = sorted(pts)
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=label)
    ax = axes[0]
    for mode in (('fwd', 'forward'), ('fwdbwd', 'fwd + bwd')) if ax else ():
        mode, name = mode
        series(ax, [(T, ms) for (v, m, T), (ms, _) in ours.items() if v == 'gla' and m == mode], f'linstate {name}', 'o-')
        series(ax, [(T, ms) for (op, m, T), ms in fla.items() if op == 'gla' and m == mode], f'fla main chunk_gla {name}', 's--')
    if ax: ax.set_title('GLA (bf16, B = 1, H = 8, K = V = 128)')
    ax = axes[1]
    for mode in (('fwd', 'forward'), ('fwdbwd', 'fwd + bwd')) if ax else ():
        mode, name = mode
        series(ax, [(T, ms) for (v, m, T), (ms, _) in ours.items() if v == 'gdn' and m == mode], f'linstate {name}', 'o-')
    if ax:
        series(ax, [(T, ms) for (op, m, T), ms in fla.items() if op == 'gdn' and m == 'fwd'], 'fla main chunk_gated_delta_rule forward', 's--')
        ax.set_title('gated delta rule (l2norm; fla main refuses its backward, #640)')
    ax = axes[2]
    for n in (4, 8, 16) if ax else ():
        series(ax, [(T, ms) for (v, m, T), (ms, _) in ours.items() if v == f'sse_n{n}k1s' and m == 'fwdbwd'], f'linstate SSE-n{n}k1s', 'o-')
        series(ax, [(T, ms) for (N, m, T), ms in sse.items() if N == n and m == 'fwdbwd'], f'{peer_label}, n{n}', 's--')
    if ax:
        series(ax, [(T, ms) for (v, m, T), (ms, _) in ours.items() if v == 'gla' and m == 'fwdbwd'], 'linstate GLA (no routing)', 'k:')
        ax.set_title('SSE top-1 + shared, forward + backward')
    for ax in shown[0]:
        ax.set_xscale('log', base=2), ax.set_yscale('log')
        ax.set_xlabel('T (tokens)'), ax.set_ylabel('ms (median)')
        ax.grid(True, which='both', alpha=0.3), ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, 'issue11_times.svg'))

    fig, ax = plt.subplots(figsize=(7, 5))
    grid = [10 ** (i / 20) for i in range(-6, 67)]
    ax.plot(grid, [min(COPY_TBS * x, BF16_TFLOPS) for x in grid], 'k-', lw=1, label=f'roof: {COPY_TBS} TB/s copy, {BF16_TFLOPS:.0f} TFLOP/s bf16')
    for (var, mode, T), (ms, nbytes) in sorted(ours.items()):
        if var != 'gla' or T < 8192:
            continue
        flop = flop_per_chunk(mode) * (T // C) * 8
        ai, tf = flop / nbytes, flop / (ms * 1e-3) / 1e12
        ax.plot(ai, tf, 'o' if mode == 'fwd' else 's', label=f'GLA {mode} T={T}: {tf:.1f} TFLOP/s, {nbytes / (ms * 1e-3) / 1e9:.0f} GB/s')
    ax.set_xscale('log'), ax.set_yscale('log')
    ax.set_xlabel('FLOP per compulsory byte'), ax.set_ylabel('TFLOP/s achieved')
    ax.set_title('GLA rows against the H200 roofline (chunked products only)')
    ax.grid(True, which='both', alpha=0.3), ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, 'issue11_roofline.svg'))


if __name__ == '__main__':
    main()
