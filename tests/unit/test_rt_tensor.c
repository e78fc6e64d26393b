/* Unit tests for the tensor family of runtime/ (tensor.c, reduce.c): each kernel
 * against a naive reference written here (coordinates walked one by one, sums in
 * double), over randomised shapes with size-1 dims, odd sizes, broadcasting,
 * negative strides and indices. Built like test_runtime: against migcruntime and
 * with the runtime compiled in under MG_RUNTIME_PORTABLE. */
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

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;

static uint32_t rnd(void) { /* xorshift64*: deterministic */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (uint32_t)((rng_state * 0x2545F4914F6CDD1Dull) >> 32);
}
static int rnd_int(int lo, int hi) { return lo + (int)(rnd() % (uint32_t)(hi - lo + 1)); }
static float rnd_float(void) { return (float)((double)rnd() / 4294967296.0 * 4.0 - 2.0); }
static int rnd_dim(void) { return rnd_int(0, 3) == 0 ? 1 : rnd_int(1, 7); }

static float *rnd_floats(int64_t n) {
  float *a = malloc((size_t)(n ? n : 1) * sizeof(float));
  assert_non_null(a);
  for (int64_t i = 0; i < n; i++) a[i] = rnd_float();
  return a;
}

static int64_t numel(int r, const int64_t *d) {
  int64_t p = 1;
  for (int i = 0; i < r; i++) p *= d[i];
  return p;
}

static void strides(int r, const int64_t *d, int64_t *s) {
  int64_t p = 1;
  for (int i = r - 1; i >= 0; i--) s[i] = p, p *= d[i];
}

/* Coordinates of flat index k in dims. */
static void unflat(int64_t k, int r, const int64_t *d, int64_t *coord) {
  for (int i = r - 1; i >= 0; i--) coord[i] = k % d[i], k /= d[i];
}

static void assert_close(double got, double want, double rtol, double atol) {
  if (isnan(want)) {
    assert_true(isnan(got));
    return;
  }
  if (isinf(want)) {
    assert_true(got == want);
    return;
  }
  if (fabs(got - want) > atol + rtol * fabs(want)) {
    fprintf(stderr, "got %.9g want %.9g\n", got, want);
    fail();
  }
}

/* ------------------------------------------------------ strided copy */

/* Random transposes of random ranks and element sizes, walking the output. */
static void test_copy_transpose(void **state) {
  (void)state;
  static const size_t sizes[] = {1, 2, 4, 8, 3};
  for (int iter = 0; iter < 300; iter++) {
    int r = rnd_int(1, 5), perm[8];
    size_t es = sizes[rnd() % 5];
    int64_t xd[8], yd[8], xs[8], ys[8], is[8];
    for (int d = 0; d < r; d++) xd[d] = iter % 7 == 0 ? rnd_int(1, 40) : rnd_dim(), perm[d] = d;
    for (int d = r - 1; d > 0; d--) { /* Fisher-Yates */
      int j = rnd_int(0, d), t = perm[d];
      perm[d] = perm[j], perm[j] = t;
    }
    strides(r, xd, xs);
    for (int d = 0; d < r; d++) yd[d] = xd[perm[d]], is[d] = xs[perm[d]];
    strides(r, yd, ys);
    int64_t n = numel(r, xd);
    unsigned char *x = malloc((size_t)n * es), *y = malloc((size_t)n * es);
    for (int64_t i = 0; i < n * (int64_t)es; i++) x[i] = (unsigned char)rnd();
    mg_copy_nd(es, r, yd, x, is, y, ys);
    for (int64_t k = 0; k < n; k++) {
      int64_t coord[8], off = 0;
      unflat(k, r, yd, coord);
      for (int d = 0; d < r; d++) off += coord[d] * xs[perm[d]];
      assert_memory_equal(y + k * (int64_t)es, x + off * (int64_t)es, es);
    }
    free(x), free(y);
  }
}

/* The blocked path: NCHW -> NHWC with sizes across tile edges. */
static void test_copy_nhwc(void **state) {
  (void)state;
  int64_t C = 37, HW = 45, sh[2] = {HW, C}, ss[2] = {1, HW}, ds[2] = {C, 1};
  float *x = rnd_floats(C * HW), *y = malloc(sizeof(float) * (size_t)(C * HW));
  mg_copy_nd(4, 2, sh, x, ss, y, ds);
  for (int64_t p = 0; p < HW; p++)
    for (int64_t c = 0; c < C; c++) assert_true(y[p * C + c] == x[c * HW + p]);
  free(x), free(y);
}

