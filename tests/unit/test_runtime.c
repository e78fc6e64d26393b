/* Unit tests for runtime/ (the CPU kernels that generated projects compile): mg_sgemm
 * and mg_conv2d against naive double-precision references written here, over
 * randomised shapes (sizes 1, odd sizes and tails of every tile and block, both
 * transposes, padded leading dimensions, alpha/beta, groups, depthwise, dilation,
 * asymmetric padding, strides, every fused activation).
 *
 * Tolerance: a float sum of K products, however blocked, differs from the exact one
 * by at most about K*eps*S where S = sum |a||b| (each rounding error is bounded by
 * eps times a partial sum of magnitudes). With random signs the errors behave like
 * a random walk, so the test allows (4*sqrt(K) + 8)*eps*S: far above what correct
 * code produces, far below one missing or doubled term (~S/K) for the K used here.
 *
 * The same file is built three ways by tests/CMakeLists.txt: against migcruntime
 * (the project's flags: the SSE2 path on x86-64, NEON on aarch64), with the
 * runtime compiled in under -mavx2 -mfma (the AVX2 path; skipped, exit 77, on CPUs
 * without it), and with MG_RUNTIME_PORTABLE (the plain C path) and tiny cache blocks
 * so every block edge is crossed by small problems. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mg_runtime.h"

/* ------------------------------------------------------------- helpers */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint32_t rnd(void) { /* xorshift64*: deterministic across platforms */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (uint32_t)((rng_state * 0x2545F4914F6CDD1Dull) >> 32);
}
static int rnd_int(int lo, int hi) { return lo + (int)(rnd() % (uint32_t)(hi - lo + 1)); }
static float rnd_float(void) { return (float)((double)rnd() / 4294967296.0 * 2.0 - 1.0); }

/* A size that is 1, a tail of a tile, or random, so edges are hit often. */
static int rnd_size(int max) {
  static const int edges[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 15, 16, 17, 18, 23, 24, 25, 31, 33};
  int r = rnd_int(0, 2);
  int v = r == 0 ? edges[rnd() % (sizeof edges / sizeof edges[0])] : rnd_int(1, max);
  return v > max ? max : v;
}

static float *rnd_array(size_t n) {
  float *a = malloc((n ? n : 1) * sizeof(float));
  size_t i;
  assert_non_null(a);
  for (i = 0; i < n; i++) a[i] = rnd_float();
  return a;
}

/* Scratch of exactly n floats starting at an odd float offset (so the kernels'
 * own alignment is exercised); overruns show under ASan, and the guard after
 * the buffer catches them in plain builds too. */
typedef struct { float *base, *p; size_t n; } scratch_buf;
static scratch_buf scratch_new(size_t n) {
  scratch_buf s;
  s.n = n;
  s.base = malloc((n + 2) * sizeof(float));
  assert_non_null(s.base);
  s.p = s.base + 1;
  s.p[n] = 12345.0f;
  return s;
}
static void scratch_check_free(scratch_buf s) {
  assert_true(s.p[s.n] == 12345.0f);
  free(s.base);
}

/* ---------------------------------------------------------------- SGEMM */

static double elem_a(const float *A, int lda, int tA, int i, int k) {
  return tA ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k];
}
static double elem_b(const float *B, int ldb, int tB, int k, int j) {
  return tB ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j];
}

/* Runs one mg_sgemm and checks every element of C (and that the padding of C
 * between N and ldc is untouched) against a double reference. */
static void check_sgemm(int M, int N, int K, float alpha, int tA, int tB, float beta,
                        int pad) {
  const int lda = (tA ? M : K) + pad, ldb = (tB ? K : N) + pad, ldc = N + pad;
  float *A = rnd_array((size_t)(tA ? K : M) * lda + 1);
  float *B = rnd_array((size_t)(tB ? N : K) * ldb + 1);
  float *C = rnd_array((size_t)M * ldc);
  float *C0 = malloc((size_t)M * ldc * sizeof(float) + 1);
  scratch_buf s = scratch_new(mg_sgemm_scratch(M, N, K));
  int i, j, k;
  assert_non_null(C0);
  if (beta == 0.0f) /* beta == 0 must not read C: NaN there must not leak */
    for (i = 0; i < M; i++)
      for (j = 0; j < N; j++) C[(size_t)i * ldc + j] = NAN;
  memcpy(C0, C, (size_t)M * ldc * sizeof(float));
  mg_sgemm(M, N, K, alpha, A, lda, tA, B, ldb, tB, beta, C, ldc, s.p);
  for (i = 0; i < M; i++) {
    for (j = 0; j < ldc; j++) {
      const float got = C[(size_t)i * ldc + j];
      double ref = 0, mag = 0, tol, c0 = C0[(size_t)i * ldc + j];
      if (j >= N) { /* padding of C */
        assert_memory_equal(&got, &C0[(size_t)i * ldc + j], sizeof got);
        continue;
      }
      for (k = 0; k < K; k++) {
        double t = elem_a(A, lda, tA, i, k) * elem_b(B, ldb, tB, k, j);
        ref += t;
        mag += fabs(t);
      }
      ref *= alpha;
      mag *= fabs(alpha);
      if (beta != 0.0f) {
        ref += beta * c0;
        mag += fabs(beta * c0);
      }
      tol = (4.0 * sqrt((double)K) + 8.0) * FLT_EPSILON * mag + 1e-30;
      if (!(fabs(got - ref) <= tol)) {
        fail_msg("sgemm M=%d N=%d K=%d tA=%d tB=%d alpha=%g beta=%g pad=%d: C[%d][%d] = "
                 "%.9g, reference %.9g (tol %.3g)", M, N, K, tA, tB, alpha, beta, pad,
                 i, j, got, ref, tol);
      }
    }
  }
  scratch_check_free(s);
  free(A);
  free(B);
  free(C);
  free(C0);
}

