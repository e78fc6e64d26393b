/* Unit tests for the nn runtime family (runtime/nn.c, resize.c, matmul.c and the
 * ConvTranspose of conv.c): each kernel against a naive double-precision reference
 * written here, over randomised shapes (size-1 dims, odd sizes, strides, dilations,
 * asymmetric pads, ceil-mode windows that hang past the input, broadcasting).
 *
 * Tolerance: results that are sums of n float terms may differ from the exact sum
 * by rounding only, about n*eps*sum|terms| in the worst case; the checks allow
 * (4*sqrt(n) + 8)*eps*mag, far below what a missing or doubled term would give.
 *
 * Built like test_runtime: against migcruntime, with -mavx2 -mfma, and with
 * MG_RUNTIME_PORTABLE and tiny SGEMM blocks (tests/CMakeLists.txt). */
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

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;

static uint32_t rnd(void) { /* xorshift64* */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (uint32_t)((rng_state * 0x2545F4914F6CDD1Dull) >> 32);
}
static int rnd_int(int lo, int hi) { return lo + (int)(rnd() % (uint32_t)(hi - lo + 1)); }
static float rnd_float(void) { return (float)((double)rnd() / 4294967296.0 * 2.0 - 1.0); }

static float *rnd_array(size_t n) {
  float *a = malloc((n ? n : 1) * sizeof(float));
  size_t i;
  assert_non_null(a);
  for (i = 0; i < n; i++) a[i] = rnd_float();
  return a;
}

/* An output buffer of n floats filled with NaN plus a guard after it. */
static float *out_array(size_t n) {
  float *a = malloc((n + 1) * sizeof(float));
  size_t i;
  assert_non_null(a);
  for (i = 0; i <= n; i++) a[i] = NAN;
  a[n] = 4321.0f;
  return a;
}
static void out_check_free(float *a, size_t n) {
  assert_true(a[n] == 4321.0f);
  free(a);
}

static double sum_tol(double mag, double n) {
  return (4.0 * sqrt(n) + 8.0) * FLT_EPSILON * mag + 1e-30;
}

static void expect_near(double got, double ref, double tol, const char *what, size_t at) {
  if (isnan(ref) && isnan(got)) return;
  if (isinf(ref) && got == ref) return;
  if (!(fabs(got - ref) <= tol))
    fail_msg("%s[%zu] = %.9g, reference %.9g (tol %.3g)", what, at, got, ref, tol);
}

/* ------------------------------------------------------------- pools */

/* Output size of a window axis, ONNX rules, with ceil_mode (a window must start
 * inside the input or its begin pad). */
static int pool_out(int in, int k, int s, int d, int pb, int pe, int ceil_mode) {
  int num = in + pb + pe - ((k - 1) * d + 1), o;
  if (num < 0) return 0;
  o = ceil_mode ? (num + s - 1) / s + 1 : num / s + 1;
  if (ceil_mode && (o - 1) * s >= in + pb) o--;
  return o;
}

static int rnd_pool(mg_pool2d_params *p, int one_d) {
  memset(p, 0, sizeof *p);
  p->planes = rnd_int(1, 5);
  p->H = one_d ? 1 : rnd_int(1, 17);
  p->W = rnd_int(1, 23);
  p->kh = one_d ? 1 : rnd_int(1, 4);
  p->kw = rnd_int(1, 4);
  p->stride_h = one_d ? 1 : rnd_int(1, 3);
  p->stride_w = rnd_int(1, 3);
  p->dil_h = one_d ? 1 : rnd_int(1, 2);
  p->dil_w = rnd_int(1, 2);
  /* ONNX requires pads smaller than the kernel */
  p->pad_t = one_d ? 0 : rnd_int(0, p->kh - 1);
  p->pad_b = one_d ? 0 : rnd_int(0, p->kh - 1);
  p->pad_l = rnd_int(0, p->kw - 1);
  p->pad_r = rnd_int(0, p->kw - 1);
  p->count_include_pad = rnd_int(0, 1);
  p->p = rnd_int(0, 2) == 0 ? 3.0f : (float)rnd_int(1, 2);
  {
    const int cm = rnd_int(0, 1);
    p->OH = pool_out(p->H, p->kh, p->stride_h, p->dil_h, p->pad_t, p->pad_b, cm);
    p->OW = pool_out(p->W, p->kw, p->stride_w, p->dil_w, p->pad_l, p->pad_r, cm);
  }
  return p->OH >= 1 && p->OW >= 1;
}