/* Negative strides (reversed slices) and zero strides (broadcast). */
static void test_copy_reverse_broadcast(void **state) {
  (void)state;
  int32_t x[24], y[48];
  for (int i = 0; i < 24; i++) x[i] = i;
  /* y[a][b][c] = x[a][3-b][0] broadcast over c of 4: x is [2,4,3] */
  int64_t sh[3] = {2, 4, 6}, ss[3] = {12, -3, 0}, ds[3] = {24, 6, 1};
  mg_copy_nd(4, 3, sh, x + 9, ss, y, ds);
  for (int a = 0; a < 2; a++)
    for (int b = 0; b < 4; b++)
      for (int c = 0; c < 6; c++) assert_int_equal(y[a * 24 + b * 6 + c], x[a * 12 + (3 - b) * 3]);
  /* rank 0 copies one element */
  mg_copy_nd(4, 0, NULL, x + 5, NULL, y, NULL);
  assert_int_equal(y[0], 5);
}

static void test_fill_maps(void **state) {
  (void)state;
  uint16_t v = 0xBEEF, h[7];
  mg_fill(2, 7, h, &v);
  for (int i = 0; i < 7; i++) assert_int_equal(h[i], 0xBEEF);
  /* reflect-pad [3,4] by 2 on every side: maps built by the ONNX definition */
  int64_t shape[2] = {7, 8}, maps[15], at = 0;
  int64_t dims[2] = {3, 4}, st[2] = {4, 1};
  for (int d = 0; d < 2; d++)
    for (int64_t o = 0; o < shape[d]; o++) {
      int64_t t = o - 2, L = dims[d];
      while (t < 0 || t >= L) t = t < 0 ? -t : 2 * (L - 1) - t;
      maps[at++] = t * st[d];
    }
  float x[12], y[56];
  for (int i = 0; i < 12; i++) x[i] = (float)i;
  mg_gather_maps(4, 2, shape, x, maps, y);
  static const int rows[7] = {2, 1, 0, 1, 2, 1, 0}, cols[8] = {2, 1, 0, 1, 2, 3, 2, 1};
  for (int i = 0; i < 7; i++)
    for (int j = 0; j < 8; j++) assert_true(y[i * 8 + j] == x[rows[i] * 4 + cols[j]]);
}

/* ------------------------------------------------------ gathers and scatters */

static void test_gather(void **state) {
  (void)state;
  for (int iter = 0; iter < 50; iter++) {
    int64_t outer = rnd_dim(), an = rnd_dim(), inner = rnd_dim(), ni = rnd_int(1, 9);
    float *x = rnd_floats(outer * an * inner), *y = malloc(sizeof(float) * (size_t)(outer * ni * inner));
    int64_t idx64[9];
    int32_t idx32[9];
    for (int j = 0; j < ni; j++) idx64[j] = rnd_int((int)-an, (int)an - 1), idx32[j] = (int32_t)idx64[j];
    for (int w = 0; w < 2; w++) {
      mg_gather(4, outer, an, inner, x, w ? (const void *)idx64 : (const void *)idx32, w, ni, y);
      for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < ni; j++)
          for (int64_t i = 0; i < inner; i++) {
            int64_t v = idx64[j] < 0 ? idx64[j] + an : idx64[j];
            assert_true(y[(o * ni + j) * inner + i] == x[(o * an + v) * inner + i]);
          }
    }
    free(x), free(y);
  }
}