static const float alphas[] = {1.0f, -0.5f, 2.0f, 0.25f};
static const float betas[] = {0.0f, 1.0f, -1.5f, 0.5f};

/* mg_rt_expand_f16/bf16 against values fixed by IEEE 754 binary16 and bfloat16's
 * definitions (not by the converter under test), at lengths that reach the
 * vector loops and their scalar tails, from an odd (unaligned) address. */
static void test_expand_16bit(void **state) {
  (void)state;
  static const uint16_t h[] = {0x3c00, 0xc000, 0x7bff, 0x0001, 0x3555, 0x0000, 0x8000, 0x3800, 0x4248};
  static const float hf[] = {1.0f, -2.0f, 65504.0f, 5.9604644775390625e-8f, 0.333251953125f, 0.0f, -0.0f, 0.5f,
                             3.140625f};
  static const uint16_t b[] = {0x3f80, 0xc000, 0x4049, 0x0001, 0x7f7f, 0x3e80};
  static const float bf[] = {1.0f, -2.0f, 3.140625f, 9.18354961579912e-41f, 3.3895313892515355e38f, 0.25f};
  unsigned char raw[2 * 64 + 1];
  float out[64];
  for (int n = 1; n <= 64; n += 7) {
    for (int i = 0; i < n; i++) memcpy(raw + 1 + 2 * i, &h[i % 9], 2);
    mg_rt_expand_f16(out, raw + 1, (size_t)n);
    for (int i = 0; i < n; i++) assert_true(memcmp(&out[i], &hf[i % 9], 4) == 0);
    for (int i = 0; i < n; i++) memcpy(raw + 1 + 2 * i, &b[i % 6], 2);
    mg_rt_expand_bf16(out, raw + 1, (size_t)n);
    for (int i = 0; i < n; i++) assert_true(memcmp(&out[i], &bf[i % 6], 4) == 0);
  }
}

static void test_sgemm_random(void **state) {
  int t;
  (void)state;
  for (t = 0; t < 400; t++) {
    check_sgemm(rnd_size(70), rnd_size(70), rnd_size(90), alphas[rnd() % 4], rnd() & 1,
                rnd() & 1, betas[rnd() % 4], rnd_int(0, 1) ? 0 : rnd_int(1, 5));
  }
}

/* Sizes around the micro-tiles (6x16 AVX2, 4x8 SSE2 and C, 8x8 NEON) exhaustively
 * for small M and N. */
static void test_sgemm_tile_edges(void **state) {
  int M, N;
  (void)state;
  for (M = 1; M <= 13; M++)
    for (N = 1; N <= 33; N += (N < 18 ? 1 : 5))
      check_sgemm(M, N, rnd_int(1, 20), 1.0f, (M + N) & 1, (M * N) & 1, (N & 2) ? 1.0f : 0.0f, 0);
}

/* Shapes that cross the default cache blocks (MC 144, KC 256, NC 3072), keeping
 * the double reference cheap. */
static void test_sgemm_block_edges(void **state) {
  (void)state;
  check_sgemm(150, 40, 520, 1.0f, 0, 0, 0.0f, 0);
  check_sgemm(145, 33, 257, -0.5f, 1, 1, 1.0f, 3);
  check_sgemm(290, 17, 300, 1.0f, 0, 1, 0.5f, 0);
  check_sgemm(7, 3100, 5, 1.0f, 0, 0, 0.0f, 0);
  check_sgemm(13, 6200, 3, 2.0f, 1, 0, 1.0f, 1);
  check_sgemm(20, 3075, 260, 1.0f, 0, 1, 0.0f, 0);
  check_sgemm(2, 2, 2000, 1.0f, 0, 0, 0.0f, 0);
}

/* mg_sgemm_prepb against a double reference: B prepared for the compiled NR (read
 * in place), for other panel widths and at an unaligned address (both repacked per
 * call), with beta 0 (C never read) and 1, over shapes crossing the tiles and the
 * cache blocks. */
