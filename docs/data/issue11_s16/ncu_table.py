#!/usr/bin/env python3
"""ncu speed-of-light tables (item 7) of session 16's call 3: one SSE n4k1s varlen train call and the delta
rule's kernels of one GDN train call at T = 32768, read with session 15's ncu_kernels / limiter
(docs/data/issue11_s15/report.py).
Usage: ncu_table.py docs/data/issue11_s16/call3"""
import importlib.util, os, sys

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location('report15', os.path.join(here, '..', 'issue11_s15', 'report.py'))
r15 = importlib.util.module_from_spec(spec)
spec.loader.exec_module(r15)


def table(label, path):
    ks = r15.ncu_kernels(path)
    if not ks:
        return
    print(f'\n**ncu, {label}**\n')
    print('| kernel | launches | longest µs | grid × block | regs | SM % | L1/shared % | L2 % | DRAM % | occupancy % | limited by |')
    print('|---|---|---|---|---|---|---|---|---|---|---|')
    for name, o in sorted(ks.items(), key=lambda kv: -(kv[1]['top']['us'] or 0)):
        d = o['top']
        f = r15.fmt
        print(f'| {name} | {o["n"]} | {f(d["us"], 1)} | {d["grid"]} × {d["block"]} | {f(d["regs"], 0)} | {f(d["sm"], 1)} | '
              f'{f(d["l1"], 1)} | {f(d["l2"], 1)} | {f(d["dram"], 1)} | {f(d["occ"], 1)} | {r15.limiter(d)} |')


if __name__ == '__main__':
    c = sys.argv[1]
    table('SSE n4k1s varlen, one train call at T = 32768 (s16-sse build)', os.path.join(c, 'ncu_sse.csv.gz'))
    table('GDN, the delta rule\'s kernels of one train call at T = 32768 (s16-sse build)', os.path.join(c, 'ncu_gdn.csv.gz'))
