/* The node-list rewriter the lowering passes share; see rewrite.h. */
#include "rewrite.h"
#include "dtype.h"
#include <string.h>

void mg_rw_begin(mg_rw *w, mg_model *m, mg_graph *g) {
  memset(w, 0, sizeof *w);
  w->m = m;
  w->g = g;
}

/* Appends n to the new list. */
static void push(mg_rw *w, mg_node *n) {
  if (w->failed) return;
  if (w->n == w->cap) {
    int cap = w->cap ? w->cap * 2 : 64;
    mg_node **p = mg_arena_alloc(&w->m->arena, sizeof *p * (size_t)cap);
    if (!p) {
      w->failed = 1;
      return;
    }
    if (w->n) memcpy(p, w->nodes, sizeof *p * (size_t)w->n);
    w->nodes = p;
    w->cap = cap;
  }
  w->nodes[w->n++] = n;
}

void mg_rw_keep(mg_rw *w, mg_node *n) { push(w, n); }

int mg_rw_end(mg_rw *w) {
  if (w->failed) return -1;
  mg_graph *g = w->g;
  if (w->n > g->cap_nodes) {
    mg_node **p = mg_arena_alloc(&w->m->arena, sizeof *p * (size_t)w->n);
    if (!p) return -1;
    g->nodes = p;
    g->cap_nodes = w->n;
  }
  for (int i = 0; i < w->n; i++) {
    g->nodes[i] = w->nodes[i];
    g->nodes[i]->id = i;
  }
  g->n_nodes = w->n;
  return 0;
}

/* A value named base, or base_1, base_2... when that name is taken. */
static mg_value *fresh(mg_rw *w, const char *base) {
  if (w->failed) return NULL;
  mg_value *existing = NULL;
  mg_value *v = mg_value_new(w->g, base, &existing);
  for (int k = 1; !v && existing && k < 1000000; k++) {
    char *name = mg_arena_printf(&w->m->arena, "%s_%d", base, k);
    existing = NULL;
    v = name ? mg_value_new(w->g, name, &existing) : NULL;
  }
  if (!v) w->failed = 1;
  return v;
}

mg_value *mg_rw_value(mg_rw *w, const char *base, mg_dtype dtype, const mg_shape *shape) {
  mg_value *v = fresh(w, base);
  if (!v) return NULL;
  v->kind = MG_V_NODE;
  v->vtype = MG_VT_TENSOR;
  v->dtype = dtype;
  v->shape = *shape;
  return v;
}

mg_value *mg_rw_const(mg_rw *w, const char *base, mg_dtype dtype, const mg_shape *shape, const void *data,
                      size_t nbytes) {
  mg_value *v = fresh(w, base);
  if (!v) return NULL;
  v->kind = MG_V_CONST;
  v->vtype = MG_VT_TENSOR;
  v->dtype = dtype;
  v->shape = *shape;
  v->nbytes = nbytes;
  v->data = mg_arena_memdup(&w->m->arena, data, nbytes ? nbytes : 1);
  if (!v->data) {
    w->failed = 1;
    return NULL;
  }
  return v;
}

mg_value *mg_rw_init(mg_rw *w, const char *base, mg_dtype dtype, const mg_shape *shape, const void *data,
                     size_t nbytes) {
  mg_value *v = mg_rw_const(w, base, dtype, shape, data, nbytes);
  if (!v) return NULL;
  mg_value **inits = mg_arena_alloc(&w->m->arena, sizeof *inits * (size_t)(w->g->n_inits + 1));
  if (!inits) {
    w->failed = 1;
    return NULL;
  }
  if (w->g->n_inits) memcpy(inits, w->g->inits, sizeof *inits * (size_t)w->g->n_inits);
  inits[w->g->n_inits++] = v;
  w->g->inits = inits;
  v->kind = MG_V_INIT;
  return v;
}

mg_value *mg_rw_const_i64(mg_rw *w, const char *base, const int64_t *v, int n, int rank) {
  mg_shape s = {.rank = rank ? 1 : 0};
  s.d[0].v = n;
  return mg_rw_const(w, base, MG_I64, &s, v, sizeof(int64_t) * (size_t)n);
}