static void test_sgemm_prepb(void **state) {
  static const int shapes[][3] = {{8, 33, 5}, {13, 7, 300}, {150, 70, 520}, {9, 3100, 17}, {64, 49, 96}};
  const int widths[] = {mg_sgemm_nr(), 8, 6, 16};
  size_t q;
  int w, unaligned, i, j, k;
  (void)state;
  for (q = 0; q < sizeof shapes / sizeof shapes[0]; q++)
    for (w = 0; w < 4; w++)
      for (unaligned = 0; unaligned < 2; unaligned++) {
        const int M = shapes[q][0], N = shapes[q][1], K = shapes[q][2], pnr = widths[w];
        const float beta = unaligned ? 1.0f : 0.0f;
        float *A = rnd_array((size_t)M * K), *BT = rnd_array((size_t)N * K), *C = rnd_array((size_t)M * N);
        float *C0 = malloc((size_t)M * N * sizeof(float)), *PB0 = malloc((mg_sgemm_packed_floats(N, K, pnr) + 32) * sizeof(float));
        float *PB;
        scratch_buf s = scratch_new(mg_sgemm_packed_scratch(M, N, K));
        assert_non_null(C0);
        assert_non_null(PB0);
        PB = (float *)(((uintptr_t)PB0 + 63) & ~(uintptr_t)63) + unaligned;
        if (beta == 0.0f)
          for (i = 0; i < M * N; i++) C[i] = NAN;
        memcpy(C0, C, (size_t)M * N * sizeof(float));
        mg_sgemm_pack(N, K, BT, K, pnr, PB); /* B^T in panels of pnr */
        mg_sgemm_prepb(M, N, K, A, K, PB, pnr, beta, C, N, s.p);
        for (i = 0; i < M; i++)
          for (j = 0; j < N; j++) {
            double ref = beta != 0.0f ? beta * (double)C0[(size_t)i * N + j] : 0.0, mag = fabs(ref), tol;
            for (k = 0; k < K; k++) {
              const double t = (double)A[(size_t)i * K + k] * BT[(size_t)j * K + k];
              ref += t;
              mag += fabs(t);
            }
            tol = (4.0 * sqrt((double)K) + 8.0) * FLT_EPSILON * mag + 1e-30;
            if (!(fabs(C[(size_t)i * N + j] - ref) <= tol))
              fail_msg("prepb M=%d N=%d K=%d pnr=%d unaligned=%d: C[%d][%d] = %.9g, reference %.9g",
                       M, N, K, pnr, unaligned, i, j, C[(size_t)i * N + j], ref);
          }
        scratch_check_free(s);
        free(A), free(BT), free(C), free(C0), free(PB0);
      }
}

/* M == 1 and N == 1 take the gemv paths; K == 0 and alpha == 0 only scale C. */
static void test_sgemm_degenerate(void **state) {
  int tA, tB, t;
  (void)state;
  for (tA = 0; tA < 2; tA++)
    for (tB = 0; tB < 2; tB++)
      for (t = 0; t < 4; t++) {
        check_sgemm(1, rnd_size(300), rnd_size(300), alphas[t], tA, tB, betas[t], t & 1);
        check_sgemm(rnd_size(300), 1, rnd_size(300), alphas[t], tA, tB, betas[t], t & 2);
        check_sgemm(1, 1, rnd_size(300), alphas[t], tA, tB, betas[t], 0);
        check_sgemm(rnd_size(20), rnd_size(20), 0, alphas[t], tA, tB, betas[t], 0);
        check_sgemm(rnd_size(20), rnd_size(20), 5, 0.0f, tA, tB, betas[t], 0);
      }
  /* M or N == 0: nothing to do, nothing touched */
  mg_sgemm(0, 5, 5, 1.0f, NULL, 5, 0, NULL, 5, 0, 0.0f, NULL, 5, NULL);
  mg_sgemm(5, 0, 5, 1.0f, NULL, 5, 0, NULL, 5, 0, 0.0f, NULL, 5, NULL);
  assert_int_equal(mg_sgemm_scratch(0, 5, 5), 0);
}

/* The scratch size is monotonic in each argument (one buffer sized for the largest
 * call serves them all). */
static void test_sgemm_scratch_monotonic(void **state) {
  int M, N, K;
  (void)state;
  for (M = 1; M < 400; M += 37)
    for (N = 1; N < 4000; N += 397)
      for (K = 1; K < 600; K += 61) {
        size_t s = mg_sgemm_scratch(M, N, K);
        assert_true(mg_sgemm_scratch(M + 1, N, K) >= s);
        assert_true(mg_sgemm_scratch(M, N + 1, K) >= s);
        assert_true(mg_sgemm_scratch(M, N, K + 1) >= s);
      }
}

/* ---------------------------------------------------------- activations */

