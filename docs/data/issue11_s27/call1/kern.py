# ncu_*.csv (--page raw, after bench_cuda's own lines): per kernel, the first instances' duration (µs),
# instructions (M), active warps (% of peak), registers: python3 kern.py ncu_b0.csv
import csv, sys
for f in sys.argv[1:]:
    lines = open(f).read().splitlines()
    at = next(i for i, l in enumerate(lines) if l.startswith('"ID"'))
    rows = list(csv.reader(lines[at:]))
    h = rows[0]
    col = {k: h.index(k) for k in ['Kernel Name', 'gpu__time_duration.sum', 'smsp__inst_executed.sum',
                                    'sm__warps_active.avg.pct_of_peak_sustained_active', 'launch__registers_per_thread']}
    print('==', f)
    for r in rows[2:]:
        name = r[col['Kernel Name']].split('(')[0].replace('void linstate::cuda_detail::', '')
        t = float(r[col['gpu__time_duration.sum']].replace(',', ''))
        inst = float(r[col['smsp__inst_executed.sum']].replace(',', '')) / 1e6
        print(f"{name[:48]:48s} {t/1000:9.1f} us {inst:8.1f} M  warps {r[col['sm__warps_active.avg.pct_of_peak_sustained_active']]:>6s} %  regs {r[col['launch__registers_per_thread']]}")
