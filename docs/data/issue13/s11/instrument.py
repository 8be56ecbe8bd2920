#!/usr/bin/env python3
# docs/data/issue13/s11/instrument.py MODE OUT_DIR — copies include/ into OUT_DIR/include and inserts rdtsc timers into
# run_chunked_backward (chunked_backward.hpp) for prodprof.cpp: MODE products (each product / transpose call site), passes
# (the state recomputation and the reverse pass), staging (load_chunk in each pass, and Γ's rows inside it).
# Run from the repository root. The timers add into the globals prof_ticks[], named by prof_names[] (prof_n of them).
import re, shutil, sys, os
mode, out = sys.argv[1], sys.argv[2]
if os.path.exists(out + '/include'): shutil.rmtree(out + '/include')
shutil.copytree('include', out + '/include')
p = out + '/include/linstate/backend/cpu/chunked_backward.hpp'
s = open(p).read()
names = []
def timed(old, name):
    global s
    assert old in s, old[:60]
    i = len(names); names.append(name)
    s = s.replace(old, '{ const unsigned long long t0_ = __rdtsc(); ' + old + ' ::prof_ticks[' + str(i) + '] += __rdtsc() - t0_; }', 1)
if mode == 'products':
    out_lines = []
    for l in s.split('\n'):
        st = l.lstrip()
        m = re.match(r'(if \([^)]*\) )?(mul|tri|gemm::transpose)\(', st)
        if m and st.endswith(';') and 'auto mul' not in st and 'auto tri' not in st:
            i = len(names); names.append(st[:70].replace('"', "'"))
            out_lines.append(l[:len(l) - len(st)] + '{ const unsigned long long t0_ = __rdtsc(); ' + st + ' ::prof_ticks[' + str(i) + '] += __rdtsc() - t0_; }')
        else:
            out_lines.append(l)
    s = '\n'.join(out_lines)
elif mode == 'passes':
    names = ['forward pass', 'reverse pass']
    s = s.replace('  // ---- forward over chunks: H_0', '  const unsigned long long tf0_ = __rdtsc();\n  // ---- forward over chunks: H_0', 1)
    s = s.replace('  // ---- reverse over chunks ----', '  const unsigned long long tf1_ = __rdtsc(); ::prof_ticks[0] += tf1_ - tf0_;\n  // ---- reverse over chunks ----', 1)
    s = s.replace('  if (tg.dh0) Eigen::Map<RowMat>(tg.dh0, K, V) = Dm;\n', '  if (tg.dh0) Eigen::Map<RowMat>(tg.dh0, K, V) = Dm;\n  ::prof_ticks[1] += __rdtsc() - tf1_;\n', 1)
elif mode == 'staging':
    timed('load_chunk(c0, m, false, any_w, any_r);', 'fwd pass staging (k, v, g)')
    timed('load_chunk(c0, m, true, any_w, any_r);', 'reverse staging (k, v, g, q, dO)')
    names.append('  of which Γ rows (both passes)')
    i0 = s.index('      if constexpr (decays) {  // Γ: inclusive cumulative sum')
    s = s[:i0] + '      const unsigned long long tg0_ = __rdtsc();\n' + s[i0:]
    i1 = s.index('    if (!bwd || !any_r) return;')
    j = s.rindex('    }\n', 0, i1)  # the end of `if (any_w) {`
    s = s[:j] + '      ::prof_ticks[2] += __rdtsc() - tg0_;\n' + s[j:]
s = s.replace('namespace linstate::cpu_detail {', '#include <x86intrin.h>\ninline unsigned long long prof_ticks[64];\ninline const char* prof_names[] = {'
              + ','.join('"%s"' % x for x in names) + '};\ninline constexpr int prof_n = ' + str(len(names)) + ';\nnamespace linstate::cpu_detail {', 1)
open(p, 'w').write(s)
print(len(names), 'timers')