enum { K_MAX, K_AVG, K_LP };

static void check_pool(const mg_pool2d_params *p, int kind) {
  const size_t nx = (size_t)p->planes * p->H * p->W, ny = (size_t)p->planes * p->OH * p->OW;
  float *x = rnd_array(nx), *y = out_array(ny);
  int pl, oh, ow, ki, kj;
  if (kind == K_MAX) mg_maxpool2d(p, x, y);
  else if (kind == K_AVG) mg_avgpool2d(p, x, y);
  else mg_lppool2d(p, x, y);
  for (pl = 0; pl < p->planes; pl++)
    for (oh = 0; oh < p->OH; oh++)
      for (ow = 0; ow < p->OW; ow++) {
        double acc = kind == K_MAX ? -INFINITY : 0, mag = 0, ref;
        int cnt = 0, taps = 0;
        size_t at = ((size_t)pl * p->OH + oh) * p->OW + ow;
        for (ki = 0; ki < p->kh; ki++)
          for (kj = 0; kj < p->kw; kj++) {
            const int ih = oh * p->stride_h - p->pad_t + ki * p->dil_h;
            const int iw = ow * p->stride_w - p->pad_l + kj * p->dil_w;
            double v;
            if (p->count_include_pad && ih < p->H + p->pad_b && iw < p->W + p->pad_r) cnt++;
            if (ih < 0 || ih >= p->H || iw < 0 || iw >= p->W) continue;
            taps++;
            v = x[((size_t)pl * p->H + ih) * p->W + iw];
            if (kind == K_MAX) acc = v > acc ? v : acc;
            else if (kind == K_AVG) acc += v, mag += fabs(v);
            else acc += pow(fabs(v), p->p), mag += pow(fabs(v), p->p);
          }
        if (kind == K_AVG) {
          if (!p->count_include_pad) cnt = taps;
          ref = acc / cnt;
          expect_near(y[at], ref, sum_tol(mag, taps) / cnt + 2 * FLT_EPSILON * fabs(ref), "avgpool", at);
        } else if (kind == K_LP) {
          ref = pow(acc, 1 / (double)p->p);
          expect_near(y[at], ref, 1e-5 * (fabs(ref) + 1e-3), "lppool", at);
        } else {
          expect_near(y[at], acc, 0, "maxpool", at);
        }
      }
  free(x);
  out_check_free(y, ny);
}

static void test_pools_random(void **state) {
  int t, k;
  (void)state;
  for (t = 0; t < 600; t++) {
    mg_pool2d_params p;
    if (!rnd_pool(&p, t % 5 == 0)) continue;
    for (k = 0; k < 3; k++) check_pool(&p, k);
  }
}

/* The layers the benchmark models have: 3x3/s2 pad 1 (resnet), 2x2/s2, 3x3/s2
 * ceil_mode (squeezenet-like), 3x3/s1 pad 1 (inception-like avg). */
