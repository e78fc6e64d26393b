/* Single-precision GEMM for the migc CPU runtime (see mg_runtime.h for the
 * contract). Plain C99; the AVX2+FMA micro-kernel is compiled only when the
 * compiler targets it (-mavx2 -mfma), so the file builds for any target.
 *
 * Structure (the Goto/BLIS algorithm):
 *   for jc over N in NC columns             B block lives in L3
 *     for pc over K in KC                   pack B[pc.., jc..] into NR-wide panels
 *       for ic over M in MC rows            pack A[ic.., pc..] into MR-tall panels (L2)
 *         for jr over the block in NR       one B micro-panel stays in L1
 *           for ir over the block in MR     micro-kernel: MR x NR tile in registers
 * Packing copies op(A) and op(B) into contiguous, zero-padded panels, so the
 * micro-kernel never sees a transpose, a leading dimension or an edge: edges are
 * computed in full on the zero padding and only the valid part is written. */
#include "mg_runtime.h"

#include <stdint.h>
#include <string.h>

#if defined(__AVX2__) && defined(__FMA__) && !defined(MG_RUNTIME_PORTABLE)
#define MG_SGEMM_AVX2 1
#include <immintrin.h>
#elif (defined(__x86_64__) || defined(_M_X64)) && !defined(MG_RUNTIME_PORTABLE)
/* SSE2 is part of x86-64 itself, so this needs no flag: it is what a plain
 * `cc -O2` build gets. Intrinsics, because the C kernel's speed there depends on
 * how each compiler allocates 16 registers (see the portable kernels). */
#define MG_SGEMM_SSE 1
#include <emmintrin.h>
#elif defined(__aarch64__) && !defined(MG_RUNTIME_PORTABLE)
/* NEON (Advanced SIMD) is part of AArch64, so this needs no flag either. */
#define MG_SGEMM_NEON 1
#include <arm_neon.h>
#endif

/* Micro-tile and cache blocks. MR x NR is what fits the register file: 6x16 is 12
 * ymm accumulators + 2 for B + 1 for A of the 16 AVX2 registers; 8x8 on aarch64
 * is 16 of its 32 vector registers; 4x8 (SSE2 and plain C) is 8 of 16 xmm.
 * KC*NR floats (one B micro-panel) stay in L1, MC*KC (the packed A block) in L2,
 * KC*NC (the packed B block) in L3. The cache blocks may be overridden at compile
 * time (tests use small ones to exercise block edges); they are rounded to
 * multiples of MR and NR. */
#if defined(MG_SGEMM_AVX2) && defined(__AVX512F__)
/* AVX-512 (-march=native on Xeon since Skylake-SP, Zen 4): the same 6-row tile,
 * twice as wide in zmm registers (12 accumulators of the 32), so the packed
 * weights (MR-row panels) are the same as AVX2's; edge panels take the 6x16 and
 * 6x8 tiles. */
#define MG_SGEMM_AVX512 1
#define MR 6
#define NR 32
#define PATH_NAME "avx512 6x32"
#elif defined(MG_SGEMM_AVX2)
#define MR 6
#define NR 16
#define PATH_NAME "avx2-fma 6x16"
#elif defined(MG_SGEMM_SSE)
#define MR 4
#define NR 8
#define PATH_NAME "sse2 4x8"
#elif defined(MG_SGEMM_NEON)
#define MR 8
#define NR 8
#define PATH_NAME "neon 8x8"
#else
#define MR 4
#define NR 8
#define PATH_NAME "portable 4x8"
#endif
#ifndef MG_SGEMM_MC
#define MG_SGEMM_MC 144
#endif
#ifndef MG_SGEMM_KC
#define MG_SGEMM_KC 256
#endif
#ifndef MG_SGEMM_NC
#define MG_SGEMM_NC 3072
#endif
#define MC_MAX ((MG_SGEMM_MC) / MR > 0 ? (MG_SGEMM_MC) / MR * MR : MR)
#define NC_MAX ((MG_SGEMM_NC) / NR > 0 ? (MG_SGEMM_NC) / NR * NR : NR)
#define KC_MAX ((MG_SGEMM_KC) > 0 ? (MG_SGEMM_KC) : 1)

/* Shallowest K for which mg_sgemm computes C^T to use its tiles better: below it
 * the transposed tile stores (scalar, one C column at a time) cost more than the
 * tile waste they save (mobilenet's 32 -> 16 pointwise conv: 41 -> 64 GFLOP/s). */
#define TRANSPOSE_MIN_K 64

/* Slack for aligning a buffer to 64 bytes (a cache line) inside scratch. */
#define ALIGN_SLACK 16

const char *mg_runtime_path(void) { return PATH_NAME; }

static int min_int(int a, int b) { return a < b ? a : b; }
static int round_up(int x, int m) { return (x + m - 1) / m * m; }

/* First 64-byte-aligned float at or after p (p itself is float-aligned). Aligned
 * panels let the AVX2 kernel use aligned loads and keep panels on cache lines. */
static float *align64(float *p) {
  uintptr_t u = (uintptr_t)p;
  return (float *)(void *)(p + ((64 - (u & 63)) & 63) / sizeof(float));
}

/* Splits n into the fewest blocks of at most bmax, of nearly equal size rounded up
 * to a multiple of m; returns the block size. Even blocks avoid a thin last block
 * (K = 260 with KC = 256 would otherwise run a 4-deep block at full overhead). */
static int even_block(int n, int bmax, int m) {
  int nblocks = (n + bmax - 1) / bmax;
  int b = round_up((n + nblocks - 1) / nblocks, m);
  return b < bmax ? b : bmax;
}

/* Packing space of the blocked product of an M x K and a K x N matrix. */
static size_t packed_size(int M, int N, int K) {
  size_t kc = (size_t)min_int(KC_MAX, K);
  size_t mc = (size_t)min_int(MC_MAX, round_up(M, MR));
  size_t nc = (size_t)min_int(NC_MAX, round_up(N, NR));
  return ALIGN_SLACK + mc * kc + ALIGN_SLACK + kc * nc;
}

size_t mg_sgemm_scratch(int M, int N, int K) {
  size_t s, t;
  if (M <= 0 || N <= 0 || K <= 0 || M == 1 || N == 1) return 0; /* no packing */
  /* mg_sgemm may compute C or C^T: room for either */
  s = packed_size(M, N, K);
  t = packed_size(N, M, K);
  return s > t ? s : t;
}

/* ------------------------------------------------------------------ packing */

/* Packs the mc x kc block of op(A) at (i0, k0) into MR-row panels: panel r holds
 * rows r*MR.. as kc groups of MR consecutive floats (the MR values of one column),
 * rows past mc zero. dst holds round_up(mc, MR) * kc floats. */
