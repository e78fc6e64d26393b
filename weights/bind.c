#include "bind.h"
#include "arena.h"
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

const char *wt_bind_kind_name(wt_bind_kind k) {
  static const char *const names[] = {"unbound", "name", "value", "transpose",
                                      "bn-fold-weight", "bn-fold-bias", "constant", "scope", "rnn-gates",
                                      "derived"};
  return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "?";
}

double *wt_read_f64(const wt_source *s, const wt_tensor *t, mg_diags *d) {
  if (!mg_dtype_is_float(t->dtype)) return NULL;
  int64_t n = wt_numel(t);
  size_t es = mg_dtype_size(t->dtype);
  unsigned char *raw = mg_malloc((size_t)n * es + 1);
  double *v = mg_malloc(sizeof(double) * (size_t)(n + 1));
  if (!raw || !v || wt_read(s, t, 0, n, raw, d)) {
    mg_free(raw);
    mg_free(v);
    return NULL;
  }
  mg_load_f64_n(t->dtype, raw, n, v);
  mg_free(raw);
  return v;
}

/* An initializer's values as doubles; NULL when it has none as floats, and also
 * when memory is short, which then sets *oom (a NULL the caller must not take
 * for "not a float": binding less than it could, without a word). */
static double *init_f64(const mg_value *v, int *oom) {
  if (!mg_dtype_is_float(v->dtype) || !v->data) return NULL;
  int64_t n = mg_shape_numel(&v->shape);
  if (n < 0) return NULL;
  double *o = mg_malloc(sizeof(double) * (size_t)(n + 1));
  if (!o) {
    *oom = 1;
    return NULL;
  }
  mg_load_f64_n(v->dtype, v->data, n, o);
  return o;
}

/* max |b[i]|: the scale close_enough measures against. */
static double max_abs(const double *b, int64_t n) {
  double scale = 0;
  for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(b[i]));
  return scale;
}

/* Whether a matches b (scale = max_abs(b, n), which the caller computes once per
 * b: a search tries many a against one b, and most differ at the first element)
 * within the tolerance for values recomputed in double from float32 inputs. */
static int close_enough(const double *a, const double *b, int64_t n, double scale, double *max_err) {
  double err = 0;
  for (int64_t i = 0; i < n; i++) {
    double e = fabs(a[i] - b[i]);
    if (!(e <= 1e-5 * scale + 1e-7)) return 0;
    err = fmax(err, e);
  }
  *max_err = err;
  return 1;
}

static int same_dims(const mg_value *v, const wt_tensor *t) {
  if (v->shape.rank != t->rank) return 0;
  for (int i = 0; i < t->rank; i++)
    if (v->shape.d[i].v != t->dims[i]) return 0;
  return 1;
}

typedef struct {
  const wt_source *s;
  mg_diags *d;
  const mg_graph *g;
  double **cache; /* per source tensor: values as double, loaded on demand */
  char *loaded;
  double **sorted; /* per source tensor: its values sorted (try_derived), on demand */
  int failed;      /* a float tensor could not be read (memory, or the source): binding fails */
} bind_ctx;

/* Source tensor i as doubles, read once; NULL for a tensor that is not float, and
 * for one that cannot be read, which marks the binding failed (wt_read_f64 has
 * said why when the source was at fault). */
static const double *cached(bind_ctx *c, int i) {
  if (!c->loaded[i]) {
    c->cache[i] = wt_read_f64(c->s, wt_get(c->s, i), c->d);
    c->loaded[i] = 1;
    if (!c->cache[i] && mg_dtype_is_float(wt_get(c->s, i)->dtype)) c->failed = 1;
  }
  return c->cache[i];
}

static int index_of(const wt_source *s, const wt_tensor *t) { return (int)(t - wt_get(s, 0)); }

static const char *leaf(const char *n) {
  const char *dot = strrchr(n, '.');
  return dot ? dot + 1 : n;
}

/* The four BatchNorm tensors of the module that owns running_mean tensor rm. */
static int bn_group(const wt_source *s, const wt_tensor *rm, const wt_tensor **g) {
  size_t plen = (size_t)(leaf(rm->name) - rm->name);
  static const char *const leaves[4] = {"weight", "bias", "running_mean", "running_var"};
  for (int k = 0; k < 4; k++) {
    char name[2048];
    snprintf(name, sizeof name, "%.*s%s", (int)plen, rm->name, leaves[k]);
    g[k] = wt_find(s, name);
    if (!g[k] || g[k]->rank != 1 || g[k]->dims[0] != rm->dims[0]) return 0;
  }
  return 1;
}

static const mg_node *consumer(const mg_graph *g, const mg_value *v, int *slot) {
  for (int i = 0; i < g->n_nodes; i++)
    for (int k = 0; k < g->nodes[i]->n_in; k++)
      if (g->nodes[i]->in[k] == v) {
        *slot = k;
        return g->nodes[i];
      }
  return NULL;
}