static double act_ref(double v, mg_act act, double a, double b) {
  switch (act) {
  case MG_ACT_NONE: return v;
  case MG_ACT_RELU: return v < 0 ? 0 : v;
  case MG_ACT_CLIP: return v < a ? a : v > b ? b : v;
  case MG_ACT_LEAKY_RELU: return v < 0 ? a * v : v;
  case MG_ACT_HARDSIGMOID: return fmax(0, fmin(1, a * v + b));
  case MG_ACT_HARDSWISH: return v * fmax(0, fmin(1, v / 6 + 0.5));
  case MG_ACT_SIGMOID: return 1 / (1 + exp(-v));
  case MG_ACT_SILU: return v / (1 + exp(-v));
  case MG_ACT_TANH: return tanh(v);
  case MG_ACT_GELU: return 0.5 * v * (1 + erf(v / sqrt(2.0)));
  case MG_ACT_GELU_TANH:
    return 0.5 * v * (1 + tanh(sqrt(2 / 3.14159265358979323846) * (v + 0.044715 * v * v * v)));
  }
  return v;
}

#define N_ACTS 11
static void rnd_act(mg_act *act, float *a, float *b) {
  *act = (mg_act)(rnd() % N_ACTS);
  *a = *act == MG_ACT_CLIP ? -0.3f : *act == MG_ACT_HARDSIGMOID ? 0.2f : 0.1f;
  *b = *act == MG_ACT_CLIP ? 0.4f : 0.5f;
}

/* |act(got) - act(ref)| allowed, given |got - ref| <= err: the activations are
 * Lipschitz with constant <= 1.5 (hardswish at 3), plus a few ulps for libm. */
static double act_tol(double err, double ref) { return 1.5 * err + 8 * FLT_EPSILON * fabs(ref) + 1e-7; }

static void test_bias_act(void **state) {
  int a, i;
  (void)state;
  for (a = 0; a < N_ACTS; a++) {
    float y[3 * 50], y0[3 * 50], bias[3] = {0.5f, -1.0f, 0.0f}, pa = 0.1f, pb = 0.5f;
    if (a == MG_ACT_CLIP) pa = -0.3f, pb = 0.4f;
    if (a == MG_ACT_HARDSIGMOID) pa = 0.2f;
    for (i = 0; i < 150; i++) y0[i] = y[i] = (float)(i % 50 - 25) * 0.3f; /* -7.5 .. 7.2 */
    mg_bias_act(y, 3, 40, 50, bias, (mg_act)a, pa, pb);
    for (i = 0; i < 150; i++) {
      const int c = i / 50;
      if (i % 50 >= 40) { assert_true(y[i] == y0[i]); continue; } /* past n */
      {
        double ref = act_ref((double)y0[i] + bias[c], (mg_act)a, pa, pb);
        if (!(fabs(y[i] - ref) <= act_tol(fabs(ref) * FLT_EPSILON, ref)))
          fail_msg("act %d: f(%g + %g) = %.9g, reference %.9g", a, y0[i], bias[c], y[i], ref);
      }
    }
  }
  { /* NaN propagates through the piecewise-linear ones */
    float v[3] = {NAN, NAN, NAN};
    mg_bias_act(v, 1, 1, 1, NULL, MG_ACT_RELU, 0, 0);
    mg_bias_act(v + 1, 1, 1, 1, NULL, MG_ACT_CLIP, 0, 6);
    mg_bias_act(v + 2, 1, 1, 1, NULL, MG_ACT_LEAKY_RELU, 0.1f, 0);
    assert_true(isnan(v[0]) && isnan(v[1]) && isnan(v[2]));
  }
}

/* --------------------------------------------------------- convolution */

/* Checks y = mg_conv2d(p, x, w, bias) against a direct double convolution. */
static void check_conv_result(const mg_conv2d_params *p, const float *x, const float *w,
                              const float *bias, const float *y) {
  const int Cg = p->C / p->group, Mg = p->M / p->group;
  int n, m, oh, ow, c, ki, kj;
  for (n = 0; n < p->N; n++)
    for (m = 0; m < p->M; m++)
      for (oh = 0; oh < p->OH; oh++)
        for (ow = 0; ow < p->OW; ow++) {
          const int g = m / Mg;
          double ref = bias ? bias[m] : 0, mag = bias ? fabs(bias[m]) : 0, r;
          float got;
          for (c = 0; c < Cg; c++)
            for (ki = 0; ki < p->kh; ki++)
              for (kj = 0; kj < p->kw; kj++) {
                const int ih = oh * p->stride_h - p->pad_t + ki * p->dil_h;
                const int iw = ow * p->stride_w - p->pad_l + kj * p->dil_w;
                double t;
                if (ih < 0 || ih >= p->H || iw < 0 || iw >= p->W) continue;
                t = (double)x[(((size_t)n * p->C + g * Cg + c) * p->H + ih) * p->W + iw] *
                    w[(((size_t)m * Cg + c) * p->kh + ki) * p->kw + kj];
                ref += t;
                mag += fabs(t);
              }
          r = act_ref(ref, p->act, p->act_a, p->act_b);
          got = y[(((size_t)n * p->M + m) * p->OH + oh) * p->OW + ow];
          if (!(fabs(got - r) <=
                act_tol((4.0 * sqrt((double)Cg * p->kh * p->kw) + 8.0) * FLT_EPSILON * mag, r)))
            fail_msg("conv N%d C%d H%d W%d M%d k%dx%d g%d s%d,%d d%d,%d p%d,%d,%d,%d act%d: "
                     "y[%d][%d][%d][%d] = %.9g, reference %.9g", p->N, p->C, p->H, p->W,
                     p->M, p->kh, p->kw, p->group, p->stride_h, p->stride_w, p->dil_h,
                     p->dil_w, p->pad_t, p->pad_l, p->pad_b, p->pad_r, (int)p->act, n, m,
                     oh, ow, got, r);
        }
}

