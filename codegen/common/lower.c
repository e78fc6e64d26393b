/* Lowering before C generation: what can be computed at conversion time is.
 *
 *  - Any node whose inputs are all constants is evaluated with the reference
 *    interpreter (core/'s folding covers only shape arithmetic). Random ops are
 *    never folded: each run must draw anew.
 *  - BatchNormalization in inference form that reads the only use of a Conv's
 *    output is folded into that Conv: W'[m] = W[m] * s[m], B' = (B - mean) * s +
 *    beta with s = scale / sqrt(var + eps), computed in double and rounded once. */
#include "lower.h"
#include "interp.h"
#include "passes.h"
#include <math.h>
#include <string.h>

/* Conversion-time folding stops at outputs this large: a bigger constant costs
 * more in the weights file than computing it at run time. */
#define FOLD_MAX_BYTES ((size_t)64 << 20)

int cg_fold_node(mg_model *m, mg_node *n) {
  /* a Gradient's value depends on the graph around it, not only on its inputs */
  if (mg_op_is_random(n->op) || n->op == MG_OP_Gradient || n->op == MG_OP_UNKNOWN || n->n_out > 64) return 0;
  for (int i = 0; i < n->n_in; i++)
    if (n->in[i] && (!n->in[i]->data || n->in[i]->vtype != MG_VT_TENSOR)) return 0;
  size_t total = 0;
  for (int k = 0; k < n->n_out; k++) {
    const mg_value *v = n->out[k];
    if (!v) continue;
    int64_t numel = mg_shape_numel(&v->shape);
    if (v->vtype != MG_VT_TENSOR || numel < 0 || v->dtype == MG_STRING || !mg_dtype_size(v->dtype)) return 0;
    total += (size_t)numel * mg_dtype_size(v->dtype);
  }
  if (total > FOLD_MAX_BYTES) return 0;
  mg_array outs[64];
  mg_diags quiet;
  mg_diags_init(&quiet);
  int rc = interp_eval_node(m, n, outs, &quiet);
  mg_diags_free(&quiet);
  if (rc) return 0;
  int ok = 1;
  for (int k = 0; k < n->n_out && ok; k++) {
    const mg_value *v = n->out[k];
    if (!v) continue;
    ok = outs[k].dtype == v->dtype && outs[k].rank == v->shape.rank;
    for (int r = 0; ok && r < v->shape.rank; r++) ok = outs[k].dims[r] == v->shape.d[r].v;
  }
  for (int k = 0; k < n->n_out && ok; k++) {
    mg_value *v = n->out[k];
    if (!v) continue;
    void *copy = mg_arena_alloc(&m->arena, outs[k].nbytes ? outs[k].nbytes : 1);
    if (!copy) ok = -1;
    else {
      if (outs[k].nbytes) memcpy(copy, outs[k].data, outs[k].nbytes);
      v->data = copy;
      v->nbytes = outs[k].nbytes;
    }
  }
  for (int k = 0; k < n->n_out; k++) mg_array_free(&outs[k]);
  return ok;
}

static int fold_graph_nodes(mg_model *m, int *folded) {
  mg_graph *g = m->graph;
  for (int i = 0; i < g->n_nodes; i++) {
    int r = cg_fold_node(m, g->nodes[i]);
    if (r < 0) return -1;
    *folded += r;
  }
  return 0;
}

/* A constant's float32 data, or NULL (wrong dtype, not constant). */
static const float *const_f32(const mg_value *v, int64_t want) {
  if (!v || !v->data || v->dtype != MG_F32 || mg_shape_numel(&v->shape) != want) return NULL;
  return v->data;
}

static mg_value *new_const(mg_model *m, mg_graph *g, const char *base, const char *suffix,
                           const mg_shape *shape, const float *data, int64_t n) {
  char *name = mg_arena_printf(&m->arena, "%s%s", base, suffix);
  mg_value *existing = NULL, *v = name ? mg_value_new(g, name, &existing) : NULL;
  for (int k = 1; !v && existing && k < 1000; k++) {
    name = mg_arena_printf(&m->arena, "%s%s_%d", base, suffix, k);
    existing = NULL;
    v = name ? mg_value_new(g, name, &existing) : NULL;
  }
  if (!v) return NULL;
  v->kind = MG_V_CONST;
  v->vtype = MG_VT_TENSOR;
  v->dtype = MG_F32;
  v->shape = *shape;
  v->nbytes = (size_t)n * sizeof(float);
  v->data = mg_arena_memdup(&m->arena, data, v->nbytes);
  return v->data ? v : NULL;
}

/* Element i of constant float32 data that may sit unaligned in a mapped file. */
static double f32_at(const float *p, int64_t i) {
  float x;
  memcpy(&x, (const char *)p + (size_t)i * 4, 4);
  return x;
}

