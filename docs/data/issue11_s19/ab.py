"""A/B table of bench_cuda text outputs: python3 ab.py DIR A B (files t_A1, t_A2, t_B1, t_B2 .txt)."""
import sys, statistics as st
d, a, b = sys.argv[1], sys.argv[2], sys.argv[3]
def load(f):
    out = {}
    for l in open(f):
        p = l.split()
        if len(p) > 9 and p[0] in ("prefill", "train") and p[6].isdigit():
            v = float(p[8]); v = v / 1000 if p[9] == "us" else v
            out[(p[0], p[1], int(p[6]))] = v
    return out
A = [load(f'{d}/t_{a}{i}.txt') for i in (1, 2)]; B = [load(f'{d}/t_{b}{i}.txt') for i in (1, 2)]
print(f'| row | T | {a} (runs 1, 2), ms | {b} (runs 1, 2), ms | {b} ÷ {a} |'); print('|---|---|---|---|---|')
for k in sorted(A[0]):
    x = [r[k] for r in A]; y = [r[k] for r in B]
    print(f"| {k[1]} {'forward' if k[0] == 'prefill' else 'forward + backward'} | {k[2]} | {x[0]:.3f} / {x[1]:.3f} | {y[0]:.3f} / {y[1]:.3f} | {st.mean(y) / st.mean(x):.3f} |")