static void test_elements(void **state) {
  (void)state;
  for (int iter = 0; iter < 60; iter++) {
    int r = rnd_int(1, 4), axis = rnd_int(0, r - 1);
    int64_t xd[4], id[4], xs[4];
    for (int d = 0; d < r; d++) xd[d] = rnd_int(1, 5), id[d] = d == axis ? rnd_int(1, 6) : rnd_int(1, (int)xd[d]);
    strides(r, xd, xs);
    int64_t nx = numel(r, xd), ni = numel(r, id);
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)ni);
    int32_t *x = malloc(sizeof(int32_t) * (size_t)nx), *y = malloc(sizeof(int32_t) * (size_t)ni);
    int32_t *u = malloc(sizeof(int32_t) * (size_t)ni), *s = malloc(sizeof(int32_t) * (size_t)nx);
    int32_t *ref = malloc(sizeof(int32_t) * (size_t)nx);
    for (int64_t i = 0; i < nx; i++) x[i] = rnd_int(-100, 100);
    for (int64_t i = 0; i < ni; i++) idx[i] = rnd_int((int)-xd[axis], (int)xd[axis] - 1), u[i] = rnd_int(-9, 9);
    mg_gather_elements(4, r, id, xs, axis, xd[axis], x, idx, 1, y);
    memcpy(s, x, sizeof(int32_t) * (size_t)nx);
    memcpy(ref, x, sizeof(int32_t) * (size_t)nx);
    mg_scatter_elements(MG_RT_I32, MG_SCATTER_ADD, r, id, xs, axis, xd[axis], idx, 1, u, s);
    for (int64_t k = 0; k < ni; k++) {
      int64_t coord[4], off = 0;
      unflat(k, r, id, coord);
      coord[axis] = idx[k] < 0 ? idx[k] + xd[axis] : idx[k];
      for (int d = 0; d < r; d++) off += coord[d] * xs[d];
      assert_int_equal(y[k], x[off]);
      ref[off] += u[k];
    }
    assert_memory_equal(s, ref, sizeof(int32_t) * (size_t)nx);
    free(idx), free(x), free(y), free(u), free(s), free(ref);
  }
}

static void test_nd(void **state) {
  (void)state;
  /* data [B=2, 3, 4, 5], batch_dims 1, tuples of k=2 over axes 1,2, inner 5 */
  float *x = rnd_floats(120), y[2 * 3 * 5], s[120], ref[120];
  int64_t idx[2 * 3 * 2], ad[2] = {3, 4}, as[2] = {20, 5};
  for (int i = 0; i < 12; i += 2) idx[i] = rnd_int(-3, 2), idx[i + 1] = rnd_int(-4, 3);
  mg_gather_nd(4, 2, 60, 3, 2, ad, as, 5, x, idx, 1, y);
  for (int b = 0; b < 2; b++)
    for (int t = 0; t < 3; t++) {
      int64_t i0 = idx[(b * 3 + t) * 2], i1 = idx[(b * 3 + t) * 2 + 1];
      i0 += i0 < 0 ? 3 : 0, i1 += i1 < 0 ? 4 : 0;
      for (int e = 0; e < 5; e++) assert_true(y[(b * 3 + t) * 5 + e] == x[b * 60 + i0 * 20 + i1 * 5 + e]);
    }
  /* ScatterND with mul on [4, 5] data by rows: k = 1 */
  int64_t rows[3] = {1, -1, 1}, d1[1] = {4}, s1[1] = {5};
  float u[15];
  for (int i = 0; i < 15; i++) u[i] = rnd_float();
  memcpy(s, x, sizeof(float) * 20), memcpy(ref, x, sizeof(float) * 20);
  mg_scatter_nd(MG_RT_F32, MG_SCATTER_MUL, 3, 1, d1, s1, 5, rows, 1, u, s);
  for (int t = 0; t < 3; t++)
    for (int e = 0; e < 5; e++) ref[(rows[t] < 0 ? rows[t] + 4 : rows[t]) * 5 + e] *= u[t * 5 + e];
  for (int i = 0; i < 20; i++) assert_close(s[i], ref[i], 1e-6, 0);
  free(x);
}