static void test_pools_layers(void **state) {
  static const int g[][8] = { /* H, kh, s, pad, ceil, include */
      {112, 3, 2, 1, 0, 0}, {56, 2, 2, 0, 0, 0}, {55, 3, 2, 0, 1, 0}, {35, 3, 1, 1, 0, 1},
      {35, 3, 1, 1, 0, 0}, {7, 7, 1, 0, 0, 0}};
  size_t i;
  int k;
  (void)state;
  for (i = 0; i < sizeof g / sizeof g[0]; i++) {
    mg_pool2d_params p;
    memset(&p, 0, sizeof p);
    p.planes = 3;
    p.H = p.W = g[i][0];
    p.kh = p.kw = g[i][1];
    p.stride_h = p.stride_w = g[i][2];
    p.dil_h = p.dil_w = 1;
    p.pad_t = p.pad_l = p.pad_b = p.pad_r = g[i][3];
    p.count_include_pad = g[i][5];
    p.p = 2.0f;
    p.OH = p.OW = pool_out(p.H, p.kh, p.stride_h, 1, p.pad_t, p.pad_b, g[i][4]);
    for (k = 0; k < 3; k++) check_pool(&p, k);
  }
  { /* rows wider than the stack row buffer take the tap-by-tap path */
    mg_pool2d_params p;
    memset(&p, 0, sizeof p);
    p.planes = 2, p.H = 5, p.W = 1100, p.kh = 3, p.kw = 2, p.stride_h = 2, p.stride_w = 3;
    p.dil_h = p.dil_w = 1, p.pad_t = p.pad_l = 1, p.pad_b = p.pad_r = 1, p.p = 2.0f;
    p.OH = pool_out(p.H, 3, 2, 1, 1, 1, 0);
    p.OW = pool_out(p.W, 2, 3, 1, 1, 1, 1);
    for (k = 0; k < 3; k++) check_pool(&p, k);
  }
}

static void test_global_pools(void **state) {
  int t, pl, i;
  (void)state;
  for (t = 0; t < 60; t++) {
    const int planes = rnd_int(1, 9), size = t < 5 ? t + 1 : rnd_int(1, 300);
    const float pw = (float)rnd_int(1, 3);
    float *x = rnd_array((size_t)planes * size), *ya = out_array((size_t)planes),
          *ym = out_array((size_t)planes), *yl = out_array((size_t)planes);
    mg_global_avgpool(planes, size, x, ya);
    mg_global_maxpool(planes, size, x, ym);
    mg_global_lppool(planes, size, pw, x, yl);
    for (pl = 0; pl < planes; pl++) {
      double s = 0, mag = 0, m = -INFINITY, lp = 0;
      for (i = 0; i < size; i++) {
        double v = x[(size_t)pl * size + i];
        s += v, mag += fabs(v), m = v > m ? v : m, lp += pow(fabs(v), pw);
      }
      expect_near(ya[pl], s / size, sum_tol(mag, size) / size + FLT_EPSILON * fabs(s / size), "gap", (size_t)pl);
      expect_near(ym[pl], m, 0, "gmp", (size_t)pl);
      expect_near(yl[pl], pow(lp, 1 / (double)pw), 1e-5 * pow(lp, 1 / (double)pw) + 1e-7, "glp", (size_t)pl);
    }
    free(x);
    out_check_free(ya, (size_t)planes);
    out_check_free(ym, (size_t)planes);
    out_check_free(yl, (size_t)planes);
  }
  { /* NaN propagates through the global max */
    float x[3] = {1.0f, NAN, 2.0f}, y;
    mg_global_maxpool(1, 3, x, &y);
    assert_true(isnan(y));
  }
}

/* ---------------------------------------------------- normalisations */

