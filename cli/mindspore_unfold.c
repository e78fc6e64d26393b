/* The trainable form of a default export for the MindSpore script: each Conv the
 * export folded a BatchNorm into becomes the torch Conv (its own weight, its own
 * bias or none) followed by a BatchNormalization of the torch BatchNorm's four
 * tensors, so that net.py holds an nn.BatchNorm2d that trains and updates its
 * statistics as torch's did, named as the checkpoint names them. */
#include "mindspore_unfold.h"
#include "rewrite.h"
#include <stdio.h>
#include <string.h>

/* torch.nn.BatchNorm2d's default momentum 0.1, which a state_dict does not record;
 * MindSpore's momentum is 1 - torch's (mindspore-api.json, mindspore.nn.BatchNorm2d:
 * "MindSpore momentum=0.9 == ONNX BatchNormalization momentum 0.9 == torch momentum
 * 0.1"), which is also ONNX BatchNormalization's meaning. */
#define TORCH_BN_MOMENTUM 0.1

static const wt_binding *binding_of(const wt_binding *b, int nb, const mg_value *v) {
  if (!v) return NULL;
  for (int i = 0; i < nb; i++)
    if (!strcmp(b[i].init->name, v->name)) return &b[i];
  return NULL;
}

/* A new initializer holding source tensor t (its dtype must be want's), named after
 * it; NULL with a diagnostic when it cannot be read. */
static mg_value *init_from(mg_rw *w, const wt_source *src, const wt_tensor *t, mg_dtype want, mg_diags *d) {
  int64_t n = wt_numel(t);
  if (t->dtype != want || n < 0 || t->rank > MG_MAX_RANK) return NULL;
  size_t nbytes = (size_t)n * mg_dtype_size(want);
  void *buf = mg_arena_alloc(&w->m->arena, nbytes ? nbytes : 1);
  if (!buf) {
    w->failed = 1;
    return NULL;
  }
  if (wt_read(src, t, 0, n, buf, d)) return NULL;
  mg_shape s = {.rank = t->rank};
  for (int k = 0; k < t->rank; k++) s.d[k].v = t->dims[k];
  return mg_rw_init(w, t->name, want, &s, buf, nbytes);
}

/* Whether the folded Conv n can be unfolded: its weight folds a BatchNorm whose
 * four tensors the source holds in the Conv's dtype, and its bias (if any) is the
 * same fold's. */
static int unfoldable(const mg_node *n, const wt_binding *bw, const wt_binding *bb) {
  if (!bw || bw->kind != WT_BN_FOLD_WEIGHT || !bw->src || n->n_out < 1 || !n->out[0]) return 0;
  if (n->n_in > 2 && n->in[2] && (!bb || bb->kind != WT_BN_FOLD_BIAS)) return 0;
  for (int k = 0; k < 4; k++)
    if (!bw->bn[k] || bw->bn[k]->dtype != n->in[1]->dtype || bw->bn[k]->rank != 1) return 0;
  return bw->src->dtype == n->in[1]->dtype && (!bb || !bb->src || bb->src->dtype == n->in[1]->dtype);
}