/* Runs one mg_conv2d (p as given, or with weights prepared for panel height mr
 * when mr > 0 and p's layer has a preparation) into a fresh y and checks it. */
static void run_conv(const mg_conv2d_params *p0, int mr, const float *x, const float *w,
                     const float *bias) {
  mg_conv2d_params p = *p0;
  const size_t ny = (size_t)p.N * p.M * p.OH * p.OW;
  float *y = malloc((ny + 1) * sizeof(float)), *pw = NULL;
  scratch_buf s;
  size_t i;
  if (mr > 0) {
    p.prepared = (int)mg_conv2d_prep_kind(&p);
    if (p.prepared == MG_CONV_PREP_NONE) {
      free(y);
      return;
    }
    p.prepared_mr = mr;
    pw = malloc(mg_conv2d_prepared_floats(&p) * sizeof(float));
    assert_non_null(pw);
    mg_conv2d_prepare(&p, w, pw);
  }
  s = scratch_new(mg_conv2d_scratch(&p));
  assert_non_null(y);
  for (i = 0; i <= ny; i++) y[i] = NAN; /* y is write-only; y[ny] is a guard */
  mg_conv2d(&p, x, pw ? pw : w, bias, y, s.p);
  assert_true(isnan(y[ny]));
  check_conv_result(&p, x, w, bias, y);
  scratch_check_free(s);
  free(pw);
  free(y);
}

/* Checks mg_conv2d on random data: with the weights as they are, and prepared
 * (mg_conv2d_prepare) for this runtime's panel height and for the others a blob
 * may have been made for (the repacking path). */
static void check_conv(const mg_conv2d_params *p, int with_bias) {
  const size_t nx = (size_t)p->N * p->C * p->H * p->W;
  const size_t nw = (size_t)p->M * (p->C / p->group) * p->kh * p->kw;
  float *x = rnd_array(nx), *w = rnd_array(nw), *bias = with_bias ? rnd_array((size_t)p->M) : NULL;
  const int mrs[] = {0, mg_sgemm_mr(), mg_sgemm_mr() == 6 ? 8 : 6};
  size_t k;
  for (k = 0; k < sizeof mrs / sizeof mrs[0]; k++) run_conv(p, mrs[k], x, w, bias);
  free(x);
  free(w);
  free(bias);
}

/* Fills OH/OW; returns 0 when the kernel does not fit the padded input. */
static int finish_params(mg_conv2d_params *p) {
  p->OH = mg_conv_out_dim(p->H, p->kh, p->stride_h, p->dil_h, p->pad_t, p->pad_b);
  p->OW = mg_conv_out_dim(p->W, p->kw, p->stride_w, p->dil_w, p->pad_l, p->pad_r);
  return p->OH >= 1 && p->OW >= 1;
}

/* kind 0: general (groups 1..3), 1: depthwise (multiplier 1..2), 2: pointwise */
static void rnd_conv(mg_conv2d_params *p, int kind) {
  memset(p, 0, sizeof *p);
  do {
    const int G = kind == 1 ? rnd_int(2, 12) : rnd_int(1, 3);
    p->group = G;
    p->N = rnd_int(1, 2);
    p->C = kind == 1 ? G : G * rnd_int(1, 7);
    p->M = kind == 1 ? G * rnd_int(1, 2) : G * rnd_size(20);
    p->H = rnd_int(1, 19);
    p->W = rnd_size(40);
    if (kind == 2) {
      p->kh = p->kw = p->stride_h = p->stride_w = p->dil_h = p->dil_w = 1;
    } else {
      p->kh = rnd_int(1, 5);
      p->kw = rnd_int(1, 5);
      p->stride_h = rnd_int(1, 3);
      p->stride_w = rnd_int(1, 3);
      p->dil_h = rnd_int(1, 3);
      p->dil_w = rnd_int(1, 3);
      p->pad_t = rnd_int(0, 3);
      p->pad_l = rnd_int(0, 3);
      p->pad_b = rnd_int(0, 3);
      p->pad_r = rnd_int(0, 3);
    }
    rnd_act(&p->act, &p->act_a, &p->act_b);
  } while (!finish_params(p));
}

static void test_conv_random(void **state) {
  int t;
  mg_conv2d_params p;
  (void)state;
  for (t = 0; t < 300; t++) {
    rnd_conv(&p, 0);
    check_conv(&p, rnd() & 1);
  }
}