static void pack_a(int mc, int kc, const float *A, int lda, int transA, int i0, int k0,
                   float *dst) {
  int ir, i, p;
  for (ir = 0; ir < mc; ir += MR) {
    int mr = min_int(MR, mc - ir);
    if (!transA) {
      /* mr rows read in step (mr sequential streams), each packed group of MR
       * written whole: writing one row at a time would store MR floats apart */
      const float *row = A + (size_t)(i0 + ir) * lda + k0;
      for (p = 0; p < kc; p++)
        for (i = 0; i < mr; i++) dst[p * MR + i] = row[(size_t)i * lda + p];
    } else {
      for (p = 0; p < kc; p++) {
        const float *col = A + (size_t)(k0 + p) * lda + i0 + ir;
        for (i = 0; i < mr; i++) dst[p * MR + i] = col[i];
      }
    }
    for (i = mr; i < MR; i++)
      for (p = 0; p < kc; p++) dst[p * MR + i] = 0.0f;
    dst += (size_t)MR * kc;
  }
}

#if defined(MG_SGEMM_AVX2)
/* d[c*ldd + r] = s[r*lds + c] for r, c < 8: one 8x8 block transposed in ymm
 * registers (unpack pairs, then 64-bit shuffles, then 128-bit lane swaps). */
static void transpose8x8(const float *s, int lds, float *d, int ldd) {
  __m256 r0 = _mm256_loadu_ps(s), r1 = _mm256_loadu_ps(s + (size_t)lds),
         r2 = _mm256_loadu_ps(s + (size_t)2 * lds), r3 = _mm256_loadu_ps(s + (size_t)3 * lds),
         r4 = _mm256_loadu_ps(s + (size_t)4 * lds), r5 = _mm256_loadu_ps(s + (size_t)5 * lds),
         r6 = _mm256_loadu_ps(s + (size_t)6 * lds), r7 = _mm256_loadu_ps(s + (size_t)7 * lds);
  __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1),
         t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3),
         t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
         t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE),
         u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE),
         u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE),
         u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  _mm256_storeu_ps(d, _mm256_permute2f128_ps(u0, u4, 0x20));
  _mm256_storeu_ps(d + (size_t)ldd, _mm256_permute2f128_ps(u1, u5, 0x20));
  _mm256_storeu_ps(d + (size_t)2 * ldd, _mm256_permute2f128_ps(u2, u6, 0x20));
  _mm256_storeu_ps(d + (size_t)3 * ldd, _mm256_permute2f128_ps(u3, u7, 0x20));
  _mm256_storeu_ps(d + (size_t)4 * ldd, _mm256_permute2f128_ps(u0, u4, 0x31));
  _mm256_storeu_ps(d + (size_t)5 * ldd, _mm256_permute2f128_ps(u1, u5, 0x31));
  _mm256_storeu_ps(d + (size_t)6 * ldd, _mm256_permute2f128_ps(u2, u6, 0x31));
  _mm256_storeu_ps(d + (size_t)7 * ldd, _mm256_permute2f128_ps(u3, u7, 0x31));
}
#endif

/* Packs the kc x nc block of op(B) at (k0, j0) into NR-column panels: panel r holds
 * columns r*NR.. as kc groups of NR consecutive floats (one row of the panel),
 * columns past nc zero. dst holds kc * round_up(nc, NR) floats. */
static void pack_b(int kc, int nc, const float *B, int ldb, int transB, int k0, int j0,
                   float *dst) {
  int jr, j, p;
  if (!transB) {
    /* row by row, so B is read as it lies in memory (a panel-by-panel walk would
     * stride through kc rows per 64-byte panel row and defeat the prefetcher) */
    const int nfull = nc / NR * NR;
    for (p = 0; p < kc; p++) {
      const float *row = B + (size_t)(k0 + p) * ldb + j0;
      float *d = dst + (size_t)p * NR;
      for (jr = 0; jr < nfull; jr += NR, d += (size_t)NR * kc)
        for (j = 0; j < NR; j++) d[j] = row[jr + j]; /* fixed count: vectorised */
      if (jr < nc) {
        for (j = 0; j < nc - jr; j++) d[j] = row[jr + j];
        for (; j < NR; j++) d[j] = 0.0f;
      }
    }
    return;
  }
  /* transposed: the nr rows of B that make a panel are read in step (nr sequential
   * streams) so each packed row of NR floats is written whole */
  for (jr = 0; jr < nc; jr += NR) {
    const int nr = min_int(NR, nc - jr);
    const float *col = B + (size_t)(j0 + jr) * ldb + k0;
    p = 0;
#if defined(MG_SGEMM_AVX2)
    /* full panels: 8x8 blocks transposed in registers, so each of the nr rows is
     * read 32 bytes at a time instead of 4 */
    if (nr == NR)
      for (; p + 8 <= kc; p += 8)
        for (j = 0; j < NR; j += 8)
          transpose8x8(col + (size_t)j * ldb + p, ldb, dst + (size_t)p * NR + j, NR);
#endif
    for (; p < kc; p++) {
      float *d = dst + (size_t)p * NR;
      for (j = 0; j < nr; j++) d[j] = col[(size_t)j * ldb + p];
      for (; j < NR; j++) d[j] = 0.0f;
    }
    dst += (size_t)NR * kc;
  }
}

/* --------------------------------------------------------- micro-kernels */

/* Writes the valid mr x nr part of an MR x NR tile ab (row-major, NR floats per
 * row) to C, whose element (i, j) is c[i*rsc + j*csc]: c = alpha*ab + beta*c, with
 * beta == 0 never reading c. */
static void store_tile(const float *ab, int mr, int nr, float alpha, float beta,
                       float *c, int rsc, int csc) {
  int i, j;
  if (rsc == 1 && csc != 1) {
    /* C^T computed (mg_sgemm's narrow-C case): a tile row is a column of C, so
     * walk C row by row, mr contiguous floats each */
    for (j = 0; j < nr; j++) {
      float *cj = c + (size_t)j * csc;
      if (beta == 0.0f)
        for (i = 0; i < mr; i++) cj[i] = alpha * ab[i * NR + j];
      else
        for (i = 0; i < mr; i++) cj[i] = alpha * ab[i * NR + j] + beta * cj[i];
    }
    return;
  }
  for (i = 0; i < mr; i++) {
    float *ci = c + (size_t)i * rsc;
    const float *abi = ab + i * NR;
    if (csc != 1) {
      for (j = 0; j < nr; j++) {
        float *cij = ci + (size_t)j * csc;
        *cij = beta == 0.0f ? alpha * abi[j] : alpha * abi[j] + beta * *cij;
      }
    } else if (beta == 0.0f) {
      for (j = 0; j < nr; j++) ci[j] = alpha * abi[j];
    } else {
      for (j = 0; j < nr; j++) ci[j] = alpha * abi[j] + beta * ci[j];
    }
  }
}

