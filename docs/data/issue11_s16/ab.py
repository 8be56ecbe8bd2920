#!/usr/bin/env python3
"""A/B of bench_cuda text outputs: ab.py DIR PREFIX — reads DIR/PREFIX_A1.txt, _A2, _N1, _N2 and prints each
row's medians (µs) and the ratio N/A of the means of the two runs."""
import statistics as st, sys


def load(f):
    d = {}
    for l in open(f):
        x = l.split()
        if len(x) < 11 or x[0] not in ('prefill', 'train', 'decode', 'copy'):
            continue
        try:
            v = float(x[8])
        except ValueError:
            continue
        d[(x[0], x[1], x[4], x[5], x[6])] = v * 1000 if x[9] == 'ms' else v
    return d


def main(dirn, prefix):
    A = [load(f'{dirn}/{prefix}_A{i}.txt') for i in (1, 2)]
    N = [load(f'{dirn}/{prefix}_N{i}.txt') for i in (1, 2)]
    print('| suite | variant | mode | B | T | A (µs), two runs | N (µs), two runs | N ÷ A |')
    print('|---|---|---|---|---|---|---|---|')
    for k in A[0]:
        if all(k in z for z in A + N):
            a = [z[k] for z in A]
            n = [z[k] for z in N]
            print(f'| {" | ".join(k)} | {" / ".join(f"{x:.2f}" for x in a)} | {" / ".join(f"{x:.2f}" for x in n)} | '
                  f'{st.mean(n) / st.mean(a):.3f} |')


if __name__ == '__main__':
    main(sys.argv[1], sys.argv[2])