static const double eps_candidates[] = {1e-5, 1e-3, 1e-4, 1e-6, 1e-2, 1e-12};

/* Conv weight W' = W * g/sqrt(v+eps) per output channel. */
static int try_fold_weight(bind_ctx *c, const mg_value *init, const double *iv, wt_binding *b) {
  int64_t out = init->shape.d[0].v, per = mg_shape_numel(&init->shape) / (out ? out : 1);
  for (int i = 0; i < wt_count(c->s); i++) {
    const wt_tensor *w = wt_get(c->s, i);
    if (!same_dims(init, w)) continue;
    const double *wv = cached(c, i);
    if (!wv) continue;
    for (int j = 0; j < wt_count(c->s); j++) {
      const wt_tensor *rm = wt_get(c->s, j), *g[4];
      if (strcmp(leaf(rm->name), "running_mean") || rm->rank != 1 || rm->dims[0] != out || !bn_group(c->s, rm, g))
        continue;
      const double *gv = cached(c, index_of(c->s, g[0])), *vv = cached(c, index_of(c->s, g[3]));
      if (!gv || !vv) continue;
      for (size_t e = 0; e < sizeof eps_candidates / sizeof eps_candidates[0]; e++) {
        /* quick reject on the first channel before building the whole tensor */
        double s0 = gv[0] / sqrt(vv[0] + eps_candidates[e]);
        if (per && fabs(wv[0] * s0 - iv[0]) > 1e-4 * (fabs(iv[0]) + 1e-3)) continue;
        int64_t n = out * per;
        double *rec = mg_malloc(sizeof(double) * (size_t)(n + 1));
        if (!rec) return -1;
        for (int64_t o = 0; o < out; o++) {
          double sc = gv[o] / sqrt(vv[o] + eps_candidates[e]);
          for (int64_t k = 0; k < per; k++) rec[o * per + k] = wv[o * per + k] * sc;
        }
        double err;
        int ok = close_enough(rec, iv, n, max_abs(iv, n), &err);
        mg_free(rec);
        if (ok) {
          *b = (wt_binding){init, WT_BN_FOLD_WEIGHT, w, {g[0], g[1], g[2], g[3]}, eps_candidates[e], err};
          return 1;
        }
      }
    }
  }
  return 0;
}

/* Conv bias b' = (b - m) * g/sqrt(v+eps) + beta, with the BatchNorm and eps found
 * for the same node's weight, and b the conv's own bias (0 when it has none). */
static int try_fold_bias(bind_ctx *c, const mg_value *init, const double *iv, const wt_binding *wb,
                         wt_binding *b) {
  const wt_tensor *const *g = wb->bn;
  const double *gv = cached(c, index_of(c->s, g[0])), *bv = cached(c, index_of(c->s, g[1]));
  const double *mv = cached(c, index_of(c->s, g[2])), *vv = cached(c, index_of(c->s, g[3]));
  if (!gv || !bv || !mv || !vv) return 0;
  char name[2048];
  snprintf(name, sizeof name, "%.*sbias", (int)(leaf(wb->src->name) - wb->src->name), wb->src->name);
  const wt_tensor *cb = wt_find(c->s, name);
  const double *cbv = cb ? cached(c, index_of(c->s, cb)) : NULL;
  int64_t out = g[0]->dims[0];
  double *rec = mg_malloc(sizeof(double) * (size_t)(out + 1));
  if (!rec) return -1;
  for (int64_t o = 0; o < out; o++)
    rec[o] = ((cbv ? cbv[o] : 0) - mv[o]) * gv[o] / sqrt(vv[o] + wb->eps) + bv[o];
  double err;
  int ok = close_enough(rec, iv, out, max_abs(iv, out), &err);
  mg_free(rec);
  if (ok) *b = (wt_binding){init, WT_BN_FOLD_BIAS, cbv ? cb : NULL, {g[0], g[1], g[2], g[3]}, wb->eps, err};
  return ok;
}

/* Derived constants are position tables and biases: small. Larger initializers
 * and source tensors are not searched. */
enum { DERIVED_MAX = 1 << 16 };

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* A constant torch's exporter computed from one parameter by moving elements
 * (swin's relative position bias, gathered from relative_position_bias_table by a
 * buffer of indices, then folded): every value of it is a value of that source
 * tensor, exactly, and it is not all zeros. It is bound as WT_DERIVED: named, not
 * recomputed from the source. */
