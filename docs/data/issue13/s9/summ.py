# summ.py FILE BEFORE AFTER: linstate's speed over ggml's by process CPU (compare's "ggml / this, CPU"), each
# round of an ABBA file (### NAME headers), and the medians of the rounds of the two binaries.
import statistics as st, sys
path, before, after = sys.argv[1], sys.argv[2], sys.argv[3]
rows, cur = {}, None
for l in open(path):
    if l.startswith('###'):
        cur = l.split()[1]
        continue
    if l.startswith('|') and 'linstate' in l:
        f = [x.strip() for x in l.split('|')]
        rows.setdefault((f[1], f[2]), []).append((cur, float(f[7].split()[0])))
for (row, side), v in rows.items():
    b = [r for c, r in v if c == before]
    a = [r for c, r in v if c == after]
    seq = ' / '.join(f"{r:.2f}" for c, r in v)
    print(f"| {row}, {side.replace('linstate ', '')} | {seq} | {st.median(b):.2f} → {st.median(a):.2f} |")
