/* The runtime's thread pool (runtime/pool.c) and the threaded convolution: every
 * task runs once per run on the thread it belongs to, a pool is reused for many
 * runs, and mg_conv2d_mt / mg_conv2d_part give mg_conv2d's result bit for bit at
 * every thread count, weights prepared or not. Built also with ThreadSanitizer
 * (test_rt_pool_tsan), which fails the test on any data race. The other threaded
 * kernels (mg_rt_pool.h) are checked the same way, with their size thresholds at 1
 * so that even these small cases are split. */
#define MG_PAR_MIN_ELEMS 1
#define MG_PAR_MIN_FLOPS 1
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

typedef struct {
  int *hits;
  int64_t align;
  int bad;
} range_ctx;

static void range_hits(const void *ctx, int t, int64_t b, int64_t e) {
  const range_ctx *r = ctx;
  int64_t i;
  (void)t;
  if (b % r->align) ((range_ctx *)r)->bad = 1; /* only read by the caller after the run */
  for (i = b; i < e; i++) r->hits[i]++;
}

/* mg_pool_for: every item in exactly one range, each range starting aligned. */
static void test_pool_for_covers(void **state) {
  static const int64_t totals[] = {1, 2, 63, 64, 65, 200, 1000};
  int n, k, i;
  (void)state;
  for (n = 1; n <= 4; n++) {
    mg_pool *pool = mg_pool_start(n);
    assert_non_null(pool);
    for (k = 0; k < (int)(sizeof totals / sizeof totals[0]); k++) {
      int hits[1000];
      range_ctx r;
      memset(hits, 0, sizeof hits);
      r.hits = hits, r.align = totals[k] > 64 ? 16 : 1, r.bad = 0;
      mg_pool_for(pool, totals[k], r.align, 1, range_hits, &r);
      for (i = 0; i < totals[k]; i++) assert_int_equal(hits[i], 1);
      assert_int_equal(r.bad, 0);
    }
    mg_pool_stop(pool);
  }
}

/* mg_sgemm against mg_sgemm_mt and the parts in sequence, byte for byte, on
 * every path: matrix-vector (M == 1, N == 1), the transposed narrow product
 * (N = 49), plain blocked with each transposition, and beta accumulation. */
static void check_gemm(int M, int N, int K, int tA, int tB, float beta) {
  const size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
  float *A = rnd_array(na), *B = rnd_array(nb), *C0 = rnd_array(nc);
  float *c1 = malloc(nc * sizeof(float)), *cn = malloc(nc * sizeof(float));
  const size_t per = mg_sgemm_scratch(M, N, K) + 1;
  float *s = malloc(per * 4 * sizeof(float));
  const int lda = tA ? M : K, ldb = tB ? K : N;
  int n, t;
  assert_non_null(c1), assert_non_null(cn), assert_non_null(s);
  memcpy(c1, C0, nc * sizeof(float));
  mg_sgemm(M, N, K, 0.75f, A, lda, tA, B, ldb, tB, beta, c1, N, s);
  for (n = 2; n <= 4; n++) {
    mg_pool *pool = mg_pool_start(n);
    assert_non_null(pool);
    memcpy(cn, C0, nc * sizeof(float));
    mg_sgemm_mt(pool, M, N, K, 0.75f, A, lda, tA, B, ldb, tB, beta, cn, N, s, per);
    assert_memory_equal(c1, cn, nc * sizeof(float));
    mg_pool_stop(pool);
    memcpy(cn, C0, nc * sizeof(float));
    for (t = 0; t < n; t++)
      mg_sgemm_part(M, N, K, 0.75f, A, lda, tA, B, ldb, tB, beta, cn, N, s + (size_t)t * per, t, n);
    assert_memory_equal(c1, cn, nc * sizeof(float));
  }
  free(A), free(B), free(C0), free(c1), free(cn), free(s);
}

/* mg_sgemm_prepb (B prepared at the compiled NR, read in place, and at another
 * panel width, repacked) against its threaded form. */
static void check_prepb(int M, int N, int K, int pnr) {
  float *A = rnd_array((size_t)M * K), *Bt = rnd_array((size_t)N * K);
  float *PB = aligned_alloc(64, (mg_sgemm_packed_floats(N, K, pnr) + 16) * sizeof(float));
  float *c1 = malloc((size_t)M * N * sizeof(float)), *cn = malloc((size_t)M * N * sizeof(float));
  const size_t per = mg_sgemm_packed_scratch(M, N, K) + 1;
  float *s = malloc(per * 4 * sizeof(float));
  int n;
  assert_non_null(PB), assert_non_null(c1), assert_non_null(cn), assert_non_null(s);
  mg_sgemm_pack(N, K, Bt, K, pnr, PB);
  mg_sgemm_prepb(M, N, K, A, K, PB, pnr, 0.0f, c1, N, s);
  for (n = 2; n <= 4; n++) {
    mg_pool *pool = mg_pool_start(n);
    assert_non_null(pool);
    memset(cn, 0xff, (size_t)M * N * sizeof(float));
    mg_sgemm_prepb_mt(pool, M, N, K, A, K, PB, pnr, 0.0f, cn, N, s, per);
    assert_memory_equal(c1, cn, (size_t)M * N * sizeof(float));
    mg_pool_stop(pool);
  }
  free(A), free(Bt), free(PB), free(c1), free(cn), free(s);
}

