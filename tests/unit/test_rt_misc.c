/* Unit tests for the misc family of runtime/ (misc.c, quant.c): each kernel
 * against a naive reference written here (coordinates walked one by one, sums in
 * double or int64), over randomised shapes with size-1 dims and odd sizes, plus
 * the ONNX examples for rounding ties and saturation. Built against migcruntime
 * and with the runtime compiled in under MG_RUNTIME_PORTABLE. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mg_runtime.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint32_t rnd(void) { /* xorshift64*: deterministic */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (uint32_t)((rng_state * 0x2545F4914F6CDD1Dull) >> 32);
}
static int rnd_int(int lo, int hi) { return lo + (int)(rnd() % (uint32_t)(hi - lo + 1)); }
static double rnd_unit(void) { return (double)rnd() / 4294967296.0 * 4.0 - 2.0; }
static int rnd_dim(void) { return rnd_int(0, 3) == 0 ? 1 : rnd_int(1, 6); }

static void assert_close(double got, double want, double rtol, double atol) {
  if (isnan(want)) {
    assert_true(isnan(got));
    return;
  }
  if (fabs(got - want) > atol + rtol * fabs(want)) {
    fprintf(stderr, "got %.9g want %.9g\n", got, want);
    fail_msg("mismatch");
  }
}

/* ---------------------------------------------------------------- losses */

/* NLL and SoftmaxCrossEntropy over random [N, C, d...] with every reduction,
 * with and without weight and ignore_index, int32 and int64 targets, float32 and
 * float64. The reference is written per coordinate. */
static void test_losses(void **state) {
  (void)state;
  for (int iter = 0; iter < 300; iter++) {
    const int N = rnd_dim(), C = rnd_int(1, 6), nsp = rnd_int(0, 3), f64 = iter % 3 == 0;
    int64_t D = 1;
    for (int i = 0; i < nsp; i++) D *= rnd_dim();
    const int64_t nx = N * C * D, nt = N * D;
    double *x = malloc(sizeof(double) * (size_t)nx), *w = malloc(sizeof(double) * (size_t)C);
    double *ref_loss = malloc(sizeof(double) * (size_t)nt), *ref_lp = malloc(sizeof(double) * (size_t)nx);
    int64_t *tg = malloc(sizeof(int64_t) * (size_t)nt);
    int32_t *tg32 = malloc(sizeof(int32_t) * (size_t)nt);
    float *xf = malloc(sizeof(float) * (size_t)nx), *wf = malloc(sizeof(float) * (size_t)C);
    void *out = malloc(sizeof(double) * (size_t)nt), *lp = malloc(sizeof(double) * (size_t)nx);
    mg_loss_params p;
    const int softmax = iter % 2, weighted = rnd_int(0, 1);
    memset(&p, 0, sizeof p);
    p.N = N, p.C = C, p.D = D, p.t = f64 ? MG_RT_F64 : MG_RT_F32, p.target_i64 = rnd_int(0, 1);
    p.has_ignore = rnd_int(0, 1), p.ignore_index = rnd_int(-1, C - 1);
    p.reduction = (mg_loss_reduction)rnd_int(0, 2);
    for (int64_t i = 0; i < nx; i++) xf[i] = (float)(softmax ? rnd_unit() * 3 : -fabs(rnd_unit())), x[i] = xf[i];
    for (int i = 0; i < C; i++) wf[i] = (float)(fabs(rnd_unit()) + 0.1), w[i] = weighted ? wf[i] : 1;
    for (int64_t i = 0; i < nt; i++) tg[i] = p.has_ignore && rnd_int(0, 3) == 0 ? p.ignore_index : rnd_int(0, C - 1), tg32[i] = (int32_t)tg[i];
    /* the reference: log-softmax per (n, d) when softmax, then the NLL terms */
    for (int n = 0; n < N; n++)
      for (int64_t d = 0; d < D; d++) {
        double mx = -INFINITY, s = 0;
        for (int c = 0; c < C; c++) mx = fmax(mx, x[(n * C + c) * D + d]);
        for (int c = 0; c < C; c++) s += exp(x[(n * C + c) * D + d] - mx);
        for (int c = 0; c < C; c++)
          ref_lp[(n * C + c) * D + d] = softmax ? x[(n * C + c) * D + d] - mx - log(s) : x[(n * C + c) * D + d];
      }
    double sum = 0, wsum = 0;
    for (int n = 0; n < N; n++)
      for (int64_t d = 0; d < D; d++) {
        const int64_t t = tg[n * D + d];
        if (p.has_ignore && t == p.ignore_index) {
          ref_loss[n * D + d] = 0;
          continue;
        }
        ref_loss[n * D + d] = -w[t] * ref_lp[(n * C + t) * D + d];
        sum += ref_loss[n * D + d], wsum += w[t];
      }
    const void *xin = f64 ? (const void *)x : (const void *)xf, *win = weighted ? (f64 ? (const void *)w : (const void *)wf) : NULL;
    const void *tin = p.target_i64 ? (const void *)tg : (const void *)tg32;
    if (softmax) mg_softmax_cross_entropy(&p, xin, tin, win, out, lp);
    else mg_nll_loss(&p, xin, tin, win, out);
    const double tol = f64 ? 1e-12 : 1e-5;
    if (p.reduction == MG_LOSS_NONE) {
      for (int64_t i = 0; i < nt; i++)
        assert_close(f64 ? ((double *)out)[i] : ((float *)out)[i], ref_loss[i], tol, tol);
    } else {
      const double want = p.reduction == MG_LOSS_SUM ? sum : sum / wsum;
      assert_close(f64 ? ((double *)out)[0] : ((float *)out)[0], want, tol, tol);
    }
    if (softmax)
      for (int64_t i = 0; i < nx; i++) assert_close(f64 ? ((double *)lp)[i] : ((float *)lp)[i], ref_lp[i], tol, tol);
    free(x), free(w), free(ref_loss), free(ref_lp), free(tg), free(tg32), free(xf), free(wf), free(out), free(lp);
  }
}

