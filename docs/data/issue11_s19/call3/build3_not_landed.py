p='/work/main/cuda/include/linstate/cuda/kernels/chunked_backward.cuh'
s=open(p).read()
# 1. dqk_warp_tiles: the off-diagonal sources from the pre-scaled tile Y
a=s.index("//! The intra-chunk part of the dq/dk kernels for bf16 inputs and gated_key decays, by warp tiles")
b=s.index("    if (!sl) {  // B's own rows, factorised at r0, split-bf16")
new='''//! The off-diagonal sources of dqk_warp_tiles, each scaled to a reference row of its own sub-chunk S and
//! rounded to bf16 once, so that every target sub-chunk reads the same operand by ldmatrix:
//!   dk (Dk): Y_t = r_t q_t ⊙ e^{Γ_t − Γ_{r0(S)}}   (r0(S): the first row of t's sub-chunk; t ≥ r0(S))
//!   dq:      Y_j = w_j k_j ⊙ e^{Γ_{e(S)} − Γ_j}     (e(S): the last row of j's sub-chunk; j ≤ e(S))
//! every factor ≤ 1; 0 beyond kn. Src, Y [C][lds] bf16 (16-byte rows), G [C][ldg] fp32 (16-byte rows);
//! threads `thread` = 0 … threads − 1 of the caller's group, eight keys each.
template <bool Dk, int C, int KT>
__device__ __forceinline__ void scaled_sources(__nv_bfloat16* Y, const __nv_bfloat16* Src, int lds, const float* G, int ldg,
                                               const chunk_record* recs, int kn, int thread, int threads) {
  static_assert(KT % 8 == 0, "scaled_sources: eight keys per thread");
  for (int e = thread; e < C * KT / 8; e += threads) {
    const int i = e / (KT / 8), a0 = (e % (KT / 8)) * 8, ref = Dk ? (i & ~15) : (i | 15);
    const float s = Dk ? recs[i].r : recs[i].w;
    const uint4 raw = *reinterpret_cast<const uint4*>(Src + i * lds + a0);
    const __nv_bfloat162* x2 = reinterpret_cast<const __nv_bfloat162*>(&raw);
    uint4 out;
    unsigned* o2 = reinterpret_cast<unsigned*>(&out);
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const float2 x = __bfloat1622float2(x2[u]);
      const float2 gi = *reinterpret_cast<const float2*>(G + i * ldg + a0 + 2 * u);
      const float2 gr = *reinterpret_cast<const float2*>(G + ref * ldg + a0 + 2 * u);
      const float y0 = a0 + 2 * u < kn ? x.x * s * __expf(Dk ? gi.x - gr.x : gr.x - gi.x) : 0.f;
      const float y1 = a0 + 2 * u + 1 < kn ? x.y * s * __expf(Dk ? gi.y - gr.y : gr.y - gi.y) : 0.f;
      const __nv_bfloat162 h = __floats2bfloat162_rn(y0, y1);
      o2[u] = *reinterpret_cast<const unsigned*>(&h);
    }
    *reinterpret_cast<uint4*>(Y + i * lds + a0) = out;
  }
}

//! The intra-chunk part of the dq/dk kernels for bf16 inputs and gated_key decays, by warp tiles
//! (as the forward's warp_intra_tiles): warps warp0, warp0 + nwarps, … of the caller's group take
//! output tiles (B, A) of R — 16 rows of sub-chunk B, 16 keys of the tile from A·16 — with mma.sync
//! m16n8k16, without barriers between tiles:
//!   dk role (Dk): R_j += Σ_{t ≥ j} dA_tj r_t q_t ⊙ e^{Γ_t − Γ_j}   — rows j of B; the later sub-chunks S
//!     as dAᵀ · Y_S (scaled_sources: Y_t = r_t q_t ⊙ e^{Γ_t − Γ_{r0(S)}}), each product times the key's
//!     e^{Γ_{r0(S)} − Γ_rr} (rr = last row of B), and the sum times e^{Γ_rr − Γ_j}: three factors ≤ 1;
//!     B itself factorised at its first row r0;
//!   dq role: R_t += Σ_{j ≤ t} dA_tj w_j k_j ⊙ e^{Γ_t − Γ_j}   — rows t of B; the earlier sub-chunks S as
//!     dA · Y_S (Y_j = w_j k_j ⊙ e^{Γ_{e(S)} − Γ_j}), times e^{Γ_rr − Γ_{e(S)}} (rr = r0 = first row of
//!     B), the sum times e^{Γ_t − Γ_rr}; B itself factorised at r0.
//! dA and Y reach the fragments by ldmatrix (dA transposed for dk). Y is each source row rounded to bf16
//! once, as before session 19, when every target sub-chunk formed its own copy of the source scaled to
//! its own reference row, element by element (a fifth of the kernel's instructions).
//! The factorised diagonal (B's own rows, Γ spanning at most diag_span) takes the source in fp32, split
//! into bf16 halves (dA is exact in bf16): two products, each term within about 1e-5 of fp32; beyond
//! diag_span (slow[B]) every pair is formed in fp32. dA is 0 above its diagonal, so the diagonal
//! products need no mask. Adds to R only for keys < kn, and the diagonal only for rows that write (dk) /
//! read (dq), as the staged form does.
template <bool Dk>
__device__ __forceinline__ void dqk_warp_tiles(float* R, int ldr, const __nv_bfloat16* dAs, int lda, const __nv_bfloat16* Src,
                                               const __nv_bfloat16* Y, int lds, const float* G, int ldg, const chunk_record* recs,
                                               const int* slow, int kn, int warp0, int nwarps) {
  using x3_detail::mma_bf16_16816;
  using x3_detail::split2;
  constexpr int C = chunk_len, subs = C / 16, KT = bwd_kt, at = KT / 16;
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, g = lane >> 2, t2 = (lane & 3) * 2, l8 = lane & 7, mi = lane >> 3;
  auto dab = [&](int t, int j) { return dAs[t * lda + j]; };
  // the source row's scale: r_t (dk: q rows) or w_j (dq: k rows)
  auto scale = [&](int i) { return Dk ? recs[i].r : recs[i].w; };
  for (int task = warp0; task < subs * at; task += nwarps) {
    const int B = task / at, a0 = (task % at) * 16;
    const int r0 = 16 * B, rr = Dk ? r0 + 15 : r0;  // the reference row of the off-diagonal sums
    // A fragment of dA for target rows m of B and source rows k of sub-chunk S: dk: (m = j, k = t) = dA[t][j]
    // (ldmatrix.trans of rows t); dq: (m = t, k = j) = dA[t][j]
    auto afrag = [&](int S, unsigned (&af)[4]) {
      if (Dk) ldsm_x4_trans(af, dAs + (16 * S + l8 + 8 * (mi >> 1)) * lda + r0 + 8 * (mi & 1));
      else ldsm_x4(af, dAs + (r0 + (lane & 15)) * lda + 16 * S + 8 * (lane >> 4));
    };
    float off[2][4] = {}, dg[2][4] = {};
    const bool sl = slow[B] != 0;
    float grr[2][2];  // Γ_rr of the lane's keys a0 + 8h + t2 + u
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int u = 0; u < 2; ++u) grr[h][u] = G[rr * ldg + a0 + 8 * h + t2 + u];
    // off-diagonal sources: dk — the sub-chunks after B; dq — those before
    for (int S = Dk ? B + 1 : 0; S < (Dk ? subs : B); ++S) {
      unsigned af[4], bq[4];
      afrag(S, af);
      ldsm_x4_trans(bq, Y + (16 * S + l8 + 8 * (mi & 1)) * lds + a0 + 8 * (mi >> 1));  // Y_S rows, keys a0 …
      float d[2][4] = {};
      const unsigned b0[2] = {bq[0], bq[1]}, b1[2] = {bq[2], bq[3]};
      mma_bf16_16816(d[0], af, b0);
      mma_bf16_16816(d[1], af, b1);
      const int ref = Dk ? 16 * S : 16 * S + 15;  // Y_S's reference row
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int u = 0; u < 2; ++u) {
          const float gs = G[ref * ldg + a0 + 8 * h + t2 + u];
          const float f = __expf(Dk ? gs - grr[h][u] : grr[h][u] - gs);
          off[h][u] = fmaf(f, d[h][u], off[h][u]);
          off[h][u + 2] = fmaf(f, d[h][u + 2], off[h][u + 2]);
        }
    }
    // B-fragment values of B's own rows for 8-column half h (rows k = t2, t2 + 1, t2 + 8, t2 + 9 of B, key
    // a0 + 8h + g): the source row scaled by r / w and by its decay to r0 (accurate expf)
    auto source = [&](int h, float (&y)[4]) {
      const int a = a0 + 8 * h + g;
      const float gref = G[r0 * ldg + a];
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int i = r0 + t2 + (q & 1) + 8 * (q >> 1);
        const float x = Dk ? G[i * ldg + a] - gref : gref - G[i * ldg + a];
        y[q] = to_f32(Src[i * lds + a]) * scale(i) * expf(x);
      }
    };
'''
s=s[:a]+new+s[b:]
s=s.replace('''        float y[4];
        source(B, r0, h, true, y);''','''        float y[4];
        source(h, y);''')
