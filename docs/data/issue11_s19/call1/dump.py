import csv,gzip,sys
f=sys.argv[1]; sec=int(sys.argv[2]); a=int(sys.argv[3]); b=int(sys.argv[4])
rows=list(csv.reader(gzip.open(f,'rt')))
ends=[i for i,r in enumerate(rows) if r and r[0]=='Kernel Name']+[len(rows)]
hdr=rows[ends[sec]+1]; data=[r for r in rows[ends[sec]+2:ends[sec+1]] if len(r)==len(hdr)]
ix={h:i for i,h in enumerate(hdr)}
for k in range(a,b):
    r=data[k]
    print(f"{k:5d} {r[ix['Instructions Executed']]:>9s} {r[ix['Warp Stall Sampling (All Samples)']]:>6s} {r[ix['Source']].strip()}")
