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

#ifdef __cplusplus
}
#endif
#endif /* MG_RT_POOL_H */
