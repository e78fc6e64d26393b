/* The thread pool of mg_rt_pool.h: workers sleep on a condition variable until a
 * run's generation number changes, run their task, and the last to finish wakes
 * the caller. Compiled only into projects converted with --threads N > 1 (they
 * link with -pthread). */
#define _POSIX_C_SOURCE 200809L
#include "mg_runtime.h"

#include <pthread.h>
#include <stdlib.h>

struct mg_pool {
  int n;                     /* threads, the caller's included */
  pthread_t th[MG_POOL_MAX];
  pthread_mutex_t mu;
  pthread_cond_t go, done;
  unsigned long gen;         /* bumped by each run (and by stop) */
  int pending;               /* workers still in the current run */
  int quit;
  void (*fn)(void *ctx, int t, int n);
  void *ctx;
};

typedef struct {
  mg_pool *pool;
  int t;
} worker_arg;

/* One worker: task t of every run until quit. */
static void *worker(void *arg) {
  worker_arg a = *(worker_arg *)arg;
  mg_pool *p = a.pool;
  /* no run starts before mg_pool_start returns, so generation 0 is the one to
   * wait past (reading p->gen here could miss a run that began first) */
  unsigned long seen = 0;
  free(arg);
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (p->gen == seen && !p->quit) pthread_cond_wait(&p->go, &p->mu);
    if (p->quit) break;
    seen = p->gen;
    pthread_mutex_unlock(&p->mu);
    p->fn(p->ctx, a.t, p->n);
    pthread_mutex_lock(&p->mu);
    if (--p->pending == 0) pthread_cond_signal(&p->done);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

mg_pool *mg_pool_start(int n) {
  mg_pool *p;
  int t;
  if (n < 1 || n > MG_POOL_MAX) return NULL;
  p = (mg_pool *)calloc(1, sizeof *p);
  if (!p) return NULL;
  p->n = 1;
  if (pthread_mutex_init(&p->mu, NULL)) {
    free(p);
    return NULL;
  }
  if (pthread_cond_init(&p->go, NULL)) {
    pthread_mutex_destroy(&p->mu);
    free(p);
    return NULL;
  }
  if (pthread_cond_init(&p->done, NULL)) {
    pthread_cond_destroy(&p->go);
    pthread_mutex_destroy(&p->mu);
    free(p);
    return NULL;
  }
  for (t = 1; t < n; t++) {
    worker_arg *a = (worker_arg *)malloc(sizeof *a);
    if (!a) break;
    a->pool = p, a->t = t;
    if (pthread_create(&p->th[t], NULL, worker, a)) {
      free(a);
      break;
    }
    p->n = t + 1;
  }
  if (p->n != n) {
    /* the workers started so far see n short of what they were told: stop them */
    mg_pool_stop(p);
    return NULL;
  }
  return p;
}

void mg_pool_stop(mg_pool *p) {
  int t;
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  p->quit = 1;
  pthread_cond_broadcast(&p->go);
  pthread_mutex_unlock(&p->mu);
  for (t = 1; t < p->n; t++) pthread_join(p->th[t], NULL);
  pthread_cond_destroy(&p->done);
  pthread_cond_destroy(&p->go);
  pthread_mutex_destroy(&p->mu);
  free(p);
}

int mg_pool_threads(const mg_pool *p) { return p ? p->n : 1; }

void mg_pool_run(mg_pool *p, void (*fn)(void *ctx, int t, int n), void *ctx) {
  if (!p || p->n == 1) {
    fn(ctx, 0, 1);
    return;
  }
  pthread_mutex_lock(&p->mu);
  p->fn = fn, p->ctx = ctx;
  p->pending = p->n - 1;
  p->gen++;
  pthread_cond_broadcast(&p->go);
  pthread_mutex_unlock(&p->mu);
  fn(ctx, 0, p->n);
  pthread_mutex_lock(&p->mu);
  while (p->pending) pthread_cond_wait(&p->done, &p->mu);
  pthread_mutex_unlock(&p->mu);
}

typedef struct {
  int64_t total, align, parts;
  mg_range_fn fn;
  const void *ctx;
} range_job;

/* Range t of a mg_pool_for: units of align items shared out evenly. */
static void range_task(void *ctx, int t, int n) {
  const range_job *j = (const range_job *)ctx;
  const int64_t units = (j->total + j->align - 1) / j->align;
  int64_t b, e;
  (void)n;
  if (t >= j->parts) return;
  b = units * t / j->parts * j->align;
  e = units * (t + 1) / j->parts * j->align;
  if (e > j->total) e = j->total;
  if (e > b) j->fn(j->ctx, t, b, e);
}

void mg_pool_for(mg_pool *pool, int64_t total, int64_t align, int64_t min_range, mg_range_fn fn,
                 const void *ctx) {
  range_job j;
  int64_t parts = mg_pool_threads(pool);
  if (total <= 0) return;
  if (align < 1) align = 1;
  if (min_range < 1) min_range = 1;
  if (parts > total / min_range) parts = total / min_range;
  if (parts > (total + align - 1) / align) parts = (total + align - 1) / align;
  if (parts < 2) {
    fn(ctx, 0, 0, total);
    return;
  }
  j.total = total, j.align = align, j.parts = parts, j.fn = fn, j.ctx = ctx;
  mg_pool_run(pool, range_task, &j);
}

typedef struct {
  const mg_conv2d_params *p;
  const float *x, *w, *bias;
  float *y, *scratch;
  size_t per_thread;
} conv_job;

static void conv_task(void *ctx, int t, int n) {
  const conv_job *j = (const conv_job *)ctx;
  mg_conv2d_part(j->p, j->x, j->w, j->bias, j->y, j->scratch + (size_t)t * j->per_thread, t, n);
}

void mg_conv2d_mt(mg_pool *pool, const mg_conv2d_params *p, const float *x, const float *w,
                  const float *bias, float *y, float *scratch, size_t per_thread) {
  conv_job j;
  j.p = p, j.x = x, j.w = w, j.bias = bias, j.y = y, j.scratch = scratch, j.per_thread = per_thread;
  mg_pool_run(pool, conv_task, &j);
}
