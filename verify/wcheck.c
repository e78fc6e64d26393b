/* The checkpoint check (see wcheck.h). */
#include "wcheck.h"
#include "arena.h"
#include "weights.h"
#include <stdio.h>
#include <string.h>

/* A node of g reading v, for naming where a wrong weight would act. */
static const mg_node *reader_of(const mg_graph *g, const mg_value *v) {
  for (int i = 0; i < g->n_nodes; i++)
    for (int j = 0; j < g->nodes[i]->n_in; j++)
      if (g->nodes[i]->in[j] == v) return g->nodes[i];
  return NULL;
}

static int check_one(const mg_model *m, const wt_source *ckpt, const wcheck_pair *p, wcheck_item *o, mg_diags *d) {
  memset(o, 0, sizeof *o);
  const wt_tensor *t = wt_find(ckpt, p->tag);
  const mg_value *v = mg_graph_find(m->graph, p->init);
  if (v) {
    const mg_node *n = reader_of(m->graph, v);
    if (n) snprintf(o->node, sizeof o->node, "%s", n->name);
  }
  if (!t) {
    o->status = WC_MISSING;
    snprintf(o->why, sizeof o->why, "not in the checkpoint");
    return 0;
  }
  if (!v || !v->data) {
    o->status = WC_NO_INIT;
    snprintf(o->why, sizeof o->why, "the graph has no initializer '%s' with data", p->init);
    return 0;
  }
  int same = t->rank == p->rank;
  for (int k = 0; same && k < t->rank; k++) same = t->dims[k] == p->dims[k];
  int64_t n = wt_numel(t);
  if (!same || (size_t)n * mg_dtype_size(v->dtype) != v->nbytes) {
    o->status = WC_SHAPE;
    char a[128] = "", b[128] = "";
    for (int k = 0; k < t->rank; k++) snprintf(a + strlen(a), sizeof a - strlen(a), "%s%lld", k ? "x" : "", (long long)t->dims[k]);
    for (int k = 0; k < p->rank; k++) snprintf(b + strlen(b), sizeof b - strlen(b), "%s%lld", k ? "x" : "", (long long)p->dims[k]);
    int k = snprintf(o->why, sizeof o->why, "checkpoint shape %.60s, the map promises %.60s (initializer %.100s)", a, b,
                     p->init);
    (void)k;
    return 0;
  }
  mg_array got = {.dtype = t->dtype, .rank = 1, .dims = {n}, .nbytes = (size_t)n * mg_dtype_size(t->dtype)};
  mg_array ref = {.dtype = v->dtype, .rank = 1, .dims = {n}, .nbytes = v->nbytes};
  got.data = mg_malloc(got.nbytes ? got.nbytes : 1);
  ref.data = mg_malloc(ref.nbytes ? ref.nbytes : 1);
  int rc = -1;
  if (!got.data || !ref.data) {
    mg_error(d, OOM, p->tag, NULL, "no memory to check the checkpoint");
    goto done;
  }
  if (wt_read(ckpt, t, 0, n, got.data, d)) goto done;
  size_t es = mg_dtype_size(v->dtype);
  if (p->transposed && v->shape.rank == 2) { /* back to the checkpoint's (torch's) layout */
    int64_t r = v->shape.d[0].v, c = v->shape.d[1].v;
    for (int64_t i = 0; i < r; i++)
      for (int64_t j = 0; j < c; j++)
        memcpy((char *)ref.data + (size_t)(j * r + i) * es, (const char *)v->data + (size_t)(i * c + j) * es, es);
  } else {
    memcpy(ref.data, v->data, ref.nbytes);
  }
  /* exact unless the map records a cast, then within half a bfloat16 ulp */
  parity_tol tol = {p->cast ? 1.0 / 256 : 0, 0, -1, -1};
  if (parity_compare(&got, &ref, &tol, &o->m, p->tag, d)) goto done;
  o->compared = 1;
  if (o->m.n_over || o->m.n_nonfinite) {
    o->status = WC_VALUES;
    snprintf(o->why, sizeof o->why, "%lld of %lld values differ from initializer '%s' (max abs err %.3g, rel norm err %.3g)",
             (long long)o->m.n_over, (long long)o->m.n, p->init, o->m.max_abs, o->m.rel_norm);
  }
  rc = 0;
done:
  mg_free(got.data);
  mg_free(ref.data);
  return rc;
}

int wcheck_run(const mg_model *m, const wt_source *ckpt, const wcheck_pair *pairs, int n, wcheck_item *out,
               mg_diags *d) {
  for (int i = 0; i < n; i++)
    if (check_one(m, ckpt, &pairs[i], &out[i], d)) return -1;
  return 0;
}