# the epilogue's grr now comes from above
old_ep=s[s.index("    // epilogue: rows m = r0 + g (+8), keys a = a0 + 8h + t2 + u. One accurate exponential per element:"):s.index("#pragma unroll\n    for (int h = 0; h < 2; ++h)\n#pragma unroll\n      for (int q = 0; q < 4; ++q) {\n        const int m = r0 + g + 8 * (q >> 1), u = q & 1")]
new_ep='''    // epilogue: rows m = r0 + g (+8), keys a = a0 + 8h + t2 + u. One accurate exponential per element:
    // e = e^{Γ_rr − Γ_m} (dk) / e^{Γ_m − Γ_r0} (dq; rr = r0) scales the off-diagonal sum and, times the
    // key's e^{Γ_r0 − Γ_rr} for dk (once per task), the factorised diagonal's
    float e0[2][2];
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int u = 0; u < 2; ++u) e0[h][u] = Dk && !sl ? expf(G[r0 * ldg + a0 + 8 * h + t2 + u] - grr[h][u]) : 1.f;
'''
s=s.replace(old_ep,new_ep)
# 2. the callers in chunk_bwd_dqkg_kernel
s=s.replace('''    named_barrier(1, role_threads);  // c_n's partial sums have read R_k
    dqk_warp_tiles<true>(Rk, ldr, dAs, lda, Qs, ldk, G, KT, recs, slow, kn, rw, 8);''','''    scaled_sources<true, C, KT>(Yq, Qs, ldk, G, KT, recs, kn, rt, role_threads);
    named_barrier(1, role_threads);  // c_n's partial sums have read R_k; Y_q complete
    dqk_warp_tiles<true>(Rk, ldr, dAs, lda, Qs, Yq, ldk, G, KT, recs, slow, kn, rw, 8);''')