static void test_channel_affine(void **state) {
  int t, n, c, i;
  (void)state;
  for (t = 0; t < 40; t++) {
    const int N = rnd_int(1, 3), C = rnd_int(1, 9), sz = rnd_int(1, 40);
    const size_t total = (size_t)N * C * sz;
    const int relu = t & 1, inplace = (t >> 1) & 1;
    float *x = rnd_array(total), *s = rnd_array((size_t)C), *b = rnd_array((size_t)C);
    float *x0 = malloc(total * sizeof(float)), *y = inplace ? x : out_array(total);
    assert_non_null(x0);
    memcpy(x0, x, total * sizeof(float));
    mg_channel_affine(N, C, sz, s, b, x, y, relu ? MG_ACT_RELU : MG_ACT_NONE, 0, 0);
    for (n = 0; n < N; n++)
      for (c = 0; c < C; c++)
        for (i = 0; i < sz; i++) {
          size_t at = ((size_t)n * C + c) * sz + i;
          double ref = (double)x0[at] * s[c] + b[c];
          if (relu && ref < 0) ref = 0;
          expect_near(y[at], ref, 4 * FLT_EPSILON * (fabs(x0[at] * s[c]) + fabs(b[c])), "affine", at);
        }
    free(x0), free(s), free(b);
    if (inplace) free(x);
    else free(x), out_check_free(y, total);
  }
}

static void test_batchnorm(void **state) {
  int t, n, c, i;
  (void)state;
  for (t = 0; t < 30; t++) {
    const int N = rnd_int(1, 3), C = rnd_int(1, 9), sz = rnd_int(1, 40);
    const size_t total = (size_t)N * C * sz;
    const float eps = t & 1 ? 1e-5f : 1e-1f;
    float *x = rnd_array(total), *s = rnd_array((size_t)C), *b = rnd_array((size_t)C);
    float *m = rnd_array((size_t)C), *v = rnd_array((size_t)C), *y = out_array(total);
    for (c = 0; c < C; c++) v[c] = fabsf(v[c]) + 0.1f;
    mg_batchnorm(N, C, sz, x, s, b, m, v, eps, y, MG_ACT_NONE, 0, 0);
    for (n = 0; n < N; n++)
      for (c = 0; c < C; c++)
        for (i = 0; i < sz; i++) {
          size_t at = ((size_t)n * C + c) * sz + i;
          double inv = 1 / sqrt((double)v[c] + eps);
          double ref = ((double)x[at] - m[c]) * inv * s[c] + b[c];
          expect_near(y[at], ref, 1e-5 * (fabs(ref) + fabs(m[c] * inv * s[c]) + 1), "batchnorm", at);
        }
    free(x), free(s), free(b), free(m), free(v);
    out_check_free(y, total);
  }
}

/* Mean and 1/std of n doubles (the reference). */
static void ref_moments(const float *x, size_t n, double eps, double *mean, double *inv) {
  double s = 0, q = 0;
  size_t i;
  for (i = 0; i < n; i++) s += x[i];
  s /= (double)n;
  for (i = 0; i < n; i++) q += (x[i] - s) * (x[i] - s);
  *mean = s;
  *inv = 1 / sqrt(q / (double)n + eps);
}

static void test_layernorm(void **state) {
  int t, r, i;
  (void)state;
  for (t = 0; t < 60; t++) {
    const int rows = rnd_int(1, 7), len = t < 4 ? t + 1 : rnd_int(1, 800);
    const size_t total = (size_t)rows * len;
    const float eps = (t & 1) ? 1e-5f : 1e-2f;
    const int with_bias = t % 3 != 0, stats = t % 4 == 0, inplace = t % 5 == 1;
    float *x = rnd_array(total), *s = rnd_array((size_t)len), *b = rnd_array((size_t)len);
    float *x0 = malloc(total * sizeof(float)), *y = inplace ? x : out_array(total);
    float *mean = out_array((size_t)rows), *inv = out_array((size_t)rows);
    assert_non_null(x0);
    for (i = 0; i < (int)total; i++) x[i] = x[i] * 3.0f + 1.5f; /* a mean to remove */
    memcpy(x0, x, total * sizeof(float));
    mg_layernorm(rows, len, x, s, with_bias ? b : NULL, eps, y, stats ? mean : NULL,
                 stats ? inv : NULL);
    for (r = 0; r < rows; r++) {
      double mu, iv;
      ref_moments(x0 + (size_t)r * len, (size_t)len, eps, &mu, &iv);
      if (stats) {
        expect_near(mean[r], mu, 1e-5 * (fabs(mu) + 1), "ln mean", (size_t)r);
        expect_near(inv[r], iv, 1e-5 * iv, "ln inv_std", (size_t)r);
      }
      for (i = 0; i < len; i++) {
        size_t at = (size_t)r * len + i;
        double ref = (x0[at] - mu) * iv * s[i] + (with_bias ? b[i] : 0);
        expect_near(y[at], ref, 2e-5 * (fabs((x0[at] - mu) * iv) + 1), "layernorm", at);
      }
    }
    free(x0), free(s), free(b);
    if (inplace) free(x);
    else free(x), out_check_free(y, total);
    out_check_free(mean, (size_t)rows);
    out_check_free(inv, (size_t)rows);
  }
}