static void test_trilu_reverse_onehot(void **state) {
  (void)state;
  for (int iter = 0; iter < 40; iter++) {
    int64_t R = rnd_dim(), C = rnd_dim(), M = rnd_int(1, 3), k = rnd_int(-8, 8);
    int up = rnd_int(0, 1);
    float *x = rnd_floats(M * R * C), *y = malloc(sizeof(float) * (size_t)(M * R * C));
    mg_trilu(4, M, R, C, k, up, x, y);
    for (int64_t m = 0; m < M; m++)
      for (int64_t i = 0; i < R; i++)
        for (int64_t j = 0; j < C; j++) {
          int keep = up ? j - i >= k : j - i <= k;
          int64_t at = (m * R + i) * C + j;
          assert_true(y[at] == (keep ? x[at] : 0.0f));
        }
    mg_trilu(4, M, R, C, k, up, x, x); /* in place */
    assert_memory_equal(x, y, sizeof(float) * (size_t)(M * R * C));
    free(x), free(y);
  }
  /* ReverseSequence, batch-major [B=3, T=4, inner 2] */
  int16_t x[24], y[24];
  int32_t lens[3] = {4, 1, 2};
  for (int i = 0; i < 24; i++) x[i] = (int16_t)i;
  mg_reverse_sequence(2, 3, 4, 2, 0, lens, 0, x, y);
  for (int b = 0; b < 3; b++)
    for (int t = 0; t < 4; t++) {
      int from = t < lens[b] ? lens[b] - 1 - t : t;
      for (int e = 0; e < 2; e++) assert_int_equal(y[(b * 4 + t) * 2 + e], x[(b * 4 + from) * 2 + e]);
    }
  /* OneHot with float indices (truncated), negative and out-of-range ones */
  float ind[4] = {1.7f, -1.0f, 5.0f, 0.0f};
  int64_t vals[2] = {-3, 8}, out[2 * 3 * 2];
  mg_onehot(8, MG_RT_F32, 2, 3, 2, ind, vals, out); /* indices [2, 2], axis 1 */
  for (int a = 0; a < 2; a++)
    for (int d = 0; d < 3; d++)
      for (int i = 0; i < 2; i++) {
        int64_t v = (int64_t)ind[a * 2 + i];
        if (v < 0) v += 3;
        assert_int_equal(out[(a * 3 + d) * 2 + i], v == d ? 8 : -3);
      }
}

static void test_topk(void **state) {
  (void)state;
  for (int iter = 0; iter < 60; iter++) {
    int64_t outer = rnd_dim(), n = rnd_int(1, 20), inner = rnd_dim(), k = rnd_int(0, (int)n);
    int largest = rnd_int(0, 1);
    float *x = malloc(sizeof(float) * (size_t)(outer * n * inner));
    for (int64_t i = 0; i < outer * n * inner; i++) x[i] = (float)rnd_int(-4, 4); /* many ties */
    if (iter % 5 == 0) x[0] = NAN;
    float *v = malloc(sizeof(float) * (size_t)(outer * k * inner + 1));
    int64_t *ix = malloc(sizeof(int64_t) * (size_t)(outer * k * inner + 1));
    float *scratch = malloc(sizeof(float) * mg_topk_scratch(n));
    mg_topk(MG_RT_F32, outer, n, inner, k, largest, x, v, ix, scratch);
    for (int64_t o = 0; o < outer; o++)
      for (int64_t i = 0; i < inner; i++) {
        int used[20] = {0};
        for (int64_t j = 0; j < k; j++) { /* reference: selection of the best unused, lowest index */
          int64_t best = -1;
          for (int64_t t = 0; t < n; t++) {
            if (used[t]) continue;
            float a = x[(o * n + t) * inner + i], b = best < 0 ? 0 : x[(o * n + best) * inner + i];
            int better = best < 0 || (!isnan(a) && !isnan(b) && (largest ? a > b : a < b)) ||
                         (largest ? isnan(a) && !isnan(b) : isnan(b) && !isnan(a));
            if (better) best = t;
          }
          used[best] = 1;
          assert_int_equal(ix[(o * k + j) * inner + i], best);
          float got = v[(o * k + j) * inner + i], want = x[(o * n + best) * inner + i];
          assert_true(got == want || (isnan(got) && isnan(want)));
        }
      }
    free(x), free(v), free(ix), free(scratch);
  }
}

/* ------------------------------------------------------ reductions */