/* float16 output rounds once, and an out-of-range target gives NaN. */
static void test_loss_edges(void **state) {
  (void)state;
  mg_loss_params p = {1, 3, 1, MG_RT_F32, 1, 0, 0, MG_LOSS_SUM};
  const float x[3] = {-1, -2, -3};
  const int64_t bad = 3, good = 2;
  float y;
  mg_nll_loss(&p, x, &bad, NULL, &y);
  assert_true(isnan(y));
  mg_nll_loss(&p, x, &good, NULL, &y);
  assert_true(y == 3.0f);
  uint16_t h[3] = {mg_rt_f32_to_f16(-1), mg_rt_f32_to_f16(-2), mg_rt_f32_to_f16(-0.333251953125f)}, yh;
  p.t = MG_RT_F16;
  mg_nll_loss(&p, h, &good, NULL, &yh);
  assert_true(mg_rt_f16_to_f32(yh) == 0.333251953125f);
}

/* ---------------------------------------------------------------- Range */

static void test_range(void **state) {
  (void)state;
  float fs = 1.5f, fd = -0.25f, fy[7];
  mg_range(MG_RT_F32, &fs, &fd, 7, fy);
  for (int i = 0; i < 7; i++) assert_true(fy[i] == (float)(1.5 - 0.25 * i));
  int32_t is = 10, id = -3, iy[4];
  mg_range(MG_RT_I32, &is, &id, 4, iy);
  for (int i = 0; i < 4; i++) assert_int_equal(iy[i], 10 - 3 * i);
  int64_t ls = INT64_MAX - 1, ld = 1, ly[3];
  mg_range(MG_RT_I64, &ls, &ld, 3, ly); /* wraps as two's complement */
  assert_true(ly[0] == INT64_MAX - 1 && ly[1] == INT64_MAX && ly[2] == INT64_MIN);
  int16_t ss = 5, sd = 2, sy[3];
  mg_range(MG_RT_I16, &ss, &sd, 3, sy);
  assert_true(sy[0] == 5 && sy[1] == 7 && sy[2] == 9);
  double ds = -1, dd = 0.1, dy[5];
  mg_range(MG_RT_F64, &ds, &dd, 5, dy);
  for (int i = 0; i < 5; i++) assert_true(dy[i] == -1 + i * 0.1);
}

/* ---------------------------------------------------------------- Einsum */

/* Batched matmul "bij,bjk->bik" (with B broadcast over b when its batch is 1) and
 * its float64 / int32 forms, against a triple loop. */
