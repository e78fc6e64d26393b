/* Fusion decisions and the static memory plan of the C generator.
 *
 * Fusion: an op whose emitter applies an epilogue (CG_EPILOGUE) absorbs the
 * activation that is the only reader of its float32 output, and x * sigmoid(x)
 * (SiLU, as torch exports it) when x's only readers are that Sigmoid and Mul.
 *
 * Plan: every value lives in one of the places of cg_place. Intermediates get an
 * arena buffer owned by a root value; views (Reshape and friends) and in-place
 * ops share their input's root. A buffer is live from the step that writes it to
 * the last step that reads any value sharing it. Offsets come from a greedy
 * best-fit by decreasing size, which lands close to the lower bound: the most
 * bytes live at any one step, which no plan can go under. */
#include "cg_internal.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ALIGN 64

static size_t round_up(size_t n) { return (n + ALIGN - 1) / ALIGN * ALIGN; }

static size_t value_bytes(const mg_value *v) {
  int64_t n = mg_shape_numel(&v->shape);
  return n < 0 ? 0 : (size_t)n * cg_elem_bytes(v->dtype);
}

static int graph_output_index(const mg_graph *g, const mg_value *v) {
  for (int i = 0; i < g->n_outputs; i++)
    if (g->outputs[i] == v) return i;
  return -1;
}

/* The single node reading v (v->n_uses == 1 and not a graph output), else NULL. */
static mg_node *only_reader(mg_graph *g, const mg_value *v, int after) {
  if (v->n_uses != 1 || graph_output_index(g, v) >= 0) return NULL;
  for (int i = after + 1; i < g->n_nodes; i++)
    for (int k = 0; k < g->nodes[i]->n_in; k++)
      if (g->nodes[i]->in[k] == v) return g->nodes[i];
  return NULL;
}

static int finite_scalar(const mg_value *v, float *out) {
  float x;
  if (!v || cg_const_floats(v, &x, 1) != 1 || !isfinite(x)) return 0;
  *out = x;
  return 1;
}

/* The epilogue enumerator of an op in fused_acts.def; NULL for any other op. */
static const char *act_enum(mg_op op) {
  switch (op) {
#define FUSED_ACT(name, e) case MG_OP_##name: return "MG_ACT_" #e;
#include "fused_acts.def"
#undef FUSED_ACT
  default:
    return NULL;
  }
}
/* every row's enumerator exists in the runtime */
#define FUSED_ACT(name, e) _Static_assert(MG_ACT_##e > MG_ACT_NONE, "fused_acts.def: " #name);
#include "fused_acts.def"
#undef FUSED_ACT

/* Whether activation node a can run as an epilogue of its input's producer. */
static int fusable_act(const mg_node *a) {
  if (!a->out[0] || a->out[0]->dtype != MG_F32 || !act_enum(a->op)) return 0;
  float lo, hi;
  switch (a->op) {
  case MG_OP_Gelu: {
    const char *ap = mg_attr_str(a, "approximate", "none");
    return !strcmp(ap, "none") || !strcmp(ap, "tanh");
  }
  case MG_OP_Clip:
    return a->n_in == 3 && finite_scalar(a->in[1], &lo) && finite_scalar(a->in[2], &hi);
  default:
    return 1;
  }
}

void cg_fused_act(cg_ctx *c, const mg_node *n, cg_act *out) {
  out->act = "MG_ACT_NONE";
  out->a = out->b = 0;
  const mg_node *a = c->act[n->id];
  if (!a) return;
  if (c->silu_mul[n->id]) {
    out->act = "MG_ACT_SILU";
    return;
  }
  out->act = act_enum(a->op);
  if (!out->act) out->act = "MG_ACT_NONE"; /* cannot happen: cg_fuse fused it from the table */
  switch (a->op) { /* the parameters */
  case MG_OP_LeakyRelu: out->a = mg_attr_float(a, "alpha", 0.01f); break;
  case MG_OP_HardSigmoid:
    out->a = mg_attr_float(a, "alpha", 0.2f);
    out->b = mg_attr_float(a, "beta", 0.5f);
    break;
  case MG_OP_Gelu:
    if (!strcmp(mg_attr_str(a, "approximate", "none"), "tanh")) out->act = "MG_ACT_GELU_TANH";
    break;
  case MG_OP_Clip:
    finite_scalar(a->in[1], &out->a);
    finite_scalar(a->in[2], &out->b);
    break;
  default: break;
  }
}