static int try_derived(bind_ctx *c, const mg_value *init, wt_binding *b) {
  int64_t n = mg_shape_numel(&init->shape);
  if (n < 2 || n > DERIVED_MAX) return 0;
  double *iv = init_f64(init, &c->failed);
  if (!iv) return c->failed ? -1 : 0;
  int nonzero = 0;
  for (int64_t k = 0; k < n; k++) nonzero |= iv[k] != 0;
  for (int i = 0; i < wt_count(c->s) && nonzero; i++) {
    const wt_tensor *t = wt_get(c->s, i);
    int64_t m = wt_numel(t);
    if (m < 2 || m > DERIVED_MAX || !mg_dtype_is_float(t->dtype)) continue;
    if (!c->sorted[i]) { /* each source tensor sorted once */
      const double *sv = cached(c, i);
      if (!sv) continue; /* not a float, or cannot be read (c->failed says which) */
      if (!(c->sorted[i] = mg_malloc(sizeof(double) * (size_t)m))) {
        mg_free(iv);
        return -1;
      }
      memcpy(c->sorted[i], sv, sizeof(double) * (size_t)m);
      qsort(c->sorted[i], (size_t)m, sizeof(double), cmp_double);
    }
    int all = 1;
    for (int64_t k = 0; k < n && all; k++)
      all = bsearch(&iv[k], c->sorted[i], (size_t)m, sizeof(double), cmp_double) != NULL;
    if (all) {
      b->kind = WT_DERIVED, b->src = t;
      break;
    }
  }
  mg_free(iv);
  return 0;
}

/* ONNX gate block g of an LSTM (i,o,f,c) or GRU (z,r,h) is torch's block
 * rnn_block(gru, g) (LSTM i,f,g,o; GRU r,z,n). */
static int rnn_block(int gru, int g) {
  static const int lstm[4] = {0, 3, 1, 2}, gru3[3] = {1, 0, 2};
  return gru ? gru3[g] : lstm[g];
}

/* dst (nblocks*H rows of `row` values) = src's blocks in ONNX order. */
static void rnn_reorder(int gru, const double *src, int64_t H, int64_t row, double *dst) {
  int nb = gru ? 3 : 4;
  for (int g = 0; g < nb; g++)
    memcpy(dst + (size_t)(g * H * row), src + (size_t)(rnn_block(gru, g) * H * row), sizeof(double) * (size_t)(H * row));
}

/* An ONNX LSTM/GRU W (slot 1), R (slot 2) or B (slot 3) of one direction: the
 * torch tensors whose reordered values equal it. */
static int try_rnn(bind_ctx *c, const mg_node *u, int slot, const mg_value *init, const double *iv, wt_binding *b) {
  int gru = u->op == MG_OP_GRU, nb = gru ? 3 : 4;
  if (init->shape.rank < 2 || init->shape.d[0].v != 1) return 0; /* one direction */
  int64_t rows = init->shape.d[1].v, n = mg_shape_numel(&init->shape);
  int64_t H = slot == 3 ? rows / (2 * nb) : rows / nb, row = slot == 3 ? 1 : init->shape.d[2].v;
  if (H <= 0 || (slot == 3 && init->shape.rank != 2) || (slot != 3 && init->shape.rank != 3)) return 0;
  double *tmp = mg_malloc(sizeof(double) * (size_t)(n + 1));
  if (!tmp) return -1;
  const char *want = slot == 1 ? "weight_ih_l" : slot == 2 ? "weight_hh_l" : "bias_ih_l";
  int found = 0;
  double iv_scale = max_abs(iv, n);
  for (int i = 0; i < wt_count(c->s) && !found; i++) {
    const wt_tensor *t = wt_get(c->s, i);
    const char *l = leaf(t->name);
    if (strncmp(l, want, strlen(want)) || strstr(l, "reverse") || wt_numel(t) * (slot == 3 ? 2 : 1) != n) continue;
    const double *sv = cached(c, i);
    if (!sv) continue;
    rnn_reorder(gru, sv, H, row, tmp);
    const wt_tensor *hh = NULL;
    if (slot == 3) { /* B = [Wb; Rb]: bias_ih then the same layer's bias_hh */
      char name[2048];
      snprintf(name, sizeof name, "%.*sbias_hh_l%s", (int)(l - t->name), t->name, l + strlen(want));
      hh = wt_find(c->s, name);
      const double *hv = hh && wt_numel(hh) * 2 == n ? cached(c, index_of(c->s, hh)) : NULL;
      if (!hv) continue;
      rnn_reorder(gru, hv, H, 1, tmp + n / 2);
    }
    double err;
    if (close_enough(tmp, iv, n, iv_scale, &err)) {
      *b = (wt_binding){.init = init, .kind = WT_RNN_GATES, .src = t, .max_err = err, .src2 = hh, .gru = gru};
      found = 1;
    }
  }
  mg_free(tmp);
  return 0;
}

/* Whether source tensor t holds exactly init's bytes (same dims and dtype): a
 * binding by name with no error, found without converting either to double
 * (converting from the export's own initializers is mostly this), and the only
 * way an integer tensor binds. -1 on OOM or a tensor that cannot be read. */
