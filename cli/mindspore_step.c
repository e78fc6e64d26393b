/* The MindSpore emitter as convert runs it and as coverage checks it: parameters
 * named as the checkpoint names them (the weights' binding and naming plan). */
#include "mindspore_step.h"
#include "mindspore_unfold.h"
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef MIGC_RULES_DIR
#define MIGC_RULES_DIR "rules"
#endif

typedef struct {
  const wt_source *src;
  const wt_binding *b;
  int nb;
  const wt_plan_entry *plan;
  int n_plan;
  mg_arena a;            /* index tensors of gathered views, and reasons */
  mg_diags *d;
  /* by binding: 0 not worked out yet, 1 a view, 2 a reason */
  unsigned char *state;
  ms_param_view *view;
  const char **why;
} ms_tags;

static int cmp_value_index(const void *x, const void *y) {
  const double *a = x, *b = y; /* (value, index) pairs */
  return a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : (a[1] > b[1]) - (a[1] < b[1]);
}

/* How a constant the export computed from parameter t by moving its elements (a
 * folded Gather, Reshape or Unsqueeze: a WT_DERIVED binding) is read from it: its
 * elements in order (a reshape), else the element of t each one equals. NULL and
 * *why when t's values repeat at an element the constant uses, since which element
 * it came from, and so where its gradient goes, cannot be told. */
static const mg_value *derived_index(ms_tags *t, const mg_value *init, const wt_tensor *src, int *reshape,
                                     const char **why) {
  int64_t n = mg_shape_numel(&init->shape), m = wt_numel(src);
  double *sv = wt_read_f64(t->src, src, t->d), *pairs = NULL;
  const mg_value *out = NULL;
  size_t es = mg_dtype_size(init->dtype);
  *reshape = 0;
  if (!sv || n < 1 || !init->data) goto done;
  if (n == m) {
    int same = 1;
    for (int64_t k = 0; k < n && same; k++)
      same = mg_load_f64(init->dtype, (const unsigned char *)init->data + (size_t)k * es) == sv[k];
    if (same) { *reshape = 1; goto done; }
  }
  if (!(pairs = mg_malloc(sizeof(double) * 2 * (size_t)m))) goto done;
  for (int64_t j = 0; j < m; j++) pairs[2 * j] = sv[j], pairs[2 * j + 1] = (double)j;
  qsort(pairs, (size_t)m, 2 * sizeof(double), cmp_value_index);
  mg_value *v = mg_arena_alloc(&t->a, sizeof *v);
  int64_t *idx = mg_arena_alloc(&t->a, sizeof(int64_t) * (size_t)n);
  if (!v || !idx) goto done;
  for (int64_t k = 0; k < n; k++) {
    double x = mg_load_f64(init->dtype, (const unsigned char *)init->data + (size_t)k * es);
    int64_t lo = 0, hi = m; /* the first pair with value >= x */
    while (lo < hi) {
      int64_t mid = lo + (hi - lo) / 2;
      if (pairs[2 * mid] < x) lo = mid + 1; else hi = mid;
    }
    if (lo == m || pairs[2 * lo] != x) { *why = "the export computed this constant from a parameter"; goto done; }
    if (lo + 1 < m && pairs[2 * lo + 2] == x) {
      *why = mg_arena_printf(&t->a, "the export computed this constant from parameter '%s', whose equal values "
                                    "leave it unknown which element each of the constant's is", src->name);
      goto done;
    }
    idx[k] = (int64_t)pairs[2 * lo + 1];
  }
  memset(v, 0, sizeof *v);
  v->name = mg_arena_printf(&t->a, "%s.index", src->name);
  v->kind = MG_V_CONST, v->dtype = MG_I64, v->shape = init->shape, v->id = -1;
  v->data = idx, v->nbytes = sizeof(int64_t) * (size_t)n;
  out = v;
done:
  if (!out && !*reshape && !*why) *why = "out of memory";
  mg_free(pairs);
  mg_free(sv);
  return out;
}

/* ms_param_tag_fn: an initializer's checkpoint tag, through its binding to the
 * weights and the naming plan; what the script cannot hold as it is says why. */
