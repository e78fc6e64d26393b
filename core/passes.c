#include "passes.h"
#include "window_geom.h"
#include <ctype.h>
#include <string.h>

static int clear_uses(mg_graph *g, void *ctx) {
  (void)ctx;
  for (int i = 0; i < g->n_values; i++) g->values[i]->n_uses = 0;
  return 0;
}

static int add_uses(mg_graph *g, void *ctx) {
  (void)ctx;
  for (int i = 0; i < g->n_nodes; i++) {
    for (int k = 0; k < g->nodes[i]->n_in; k++)
      if (g->nodes[i]->in[k]) g->nodes[i]->in[k]->n_uses++;
    /* Gradient re-runs the nodes that compute its y, so y counts as read. */
    if (g->nodes[i]->op == MG_OP_Gradient) {
      mg_value *y = mg_graph_find(g, mg_attr_str(g->nodes[i], "y", ""));
      if (y) y->n_uses++;
    }
  }
  for (int i = 0; i < g->n_outputs; i++) g->outputs[i]->n_uses++;
  return 0;
}

void ir_count_uses(mg_model *m) {
  mg_graph_walk(m->graph, clear_uses, NULL);
  mg_graph_walk(m->graph, add_uses, NULL);
}

static void remove_marked(mg_graph *g, const char *dead) {
  int k = 0;
  for (int i = 0; i < g->n_nodes; i++)
    if (!dead[i]) {
      g->nodes[k] = g->nodes[i];
      g->nodes[k]->id = k;
      k++;
    }
  g->n_nodes = k;
}

static int fold_graph(mg_graph *g, void *ctx) {
  int *changed = ctx;
  char *dead = mg_calloc((size_t)g->n_nodes + 1, 1);
  if (!dead) return -1;
  for (int i = 0; i < g->n_nodes; i++) {
    mg_node *n = g->nodes[i];
    int all = n->n_out > 0 && n->op != MG_OP_UNKNOWN;
    for (int k = 0; k < n->n_out; k++)
      if (n->out[k] && !n->out[k]->data) all = 0;
    if (!all) continue;
    for (int k = 0; k < n->n_out; k++)
      if (n->out[k]) {
        n->out[k]->kind = MG_V_CONST;
        n->out[k]->producer = NULL;
      }
    dead[i] = 1;
    (*changed)++;
  }
  remove_marked(g, dead);
  mg_free(dead);
  return 0;
}

int pass_fold_constants(mg_model *m) {
  int changed = 0;
  return mg_graph_walk(m->graph, fold_graph, &changed) ? -1 : changed;
}

typedef struct {
  const mg_value *from;
  mg_value *to;
} replace_ctx;

static int replace_in_graph(mg_graph *g, void *ctx) {
  replace_ctx *r = ctx;
  for (int i = 0; i < g->n_nodes; i++)
    for (int k = 0; k < g->nodes[i]->n_in; k++)
      if (g->nodes[i]->in[k] == r->from) g->nodes[i]->in[k] = r->to;
  return 0;
}

static int is_graph_output(const mg_graph *g, const mg_value *v) {
  for (int i = 0; i < g->n_outputs; i++)
    if (g->outputs[i] == v) return 1;
  return 0;
}

/* Whether a value name is a torch parameter's (features.5.1.layer_scale), not
 * one the exporter made up (onnx::Mul_123, /features/Mul_output_0). */
static int is_torch_name(const char *s) {
  if (!*s || strchr(s, ':') || strchr(s, '/')) return 0;
  for (; *s; s++)
    if (!(isalnum((unsigned char)*s) || *s == '_' || *s == '.')) return 0;
  return 1;
}

/* Makes v (an Identity's output) an initializer holding init's data; 0 or -1. */
static int own_initializer(mg_graph *g, mg_value *v, const mg_value *init) {
  mg_value **inits = mg_arena_alloc(&g->model->arena, sizeof *inits * (size_t)(g->n_inits + 1));
  if (!inits) return -1;
  if (g->n_inits) memcpy(inits, g->inits, sizeof *inits * (size_t)g->n_inits);
  inits[g->n_inits++] = v;
  g->inits = inits;
  v->kind = MG_V_INIT, v->producer = NULL, v->producer_slot = 0;
  v->vtype = init->vtype, v->dtype = init->dtype, v->shape = init->shape;
  v->data = init->data, v->nbytes = init->nbytes;
  return 0;
}