static void test_conv_depthwise(void **state) {
  int t;
  mg_conv2d_params p;
  (void)state;
  for (t = 0; t < 300; t++) {
    rnd_conv(&p, 1);
    check_conv(&p, rnd() & 1);
  }
}

static void test_conv_pointwise(void **state) {
  int t;
  mg_conv2d_params p;
  (void)state;
  for (t = 0; t < 100; t++) {
    rnd_conv(&p, 2);
    check_conv(&p, rnd() & 1);
  }
}

static mg_conv2d_params conv(int N, int C, int H, int W, int M, int k, int group, int s,
                             int d, int pad, mg_act act) {
  mg_conv2d_params p;
  memset(&p, 0, sizeof p);
  p.N = N, p.C = C, p.H = H, p.W = W, p.M = M, p.kh = p.kw = k, p.group = group;
  p.stride_h = p.stride_w = s, p.dil_h = p.dil_w = d;
  p.pad_t = p.pad_l = p.pad_b = p.pad_r = pad;
  p.act = act;
  p.act_a = 0.0f, p.act_b = 6.0f;
  assert_true(finish_params(&p));
  return p;
}

/* Network-like layers: a resnet stem, a 3x3 large enough that im2col runs in
 * several chunks, a strided 1x1 (im2col, not pointwise), mobilenet depthwise 3x3
 * at strides 1 and 2 (wide rows: the AVX2 row loops), a grouped 3x3. */
static void test_conv_layers(void **state) {
  mg_conv2d_params p;
  (void)state;
  p = conv(1, 3, 40, 40, 16, 7, 1, 2, 1, 3, MG_ACT_RELU); check_conv(&p, 1);
  p = conv(1, 64, 32, 32, 8, 3, 1, 1, 1, 1, MG_ACT_NONE); check_conv(&p, 0);
  assert_true((size_t)64 * 9 * 32 * 32 > (1u << 19)); /* chunked */
  p = conv(2, 16, 15, 15, 24, 1, 1, 2, 1, 0, MG_ACT_CLIP); check_conv(&p, 1);
  p = conv(1, 32, 57, 57, 32, 3, 32, 1, 1, 1, MG_ACT_CLIP); check_conv(&p, 1);
  p = conv(1, 32, 57, 57, 32, 3, 32, 2, 1, 1, MG_ACT_CLIP); check_conv(&p, 1);
  p = conv(1, 16, 50, 50, 16, 5, 16, 2, 2, 4, MG_ACT_HARDSWISH); check_conv(&p, 1);
  p = conv(1, 32, 14, 14, 64, 3, 8, 1, 1, 1, MG_ACT_SILU); check_conv(&p, 1);
  p = conv(1, 1, 9, 9, 1, 3, 1, 1, 1, 0, MG_ACT_NONE); check_conv(&p, 0);
}

/* The specialised depthwise row kernels (3x3 and 5x5 at strides 1 and 2, 7x7 at 1, undilated)
 * over widths from narrower than the kernel (no interior) to several vectors with
 * odd tails, every padding up to K-1 on each side, multipliers 1 and 2. */
static void test_conv_depthwise_specialised(void **state) {
  mg_conv2d_params p;
  int t;
  (void)state;
  for (t = 0; t < 240; t++) {
    const int k = t % 3 == 2 ? 7 : (t & 1) ? 5 : 3, s = k != 7 && (t & 2) ? 2 : 1;
    memset(&p, 0, sizeof p);
    p.N = rnd_int(1, 2);
    p.group = p.C = rnd_int(1, 5);
    p.M = p.C * rnd_int(1, 2);
    p.H = rnd_int(1, 12);
    p.W = rnd_int(1, 45);
    p.kh = p.kw = k;
    p.stride_h = p.stride_w = s;
    p.dil_h = p.dil_w = 1;
    p.pad_t = rnd_int(0, k - 1);
    p.pad_l = rnd_int(0, k - 1);
    p.pad_b = rnd_int(0, k - 1);
    p.pad_r = rnd_int(0, k - 1);
    rnd_act(&p.act, &p.act_a, &p.act_b);
    if (!finish_params(&p) || p.group < 2) continue;
    assert_int_equal(mg_conv2d_kernel(&p), MG_CONV_DEPTHWISE);
    check_conv(&p, rnd() & 1);
  }
}

/* 3x3, stride-1, undilated layers with at least 8 channels per group and 32 2x2
 * output tiles (the Winograd F(2x2, 3x3) path): odd and even output sizes, every
 * padding up to 2 on each side (asymmetric too), groups, batches, activations. */