/* Double reference of one reduction over values v[0..n). */
static double ref_reduce(mg_reduce_op op, const double *v, int64_t n) {
  double a = op == MG_REDUCE_PROD ? 1 : op == MG_REDUCE_MAX ? -INFINITY : op == MG_REDUCE_MIN ? INFINITY : 0;
  double m = -INFINITY;
  for (int64_t i = 0; i < n; i++) m = v[i] > m ? v[i] : m;
  for (int64_t i = 0; i < n; i++) {
    switch (op) {
    case MG_REDUCE_SUM: case MG_REDUCE_MEAN: case MG_REDUCE_LOG_SUM: a += v[i]; break;
    case MG_REDUCE_SUM_SQUARE: case MG_REDUCE_L2: a += v[i] * v[i]; break;
    case MG_REDUCE_L1: a += fabs(v[i]); break;
    case MG_REDUCE_LOG_SUM_EXP: a += exp(v[i] - m); break;
    case MG_REDUCE_MAX: a = v[i] > a ? v[i] : a; break;
    case MG_REDUCE_MIN: a = v[i] < a ? v[i] : a; break;
    case MG_REDUCE_PROD: a *= v[i]; break;
    }
  }
  switch (op) {
  case MG_REDUCE_MEAN: return a / (double)n;
  case MG_REDUCE_L2: return sqrt(a);
  case MG_REDUCE_LOG_SUM: return log(a);
  case MG_REDUCE_LOG_SUM_EXP: return n ? m + log(a) : -INFINITY;
  default: return a;
  }
}

static void test_reduce_f32(void **state) {
  (void)state;
  for (int iter = 0; iter < 400; iter++) {
    mg_reduce_op op = (mg_reduce_op)(iter % 10);
    int64_t outer = rnd_dim(), n = iter % 37 == 0 ? rnd_int(300, 1200) : rnd_dim(), inner = iter % 3 ? rnd_dim() : rnd_int(60, 140);
    if (op == MG_REDUCE_PROD && n > 20) n = 20;
    float *x = rnd_floats(outer * n * inner), *y = malloc(sizeof(float) * (size_t)(outer * inner));
    if (op == MG_REDUCE_LOG_SUM)
      for (int64_t i = 0; i < outer * n * inner; i++) x[i] = fabsf(x[i]);
    double *v = malloc(sizeof(double) * (size_t)n);
    int64_t keep[2] = {outer, inner}, kst[2] = {n * inner, 1}, rs[1] = {n}, rst[1] = {inner};
    float *g = malloc(sizeof(float) * (size_t)(outer * inner));
    mg_reduce_f32(op, outer, n, inner, x, y);
    mg_reduce(MG_RT_F32, op, 2, keep, kst, 1, rs, rst, x, g);
    for (int64_t o = 0; o < outer; o++)
      for (int64_t i = 0; i < inner; i++) {
        double S = 0;
        for (int64_t j = 0; j < n; j++) v[j] = x[(o * n + j) * inner + i], S += fabs(v[j]);
        double want = ref_reduce(op, v, n);
        double atol = (op <= MG_REDUCE_L1) ? 1e-6 * S + 1e-6 : 1e-6;
        assert_close(y[o * inner + i], want, 1e-5, atol);
        assert_close(g[o * inner + i], want, 1e-6, 1e-7);
      }
    free(x), free(y), free(v), free(g);
  }
  /* NaN propagation and empty reductions */
  float x[3] = {1, NAN, 2}, y[1];
  mg_reduce_f32(MG_REDUCE_MAX, 1, 3, 1, x, y);
  assert_true(isnan(y[0]));
  mg_reduce_f32(MG_REDUCE_MIN, 1, 0, 1, x, y);
  assert_true(isinf(y[0]) && y[0] > 0);
  mg_reduce_f32(MG_REDUCE_LOG_SUM_EXP, 1, 0, 1, x, y);
  assert_true(isinf(y[0]) && y[0] < 0);
}

