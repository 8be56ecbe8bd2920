#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""linstate's GPU benchmark (cuda/bench/bench_cuda.cu) next to the peer's figures (fla, the SSE authors' kernels).

Reads the CSV written by `bench_cuda --out=...` and the peer's JSON files (../shared/peer: bench_main.json,
bench_rest.json, bench_varlen.json, bench_decode_run1.json, bench_decode_run2.json; a later file's row replaces
an earlier one's, as in FLA-H200.md), writes two log-log figures of time against T (forward + backward and
forward: one panel per variant, linstate's rows and the peer's) and prints the markdown tables of
docs/benchmarks.md "GPU (H200)": linstate | fla | ratio per variant and T, the decode step against the copy
bandwidth, and the issue's targets.

    python3 bench/plot_gpu.py build/bench_cuda.csv                  # figures into docs/img/, tables on stdout
    python3 bench/plot_gpu.py OURS.csv --peer-dir ../shared/peer --svg docs/img/gpu_fwdbwd.svg \\
        --fwd-svg docs/img/gpu_fwd.svg

Standard library only: the SVG is written by hand (no matplotlib on the machines this runs on).
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TS = [1024, 2048, 4096, 8192, 16384, 32768]
NS = [4, 8, 16]

# The issue's targets: SSE forward + backward under the authors' best (fla mask or varlen), GLA under chunk_gla.
TARGET_FWDBWD = {(4, 4096): 3.3, (8, 4096): 5.2, (16, 4096): 6.0, (4, 32768): 13.2, (8, 32768): 12.1, (16, 32768): 12.1}
TARGET_GLA_32K = 4.18
TARGET_DECODE_B128_FRACTION = 0.85
TARGET_DECODE_B1_US = 10.0


# ------------------------------------------------------------------------------------------------
# Data
# ------------------------------------------------------------------------------------------------
def read_ours(path: Path) -> list[dict]:
    rows = []
    with open(path, newline='') as f:
        lines = [ln for ln in f if ln.strip() and not ln.startswith('#')]
    for r in csv.DictReader(lines):
        for k in ('B', 'T', 'N', 'reps'):
            r[k] = int(r[k]) if r.get(k) not in (None, '') else 0
        for k in ('median_ms', 'p20_ms', 'p80_ms', 'bytes', 'gbps'):
            r[k] = float(r[k]) if r.get(k) not in (None, '') else float('nan')
        r.setdefault('mode', '')
        rows.append(r)
    return rows


def variant_n(name: str) -> int:
    """'gla' -> 0, 'sse_n8k1s' -> 8."""
    if name.startswith('sse_n'):
        return int(name[5:].split('k')[0])
    return 0


def ours_ms(rows, suite, n, T, strategy=None, algorithm='chunked'):
    """Median ms of linstate's row, or None."""
    for r in rows:
        if (r['suite'] == suite and variant_n(r['variant']) == n and r['T'] == T and r['algorithm'] == algorithm
                and (strategy is None or r['strategy'] == strategy)):
            return r['median_ms']
    return None


def ours_best(rows, suite, n, T):
    """(ms, strategy) of linstate's fastest chunked row (any strategy), or (None, None)."""
    best = (None, None)
    for r in rows:
        if r['suite'] == suite and variant_n(r['variant']) == n and r['T'] == T and r['algorithm'] == 'chunked':
            if best[0] is None or r['median_ms'] < best[0]:
                best = (r['median_ms'], r['strategy'])
    return best


def read_peer(peer_dir: Path):
    """({(impl, N, T, pass): ms}, [decode rows], copy TB/s)."""
    ops, decode, copy = {}, [], []
    for name in ('bench_main.json', 'bench_rest.json', 'bench_varlen.json'):
        p = peer_dir / name
        if not p.exists():
            continue
        d = json.loads(p.read_text())
        if d.get('meta', {}).get('copy_bw_TBps'):
            copy.append(d['meta']['copy_bw_TBps'])
        for r in d['rows']:
            if 'ms' not in r or r.get('suite') not in ('gla', 'sse'):
                continue
            n = r.get('N') or 0
            ops[(r['impl'], n, r['T'], r['pass'])] = r['ms']  # later files win
    for name in ('bench_decode_run1.json', 'bench_decode_run2.json'):
        p = peer_dir / name
        if p.exists():
            d = json.loads(p.read_text())
            decode.extend(r for r in d['rows'] if r.get('suite') == 'decode')
            if d.get('meta', {}).get('copy_bw_TBps'):
                copy.append(d['meta']['copy_bw_TBps'])
    return ops, decode, (sum(copy) / len(copy) if copy else None)