static int same_bytes(bind_ctx *c, const mg_value *init, const wt_tensor *t) {
  if (!t || !init->data || !same_dims(init, t) || t->dtype != init->dtype) return 0;
  unsigned char *raw = mg_malloc(init->nbytes + 1);
  if (!raw) return -1;
  if (wt_read(c->s, t, 0, wt_numel(t), raw, c->d)) { /* as cached(): a tensor that cannot be read fails the binding */
    mg_free(raw);
    c->failed = 1;
    return -1;
  }
  int eq = !memcmp(raw, init->data, init->nbytes);
  mg_free(raw);
  return eq;
}

static int bind_one(bind_ctx *c, const mg_value *init, wt_binding *b) {
  *b = (wt_binding){.init = init};
  const wt_tensor *named = wt_find(c->s, init->name);
  int same = same_bytes(c, init, named);
  if (same < 0) return -1;
  if (same) {
    b->kind = WT_BY_NAME, b->src = named;
    return 0;
  }
  double *iv = init_f64(init, &c->failed);
  if (c->failed) { /* now or from an earlier tensor: the binding fails either way */
    mg_free(iv);
    return -1;
  }
  if (!iv) { /* integers are a parameter only if a source tensor of that name has equal bytes */
    b->kind = mg_dtype_is_float(init->dtype) ? WT_UNBOUND : WT_CONSTANT;
    return 0;
  }
  int64_t n = mg_shape_numel(&init->shape);
  double iv_scale = max_abs(iv, n);
  int rc = 0;
  /* 1. the same name; 2. any tensor with equal values; 3. a transposed matrix */
  if (named && same_dims(init, named)) {
    const double *sv = cached(c, index_of(c->s, named));
    if (sv && close_enough(sv, iv, n, iv_scale, &b->max_err)) b->kind = WT_BY_NAME, b->src = named;
  }
  for (int i = 0; i < wt_count(c->s) && !b->src; i++) {
    const wt_tensor *t = wt_get(c->s, i);
    if (same_dims(init, t)) {
      const double *sv = cached(c, i);
      if (sv && close_enough(sv, iv, n, iv_scale, &b->max_err)) b->kind = WT_BY_VALUE, b->src = t;
    }
    /* a square matrix may equal its source transposed (Linear as MatMul) */
    if (!b->src && t->rank == 2 && init->shape.rank == 2 && t->dims[0] == init->shape.d[1].v &&
        t->dims[1] == init->shape.d[0].v) {
      const double *sv = cached(c, i);
      if (!sv) continue;
      double *tr = mg_malloc(sizeof(double) * (size_t)(n + 1));
      if (!tr) { rc = -1; break; }
      for (int64_t r = 0; r < t->dims[0]; r++)
        for (int64_t q = 0; q < t->dims[1]; q++) tr[q * t->dims[0] + r] = sv[r * t->dims[1] + q];
      if (close_enough(tr, iv, n, iv_scale, &b->max_err)) b->kind = WT_BY_TRANSPOSE, b->src = t;
      mg_free(tr);
    }
  }
  /* 5. an ONNX LSTM/GRU weight, its gates reordered from torch's */
  if (!b->src && !rc) {
    int slot;
    const mg_node *u = consumer(c->g, init, &slot);
    if (u && (u->op == MG_OP_LSTM || u->op == MG_OP_GRU) && slot >= 1 && slot <= 3) rc = try_rnn(c, u, slot, init, iv, b);
  }
  /* 6. (below) a constant the exporter derived from a parameter */
  /* 4. a Conv weight with a BatchNorm folded in */
  if (!b->src && !rc && init->shape.rank >= 3) {
    int slot;
    const mg_node *u = consumer(c->g, init, &slot);
    if (u && (u->op == MG_OP_Conv || u->op == MG_OP_ConvTranspose) && slot == 1) {
      int r = try_fold_weight(c, init, iv, b);
      if (r < 0) rc = -1;
    }
  }
  mg_free(iv);
  return rc;
}

/* ---- binding by structure ---- */

/* The parameter leaf that slot `slot` of op reads in torch's module for it, or
 * NULL. `transposed` is set where torch's tensor is the transpose (MatMul). */
static const char *param_leaf(const mg_node *u, int slot, int *transposed) {
  *transposed = 0;
  switch (u->op) {
  case MG_OP_Conv:
  case MG_OP_ConvTranspose: return slot == 1 ? "weight" : slot == 2 ? "bias" : NULL;
  case MG_OP_Gemm:
    if (slot == 1) return *transposed = !mg_attr_int(u, "transB", 0), "weight";
    return slot == 2 ? "bias" : NULL;
  case MG_OP_MatMul: return slot == 1 ? (*transposed = 1, "weight") : NULL;
  case MG_OP_Add: return "bias"; /* Linear exported as MatMul + Add */
  case MG_OP_BatchNormalization: {
    static const char *const bn[] = {NULL, "weight", "bias", "running_mean", "running_var"};
    return slot >= 1 && slot <= 4 ? bn[slot] : NULL;
  }
  case MG_OP_LayerNormalization:
  case MG_OP_GroupNormalization:
  case MG_OP_InstanceNormalization: return slot == 1 ? "weight" : slot == 2 ? "bias" : NULL;
  case MG_OP_PRelu: return slot == 1 ? "weight" : NULL;
  case MG_OP_Gather: return slot == 0 ? "weight" : NULL;
  default: return NULL;
  }
}

