#!/usr/bin/env python3
"""What limits each kernel (issue 11, item 7), from call 2's ncu CSVs (`ncu --csv --page raw --metrics …`, the
metric list in call2/run.sh; one forward + backward call of each variant at T = 32768, bf16, B = 1, H = 8):

    python3 docs/data/issue11_s33/ncu_limits.py [--unique] docs/data/issue11_s33/call2 [ncu_gla_sse.csv ncu_gdn.csv]

(--unique: the first launch of each kernel and grid only, bench_cuda's own fill kernels left out.)

Per kernel launch: duration, grid, registers, achieved occupancy (warps active), issue slots busy, SM and memory
throughput (% of peak, ncu's speed-of-light), DRAM traffic and bandwidth, L2 hit rate, tensor pipe busy, the
largest stall reasons (warps stalled per issued instruction) and a one-word limiter:
  memory   — the busiest memory unit (ncu's compute-memory throughput: L1/shared, L2 or DRAM) ≥ 60 % of its peak;
  compute  — SM throughput ≥ 60 % of peak;
  grid     — fewer blocks than SMs (132): a sequential pass whose chunk-to-chunk latency sets the time;
  latency  — neither roof near: the stall named beside it (long_sb: global loads, barrier: __syncthreads,
             short_sb: shared memory / MUFU, wait: fixed-latency dependencies, mio: shared-memory queue).
"""
import csv, os, sys

args = sys.argv[1:]
unique = '--unique' in args
args = [a for a in args if a != '--unique']
d = args[0]
files = args[1:] or ['ncu_gla_sse.csv', 'ncu_gdn.csv']
seen = set()
SMS = 132
STALLS = {'long_scoreboard': 'long_sb', 'barrier': 'barrier', 'short_scoreboard': 'short_sb', 'wait': 'wait',
          'mio_throttle': 'mio', 'math_pipe_throttle': 'math'}


def num(s):
    try:
        return float(s.replace(',', ''))
    except (ValueError, AttributeError):
        return float('nan')


def grid_blocks(g):
    g = g.strip('() ').split(',')
    n = 1
    for x in g:
        n *= int(num(x))
    return n


print('| kernel | µs | grid | regs | warps active | issue busy | SM % | mem % | DRAM GB (GB/s) | L2 hit | tensor % | top stalls | limiter |')
print('|---|---|---|---|---|---|---|---|---|---|---|---|---|')
for f in files:
    p = os.path.join(d, f)
    if not os.path.exists(p):
        continue
    lines = [l for l in open(p) if l.startswith('"')]
    rows = list(csv.reader(lines))
    if len(rows) < 3:
        continue
    h = rows[0]
    col = {k: i for i, k in enumerate(h)}
    unit = rows[1]
    SCALE = {'byte': 1, 'Kbyte': 1e3, 'Mbyte': 1e6, 'Gbyte': 1e9, 'ns': 1, 'nsecond': 1, 'us': 1e3, 'usecond': 1e3,
             'ms': 1e6, 'msecond': 1e6}
    for r in rows[2:]:
        g = lambda k: r[col[k]] if k in col else ''
        scaled = lambda k: num(g(k)) * SCALE.get(unit[col[k]], 1) if k in col else float('nan')
        name = g('Kernel Name').split('(')[0].replace('void ', '')
        name = name.split('<')[0] + ('<' + name.split('<', 1)[1] if '<' in name else '')
        if unique:
            key = (name, g('launch__grid_size'))
            if key in seen or name.startswith('bench::'):
                continue
            seen.add(key)
        t_us = scaled('gpu__time_duration.sum') / 1e3  # ns
        blocks = grid_blocks(g('launch__grid_size')) if g('launch__grid_size').startswith('(') else int(num(g('launch__grid_size')))
        sm, mem = num(g('sm__throughput.avg.pct_of_peak_sustained_elapsed')), num(g('gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed'))
        dram = scaled('dram__bytes.sum')  # bytes
        stalls = []
        for k, short in STALLS.items():
            v = num(g(f'smsp__average_warps_issue_stalled_{k}_per_issue_active.ratio'))
            if v == v:
                stalls.append((v, short))
        stalls.sort(reverse=True)
        top = ', '.join(f'{s} {v:.2f}' for v, s in stalls[:2])
        if mem >= 60: lim = 'memory'
        elif sm >= 60: lim = 'compute'
        elif blocks < SMS: lim = 'grid'
        else: lim = 'latency (' + (stalls[0][1] if stalls else '?') + ')'
        dram_gb = dram / 1e9 if dram == dram else float('nan')
        print(f"| {name[:60]} | {t_us:.1f} | {blocks} | {g('launch__registers_per_thread')} | "
              f"{num(g('sm__warps_active.avg.pct_of_peak_sustained_active')):.1f} % | {num(g('smsp__issue_active.avg.pct_of_peak_sustained_active')):.1f} % | "
              f"{sm:.1f} | {mem:.1f} | {dram_gb:.3f} ({dram_gb / (t_us * 1e-6):.0f}) | {num(g('lts__t_sector_hit_rate.pct')):.1f} % | "
              f"{num(g('sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active')):.1f} | {top} | {lim} |")
