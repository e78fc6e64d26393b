/* --precision int8 in the C generator: which Conv layers run int8, their int8
 * weights (per-output-channel symmetric, from the weights the lowering left, so
 * after BatchNorm folding), and the report of every quantisable layer that the
 * CLI writes into convert.json and quant.json. A layer that cannot run int8 stays
 * float32 with its reason in the report: never silently. */
#include "cg_internal.h"
#include "mg_rt_int8.h"

#include <stdlib.h>
#include <string.h>

void cg_quant_free(cg_quant *q) {
  for (int i = 0; q && i < q->n_layers; i++) mg_free(q->layers[i].w_scale);
  if (q) mg_free(q->layers);
  if (q) q->layers = NULL, q->n_layers = q->cap_layers = 0;
}

/* The calibrated quantisation of value v, or NULL. */
static const cg_q8_act *act_of(const cg_quant *q, const mg_value *v) {
  for (int i = 0; v && v->name && i < q->n_acts; i++)
    if (!strcmp(q->acts[i].name, v->name)) return &q->acts[i];
  return NULL;
}

/* A new report row for node n; NULL on OOM. */
static cg_q8_layer *add_layer(cg_quant *q, const mg_node *n) {
  if (q->n_layers == q->cap_layers) {
    int cap = q->cap_layers ? 2 * q->cap_layers : 64;
    cg_q8_layer *l = mg_realloc(q->layers, (size_t)cap * sizeof *l);
    if (!l) return NULL;
    q->layers = l, q->cap_layers = cap;
  }
  cg_q8_layer *l = &q->layers[q->n_layers++];
  memset(l, 0, sizeof *l);
  l->node = n->name ? n->name : "";
  l->op = n->op_type ? n->op_type : mg_op_name(n->op);
  return l;
}

int cg_q8_prepare(cg_ctx *c, int i, const mg_node *n) {
  cg_quant *q = c->o->quant;
  if (n->op != MG_OP_Conv && n->op != MG_OP_Gemm && n->op != MG_OP_MatMul) return 0;
  if (c->absorbed[n->id]) return 0;
  cg_q8_layer *l = add_layer(q, n);
  if (!l) return -1;
  if (n->op != MG_OP_Conv) {
    snprintf(l->why, sizeof l->why, "int8 %s is not implemented", l->op);
    return 0;
  }
  mg_conv2d_params p;
  if (!cg_conv_candidate(c, n, &p)) {
    snprintf(l->why, sizeof l->why, "not a 2-D Conv with constant float32 weights of static shape");
    return 0;
  }
  const cg_q8_act *a = act_of(q, n->in[0]);
  if (!a) {
    snprintf(l->why, sizeof l->why, "no calibrated range for its input '%s'", n->in[0]->name ? n->in[0]->name : "");
    return 0;
  }
  if (!(a->scale > 0) || (a->zp != 0 && a->zp != 128)) {
    snprintf(l->why, sizeof l->why, "its input's scale %g or zero point %d is unusable", (double)a->scale, a->zp);
    return 0;
  }
  mg_q8_conv_params qp = {p, a->scale, a->zp};
  const int rows = p.M, cols = p.C / p.group * p.kh * p.kw;
  size_t bytes = mg_q8_conv_prepared_bytes(&qp);
  /* the graph's bytes may sit unaligned in the mapped model: read a copy */
  float *w = mg_malloc(n->in[1]->nbytes), *out = mg_malloc(bytes);
  l->w_scale = mg_malloc((size_t)rows * sizeof(float));
  if (!w || !out || !l->w_scale) {
    mg_free(w);
    mg_free(out);
    return -1;
  }
  memcpy(w, n->in[1]->data, n->in[1]->nbytes);
  mg_q8_weight_scales(w, rows, cols, l->w_scale);
  l->n_w_scale = rows;
  mg_q8_conv_prepare(&qp, w, l->w_scale, out);
  mg_free(w);
  l->int8 = 1;
  c->prep[i] = (cg_prep){.data = out, .nbytes = bytes, .kind = CG_PREP_Q8, .q_scale = a->scale, .q_zp = a->zp};
  c->n_prep++;
  return 1;
}

int cg_q8_conv(cg_ctx *c, const mg_node *n, float *in_scale, int *in_zp) {
  const cg_prep *p = c->prep && n->id >= 0 && n->id < c->g->n_nodes ? &c->prep[n->id] : NULL;
  if (!p || !p->data || p->kind != CG_PREP_Q8) return 0;
  *in_scale = p->q_scale, *in_zp = p->q_zp;
  return 1;
}
