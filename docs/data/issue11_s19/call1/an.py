import csv,gzip,sys,collections,re
f=sys.argv[1]
rows=list(csv.reader(gzip.open(f,'rt')))
ends=[i for i,r in enumerate(rows) if r and r[0]=='Kernel Name']+[len(rows)]
sec=int(sys.argv[2]) if len(sys.argv)>2 else 0
hdr=rows[ends[sec]+1]; data=[r for r in rows[ends[sec]+2:ends[sec+1]] if len(r)==len(hdr)]
ix={h:i for i,h in enumerate(hdr)}
def num(x):
    try: return float(x)
    except: return 0.0
tot_s=sum(num(r[ix['Warp Stall Sampling (All Samples)']]) for r in data)
tot_i=sum(num(r[ix['Instructions Executed']]) for r in data)
print(f, 'instrs', tot_i, 'samples', tot_s, 'n sass', len(data))
stalls=[h for h in hdr if h.startswith('stall_') and 'Not Issued' not in h]
agg={s:sum(num(r[ix[s]]) for r in data) for s in stalls}
print(' '.join(f"{k[6:]}={v/tot_s*100:.1f}%" for k,v in sorted(agg.items(),key=lambda x:-x[1]) if v/tot_s>0.01))
# opcode aggregation
op=collections.Counter(); ops=collections.Counter()
for r in data:
    s=r[ix['Source']].strip()
    s=re.sub(r'^@!?U?P\w+\s+','',s)
    o=s.split()[0] if s else '?'
    o=o.split('.')[0]
    op[o]+=num(r[ix['Instructions Executed']]); ops[o]+=num(r[ix['Warp Stall Sampling (All Samples)']])
print('opcode: instr% samples%')
for o,v in op.most_common(30): print(f"  {o:10s} {v/tot_i*100:5.1f} {ops[o]/tot_s*100:5.1f}")