def peer_best(ops, n, T, pas):
    """(ms, impl) of the faster of the authors' two SSE strategies, or (None, None)."""
    c = [(ops[(impl, n, T, pas)], impl) for impl in ('mask', 'varlen') if (impl, n, T, pas) in ops]
    return min(c) if c else (None, None)


def peer_decode(decode, impl, B, key):
    """Mean of the peer's runs for one decode row's field (graph_ms, eager_ms), or None."""
    v = [r[key] for r in decode if r.get('impl') == impl and r.get('B') == B and r.get(key) is not None]
    return sum(v) / len(v) if v else None


# ------------------------------------------------------------------------------------------------
# Markdown
# ------------------------------------------------------------------------------------------------
def ms_cell(x):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return '–'
    return f'{x:.3f}' if x < 10 else f'{x:.2f}' if x < 100 else f'{x:.1f}'


def ratio_cell(peer, ours):
    if peer is None or ours is None or ours <= 0:
        return '–'
    return f'**{peer / ours:.2f}×**' if peer > ours else f'{peer / ours:.2f}×'


def op_table(rows, ops, suite, pas, title):
    out = [f'**{title}, ms (median; ratio = fla ÷ linstate, above 1 = linstate faster)**', '',
           '| variant | | ' + ' | '.join(f'T={T}' for T in TS) + ' |', '|---|---|' + '---|' * len(TS)]

    def line(v, label, cells):
        out.append(f'| {v} | {label} | ' + ' | '.join(cells) + ' |')

    ours = [ours_ms(rows, suite, 0, T) for T in TS]
    peer = [ops.get(('chunk_gla', 0, T, pas)) for T in TS]
    line('GLA', 'linstate chunked<64>', [ms_cell(x) for x in ours])
    rec = [ours_ms(rows, suite, 0, T, algorithm='recurrent') for T in TS]
    if any(x is not None for x in rec):
        line('', 'linstate recurrent', [ms_cell(x) for x in rec])
    line('', 'fla chunk_gla', [ms_cell(x) for x in peer])
    line('', 'fla fused_recurrent_gla', [ms_cell(ops.get(('fused_recurrent_gla', 0, T, pas))) for T in TS])
    line('', 'chunk_gla ÷ linstate', [ratio_cell(p, o) for p, o in zip(peer, ours)])
    for n in NS:
        varlen = [ours_ms(rows, suite, n, T, 'varlen') for T in TS]
        mask = [ours_ms(rows, suite, n, T, 'mask') for T in TS]
        best = [peer_best(ops, n, T, pas) for T in TS]
        line(f'SSE N={n}', 'linstate varlen', [ms_cell(x) for x in varlen])
        if any(x is not None for x in mask):
            line('', 'linstate mask', [ms_cell(x) for x in mask])
        line('', 'fla mask', [ms_cell(ops.get(('mask', n, T, pas))) for T in TS])
        line('', 'fla varlen', [ms_cell(ops.get(('varlen', n, T, pas))) for T in TS])
        line('', 'fla best ÷ linstate varlen', [ratio_cell(b[0], o) for b, o in zip(best, varlen)])
    return '\n'.join(out)


