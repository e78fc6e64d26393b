/* Memory planning by liveness: offsets in one arena for buffers that live over
 * step intervals, for every target that plans its intermediates (the C arena
 * today, device memory next). */
#include "plan.h"
#include "arena.h"
#include <stdlib.h>

static int cmp_size_desc(const void *a, const void *b) {
  const cg_buffer *x = *(cg_buffer *const *)a, *y = *(cg_buffer *const *)b;
  if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
  return x->first - y->first;
}

static int cmp_offset(const void *a, const void *b) {
  const cg_buffer *x = *(cg_buffer *const *)a, *y = *(cg_buffer *const *)b;
  return x->offset < y->offset ? -1 : x->offset > y->offset;
}

size_t cg_assign_offsets(cg_buffer *bufs, int n) {
  cg_buffer **order = mg_malloc(sizeof *order * (size_t)(n + 1)), **placed = mg_malloc(sizeof *placed * (size_t)(n + 1));
  cg_buffer **live = mg_malloc(sizeof *live * (size_t)(n + 1));
  if (!order || !placed || !live) {
    mg_free(order);
    mg_free(placed);
    mg_free(live);
    return (size_t)-1;
  }
  for (int i = 0; i < n; i++) order[i] = &bufs[i];
  qsort(order, (size_t)n, sizeof *order, cmp_size_desc);
  size_t total = 0;
  int n_placed = 0;
  for (int i = 0; i < n; i++) {
    cg_buffer *b = order[i];
    int n_live = 0;
    for (int j = 0; j < n_placed; j++)
      if (placed[j]->first <= b->last && b->first <= placed[j]->last) live[n_live++] = placed[j];
    qsort(live, (size_t)n_live, sizeof *live, cmp_offset);
    size_t best = 0, best_gap = 0, at = 0;
    int found = 0;
    for (int j = 0; j <= n_live; j++) {
      size_t end = j < n_live ? live[j]->offset : (size_t)-1;
      if (end > at && end - at >= b->bytes && (!found || end - at < best_gap)) {
        best = at;
        best_gap = end - at;
        found = 1;
      }
      if (j < n_live && live[j]->offset + live[j]->bytes > at) at = live[j]->offset + live[j]->bytes;
    }
    b->offset = best;
    placed[n_placed++] = b;
    if (b->offset + b->bytes > total) total = b->offset + b->bytes;
  }
  mg_free(order);
  mg_free(placed);
  mg_free(live);
  return total;
}

size_t cg_plan_lower_bound(const cg_buffer *bufs, int n, int steps) {
  size_t lb = 0;
  for (int t = 0; t < steps; t++) {
    size_t s = 0;
    for (int b = 0; b < n; b++)
      if (bufs[b].first <= t && t <= bufs[b].last) s += bufs[b].bytes;
    if (s > lb) lb = s;
  }
  return lb;
}
