p='/work/main/cuda/include/linstate/cuda/kernels/chunked_backward.cuh'
s=open(p).read()
def rep(old,new,cnt=1):
    global s
    assert s.count(old)==cnt, (s.count(old), old[:80])
    s=s.replace(old,new)
# --- dqk_warp_tiles: two tasks per warp (unrolled), the inter part as the initial value, R stored once
rep('''template <bool Dk>
__device__ __forceinline__ void dqk_warp_tiles(float* R, int ldr, const __nv_bfloat16* dAs, int lda, const __nv_bfloat16* Src,
                                               int lds, const float* G, int ldg, const chunk_record* recs, const int* slow,
                                               int kn, int warp0, int nwarps) {
  using x3_detail::mma_bf16_16816;
  using x3_detail::split2;
  constexpr int C = chunk_len, subs = C / 16, KT = bwd_kt, at = KT / 16;
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, g = lane >> 2, t2 = (lane & 3) * 2;''','''template <bool Dk>
__device__ __forceinline__ void dqk_warp_tiles(float* R, int ldr, const float (&init)[2][2][4], const __nv_bfloat16* dAs, int lda,
                                               const __nv_bfloat16* Src, int lds, const float* G, int ldg, const chunk_record* recs,
                                               const int* slow, int kn, int warp0) {
  using x3_detail::mma_bf16_16816;
  using x3_detail::split2;
  constexpr int C = chunk_len, subs = C / 16, KT = bwd_kt, at = KT / 16, nwarps = 8;
  static_assert(subs * at == 2 * nwarps, "dqk_warp_tiles: two tasks per warp");
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, g = lane >> 2, t2 = (lane & 3) * 2;''')
rep('''  for (int task = warp0; task < subs * at; task += nwarps) {
    const int B = task / at, a0 = (task % at) * 16;''','''#pragma unroll
  for (int T = 0; T < 2; ++T) {
    const int task = warp0 + T * nwarps, B = task / at, a0 = (task % at) * 16;''')
rep('''        const int m = r0 + g + 8 * (q >> 1), u = q & 1, a = a0 + 8 * h + t2 + u;
        if (a >= kn) continue;
        const float gm = G[m * ldg + a];''','''        const int m = r0 + g + 8 * (q >> 1), u = q & 1, a = a0 + 8 * h + t2 + u;
        if (a >= kn) {
          R[m * ldr + a] = init[T][h][q];  // (0: the inter part is 0 past kn)
          continue;
        }
        const float gm = G[m * ldg + a];''')