s=s.replace('''  } else {
    dqk_warp_tiles<false>(Rq, ldr, dAs, lda, Ks, ldk, G, KT, recs, slow, kn, rw, 8);''','''  } else {
    scaled_sources<false, C, KT>(Yk, Ks, ldk, G, KT, recs, kn, rt, role_threads);
    named_barrier(2, role_threads);  // Y_k complete
    dqk_warp_tiles<false>(Rq, ldr, dAs, lda, Ks, Yk, ldk, G, KT, recs, slow, kn, rw, 8);''')
s=s.replace('''  float* Rq = reinterpret_cast<float*>(smem_raw + lay.Rq);  // dq̂ [C][ldr]
''','''  float* Rq = reinterpret_cast<float*>(smem_raw + lay.Rq);  // dq̂ [C][ldr]
  Op* Yq = reinterpret_cast<Op*>(smem_raw + lay.Yq);      // scaled_sources of the q rows (dk role), [C][ldk]
  Op* Yk = reinterpret_cast<Op*>(smem_raw + lay.Yk);      // scaled_sources of the k rows (dq role), [C][ldk]
''')
s=s.replace('''  std::size_t recs, G, Qs, Ks, dA, Vr, Or, Ds, Hs, Rk, Rq, gsum, dgo, cn, cpart, bytes;''','''  std::size_t recs, G, Qs, Ks, dA, Vr, Or, Ds, Hs, Rk, Rq, Yq, Yk, gsum, dgo, cn, cpart, bytes;''')
s=s.replace('''    gsum = Rq + static_cast<std::size_t>(C) * ldr * sizeof(float);  // step 4's group sums
''','''    Yq = Rq + static_cast<std::size_t>(C) * ldr * sizeof(float);  // step 3's off-diagonal sources
    Yk = Yq + static_cast<std::size_t>(C) * ldk * sizeof(Op);
    gsum = Yq;  // step 4's group sums (Y_q and Y_k are dead by then)
''')
s=s.replace('''  static_assert((2 * C * ldr + L::dg_groups * KT) * sizeof(float) + C * sizeof(index_t) <= (2 * C + 2 * KT) * VP * sizeof(Op),
                "chunk_bwd_dqkg_kernel: R_k, R_q and step 4's group sums and offsets fit in the staged tiles");''','''  static_assert((2 * C * ldr + L::dg_groups * KT) * sizeof(float) + C * sizeof(index_t) <= (2 * C + 2 * KT) * VP * sizeof(Op),
                "chunk_bwd_dqkg_kernel: R_k, R_q and step 4's group sums and offsets fit in the staged tiles");
  static_assert(2 * C * ldr * sizeof(float) + 2 * C * ldk * sizeof(Op) <= (2 * C + 2 * KT) * VP * sizeof(Op),
                "chunk_bwd_dqkg_kernel: R_k, R_q, Y_q and Y_k fit in the staged tiles");''')
