# Medians (ms) by (suite, variant, T) from bench_cuda CSVs, one column per file: python3 tab.py a.csv b.csv ...
import csv,sys,glob,os
def load(f):
    d={}
    for r in csv.DictReader(l for l in open(f) if not l.startswith('#')):
        d[(r['suite'],r['variant'],int(r['T']))]=float(r['median_ms'])
    return d
files=sys.argv[1:]
D={os.path.basename(f)[:-4]:load(f) for f in files}
keys=sorted(set().union(*[d.keys() for d in D.values()]))
print('%-40s'%'row'+''.join('%12s'%n for n in D))
for k in keys:
    print('%-40s'%(' '.join(map(str,k)))+''.join('%12.3f'%D[n][k] if k in D[n] else '%12s'%'-' for n in D))
