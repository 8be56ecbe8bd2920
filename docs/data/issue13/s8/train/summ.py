import re,sys,statistics as st
# summarise train_profile outputs: per "== label" block, forward/backward CPU samples
for path in sys.argv[1:]:
    lab=None; res=[]
    for line in open(path):
        m=re.match(r'== (\S+)',line)
        if m: lab=m.group(1); continue
        m=re.match(r'(forward|backward)\b.*process CPU ([\d.]+) ms per call \(samples: ([\d. ]+)\)',line)
        if m:
            xs=[float(x) for x in m.group(3).split()]
            res.append((lab,m.group(1),xs))
    rows={}
    for lab,kind,xs in res:
        rows.setdefault(lab,{}).setdefault(kind,[]).extend(xs)
    print(path)
    for lab,d in rows.items():
        f=d.get('forward',[]); b=d.get('backward',[])
        print(f"  {lab:10s} fwd min {min(f):6.1f} med {st.median(f):6.1f} | bwd min {min(b):6.1f} med {st.median(b):6.1f} | bwd/fwd min {min(b)/min(f):.2f} med {st.median(b)/st.median(f):.2f}  (n={len(f)},{len(b)})")