def decode_table(rows, decode, copy_ours, copy_peer):
    dec = [r for r in rows if r['suite'] == 'decode']
    out = [f'**Decode step (T = 1, `forward_in_place`), µs per step; copy bandwidth here '
           f'{copy_ours / 1e3:.2f} TB/s (fla\'s run: {copy_peer:.2f} TB/s)**' if copy_ours and copy_peer else
           '**Decode step (T = 1, `forward_in_place`), µs per step**', '',
           '| variant | B | state + I/O bytes / step | linstate eager | linstate host enqueue | linstate graph | '
           'graph TB/s | % of copy | fla graph (fused_recurrent_gla) | fla eager |',
           '|---|---|---|---|---|---|---|---|---|---|']
    keys = []
    for r in dec:
        if (r['variant'], r['B']) not in keys:
            keys.append((r['variant'], r['B']))
    for variant, B in keys:
        m = {r['mode']: r for r in dec if r['variant'] == variant and r['B'] == B}
        g, e, h = m.get('graph'), m.get('eager'), m.get('host')
        anyr = g or e
        n = variant_n(variant)
        peer_impl = 'fused_recurrent_gla' if n == 0 else ('sse_mask' if n == 4 else None)
        pg = peer_decode(decode, peer_impl, B, 'graph_ms') if peer_impl else None
        pe = peer_decode(decode, peer_impl, B, 'eager_ms') if peer_impl else None
        name = 'GLA' if n == 0 else f'SSE n{n}k1 + shared'
        out.append('| ' + ' | '.join([
            name, str(B), f'{anyr["bytes"] / 2**20:.2f} MiB' if anyr else '–',
            f'{e["median_ms"] * 1e3:.1f}' if e else '–', f'{h["median_ms"] * 1e3:.1f}' if h else '–',
            f'{g["median_ms"] * 1e3:.1f}' if g else '–', f'{g["gbps"] / 1e3:.2f}' if g else '–',
            f'{100 * g["gbps"] / copy_ours:.0f}%' if g and copy_ours else '–',
            f'{pg * 1e3:.1f}' if pg else ('not measured' if peer_impl else '–'),
            f'{pe * 1e3:.0f} ({"mask" if n else "python call"})' if pe else '–']) + ' |')
    return '\n'.join(out)


