import sys, glob, re, statistics, os
d = sys.argv[1]
rows = {}
loads = []
for f in sorted(glob.glob(os.path.join(d, '*-*.txt'))):
    which = 'after' if f.endswith('after.txt') else 'before'
    for line in open(f):
        if line.startswith('# load average'): loads.append(line.split(':',1)[1].strip().split()[0])
        if not line.startswith('| ') or 'linstate' not in line: continue
        c = [x.strip() for x in line.strip().strip('|').split('|')]
        key = (c[0], c[1])
        cpu = float(c[6].split()[0]); wall = float(c[4].split()[0])
        rows.setdefault(key, {'before': [], 'after': [], 'bw': [], 'aw': []})
        rows[key][which].append(cpu)
        rows[key]['bw' if which == 'before' else 'aw'].append(wall)
print('loads (1-min avg at each run start/end):', ' '.join(loads))
print('| row | side | ggml/linstate CPU, before (rounds) | after (rounds) | after/before (medians) | wall after/before |')
print('|---|---|---|---|---|---|')
for (r, s), v in rows.items():
    b, a = v['before'], v['after']
    print(f"| {r} | {s} | {', '.join(f'{x:.2f}' for x in b)} | {', '.join(f'{x:.2f}' for x in a)} | {statistics.median(a)/statistics.median(b):.2f} | {statistics.median(v['aw'])/statistics.median(v['bw']):.2f} |")
