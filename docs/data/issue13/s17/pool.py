#!/usr/bin/env python3
# pool.py FILE [REF]: every "X / Y: CPU r (… range a-b)" line of prefill_ab runs, each pair put as B / REF-or-first-sorted,
# the per-run ratios and their geometric mean; and each build's per-call medians
import re, sys, math, collections
f = open(sys.argv[1]).read()
ref = sys.argv[2] if len(sys.argv) > 2 else None
pairs = collections.defaultdict(list); meds = collections.defaultdict(list)
for m in re.finditer(r"^(\S+): process CPU ([\d.]+) ms", f, re.M): meds[m.group(1)].append(float(m.group(2)))
for m in re.finditer(r"^(\S+) / (\S+): CPU ([\d.]+) \(per-round ratios, median; range ([\d.]+)-([\d.]+)\)", f, re.M):
    a, b, r, lo, hi = m.group(1), m.group(2), float(m.group(3)), float(m.group(4)), float(m.group(5))
    if (ref and a == ref) or (not ref and a < b): a, b, r, lo, hi = b, a, 1 / r, 1 / hi, 1 / lo
    pairs[(a, b)].append((r, lo, hi))
for x, v in meds.items(): print(f"{x}: CPU medians {' '.join(f'{c:.2f}' for c in v)} ms")
for (a, b), v in sorted(pairs.items()):
    g = math.exp(sum(math.log(r) for r, _, _ in v) / len(v))
    print(f"{a} / {b}: runs {' '.join(f'{r:.3f}' for r, _, _ in v)}; geometric mean {g:.3f}; rounds' range {min(l for _, l, _ in v):.3f}-{max(h for _, _, h in v):.3f}")