open(p,'w').write(s)
s=open(p).read()
old1='''    if constexpr (decay_key<D> && std::is_same_v<Dev, __nv_bfloat16>) {
      __syncthreads();  // c_n's partial sums have read R
      dqk_warp_tiles<true>(R, ldr, dAs, lda, Qs, ldk, G, KT, recs, slow, kn, tid >> 5, nt >> 5);
      __syncthreads();
    } else if constexpr (decay_key<D>) {'''
old2='''    if constexpr (decay_key<D> && std::is_same_v<Dev, __nv_bfloat16>) {
      __syncthreads();  // R scaled
      dqk_warp_tiles<false>(R, ldr, dAs, lda, Ks, ldk, G, KT, recs, slow, kn, tid >> 5, nt >> 5);
      __syncthreads();
    } else if constexpr (decay_key<D>) {'''
assert old1 in s and old2 in s
s=s.replace(old1,'''    if constexpr (decay_key<D>) {''').replace(old2,'''    if constexpr (decay_key<D>) {''')
old3='''  static_assert(dqk_threads % KT == 0 && C % parts == 0, "chunk_bwd_dqk_kernel: c_n's partial sums");'''
assert old3 in s
s=s.replace(old3, old3+'''
  static_assert(!(decay_key<D> && std::is_same_v<Dev, __nv_bfloat16>),
                "chunk_bwd_dqk_kernel: bf16 inputs with per-key decays take chunk_bwd_dqkg_kernel (dqkg_fused)");''')
open(p,'w').write(s)