/* Whether v is a constant of one element, its value into *x. */
static int const_scalar(const mg_value *v, double *x) {
  if (!v->data || v->vtype != MG_VT_TENSOR || v->shape.rank < 0 || mg_shape_numel(&v->shape) != 1 ||
      !mg_dtype_size(v->dtype) || v->nbytes < mg_dtype_size(v->dtype))
    return 0;
  *x = mg_load_f64(v->dtype, v->data);
  return 1;
}

static int identity_graph(mg_graph *g, void *ctx) {
  int *changed = ctx;
  char *dead = mg_calloc((size_t)g->n_nodes + 1, 1);
  if (!dead) return -1;
  for (int i = 0; i < g->n_nodes; i++) {
    mg_node *n = g->nodes[i];
    int bypass = n->op == MG_OP_Identity && n->in[0] && n->in[0]->vtype == MG_VT_TENSOR;
    if (n->op == MG_OP_Dropout && n->in[0]) {
      /* an identity unless it trains with a ratio above 0: ONNX scales by
       * 1 / (1 - ratio) the elements the mask keeps, and a ratio of 0 keeps all
       * (swin's attention Dropout: training_mode true, ratio 0) */
      double mode = 1, ratio = 0.5;
      int training = n->n_in > 2 && n->in[2] && !(const_scalar(n->in[2], &mode) && mode == 0);
      int no_drop = n->n_in > 1 && n->in[1] && const_scalar(n->in[1], &ratio) && ratio == 0;
      int mask_used = n->n_out > 1 && n->out[1] && n->out[1]->n_uses;
      bypass = (!training || no_drop) && !mask_used;
    }
    if (!bypass || !n->out[0] || is_graph_output(g, n->out[0])) continue;
    if (n->op == MG_OP_Identity && n->in[0]->kind == MG_V_INIT && n->in[0]->data && is_torch_name(n->out[0]->name)) {
      /* torch.onnx deduplicates parameters of equal value into Identity nodes
       * named after the parameter they stand for (convnext's layer_scale): that
       * name is a parameter of its own, sharing the data, so that a weights
       * binding and a trainable target keep torch's parameters apart */
      if (own_initializer(g, n->out[0], n->in[0])) {
        mg_free(dead);
        return -1;
      }
      dead[i] = 1;
      (*changed)++;
      continue;
    }
    replace_ctx r = {n->out[0], n->in[0]};
    mg_graph_walk(g, replace_in_graph, &r);
    dead[i] = 1;
    (*changed)++;
  }
  remove_marked(g, dead);
  mg_free(dead);
  return 0;
}

int pass_eliminate_identity(mg_model *m) {
  int changed = 0;
  ir_count_uses(m);
  int r = mg_graph_walk(m->graph, identity_graph, &changed);
  ir_count_uses(m);
  return r ? -1 : changed;
}

/* Live-ness: a node is live if any output is used by a live consumer or is a
 * graph output. Walking nodes backwards in topological order settles it in one
 * pass per graph; uses from subgraphs count through n_uses of live nodes. */
static int dce_graph(mg_graph *g, void *ctx) {
  int *changed = ctx;
  char *dead = mg_calloc((size_t)g->n_nodes + 1, 1);
  if (!dead) return -1;
  for (int i = g->n_nodes - 1; i >= 0; i--) {
    mg_node *n = g->nodes[i];
    int live = 0;
    for (int k = 0; k < n->n_out; k++)
      if (n->out[k] && n->out[k]->n_uses) live = 1;
    if (n->op == MG_OP_UNKNOWN) live = 1; /* unknown ops may have effects we cannot see */
    if (live) continue;
    dead[i] = 1;
    (*changed)++;
    for (int k = 0; k < n->n_in; k++)
      if (n->in[k]) n->in[k]->n_uses--;
  }
  remove_marked(g, dead);
  mg_free(dead);
  return 0;
}

int pass_dce(mg_model *m) {
  int changed = 0;
  ir_count_uses(m);
  int r = mg_graph_walk(m->graph, dce_graph, &changed);
  ir_count_uses(m);
  return r ? -1 : changed;
}

/* ---- auto_pad ---- */

/* n's attribute `name`, appended (the array has no spare room, so it is copied
 * into m's arena) when n has none; NULL when out of memory. */