static void test_groupnorm(void **state) {
  int t, n, c, i;
  (void)state;
  for (t = 0; t < 60; t++) {
    const int N = rnd_int(1, 3), G = rnd_int(1, 4), C = G * rnd_int(1, 4), sz = rnd_int(1, 50);
    const size_t total = (size_t)N * C * sz;
    const int groups = t & 1 ? C : G; /* odd t: InstanceNormalization */
    const float eps = 1e-5f;
    float *x = rnd_array(total), *s = rnd_array((size_t)C), *b = rnd_array((size_t)C);
    float *y = out_array(total);
    mg_groupnorm(N, C, groups, sz, x, s, b, eps, y);
    for (n = 0; n < N; n++)
      for (c = 0; c < C; c++) {
        const int cg = C / groups, g = c / cg;
        double mu, iv;
        ref_moments(x + ((size_t)n * C + (size_t)g * cg) * sz, (size_t)cg * sz, eps, &mu, &iv);
        for (i = 0; i < sz; i++) {
          size_t at = ((size_t)n * C + c) * sz + i;
          double ref = (x[at] - mu) * iv * s[c] + b[c];
          expect_near(y[at], ref, 2e-5 * (fabs((x[at] - mu) * iv) + 1), "groupnorm", at);
        }
      }
    free(x), free(s), free(b);
    out_check_free(y, total);
  }
}

static void test_lrn(void **state) {
  int t, o, c, i, k;
  (void)state;
  for (t = 0; t < 40; t++) {
    const int outer = rnd_int(1, 3), C = rnd_int(1, 12), inner = rnd_int(1, 30);
    const int size = rnd_int(1, 6);
    const float alpha = 1e-2f * (float)rnd_int(1, 50), beta = t & 1 ? 0.75f : 0.5f + 0.1f * rnd_int(0, 5);
    const float bias = 0.5f + (float)rnd_int(0, 4);
    const size_t total = (size_t)outer * C * inner;
    float *x = rnd_array(total), *y = out_array(total);
    mg_lrn(outer, C, inner, size, alpha, beta, bias, x, y);
    for (o = 0; o < outer; o++)
      for (c = 0; c < C; c++)
        for (i = 0; i < inner; i++) {
          double s = 0, ref;
          size_t at = ((size_t)o * C + c) * inner + i;
          for (k = c - (size - 1) / 2; k <= c + size / 2; k++) {
            double v;
            if (k < 0 || k >= C) continue;
            v = x[((size_t)o * C + k) * inner + i];
            s += v * v;
          }
          ref = x[at] / pow(bias + alpha / size * s, beta);
          expect_near(y[at], ref, 1e-5 * fabs(ref) + 1e-7, "lrn", at);
        }
    free(x);
    out_check_free(y, total);
  }
}

/* ------------------------------------------------------------- resize */

