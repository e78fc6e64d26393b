/* A small thread pool for generated code built with --threads N (runtime/pool.c,
 * POSIX threads). It is started outside model_run (model_init or
 * model_set_threads) and model_run only hands it work: no allocation and no
 * thread creation in a run. Work is split statically, task t of n always on the
 * same thread, and the kernels split outputs, never a sum, so results do not
 * depend on the thread count. */
#ifndef MG_RT_POOL_H
#define MG_RT_POOL_H

#ifdef __cplusplus
extern "C" {
#endif

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Most threads a pool runs (the caller's included). */
#define MG_POOL_MAX 64

typedef struct mg_pool mg_pool;

/* A pool of n threads (1 <= n <= MG_POOL_MAX): the caller and n - 1 workers.
 * Returns NULL when n is out of range or a thread or the memory cannot be had. */
mg_pool *mg_pool_start(int n);
/* Stops and frees the pool (NULL: nothing). No run may be in progress. */
void mg_pool_stop(mg_pool *pool);
/* Threads of the pool; 1 for NULL. */
int mg_pool_threads(const mg_pool *pool);
/* Calls fn(ctx, t, n) for every t < n = mg_pool_threads(pool), t = 0 on the
 * calling thread, and returns when all have returned. With NULL, fn(ctx, 0, 1).
 * One run at a time per pool. */
void mg_pool_run(mg_pool *pool, void (*fn)(void *ctx, int t, int n), void *ctx);

/* mg_conv2d on the pool's threads (mg_conv2d_part t on thread t), thread t with the
 * scratch at scratch + t * per_thread floats (per_thread >= mg_conv2d_scratch(p)).
 * The same bits as mg_conv2d. */
void mg_conv2d_mt(mg_pool *pool, const mg_conv2d_params *p, const float *x, const float *w,
                  const float *bias, float *y, float *scratch, size_t per_thread);

/* One range of a mg_pool_for: items [b, e), run as part t (the scratch index). */
typedef void (*mg_range_fn)(const void *ctx, int t, int64_t b, int64_t e);

/* Calls fn(ctx, t, b, e) over [0, total) cut into at most mg_pool_threads(pool)
 * consecutive ranges, each starting on a multiple of align and, but for the last,
 * at least min_range items long; part t runs on thread t. Below two ranges' worth
 * it is one fn(ctx, 0, 0, total) on the calling thread: a small op does not pay
 * for the hand-off. Every item is in exactly one range. */
void mg_pool_for(mg_pool *pool, int64_t total, int64_t align, int64_t min_range, mg_range_fn fn,
                 const void *ctx);

/* The threaded forms of the kernels below share one contract: the result is the
 * one-thread kernel's, bit for bit, for every pool (each splits outputs along
 * whole rows, planes, tiles or vector-aligned runs, never a sum), and an op too
 * small to pay for the hand-off runs on the calling thread. They are static
 * inline so that a generated project links only the kernels it calls. */

/* Smallest share of an elementwise or copy op worth a thread, in elements, and
 * the smallest product (M*N*K) worth splitting. Tests build with both at 1, so
 * that a small model takes every split. */
#ifndef MG_PAR_MIN_ELEMS
#define MG_PAR_MIN_ELEMS 16384
#endif
#ifndef MG_PAR_MIN_FLOPS
#define MG_PAR_MIN_FLOPS (1 << 20)
#endif
/* Elementwise ranges start on multiples of this: whole vectors of any kernel. */
#define MG_PAR_ALIGN 64

typedef struct {
  int M, N, K, lda, ldb, ldc, tA, tB, pnr;
  float alpha, beta;
  const float *A, *B;
  float *C, *scratch;
  size_t per_thread;
} mg_par_gemm;

static inline void mg_par_sgemm_task(void *ctx, int t, int n) {
  const mg_par_gemm *g = (const mg_par_gemm *)ctx;
  mg_sgemm_part(g->M, g->N, g->K, g->alpha, g->A, g->lda, g->tA, g->B, g->ldb, g->tB, g->beta, g->C,
                g->ldc, g->scratch + (size_t)t * g->per_thread, t, n);
}

/* mg_sgemm on the pool, thread t with scratch + t * per_thread floats
 * (per_thread >= mg_sgemm_scratch(M, N, K)). */
static inline void mg_sgemm_mt(mg_pool *pool, int M, int N, int K, float alpha, const float *A,
                               int lda, int transA, const float *B, int ldb, int transB, float beta,
                               float *C, int ldc, float *scratch, size_t per_thread) {
  mg_par_gemm g;
  g.M = M, g.N = N, g.K = K, g.alpha = alpha, g.A = A, g.lda = lda, g.tA = transA, g.B = B;
  g.ldb = ldb, g.tB = transB, g.beta = beta, g.C = C, g.ldc = ldc, g.scratch = scratch;
  g.per_thread = per_thread, g.pnr = 0;
  if ((double)M * N * K < MG_PAR_MIN_FLOPS)
    mg_par_sgemm_task(&g, 0, 1);
  else
    mg_pool_run(pool, mg_par_sgemm_task, &g);
}

static inline void mg_par_prepb_task(void *ctx, int t, int n) {
  const mg_par_gemm *g = (const mg_par_gemm *)ctx;
  mg_sgemm_prepb_part(g->M, g->N, g->K, g->A, g->lda, g->B, g->pnr, g->beta, g->C, g->ldc,
                      g->scratch + (size_t)t * g->per_thread, t, n);
}

/* mg_sgemm_prepb on the pool (per_thread >= mg_sgemm_packed_scratch(M, N, K)). */
static inline void mg_sgemm_prepb_mt(mg_pool *pool, int M, int N, int K, const float *A, int lda,
                                     const float *PB, int pnr, float beta, float *C, int ldc,
                                     float *scratch, size_t per_thread) {
  mg_par_gemm g;
  g.M = M, g.N = N, g.K = K, g.A = A, g.lda = lda, g.B = PB, g.pnr = pnr, g.beta = beta, g.C = C;
  g.ldc = ldc, g.scratch = scratch, g.per_thread = per_thread;
  g.alpha = 1.0f, g.ldb = 0, g.tA = 0, g.tB = 0;
  if ((double)M * N * K < MG_PAR_MIN_FLOPS)
    mg_par_prepb_task(&g, 0, 1);
  else
    mg_pool_run(pool, mg_par_prepb_task, &g);
}

typedef struct {
  int M, N, K;
  const float *A, *B;
  const int64_t *a_off, *b_off;
  float *y, *scratch;
  size_t per_thread;
} mg_par_batched;

static inline void mg_par_batched_range(const void *ctx, int t, int64_t b, int64_t e) {
  const mg_par_batched *j = (const mg_par_batched *)ctx;
  mg_matmul_batched((int)(e - b), j->M, j->N, j->K, j->A, j->a_off + b, j->B, j->b_off + b,
                    j->y + (size_t)b * j->M * j->N, j->scratch + (size_t)t * j->per_thread);
}

/* mg_matmul_batched on the pool: whole matrices per thread (attention's heads), or,
 * with fewer matrices than threads, each product split (per_thread >=
 * mg_sgemm_scratch(M, N, K)). */
static inline void mg_matmul_batched_mt(mg_pool *pool, int batch, int M, int N, int K,
                                        const float *A, const int64_t *a_off, const float *B,
                                        const int64_t *b_off, float *y, float *scratch,
                                        size_t per_thread) {
  mg_par_batched j;
  int b;
  if (batch < mg_pool_threads(pool)) {
    for (b = 0; b < batch; b++)
      mg_sgemm_mt(pool, M, N, K, 1.0f, A + a_off[b], K, 0, B + b_off[b], N, 0, 0.0f,
                  y + (size_t)b * M * N, N, scratch, per_thread);
    return;
  }
  j.M = M, j.N = N, j.K = K, j.A = A, j.B = B, j.a_off = a_off, j.b_off = b_off, j.y = y;
  j.scratch = scratch, j.per_thread = per_thread;
  mg_pool_for(pool, batch, 1, (int64_t)MG_PAR_MIN_FLOPS / ((int64_t)M * N * K + 1) + 1,
              mg_par_batched_range, &j);
}

typedef struct {
  int op, act;
  float a, b;
  const float *x;
  float *y;
} mg_par_unary;

static inline void mg_par_unary_range(const void *ctx, int t, int64_t b, int64_t e) {
  const mg_par_unary *j = (const mg_par_unary *)ctx;
  (void)t;
  mg_unary_f32((mg_unop)j->op, e - b, j->x + b, j->y + b, j->a, j->b);
}

/* mg_unary_f32 on the pool. */
static inline void mg_unary_f32_mt(mg_pool *pool, mg_unop op, int64_t n, const float *x, float *y,
                                   float a, float b) {
  mg_par_unary j;
  j.op = (int)op, j.act = 0, j.a = a, j.b = b, j.x = x, j.y = y;
  mg_pool_for(pool, n, MG_PAR_ALIGN, MG_PAR_MIN_ELEMS, mg_par_unary_range, &j);
}

typedef struct {
  int op, rank, dim;
  const int64_t *shape, *as, *bs;
  const float *a, *b;
  float *y;
  int64_t y_stride; /* y elements per step of dim */
  int act;
  float act_a, act_b;
} mg_par_binary;

static inline void mg_par_binary_range(const void *ctx, int t, int64_t b, int64_t e) {
  const mg_par_binary *j = (const mg_par_binary *)ctx;
  int64_t shape[16];
  int d;
  (void)t;
  for (d = 0; d < j->rank; d++) shape[d] = j->shape[d];
  shape[j->dim] = e - b;
  mg_binary_f32((mg_binop)j->op, j->rank, shape, j->a + b * j->as[j->dim], j->as,
                j->b + b * j->bs[j->dim], j->bs, j->y + b * j->y_stride, (mg_act)j->act, j->act_a,
                j->act_b);
}

/* The dimension a threaded kernel splits: the longest outer one, or the innermost
 * (vector-aligned ranges) when every outer one is 1. */
static inline int mg_par_split_dim(int rank, const int64_t *shape) {
  int d, best = rank - 1;
  for (d = rank - 2; d >= 0; d--)
    if (shape[d] >= 2 && (best == rank - 1 || shape[d] > shape[best])) best = d;
  return best;
}

/* mg_binary_f32 on the pool: whole rows per thread, or aligned runs of one row. */
static inline void mg_binary_f32_mt(mg_pool *pool, mg_binop op, int rank, const int64_t *shape,
                                    const float *a, const int64_t *a_strides, const float *b,
                                    const int64_t *b_strides, float *y, mg_act act, float act_a,
                                    float act_b) {
  mg_par_binary j;
  int64_t inner = 1, total = 1;
  int d;
  j.dim = mg_par_split_dim(rank, shape);
  for (d = 0; d < rank; d++) total *= shape[d];
  for (d = j.dim + 1; d < rank; d++) inner *= shape[d];
  j.op = (int)op, j.rank = rank, j.shape = shape, j.as = a_strides, j.bs = b_strides, j.a = a;
  j.b = b, j.y = y, j.y_stride = inner, j.act = (int)act, j.act_a = act_a, j.act_b = act_b;
  if (total < 2 * MG_PAR_MIN_ELEMS || rank > 16)
    mg_binary_f32(op, rank, shape, a, a_strides, b, b_strides, y, act, act_a, act_b);
  else
    mg_pool_for(pool, shape[j.dim], j.dim == rank - 1 ? MG_PAR_ALIGN : 1,
                MG_PAR_MIN_ELEMS / inner + 1, mg_par_binary_range, &j);
}

typedef struct {
  size_t es;
  int rank, dim;
  const int64_t *shape, *ss, *ds;
  const char *src;
  char *dst;
} mg_par_copy;

static inline void mg_par_copy_range(const void *ctx, int t, int64_t b, int64_t e) {
  const mg_par_copy *j = (const mg_par_copy *)ctx;
  int64_t shape[16];
  int d;
  (void)t;
  for (d = 0; d < j->rank; d++) shape[d] = j->shape[d];
  shape[j->dim] = e - b;
  mg_copy_nd(j->es, j->rank, shape, j->src + b * j->ss[j->dim] * (int64_t)j->es, j->ss,
             j->dst + b * j->ds[j->dim] * (int64_t)j->es, j->ds);
}

/* mg_copy_nd (Transpose, Concat, Slice copies) on the pool: a copy is exact, so any
 * split dimension gives the same bytes. */
static inline void mg_copy_nd_mt(mg_pool *pool, size_t elem_size, int rank, const int64_t *shape,
                                 const void *src, const int64_t *src_strides, void *dst,
                                 const int64_t *dst_strides) {
  mg_par_copy j;
  int64_t total = 1, inner = 1;
  int d;
  for (d = 0; d < rank; d++) total *= shape[d];
  if (rank < 1 || rank > 16 || total < 2 * MG_PAR_MIN_ELEMS) {
    mg_copy_nd(elem_size, rank, shape, src, src_strides, dst, dst_strides);
    return;
  }
  j.dim = mg_par_split_dim(rank, shape);
  for (d = 0; d < rank; d++)
    if (d != j.dim) inner *= shape[d];
  j.es = elem_size, j.rank = rank, j.shape = shape, j.ss = src_strides, j.ds = dst_strides;
  j.src = (const char *)src, j.dst = (char *)dst;
  mg_pool_for(pool, shape[j.dim], 1, MG_PAR_MIN_ELEMS / inner + 1, mg_par_copy_range, &j);
}

typedef struct {
  int kind;
  int64_t len, inner;
  const float *x, *scale, *bias;
  float *y, *mean, *inv_std;
  float eps;
} mg_par_rows;

static inline void mg_par_softmax_range(const void *ctx, int t, int64_t b, int64_t e) {
  const mg_par_rows *j = (const mg_par_rows *)ctx;
  const int64_t row = j->len * j->inner;
  (void)t;
  mg_softmax_f32((mg_softmax_kind)j->kind, e - b, j->len, j->inner, j->x + b * row, j->y + b * row);
}

/* mg_softmax_f32 on the pool: whole [n, inner] blocks of the outer dim per thread. */
static inline void mg_softmax_f32_mt(mg_pool *pool, mg_softmax_kind kind, int64_t outer, int64_t n,
                                     int64_t inner, const float *src, float *dst) {
  mg_par_rows j;
  memset(&j, 0, sizeof j);
  j.kind = (int)kind, j.len = n, j.inner = inner, j.x = src, j.y = dst;
  mg_pool_for(pool, outer, 1, MG_PAR_MIN_ELEMS / (n * inner + 1) + 1, mg_par_softmax_range, &j);
}

static inline void mg_par_layernorm_range(const void *ctx, int t, int64_t b, int64_t e) {
  const mg_par_rows *j = (const mg_par_rows *)ctx;
  (void)t;
  mg_layernorm((int)(e - b), (int)j->len, j->x + b * j->len, j->scale, j->bias, j->eps,
               j->y + b * j->len, j->mean ? j->mean + b : NULL, j->inv_std ? j->inv_std + b : NULL);
}

/* mg_layernorm on the pool: whole rows per thread. */
static inline void mg_layernorm_mt(mg_pool *pool, int rows, int len, const float *x,
                                   const float *scale, const float *bias, float eps, float *y,
                                   float *mean, float *inv_std) {
  mg_par_rows j;
  memset(&j, 0, sizeof j);
  j.len = len, j.x = x, j.scale = scale, j.bias = bias, j.eps = eps, j.y = y, j.mean = mean;
  j.inv_std = inv_std;
  mg_pool_for(pool, rows, 1, MG_PAR_MIN_ELEMS / (len + 1) + 1, mg_par_layernorm_range, &j);
}

typedef struct {
  int op;
  int64_t n, inner;
  const float *x;
  float *y;
  void (*global)(int planes, int size, const float *x, float *y);
} mg_par_reduce;

/* Two callbacks, not one: each names only its own kernel's file (reduce.c, nn.c). */
static inline void mg_par_reduce_range(const void *ctx, int t, int64_t b, int64_t e) {
  const mg_par_reduce *j = (const mg_par_reduce *)ctx;
  (void)t;
  mg_reduce_f32((mg_reduce_op)j->op, e - b, j->n, j->inner, j->x + b * j->n * j->inner,
                j->y + b * j->inner);
}

static inline void mg_par_global_range(const void *ctx, int t, int64_t b, int64_t e) {
  const mg_par_reduce *j = (const mg_par_reduce *)ctx;
  (void)t;
  j->global((int)(e - b), (int)j->n, j->x + b * j->n, j->y + b);
}

/* mg_reduce_f32 on the pool: whole [n, inner] blocks of the outer dim per thread
 * (the sum over n is never split). */
static inline void mg_reduce_f32_mt(mg_pool *pool, mg_reduce_op op, int64_t outer, int64_t n,
                                    int64_t inner, const float *src, float *dst) {
  mg_par_reduce j;
  j.op = (int)op, j.n = n, j.inner = inner, j.x = src, j.y = dst, j.global = 0;
  mg_pool_for(pool, outer, 1, MG_PAR_MIN_ELEMS / (n * inner + 1) + 1, mg_par_reduce_range, &j);
}

/* GlobalAveragePool / GlobalMaxPool on the pool: whole planes per thread. */
static inline void mg_global_avgpool_mt(mg_pool *pool, int planes, int size, const float *x, float *y) {
  mg_par_reduce j;
  j.op = 0, j.n = size, j.inner = 1, j.x = x, j.y = y, j.global = mg_global_avgpool;
  mg_pool_for(pool, planes, 1, MG_PAR_MIN_ELEMS / ((int64_t)size + 1) + 1, mg_par_global_range, &j);
}
static inline void mg_global_maxpool_mt(mg_pool *pool, int planes, int size, const float *x, float *y) {
  mg_par_reduce j;
  j.op = 0, j.n = size, j.inner = 1, j.x = x, j.y = y, j.global = mg_global_maxpool;
  mg_pool_for(pool, planes, 1, MG_PAR_MIN_ELEMS / ((int64_t)size + 1) + 1, mg_par_global_range, &j);
}

typedef struct {
  const mg_pool2d_params *p;
  void (*fn)(const mg_pool2d_params *, const float *, float *);
  const float *x;
  float *y;
} mg_par_pool2d;

static inline void mg_par_pool2d_range(const void *ctx, int t, int64_t b, int64_t e) {
  const mg_par_pool2d *j = (const mg_par_pool2d *)ctx;
  mg_pool2d_params q = *j->p;
  (void)t;
  q.planes = (int)(e - b);
  j->fn(&q, j->x + b * q.H * q.W, j->y + b * q.OH * q.OW);
}

/* A 2-D pooling kernel (mg_maxpool2d, mg_avgpool2d, mg_lppool2d) on the pool:
 * whole planes per thread. */
static inline void mg_pool2d_mt(mg_pool *pool, void (*fn)(const mg_pool2d_params *, const float *, float *),
                                const mg_pool2d_params *p, const float *x, float *y) {
  mg_par_pool2d j;
  j.p = p, j.fn = fn, j.x = x, j.y = y;
  mg_pool_for(pool, p->planes, 1, MG_PAR_MIN_ELEMS / ((int64_t)p->OH * p->OW * 4 + 1) + 1,
              mg_par_pool2d_range, &j);
}
/* The three 2-D pools on the pool (the names cg_kernel emits). */
static inline void mg_maxpool2d_mt(mg_pool *pool, const mg_pool2d_params *p, const float *x, float *y) {
  mg_pool2d_mt(pool, mg_maxpool2d, p, x, y);
}
static inline void mg_avgpool2d_mt(mg_pool *pool, const mg_pool2d_params *p, const float *x, float *y) {
  mg_pool2d_mt(pool, mg_avgpool2d, p, x, y);
}
static inline void mg_lppool2d_mt(mg_pool *pool, const mg_pool2d_params *p, const float *x, float *y) {
  mg_pool2d_mt(pool, mg_lppool2d, p, x, y);
}

#ifdef __cplusplus
}
#endif
#endif /* MG_RT_POOL_H */