/* Non-contiguous axes, integer wraparound, float16 rounding. */
static void test_reduce_generic(void **state) {
  (void)state;
  /* [A=3, B=4, C=5] reduce axes {0, 2}: keep B */
  int32_t x[60];
  for (int i = 0; i < 60; i++) x[i] = i % 2 ? INT32_MAX - i : i * 1000;
  int32_t y[4];
  int64_t ks[1] = {4}, kst[1] = {5}, rs[2] = {3, 5}, rst[2] = {20, 1};
  mg_reduce(MG_RT_I32, MG_REDUCE_SUM, 1, ks, kst, 2, rs, rst, x, y);
  for (int b = 0; b < 4; b++) {
    uint32_t s = 0;
    for (int a = 0; a < 3; a++)
      for (int c = 0; c < 5; c++) s += (uint32_t)x[a * 20 + b * 5 + c];
    assert_int_equal(y[b], (int32_t)s);
  }
  /* Mean of int32 truncates through double */
  mg_reduce(MG_RT_I32, MG_REDUCE_MEAN, 1, ks, kst, 2, rs, rst, x, y);
  for (int b = 0; b < 4; b++) {
    double s = 0;
    for (int a = 0; a < 3; a++)
      for (int c = 0; c < 5; c++) s += x[a * 20 + b * 5 + c];
    assert_int_equal(y[b], (int32_t)(int64_t)(s / 15));
  }
  /* float16: sum of 1.0 + 2^-11 + 2^-11 rounds once (to 1.0009765625) */
  uint16_t h[3] = {mg_rt_f32_to_f16(1.0f), mg_rt_f32_to_f16(0.00048828125f), mg_rt_f32_to_f16(0.00048828125f)}, o;
  int64_t one[1] = {1}, three[1] = {3}, st1[1] = {1};
  mg_reduce(MG_RT_F16, MG_REDUCE_SUM, 1, one, st1, 1, three, st1, h, &o);
  assert_true(mg_rt_f16_to_f32(o) == 1.0009765625f);
  /* noop: no reduced dims gives the op of each element */
  float f[4] = {-1, 2, -3, 4}, g[4];
  int64_t four[1] = {4};
  mg_reduce(MG_RT_F32, MG_REDUCE_SUM_SQUARE, 1, four, st1, 0, NULL, NULL, f, g);
  for (int i = 0; i < 4; i++) assert_true(g[i] == f[i] * f[i]);
}

static void test_arg_cumsum(void **state) {
  (void)state;
  for (int iter = 0; iter < 80; iter++) {
    int64_t outer = rnd_dim(), n = rnd_dim(), inner = rnd_dim();
    int is_min = rnd_int(0, 1), last = rnd_int(0, 1), excl = rnd_int(0, 1), rev = rnd_int(0, 1);
    int64_t total = outer * n * inner;
    float *x = malloc(sizeof(float) * (size_t)total);
    int64_t *ai = malloc(sizeof(int64_t) * (size_t)total), *y = malloc(sizeof(int64_t) * (size_t)(outer * inner));
    for (int64_t i = 0; i < total; i++) x[i] = (float)rnd_int(-3, 3), ai[i] = rnd_int(-1000, 1000);
    mg_argextreme(MG_RT_F32, is_min, last, outer, n, inner, x, y);
    for (int64_t o = 0; o < outer; o++)
      for (int64_t i = 0; i < inner; i++) {
        int64_t best = 0;
        for (int64_t j = 1; j < n; j++) {
          float a = x[(o * n + j) * inner + i], b = x[(o * n + best) * inner + i];
          if (is_min ? (a < b || (last && a == b)) : (a > b || (last && a == b))) best = j;
        }
        assert_int_equal(y[o * inner + i], best);
      }
    int64_t *cs = malloc(sizeof(int64_t) * (size_t)total);
    mg_cumsum(MG_RT_I64, excl, rev, outer, n, inner, ai, cs);
    for (int64_t o = 0; o < outer; o++)
      for (int64_t i = 0; i < inner; i++)
        for (int64_t j = 0; j < n; j++) {
          int64_t s = 0;
          for (int64_t t = 0; t < n; t++) {
            int in = rev ? (excl ? t > j : t >= j) : (excl ? t < j : t <= j);
            if (in) s += ai[(o * n + t) * inner + i];
          }
          assert_int_equal(cs[(o * n + j) * inner + i], s);
        }
    mg_cumsum(MG_RT_I64, excl, rev, outer, n, inner, ai, ai); /* in place */
    assert_memory_equal(ai, cs, sizeof(int64_t) * (size_t)total);
    free(x), free(ai), free(y), free(cs);
  }
}