static void test_resize_axis(void **state) {
  int t, o, j, i, k;
  (void)state;
  for (t = 0; t < 100; t++) {
    const int outer = rnd_int(1, 4), L = rnd_int(1, 9), O = rnd_int(1, 13);
    const int inner = t % 3 == 0 ? 1 : rnd_int(1, 20), taps = (int[]){1, 2, 4}[t % 3];
    const float ext = 7.5f;
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)O * taps);
    float *w = rnd_array((size_t)O * taps), *x = rnd_array((size_t)outer * L * inner);
    float *y = out_array((size_t)outer * O * inner);
    assert_non_null(idx);
    for (j = 0; j < O * taps; j++) idx[j] = rnd_int(0, L - 1);
    for (j = 0; j < O; j++)
      if (rnd_int(0, 7) == 0) idx[(size_t)j * taps] = -1;
    if (taps == 1 && t % 2) /* nearest: weight exactly 1 */
      for (j = 0; j < O; j++) w[j] = 1.0f;
    mg_resize_axis(outer, L, O, inner, taps, idx, w, ext, x, y);
    for (o = 0; o < outer; o++)
      for (j = 0; j < O; j++)
        for (i = 0; i < inner; i++) {
          size_t at = ((size_t)o * O + j) * inner + i;
          double ref = 0, mag = 0;
          if (idx[(size_t)j * taps] < 0) {
            expect_near(y[at], ext, 0, "resize ext", at);
            continue;
          }
          for (k = 0; k < taps; k++) {
            double v = (double)w[j * taps + k] * x[((size_t)o * L + idx[j * taps + k]) * inner + i];
            ref += v, mag += fabs(v);
          }
          expect_near(y[at], ref, sum_tol(mag, taps), "resize", at);
        }
    free(idx), free(w), free(x);
    out_check_free(y, (size_t)outer * O * inner);
  }
}

/* Random bilinear taps: (i, i+1) or (i, i) pairs with weights summing to 1, in
 * increasing order, as upsampling produces (and some random jumps). */
static void rnd_linear_taps(int O, int L, int64_t *idx, float *w) {
  int j;
  for (j = 0; j < O; j++) {
    const int64_t base = rnd_int(0, 3) ? (int64_t)((double)j * L / O) : rnd_int(0, L - 1);
    const float r = rnd_float() * 0.5f + 0.5f;
    idx[2 * j] = base;
    idx[2 * j + 1] = base + 1 < L ? base + 1 : base;
    w[2 * j] = 1.0f - r;
    w[2 * j + 1] = r;
  }
}

static void test_resize_bilinear(void **state) {
  int t, pl, j, i;
  (void)state;
  for (t = 0; t < 60; t++) {
    const int planes = rnd_int(1, 4), H = rnd_int(1, 12), W = rnd_int(1, 12);
    const int OH = rnd_int(1, 30), OW = rnd_int(1, 30);
    int64_t *yi = malloc(sizeof(int64_t) * 2 * OH), *xi = malloc(sizeof(int64_t) * 2 * OW);
    float *yw = malloc(sizeof(float) * 2 * OH), *xw = malloc(sizeof(float) * 2 * OW);
    float *x = rnd_array((size_t)planes * H * W), *y = out_array((size_t)planes * OH * OW);
    float *s = out_array(mg_resize_bilinear_scratch(OW));
    assert_true(yi && xi && yw && xw);
    rnd_linear_taps(OH, H, yi, yw);
    rnd_linear_taps(OW, W, xi, xw);
    mg_resize_bilinear2d(planes, H, W, OH, OW, yi, yw, xi, xw, x, y, s);
    for (pl = 0; pl < planes; pl++)
      for (j = 0; j < OH; j++)
        for (i = 0; i < OW; i++) {
          double ref = 0, mag = 0;
          int a, b;
          size_t at = ((size_t)pl * OH + j) * OW + i;
          for (a = 0; a < 2; a++)
            for (b = 0; b < 2; b++) {
              double v = (double)yw[2 * j + a] * xw[2 * i + b] *
                         x[((size_t)pl * H + yi[2 * j + a]) * W + xi[2 * i + b]];
              ref += v, mag += fabs(v);
            }
          expect_near(y[at], ref, sum_tol(mag, 4) * 2, "bilinear", at);
        }
    free(yi), free(xi), free(yw), free(xw), free(x);
    out_check_free(y, (size_t)planes * OH * OW);
    out_check_free(s, mg_resize_bilinear_scratch(OW));
  }
}