static int64_t init_numel(const mg_value *v) { return mg_shape_numel(&v->shape); }

/* A source tensor not bound yet; taken[] is indexed by source tensor. */
static int is_free(const char *taken, const wt_source *s, const wt_tensor *t) { return t && !taken[index_of(s, t)]; }

/* The BatchNorm group that follows tensor `after` in the source's order (within
 * the next few tensors: the conv's own bias may come first), with `out` channels
 * and not bound elsewhere. */
static int following_bn(const wt_source *s, const char *taken, const wt_tensor *after, int64_t out,
                        const wt_tensor **g) {
  int start = index_of(s, after) + 1;
  for (int i = start; i < wt_count(s) && i < start + 6; i++) {
    const wt_tensor *t = wt_get(s, i);
    if (strcmp(leaf(t->name), "running_mean")) continue;
    if (t->rank != 1 || t->dims[0] != out || !bn_group(s, t, g)) return 0;
    for (int k = 0; k < 4; k++)
      if (taken[index_of(s, g[k])]) return 0;
    return 1;
  }
  return 0;
}

/* An ONNX LSTM/GRU W, R or B by its node's scope: the k-th such node of module
 * `lstm` is torch's layer k (lstm.weight_ih_lK ...), one direction only. */
static int rnn_by_scope(bind_ctx *c, const mg_node *u, int slot, const mg_value *init, const char *taken,
                        wt_binding *x) {
  char path[1024], name[1200];
  if (mg_scope_module(u->name, path, sizeof path) <= 0 || init->shape.rank < 2 || init->shape.d[0].v != 1) return 0;
  int layer = 0;
  for (int i = 0; i < c->g->n_nodes && c->g->nodes[i] != u; i++) {
    char p2[1024];
    const mg_node *w = c->g->nodes[i];
    if (w->op == u->op && mg_scope_module(w->name, p2, sizeof p2) > 0 && !strcmp(p2, path)) layer++;
  }
  static const char *const leaves[] = {"weight_ih_l", "weight_hh_l", "bias_ih_l"};
  snprintf(name, sizeof name, "%s.%s%d", path, leaves[slot - 1], layer);
  const wt_tensor *t = wt_find(c->s, name), *hh = NULL;
  if (!is_free(taken, c->s, t)) return 0;
  if (slot == 3) {
    snprintf(name, sizeof name, "%s.bias_hh_l%d", path, layer);
    hh = wt_find(c->s, name);
    if (!is_free(taken, c->s, hh) || wt_numel(hh) != wt_numel(t)) return 0;
  }
  if (wt_numel(t) * (hh ? 2 : 1) != init_numel(init)) return 0;
  *x = (wt_binding){.init = init, .kind = WT_RNN_GATES, .src = t, .by_structure = 1, .src2 = hh,
                    .gru = u->op == MG_OP_GRU};
  return 1;
}

