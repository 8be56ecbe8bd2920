import sys,re,statistics as st,collections
# medians over rounds of forward / backward process CPU per call and of each backward phase, per binary and thread count
d=collections.defaultdict(lambda: collections.defaultdict(list))
cur=None;thr=None;sec=None
for l in open(sys.argv[1]):
    m=re.match(r'## (\S+) round',l)
    if m: cur=m.group(1); continue
    m=re.search(r'threads = (\d+)',l)
    if m: thr=m.group(1); continue
    m=re.match(r'(forward|backward)(?! \+)\b.*?process CPU ([\d.]+) ms',l)
    if m: sec=m.group(1); d[(cur,thr)][sec].append(float(m.group(2))); continue
    m=re.match(r'\s+\| (.+?) \| ([\d.]+) ms',l)
    if m and sec: d[(cur,thr)][sec+':'+m.group(1)].append(float(m.group(2)))
keys=sorted(d)
for k in keys:
    f=st.median(d[k]['forward']); b=st.median(d[k]['backward'])
    print(f"{k[0]} threads={k[1]} n={len(d[k]['forward'])}: forward {f:.1f} ms, backward {b:.1f} ms, b/f {b/f:.2f} (per-round b/f: {' '.join('%.2f'%(x/y) for x,y in zip(d[k]['backward'],d[k]['forward']))})")
    print('   backward phases: '+', '.join(f"{p.split(':')[1]} {st.median(v):.1f}" for p,v in d[k].items() if p.startswith('backward:')))
    print('   forward phases: '+', '.join(f"{p.split(':')[1]} {st.median(v):.1f}" for p,v in d[k].items() if p.startswith('forward:')))