/* Folds bn into conv; 1 done, 0 not applicable, -1 OOM. */
static int fold_bn(mg_model *m, mg_node *conv, mg_node *bn) {
  mg_graph *g = m->graph;
  if (bn->n_out < 1 || !bn->out[0] || mg_attr_int(bn, "training_mode", 0)) return 0;
  for (int k = 1; k < bn->n_out; k++)
    if (bn->out[k] && bn->out[k]->n_uses) return 0;
  const mg_value *w = conv->in[1];
  if (!w || !w->data || w->dtype != MG_F32 || w->shape.rank < 3) return 0;
  int64_t M = w->shape.d[0].v, per = mg_shape_numel(&w->shape) / (M ? M : 1);
  const float *wd = const_f32(w, M * per);
  const float *scale = const_f32(bn->in[1], M), *beta = const_f32(bn->in[2], M),
              *mean = const_f32(bn->in[3], M), *var = const_f32(bn->in[4], M);
  const float *bias = conv->n_in > 2 && conv->in[2] ? const_f32(conv->in[2], M) : NULL;
  if (!wd || !scale || !beta || !mean || !var || (conv->n_in > 2 && conv->in[2] && !bias)) return 0;
  double eps = mg_attr_float(bn, "epsilon", 1e-5f);
  float *nw = mg_malloc((size_t)(M * per + M) * sizeof(float));
  if (!nw) return -1;
  float *nb = nw + M * per;
  for (int64_t o = 0; o < M; o++) {
    double s = f32_at(scale, o) / sqrt(f32_at(var, o) + eps);
    for (int64_t k = 0; k < per; k++) nw[o * per + k] = (float)(f32_at(wd, o * per + k) * s);
    const double b0 = bias ? f32_at(bias, o) : 0.0;
    nb[o] = (float)((b0 - f32_at(mean, o)) * s + f32_at(beta, o));
  }
  mg_shape bshape = {.rank = 1};
  bshape.d[0].v = M;
  mg_value *vw = new_const(m, g, conv->name && *conv->name ? conv->name : "conv", ".bn_weight", &w->shape, nw, M * per);
  mg_value *vb = vw ? new_const(m, g, conv->name && *conv->name ? conv->name : "conv", ".bn_bias", &bshape, nb, M) : NULL;
  mg_free(nw);
  if (!vb) return -1;
  if (conv->n_in < 3) {
    mg_value **in = mg_arena_alloc(&m->arena, 3 * sizeof *in);
    if (!in) return -1;
    in[0] = conv->in[0];
    conv->in = in;
    conv->n_in = 3;
  }
  conv->in[1] = vw;
  conv->in[2] = vb;
  mg_value *old = conv->out[0];
  conv->out[0] = bn->out[0];
  bn->out[0]->producer = conv;
  bn->out[0]->producer_slot = 0;
  old->producer = NULL;
  old->kind = MG_V_CONST; /* orphaned, no data and no uses: DCE drops it from view */
  old->n_uses = 0;
  return 1;
}

static int fold_bns(mg_model *m, int *count) {
  mg_graph *g = m->graph;
  ir_count_uses(m);
  char *dead = mg_calloc((size_t)g->n_nodes + 1, 1);
  if (!dead) return -1;
  for (int i = 0; i < g->n_nodes; i++) {
    mg_node *bn = g->nodes[i];
    if (bn->op != MG_OP_BatchNormalization || !bn->in[0] || !bn->in[0]->producer) continue;
    mg_node *conv = bn->in[0]->producer;
    if (conv->op != MG_OP_Conv || conv->graph != g || bn->in[0]->n_uses != 1) continue;
    int is_out = 0;
    for (int k = 0; k < g->n_outputs; k++) is_out |= g->outputs[k] == bn->in[0];
    if (is_out) continue;
    int r = fold_bn(m, conv, bn);
    if (r < 0) {
      mg_free(dead);
      return -1;
    }
    if (r) {
      dead[i] = 1;
      (*count)++;
    }
  }
  int k = 0;
  for (int i = 0; i < g->n_nodes; i++)
    if (!dead[i]) {
      g->nodes[k] = g->nodes[i];
      g->nodes[k]->id = k;
      k++;
    }
  g->n_nodes = k;
  mg_free(dead);
  return 0;
}

int cg_lower(mg_model *m, int fold_bn, int *n_folded, int *n_bn_folded, mg_diags *d) {
  int rewritten = 0;
  if (cg_lower_control(m, d, &rewritten) || cg_lower_gradients(m, d, &rewritten) ||
      cg_lower_sequences(m, d, &rewritten))
    return -1;
  if (fold_graph_nodes(m, n_folded) || pass_fold_constants(m) < 0 || pass_dce(m) < 0) goto oom;
  if (fold_bn && fold_bns(m, n_bn_folded)) goto oom;
  if (pass_dce(m) < 0) goto oom;
  return ir_verify(m, d);
oom:
  mg_error(d, OOM, NULL, NULL, "out of memory lowering the model for C");
  return -1;
}