/* Binds the initializers the value passes left unbound, by name or scope. */
static int bind_by_structure(bind_ctx *c, wt_binding *b, int nb) {
  const wt_source *s = c->s;
  char *taken = mg_calloc((size_t)wt_count(s) + 1, 1);
  if (!taken) return -1;
  double eps = 1e-5;
  int eps_known = 0;
  for (int i = 0; i < nb; i++) {
    if (b[i].src) taken[index_of(s, b[i].src)] = 1;
    if (b[i].kind == WT_BN_FOLD_WEIGHT || b[i].kind == WT_BN_FOLD_BIAS) {
      for (int k = 0; k < 4; k++) taken[index_of(s, b[i].bn[k])] = 1;
      if (!eps_known) eps = b[i].eps, eps_known = 1;
    }
  }
  /* pass 0: the same name and shape; 1: the consumer's scope, all but convs;
   * 2: convs, whose BatchNorm (if folded) is the free one that follows them */
  for (int pass = 0; pass < 3; pass++)
    for (int i = 0; i < nb; i++) {
      wt_binding *x = &b[i];
      const mg_value *init = x->init;
      if (x->kind != WT_UNBOUND || !mg_dtype_is_float(init->dtype)) continue;
      if (pass == 0) {
        const wt_tensor *named = wt_find(s, init->name);
        if (is_free(taken, s, named) && same_dims(init, named)) {
          *x = (wt_binding){.init = init, .kind = WT_BY_NAME, .src = named, .by_structure = 1};
          taken[index_of(s, named)] = 1;
        }
        continue;
      }
      int slot, transposed;
      const mg_node *u = consumer(c->g, init, &slot);
      char path[1024], name[1100];
      if (pass == 1 && u && (u->op == MG_OP_LSTM || u->op == MG_OP_GRU) && slot >= 1 && slot <= 3) {
        if (rnn_by_scope(c, u, slot, init, taken, x)) {
          taken[index_of(s, x->src)] = 1;
          if (x->src2) taken[index_of(s, x->src2)] = 1;
        }
        continue;
      }
      const char *lf = u ? param_leaf(u, slot, &transposed) : NULL;
      int conv = u && (u->op == MG_OP_Conv || u->op == MG_OP_ConvTranspose);
      if (!lf || conv != (pass == 2) || mg_scope_module(u->name, path, sizeof path) <= 0) continue;
      snprintf(name, sizeof name, "%s.%s", path, lf);
      const wt_tensor *t = wt_find(s, name), *g[4];
      if (!is_free(taken, s, t)) t = NULL;
      if (conv && slot == 1 && t && same_dims(init, t) && u->op == MG_OP_Conv && u->n_in > 2 && u->in[2]) {
        /* a conv with a bias input: a BatchNorm folded in when one follows it */
        snprintf(name, sizeof name, "%s.bias", path);
        const wt_tensor *cb = wt_find(s, name);
        if (cb && (cb->rank != 1 || !is_free(taken, s, cb))) cb = NULL;
        if (following_bn(s, taken, cb ? cb : t, init->shape.d[0].v, g)) {
          *x = (wt_binding){init, WT_BN_FOLD_WEIGHT, t, {g[0], g[1], g[2], g[3]}, eps, 0, 1, !eps_known};
          for (int k = 0; k < nb; k++)
            if (b[k].init == u->in[2] && b[k].kind == WT_UNBOUND)
              b[k] = (wt_binding){b[k].init, WT_BN_FOLD_BIAS, cb, {g[0], g[1], g[2], g[3]}, eps, 0, 1, !eps_known};
          for (int k = 0; k < 4; k++) taken[index_of(s, g[k])] = 1;
          if (cb) taken[index_of(s, cb)] = 1;
          taken[index_of(s, t)] = 1;
          continue;
        }
      }
      if (t && !transposed && (same_dims(init, t) || (u->op == MG_OP_PRelu && wt_numel(t) == init_numel(init))))
        *x = (wt_binding){.init = init, .kind = WT_BY_SCOPE, .src = t, .by_structure = 1};
      else if (t && transposed && t->rank == 2 && init->shape.rank == 2 && t->dims[0] == init->shape.d[1].v &&
               t->dims[1] == init->shape.d[0].v)
        *x = (wt_binding){.init = init, .kind = WT_BY_TRANSPOSE, .src = t, .by_structure = 1};
      else
        continue;
      taken[index_of(s, t)] = 1;
    }
  mg_free(taken);
  return 0;
}

int wt_bind(const wt_source *s, const mg_model *m, wt_binding **out, int *n_out, mg_diags *d) {
  const mg_graph *g = m->graph;
  *out = NULL;
  *n_out = 0;
  wt_binding *b = mg_calloc((size_t)g->n_inits + 1, sizeof *b);
  bind_ctx c = {s, d, g, mg_calloc((size_t)wt_count(s) + 1, sizeof(double *)), mg_calloc((size_t)wt_count(s) + 1, 1),
                mg_calloc((size_t)wt_count(s) + 1, sizeof(double *))};
  int rc = 0, nb = 0;
  if (!b || !c.cache || !c.loaded || !c.sorted) {
    mg_error(d, OOM, NULL, NULL, "out of memory");
    rc = -1;
  }
  for (int i = 0; i < g->n_inits && !rc; i++) {
    const mg_value *init = g->inits[i];
    if (!init->n_uses) continue; /* folded away or unused */
    rc = bind_one(&c, init, &b[nb]);
    if (!rc) nb++;
  }
  /* Folded biases need their node's weight binding. */
  for (int i = 0; i < nb && !rc; i++) {
    if (b[i].kind != WT_UNBOUND || b[i].init->shape.rank != 1) continue;
    int slot;
    const mg_node *u = consumer(g, b[i].init, &slot);
    if (!u || (u->op != MG_OP_Conv && u->op != MG_OP_ConvTranspose) || slot != 2) continue;
    for (int k = 0; k < nb; k++)
      if (b[k].init == u->in[1] && b[k].kind == WT_BN_FOLD_WEIGHT) {
        double *iv = init_f64(b[i].init, &c.failed);
        if (!iv) break; /* c.failed, or no float values */
        if (try_fold_bias(&c, b[i].init, iv, &b[k], &b[i]) < 0) rc = -1;
        mg_free(iv);
        break;
      }
  }
  if (!rc && bind_by_structure(&c, b, nb)) {
    mg_error(d, OOM, NULL, NULL, "out of memory");
    rc = -1;
  }
  /* last: what neither values nor structure bound may be derived from a parameter */
  for (int i = 0; i < nb && !rc; i++)
    if (b[i].kind == WT_UNBOUND && mg_dtype_is_float(b[i].init->dtype) && try_derived(&c, b[i].init, &b[i])) {
      mg_error(d, OOM, NULL, NULL, "out of memory");
      rc = -1;
    }
  /* a tensor or initializer that could not be read leaves the binding short of
   * what it would find: a failure, never a quietly weaker binding */
  if (!rc && c.failed) rc = -1;
  if (rc && !d->errors) mg_error(d, OOM, NULL, NULL, "out of memory binding the weights");
  for (int i = 0; c.sorted && i < wt_count(s); i++) mg_free(c.sorted[i]);
  mg_free(c.sorted);
  for (int i = 0; c.cache && i < wt_count(s); i++) mg_free(c.cache[i]);
  mg_free(c.cache);
  mg_free(c.loaded);
  if (rc) {
    mg_free(b);
    return -1;
  }
  *out = b;
  *n_out = nb;
  return 0;
}