static void test_einsum_matmul(void **state) {
  (void)state;
  for (int iter = 0; iter < 100; iter++) {
    const int Bt = rnd_dim(), I = rnd_dim(), J = rnd_int(0, 6), K = rnd_dim(), bb = rnd_int(0, 1) ? Bt : 1;
    const int kind = iter % 3; /* 0 f32, 1 f64, 2 i32 */
    double *a = malloc(sizeof(double) * (size_t)(Bt * I * J + 1)), *b = malloc(sizeof(double) * (size_t)(bb * J * K + 1));
    float *af = malloc(sizeof(float) * (size_t)(Bt * I * J + 1)), *bf = malloc(sizeof(float) * (size_t)(bb * J * K + 1));
    int32_t *ai = malloc(sizeof(int32_t) * (size_t)(Bt * I * J + 1)), *bi = malloc(sizeof(int32_t) * (size_t)(bb * J * K + 1));
    double *y = malloc(sizeof(double) * (size_t)(Bt * I * K));
    for (int i = 0; i < Bt * I * J; i++) ai[i] = rnd_int(-9, 9), af[i] = (float)rnd_unit(), a[i] = kind == 2 ? ai[i] : af[i];
    for (int i = 0; i < bb * J * K; i++) bi[i] = rnd_int(-9, 9), bf[i] = (float)rnd_unit(), b[i] = kind == 2 ? bi[i] : bf[i];
    /* labels: b, i, k (output) then j (summed) */
    const int64_t dims[4] = {Bt, I, K, J};
    const int64_t st[8] = {I * J, J, 0, 1, bb == 1 ? 0 : J * K, 0, 1, K};
    const void *ops[2];
    const mg_rt_dtype t = kind == 0 ? MG_RT_F32 : kind == 1 ? MG_RT_F64 : MG_RT_I32;
    ops[0] = kind == 0 ? (const void *)af : kind == 1 ? (const void *)a : (const void *)ai;
    ops[1] = kind == 0 ? (const void *)bf : kind == 1 ? (const void *)b : (const void *)bi;
    mg_einsum(t, 2, ops, 3, 4, dims, st, y);
    for (int q = 0; q < Bt; q++)
      for (int i = 0; i < I; i++)
        for (int k = 0; k < K; k++) {
          double s = 0;
          for (int j = 0; j < J; j++) s += a[(q * I + i) * J + j] * b[((bb == 1 ? 0 : q) * J + j) * K + k];
          const int o = (q * I + i) * K + k;
          const double got = kind == 0 ? ((float *)y)[o] : kind == 1 ? y[o] : ((int32_t *)y)[o];
          assert_close(got, s, 1e-6, 1e-6);
        }
    free(a), free(b), free(af), free(bf), free(ai), free(bi), free(y);
  }
}

/* Trace "ii->", diagonal "ii->i", transpose "ij->ji", a 3-operand product
 * "i,i,i->" in wrapping int64, and a scalar "->". */
static void test_einsum_shapes(void **state) {
  (void)state;
  float m[16], y[16];
  for (int i = 0; i < 16; i++) m[i] = (float)(i * 0.5 - 3);
  const void *ops1[1] = {m};
  { /* trace: one summed label with stride n+1 */
    const int64_t dims[1] = {4}, st[1] = {5};
    mg_einsum(MG_RT_F32, 1, ops1, 0, 1, dims, st, y);
    assert_true(y[0] == m[0] + m[5] + m[10] + m[15]);
  }
  { /* diagonal */
    const int64_t dims[1] = {4}, st[1] = {5};
    mg_einsum(MG_RT_F32, 1, ops1, 1, 1, dims, st, y);
    for (int i = 0; i < 4; i++) assert_true(y[i] == m[i * 5]);
  }
  { /* transpose of a 2 x 8 */
    const int64_t dims[2] = {8, 2}, st[2] = {1, 8};
    mg_einsum(MG_RT_F32, 1, ops1, 2, 2, dims, st, y);
    for (int j = 0; j < 8; j++)
      for (int i = 0; i < 2; i++) assert_true(y[j * 2 + i] == m[i * 8 + j]);
  }
  { /* int64 wraps */
    const int64_t v[2] = {INT64_C(1) << 40, 3}, dims[1] = {2}, st[3] = {1, 1, 1};
    const void *ops3[3] = {v, v, v};
    int64_t r;
    mg_einsum(MG_RT_I64, 3, ops3, 0, 1, dims, st, &r);
    assert_true(r == 27); /* (2^40)^3 = 2^120 wraps to 0, plus 3^3 */
  }
  { /* a scalar times a scalar */
    const float s1 = 1.5f, s2 = -2;
    const void *ops2[2] = {&s1, &s2};
    const int64_t dims[1] = {1}, st[2] = {0, 0};
    mg_einsum(MG_RT_F32, 2, ops2, 0, 0, dims, st, y);
    assert_true(y[0] == -3);
  }
  { /* an empty summed label gives zeros */
    const int64_t dims[2] = {3, 0}, st[2] = {0, 1};
    mg_einsum(MG_RT_F32, 1, ops1, 1, 2, dims, st, y);
    assert_true(y[0] == 0 && y[1] == 0 && y[2] == 0);
  }
}

