import csv,gzip,sys,re
f=sys.argv[1]; sec=int(sys.argv[2]) if len(sys.argv)>2 else 0
rows=list(csv.reader(gzip.open(f,'rt')))
ends=[i for i,r in enumerate(rows) if r and r[0]=='Kernel Name']+[len(rows)]
hdr=rows[ends[sec]+1]; data=[r for r in rows[ends[sec]+2:ends[sec+1]] if len(r)==len(hdr)]
ix={h:i for i,h in enumerate(hdr)}
n=lambda x: float(x) if x not in ('','-') else 0.0
I=[n(r[ix['Instructions Executed']]) for r in data]; S=[n(r[ix['Warp Stall Sampling (All Samples)']]) for r in data]
src=[r[ix['Source']].strip() for r in data]
W=int(sys.argv[3]) if len(sys.argv)>3 else 100
tot=sum(I); ts=sum(S)
# windows of W instructions
out=[]
for a in range(0,len(data),W):
    i=sum(I[a:a+W]); s=sum(S[a:a+W])
    tags=set()
    for x in src[a:a+W]:
        for t in ('HMMA','LDSM','MUFU','BAR','LDGSTS','LDG','STG','SHFL','STS','DEPBAR','BRA','RET','EXIT','ATOMS','WARPSYNC','VOTE','F2FP'):
            if x.split()[0:2] and (t in x.split()[0] or (len(x.split())>1 and x.split()[0].startswith('@') and t in x.split()[1])): tags.add(t)
    out.append((a,i,s,tags))
for a,i,s,tags in out:
    if i/tot>0.01 or s/ts>0.01: print(f"{a:5d}-{a+W-1:5d} instr {i/tot*100:5.1f}% samp {s/ts*100:5.1f}%  per-warp {i/ (8192*16):7.1f}  {' '.join(sorted(tags))}")