mg_value *mg_rw_const_fill(mg_rw *w, const char *base, mg_dtype dtype, const mg_shape *shape, double x) {
  int64_t n = mg_shape_numel(shape);
  size_t es = mg_dtype_size(dtype);
  if (n < 0 || w->failed) return NULL;
  unsigned char one[8];
  if (dtype == MG_F32) {
    float f = (float)x;
    memcpy(one, &f, 4);
  } else if (dtype == MG_F64) {
    memcpy(one, &x, 8);
  } else if (dtype == MG_F16) {
    uint16_t h = mg_f32_to_f16((float)x);
    memcpy(one, &h, 2);
  } else if (dtype == MG_BF16) {
    uint16_t h = mg_f32_to_bf16((float)x);
    memcpy(one, &h, 2);
  } else {
    return NULL;
  }
  unsigned char *buf = mg_arena_alloc(&w->m->arena, es * (size_t)n + 1);
  if (!buf) {
    w->failed = 1;
    return NULL;
  }
  for (int64_t i = 0; i < n; i++) memcpy(buf + (size_t)i * es, one, es);
  return mg_rw_const(w, base, dtype, shape, buf, es * (size_t)n);
}

mg_node *mg_rw_node(mg_rw *w, mg_op op, const char *name, int n_in, mg_value *const *in, int n_out,
                    mg_value *const *out) {
  if (w->failed) return NULL;
  for (int i = 0; i < n_in; i++)
    if (!in[i]) {
      w->failed = 1;
      return NULL;
    }
  for (int i = 0; i < n_out; i++)
    if (!out[i]) {
      w->failed = 1;
      return NULL;
    }
  mg_node *n = mg_node_new(w->g, op, name, n_in, n_out);
  if (!n) {
    w->failed = 1;
    return NULL;
  }
  n->opset = w->m->opset;
  n->synthetic = 1;
  for (int i = 0; i < n_in; i++) n->in[i] = in[i];
  for (int i = 0; i < n_out; i++) {
    n->out[i] = out[i];
    out[i]->producer = n;
    out[i]->producer_slot = i;
    out[i]->kind = MG_V_NODE;
    out[i]->data = NULL;
    out[i]->nbytes = 0;
  }
  push(w, n);
  w->changed++;
  return n;
}

/* Appends one zeroed attribute to n and returns it. */
static mg_attr *add_attr(mg_rw *w, mg_node *n, const char *name) {
  if (w->failed || !n) return NULL;
  mg_attr *a = mg_arena_alloc(&w->m->arena, sizeof *a * (size_t)(n->n_attr + 1));
  if (!a) {
    w->failed = 1;
    return NULL;
  }
  if (n->n_attr) memcpy(a, n->attr, sizeof *a * (size_t)n->n_attr);
  n->attr = a;
  mg_attr *at = &a[n->n_attr++];
  memset(at, 0, sizeof *at);
  at->name = name;
  return at;
}

void mg_rw_attr_int(mg_rw *w, mg_node *n, const char *name, int64_t v) {
  mg_attr *a = add_attr(w, n, name);
  if (!a) return;
  a->kind = MG_ATTR_INT;
  a->i = v;
}

void mg_rw_attr_float(mg_rw *w, mg_node *n, const char *name, float v) {
  mg_attr *a = add_attr(w, n, name);
  if (!a) return;
  a->kind = MG_ATTR_FLOAT;
  a->f = v;
}

void mg_rw_attr_ints(mg_rw *w, mg_node *n, const char *name, const int64_t *v, int count) {
  mg_attr *a = add_attr(w, n, name);
  if (!a) return;
  a->kind = MG_ATTR_INTS;
  a->n = (size_t)count;
  a->ints = mg_arena_memdup(&w->m->arena, v, sizeof *v * (size_t)(count ? count : 1));
  if (!a->ints) w->failed = 1;
}

int mg_rw_same_shape(const mg_shape *a, const mg_shape *b) {
  if (a->rank != b->rank || a->rank < 0) return 0;
  for (int r = 0; r < a->rank; r++)
    if (a->d[r].v < 0 || a->d[r].v != b->d[r].v) return 0;
  return 1;
}