static void test_softmax(void **state) {
  (void)state;
  for (int iter = 0; iter < 150; iter++) {
    mg_softmax_kind kind = (mg_softmax_kind)(iter % 3);
    int64_t outer = rnd_dim(), n = iter % 11 == 0 ? rnd_int(100, 700) : rnd_dim(),
            inner = iter % 2 ? 1 : (iter % 4 ? rnd_dim() : rnd_int(60, 130));
    int64_t total = outer * n * inner;
    float *x = rnd_floats(total), *y = malloc(sizeof(float) * (size_t)total);
    double *d = malloc(sizeof(double) * (size_t)total), *dy = malloc(sizeof(double) * (size_t)total);
    for (int64_t i = 0; i < total; i++) x[i] *= 20, d[i] = x[i];
    if (iter % 13 == 0) x[0] = -INFINITY, d[0] = -INFINITY;
    mg_softmax_f32(kind, outer, n, inner, x, y);
    mg_softmax(MG_RT_F64, kind, outer, n, inner, d, dy);
    for (int64_t o = 0; o < outer; o++)
      for (int64_t i = 0; i < inner; i++) {
        double m = -INFINITY, s = 0;
        int64_t arg = 0;
        for (int64_t j = 0; j < n; j++) {
          double v = x[(o * n + j) * inner + i];
          if (v > m) m = v, arg = j;
        }
        for (int64_t j = 0; j < n; j++) s += exp(x[(o * n + j) * inner + i] - m);
        for (int64_t j = 0; j < n; j++) {
          int64_t at = (o * n + j) * inner + i;
          double v = x[at] - m;
          double want = kind == MG_SOFTMAX ? exp(v) / s : kind == MG_LOG_SOFTMAX ? v - log(s) : (j == arg);
          assert_close(y[at], want, 1e-5, 1e-7);
          assert_close(dy[at], want, 1e-12, 1e-15);
        }
      }
    mg_softmax_f32(kind, outer, n, inner, x, x); /* in place */
    assert_memory_equal(x, y, sizeof(float) * (size_t)total);
    free(x), free(y), free(d), free(dy);
  }
}

static void test_lp_mvn(void **state) {
  (void)state;
  for (int iter = 0; iter < 40; iter++) {
    int64_t outer = rnd_dim(), n = rnd_dim(), inner = rnd_dim(), total = outer * n * inner;
    int p = rnd_int(1, 2);
    float *x = rnd_floats(total), *y = malloc(sizeof(float) * (size_t)total);
    mg_lp_normalize(MG_RT_F32, p, outer, n, inner, x, y);
    for (int64_t o = 0; o < outer; o++)
      for (int64_t i = 0; i < inner; i++) {
        double s = 0;
        for (int64_t j = 0; j < n; j++) {
          double v = x[(o * n + j) * inner + i];
          s += p == 1 ? fabs(v) : v * v;
        }
        if (p == 2) s = sqrt(s);
        for (int64_t j = 0; j < n; j++)
          assert_close(y[(o * n + j) * inner + i], x[(o * n + j) * inner + i] / s, 1e-6, 1e-7);
      }
    free(x), free(y);
  }
  /* MVN over axes {0, 2} of [3, 4, 5] (keep axis 1) */
  float *x = rnd_floats(60), y[60];
  int64_t ks[1] = {4}, kst[1] = {5}, rs[2] = {3, 5}, rst[2] = {20, 1};
  mg_mvn(MG_RT_F32, 1, ks, kst, 2, rs, rst, x, y);
  for (int b = 0; b < 4; b++) {
    double m = 0, v = 0;
    for (int a = 0; a < 3; a++)
      for (int c = 0; c < 5; c++) m += x[a * 20 + b * 5 + c];
    m /= 15;
    for (int a = 0; a < 3; a++)
      for (int c = 0; c < 5; c++) v += (x[a * 20 + b * 5 + c] - m) * (x[a * 20 + b * 5 + c] - m);
    v = sqrt(v / 15) + 1e-9;
    for (int a = 0; a < 3; a++)
      for (int c = 0; c < 5; c++) assert_close(y[a * 20 + b * 5 + c], (x[a * 20 + b * 5 + c] - m) / v, 1e-5, 1e-6);
  }
  free(x);
}

