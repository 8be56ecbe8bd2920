#!/usr/bin/env python3
# Session 24: a host model of ldmatrix (.x4, .trans) and mma.m16n8k16 fragments (PTX ISA) that runs the
# addressing of split_mma (branch s24-prep-split) over random operands and compares with the matrix product.
# Usage: python3 docs/data/issue11_s24/sim_split_mma.py (needs numpy); prints the largest error per shape.
import numpy as np
rng = np.random.default_rng(1)

def ldsm_x4(mem, addrs, trans):
    # mem: 1-D array of 16-bit elements; addrs[l]: element index of row (l%8) of matrix l//8
    out = np.zeros((32, 4, 2))
    for j in range(4):
        rows = [mem[addrs[8*j + r]: addrs[8*j + r] + 8] for r in range(8)]
        M = np.array(rows)  # 8x8
        for t in range(32):
            if not trans:
                out[t, j] = M[t // 4, 2*(t % 4): 2*(t % 4) + 2]
            else:
                out[t, j] = [M[2*(t % 4), t // 4], M[2*(t % 4) + 1, t // 4]]
    return out

def mma(d, a, b):
    # d [32][4], a [32][4][2], b [32][2][2]; reconstruct A (16x16), B (16x8), D += A B
    A = np.zeros((16, 16)); B = np.zeros((16, 8)); D = np.zeros((16, 8))
    for l in range(32):
        g, t = l // 4, l % 4
        A[g, 2*t:2*t+2] = a[l, 0]; A[g+8, 2*t:2*t+2] = a[l, 1]; A[g, 2*t+8:2*t+10] = a[l, 2]; A[g+8, 2*t+8:2*t+10] = a[l, 3]
        B[2*t:2*t+2, g] = b[l, 0]; B[2*t+8:2*t+10, g] = b[l, 1]
        D[g, 2*t:2*t+2] = d[l, 0:2]; D[g+8, 2*t:2*t+2] = d[l, 2:4]
    D = D + A @ B
    out = np.zeros((32, 4))
    for l in range(32):
        g, t = l // 4, l % 4
        out[l, 0:2] = D[g, 2*t:2*t+2]; out[l, 2:4] = D[g+8, 2*t:2*t+2]
    return out

def split_mma(M, N, Kd, Amat, Bmat, b_rows_t, flags_c_lower, flags_a_lower):
    # operands stored as rows [hi(w) | lo(w)]; here hi = value, lo = 0 (addressing check only) but use lo = value*1e-3 to check lo offsets
    wa = Kd; lda = 2*Kd + 8
    memA = np.zeros(M * lda)
    for i in range(M):
        memA[i*lda: i*lda + wa] = Amat[i]; memA[i*lda + wa: i*lda + 2*wa] = Amat[i] * 1e-3
    if b_rows_t:
        wb = Kd; ldb = 2*Kd + 8; Bs = Bmat.T  # rows of B^T: [N][Kd]
        memB = np.zeros(N * ldb)
        for j in range(N):
            memB[j*ldb: j*ldb + wb] = Bs[j]; memB[j*ldb + wb: j*ldb + 2*wb] = Bs[j] * 1e-3
    else:
        wb = N; ldb = 2*N + 8
        memB = np.zeros(Kd * ldb)
        for k in range(Kd):
            memB[k*ldb: k*ldb + wb] = Bmat[k]; memB[k*ldb + wb: k*ldb + 2*wb] = Bmat[k] * 1e-3
    C = np.full((M, N), np.nan)
    tn = N // 16
    for tile in range((M // 16) * tn):
        i0, j0 = (tile // tn) * 16, (tile % tn) * 16
        if flags_c_lower and j0 > i0: continue
        ke = min(Kd, i0 + 16) if flags_a_lower else Kd
        d = [np.zeros((32, 4)), np.zeros((32, 4))]
        for k0 in range(0, ke, 16):
            a_at = [ (i0 + (l & 7) + 8*((l >> 3) & 1)) * lda + 8*(l >> 4) for l in range(32)]  # m = l>>3: m&1 -> +8 rows, m>>1 -> +8 cols
            if b_rows_t:
                b_at = [ (j0 + (l & 7) + 8*((l >> 3) >> 1)) * ldb + 8*((l >> 3) & 1) for l in range(32)]
                bh = ldsm_x4(memB, [x + k0 for x in b_at], False); bl = ldsm_x4(memB, [x + k0 + wb for x in b_at], False)
            else:
                b_at = [ ((l & 7) + 8*((l >> 3) & 1)) * ldb + j0 + 8*((l >> 3) >> 1) for l in range(32)]
                bh = ldsm_x4(memB, [x + k0*ldb for x in b_at], True); bl = ldsm_x4(memB, [x + k0*ldb + wb for x in b_at], True)
            ah = ldsm_x4(memA, [x + k0 for x in a_at], False); al = ldsm_x4(memA, [x + k0 + wa for x in a_at], False)
            for h in range(2):
                bhh = bh[:, 2*h:2*h+2]; blh = bl[:, 2*h:2*h+2]
                d[h] = mma(d[h], al, bhh); d[h] = mma(d[h], ah, blh); d[h] = mma(d[h], ah, bhh)
        for h in range(2):
            for l in range(32):
                g, t = l // 4, l % 4
                C[i0+g, j0+8*h+2*t: j0+8*h+2*t+2] = d[h][l, 0:2]; C[i0+g+8, j0+8*h+2*t: j0+8*h+2*t+2] = d[h][l, 2:4]
    return C

for (M, N, Kd, brt, cl, al) in [(64, 64, 128, True, True, False), (64, 128, 64, False, False, True), (64, 48, 64, False, False, True), (64, 64, 32, True, True, False)]:
    A = rng.standard_normal((M, Kd)); B = rng.standard_normal((Kd, N))
    if al: A = np.tril(A)  # A lower triangular (T)
    ref = (A + A*1e-3) @ B + A @ (B*1e-3)  # al*bh + ah*bl + ah*bh with lo = 1e-3 x
    C = split_mma(M, N, Kd, A, B, brt, cl, al)
    mask = np.ones((M, N), bool)
    if cl:
        for i0 in range(0, M, 16):
            for j0 in range(0, N, 16):
                if j0 > i0: mask[i0:i0+16, j0:j0+16] = False
    err = np.nanmax(np.abs(C - ref)[mask]); print(M, N, Kd, 'b_rows_t' if brt else 'b_trans', 'max err', err, 'nan in mask', np.isnan(C[mask]).any())