int ms_unfold_batchnorm(mg_model *m, const wt_source *src, const wt_binding *b, int nb, wt_binding **out,
                        int *n_out, int *n_unfolded, mg_diags *d) {
  mg_graph *g = m->graph;
  *out = NULL, *n_out = 0, *n_unfolded = 0;
  int n_folds = 0;
  for (int i = 0; i < g->n_nodes; i++)
    if (g->nodes[i]->op == MG_OP_Conv && g->nodes[i]->n_in > 1 &&
        unfoldable(g->nodes[i], binding_of(b, nb, g->nodes[i]->in[1]),
                   g->nodes[i]->n_in > 2 ? binding_of(b, nb, g->nodes[i]->in[2]) : NULL))
      n_folds++;
  /* up to six new bindings per fold (weight, bias, four BatchNorm tensors), in front
   * of the originals so that they win the by-name lookup */
  wt_binding *ext = mg_malloc(sizeof *ext * (size_t)(6 * n_folds + nb + 1));
  if (!ext) {
    mg_error(d, OOM, NULL, NULL, "out of memory unfolding BatchNorm");
    return -1;
  }
  int n_ext = 0;
  if (!n_folds) { /* nothing to rewrite (an empty graph among them) */
    if (nb) memcpy(ext, b, sizeof *b * (size_t)nb);
    *out = ext, *n_out = nb;
    return 0;
  }
  mg_rw w;
  mg_rw_begin(&w, m, g);
  int n0 = g->n_nodes;
  mg_node **old = mg_arena_memdup(&m->arena, g->nodes, sizeof *old * (size_t)(n0 ? n0 : 1));
  if (!old) w.failed = 1;
  for (int i = 0; i < n0 && !w.failed; i++) {
    mg_node *n = old[i];
    const wt_binding *bw = n->op == MG_OP_Conv && n->n_in > 1 ? binding_of(b, nb, n->in[1]) : NULL;
    const wt_binding *bb = bw && n->n_in > 2 ? binding_of(b, nb, n->in[2]) : NULL;
    if (!bw || !unfoldable(n, bw, bb)) {
      mg_rw_keep(&w, n);
      continue;
    }
    mg_dtype t = n->in[1]->dtype;
    mg_value *weight = init_from(&w, src, bw->src, t, d);
    mg_value *bias = bb && bb->src ? init_from(&w, src, bb->src, t, d) : NULL;
    mg_value *bn[4] = {0};
    for (int k = 0; k < 4; k++) bn[k] = init_from(&w, src, bw->bn[k], t, d);
    if (!weight || (bb && bb->src && !bias) || !bn[0] || !bn[1] || !bn[2] || !bn[3]) {
      if (!w.failed) mg_rw_keep(&w, n); /* unreadable: left folded, and refused as such */
      continue;
    }
    mg_value *y = n->out[0];
    char base[512];
    snprintf(base, sizeof base, "%s_conv", y->name);
    mg_value *conv_out = mg_rw_value(&w, base, y->dtype, &y->shape);
    if (!conv_out) break;
    n->in[1] = weight;
    if (bias) n->in[2] = bias;
    else if (n->n_in > 2) n->n_in = 2;
    n->out[0] = conv_out;
    conv_out->producer = n, conv_out->producer_slot = 0;
    mg_rw_keep(&w, n);
    mg_value *bn_in[5] = {conv_out, bn[0], bn[1], bn[2], bn[3]};
    /* named for the comment in net.py: the ONNX node it came from, and the torch
     * BatchNorm (its tensors' module) */
    const char *gamma = bw->bn[0]->name, *dot = strrchr(gamma, '.');
    char name[512];
    snprintf(name, sizeof name, "%s, BatchNorm %.*s unfolded", n->name, (int)(dot ? dot - gamma : (long)strlen(gamma)),
             gamma);
    mg_node *bnn = mg_rw_node(&w, MG_OP_BatchNormalization, name, 5, bn_in, 1, &y);
    mg_rw_attr_float(&w, bnn, "epsilon", (float)bw->eps);
    mg_rw_attr_float(&w, bnn, "momentum", (float)(1.0 - TORCH_BN_MOMENTUM));
    mg_rw_attr_int(&w, bnn, "training_mode", 0);
    ext[n_ext++] = (wt_binding){.init = weight, .kind = WT_BY_NAME, .src = bw->src};
    if (bias) ext[n_ext++] = (wt_binding){.init = bias, .kind = WT_BY_NAME, .src = bb->src};
    for (int k = 0; k < 4; k++) ext[n_ext++] = (wt_binding){.init = bn[k], .kind = WT_BY_NAME, .src = bw->bn[k]};
    ++*n_unfolded;
  }
  if (mg_rw_end(&w)) {
    mg_free(ext);
    mg_error(d, OOM, NULL, NULL, "out of memory unfolding BatchNorm");
    return -1;
  }
  if (nb) memcpy(ext + n_ext, b, sizeof *b * (size_t)nb);
  *out = ext, *n_out = n_ext + nb;
  return 0;
}