/* ---------------------------------------------------------------- Det */

/* Laplace expansion along the first row (m <= 6). */
static double det_ref(const double *a, int m) {
  if (m == 0) return 1;
  if (m == 1) return a[0];
  double s = 0, sub[36];
  for (int c = 0; c < m; c++) {
    int k = 0;
    for (int i = 1; i < m; i++)
      for (int j = 0; j < m; j++)
        if (j != c) sub[k++] = a[i * m + j];
    s += (c % 2 ? -1 : 1) * a[c] * det_ref(sub, m - 1);
  }
  return s;
}

static void test_det(void **state) {
  (void)state;
  float scratch[2 * 36 + 4 + 1];
  for (int iter = 0; iter < 200; iter++) {
    const int m = rnd_int(0, 6), batch = rnd_int(1, 3), f64 = iter % 2;
    double a[3 * 36], y[3];
    float af[3 * 36], yf[3];
    for (int i = 0; i < batch * m * m; i++) af[i] = (float)rnd_unit(), a[i] = af[i];
    if (iter % 10 == 0 && m >= 2) /* singular: two equal rows */
      for (int j = 0; j < m; j++) af[m + j] = af[j], a[m + j] = a[j];
    mg_det(f64 ? MG_RT_F64 : MG_RT_F32, batch, m, f64 ? (const void *)a : (const void *)af, f64 ? (void *)y : (void *)yf,
           scratch + iter % 2); /* odd float offset: the kernel aligns */
    for (int b = 0; b < batch; b++)
      assert_close(f64 ? y[b] : yf[b], det_ref(a + b * m * m, m), 1e-5, 1e-5);
  }
  assert_true(mg_det_scratch(6) + 1 <= sizeof scratch / sizeof *scratch);
}

/* ---------------------------------------------------------- quantisation */