static mg_attr *attr_slot(mg_model *m, mg_node *n, const char *name, mg_attr_kind kind) {
  for (int i = 0; i < n->n_attr; i++)
    if (!strcmp(n->attr[i].name, name)) return &n->attr[i];
  mg_attr *a = mg_arena_alloc(&m->arena, sizeof(mg_attr) * (size_t)(n->n_attr + 1));
  if (!a) return NULL;
  memcpy(a, n->attr, sizeof(mg_attr) * (size_t)n->n_attr);
  n->attr = a;
  mg_attr *r = &a[n->n_attr++];
  memset(r, 0, sizeof *r);
  r->name = name;
  r->kind = kind;
  return r;
}

/* The kernel of a convolution or pool n over sp spatial dims: kernel_shape, or
 * else the weight's spatial dims (QLinearConv's weight is input 3). 0, or -1 when
 * not statically known. */
static int window_kernel(const mg_node *n, int sp, int64_t *k) {
  const int64_t *ks;
  if (mg_attr_ints(n, "kernel_shape", &ks) == (size_t)sp) {
    memcpy(k, ks, sizeof(int64_t) * (size_t)sp);
    return 0;
  }
  int wi = n->op == MG_OP_QLinearConv ? 3 : 1;
  int is_pool = n->op == MG_OP_AveragePool || n->op == MG_OP_MaxPool || n->op == MG_OP_LpPool;
  const mg_value *w = !is_pool && n->n_in > wi ? n->in[wi] : NULL;
  if (!w || w->shape.rank != sp + 2) return -1;
  for (int i = 0; i < sp; i++)
    if ((k[i] = w->shape.d[i + 2].v) < 0) return -1;
  return 0;
}

/* Resolves n's auto_pad when its spatial input dims are static: 1 when rewritten,
 * 0 when left (auto_pad NOTSET or unknown, dims not static, a window the shared
 * geometry refuses: the stages then report it), -1 when out of memory. */
static int resolve_auto_pad(mg_model *m, mg_node *n) {
  int mode, transpose = n->op == MG_OP_ConvTranspose;
  if (mg_window_auto_pad(n, &mode) || mode == MG_PAD_NOTSET) return 0;
  const mg_value *x = n->n_in ? n->in[0] : NULL;
  int sp = x ? x->shape.rank - 2 : 0;
  int64_t in[MG_MAX_RANK], k[MG_MAX_RANK];
  if (sp < 1 || sp > MG_WIN_ND || window_kernel(n, sp, k)) return 0;
  for (int i = 0; i < sp; i++)
    if ((in[i] = x->shape.d[i + 2].v) < 0) return 0;
  /* the bounds of shape inference: any window a stage accepts is inside them */
  const mg_win_limits lim = {(int64_t)1 << 31, (int64_t)1 << 31};
  int ceil_mode = n->op == MG_OP_AveragePool || n->op == MG_OP_MaxPool || n->op == MG_OP_LpPool
                      ? (int)mg_attr_int(n, "ceil_mode", 0) : 0;
  mg_window g;
  mg_win_status st = transpose ? mg_window_transpose(n, sp, in, k, &lim, &g)
                               : mg_window_init(n, sp, in, k, ceil_mode, &lim, &g);
  if (st != MG_WIN_OK) return 0;
  int64_t *v = mg_arena_alloc(&m->arena, sizeof(int64_t) * (size_t)(2 * sp));
  if (!v || !attr_slot(m, n, "pads", MG_ATTR_INTS) || !attr_slot(m, n, "auto_pad", MG_ATTR_STRING))
    return -1;
  /* both exist now, so these find them where the array finally is */
  mg_attr *pads = attr_slot(m, n, "pads", MG_ATTR_INTS), *ap = attr_slot(m, n, "auto_pad", MG_ATTR_STRING);
  for (int i = 0; i < sp; i++) v[i] = g.pb[i], v[sp + i] = g.pe[i];
  pads->kind = MG_ATTR_INTS, pads->ints = v, pads->n = (size_t)(2 * sp);
  ap->kind = MG_ATTR_STRING, ap->s = "NOTSET";
  /* ConvTranspose: the explicit pads give output_shape's sizes (full - pads) */
  for (int i = 0; transpose && i < n->n_attr; i++)
    if (!strcmp(n->attr[i].name, "output_shape")) {
      memmove(&n->attr[i], &n->attr[i + 1], sizeof(mg_attr) * (size_t)(n->n_attr - i - 1));
      n->n_attr--;
      break;
    }
  return 1;
}