#if defined(MG_SGEMM_AVX2)

/* One k step of the 6x16 tile: two B vectors, six broadcasts of A, twelve FMAs. */
#define ROW(i)                                                          \
  do {                                                                  \
    const __m256 ai = _mm256_broadcast_ss(a + (i));                     \
    c##i##0 = _mm256_fmadd_ps(ai, b0, c##i##0);                         \
    c##i##1 = _mm256_fmadd_ps(ai, b1, c##i##1);                         \
  } while (0)
#define STEP()                                                          \
  do {                                                                  \
    const __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);    \
    ROW(0); ROW(1); ROW(2); ROW(3); ROW(4); ROW(5);                     \
    a += MR;                                                            \
    b += NR;                                                            \
  } while (0)
#define STORE_ROW(i)                                                    \
  do {                                                                  \
    float *ci = c + (size_t)(i) * rsc;                                  \
    __m256 v0 = _mm256_mul_ps(va, c##i##0), v1 = _mm256_mul_ps(va, c##i##1); \
    if (beta != 0.0f) {                                                 \
      v0 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(ci), v0);                \
      v1 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(ci + 8), v1);            \
    }                                                                   \
    _mm256_storeu_ps(ci, v0);                                           \
    _mm256_storeu_ps(ci + 8, v1);                                       \
  } while (0)
#define SPILL_ROW(i)                                                    \
  do {                                                                  \
    _mm256_storeu_ps(ab + (i) * NR, c##i##0);                           \
    _mm256_storeu_ps(ab + (i) * NR + 8, c##i##1);                       \
  } while (0)

/* C[0..mr, 0..nr] = alpha * (a panel x b panel) + beta * C, the product of an
 * MR x kc packed A panel and a kc x NR packed B panel (b 32-byte aligned) held in
 * 12 ymm accumulators; C(i, j) is c[i*rsc + j*csc]. Full tiles of a row-major C
 * store straight to it; edge tiles and transposed C go through a stack tile so
 * nothing past the edge is touched. */
static void kernel16(int kc, const float *a, const float *b, float *c, int rsc, int csc,
                     int mr, int nr, float alpha, float beta) {
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00,
         c21 = c00, c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  int p = 0;
  /* unrolled by 4 so the loop branch and pointer updates cost ~nothing */
  for (; p + 4 <= kc; p += 4) {
    _mm_prefetch((const char *)(b + 8 * NR), _MM_HINT_T0);
    STEP(); STEP(); STEP(); STEP();
  }
  for (; p < kc; p++) STEP();
  if (mr == MR && nr == 16 && csc == 1) {
    const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
    STORE_ROW(0); STORE_ROW(1); STORE_ROW(2); STORE_ROW(3); STORE_ROW(4); STORE_ROW(5);
  } else {
    float ab[MR * NR];
    SPILL_ROW(0); SPILL_ROW(1); SPILL_ROW(2); SPILL_ROW(3); SPILL_ROW(4); SPILL_ROW(5);
    store_tile(ab, mr, nr, alpha, beta, c, rsc, csc);
  }
}
#undef ROW
#undef STEP
#undef STORE_ROW
#undef SPILL_ROW

/* The 6x8 tile: the same contract as kernel16 for an edge panel of nr <= 8
 * columns (b keeps the NR-float row stride of a packed panel; the rest of each
 * row is never read). Half the FMAs of the 6x16 tile for the same useful columns:
 * a 49-wide C (resnet's last stage) costs 56 columns instead of 64. */
static void kernel8(int kc, const float *a, const float *b, float *c, int rsc, int csc,
                    int mr, int nr, float alpha, float beta) {
  __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0;
  float ab[MR * NR];
  int p, i;
  for (p = 0; p < kc; p++) {
    const __m256 b0 = _mm256_load_ps(b);
    c0 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 0), b0, c0);
    c1 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 1), b0, c1);
    c2 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 2), b0, c2);
    c3 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 3), b0, c3);
    c4 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 4), b0, c4);
    c5 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 5), b0, c5);
    a += MR;
    b += NR;
  }
  _mm256_storeu_ps(ab + 0 * NR, c0);
  _mm256_storeu_ps(ab + 1 * NR, c1);
  _mm256_storeu_ps(ab + 2 * NR, c2);
  _mm256_storeu_ps(ab + 3 * NR, c3);
  _mm256_storeu_ps(ab + 4 * NR, c4);
  _mm256_storeu_ps(ab + 5 * NR, c5);
  for (i = 0; i < MR; i++) _mm256_storeu_ps(ab + i * NR + 8, _mm256_setzero_ps());
  store_tile(ab, mr, nr, alpha, beta, c, rsc, csc);
}

#if defined(MG_SGEMM_AVX512)
/* One k step of the 6x32 tile: two zmm B vectors, six broadcasts, twelve FMAs. */
#define ROW(i)                                                          \
  do {                                                                  \
    const __m512 ai = _mm512_set1_ps(a[i]);                             \
    c##i##0 = _mm512_fmadd_ps(ai, b0, c##i##0);                         \
    c##i##1 = _mm512_fmadd_ps(ai, b1, c##i##1);                         \
  } while (0)
#define STEP()                                                          \
  do {                                                                  \
    const __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);   \
    ROW(0); ROW(1); ROW(2); ROW(3); ROW(4); ROW(5);                     \
    a += MR;                                                            \
    b += NR;                                                            \
  } while (0)