static void test_conv_winograd(void **state) {
  mg_conv2d_params p;
  int t;
  (void)state;
  for (t = 0; t < 60; t++) {
    memset(&p, 0, sizeof p);
    p.N = rnd_int(1, 2);
    p.group = rnd_int(1, 2);
    p.C = p.group * rnd_int(8, 24);
    p.M = p.group * rnd_int(8, 20);
    p.H = rnd_int(8, 21);
    p.W = rnd_int(8, 37);
    p.kh = p.kw = 3;
    p.stride_h = p.stride_w = p.dil_h = p.dil_w = 1;
    p.pad_t = rnd_int(0, 2);
    p.pad_l = rnd_int(0, 2);
    p.pad_b = rnd_int(0, 2);
    p.pad_r = rnd_int(0, 2);
    rnd_act(&p.act, &p.act_a, &p.act_b);
    if (!finish_params(&p) || (p.OH + 1) / 2 * ((p.OW + 1) / 2) < 32) continue;
    /* the strategy the planner selects kernels by (mg_conv2d_kernel's contract) */
    assert_int_equal(mg_conv2d_kernel(&p), MG_CONV_WINOGRAD);
    check_conv(&p, rnd() & 1);
  }
  /* resnet's layer1 3x3 (64 channels, 56x56, pad 1) */
  p = conv(1, 64, 56, 56, 64, 3, 1, 1, 1, 1, MG_ACT_RELU);
  check_conv(&p, 1);
}

static void test_conv_out_dim(void **state) {
  (void)state;
  assert_int_equal(mg_conv_out_dim(224, 7, 2, 1, 3, 3), 112);
  assert_int_equal(mg_conv_out_dim(56, 3, 1, 1, 1, 1), 56);
  assert_int_equal(mg_conv_out_dim(56, 3, 2, 1, 0, 1), 28);
  assert_int_equal(mg_conv_out_dim(10, 3, 1, 2, 0, 0), 6);
  assert_int_equal(mg_conv_out_dim(2, 5, 1, 1, 0, 0), 0);
}

/* ------------------------------------------------------------- int8 conv */

/* mg_q8_conv2d against the double-precision conv of the operands it stands for,
 * quantised here independently: x -> (clamp(rint(x / s) + zp, lo, 255) - zp) * s,
 * w -> clamp(rint(w / ws), -127, 127) * ws with ws = max |w of the channel| / 127.
 * Only the float epilogue rounds, so the tolerance is a few ulps of S. */
static void q8_case(int N, int C, int H, int W, int M, int k, int stride, int pad, int group, int zp, mg_act act) {
  mg_q8_conv_params p;
  memset(&p, 0, sizeof p);
  p.conv.N = N, p.conv.C = C, p.conv.H = H, p.conv.W = W, p.conv.M = M, p.conv.kh = p.conv.kw = k;
  p.conv.group = group, p.conv.stride_h = p.conv.stride_w = stride, p.conv.dil_h = p.conv.dil_w = 1;
  p.conv.pad_t = p.conv.pad_l = p.conv.pad_b = p.conv.pad_r = pad;
  p.conv.OH = mg_conv_out_dim(H, k, stride, 1, pad, pad), p.conv.OW = mg_conv_out_dim(W, k, stride, 1, pad, pad);
  p.conv.act = act, p.conv.act_a = 0.0f, p.conv.act_b = 0.5f;
  const int Cg = C / group, Mg = M / group, K = Cg * k * k, OH = p.conv.OH, OW = p.conv.OW;
  const size_t nx = (size_t)N * C * H * W, nw = (size_t)M * K, ny = (size_t)N * M * OH * OW;
  float *x = malloc(nx * sizeof *x), *w = malloc(nw * sizeof *w), *b = malloc((size_t)M * sizeof *b);
  float *ws = malloc((size_t)M * sizeof *ws), *y = malloc(ny * sizeof *y);
  double *xd = malloc(nx * sizeof *xd), *wd = malloc(nw * sizeof *wd);
  void *wq = malloc(4096 + (size_t)M * (8 + (size_t)K + 3));
  float xmax = 0;
  for (size_t i = 0; i < nx; i++) {
    x[i] = zp ? rnd_float() : rnd_float() + 1.0f;
    if (fabsf(x[i]) > xmax) xmax = fabsf(x[i]);
  }
  for (size_t i = 0; i < nw; i++) w[i] = rnd_float();
  for (int m = 0; m < M; m++) b[m] = 0.5f * rnd_float();
  p.in_scale = xmax * 0.9f / (zp ? 127.0f : 255.0f); /* some values clip */
  p.in_zp = zp;
  for (size_t i = 0; i < nx; i++) {
    double q = nearbyint(x[i] / p.in_scale) + zp;
    q = q < (zp ? 1 : 0) ? (zp ? 1 : 0) : q > 255 ? 255 : q;
    xd[i] = (q - zp) * p.in_scale;
  }
  for (int m = 0; m < M; m++) {
    float a = 0;
    for (int i = 0; i < K; i++) a = fmaxf(a, fabsf(w[(size_t)m * K + i]));
    ws[m] = a / 127.0f;
    for (int i = 0; i < K; i++) {
      double q = nearbyint(w[(size_t)m * K + i] / ws[m]);
      wd[(size_t)m * K + i] = (q < -127 ? -127 : q > 127 ? 127 : q) * ws[m];
    }
  }
  assert_true(mg_q8_conv_prepared_bytes(&p) <= 4096 + (size_t)M * (8 + (size_t)K + 3));
  mg_q8_conv_prepare(&p, w, ws, wq);
  float *scratch = malloc(mg_q8_conv2d_scratch(&p) * sizeof(float));
  mg_q8_conv2d(&p, x, wq, b, y, scratch);
  for (int n = 0; n < N; n++)
    for (int m = 0; m < M; m++)
      for (int oh = 0; oh < OH; oh++)
        for (int ow = 0; ow < OW; ow++) {
          const int g = m / Mg;
          double acc = b[m], mag = fabs(b[m]);
          for (int c = 0; c < Cg; c++)
            for (int i = 0; i < k; i++)
              for (int j = 0; j < k; j++) {
                const int ih = oh * stride - pad + i, iw = ow * stride - pad + j;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                const double t = xd[(((size_t)n * C + g * Cg + c) * H + ih) * W + iw] * wd[((size_t)m * Cg + c) * k * k + i * k + j];
                acc += t, mag += fabs(t);
              }
          if (act == MG_ACT_RELU) acc = acc < 0 ? 0 : acc;
          if (act == MG_ACT_CLIP) acc = acc < 0 ? 0 : acc > 0.5 ? 0.5 : acc;
          const double got = y[(((size_t)n * M + m) * OH + oh) * OW + ow];
          if (fabs(got - acc) > 1e-5 * mag + 1e-6)
            fail_msg("q8 conv C%d M%d k%d s%d g%d zp%d: y[%d,%d,%d,%d] = %g, want %g", C, M, k, stride, group, zp,
                     n, m, oh, ow, got, acc);
        }
  free(x), free(w), free(b), free(ws), free(y), free(xd), free(wd), free(wq), free(scratch);
}