rep('''        R[m * ldr + a] += add;
      }
  }
}''','''        R[m * ldr + a] = init[T][h][q] + add;
      }
  }
}''')
# the doc comment
rep('''//! The intra-chunk part of the dq/dk kernels for bf16 inputs and gated_key decays, by warp tiles
//! (as the forward's warp_intra_tiles): warps warp0, warp0 + nwarps, … of the caller's group take
//! output tiles (B, A) of R — 16 rows of sub-chunk B,
//! 16 keys of the tile from A·16 — and forms its mma.sync m16n8k16 fragments in registers from dA, the
//! staged raw rows and Γ, without barriers between tiles:''','''//! The intra-chunk part of chunk_bwd_dqkg_kernel's roles (bf16 inputs, gated_key decays), by warp tiles
//! (as the forward's warp_intra_tiles): warp warp0 (0 … 7) of the role takes output tiles (B, A) = tasks
//! warp0 and warp0 + 8 of R — 16 rows of sub-chunk B, 16 keys of the tile from A·16: the tiles of the
//! role's inter product in the same warp — forms its mma.sync m16n8k16 fragments in registers from dA,
//! the staged raw rows and Γ, without barriers between tiles, and stores R = init + the intra sums
//! (init[T]: the warp's inter-product fragments for task T, already scaled and masked; one store per
//! element, no read of R):''')
# --- the kernel: inter part kept in registers
old=s[s.index("  {  // dk̃^inter = e^{γ−Γ_j} ⊙ (D_c v_j) on the writing rows; dq̂^inter"):s.index("  if (!want_dg) return;  // uniform over the block")]
new='''  // dk̃^inter = e^{γ−Γ_j} ⊙ (D_c v_j) on the writing rows; dq̂^inter = e^{Γ_t} ⊙ (H_c dO_t) on the reading rows,
  // kept in registers: dqk_warp_tiles gives this warp the same tiles, adds the intra sums and stores R once
  // (one branch per role around the unrolled loops, γ of the lane's four keys read once)
  auto scaled = [&](auto&& row_ok, auto&& factor) {
#pragma unroll
    for (int T = 0; T < 2; ++T)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh)
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const int m = 16 * rb[T] + g8 + 8 * (q >> 1), a = a0 + 8 * hh + t2 + (q & 1);
          acc[T][hh][q] = row_ok(m) && a < kn ? acc[T][hh][q] * factor(m, a, hh * 2 + (q & 1)) : 0.f;
        }
  };
  auto kf = [&](int j, int a) { return to_f32(Ks[j * ldk + a]); };
  // R's rows out (write_key_rows) and ⟨x_i, R_i⟩ into dotbuf's slot `which` (x = the staged raw k or q rows)
  auto write_rows = [&](const float* R, const Op* X, bool vec, int which, auto&& row_of) {
    float* dots = p.dotbuf ? p.dotbuf + (ch * (KP / KT) + kt) * C * 2 + which : nullptr;
    write_key_rows<C, KT>(R, ldr, X, ldk, kn, vec, dots, rt, role_threads, row_of);
  };
  // 3. each role as chunk_bwd_dqk_kernel's: R's rows out, s · R and ⟨x_i, R_i⟩ (16 threads per row)
  if (role == 0) {
    float gl[4];  // γ = Γ_{C−1} of keys a0 + 8hh + t2 + u
#pragma unroll
    for (int i = 0; i < 4; ++i) gl[i] = G[(C - 1) * KT + a0 + 8 * (i >> 1) + t2 + (i & 1)];
    scaled([&](int m) { return recs[m].wr; }, [&](int m, int a, int i) { return exp_nonpos(gl[i] - G[m * KT + a]); });
    {  // Σ_j k̃_j ⊙ dk̃_j^inter over the warp's 32 rows for its 16 keys (lanes of one t2 summed over g), one
       // partial per key and row-block pair (rw >> 2: blocks 0, 2 or 1, 3)
      float cs[2][2] = {};
#pragma unroll
      for (int T = 0; T < 2; ++T)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh)
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            const int m = 16 * rb[T] + g8 + 8 * (q >> 1), a = a0 + 8 * hh + t2 + (q & 1);
            cs[hh][q & 1] = fmaf(kf(m, a) * recs[m].w, acc[T][hh][q], cs[hh][q & 1]);
          }
#pragma unroll
      for (int hh = 0; hh < 2; ++hh)
#pragma unroll
        for (int u = 0; u < 2; ++u) {
          float v = cs[hh][u];
#pragma unroll
          for (int o = 4; o < 32; o <<= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
          if (g8 == 0) cpart[(rw >> 2) * KT + a0 + 8 * hh + t2 + u] = v;
        }
    }
    dqk_warp_tiles<true>(Rk, ldr, acc, dAs, lda, Qs, ldk, G, KT, recs, slow, kn, rw);
    named_barrier(1, role_threads);  // R_k and c_n's partial sums complete
    if (rt < KT) {
      const int a = rt;
      const float inter = cpart[a] + cpart[KT + a];
      cn[a] = a < kn ? cn[a] * __expf(G[(C - 1) * KT + a]) + inter : 0.f;
    }
'''
tail_start=s.index("    if (Sided ? (p.dk_out || p.dk_out0) : p.dk_out != nullptr) {  // dk = w dk̃ straight into")
s=s[:s.index("  {  // dk̃^inter = e^{γ−Γ_j} ⊙ (D_c v_j) on the writing rows; dq̂^inter")]+new+s[tail_start:]
rep('''  } else {
    dqk_warp_tiles<false>(Rq, ldr, dAs, lda, Ks, ldk, G, KT, recs, slow, kn, rw, 8);
    named_barrier(2, role_threads);''','''  } else {
    scaled([&](int m) { return recs[m].rd; }, [&](int m, int a, int) { return exp_nonpos(G[m * KT + a]); });
    dqk_warp_tiles<false>(Rq, ldr, acc, dAs, lda, Ks, ldk, G, KT, recs, slow, kn, rw);
    named_barrier(2, role_threads);  // R_q complete''')
# parts: now 2 (row-block pairs)
rep('''  static constexpr int ldk = KT + 8, lda = C + 8, ldr = KT + 4, parts = (dqkg_threads / 2) / KT;''','''  static constexpr int ldk = KT + 8, lda = C + 8, ldr = KT + 4, parts = 2;  // c_n's partial sums: one per row-block pair''')
# chunk_bwd_dqk_kernel: the dead bf16 gated_key branches
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
rep(old1,'''    if constexpr (decay_key<D>) {''')
rep(old2,'''    if constexpr (decay_key<D>) {''')
old3='''  static_assert(dqk_threads % KT == 0 && C % parts == 0, "chunk_bwd_dqk_kernel: c_n's partial sums");'''
rep(old3, old3+'''
  static_assert(!(decay_key<D> && std::is_same_v<Dev, __nv_bfloat16>),
                "chunk_bwd_dqk_kernel: bf16 inputs with per-key decays take chunk_bwd_dqkg_kernel (dqkg_fused)");''')
rep('''//     blocks (factorised where the tile's Γ spans at most diag_span) — for gated_key by warp tiles
//     (dqk_warp_tiles: fragments formed in registers, the factorised diagonal in split-bf16); the router weights' dot products
//     ⟨k_j, dk̃_j⟩, ⟨q_t, dq̂_t⟩ per key tile into dotbuf, summed by chunk_dg_kernel in tile order.''','''//     blocks (factorised where the tile's Γ spans at most diag_span); the router weights' dot products
//     ⟨k_j, dk̃_j⟩, ⟨q_t, dq̂_t⟩ per key tile into dotbuf, summed by chunk_dg_kernel in tile order.
//     (Per-key decays take chunk_bwd_dqkg_kernel, 4d, instead of 4a, 4c and 5: dqkg_fused.)''')
open(p,'w').write(s)
print("patched")