/* ------------------------------------------------------ conv transpose */

static void check_convt(const mg_convt2d_params *p, int with_bias) {
  const int Cg = p->C / p->group, Mg = p->M / p->group;
  const size_t nx = (size_t)p->N * p->C * p->H * p->W, nw = (size_t)p->C * Mg * p->kh * p->kw;
  const size_t ny = (size_t)p->N * p->M * p->OH * p->OW;
  float *x = rnd_array(nx), *w = rnd_array(nw), *b = with_bias ? rnd_array((size_t)p->M) : NULL;
  float *y = out_array(ny), *s = out_array(mg_conv_transpose2d_scratch(p));
  double *ref = calloc(ny, sizeof(double)), *mag = calloc(ny, sizeof(double));
  int n, c, m, ih, iw, ki, kj;
  size_t i;
  assert_true(ref && mag);
  mg_conv_transpose2d(p, x, w, b, y, s);
  for (n = 0; n < p->N; n++)
    for (c = 0; c < p->C; c++)
      for (m = 0; m < Mg; m++)
        for (ih = 0; ih < p->H; ih++)
          for (iw = 0; iw < p->W; iw++)
            for (ki = 0; ki < p->kh; ki++)
              for (kj = 0; kj < p->kw; kj++) {
                const int oh = ih * p->stride_h - p->pad_t + ki * p->dil_h;
                const int ow = iw * p->stride_w - p->pad_l + kj * p->dil_w;
                const int oc = c / Cg * Mg + m;
                size_t at;
                double v;
                if (oh < 0 || oh >= p->OH || ow < 0 || ow >= p->OW) continue;
                at = (((size_t)n * p->M + oc) * p->OH + oh) * p->OW + ow;
                v = (double)x[(((size_t)n * p->C + c) * p->H + ih) * p->W + iw] *
                    w[(((size_t)c * Mg + m) * p->kh + ki) * p->kw + kj];
                ref[at] += v, mag[at] += fabs(v);
              }
  for (i = 0; i < ny; i++) {
    const int oc = (int)(i / ((size_t)p->OH * p->OW) % (size_t)p->M);
    double r = ref[i] + (b ? b[oc] : 0);
    expect_near(y[i], r, sum_tol(mag[i] + (b ? fabs(b[oc]) : 0), (double)p->C * p->kh * p->kw),
                "convtranspose", i);
  }
  free(x), free(w), free(b), free(ref), free(mag);
  out_check_free(y, ny);
  out_check_free(s, mg_conv_transpose2d_scratch(p));
}

static void test_conv_transpose(void **state) {
  int t;
  (void)state;
  for (t = 0; t < 150; t++) {
    mg_convt2d_params p;
    const int G = rnd_int(1, 3);
    int full_h, full_w;
    memset(&p, 0, sizeof p);
    p.N = rnd_int(1, 2);
    p.group = G;
    p.C = G * rnd_int(1, 4);
    p.M = G * rnd_int(1, 4);
    p.H = rnd_int(1, 9);
    p.W = rnd_int(1, 9);
    p.kh = rnd_int(1, 4);
    p.kw = rnd_int(1, 4);
    p.stride_h = rnd_int(1, 3);
    p.stride_w = rnd_int(1, 3);
    p.dil_h = rnd_int(1, 2);
    p.dil_w = rnd_int(1, 2);
    p.pad_t = rnd_int(-2, 2);
    p.pad_l = rnd_int(-2, 2);
    full_h = (p.H - 1) * p.stride_h + (p.kh - 1) * p.dil_h + 1;
    full_w = (p.W - 1) * p.stride_w + (p.kw - 1) * p.dil_w + 1;
    p.OH = full_h - p.pad_t - rnd_int(-2, 2);
    p.OW = full_w - p.pad_l - rnd_int(-2, 2);
    if (p.OH < 1 || p.OW < 1) continue;
    check_convt(&p, t & 1);
  }
}

