/* The runtime's thread pool (runtime/pool.c) and the threaded convolution: every
 * task runs once per run on the thread it belongs to, a pool is reused for many
 * runs, and mg_conv2d_mt / mg_conv2d_part give mg_conv2d's result bit for bit at
 * every thread count, weights prepared or not. Built also with ThreadSanitizer
 * (test_rt_pool_tsan), which fails the test on any data race. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "mg_runtime.h"

static unsigned long long rng = 88172645463325252ull;
static float rnd_float(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}
static float *rnd_array(size_t n) {
  float *a = malloc((n ? n : 1) * sizeof(float));
  size_t i;
  assert_non_null(a);
  for (i = 0; i < n; i++) a[i] = rnd_float();
  return a;
}

typedef struct {
  int hits[8];
  int threads_seen;
} count_ctx;

static void count_task(void *ctx, int t, int n) {
  count_ctx *c = ctx;
  c->hits[t]++; /* each t on exactly one thread: no two threads write one slot */
  if (t == 0) c->threads_seen = n;
}

static void test_pool_runs(void **state) {
  int n, r, t;
  (void)state;
  assert_null(mg_pool_start(0));
  assert_null(mg_pool_start(MG_POOL_MAX + 1));
  assert_int_equal(mg_pool_threads(NULL), 1);
  for (n = 1; n <= 4; n++) {
    mg_pool *p = mg_pool_start(n);
    count_ctx c;
    assert_non_null(p);
    assert_int_equal(mg_pool_threads(p), n);
    memset(&c, 0, sizeof c);
    for (r = 0; r < 200; r++) mg_pool_run(p, count_task, &c);
    for (t = 0; t < n; t++) assert_int_equal(c.hits[t], 200);
    for (; t < 8; t++) assert_int_equal(c.hits[t], 0);
    assert_int_equal(c.threads_seen, n);
    mg_pool_stop(p);
  }
  mg_pool_stop(NULL);
}

/* One layer: mg_conv2d's output against mg_conv2d_mt on pools of 2..4 threads
 * (and the parts run in sequence), byte for byte. */
static void check_layer(mg_conv2d_params p, int prepared) {
  const size_t nx = (size_t)p.N * p.C * p.H * p.W, nw = (size_t)p.M * (p.C / p.group) * p.kh * p.kw;
  const size_t ny = (size_t)p.N * p.M * p.OH * p.OW;
  float *x = rnd_array(nx), *w = rnd_array(nw), *b = rnd_array((size_t)p.M), *pw = NULL;
  float *y1 = malloc(ny * sizeof(float)), *yn = malloc(ny * sizeof(float)), *s;
  size_t per;
  int n, t;
  if (prepared) {
    p.prepared = (int)mg_conv2d_prep_kind(&p);
    p.prepared_mr = mg_sgemm_mr();
    if (p.prepared) {
      pw = malloc(mg_conv2d_prepared_floats(&p) * sizeof(float));
      assert_non_null(pw);
      mg_conv2d_prepare(&p, w, pw);
    }
  }
  per = mg_conv2d_scratch(&p) + 1;
  s = malloc(per * 4 * sizeof(float));
  assert_non_null(y1);
  assert_non_null(yn);
  assert_non_null(s);
  mg_conv2d(&p, x, pw ? pw : w, b, y1, s);
  for (n = 2; n <= 4; n++) {
    mg_pool *pool = mg_pool_start(n);
    assert_non_null(pool);
    memset(yn, 0xff, ny * sizeof(float));
    mg_conv2d_mt(pool, &p, x, pw ? pw : w, b, yn, s, per);
    assert_memory_equal(y1, yn, ny * sizeof(float));
    mg_pool_stop(pool);
    memset(yn, 0xff, ny * sizeof(float));
    for (t = 0; t < n; t++) mg_conv2d_part(&p, x, pw ? pw : w, b, yn, s + (size_t)t * per, t, n);
    assert_memory_equal(y1, yn, ny * sizeof(float));
  }
  free(x), free(w), free(b), free(pw), free(y1), free(yn), free(s);
}

static mg_conv2d_params layer(int C, int HW, int M, int k, int group, int s) {
  mg_conv2d_params p;
  memset(&p, 0, sizeof p);
  p.N = 1, p.C = C, p.H = p.W = HW, p.M = M, p.kh = p.kw = k, p.group = group;
  p.stride_h = p.stride_w = s, p.dil_h = p.dil_w = 1;
  p.pad_t = p.pad_l = p.pad_b = p.pad_r = k / 2;
  p.OH = mg_conv_out_dim(HW, k, s, 1, k / 2, k / 2);
  p.OW = p.OH;
  p.act = MG_ACT_RELU;
  return p;
}

/* resnet- and mobilenet-like layers, small: Winograd (and prepared Winograd),
 * im2col rows and chunks, pointwise, depthwise, and widths whose split leaves a
 * one-column rest (7x7 = 49 = 32 + 17; 33 positions). */
static void test_conv_threads_bitwise(void **state) {
  int prepared;
  (void)state;
  for (prepared = 0; prepared <= 1; prepared++) {
    check_layer(layer(16, 20, 24, 3, 1, 1), prepared);  /* Winograd */
    check_layer(layer(24, 7, 32, 3, 1, 1), prepared);   /* 16 tiles: prepared Winograd */
    check_layer(layer(8, 33, 16, 3, 1, 2), prepared);   /* 17x17 rows, strided */
    check_layer(layer(16, 7, 20, 3, 1, 2), prepared);   /* 4x4: im2col chunks */
    check_layer(layer(32, 14, 48, 1, 1, 1), prepared);  /* pointwise */
    check_layer(layer(48, 7, 40, 1, 1, 1), prepared);   /* pointwise, 49 columns */
    check_layer(layer(24, 15, 24, 3, 24, 1), prepared); /* depthwise */
    check_layer(layer(12, 11, 12, 5, 3, 1), prepared);  /* grouped */
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pool_runs),
      cmocka_unit_test(test_conv_threads_bitwise),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