static void test_q8_conv(void **state) {
  (void)state;
  q8_case(1, 5, 9, 11, 6, 3, 1, 1, 1, 128, MG_ACT_NONE);   /* K = 45: a K tail; M = 6: a row tail */
  q8_case(2, 16, 7, 10, 8, 1, 1, 0, 1, 0, MG_ACT_RELU);    /* 1x1, 70 positions: a column tail */
  q8_case(1, 3, 23, 23, 4, 7, 2, 3, 1, 128, MG_ACT_CLIP);  /* stem-like: 7x7 stride 2 */
  q8_case(1, 8, 12, 12, 8, 3, 2, 1, 8, 0, MG_ACT_RELU);    /* depthwise, stride 2 */
  q8_case(1, 4, 9, 9, 8, 3, 1, 1, 4, 128, MG_ACT_NONE);    /* depthwise, multiplier 2 */
  q8_case(1, 8, 6, 6, 6, 3, 1, 1, 2, 128, MG_ACT_NONE);    /* two groups */
  q8_case(1, 40, 20, 20, 9, 3, 1, 1, 1, 0, MG_ACT_NONE);   /* 400 positions: several tiles */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_expand_16bit), cmocka_unit_test(test_sgemm_random),
      cmocka_unit_test(test_sgemm_tile_edges),
      cmocka_unit_test(test_sgemm_block_edges),
      cmocka_unit_test(test_sgemm_degenerate),
      cmocka_unit_test(test_sgemm_prepb),
      cmocka_unit_test(test_sgemm_scratch_monotonic),
      cmocka_unit_test(test_bias_act),
      cmocka_unit_test(test_conv_out_dim),
      cmocka_unit_test(test_conv_random),
      cmocka_unit_test(test_conv_depthwise),
      cmocka_unit_test(test_conv_depthwise_specialised),
      cmocka_unit_test(test_conv_pointwise),
      cmocka_unit_test(test_conv_layers),
      cmocka_unit_test(test_conv_winograd),
      cmocka_unit_test(test_q8_conv),
  };
#if defined(MG_TEST_REQUIRE_AVX2) && (defined(__GNUC__) || defined(__clang__))
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    printf("CPU lacks AVX2/FMA: skipping the AVX2 build of the runtime tests\n");
    return 77;
  }
#endif
#if defined(MG_TEST_REQUIRE_VNNI) && (defined(__GNUC__) || defined(__clang__))
  if (!__builtin_cpu_supports("avx512vnni") || !__builtin_cpu_supports("avx512bw")) {
    printf("CPU lacks AVX-512 VNNI: skipping the VNNI build of the runtime tests\n");
    return 77;
  }
#endif
#if defined(MG_TEST_REQUIRE_AVX512) && (defined(__GNUC__) || defined(__clang__))
  if (!__builtin_cpu_supports("avx512f")) {
    printf("CPU lacks AVX-512: skipping the AVX-512 build of the runtime tests\n");
    return 77;
  }
#endif
  printf("runtime path: %s\n", mg_runtime_path());
  return cmocka_run_group_tests(tests, NULL, NULL);
}