/* runtime/dynamic.c: NonZero into a max layout, ONNX Slice ranges, NMS. */
static void test_dynamic(void **state) {
  (void)state;
  /* NonZero of a 2x3 int32 [[0, 5, 0], [7, 0, 9]]: (0,1) (1,0) (1,2); rows 8 apart */
  int32_t x[6] = {0, 5, 0, 7, 0, 9};
  int64_t shape[2] = {2, 3}, out[16];
  memset(out, 0xff, sizeof out);
  assert_int_equal(mg_nonzero(MG_RT_I32, 2, shape, x, out, 8), 3);
  const int64_t rows[2][3] = {{0, 1, 1}, {1, 0, 2}};
  for (int d = 0; d < 2; d++)
    for (int i = 0; i < 3; i++) assert_int_equal(out[d * 8 + i], rows[d][i]);
  assert_int_equal(out[3], -1); /* nothing past the count */
  float f[4] = {0.0f, -0.0f, NAN, 1e-30f};
  int64_t fs[1] = {4};
  assert_int_equal(mg_nonzero(MG_RT_F32, 1, fs, f, out, 4), 2); /* NaN counts, -0.0 does not */

  /* Slice ranges, by the ONNX rules on a run-time length of 10 */
  int64_t first;
  assert_int_equal(mg_slice_range(10, 0, INT64_MAX, 1, &first), 10), assert_int_equal(first, 0);
  assert_int_equal(mg_slice_range(10, -3, INT64_MAX, 1, &first), 3), assert_int_equal(first, 7);
  assert_int_equal(mg_slice_range(10, 1, -1, 2, &first), 4), assert_int_equal(first, 1); /* 1 3 5 7 */
  assert_int_equal(mg_slice_range(10, -1, INT64_MIN, -3, &first), 4), assert_int_equal(first, 9); /* 9 6 3 0 */
  assert_int_equal(mg_slice_range(0, 0, 50, 1, &first), 0);
  assert_int_equal(mg_slice_range(4, 6, 50, 1, &first), 0);
  int16_t src[5] = {10, 11, 12, 13, 14}, dst[5] = {0};
  mg_copy_rows(2, 3, src, 4, -2, dst); /* rows 4 2 0 */
  assert_int_equal(dst[0], 14), assert_int_equal(dst[1], 12), assert_int_equal(dst[2], 10);

  /* NMS, one batch, two classes: boxes 0 and 1 overlap with IoU 81/119 (about
   * 0.68), box 2 is apart. Class 0 keeps 1 (higher score) then 2; class 1 has
   * box 0 above the score threshold only. */
  const float boxes[3 * 4] = {0, 0, 10, 10, 1, 1, 11, 11, 20, 20, 30, 30};
  const float scores[2 * 3] = {0.5f, 0.9f, 0.7f, 0.8f, 0.1f, 0.2f};
  float scratch[64];
  int64_t sel[3 * 6];
  assert_true(mg_nms_scratch(3) <= 64);
  int64_t cnt = mg_nms(1, 2, 3, boxes, 12, scores, 3, 10, 0.5f, 1, 0.3f, 0, sel, 6, scratch);
  assert_int_equal(cnt, 3);
  const int64_t want[3][3] = {{0, 0, 1}, {0, 0, 2}, {0, 1, 0}};
  for (int i = 0; i < 3; i++)
    for (int k = 0; k < 3; k++) assert_int_equal(sel[i * 3 + k], want[i][k]);
  /* above IoU 0.7 nothing is suppressed; max_output_boxes_per_class 1 keeps one
   * per class; a cap too small is -1 */
  assert_int_equal(mg_nms(1, 2, 3, boxes, 12, scores, 3, 10, 0.7f, 1, 0.3f, 0, sel, 6, scratch), 4);
  assert_int_equal(mg_nms(1, 2, 3, boxes, 12, scores, 3, 1, 0.5f, 1, 0.3f, 0, sel, 6, scratch), 2);
  assert_int_equal(mg_nms(1, 2, 3, boxes, 12, scores, 3, 10, 0.7f, 1, 0.3f, 0, sel, 3, scratch), -1);
  /* equal scores: the lower index first */
  const float tie[3] = {0.5f, 0.5f, 0.5f};
  assert_int_equal(mg_nms(1, 1, 3, boxes, 12, tie, 3, 10, 0.5f, 0, 0, 0, sel, 6, scratch), 2);
  assert_int_equal(sel[2], 0), assert_int_equal(sel[5], 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dynamic),
      cmocka_unit_test(test_copy_transpose),  cmocka_unit_test(test_copy_nhwc),
      cmocka_unit_test(test_copy_reverse_broadcast), cmocka_unit_test(test_fill_maps),
      cmocka_unit_test(test_gather),          cmocka_unit_test(test_elements),
      cmocka_unit_test(test_nd),              cmocka_unit_test(test_trilu_reverse_onehot),
      cmocka_unit_test(test_topk),            cmocka_unit_test(test_reduce_f32),
      cmocka_unit_test(test_reduce_generic),  cmocka_unit_test(test_arg_cumsum),
      cmocka_unit_test(test_softmax),         cmocka_unit_test(test_lp_mvn),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
