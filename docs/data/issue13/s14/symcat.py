import subprocess,sys,collections,re
for o in sys.argv[1:]:
    out=subprocess.run(['nm','-S','-C','--defined-only',o],capture_output=True,text=True).stdout
    a=collections.Counter()
    for line in out.splitlines():
        p=line.split(' ',3)
        if len(p)<4 or p[2] not in 'TtWw': continue
        sz=int(p[1],16); n=p[3]
        # strip return type: find first 'linstate::' or 'Eigen::' or 'doctest' position at top-level name start
        m=re.match(r'^(?:[\w:<>,\s\*&]+?\s)?((?:\(anonymous namespace\)|linstate|Eigen|doctest|std)\b[^\(<]*)',n)
        head=m.group(1) if m else n[:40]
        parts=head.split('::')
        key='::'.join(parts[:3])
        anon='(anonymous' in n
        a[(key, p[2], anon)]+=sz
    tot=sum(a.values())
    print("==",o,f"{tot/1e6:.2f}MB")
    for (k,t,an),v in a.most_common(15): print(f"{v/1e6:7.2f}MB {t} anon-type-involved={an} {k}")