int cg_fuse(cg_ctx *c, cg_report *r) {
  mg_graph *g = c->g;
  for (int i = 0; i < g->n_nodes; i++) {
    mg_node *p = g->nodes[i];
    int flags = cg_kernel_flags(p->op);
    if (c->o->no_fuse || c->absorbed[i] || flags < 0 || !(flags & CG_EPILOGUE) || p->n_out < 1 ||
        !p->out[0] || p->out[0]->dtype != MG_F32 || graph_output_index(g, p->out[0]) >= 0)
      continue;
    mg_value *x = p->out[0];
    if (c->dyn_node[i]) continue; /* its dims are set after its own kernel */
    mg_node *a = only_reader(g, x, i);
    if (a && a->in[0] == x && fusable_act(a)) {
      c->act[i] = a;
      c->absorbed[a->id] = 1;
      c->redirect[x->id] = a->out[0]->id;
      r->n_fused++;
      continue;
    }
    /* SiLU: Sigmoid(x) and Mul(x, Sigmoid(x)) are x's only readers */
    if (x->n_uses != 2) continue;
    mg_node *s = NULL, *mul = NULL;
    for (int j = i + 1; j < g->n_nodes; j++)
      for (int k = 0; k < g->nodes[j]->n_in; k++)
        if (g->nodes[j]->in[k] == x) {
          if (g->nodes[j]->op == MG_OP_Sigmoid && !s) s = g->nodes[j];
          else if (g->nodes[j]->op == MG_OP_Mul) mul = g->nodes[j];
        }
    if (!s || !mul || only_reader(g, s->out[0], s->id) != mul || mul->n_in != 2) continue;
    int pattern = (mul->in[0] == x && mul->in[1] == s->out[0]) || (mul->in[1] == x && mul->in[0] == s->out[0]);
    if (!pattern || mul->out[0]->dtype != MG_F32 || c->absorbed[s->id] || c->absorbed[mul->id]) continue;
    c->act[i] = s;
    c->silu_mul[i] = mul;
    c->absorbed[s->id] = c->absorbed[mul->id] = 1;
    c->redirect[x->id] = mul->out[0]->id;
    r->n_fused++;
  }
  return 0;
}

/* An absorbed activation runs with its producer. */
int cg_step_of(const cg_ctx *c, const mg_node *n) {
  if (!c->absorbed[n->id]) return n->id;
  for (const mg_node *p = n; p;) {
    const mg_value *in = p->in[0];
    if (p->op == MG_OP_Mul && in && in->producer && c->absorbed[in->producer->id] && in->producer->op == MG_OP_Sigmoid)
      in = p->in[1];
    if (!in || !in->producer) return n->id;
    p = in->producer;
    if (!c->absorbed[p->id]) return p->id;
  }
  return n->id;
}