static const char *ms_param_tag(void *ctx, const mg_value *init, ms_param_view *view, const char **why) {
  ms_tags *t = ctx;
  int bi = -1;
  for (int i = 0; i < t->nb && bi < 0; i++)
    if (!strcmp(t->b[i].init->name, init->name)) bi = i;
  const wt_binding *b = bi >= 0 ? &t->b[bi] : NULL;
  if (!b || b->kind == WT_UNBOUND || b->kind == WT_CONSTANT) return NULL;
  const wt_plan_entry *e = NULL;
  for (int i = 0; i < t->n_plan && !e; i++)
    if (t->plan[i].src == b->src) e = &t->plan[i];
  if (t->state[bi] == 2) { *why = t->why[bi]; return NULL; }
  if (t->state[bi] == 1) { *view = t->view[bi]; return e ? e->ms_name : NULL; }
  ms_param_view v = {.kind = MS_VIEW_SAME};
  const char *w = NULL;
  switch (b->kind) {
  case WT_BY_NAME: case WT_BY_VALUE: case WT_BY_SCOPE: break;
  case WT_BY_TRANSPOSE: v.kind = MS_VIEW_TRANSPOSE; break;
  case WT_BN_FOLD_WEIGHT: case WT_BN_FOLD_BIAS:
    w = "the export folded a BatchNorm into this Conv, and the source's Conv and BatchNorm tensors "
        "cannot be read in the Conv's dtype to unfold it";
    break;
  case WT_RNN_GATES:
    v.kind = MS_VIEW_RNN_GATES, v.gru = b->gru;
    for (int i = 0; i < t->n_plan && b->src2; i++)
      if (t->plan[i].src == b->src2) v.tag2 = t->plan[i].ms_name;
    if (b->src2 && !v.tag2) w = "the export reorders this recurrent layer's gates";
    break;
  case WT_DERIVED: {
    int reshape = 0;
    v.index = derived_index(t, init, b->src, &reshape, &w);
    v.kind = reshape ? MS_VIEW_RESHAPE : MS_VIEW_GATHER;
    break;
  }
  default: w = "the export computed this constant from a parameter"; break;
  }
  if (!w && e && b->src) { /* the parameter's shape in the checkpoint */
    const wt_tensor *s = b->src;
    for (int k = 0; k <= s->rank && v.rank < MG_MAX_RANK; k++) {
      if (k == e->unsqueeze_axis) v.dims[v.rank++] = 1;
      if (k < s->rank) v.dims[v.rank++] = s->dims[k];
    }
    if (e->unsqueeze_axis >= 0) v.layer_layout = 1;
    /* bound by scope with another shape (a PRelu slope (C, 1, 1) of torch's (C,)) */
    int same = init->shape.rank == v.rank;
    for (int k = 0; k < v.rank && same; k++) same = init->shape.d[k].v == v.dims[k];
    if (v.kind == MS_VIEW_SAME && !same) {
      if (mg_shape_numel(&init->shape) == wt_numel(s)) v.kind = MS_VIEW_RESHAPE;
      else w = "the export's initializer has another number of elements than the parameter it is bound to";
    }
  }
  if (w) {
    t->state[bi] = 2, t->why[bi] = w, *why = w;
    return NULL;
  }
  t->state[bi] = 1, t->view[bi] = v, *view = v;
  return e ? e->ms_name : NULL;
}

int cli_emit_mindspore(mg_model *copy, const mg_model *m, const wt_source *src, const wt_binding *b, int nb,
                       const wt_rules *rules, const rule_set *rs, const char *dir, mg_dtype ckpt_float, ms_report *r,
                       mg_diags *d) {
  wt_type_hint *hints = NULL;
  wt_plan_entry *plan = NULL;
  int n_hints = 0, n_plan = 0;
  int rc = wt_graph_types(src, m, b, nb, &hints, &n_hints, d) || wt_plan(src, rules, hints, n_hints, &plan, &n_plan, d);
  wt_binding *unfolded = NULL;
  int n_unfolded_b = 0, n_bn = 0;
  rc = rc || ms_unfold_batchnorm(copy, src, b, nb, &unfolded, &n_unfolded_b, &n_bn, d);
  if (!rc) {
    ms_tags t = {.src = src, .b = unfolded, .nb = n_unfolded_b, .plan = plan, .n_plan = n_plan, .d = d};
    mg_arena_init(&t.a, 0);
    t.state = mg_calloc((size_t)n_unfolded_b + 1, 1);
    t.view = mg_calloc((size_t)n_unfolded_b + 1, sizeof *t.view);
    t.why = mg_calloc((size_t)n_unfolded_b + 1, sizeof *t.why);
    /* the checkpoint's integer tensors (torch buffers): held even where the graph
     * folded their use away */
    ms_buffer *bufs = mg_calloc((size_t)n_plan + 1, sizeof *bufs);
    int n_bufs = 0;
    for (int i = 0; bufs && i < n_plan; i++)
      if (plan[i].ms_name && !mg_dtype_is_float(plan[i].src->dtype) && plan[i].src->rank <= MG_MAX_RANK)
        bufs[n_bufs++] = (ms_buffer){plan[i].ms_name, plan[i].src->dtype, plan[i].src->rank, plan[i].src->dims};
    rc = !t.state || !t.view || !t.why || !bufs ? (mg_error(d, OOM, NULL, NULL, "out of memory"), -1)
                                                : emit_mindspore(copy, rs, ms_param_tag, &t, bufs, n_bufs, dir, ckpt_float, r, d);
    mg_free(bufs);
    r->n_bn_unfolded = n_bn;
    mg_free(t.state);
    mg_free(t.view);
    mg_free(t.why);
    mg_arena_destroy(&t.a);
  }
  mg_free(unfolded);
  wt_plan_free(plan, n_plan);
  mg_free(hints);
  return rc ? -1 : 0;
}

int cli_mindspore_check(mg_model *m, const rule_set *rs, mg_diags *d) {
  wt_source *src = NULL;
  wt_rules *rules = NULL;
  wt_binding *b = NULL;
  int nb = 0, rc = -1;
  char builtin[PATH_MAX];
  const char *dir = getenv("MIGC_RULES_DIR") ? getenv("MIGC_RULES_DIR") : MIGC_RULES_DIR;
  snprintf(builtin, sizeof builtin, "%s/torch_mindspore.xml", dir);
  mg_model *copy = mg_model_clone(m);
  ms_report r;
  if (copy && !onnx_weights_open(m, &src, d) && !wt_bind(src, m, &b, &nb, d) && (rules = wt_rules_new()) &&
      !wt_rules_load(rules, builtin, d) && !cli_emit_mindspore(copy, m, src, b, nb, rules, rs, NULL, MG_F32, &r, d))
    rc = r.n_unsupported;
  else if (!copy || (src && b && !rules)) /* the caller must see a check that could not run for memory */
    mg_error(d, OOM, NULL, NULL, "out of memory running the MindSpore emitter's check");
  mg_model_free(copy);
  mg_free(b);
  wt_rules_free(rules);
  wt_close(src);
  return rc;
}
