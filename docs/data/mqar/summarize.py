#!/usr/bin/env python3
"""docs/data/mqar/summarize.py — the table and the plot of docs/mqar.md from the mqar command's logs
(the runs were separate processes, one per group of variants and seed, so the command's own
results.md / accuracy.svg each cover one process). Standard library only.
  python3 docs/data/mqar/summarize.py docs/data/mqar/steps1000 docs/img/mqar_steps1000.svg"""
import glob, math, re, sys

runs = {}  # (variant, seed) -> {"curve": [(step, acc)], "params", "tps", "secs", "acc"}
ev = re.compile(r"\[(\w+) seed (\d+)\] eval step\s+(\d+)\s+held-out loss ([\d.]+)\s+accuracy ([\d.]+)")
fin = re.compile(r"^== (.+), seed (\d+): (\d+) parameters, held-out accuracy ([\d.]+), (\d+) training tokens/s, ([\d.]+) s")
labels = {}
for f in sorted(glob.glob(sys.argv[1] + "/*.log")):
    last = None
    for line in open(f):
        m = ev.search(line)
        if m:
            k = (m[1], int(m[2]))
            runs.setdefault(k, {"curve": []})["curve"].append((int(m[3]), float(m[5])))
            last = k
        m = fin.match(line)
        if m and last:
            labels[last[0]] = m[1]
            runs[last].update(params=int(m[3]), acc=float(m[4]), tps=int(m[5]), secs=float(m[6]))
order = [v for v in ["gla", "sse_n4k1s", "sse_n8k2", "gdn", "sse_gdn"] if any(k[0] == v for k in runs)]
print("| variant | parameters | held-out accuracy per seed | mean ± sd | training tokens/s | s per run |")
print("|---|---:|---|---|---:|---:|")
for v in order:
    rs = sorted((k[1], r) for k, r in runs.items() if k[0] == v)
    a = [r["acc"] for _, r in rs]
    mu = sum(a) / len(a)
    sd = math.sqrt(sum((x - mu) ** 2 for x in a) / (len(a) - 1)) if len(a) > 1 else 0.0
    per = ", ".join(f"{r['acc']:.3f} (seed {s})" for s, r in rs)
    tps = sum(r["tps"] for _, r in rs) / len(rs)
    secs = sum(r["secs"] for _, r in rs) / len(rs)
    print(f"| {labels[v]} | {rs[0][1]['params']} | {per} | {mu:.3f} ± {sd:.3f} | {tps:.0f} | {secs:.0f} |")
if len(sys.argv) > 2:
    steps = max(s for r in runs.values() for s, _ in r["curve"])
    W, H, L, R, T, B = 720, 440, 60, 200, 40, 50
    pw, ph = W - L - R, H - T - B
    X = lambda s: L + pw * s / steps
    Y = lambda a: T + ph * (1 - a)
    cols = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"]
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
         '<rect width="100%" height="100%" fill="white"/>',
         f'<text x="{L}" y="22" font-size="14">MQAR (vocab 64, T 32, 4 pairs, d_model 64, 2 layers): held-out accuracy; faint: each seed</text>']
    for i in range(6):
        a = i / 5
        o.append(f'<line x1="{L}" y1="{Y(a)}" x2="{L+pw}" y2="{Y(a)}" stroke="#ddd"/><text x="{L-8}" y="{Y(a)+4}" text-anchor="end">{a:.1f}</text>')
        o.append(f'<text x="{X(steps*i/5)}" y="{T+ph+18}" text-anchor="middle">{steps*i//5}</text>')
    o.append(f'<rect x="{L}" y="{T}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>')
    o.append(f'<text x="{L+pw/2}" y="{H-12}" text-anchor="middle">training step</text>')
    ch = 1 / 32
    o.append(f'<line x1="{L}" y1="{Y(ch)}" x2="{L+pw}" y2="{Y(ch)}" stroke="#888" stroke-dasharray="4 4"/><text x="{L+pw-4}" y="{Y(ch)-4}" text-anchor="end" fill="#888">chance 1/32</text>')
    for i, v in enumerate(order):
        rs = [r for k, r in sorted(runs.items()) if k[0] == v]
        for r in rs:
            pts = " ".join(f"{X(s):.1f},{Y(a):.1f}" for s, a in r["curve"])
            o.append(f'<polyline fill="none" stroke="{cols[i]}" stroke-opacity="0.35" points="{pts}"/>')
        n = min(len(r["curve"]) for r in rs)
        pts = " ".join(f"{X(rs[0]['curve'][j][0]):.1f},{Y(sum(r['curve'][j][1] for r in rs)/len(rs)):.1f}" for j in range(n))
        o.append(f'<polyline fill="none" stroke="{cols[i]}" stroke-width="2" points="{pts}"/>')
        ly = T + 10 + 20 * i
        o.append(f'<line x1="{L+pw+12}" y1="{ly}" x2="{L+pw+36}" y2="{ly}" stroke="{cols[i]}" stroke-width="2"/><text x="{L+pw+42}" y="{ly+4}">{labels[v]} ({len(rs)} seeds)</text>')
    o.append("</svg>")
    open(sys.argv[2], "w").write("\n".join(o) + "\n")
