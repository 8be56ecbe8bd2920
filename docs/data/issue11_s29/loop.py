# The largest loop of one kernel in a cubin (its back edge's span) and its instruction mix:
#   python3 loop.py MANGLED_NAME A.cubin [B.cubin ...]   (ND: nvdisasm, from PyPI's nvidia-cuda-nvdisasm)
# With K a compile-time constant the scans' K-long loops unroll: the span is then one chunk's step (its few
# inner loops — the dO rows' copy, the record stores — counted once).
import re,sys,subprocess
import os
ND=os.environ.get('ND', 'nvdisasm')
def fn(cubin, name):
    t=subprocess.run([ND,'-c',cubin],capture_output=True,text=True).stdout
    i=t.index('.text.'+name+':')
    j=t.find('//--------------------- .text.',i)
    body=t[i:j if j>0 else None]
    ins=[]; labels={}
    for l in body.splitlines():
        m=re.match(r'^(\.L_x_\d+):',l.strip())
        if m: labels[m.group(1)]=len(ins); continue
        m=re.match(r'\s*/\*([0-9a-f]+)\*/\s*(.*?)\s*;',l)
        if m: ins.append(m.group(2).strip())
    return ins,labels
for cub in sys.argv[2:]:
    ins,labels=fn(cub,sys.argv[1])
    # back edges
    loops=[]
    for k,s in enumerate(ins):
        m=re.search(r'BRA\s+(?:`\()?(\.L_x_\d+)',s)
        if m and m.group(1) in labels and labels[m.group(1)]<=k: loops.append((k-labels[m.group(1)]+1,labels[m.group(1)],k))
    loops.sort(reverse=True)
    big=loops[0]
    seg=ins[big[1]:big[2]+1]
    def cnt(p): return sum(1 for s in seg if re.search(p,s))
    print(cub.split('/')[-1], 'total',len(ins),'outer loop',big[0],'inner loops',[(l[0]) for l in loops[1:6]],
          'HMMA',cnt(r'\bHMMA'),'LDSM',cnt(r'\bLDSM'),'LDGSTS',cnt(r'LDGSTS'),'BAR',cnt(r'\bBAR\.'),'STG',cnt(r'\bSTG'),'STS',cnt(r'\bSTS'),'LDS',cnt(r'\bLDS\b|\bLDS\.'),'IMAD/IADD',cnt(r'\bIMAD|\bIADD|\bLEA'))