def targets_table(rows, ops, copy_ours):
    out = ['**Targets of issue 4**', '', '| target | linstate | fla | met? |', '|---|---|---|---|']

    def status(ok):
        return '–' if ok is None else ('yes' if ok else '**no**')

    for (n, T), goal in sorted(TARGET_FWDBWD.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        ms, strat = ours_best(rows, 'train', n, T)
        pb, impl = peer_best(ops, n, T, 'fwdbwd')
        out.append(f'| SSE N={n} forward + backward, T={T}: < {goal} ms | '
                   f'{ms_cell(ms) + " ms (" + strat + ")" if ms is not None else "–"} | '
                   f'{ms_cell(pb)} ms ({impl}) | {status(None if ms is None else ms < goal)} |')
    g = ours_ms(rows, 'train', 0, 32768)
    out.append(f'| GLA forward + backward, T=32768: ≤ {TARGET_GLA_32K} ms | {ms_cell(g) + " ms" if g else "–"} | '
               f'{ms_cell(ops.get(("chunk_gla", 0, 32768, "fwdbwd")))} ms (chunk_gla) | '
               f'{status(None if g is None else g <= TARGET_GLA_32K)} |')
    dec = {(r['B'], r['mode']): r for r in rows if r['suite'] == 'decode' and variant_n(r['variant']) == 4}
    g128, g1 = dec.get((128, 'graph')), dec.get((1, 'graph'))
    frac = g128['gbps'] / copy_ours if g128 and copy_ours else None
    out.append(f'| SSE n4k1 decode, B=128 (graph): ≥ {TARGET_DECODE_B128_FRACTION:.0%} of copy bandwidth on the '
               f'bytes it must touch | '
               + (f'{frac:.0%} ({g128["median_ms"] * 1e3:.1f} µs)' if frac else '–')
               + f' | not measured | {status(None if frac is None else frac >= TARGET_DECODE_B128_FRACTION)} |')
    out.append(f'| SSE n4k1 decode, B=1 (graph): < {TARGET_DECODE_B1_US:.0f} µs | '
               + (f'{g1["median_ms"] * 1e3:.1f} µs' if g1 else '–')
               + f' | not measured | {status(None if g1 is None else g1["median_ms"] * 1e3 < TARGET_DECODE_B1_US)} |')
    return '\n'.join(out)


# ------------------------------------------------------------------------------------------------
# SVG (by hand)
# ------------------------------------------------------------------------------------------------
def esc(s: str) -> str:
    return s.replace('&', '&amp;').replace('<', '&lt;').replace('>', '&gt;')


class Svg:
    def __init__(self, w, h):
        self.w, self.h, self.items = w, h, []

    def add(self, s):
        self.items.append(s)

    def text(self, x, y, s, size=11, anchor='start', weight='normal', fill='#222', rotate=None):
        tr = f' transform="rotate({rotate} {x:.1f} {y:.1f})"' if rotate is not None else ''
        self.add(f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" font-weight="{weight}" '
                 f'fill="{fill}"{tr}>{esc(s)}</text>')

    def line(self, x1, y1, x2, y2, stroke='#000', width=1.0, dash=None):
        d = f' stroke-dasharray="{dash}"' if dash else ''
        self.add(f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{stroke}" '
                 f'stroke-width="{width}"{d}/>')

    def polyline(self, pts, stroke, width=2.0, dash=None):
        d = f' stroke-dasharray="{dash}"' if dash else ''
        p = ' '.join(f'{x:.1f},{y:.1f}' for x, y in pts)
        self.add(f'<polyline points="{p}" fill="none" stroke="{stroke}" stroke-width="{width}"{d}/>')

    def marker(self, x, y, kind, color):
        if kind == 'circle':
            self.add(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.2" fill="{color}"/>')
        else:
            self.add(f'<rect x="{x - 3:.1f}" y="{y - 3:.1f}" width="6" height="6" fill="white" stroke="{color}" '
                     f'stroke-width="1.5"/>')

    def save(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        body = '\n'.join(self.items)
        path.write_text(f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.w}" height="{self.h}" '
                        f'viewBox="0 0 {self.w} {self.h}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">\n'
                        f'<rect width="100%" height="100%" fill="white"/>\n{body}\n</svg>\n')


# (label, colour, solid = linstate / dashed = fla, marker)
STYLE = {
    'linstate chunked<64>': ('#1f4e9c', None, 'circle'),
    'linstate recurrent': ('#7f9fd3', '2,3', 'circle'),
    'linstate varlen': ('#1f4e9c', None, 'circle'),
    'linstate mask': ('#5fa8d3', None, 'circle'),
    'fla chunk_gla': ('#c0392b', '6,4', 'square'),
    'fla fused_recurrent_gla': ('#e67e22', '6,4', 'square'),
    'fla mask': ('#c0392b', '6,4', 'square'),
    'fla varlen': ('#e67e22', '6,4', 'square'),
}


def panel_series(rows, ops, suite, pas, n):
    """[(label, [(T, ms)])] for one panel."""
    def pts(f):
        return [(T, f(T)) for T in TS if f(T) is not None]
    if n == 0:
        s = [('linstate chunked<64>', pts(lambda T: ours_ms(rows, suite, 0, T))),
             ('linstate recurrent', pts(lambda T: ours_ms(rows, suite, 0, T, algorithm='recurrent'))),
             ('fla chunk_gla', pts(lambda T: ops.get(('chunk_gla', 0, T, pas)))),
             ('fla fused_recurrent_gla', pts(lambda T: ops.get(('fused_recurrent_gla', 0, T, pas))))]
    else:
        s = [('linstate varlen', pts(lambda T: ours_ms(rows, suite, n, T, 'varlen'))),
             ('linstate mask', pts(lambda T: ours_ms(rows, suite, n, T, 'mask'))),
             ('fla mask', pts(lambda T: ops.get(('mask', n, T, pas)))),
             ('fla varlen', pts(lambda T: ops.get(('varlen', n, T, pas))))]
    return [(label, p) for label, p in s if p]


def figure(rows, ops, suite, pas, title, path: Path, note=''):
    panels = [(0, 'GLA')] + [(n, f'SSE N={n}, top-1 + shared') for n in NS]
    series = {n: panel_series(rows, ops, suite, pas, n) for n, _ in panels}
    vals = [ms for s in series.values() for _, p in s for _, ms in p if ms and ms > 0]
    if not vals:
        print(f'plot_gpu: no data for {path.name}', file=sys.stderr)
        return
    ylo = 10 ** math.floor(math.log10(min(vals)))
    yhi = 10 ** math.ceil(math.log10(max(vals)))
    W, H = 980, 760
    svg = Svg(W, H)
    svg.text(W / 2, 24, title, size=15, anchor='middle', weight='bold')
    svg.text(W / 2, 42, 'NVIDIA H200, bf16, B = 1, H = 8, K = V = 128; median ms, log-log; solid: linstate, '
             'dashed: fla (the authors\' Triton kernels)' + note, size=11, anchor='middle', fill='#555')
    pw, ph = 370, 260                      # plot area of one panel
    origins = [(80, 70), (560, 70), (80, 420), (560, 420)]
    lx0, lx1 = math.log2(TS[0]), math.log2(TS[-1])
    ly0, ly1 = math.log10(ylo), math.log10(yhi)
    for (n, name), (ox, oy) in zip(panels, origins):
        def X(T):
            return ox + (math.log2(T) - lx0) / (lx1 - lx0) * pw

        def Y(ms):
            return oy + ph - (math.log10(ms) - ly0) / (ly1 - ly0) * ph
        svg.text(ox + pw / 2, oy - 8, name, size=13, anchor='middle', weight='bold')
        # grid and ticks
        dec = int(round(ly1 - ly0))
        for k in range(int(round(ly0)), int(round(ly1)) + 1):
            for m in ((1, 2, 5) if dec <= 3 else (1,)):
                v = m * 10 ** k
                if v < ylo * 0.999 or v > yhi * 1.001:
                    continue
                y = Y(v)
                svg.line(ox, y, ox + pw, y, stroke='#ddd' if m == 1 else '#f0f0f0')
                svg.text(ox - 6, y + 4, f'{v:g}', size=10, anchor='end', fill='#444')
        for T in TS:
            x = X(T)
            svg.line(x, oy, x, oy + ph, stroke='#eee')
            svg.text(x, oy + ph + 15, f'{T // 1024}K', size=10, anchor='middle', fill='#444')
        svg.line(ox, oy + ph, ox + pw, oy + ph, stroke='#444')
        svg.line(ox, oy, ox, oy + ph, stroke='#444')
        svg.text(ox + pw / 2, oy + ph + 32, 'T (tokens)', size=11, anchor='middle')
        svg.text(ox - 44, oy + ph / 2, 'ms', size=11, anchor='middle', rotate=-90)
        # series; the legend sits top left on a white box
        nser = len(series[n])
        if nser:
            svg.add(f'<rect x="{ox + 3:.1f}" y="{oy + 2:.1f}" width="170" height="{14 * nser + 4}" fill="white" '
                    f'fill-opacity="0.85" stroke="#ccc" stroke-width="0.5"/>')
        ly = oy + 14
        for label, pts in series[n]:
            color, dash, mk = STYLE[label]
            xy = [(X(T), Y(ms)) for T, ms in pts if ms > 0]
            if len(xy) > 1:
                svg.polyline(xy, color, 2.0, dash)
            for x, y in xy:
                svg.marker(x, y, mk, color)
            # legend, top left of the panel
            svg.line(ox + 8, ly - 4, ox + 30, ly - 4, stroke=color, width=2, dash=dash)
            svg.marker(ox + 19, ly - 4, mk, color)
            svg.text(ox + 36, ly, label, size=10)
            ly += 14
        if not any(label.startswith('linstate') for label, _ in series[n]):
            svg.text(ox + pw - 6, oy + ph - 8, 'linstate: no rows in the CSV', size=10, anchor='end', fill='#a00')
    svg.save(path)
    print(f'plot_gpu: wrote {os.path.relpath(path)}', file=sys.stderr)


# ------------------------------------------------------------------------------------------------
def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('csv', type=Path, help='CSV written by bench_cuda --out=...')
    ap.add_argument('--peer-dir', type=Path, default=REPO.parent / 'shared' / 'peer')
    ap.add_argument('--svg', type=Path, default=REPO / 'docs' / 'img' / 'gpu_fwdbwd.svg',
                    help='forward + backward figure')
    ap.add_argument('--fwd-svg', type=Path, default=REPO / 'docs' / 'img' / 'gpu_fwd.svg', help='forward figure')
    ap.add_argument('--no-svg', action='store_true', help='tables only')
    a = ap.parse_args()

    rows = read_ours(a.csv)
    ops, decode, copy_peer_tbps = read_peer(a.peer_dir)
    if not ops:
        print(f'plot_gpu: no peer rows under {a.peer_dir}', file=sys.stderr)
    copy_rows = [r for r in rows if r['suite'] == 'copy']
    copy_ours = copy_rows[0]['gbps'] if copy_rows else None  # GB/s

    if not a.no_svg:
        figure(rows, ops, 'train', 'fwdbwd', 'Forward + backward: linstate vs fla', a.svg)
        figure(rows, ops, 'prefill', 'fwd', 'Forward: linstate vs fla', a.fwd_svg, note='; fla\'s forward ran with autograd on')

    print(op_table(rows, ops, 'train', 'fwdbwd', 'Forward + backward'))
    print()
    print(op_table(rows, ops, 'prefill', 'fwd', 'Forward'))
    print()
    print(decode_table(rows, decode, copy_ours, copy_peer_tbps))
    print()
    print(targets_table(rows, ops, copy_ours))


if __name__ == '__main__':
    main()
