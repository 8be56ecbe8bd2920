# kcount.py A.sass B.sass — per kernel (the .text sections of nvdisasm -c output), the static instruction count, generic
# loads (LD) and HMMA of two builds, for the kernels where they differ (session 30: WMMA against ldmatrix + mma.sync).
import re,sys,collections
def parse(fn):
    ks={}; cur=None
    for line in open(fn,errors='replace'):
        m=re.match(r'^\.text\.(\S+):',line)
        if m: cur=m.group(1); ks.setdefault(cur,collections.Counter()); continue
        if cur and re.match(r'^\s*/\*[0-9a-f]+\*/\s',line):
            m2=re.match(r'^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P[0-9T]\s+)?([A-Z0-9_]+)',line)
            if m2: ks[cur][m2.group(1)]+=1; ks[cur]['_all']+=1
    return ks
a=parse(sys.argv[1]); b=parse(sys.argv[2])
import subprocess
def dem(n):
    try: return subprocess.run(['c++filt',n],capture_output=True,text=True).stdout.strip()[:110]
    except: return n[:110]
rows=[]
for k in sorted(set(a)|set(b)):
    ca=a.get(k,collections.Counter()); cb=b.get(k,collections.Counter())
    if ca['_all']!=cb['_all'] or ca['LD']!=cb['LD']:
        rows.append((dem(k),ca['_all'],cb['_all'],ca['LD'],cb['LD'],ca['HMMA'],cb['HMMA']))
for r in rows: print("%s | %d -> %d | LD %d -> %d | HMMA %d -> %d"%r)