/* ------------------------------------------------------------ matmul */

static void test_fill_broadcast(void **state) {
  int t, i, j;
  (void)state;
  for (t = 0; t < 40; t++) {
    const int M = rnd_int(1, 9), N = rnd_int(1, 17), sm = rnd_int(0, 1) ? N : 0;
    const int sn = rnd_int(0, 3) ? 1 : 0;
    const float beta = t & 1 ? 1.0f : -0.5f;
    float *c = rnd_array((size_t)M * N), *y = out_array((size_t)M * N);
    mg_fill_broadcast2d(M, N, c, sm, sn, beta, y);
    for (i = 0; i < M; i++)
      for (j = 0; j < N; j++)
        expect_near(y[i * N + j], (double)beta * c[i * sm + j * sn], 0, "fill", (size_t)(i * N + j));
    free(c);
    out_check_free(y, (size_t)M * N);
  }
}

static void test_matmul_batched(void **state) {
  int t, b, i, j, k;
  (void)state;
  for (t = 0; t < 60; t++) {
    const int M = rnd_int(1, 20), N = rnd_int(1, 20), K = rnd_int(1, 30), batch = rnd_int(1, 5);
    const int na = rnd_int(1, 3), nb = rnd_int(1, 3); /* distinct matrices of A and B */
    int64_t *ao = malloc(sizeof(int64_t) * batch), *bo = malloc(sizeof(int64_t) * batch);
    float *A = rnd_array((size_t)na * M * K), *B = rnd_array((size_t)nb * K * N);
    float *y = out_array((size_t)batch * M * N), *s = out_array(mg_sgemm_scratch(M, N, K));
    assert_true(ao && bo);
    for (b = 0; b < batch; b++) {
      ao[b] = (int64_t)rnd_int(0, na - 1) * M * K;
      bo[b] = (int64_t)rnd_int(0, nb - 1) * K * N;
    }
    mg_matmul_batched(batch, M, N, K, A, ao, B, bo, y, s);
    for (b = 0; b < batch; b++)
      for (i = 0; i < M; i++)
        for (j = 0; j < N; j++) {
          double ref = 0, mag = 0;
          for (k = 0; k < K; k++) {
            double v = (double)A[ao[b] + i * K + k] * B[bo[b] + k * N + j];
            ref += v, mag += fabs(v);
          }
          expect_near(y[((size_t)b * M + i) * N + j], ref, sum_tol(mag, K), "matmul",
                      ((size_t)b * M + i) * N + j);
        }
    free(ao), free(bo), free(A), free(B);
    out_check_free(y, (size_t)batch * M * N);
    out_check_free(s, mg_sgemm_scratch(M, N, K));
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pools_random),   cmocka_unit_test(test_pools_layers),
      cmocka_unit_test(test_global_pools),   cmocka_unit_test(test_channel_affine),
      cmocka_unit_test(test_batchnorm),
      cmocka_unit_test(test_layernorm),      cmocka_unit_test(test_groupnorm),
      cmocka_unit_test(test_lrn),            cmocka_unit_test(test_resize_axis),
      cmocka_unit_test(test_resize_bilinear), cmocka_unit_test(test_conv_transpose),
      cmocka_unit_test(test_fill_broadcast), cmocka_unit_test(test_matmul_batched),
  };
#if defined(MG_TEST_REQUIRE_AVX2) && (defined(__GNUC__) || defined(__clang__))
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    printf("CPU lacks AVX2/FMA: skipping the AVX2 build of the nn runtime tests\n");
    return 77;
  }
#endif
  return cmocka_run_group_tests(tests, NULL, NULL);
}