int cg_plan(cg_ctx *c, cg_report *r) {
  mg_graph *g = c->g;
  int nv = g->n_values;
  int *last = mg_malloc(sizeof(int) * (size_t)(nv + 1));
  c->buffers = mg_calloc((size_t)nv + 1, sizeof(cg_buffer));
  if (!last || !c->buffers) {
    mg_free(last);
    return -1;
  }
  char *norm_read = mg_calloc((size_t)nv + 1, 1);
  if (!norm_read) {
    mg_free(last);
    return -1;
  }
  for (int v = 0; v < nv; v++) last[v] = -1;
  for (int i = 0; i < g->n_nodes; i++) {
    const mg_node *n = g->nodes[i];
    int s = cg_step_of(c, n);
    int norm = n->op == MG_OP_BatchNormalization || n->op == MG_OP_LayerNormalization ||
               n->op == MG_OP_GroupNormalization || n->op == MG_OP_InstanceNormalization;
    for (int k = 0; norm && k < n->n_in; k++)
      if (n->in[k] && n->in[k]->id >= 0 && n->in[k]->id < nv) norm_read[n->in[k]->id] = 1;
    for (int k = 0; k < n->n_in; k++) {
      /* a weight the node reads prepared (cg_prepare.c) is not read as it is */
      if (k == 1 && c->prep && c->prep[i].data) continue;
      if (n->in[k] && n->in[k]->id >= 0 && n->in[k]->id < nv && last[n->in[k]->id] < s) last[n->in[k]->id] = s;
    }
  }
  /* weights: every constant a node reads, and constant graph outputs */
  size_t woff = 0;
  for (int v = 0; v < nv; v++) {
    mg_value *x = g->values[v];
    c->place[v].at = CG_AT_NONE;
    c->place[v].root = -1;
    if (x->kind == MG_V_INPUT) continue;
    /* string constants hold the compiler's pointers: never weights (refused at emission) */
    if (x->data && x->dtype != MG_STRING && (last[v] >= 0 || graph_output_index(g, x) >= 0)) {
      c->place[v].at = CG_AT_WEIGHT;
      c->place[v].offset = woff;
      c->place[v].w16 = graph_output_index(g, x) < 0 && cg_w16_choose(c, x, norm_read[v], r);
      size_t bytes = c->place[v].w16 ? (size_t)cg_numel(x) * 2 : x->nbytes;
      woff += round_up(bytes ? bytes : 1);
    }
  }
  mg_free(norm_read);
  /* then the prepared weights, in node order (cg_project.c writes them so) */
  for (int i = 0; c->prep && i < g->n_nodes; i++)
    if (c->prep[i].data) {
      r->n_w16 += c->prep[i].w16;
      c->prep[i].offset = woff;
      woff += round_up(c->prep[i].nbytes);
    }
  c->weights_bytes = woff;
  for (int i = 0; i < g->n_inputs; i++) {
    c->place[g->inputs[i]->id].at = CG_AT_INPUT;
    c->place[g->inputs[i]->id].index = i;
  }
  for (int i = 0; i < g->n_nodes; i++) {
    const mg_node *n = g->nodes[i];
    if (c->absorbed[i]) continue;
    if (cg_is_view(n) && n->in[0]) {
      mg_value *out = n->out[0];
      int j = graph_output_index(g, out);
      if (j >= 0) {
        c->place[out->id].at = CG_AT_OUTPUT;
        c->place[out->id].index = j;
      } else {
        c->place[out->id] = c->place[n->in[0]->id];
      }
      int root = c->place[out->id].at == CG_AT_ARENA ? c->place[out->id].root : -1;
      if (root >= 0) {
        cg_buffer *b = &c->buffers[root];
        if (last[out->id] > b->last) b->last = last[out->id];
      }
      continue;
    }
    int flags = cg_kernel_flags(n->op);
    for (int k = 0; k < n->n_out; k++) {
      mg_value *o = n->out[k];
      if (!o) continue;
      mg_value *dest = c->redirect[o->id] >= 0 ? g->values[c->redirect[o->id]] : o;
      cg_place *p = &c->place[dest->id];
      int j = graph_output_index(g, dest);
      if (j >= 0) {
        p->at = CG_AT_OUTPUT;
        p->index = j;
        continue;
      }
      size_t bytes = round_up(value_bytes(dest) ? value_bytes(dest) : 1);
      int lu = last[dest->id] > i ? last[dest->id] : i;
      const mg_value *in0 = n->n_in ? n->in[0] : NULL;
      if (k == 0 && flags > 0 && (flags & CG_INPLACE) && in0 && c->place[in0->id].at == CG_AT_ARENA &&
          in0->dtype == dest->dtype && value_bytes(in0) == value_bytes(dest)) {
        cg_buffer *b = &c->buffers[c->place[in0->id].root];
        if (b->last == i && last[in0->id] == i) {
          *p = c->place[in0->id];
          b->last = lu;
          c->inplace[i] = 1;
          r->n_inplace++;
          continue;
        }
      }
      cg_buffer *b = &c->buffers[dest->id];
      b->value = dest->id;
      b->bytes = bytes;
      b->first = i;
      b->last = lu;
      p->at = CG_AT_ARENA;
      p->root = dest->id;
      p->offset = 0;
    }
    /* the inputs' roots must outlive this step (they do: last[] covers them) */
  }
  /* compact the used buffers, plan, and write offsets back into the places */
  int nb = 0;
  for (int v = 0; v < nv; v++)
    if (c->buffers[v].bytes) c->buffers[nb++] = c->buffers[v];
  c->n_buffers = nb;
  size_t total = cg_assign_offsets(c->buffers, nb);
  mg_free(last);
  if (total == (size_t)-1) return -1;
  /* the 16-bit weights' expansion area, after every buffer: one step's worth */
  size_t w16_most = 0;
  for (int i = 0; c->o->weights16 && i < g->n_nodes; i++) {
    size_t b = c->absorbed[i] ? 0 : cg_w16_step_bytes(c, g->nodes[i]);
    if (b > w16_most) w16_most = b;
  }
  c->w16_base = round_up(total);
  c->arena_bytes = w16_most ? c->w16_base + w16_most : total;
  size_t lb = cg_plan_lower_bound(c->buffers, nb, g->n_nodes);
  c->lower_bound = lb;
  for (int v = 0; v < nv; v++)
    if (c->place[v].at == CG_AT_ARENA)
      for (int b = 0; b < nb; b++)
        if (c->buffers[b].value == c->place[v].root) {
          c->place[v].offset = c->buffers[b].offset;
          break;
        }
  r->arena_bytes = c->arena_bytes;
  r->lower_bound = lb;
  r->weights_bytes = c->weights_bytes;
  return 0;
}

int cg_plan_verify(const cg_ctx *c, mg_diags *d) {
  int bad = 0;
  for (int i = 0; i < c->n_buffers; i++) {
    const cg_buffer *a = &c->buffers[i];
    if (a->offset % ALIGN || a->offset + a->bytes > c->arena_bytes || a->first > a->last) bad = 1;
    for (int j = i + 1; j < c->n_buffers && !bad; j++) {
      const cg_buffer *b = &c->buffers[j];
      int live_together = a->first <= b->last && b->first <= a->last;
      int share_bytes = a->offset < b->offset + b->bytes && b->offset < a->offset + a->bytes;
      if (live_together && share_bytes) bad = 1;
    }
  }
  if (c->arena_bytes < c->lower_bound) bad = 1;
  if (bad) mg_error(d, GRAPH, NULL, NULL, "internal error: the arena plan overlaps live buffers");
  return bad ? -1 : 0;
}