int wt_graph_types(const wt_source *s, const mg_model *m, const wt_binding *b, int nb,
                   wt_type_hint **out, int *n_out, mg_diags *d) {
  (void)s;
  wt_type_hint *h = mg_calloc((size_t)nb * 4 + 1, sizeof *h);
  *out = h;
  *n_out = 0;
  if (!h) {
    mg_error(d, OOM, NULL, NULL, "out of memory");
    return -1;
  }
  static const char *const bn_by_rank[] = {NULL, NULL, "BatchNorm1d", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d"};
  for (int i = 0; i < nb; i++) {
    const wt_binding *x = &b[i];
    if (!x->src && x->kind != WT_BN_FOLD_BIAS) continue;
    const char *type = NULL;
    if (x->kind == WT_BN_FOLD_WEIGHT) {
      int r = x->src->rank;
      h[(*n_out)++] = (wt_type_hint){x->bn[0]->name, r >= 2 && r <= 5 ? bn_by_rank[r] : NULL};
      if (r == 3) type = "Conv1d";
    } else if (x->src) {
      int slot;
      const mg_node *u = consumer(m->graph, x->init, &slot);
      if (!u) continue;
      int xr = u->in[0] ? u->in[0]->shape.rank : -1;
      switch (u->op) {
      case MG_OP_BatchNormalization: type = xr >= 2 && xr <= 5 ? bn_by_rank[xr] : "BatchNorm2d"; break;
      case MG_OP_LayerNormalization: type = "LayerNorm"; break;
      case MG_OP_GroupNormalization: type = "GroupNorm"; break;
      case MG_OP_InstanceNormalization: type = "InstanceNorm"; break;
      case MG_OP_PRelu: if (slot == 1) type = "PReLU"; break;
      case MG_OP_Gather: if (slot == 0) type = "Embedding"; break;
      case MG_OP_Conv: if (slot == 1 && x->src->rank == 3) type = "Conv1d"; break;
      case MG_OP_ConvTranspose: if (slot == 1 && x->src->rank == 3) type = "ConvTranspose1d"; break;
      default: break;
      }
    }
    if (type && x->src) h[(*n_out)++] = (wt_type_hint){x->src->name, type};
  }
  return 0;
}

/* The values binding x gives its initializer, as doubles (numel of the
 * initializer); NULL when a source tensor cannot be read (recorded). */
static double *bound_values(const wt_source *s, const wt_binding *x, mg_diags *d) {
  const mg_value *init = x->init;
  int64_t n = init_numel(init);
  double *v = mg_calloc((size_t)n + 1, sizeof(double)), *src = NULL, *bn[4] = {NULL, NULL, NULL, NULL};
  int ok = v != NULL;
  if (ok && x->src) ok = (src = wt_read_f64(s, x->src, d)) != NULL;
  if (ok && (x->kind == WT_BN_FOLD_WEIGHT || x->kind == WT_BN_FOLD_BIAS))
    for (int k = 0; k < 4 && ok; k++) ok = (bn[k] = wt_read_f64(s, x->bn[k], d)) != NULL;
  if (ok) {
    switch (x->kind) {
    case WT_BY_TRANSPOSE: {
      int64_t r = x->src->dims[0], q = x->src->dims[1];
      for (int64_t i = 0; i < r; i++)
        for (int64_t j = 0; j < q; j++) v[j * r + i] = src[i * q + j];
      break;
    }
    case WT_BN_FOLD_WEIGHT: {
      int64_t out = x->bn[0]->dims[0], per = n / (out ? out : 1);
      for (int64_t o = 0; o < out; o++)
        for (int64_t k = 0; k < per; k++) v[o * per + k] = src[o * per + k] * bn[0][o] / sqrt(bn[3][o] + x->eps);
      break;
    }
    case WT_RNN_GATES: {
      int nb = x->gru ? 3 : 4;
      int64_t half = x->src2 ? n / 2 : n, row = x->init->shape.rank == 3 ? x->init->shape.d[2].v : 1;
      int64_t H = half / (nb * row);
      rnn_reorder(x->gru, src, H, row, v);
      if (x->src2) {
        double *hh = wt_read_f64(s, x->src2, d);
        if (!hh) {
          ok = 0;
          break;
        }
        rnn_reorder(x->gru, hh, H, 1, v + half);
        mg_free(hh);
      }
      break;
    }
    case WT_BN_FOLD_BIAS:
      for (int64_t o = 0; o < n; o++)
        v[o] = ((src ? src[o] : 0) - bn[2][o]) * bn[0][o] / sqrt(bn[3][o] + x->eps) + bn[1][o];
      break;
    default: memcpy(v, src, sizeof(double) * (size_t)n); break;
    }
  }
  mg_free(src);
  for (int k = 0; k < 4; k++) mg_free(bn[k]);
  if (!ok) mg_free(v);
  return ok ? v : NULL;
}

/* Stores v as one element of floating dtype t at p (any alignment), rounded once. */
static void store_float(mg_dtype t, void *p, double v) {
  if (t == MG_F64) {
    memcpy(p, &v, 8);
  } else if (t == MG_F16 || t == MG_BF16) {
    uint16_t h = t == MG_F16 ? mg_f32_to_f16((float)v) : mg_f32_to_bf16((float)v);
    memcpy(p, &h, 2);
  } else {
    float f = (float)v;
    memcpy(p, &f, 4);
  }
}

int wt_bind_apply(const wt_source *s, mg_model *m, wt_binding *b, int nb, mg_diags *d) {
  for (int i = 0; i < nb; i++) {
    wt_binding *x = &b[i];
    mg_dtype dt = x->init->dtype;
    if (x->kind == WT_UNBOUND || x->kind == WT_CONSTANT || x->kind == WT_DERIVED ||
        (dt != MG_F32 && dt != MG_F64 && dt != MG_F16 && dt != MG_BF16))
      continue;
    if (x->src && wt_numel(x->src) * (x->src2 ? 2 : 1) != init_numel(x->init)) continue; /* never: shapes agree */
    mg_value *init = (mg_value *)x->init;
    double *v = bound_values(s, x, d);
    size_t es = mg_dtype_size(init->dtype);
    int64_t n = init_numel(init);
    unsigned char *buf = v ? mg_arena_alloc(&m->arena, (size_t)n * es + 1) : NULL;
    if (!buf) {
      mg_free(v);
      if (!d->errors) mg_error(d, OOM, NULL, NULL, "out of memory");
      return -1;
    }
    int oom = 0;
    double *old = init_f64(init, &oom), err = 0;
    if (oom) { /* max_err would be 0: a stale export's difference reported as none */
      mg_free(v);
      mg_error(d, OOM, NULL, NULL, "out of memory applying the bound weights");
      return -1;
    }
    for (int64_t k = 0; k < n; k++) {
      store_float(init->dtype, buf + (size_t)k * es, v[k]);
      if (old) err = fmax(err, fabs(old[k] - mg_load_f64(init->dtype, buf + (size_t)k * es)));
    }
    mg_free(old);
    mg_free(v);
    init->data = buf;
    init->nbytes = (size_t)n * es;
    x->max_err = err;
  }
  return 0;
}

void wt_warn_unbound(const wt_binding *b, int nb, const char *what, mg_diags *d) {
  int n = 0;
  for (int i = 0; i < nb; i++) n += b[i].kind == WT_UNBOUND;
  if (n <= 4) {
    for (int i = 0; i < nb; i++)
      if (b[i].kind == WT_UNBOUND) mg_warn(d, GRAPH, b[i].init->name, NULL, "graph initializer bound to no source tensor: %s", what);
    return;
  }
  char names[512] = "";
  size_t k = 0;
  int shown = 0;
  for (int i = 0; i < nb && shown < 4; i++)
    if (b[i].kind == WT_UNBOUND) {
      int w = snprintf(names + k, sizeof names - k, "%s'%.100s'", shown ? ", " : "", b[i].init->name);
      if (w > 0 && (size_t)w < sizeof names - k) k += (size_t)w;
      shown++;
    }
  mg_warn(d, GRAPH, NULL, NULL, "%d graph initializers bound to no source tensor (%s and %d more; weight_map.json lists "
          "them): %s", n, names, n - shown, what);
}