static double sat(double v, double lo, double hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Per tensor and per axis, float32 and float64 x, uint8/int8/int16 outputs, with
 * ties and saturating values; then DequantizeLinear of the result. */
static void test_quantize(void **state) {
  (void)state;
  for (int iter = 0; iter < 200; iter++) {
    const int outer = rnd_dim(), len = rnd_int(0, 1) ? rnd_dim() : 1, inner = rnd_dim(), n = outer * len * inner;
    const int qk = rnd_int(0, 2), f64 = iter % 4 == 0, has_zp = rnd_int(0, 3) != 0;
    const mg_rt_dtype qt = qk == 0 ? MG_RT_U8 : qk == 1 ? MG_RT_I8 : MG_RT_I16;
    const double lo = qk == 0 ? 0 : qk == 1 ? -128 : -32768, hi = qk == 0 ? 255 : qk == 1 ? 127 : 32767;
    float xf[300], sf[6];
    double xd[300], sd[6], back[300];
    int16_t zp16[6], y16[300];
    uint8_t zp8[6], y8[300];
    float dq[300];
    for (int c = 0; c < len; c++) {
      sf[c] = (float)(0.01 + fabs(rnd_unit())), sd[c] = sf[c];
      zp16[c] = (int16_t)rnd_int((int)lo / 2, (int)hi / 2);
      if (qt == MG_RT_U8) zp8[c] = (uint8_t)rnd_int(0, 255);
      else if (qt == MG_RT_I8) zp8[c] = (uint8_t)(int8_t)rnd_int(-128, 127);
    }
    for (int i = 0; i < n; i++) {
      const int c = (i / inner) % len;
      const int r = rnd_int(0, 5);
      double v = r == 0 ? (rnd_int(-20, 20) + 0.5) * sf[c] : r == 1 ? rnd_unit() * 1e5 : rnd_unit() * 100 * sf[c];
      xf[i] = (float)v, xd[i] = f64 ? v : xf[i];
    }
    mg_quant_params p = {outer, len, inner, f64 ? MG_RT_F64 : MG_RT_F32, MG_RT_F32, qt};
    void *y = qt == MG_RT_I16 ? (void *)y16 : (void *)y8;
    const void *zp = !has_zp ? NULL : qt == MG_RT_I16 ? (const void *)zp16 : (const void *)zp8;
    mg_quantize_linear(&p, f64 ? (const void *)xd : (const void *)xf, sf, zp, y);
    for (int i = 0; i < n; i++) {
      const int c = (i / inner) % len;
      const double z = !has_zp ? 0 : qt == MG_RT_I16 ? zp16[c] : qt == MG_RT_I8 ? (int8_t)zp8[c] : zp8[c];
      const double quot = f64 ? xd[i] / sd[c] : (double)(float)(xf[i] / sf[c]);
      const double want = sat(rint(quot) + z, lo, hi);
      const double got = qt == MG_RT_I16 ? y16[i] : qt == MG_RT_I8 ? (int8_t)y8[i] : y8[i];
      if (got != want) fail_msg("quantize %d: got %g want %g (x %.9g)", i, got, want, xd[i]);
      back[i] = (got - z) * sd[c];
    }
    mg_quant_params d = {outer, len, inner, qt, MG_RT_F32, MG_RT_U8};
    mg_dequantize_linear(&d, y, sf, zp, dq);
    for (int i = 0; i < n; i++) assert_true(dq[i] == (float)back[i]);
  }
}

/* The ONNX examples: ties to even, NaN to 0, saturation; DynamicQuantizeLinear's
 * documented case and a random comparison with its definition. */
static void test_quantize_examples(void **state) {
  (void)state;
  const float x[8] = {0, 2, 3, 1000, -254, -1000, 2.5f, NAN}, s = 2;
  const uint8_t z = 128;
  uint8_t y[8];
  const uint8_t want[8] = {128, 129, 130, 255, 1, 0, 129, 0};
  mg_quant_params p = {1, 1, 8, MG_RT_F32, MG_RT_F32, MG_RT_U8};
  mg_quantize_linear(&p, x, &s, &z, y);
  assert_memory_equal(y, want, 8);
  p.x_t = MG_RT_I32, p.inner = 4; /* int32 input goes through the generic path */
  const int32_t xi[4] = {1, 3, 5, -600};
  mg_quantize_linear(&p, xi, &s, &z, y);
  assert_true(y[0] == 128 && y[1] == 130 && y[2] == 130 && y[3] == 0);

  const float dx[6] = {0, 2, -3, -2.5f, 1.34f, 0.5f};
  uint8_t dy[6], dz;
  float ds;
  const uint8_t dwant[6] = {153, 255, 0, 26, 221, 179};
  mg_dynamic_quantize_linear(6, dx, dy, &ds, &dz);
  assert_true(dz == 153);
  assert_close(ds, 0.0196078, 1e-5, 0);
  assert_memory_equal(dy, dwant, 6);
  for (int iter = 0; iter < 100; iter++) {
    float v[50];
    uint8_t q[50], zq;
    float sc;
    const int n = rnd_int(1, 50);
    const double off = rnd_unit() * 3;
    double mn = 0, mx = 0;
    for (int i = 0; i < n; i++) v[i] = (float)(rnd_unit() * 5 + off), mn = fmin(mn, v[i]), mx = fmax(mx, v[i]);
    mg_dynamic_quantize_linear(n, v, q, &sc, &zq);
    const float wsc = (float)((mx - mn) / 255.0);
    assert_close(sc, wsc, 1e-6, 0);
    assert_true(zq == (uint8_t)sat(rint(-mn / sc), 0, 255));
    for (int i = 0; i < n; i++) assert_true(q[i] == (uint8_t)sat(rint((float)(v[i] / sc)) + zq, 0, 255));
  }
  mg_dynamic_quantize_linear(3, dx, NULL, NULL, &dz); /* omitted outputs */
  assert_true(dz == 153);
}

/* ------------------------------------------------- integer matrix products */

/* An 8-bit value of dtype t (signed for I8). */
static int q8(mg_rt_dtype t, const uint8_t *p, int64_t i) { return t == MG_RT_I8 ? (int8_t)p[i] : p[i]; }

static void test_qmatmul(void **state) {
  (void)state;
  for (int iter = 0; iter < 150; iter++) {
    const int M = rnd_dim(), N = iter % 10 == 0 ? rnd_int(250, 300) : rnd_dim(), K = rnd_int(1, 9), batch = rnd_int(1, 3);
    mg_qmatmul_params p = {M, N, K, rnd_int(0, 1) ? MG_RT_I8 : MG_RT_U8, rnd_int(0, 1) ? MG_RT_I8 : MG_RT_U8,
                           rnd_int(0, 1), rnd_int(0, 1), rnd_int(0, 1), rnd_int(0, 1), rnd_int(0, 1) ? MG_RT_I8 : MG_RT_U8};
    uint8_t *a = malloc((size_t)(batch * M * K)), *b = malloc((size_t)(K * N)), azp[6], *bzp = malloc((size_t)N);
    uint8_t *yq = malloc((size_t)(batch * M * N)), yzp = (uint8_t)rnd_int(0, 255);
    int32_t *y = malloc(sizeof(int32_t) * (size_t)(batch * M * N));
    float as[6], *bs = malloc(sizeof(float) * (size_t)N), ys = (float)(fabs(rnd_unit()) * 50 + 1);
    int64_t aoff[3], boff[3];
    const int use_azp = rnd_int(0, 1), use_bzp = rnd_int(0, 1);
    for (int i = 0; i < batch * M * K; i++) a[i] = (uint8_t)rnd();
    for (int i = 0; i < K * N; i++) b[i] = (uint8_t)rnd();
    for (int i = 0; i < M; i++) azp[i] = (uint8_t)rnd(), as[i] = (float)(fabs(rnd_unit()) + 0.01);
    for (int j = 0; j < N; j++) bzp[j] = (uint8_t)rnd(), bs[j] = (float)(fabs(rnd_unit()) + 0.01);
    for (int t = 0; t < batch; t++) aoff[t] = t * M * K, boff[t] = 0; /* B broadcast */
    mg_matmul_integer(&p, batch, a, aoff, use_azp ? azp : NULL, b, boff, use_bzp ? bzp : NULL, y);
    mg_qlinear_matmul(&p, batch, a, aoff, as, use_azp ? azp : NULL, b, boff, bs, use_bzp ? bzp : NULL, &ys, &yzp, yq);
    for (int t = 0; t < batch; t++)
      for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
          int64_t s = 0;
          const int za = use_azp ? q8(p.a_t, azp, p.a_zp_per_row ? i : 0) : 0;
          const int zb = use_bzp ? q8(p.b_t, bzp, p.b_zp_per_col ? j : 0) : 0;
          for (int k = 0; k < K; k++) s += (int64_t)(q8(p.a_t, a, (t * M + i) * K + k) - za) * (q8(p.b_t, b, k * N + j) - zb);
          const int o = (t * M + i) * N + j;
          assert_int_equal(y[o], s);
          float m = as[p.a_scale_per_row ? i : 0] * bs[p.b_scale_per_col ? j : 0];
          m /= ys;
          const double lo = p.y_t == MG_RT_I8 ? -128 : 0, hi = p.y_t == MG_RT_I8 ? 127 : 255;
          const double want = sat(rint((double)s * m) + q8(p.y_t, &yzp, 0), lo, hi);
          if (q8(p.y_t, yq, o) != want) fail_msg("qlinear_matmul %d: got %d want %g", o, q8(p.y_t, yq, o), want);
        }
    free(a), free(b), free(bzp), free(yq), free(y), free(bs);
  }
}