static int auto_pad_graph(mg_graph *g, void *ctx) {
  int *changed = ctx;
  for (int i = 0; i < g->n_nodes; i++) {
    mg_node *n = g->nodes[i];
    switch (n->op) {
    case MG_OP_Conv: case MG_OP_ConvTranspose: case MG_OP_ConvInteger: case MG_OP_QLinearConv:
    case MG_OP_AveragePool: case MG_OP_MaxPool: case MG_OP_LpPool: {
      int r = resolve_auto_pad(g->model, n);
      if (r < 0) return -1;
      *changed += r;
      break;
    }
    default: break;
    }
  }
  return 0;
}

int pass_resolve_auto_pad(mg_model *m) {
  int changed = 0;
  return mg_graph_walk(m->graph, auto_pad_graph, &changed) ? -1 : changed;
}

/* ---- verifier ---- */

typedef struct {
  mg_diags *d;
  int bad;
} verify_ctx;

static void broken(verify_ctx *v, const mg_node *n, const char *what) {
  mg_error(v->d, GRAPH, n ? n->name : NULL, n ? n->op_type : NULL, "IR invariant broken: %s", what);
  v->bad = 1;
}

static int visible(const mg_graph *g, const mg_value *x) {
  for (; g; g = g->parent)
    if (x->id >= 0 && x->id < g->n_values && g->values[x->id] == x) return 1;
  return 0;
}

static int verify_graph(mg_graph *g, void *ctx) {
  verify_ctx *v = ctx;
  for (int i = 0; i < g->n_nodes; i++) {
    mg_node *n = g->nodes[i];
    if (n->graph != g || n->id != i) broken(v, n, "node's graph or index is stale");
    const mg_op_info *info = mg_op_get(n->op);
    if (n->op != MG_OP_UNKNOWN &&
        (n->n_in < info->min_in || (info->max_in >= 0 && n->n_in > info->max_in)))
      broken(v, n, "input count outside ops.def's range");
    for (int k = 0; k < n->n_in; k++) {
      const mg_value *x = n->in[k];
      if (!x) continue;
      if (!visible(g, x)) broken(v, n, "reads a value outside its scope");
      else if (x->producer && x->producer->graph == g && x->producer->id >= i)
        broken(v, n, "reads a value produced later (not topological)");
      else if (x->kind == MG_V_NODE && !x->producer)
        broken(v, n, "reads a node value that has no producer");
    }
    for (int k = 0; k < n->n_out; k++)
      if (n->out[k] && (n->out[k]->producer != n || n->out[k]->producer_slot != k))
        broken(v, n, "output's producer does not point back");
  }
  for (int i = 0; i < g->n_outputs; i++)
    if (!visible(g, g->outputs[i])) broken(v, NULL, "graph output outside scope");
  return 0;
}

int ir_verify(mg_model *m, mg_diags *d) {
  verify_ctx v = {d, 0};
  mg_graph_walk(m->graph, verify_graph, &v);
  return v.bad ? -1 : 0;
}

#ifdef NDEBUG
#define VERIFY(m, d) 0
#else
#define VERIFY(m, d) ir_verify(m, d)
#endif

int mg_prepare(mg_model *m, const mg_shape_override *ov, int n_ov, mg_diags *d) {
  return mg_prepare_with(m, ov, n_ov, NULL, NULL, d);
}

int mg_prepare_with(mg_model *m, const mg_shape_override *ov, int n_ov,
                    int (*before_fold)(mg_model *m, void *ctx, mg_diags *d), void *ctx, mg_diags *d) {
  if (VERIFY(m, d)) return -1;
  /* Identity first: an Identity that aliases a weight must not be folded into a
   * copy of it, and weight binding follows the alias to the real initializer. */
  if (pass_eliminate_identity(m) < 0 || VERIFY(m, d)) goto fail;
  if (before_fold) {
    ir_count_uses(m);
    int rc = before_fold(m, ctx, d);
    if (rc) return rc;
  }
  if (ir_infer_shapes(m, ov, n_ov, d)) return -1;
  if (pass_resolve_auto_pad(m) < 0 || VERIFY(m, d)) goto fail;
  if (pass_fold_constants(m) < 0 || VERIFY(m, d)) goto fail;
  if (pass_dce(m) < 0 || VERIFY(m, d)) goto fail;
  return 0;
fail:
  if (!d->errors) mg_error(d, OOM, NULL, NULL, "out of memory in a graph pass");
  return -1;
}