static void test_gemm_threads_bitwise(void **state) {
  (void)state;
  check_gemm(1, 300, 70, 0, 0, 0.0f);  /* gemv, axpy form */
  check_gemm(1, 300, 70, 0, 1, 1.0f);  /* gemv, dot form, accumulating */
  check_gemm(97, 1, 50, 0, 0, 0.0f);   /* one column */
  check_gemm(97, 1, 50, 1, 0, 0.5f);
  check_gemm(128, 49, 96, 0, 0, 0.0f); /* narrow: computed as C^T */
  check_gemm(37, 45, 300, 0, 0, 0.0f); /* K over one block */
  check_gemm(37, 45, 20, 1, 1, 1.0f);
  check_gemm(7, 200, 33, 0, 1, 0.0f);  /* fewer row tiles than threads */
  check_gemm(50, 60, 0, 0, 0, 0.5f);   /* K = 0: C = beta C */
  check_prepb(197, 70, 64, mg_sgemm_nr());
  check_prepb(13, 33, 300, 8);
}

/* The row- and range-split kernels (unary, binary with broadcasting, Softmax,
 * LayerNorm, MaxPool, a transposing copy, batched MatMul) against one thread. */
static void test_rows_threads_bitwise(void **state) {
  enum { R = 37, L = 150 };
  float *x = rnd_array(R * L), *z = rnd_array(L), *sc = rnd_array(L), *bi = rnd_array(L);
  float y1[R * L], yn[R * L], m1[R], mn[R], v1[R], vn[R];
  float *s = malloc(4 * (mg_sgemm_scratch(5, 6, 7) + 1) * sizeof(float));
  const int64_t shape2[2] = {R, L}, xs[2] = {L, 1}, zs[2] = {0, 1}, shape1[1] = {R * L}, s1[1] = {1};
  const int64_t tshape[2] = {L, R}, ts[2] = {1, L}, ds[2] = {R, 1};
  const int64_t aoff[6] = {0, 35, 70, 105, 140, 175}, boff[6] = {0, 42, 84, 126, 168, 210};
  mg_pool2d_params pp;
  int n;
  (void)state;
  memset(&pp, 0, sizeof pp);
  pp.planes = 6, pp.H = 25, pp.W = 37, pp.kh = pp.kw = 3, pp.stride_h = pp.stride_w = 2;
  pp.dil_h = pp.dil_w = 1, pp.pad_t = pp.pad_l = pp.pad_b = pp.pad_r = 1, pp.OH = 13, pp.OW = 19;
  assert_non_null(s);
  for (n = 2; n <= 4; n++) {
    mg_pool *pool = mg_pool_start(n);
    assert_non_null(pool);
    mg_unary_f32(MG_UN_GELU, R * L, x, y1, 0, 0);
    mg_unary_f32_mt(pool, MG_UN_GELU, R * L, x, yn, 0, 0);
    assert_memory_equal(y1, yn, sizeof y1);
    mg_binary_f32(MG_BIN_ADD, 2, shape2, x, xs, z, zs, y1, MG_ACT_SIGMOID, 0, 0);
    mg_binary_f32_mt(pool, MG_BIN_ADD, 2, shape2, x, xs, z, zs, yn, MG_ACT_SIGMOID, 0, 0);
    assert_memory_equal(y1, yn, sizeof y1);
    mg_binary_f32(MG_BIN_MUL, 1, shape1, x, s1, x, s1, y1, MG_ACT_TANH, 0, 0);
    mg_binary_f32_mt(pool, MG_BIN_MUL, 1, shape1, x, s1, x, s1, yn, MG_ACT_TANH, 0, 0);
    assert_memory_equal(y1, yn, sizeof y1);
    mg_softmax_f32(MG_SOFTMAX, R, L, 1, x, y1);
    mg_softmax_f32_mt(pool, MG_SOFTMAX, R, L, 1, x, yn);
    assert_memory_equal(y1, yn, sizeof y1);
    mg_layernorm(R, L, x, sc, bi, 1e-5f, y1, m1, v1);
    mg_layernorm_mt(pool, R, L, x, sc, bi, 1e-5f, yn, mn, vn);
    assert_memory_equal(y1, yn, sizeof y1);
    assert_memory_equal(m1, mn, sizeof m1), assert_memory_equal(v1, vn, sizeof v1);
    mg_maxpool2d(&pp, x, y1);
    mg_maxpool2d_mt(pool, &pp, x, yn);
    assert_memory_equal(y1, yn, 6 * 13 * 19 * sizeof(float));
    mg_copy_nd(sizeof(float), 2, tshape, x, ts, y1, ds);
    mg_copy_nd_mt(pool, sizeof(float), 2, tshape, x, ts, yn, ds);
    assert_memory_equal(y1, yn, sizeof y1);
    mg_reduce_f32(MG_REDUCE_MEAN, R, 30, 5, x, y1);
    mg_reduce_f32_mt(pool, MG_REDUCE_MEAN, R, 30, 5, x, yn);
    assert_memory_equal(y1, yn, R * 5 * sizeof(float));
    mg_global_avgpool(R, L, x, y1);
    mg_global_avgpool_mt(pool, R, L, x, yn);
    assert_memory_equal(y1, yn, R * sizeof(float));
    mg_global_maxpool(R, L, x, y1);
    mg_global_maxpool_mt(pool, R, L, x, yn);
    assert_memory_equal(y1, yn, R * sizeof(float));
    mg_matmul_batched(6, 5, 6, 7, x, aoff, x + L, boff, y1, s);
    mg_matmul_batched_mt(pool, 6, 5, 6, 7, x, aoff, x + L, boff, yn, s, mg_sgemm_scratch(5, 6, 7) + 1);
    assert_memory_equal(y1, yn, 6 * 5 * 6 * sizeof(float));
    mg_pool_stop(pool);
  }
  free(x), free(z), free(sc), free(bi), free(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pool_runs),
      cmocka_unit_test(test_conv_threads_bitwise),
      cmocka_unit_test(test_pool_for_covers),
      cmocka_unit_test(test_gemm_threads_bitwise),
      cmocka_unit_test(test_rows_threads_bitwise),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