/* ------------------------------------------------ integer convolutions */

static void test_qconv(void **state) {
  (void)state;
  for (int iter = 0; iter < 150; iter++) {
    const int G = rnd_int(1, 2), N = rnd_int(1, 2), C = G * rnd_int(1, 3), M = G * rnd_int(1, 3);
    const int kh = rnd_int(1, 3), kw = rnd_int(1, 3), sh = rnd_int(1, 2), sw = rnd_int(1, 2), dh = rnd_int(1, 2), dw = rnd_int(1, 2);
    const int pt = rnd_int(0, 2), pl = rnd_int(0, 2), pbm = rnd_int(0, 2), pr = rnd_int(0, 2);
    const int H = (kh - 1) * dh + 1 + rnd_int(0, 5), W = (kw - 1) * dw + 1 + rnd_int(0, 5);
    const int OH = (H + pt + pbm - (kh - 1) * dh - 1) / sh + 1, OW = (W + pl + pr - (kw - 1) * dw - 1) / sw + 1;
    mg_qconv2d_params p = {N, C, H, W, M, kh, kw, G, sh, sw, dh, dw, pt, pl, pbm, pr, OH, OW,
                           rnd_int(0, 1) ? MG_RT_I8 : MG_RT_U8, rnd_int(0, 1) ? MG_RT_I8 : MG_RT_U8,
                           rnd_int(0, 1), rnd_int(0, 1), rnd_int(0, 1) ? MG_RT_I8 : MG_RT_U8};
    const int nx = N * C * H * W, nw = M * (C / G) * kh * kw, ny = N * M * OH * OW;
    uint8_t *x = malloc((size_t)nx), *w = malloc((size_t)nw), *yq = malloc((size_t)ny), xzp = (uint8_t)rnd(), wzp[6];
    uint8_t yzp = (uint8_t)rnd();
    int32_t *y = malloc(sizeof(int32_t) * (size_t)ny), bias[6];
    float xs = (float)(fabs(rnd_unit()) + 0.01), ws[6], ys = (float)(fabs(rnd_unit()) * 100 + 1);
    const int use_bias = rnd_int(0, 1);
    for (int i = 0; i < nx; i++) x[i] = (uint8_t)rnd();
    for (int i = 0; i < nw; i++) w[i] = (uint8_t)rnd();
    for (int m = 0; m < M; m++) wzp[m] = (uint8_t)rnd(), ws[m] = (float)(fabs(rnd_unit()) + 0.01), bias[m] = rnd_int(-5000, 5000);
    mg_conv_integer(&p, x, &xzp, w, wzp, y);
    mg_qlinear_conv(&p, x, &xs, &xzp, w, ws, wzp, &ys, &yzp, use_bias ? bias : NULL, yq);
    for (int n = 0; n < N; n++)
      for (int m = 0; m < M; m++)
        for (int oh = 0; oh < OH; oh++)
          for (int ow = 0; ow < OW; ow++) {
            const int g = m / (M / G), cg = C / G, zw = q8(p.w_t, wzp, p.w_zp_per_channel ? m : 0);
            int64_t s = 0;
            for (int ci = 0; ci < cg; ci++)
              for (int u = 0; u < kh; u++)
                for (int v = 0; v < kw; v++) {
                  const int ih = oh * sh - pt + u * dh, iw = ow * sw - pl + v * dw;
                  if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                  s += (int64_t)(q8(p.x_t, x, ((n * C + g * cg + ci) * H + ih) * W + iw) - q8(p.x_t, &xzp, 0)) *
                       (q8(p.w_t, w, ((m * cg + ci) * kh + u) * kw + v) - zw);
                }
            const int o = ((n * M + m) * OH + oh) * OW + ow;
            assert_int_equal(y[o], s);
            float mul = xs * ws[p.w_scale_per_channel ? m : 0];
            mul /= ys;
            const double lo = p.y_t == MG_RT_I8 ? -128 : 0, hi = p.y_t == MG_RT_I8 ? 127 : 255;
            const double want = sat(rint((double)(s + (use_bias ? bias[m] : 0)) * mul + q8(p.y_t, &yzp, 0)), lo, hi);
            if (q8(p.y_t, yq, o) != want) fail_msg("qlinear_conv %d: got %d want %g", o, q8(p.y_t, yq, o), want);
          }
    free(x), free(w), free(yq), free(y);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_losses),        cmocka_unit_test(test_loss_edges),
      cmocka_unit_test(test_range),         cmocka_unit_test(test_einsum_matmul),
      cmocka_unit_test(test_einsum_shapes), cmocka_unit_test(test_det),
      cmocka_unit_test(test_quantize),      cmocka_unit_test(test_quantize_examples),
      cmocka_unit_test(test_qmatmul),       cmocka_unit_test(test_qconv),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