#define STORE_ROW(i)                                                    \
  do {                                                                  \
    float *ci = c + (size_t)(i) * rsc;                                  \
    __m512 v0 = _mm512_mul_ps(va, c##i##0), v1 = _mm512_mul_ps(va, c##i##1); \
    if (beta != 0.0f) {                                                 \
      v0 = _mm512_fmadd_ps(vb, _mm512_loadu_ps(ci), v0);                \
      v1 = _mm512_fmadd_ps(vb, _mm512_loadu_ps(ci + 16), v1);           \
    }                                                                   \
    _mm512_storeu_ps(ci, v0);                                           \
    _mm512_storeu_ps(ci + 16, v1);                                      \
  } while (0)
#define SPILL_ROW(i)                                                    \
  do {                                                                  \
    _mm512_storeu_ps(ab + (i) * NR, c##i##0);                           \
    _mm512_storeu_ps(ab + (i) * NR + 16, c##i##1);                      \
  } while (0)

/* kernel16's contract for the full 6x32 tile (b 64-byte aligned). */
static void kernel32(int kc, const float *a, const float *b, float *c, int rsc, int csc,
                     int mr, int nr, float alpha, float beta) {
  __m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00,
         c21 = c00, c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  int p = 0;
  for (; p + 4 <= kc; p += 4) {
    _mm_prefetch((const char *)(b + 8 * NR), _MM_HINT_T0);
    STEP(); STEP(); STEP(); STEP();
  }
  for (; p < kc; p++) STEP();
  if (mr == MR && nr == NR && csc == 1) {
    const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    STORE_ROW(0); STORE_ROW(1); STORE_ROW(2); STORE_ROW(3); STORE_ROW(4); STORE_ROW(5);
  } else {
    float ab[MR * NR];
    SPILL_ROW(0); SPILL_ROW(1); SPILL_ROW(2); SPILL_ROW(3); SPILL_ROW(4); SPILL_ROW(5);
    store_tile(ab, mr, nr, alpha, beta, c, rsc, csc);
  }
}
#undef ROW
#undef STEP
#undef STORE_ROW
#undef SPILL_ROW
#endif

/* The tiles by panel width: the narrowest whose width covers nr. */
static void kernel(int kc, const float *a, const float *b, float *c, int rsc, int csc, int mr,
                   int nr, float alpha, float beta) {
  if (nr <= 8)
    kernel8(kc, a, b, c, rsc, csc, mr, nr, alpha, beta);
#if defined(MG_SGEMM_AVX512)
  else if (nr > 16)
    kernel32(kc, a, b, c, rsc, csc, mr, nr, alpha, beta);
#endif
  else
    kernel16(kc, a, b, c, rsc, csc, mr, nr, alpha, beta);
}
/* Widths of the tiles, widest first, for tile_cols. */
#if defined(MG_SGEMM_AVX512)
#define TILE_WIDTHS {32, 16, 8}
#else
#define TILE_WIDTHS {16, 8}
#endif

#elif defined(MG_SGEMM_SSE)

/* One k step of the 4x8 SSE tile: eight accumulators, two B vectors, one A
 * broadcast at a time: 11 of the 16 xmm registers. */
#define ROW(i)                                                          \
  do {                                                                  \
    const __m128 ai = _mm_load1_ps(a + (i));                            \
    c##i##0 = _mm_add_ps(c##i##0, _mm_mul_ps(ai, b0));                  \
    c##i##1 = _mm_add_ps(c##i##1, _mm_mul_ps(ai, b1));                  \
  } while (0)
#define STORE_ROW(i)                                                    \
  do {                                                                  \
    float *ci = c + (size_t)(i) * rsc;                                  \
    __m128 v0 = _mm_mul_ps(va, c##i##0), v1 = _mm_mul_ps(va, c##i##1);  \
    if (beta != 0.0f) {                                                 \
      v0 = _mm_add_ps(v0, _mm_mul_ps(vb, _mm_loadu_ps(ci)));            \
      v1 = _mm_add_ps(v1, _mm_mul_ps(vb, _mm_loadu_ps(ci + 4)));        \
    }                                                                   \
    _mm_storeu_ps(ci, v0);                                              \
    _mm_storeu_ps(ci + 4, v1);                                          \
  } while (0)
#define SPILL_ROW(i)                                                    \
  do {                                                                  \
    _mm_storeu_ps(ab + (i) * NR, c##i##0);                              \
    _mm_storeu_ps(ab + (i) * NR + 4, c##i##1);                          \
  } while (0)

/* Same contract as the AVX2 kernel, for a 4x8 tile (b 16-byte aligned). */
static void kernel(int kc, const float *a, const float *b, float *c, int rsc, int csc,
                   int mr, int nr, float alpha, float beta) {
  __m128 c00 = _mm_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
         c30 = c00, c31 = c00;
  int p;
  for (p = 0; p < kc; p++) {
    const __m128 b0 = _mm_load_ps(b), b1 = _mm_load_ps(b + 4);
    ROW(0); ROW(1); ROW(2); ROW(3);
    a += MR;
    b += NR;
  }
  if (mr == MR && nr == NR && csc == 1) {
    const __m128 va = _mm_set1_ps(alpha), vb = _mm_set1_ps(beta);
    STORE_ROW(0); STORE_ROW(1); STORE_ROW(2); STORE_ROW(3);
  } else {
    float ab[MR * NR];
    SPILL_ROW(0); SPILL_ROW(1); SPILL_ROW(2); SPILL_ROW(3);
    store_tile(ab, mr, nr, alpha, beta, c, rsc, csc);
  }
}
#undef ROW
#undef STORE_ROW
#undef SPILL_ROW

#elif defined(MG_SGEMM_NEON)

/* One k step of the 8x8 NEON tile: the eight A values are two vectors whose lanes
 * feed by-element FMAs, so no broadcasts; 16 accumulators + 4 of the 32 registers. */
#define ROW(i, av, lane)                                                \
  do {                                                                  \
    c##i##0 = vfmaq_laneq_f32(c##i##0, b0, av, lane);                   \
    c##i##1 = vfmaq_laneq_f32(c##i##1, b1, av, lane);                   \
  } while (0)
#define STORE_ROW(i)                                                    \
  do {                                                                  \
    float *ci = c + (size_t)(i) * rsc;                                  \
    float32x4_t v0 = vmulq_n_f32(c##i##0, alpha), v1 = vmulq_n_f32(c##i##1, alpha); \
    if (beta != 0.0f) {                                                 \
      v0 = vfmaq_n_f32(v0, vld1q_f32(ci), beta);                        \
      v1 = vfmaq_n_f32(v1, vld1q_f32(ci + 4), beta);                    \
    }                                                                   \
    vst1q_f32(ci, v0);                                                  \
    vst1q_f32(ci + 4, v1);                                              \
  } while (0)
#define SPILL_ROW(i)                                                    \
  do {                                                                  \
    vst1q_f32(ab + (i) * NR, c##i##0);                                  \
    vst1q_f32(ab + (i) * NR + 4, c##i##1);                              \
  } while (0)

/* Same contract as the AVX2 kernel, for an 8x8 tile. */
static void kernel(int kc, const float *a, const float *b, float *c, int rsc, int csc,
                   int mr, int nr, float alpha, float beta) {
  float32x4_t c00 = vdupq_n_f32(0.0f), c01 = c00, c10 = c00, c11 = c00, c20 = c00,
              c21 = c00, c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00,
              c51 = c00, c60 = c00, c61 = c00, c70 = c00, c71 = c00;
  int p;
  for (p = 0; p < kc; p++) {
    const float32x4_t b0 = vld1q_f32(b), b1 = vld1q_f32(b + 4);
    const float32x4_t a0 = vld1q_f32(a), a1 = vld1q_f32(a + 4);
    ROW(0, a0, 0); ROW(1, a0, 1); ROW(2, a0, 2); ROW(3, a0, 3);
    ROW(4, a1, 0); ROW(5, a1, 1); ROW(6, a1, 2); ROW(7, a1, 3);
    a += MR;
    b += NR;
  }
  if (mr == MR && nr == NR && csc == 1) {
    STORE_ROW(0); STORE_ROW(1); STORE_ROW(2); STORE_ROW(3);
    STORE_ROW(4); STORE_ROW(5); STORE_ROW(6); STORE_ROW(7);
  } else {
    float ab[MR * NR];
    SPILL_ROW(0); SPILL_ROW(1); SPILL_ROW(2); SPILL_ROW(3);
    SPILL_ROW(4); SPILL_ROW(5); SPILL_ROW(6); SPILL_ROW(7);
    store_tile(ab, mr, nr, alpha, beta, c, rsc, csc);
  }
}
#undef ROW
#undef STORE_ROW
#undef SPILL_ROW

#else

/* Portable micro-kernels (4x8), same contract as the AVX2 one: plain C that
 * compilers vectorise, for targets without a kernel of their own and for
 * MG_RUNTIME_PORTABLE. Each compiler needs the loops in a different shape to keep
 * the accumulators in registers, measured on x86-64 at -O2 with
 * MG_RUNTIME_PORTABLE (SSE, 16 flops a cycle at most):
 *   - gcc does not unroll a loop over the rows, so a tile ab[MR*NR] indexed by i
 *     stays in memory (~5 flops/cycle); written row by row, as one accumulator
 *     array per row over loops of exactly four columns (each one SIMD statement),
 *     every accumulator has a fixed address and lives in a register (~10);
 *   - clang rotates that row-by-row loop and keeps each row's product live next to
 *     its sum, which overflows the 16 SSE registers (~6.5), while it fully unrolls
 *     and registers the plain loop nest by itself (~10). */
#if defined(__clang__)
static void kernel(int kc, const float *restrict a, const float *restrict b, float *c,
                   int rsc, int csc, int mr, int nr, float alpha, float beta) {
  float ab[MR * NR];
  int i, j, p;
  for (i = 0; i < MR * NR; i++) ab[i] = 0.0f;
  for (p = 0; p < kc; p++) {
    for (i = 0; i < MR; i++)
      for (j = 0; j < NR; j++) ab[i * NR + j] += a[i] * b[j];
    a += MR;
    b += NR;
  }
  store_tile(ab, mr, nr, alpha, beta, c, rsc, csc);
}
#else
/* Columns o..o+3 of one k step for the four rows. */
#define QUAD(o)                                                         \
  for (j = (o); j < (o) + 4; j++) {                                     \
    c0[j] += a[0] * b[j];                                               \
    c1[j] += a[1] * b[j];                                               \
    c2[j] += a[2] * b[j];                                               \
    c3[j] += a[3] * b[j];                                               \
  }
static void kernel(int kc, const float *restrict a, const float *restrict b, float *c,
                   int rsc, int csc, int mr, int nr, float alpha, float beta) {
  float ab[MR * NR], c0[NR], c1[NR], c2[NR], c3[NR];
  int j, p;
  for (j = 0; j < NR; j++) c0[j] = c1[j] = c2[j] = c3[j] = 0.0f;
  for (p = 0; p < kc; p++) {
    QUAD(0);
    QUAD(4);
    a += MR;
    b += NR;
  }
  for (j = 0; j < NR; j++) {
    ab[0 * NR + j] = c0[j];
    ab[1 * NR + j] = c1[j];
    ab[2 * NR + j] = c2[j];
    ab[3 * NR + j] = c3[j];
  }
  store_tile(ab, mr, nr, alpha, beta, c, rsc, csc);
}
#undef QUAD
#endif /* __clang__ */

#endif

#if !defined(TILE_WIDTHS)
#define TILE_WIDTHS {NR}
#endif

/* Columns the micro-tiles compute for n useful ones: whole panels, and the
 * narrowest tile that covers the last one's rest. */
static int tile_cols(int n) {
  static const int widths[] = TILE_WIDTHS;
  const int full = n / NR * NR, rest = n - full;
  int w = NR;
  size_t k;
  for (k = 0; k < sizeof widths / sizeof widths[0]; k++)
    if (widths[k] >= rest) w = widths[k];
  return rest > 0 ? full + w : full;
}

/* ------------------------------------------------------------------- gemv */

/* Dot product of x (unit stride) and y over n; eight partial sums break the
 * dependency chain (and are the vector lanes of the AVX2 version). */
static float dot(int n, const float *x, const float *y) {
  int k = 0;
  float s;
#if defined(MG_SGEMM_AVX2)
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  __m128 h;
  for (; k + 32 <= n; k += 32) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + k), _mm256_loadu_ps(y + k), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + k + 8), _mm256_loadu_ps(y + k + 8), s1);
    s2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + k + 16), _mm256_loadu_ps(y + k + 16), s2);
    s3 = _mm256_fmadd_ps(_mm256_loadu_ps(x + k + 24), _mm256_loadu_ps(y + k + 24), s3);
  }
  for (; k + 8 <= n; k += 8)
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + k), _mm256_loadu_ps(y + k), s0);
  s0 = _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3));
  h = _mm_add_ps(_mm256_castps256_ps128(s0), _mm256_extractf128_ps(s0, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_shuffle_ps(h, h, 1));
  s = _mm_cvtss_f32(h);
#else
  float t[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int j;
  for (; k + 8 <= n; k += 8)
    for (j = 0; j < 8; j++) t[j] += x[k + j] * y[k + j];
  s = ((t[0] + t[4]) + (t[1] + t[5])) + ((t[2] + t[6]) + (t[3] + t[7]));
#endif
  for (; k < n; k++) s += x[k] * y[k];
  return s;
}

/* y[j] += s * x[j] for j < n, unit strides. */
static void axpy(int n, float s, const float *x, float *y) {
  int j = 0;
#if defined(MG_SGEMM_AVX2)
  const __m256 vs = _mm256_set1_ps(s);
  for (; j + 16 <= n; j += 16) {
    _mm256_storeu_ps(y + j, _mm256_fmadd_ps(vs, _mm256_loadu_ps(x + j), _mm256_loadu_ps(y + j)));
    _mm256_storeu_ps(y + j + 8,
                     _mm256_fmadd_ps(vs, _mm256_loadu_ps(x + j + 8), _mm256_loadu_ps(y + j + 8)));
  }
  for (; j + 8 <= n; j += 8)
    _mm256_storeu_ps(y + j, _mm256_fmadd_ps(vs, _mm256_loadu_ps(x + j), _mm256_loadu_ps(y + j)));
#endif
  for (; j < n; j++) y[j] += s * x[j];
}

/* y[j*incy] = alpha * sum_k x[k*incx] * P(k, j) + beta * y[j*incy] for j < n, where
 * P(k, j) = P[j*ldp + k] if ptrans, else P[k*ldp + j]. This is mg_sgemm with one
 * row (or, transposed, one column) of C: packing would cost as much as the product
 * and the micro-tile would be 1/MR full, so it streams P once instead. */
static void gemv(int n, int K, float alpha, const float *x, int incx, const float *P,
                 int ldp, int ptrans, float beta, float *y, int incy) {
  int j, k;
  if (ptrans && incx == 1) {
    for (j = 0; j < n; j++) {
      float s = alpha * dot(K, x, P + (size_t)j * ldp);
      float *yj = y + (size_t)j * incy;
      *yj = beta == 0.0f ? s : s + beta * *yj;
    }
  } else if (ptrans) {
    for (j = 0; j < n; j++) {
      const float *pj = P + (size_t)j * ldp;
      float s = 0.0f, *yj = y + (size_t)j * incy;
      for (k = 0; k < K; k++) s += x[(size_t)k * incx] * pj[k];
      *yj = beta == 0.0f ? alpha * s : alpha * s + beta * *yj;
    }
  } else {
    /* rows of P are contiguous along j: scale y once, then one axpy per k */
    for (j = 0; j < n; j++) {
      float *yj = y + (size_t)j * incy;
      *yj = beta == 0.0f ? 0.0f : beta * *yj;
    }
    for (k = 0; k < K; k++) {
      const float s = alpha * x[(size_t)k * incx];
      const float *pk = P + (size_t)k * ldp;
      if (incy == 1)
        axpy(n, s, pk, y);
      else
        for (j = 0; j < n; j++) y[(size_t)j * incy] += s * pk[j];
    }
  }
}

/* ------------------------------------------------------------------ driver */

/* The blocked product C = alpha*op(A)*op(B) + beta*C with C(i, j) at
 * C[i*rsc + j*csc]; M, N >= 2, K >= 1, alpha != 0. */
static void blocked(int M, int N, int K, float alpha, const float *A, int lda, int transA,
                    const float *B, int ldb, int transB, float beta, float *C, int rsc,
                    int csc, float *scratch) {
  const int kcb = even_block(K, KC_MAX, 1);
  const int mcb = even_block(M, MC_MAX, MR);
  const int ncb = even_block(N, NC_MAX, NR);
  float *pa = align64(scratch);
  float *pb = align64(pa + (size_t)mcb * kcb);
  int jc, pc, ic, jr, ir;
  for (jc = 0; jc < N; jc += ncb) {
    const int nc = min_int(ncb, N - jc);
    for (pc = 0; pc < K; pc += kcb) {
      const int kc = min_int(kcb, K - pc);
      /* later K blocks accumulate onto what the first one wrote */
      const float beta_k = pc == 0 ? beta : 1.0f;
      pack_b(kc, nc, B, ldb, transB, pc, jc, pb);
      for (ic = 0; ic < M; ic += mcb) {
        const int mc = min_int(mcb, M - ic);
        pack_a(mc, kc, A, lda, transA, ic, pc, pa);
        for (jr = 0; jr < nc; jr += NR) {
          const int nr = min_int(NR, nc - jr);
          const float *bp = pb + (size_t)jr * kc;
          float *cj = C + (size_t)(jc + jr) * csc;
          for (ir = 0; ir < mc; ir += MR)
            kernel(kc, pa + (size_t)ir * kc, bp, cj + (size_t)(ic + ir) * rsc, rsc, csc,
                   min_int(MR, mc - ir), nr, alpha, beta_k);
        }
      }
    }
  }
}

/* pack_b's layout for a B given row by row through a callback: row(ctx, k0 + p,
 * j0, nc, buf) writes B[k0 + p][j0 .. j0 + nc) into buf (nc <= NC_MAX floats, on
 * the stack so it stays in L1), which is then scattered into the NR panels. */
static void pack_b_rows(int kc, int nc, mg_sgemm_row_fn row, const void *ctx, int k0,
                        int j0, float *dst) {
  float buf[NC_MAX + NR];
  const int nfull = nc / NR * NR;
  int p, jr, j;
  for (p = 0; p < kc; p++) {
    float *d = dst + (size_t)p * NR;
    row(ctx, k0 + p, j0, nc, buf);
    for (jr = 0; jr < nfull; jr += NR, d += (size_t)NR * kc)
      for (j = 0; j < NR; j++) d[j] = buf[jr + j];
    if (jr < nc) {
      for (j = 0; j < nc - jr; j++) d[j] = buf[jr + j];
      for (; j < NR; j++) d[j] = 0.0f;
    }
  }
}

void mg_sgemm_rows(int M, int N, int K, const float *A, int lda, mg_sgemm_row_fn row,
                   const void *ctx, float *C, int ldc, float *scratch) {
  const int kcb = even_block(K, KC_MAX, 1);
  const int mcb = even_block(M, MC_MAX, MR);
  const int ncb = even_block(N, NC_MAX, NR);
  float *pa = align64(scratch);
  float *pb = align64(pa + (size_t)mcb * kcb);
  int jc, pc, ic, jr, ir;
  if (M <= 0 || N <= 0 || K <= 0) return;
  for (jc = 0; jc < N; jc += ncb) {
    const int nc = min_int(ncb, N - jc);
    for (pc = 0; pc < K; pc += kcb) {
      const int kc = min_int(kcb, K - pc);
      const float beta_k = pc == 0 ? 0.0f : 1.0f;
      pack_b_rows(kc, nc, row, ctx, pc, jc, pb);
      for (ic = 0; ic < M; ic += mcb) {
        const int mc = min_int(mcb, M - ic);
        pack_a(mc, kc, A, lda, 0, ic, pc, pa);
        for (jr = 0; jr < nc; jr += NR) {
          const int nr = min_int(NR, nc - jr);
          const float *bp = pb + (size_t)jr * kc;
          float *cj = C + (size_t)(jc + jr);
          for (ir = 0; ir < mc; ir += MR)
            kernel(kc, pa + (size_t)ir * kc, bp, cj + (size_t)(ic + ir) * ldc, ldc, 1,
                   min_int(MR, mc - ir), nr, 1.0f, beta_k);
        }
      }
    }
  }
}

size_t mg_sgemm_rows_scratch(int M, int N, int K) {
  return M <= 0 || N <= 0 || K <= 0 ? 0 : packed_size(M, N, K);
}

/* ------------------------------------------------------- prepacked A */

/* The prepared layout of an M x K matrix A (mg_runtime.h, MG_RT_PACK_VERSION 1):
 * K split into blocks of kcb = even_block(K, MG_RT_PACK_KC, 1) columns; block by
 * block, the rows in panels of mr, each panel kc groups of mr floats (the mr values
 * of one column), rows past M zero. This is what pack_a writes for one block with
 * MR = mr, so when mr is the compiled MR the micro-kernel reads it in place. */

int mg_sgemm_mr(void) { return MR; }

int mg_sgemm_pack_version(void) { return MG_RT_PACK_VERSION; }

size_t mg_sgemm_packed_floats(int M, int K, int mr) {
  return M <= 0 || K <= 0 || mr <= 0 ? 0 : (size_t)round_up(M, mr) * (size_t)K;
}

void mg_sgemm_pack(int M, int K, const float *A, int lda, int mr, float *dst) {
  const int kcb = even_block(K, MG_RT_PACK_KC, 1);
  int pc, ir, i, p;
  if (M <= 0 || K <= 0 || mr <= 0) return;
  for (pc = 0; pc < K; pc += kcb) {
    const int kc = min_int(kcb, K - pc);
    for (ir = 0; ir < M; ir += mr, dst += (size_t)mr * kc)
      for (p = 0; p < kc; p++)
        for (i = 0; i < mr; i++)
          dst[(size_t)p * mr + i] = ir + i < M ? A[(size_t)(ir + i) * lda + pc + p] : 0.0f;
  }
}

size_t mg_sgemm_packed_index(int M, int K, int mr, int i, int k) {
  const int kcb = even_block(K, MG_RT_PACK_KC, 1), pc = k / kcb * kcb;
  const int kc = min_int(kcb, K - pc);
  return (size_t)pc * round_up(M, mr) + (size_t)(i / mr) * mr * kc + (size_t)(k - pc) * mr + i % mr;
}

/* pack_a's layout (MR-row panels) of rows i0 .. i0+mc-1 of the K block that starts
 * at column pc (kc wide) of a prepared A whose panels are pmr rows (pmr != MR: the
 * blob was prepared for another micro-kernel). blk is that block's start in PA. */
static void pack_a_from_packed(int mc, int kc, const float *blk, int pmr, int i0, float *dst) {
  int ir, i, p;
  for (ir = 0; ir < mc; ir += MR) {
    const int mr = min_int(MR, mc - ir);
    for (p = 0; p < kc; p++)
      for (i = 0; i < MR; i++) {
        const int row = i0 + ir + i;
        dst[p * MR + i] = i < mr ? blk[(size_t)(row / pmr) * pmr * kc + (size_t)p * pmr + row % pmr]
                                 : 0.0f;
      }
    dst += (size_t)MR * kc;
  }
}

size_t mg_sgemm_packed_scratch(int M, int N, int K) {
  size_t kc, mc, nc;
  if (M <= 0 || N <= 0 || K <= 0) return 0;
  kc = (size_t)min_int(MG_RT_PACK_KC, K);
  mc = (size_t)min_int(MC_MAX, round_up(M, MR));
  nc = (size_t)min_int(NC_MAX, round_up(N, NR));
  return ALIGN_SLACK + mc * kc + ALIGN_SLACK + kc * nc;
}

/* The row blocks of one (jc, pc) block of a product with packed B panels bp (nc
 * columns of C from jc, kc deep): C rows (+)= A rows * B, beta_k as blocked's.
 * The A panels come from A (row-major, lda; packed into pa) when A is not NULL,
 * else from blk, the K block of a prepared A with pmr-row panels (read in place
 * when pmr == MR). last: this is the last K block, so done (if any) sees each
 * block of C as it becomes final. */
static void row_blocks(int M, int nc, int kc, int jc, int pc, const float *A, int lda,
                       const float *blk, int pmr, const float *bp, float beta_k, float *C, int ldc,
                       float *pa, int last, mg_sgemm_done_fn done, const void *dctx) {
  const int mcb = even_block(M, MC_MAX, MR);
  int ic, jr, ir;
  for (ic = 0; ic < M; ic += mcb) {
    const int mc = min_int(mcb, M - ic);
    const float *ap = pa;
    if (A)
      pack_a(mc, kc, A, lda, 0, ic, pc, pa);
    else if (pmr == MR)
      ap = blk + (size_t)ic * kc; /* the panels of rows ic.. */
    else
      pack_a_from_packed(mc, kc, blk, pmr, ic, pa);
    for (jr = 0; jr < nc; jr += NR) {
      const int nr = min_int(NR, nc - jr);
      float *cj = C + (size_t)(jc + jr);
      for (ir = 0; ir < mc; ir += MR)
        kernel(kc, ap + (size_t)ir * kc, bp + (size_t)jr * kc, cj + (size_t)(ic + ir) * ldc, ldc, 1,
               min_int(MR, mc - ir), nr, 1.0f, beta_k);
      /* this mc x nr block of C is final and in L1 */
      if (done && last) done(dctx, cj + (size_t)ic * ldc, ic, jc + jr, mc, nr, ldc);
    }
  }
}

/* ------------------------------------------------------- prepacked B */

/* pack_b's layout (NR-column panels) of columns j0 .. j0+nc-1 of the K block of a
 * prepared B (mg_sgemm_prepb) whose panels are pnr columns wide, blk being that
 * block's start: for a blob prepared for another micro-kernel's NR, or one whose
 * panels are not 64-byte aligned. */
static void pack_b_from_packed(int kc, int nc, const float *blk, int pnr, int j0, float *dst) {
  int jr, j, p;
  for (jr = 0; jr < nc; jr += NR, dst += (size_t)NR * kc)
    for (p = 0; p < kc; p++)
      for (j = 0; j < NR; j++) {
        const int col = j0 + jr + j;
        dst[(size_t)p * NR + j] =
            jr + j < nc ? blk[(size_t)(col / pnr) * pnr * kc + (size_t)p * pnr + col % pnr] : 0.0f;
      }
}

/* The product of mg_sgemm_packed (PA with pmr-row panels; B, or row's rows, packed
 * per block) or of mg_sgemm_prepb (A packed per block; PB with pnr-column panels),
 * whichever of PA and PB is given: the blocked loops of both, beta on the first K
 * block, done on the last. */
static void prepared_product(int M, int N, int K, const float *A, int lda, const float *PA, int pmr,
                             const float *B, int ldb, mg_sgemm_row_fn row, const void *ctx,
                             const float *PB, int pnr, float beta, float *C, int ldc,
                             float *scratch, mg_sgemm_done_fn done, const void *dctx) {
  const int kcb = even_block(K, MG_RT_PACK_KC, 1);
  const int mcb = even_block(M, MC_MAX, MR);
  const int ncb = even_block(N, NC_MAX, NR);
  const size_t Mp = PA ? (size_t)round_up(M, pmr) : 0, Np = PB ? (size_t)round_up(N, pnr) : 0;
  /* the kernels load B panels 64-byte aligned */
  const int b_in_place = PB && pnr == NR && ((uintptr_t)PB & 63) == 0;
  float *pa = align64(scratch);
  float *pb = align64(pa + (size_t)mcb * kcb);
  int jc, pc;
  if (M <= 0 || N <= 0 || K <= 0) return;
  for (jc = 0; jc < N; jc += ncb) {
    const int nc = min_int(ncb, N - jc);
    for (pc = 0; pc < K; pc += kcb) {
      const int kc = min_int(kcb, K - pc);
      const float *bp = pb;
      if (b_in_place)
        bp = PB + (size_t)pc * Np + (size_t)jc * kc; /* jc is a multiple of NR */
      else if (PB)
        pack_b_from_packed(kc, nc, PB + (size_t)pc * Np, pnr, jc, pb);
      else if (row)
        pack_b_rows(kc, nc, row, ctx, pc, jc, pb);
      else
        pack_b(kc, nc, B, ldb, 0, pc, jc, pb);
      row_blocks(M, nc, kc, jc, pc, PA ? NULL : A, lda, PA ? PA + (size_t)pc * Mp : NULL, pmr, bp,
                 pc == 0 ? beta : 1.0f, C, ldc, pa, pc + kc == K, done, dctx);
    }
  }
}

void mg_sgemm_packed(int M, int N, int K, const float *PA, int pmr, const float *B, int ldb,
                     mg_sgemm_row_fn row, const void *ctx, float *C, int ldc, float *scratch,
                     mg_sgemm_done_fn done, const void *dctx) {
  prepared_product(M, N, K, NULL, 0, PA, pmr, B, ldb, row, ctx, NULL, 0, 0.0f, C, ldc, scratch, done,
                   dctx);
}

void mg_sgemm_prepb(int M, int N, int K, const float *A, int lda, const float *PB, int pnr,
                    float beta, float *C, int ldc, float *scratch) {
  mg_sgemm_prepb_part(M, N, K, A, lda, PB, pnr, beta, C, ldc, scratch, 0, 1);
}

void mg_sgemm_prepb_part(int M, int N, int K, const float *A, int lda, const float *PB, int pnr,
                         float beta, float *C, int ldc, float *scratch, int t, int n) {
  int b, e;
  /* whole MR-row tiles per part: the same tiles, hence the same sums, as one call */
  mg_split_range(M, n, t, MR, &b, &e);
  if (e > b)
    prepared_product(e - b, N, K, A + (size_t)b * lda, lda, NULL, 0, NULL, 0, NULL, NULL, PB, pnr,
                     beta, C + (size_t)b * ldc, ldc, scratch, NULL, NULL);
}

int mg_sgemm_nr(void) { return NR; }

/* Useful fraction of the micro-tiles covering an m x n product. */
static double tile_use(int m, int n) {
  return (double)m / round_up(m, MR) * ((double)n / tile_cols(n));
}

void mg_sgemm(int M, int N, int K, float alpha, const float *A, int lda, int transA,
              const float *B, int ldb, int transB, float beta, float *C, int ldc,
              float *scratch) {
  mg_sgemm_part(M, N, K, alpha, A, lda, transA, B, ldb, transB, beta, C, ldc, scratch, 0, 1);
}

/* Columns of a gemv part start on multiples of this, so every part runs axpy's and
 * dot's vector loops over the same columns as one call would. */
#define GEMV_ALIGN 32

void mg_sgemm_part(int M, int N, int K, float alpha, const float *A, int lda, int transA,
                   const float *B, int ldb, int transB, float beta, float *C, int ldc,
                   float *scratch, int t, int n) {
  int i, j, b, e;
  if (M <= 0 || N <= 0) return;
  if (K <= 0 || alpha == 0.0f) {
    mg_split_range(M, n, t, 1, &b, &e);
    for (i = b; i < e; i++) {
      float *ci = C + (size_t)i * ldc;
      if (beta == 0.0f)
        for (j = 0; j < N; j++) ci[j] = 0.0f;
      else if (beta != 1.0f)
        for (j = 0; j < N; j++) ci[j] *= beta;
    }
    return;
  }
  /* every decision below depends on the whole product, never on the part, so each
   * part computes its elements exactly as the one-part call does */
  if (M == 1) {
    mg_split_range(N, n, t, GEMV_ALIGN, &b, &e);
    if (e > b)
      gemv(e - b, K, alpha, A, transA ? lda : 1, transB ? B + (size_t)b * ldb : B + b, ldb, transB,
           beta, C + b, 1);
    return;
  }
  if (N == 1) {
    mg_split_range(M, n, t, GEMV_ALIGN, &b, &e);
    if (e > b)
      gemv(e - b, K, alpha, B, transB ? 1 : ldb, transA ? A + b : A + (size_t)b * lda, lda, !transA,
           beta, C + (size_t)b * ldc, ldc);
    return;
  }
  /* A narrow C (resnet's last stage: N = 7*7 = 49 pixels, 1/16 of the last NR
   * panel used) wastes less as C^T = op(B)^T op(A)^T, whose rows are the MR side,
   * when K is deep enough to pay for the transposed stores. Parts are whole MR-row
   * tiles of whichever product is computed. */
  if (tile_use(N, M) > 1.05 * tile_use(M, N) && K >= TRANSPOSE_MIN_K) {
    mg_split_range(N, n, t, MR, &b, &e);
    if (e > b)
      blocked(e - b, M, K, alpha, transB ? B + (size_t)b * ldb : B + b, ldb, !transB, A, lda,
              !transA, beta, C + b, 1, ldc, scratch);
  } else {
    mg_split_range(M, n, t, MR, &b, &e);
    if (e > b)
      blocked(e - b, N, K, alpha, transA ? A + b : A + (size_t)b * lda, lda, transA, B, ldb, transB,
              beta, C + (size_t)b * ldc, ldc, 1, scratch);
  }
}
