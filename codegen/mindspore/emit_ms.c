/* The MindSpore network script: net.py (class Net(nn.Cell)) and run.py. */
#include "mindspore.h"
#include "arena.h"
#include "lower.h"
#include "npy.h"
#include "emit_custom.h"
#include "text.h"
#include "writer.h"
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MS_INLINE_MAX = 4096 }; /* elements of a constant written into net.py */

/* One node of the Cell tree: a container (torch module with children) or a leaf
 * (the cell of one parameterised node). */
typedef struct ms_cell {
  const char *name;          /* child name: "layer1", "0", "conv1" */
  const char *decl;          /* a leaf's constructor call; NULL for a container */
  int param;                 /* the leaf is a Parameter, not a layer */
  struct ms_cell *kids, *next;
} ms_cell;

typedef struct {
  mg_model *m;
  const rule_set *rs;
  ms_param_tag_fn *tag;
  void *tag_ctx;
  mg_diags *d;
  mg_arena a;
  cg_buf init, body;
  const char **pyname;       /* by value id of the top graph */
  ms_cell root;
  ms_report *r;
  int failed;                /* out of memory */
  int uses_numpy;            /* a constant was written inline */
  const mg_value **consts;   /* constants too large for net.py: constants/K.npy, self.constK */
  int n_consts, cap_consts;
  ms_custom *custom;         /* the ops.Custom fallbacks (emit_custom.c) */
  unsigned char *absorbed;   /* by node id: part of an nn.LSTM emitted at another node */
  struct ms_lstm **lstm_at;  /* by node id: the nn.LSTM emitted at this node, or NULL */
} ms_ctx;

static char *dupf(ms_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *dupf(ms_ctx *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  cg_buf b = {0};
  cg_buf_vprintf(&b, fmt, ap);
  va_end(ap);
  char *s = b.failed ? NULL : mg_arena_strdup(&c->a, b.s ? b.s : "");
  cg_buf_free(&b);
  if (!s) c->failed = 1;
  return s;
}

static ms_cell *child(ms_ctx *c, ms_cell *p, const char *name, size_t len);
static const char *access_path(ms_ctx *c, const char *path);
static const char *np_dtype(mg_dtype t);

/* A Python float literal that reads back as the same double. */
static void py_float(cg_buf *b, double f) {
  char s[40];
  if (f != f) { cg_buf_printf(b, "float('nan')"); return; }
  if (f > 1e308 || f < -1e308) { cg_buf_printf(b, "float('%sinf')", f < 0 ? "-" : ""); return; }
  /* a float32 attribute (ONNX's 1e-5 is 9.99999974737875e-06 in double) is
   * written as the shortest text that reads back as the same float32 */
  int p = 17;
  if ((double)(float)f == f)
    for (p = 1; p < 17; p++) {
      snprintf(s, sizeof s, "%.*g", p, f);
      if ((float)strtod(s, NULL) == (float)f) break;
    }
  snprintf(s, sizeof s, "%.*g", p, f);
  cg_buf_printf(b, "%s%s", s, strpbrk(s, ".en") ? "" : ".0");
}

/* s as a Python string literal (text.h's escaper: quotes, backslashes, control
 * bytes and non-ASCII as escapes that read back as the same text), so that a node
 * name or an attribute can never end it early. */
static void py_string(cg_buf *b, const char *s) { cg_buf_py_literal(b, s); }

static const char *np_dtype(mg_dtype t) {
  switch (t) {
  case MG_F32: return "np.float32"; case MG_F64: return "np.float64"; case MG_F16: return "np.float16";
  case MG_I64: return "np.int64"; case MG_I32: return "np.int32"; case MG_I16: return "np.int16";
  case MG_I8: return "np.int8"; case MG_U8: return "np.uint8"; case MG_BOOL: return "np.bool_";
  default: return NULL;
  }
}

static const char *tensor_expr(ms_ctx *c, const mg_value *v, const char **why);

/* The expression of initializer v, parameter `tag` read through *view, by a node
 * that is not a layer: a Parameter at the tag's path of the Cell tree, in the
 * checkpoint's shape, made on first use, zeros until the checkpoint loads it.
 * Floating point ones train; integer ones (a torch buffer such as an index table)
 * do not. */
static const char *param_expr(ms_ctx *c, const mg_value *v, const char *tag, const ms_param_view *view,
                              const char **why) {
  const char *npt = np_dtype(v->dtype), *mst = map_ms_dtype_name(v->dtype);
  if (view->kind == MS_VIEW_RNN_GATES) {
    *why = view->gru ? "the export reorders this recurrent layer's gates (a GRU: no nn.GRU rule takes it)"
                     : "the export reorders this recurrent layer's gates, and this LSTM is not one nn.LSTM takes";
    return NULL;
  }
  if (!npt || !mst || !mg_shape_is_static(&v->shape) || (view->kind == MS_VIEW_TRANSPOSE && v->shape.rank != 2)) {
    *why = dupf(c, "parameter '%s' has a dtype or shape a Parameter cannot be made of", tag);
    return NULL;
  }
  ms_cell *at = &c->root;
  const char *last = tag;
  for (const char *q = tag; *q && at;) {
    size_t len = strcspn(q, ".");
    last = q;
    at = child(c, at, q, len);
    q += len + (q[len] == '.');
  }
  if (!at) return NULL;
  if (at->kids || (at->decl && !at->param)) {
    *why = dupf(c, "parameter '%s' has the path of a layer", tag);
    return NULL;
  }
  if (!at->decl) {
    cg_buf b = {0};
    cg_buf_printf(&b, "mindspore.Parameter(default_input=mindspore.Tensor(input_data=np.zeros((");
    for (int k = 0; k < view->rank; k++) cg_buf_printf(&b, "%lld, ", (long long)view->dims[k]);
    int trains = mg_dtype_is_float(v->dtype);
    cg_buf_printf(&b, "), dtype=%s), dtype=%s, shape=None, init=None, const_arg=False, device=None), name=", npt, mst);
    py_string(&b, last);
    cg_buf_printf(&b, ", requires_grad=%s, layerwise_parallel=False, parallel_optimizer=True, storage_format=\"\", "
                      "device=None)", trains ? "True" : "False");
    at->decl = b.failed ? NULL : mg_arena_strdup(&c->a, b.s);
    cg_buf_free(&b);
    if (!at->decl) { c->failed = 1; return NULL; }
    at->param = 1;
    c->uses_numpy = 1;
    c->r->n_params++;
  }
  const char *e = access_path(c, tag);
  if (!e) return NULL;
  switch (view->kind) {
  case MS_VIEW_RNN_GATES: break; /* refused above */
  case MS_VIEW_SAME: return e;
  case MS_VIEW_TRANSPOSE: return dupf(c, "mindspore.ops.transpose(%s, (1, 0))", e);
  case MS_VIEW_GATHER: {
    const char *idx = tensor_expr(c, view->index, why);
    /* the flat parameter gathered by the index tensor has the index's shape */
    return idx ? dupf(c, "mindspore.ops.gather(mindspore.ops.reshape(%s, (-1,)), %s, 0, 0)", e, idx) : NULL;
  }
  case MS_VIEW_RESHAPE: break;
  }
  cg_buf b = {0};
  cg_buf_printf(&b, "mindspore.ops.reshape(%s, (", e);
  for (int k = 0; k < v->shape.rank; k++) cg_buf_printf(&b, "%lld, ", (long long)v->shape.d[k].v);
  cg_buf_printf(&b, "))");
  const char *r = b.failed ? NULL : mg_arena_strdup(&c->a, b.s);
  cg_buf_free(&b);
  if (!r) c->failed = 1;
  return r;
}

/* The Python expression of a tensor value used by construct: a graph input or a
 * node's output by its name, a parameter by its attribute path, a small constant
 * inline. NULL (after recording why in *why) when it cannot be written. */
static const char *tensor_expr(ms_ctx *c, const mg_value *v, const char **why) {
  if (c->pyname && v->id >= 0 && v->id < c->m->graph->n_values && c->m->graph->values[v->id] == v &&
      c->pyname[v->id]) /* (no names: memory ran out, c->failed says so at the end) */
    return c->pyname[v->id];
  if (v->kind == MG_V_INIT) {
    const char *w = NULL;
    ms_param_view view;
    const char *tag = c->tag(c->tag_ctx, v, &view, &w);
    if (w) { *why = w; return NULL; }
    if (tag) return param_expr(c, v, tag, &view, why);
  }
  if (!v->data) {
    *why = "a value the script does not compute";
    return NULL;
  }
  int64_t n = mg_shape_numel(&v->shape);
  const char *npt = np_dtype(v->dtype);
  if (!npt || n < 0 || !mg_shape_is_static(&v->shape)) {
    *why = !npt ? "a constant of a dtype net.py does not write" : "a constant of unknown shape";
    return NULL;
  }
  if (n > MS_INLINE_MAX) { /* a file beside net.py, read once in __init__ */
    int k = 0;
    while (k < c->n_consts && c->consts[k] != v) k++;
    if (k == c->n_consts) {
      if (c->n_consts == c->cap_consts) {
        int cap = c->cap_consts ? 2 * c->cap_consts : 16;
        const mg_value **p = mg_arena_alloc(&c->a, sizeof *p * (size_t)cap);
        if (!p) { c->failed = 1, *why = "out of memory"; return NULL; }
        if (c->n_consts) memcpy(p, c->consts, sizeof *p * (size_t)c->n_consts);
        c->consts = p, c->cap_consts = cap;
      }
      c->consts[c->n_consts++] = v;
    }
    return dupf(c, "self.const%d", k);
  }
  cg_buf b = {0};
  c->uses_numpy = 1;
  cg_buf_printf(&b, "mindspore.Tensor(np.array([");
  size_t es = mg_dtype_size(v->dtype);
  for (int64_t i = 0; i < n; i++) {
    const unsigned char *p = (const unsigned char *)v->data + (size_t)i * es;
    if (i) cg_buf_printf(&b, ", ");
    switch (v->dtype) {
    case MG_F32: { float f; memcpy(&f, p, 4); py_float(&b, f); break; }
    case MG_F64: { double f; memcpy(&f, p, 8); py_float(&b, f); break; }
    case MG_F16: { uint16_t h; memcpy(&h, p, 2); py_float(&b, mg_f16_to_f32(h)); break; }
    case MG_I64: { int64_t x; memcpy(&x, p, 8); cg_buf_printf(&b, "%lld", (long long)x); break; }
    case MG_I32: { int32_t x; memcpy(&x, p, 4); cg_buf_printf(&b, "%d", x); break; }
    case MG_I16: { int16_t x; memcpy(&x, p, 2); cg_buf_printf(&b, "%d", x); break; }
    case MG_I8: { int8_t x; memcpy(&x, p, 1); cg_buf_printf(&b, "%d", x); break; }
    case MG_U8: cg_buf_printf(&b, "%u", *p); break;
    case MG_BOOL: cg_buf_printf(&b, "%s", *p ? "True" : "False"); break;
    default: break;
    }
  }
  cg_buf_printf(&b, "], dtype=%s).reshape((", npt);
  for (int k = 0; k < v->shape.rank; k++) cg_buf_printf(&b, "%lld,", (long long)v->shape.d[k].v);
  cg_buf_printf(&b, ")))");
  const char *s = b.failed ? NULL : mg_arena_strdup(&c->a, b.s);
  cg_buf_free(&b);
  if (!s) c->failed = 1, *why = "out of memory";
  return s;
}

/* The Python text of one evaluated argument; NULL with *why when it cannot be. */
static const char *value_expr(ms_ctx *c, const mg_node *n, const map_value *v, const char **why) {
  cg_buf b = {0};
  const char *s = NULL;
  switch (v->kind) {
  case MV_NONE: return "None";
  case MV_BOOL: return v->b ? "True" : "False";
  case MV_INT: return dupf(c, "%lld", (long long)v->i);
  case MV_FLOAT: py_float(&b, v->f); break;
  case MV_INTS:
    cg_buf_printf(&b, "(");
    for (int i = 0; i < v->n; i++) cg_buf_printf(&b, "%lld%s", (long long)v->ints[i], v->n == 1 || i + 1 < v->n ? ", " : "");
    cg_buf_printf(&b, ")");
    break;
  case MV_FLOATS:
    cg_buf_printf(&b, "(");
    for (int i = 0; i < v->n; i++) py_float(&b, v->floats[i]), cg_buf_printf(&b, "%s", v->n == 1 || i + 1 < v->n ? ", " : "");
    cg_buf_printf(&b, ")");
    break;
  case MV_STRING:
    py_string(&b, v->s);
    break;
  case MV_DTYPE:
    if (!v->s) { *why = "a dtype with no MindSpore spelling"; return NULL; }
    return v->s;
  case MV_TENSOR: {
    const mg_value *t = v->ref.v;
    if (!t || v->ref.role == MAP_REF_OUTPUT || v->ref.view_rank >= 0) {
      *why = "a tensor argument net.py cannot pass";
      return NULL;
    }
    return tensor_expr(c, t, why);
  }
  case MV_TENSORS:
    cg_buf_printf(&b, "[");
    for (int i = 0; i < v->n; i++) {
      const char *e = v->refs[i].v ? tensor_expr(c, v->refs[i].v, why) : NULL;
      if (!e) { cg_buf_free(&b); if (!v->refs[i].v) *why = "a missing input"; return NULL; }
      cg_buf_printf(&b, "%s%s", i ? ", " : "", e);
    }
    cg_buf_printf(&b, "]");
    break;
  default:
    (void)n;
    *why = "a weight layout transform (net.py takes the checkpoint's layout as it is)";
    return NULL;
  }
  s = b.failed ? NULL : mg_arena_strdup(&c->a, b.s ? b.s : "");
  cg_buf_free(&b);
  if (!s) c->failed = 1, *why = "out of memory";
  return s;
}

/* The child `name` of cell p, made when missing (children keep their order). */
static ms_cell *child(ms_ctx *c, ms_cell *p, const char *name, size_t len) {
  ms_cell **at = &p->kids;
  for (; *at; at = &(*at)->next)
    if (strlen((*at)->name) == len && !strncmp((*at)->name, name, len)) return *at;
  ms_cell *k = mg_arena_alloc(&c->a, sizeof *k);
  char *nm = k ? mg_arena_alloc(&c->a, len + 1) : NULL;
  if (!nm) { c->failed = 1; return NULL; }
  memset(k, 0, sizeof *k);
  memcpy(nm, name, len), nm[len] = 0;
  k->name = nm;
  *at = k;
  return k;
}

static int is_number(const char *s) {
  if (!*s) return 0;
  for (; *s; s++)
    if (*s < '0' || *s > '9') return 0;
  return 1;
}

/* Whether k has children and all of them are numbered: an nn.CellList. */
static int all_numeric(const ms_cell *k) {
  int n = k->kids != NULL;
  for (const ms_cell *x = k->kids; x; x = x->next) n &= is_number(x->name);
  return n;
}

/* The construct-side access path of module path (dots): attribute names, [k] where
 * a child is numeric and its parent an nn.CellList, getattr(parent, "k") for a
 * numbered child of any other cell (the root of a torch Sequential; such children
 * are added with insert_child_to_cell, since "self.0" is not Python, and their
 * parameter names prefixed with update_parameters_name, as attribute assignment
 * does). */
static const char *access_path(ms_ctx *c, const char *path) {
  const ms_cell *cur = &c->root;
  const char *s = "self";
  for (const char *p = path; *p && s;) {
    size_t len = strcspn(p, ".");
    char part[256];
    snprintf(part, sizeof part, "%.*s", (int)(len < 255 ? len : 255), p);
    if (!is_number(part)) s = dupf(c, "%s.%s", s, part);
    else if (cur && cur != &c->root && all_numeric(cur)) s = dupf(c, "%s[%s]", s, part);
    else s = dupf(c, "getattr(%s, \"%s\")", s, part);
    const ms_cell *next = NULL;
    for (const ms_cell *x = cur ? cur->kids : NULL; x && !next; x = x->next)
      if (!strcmp(x->name, part)) next = x;
    cur = next;
    p += len + (p[len] == '.');
  }
  if (!s) c->failed = 1;
  return s;
}

/* A Python identifier for module path s (for the builders of containers). */
static const char *local_name(ms_ctx *c, const char *path) {
  char id[512];
  cg_ident(path, id, sizeof id);
  return dupf(c, "_%s", id);
}

/* A node the script cannot express: an ops.Custom AOT kernel when it can be one
 * (emit_custom.h), else an unsupported diagnostic and a raise in its place. */
static void unsupported(ms_ctx *c, const mg_node *n, const char *why) {
  const ms_custom_graph g = {c->m, c->pyname, c->tag, c->tag_ctx};
  const char *refusal = NULL;
  int k = c->custom ? ms_custom_node(c->custom, &g, n, why, &c->init, &c->body, &refusal) : -1;
  if (k == 1) {
    c->r->n_custom++;
    return;
  }
  if (refusal) why = dupf(c, "%s; no ops.Custom either: %s", why, refusal);
  if (!why) return;
  mg_diag_add(c->d, MG_SEV_ERROR, MG_D_UNSUPPORTED, n->name, n->op_type, "mindspore: %s", why);
  cg_buf msg = {0};
  cg_buf_printf(&msg, "node '%s' (%s): %s", n->name, n->op_type, why);
  cg_buf_printf(&c->body, "        raise NotImplementedError(");
  py_string(&c->body, msg.s ? msg.s : "");
  cg_buf_printf(&c->body, ")\n");
  c->failed |= msg.failed;
  cg_buf_free(&msg);
  c->r->n_unsupported++;
}

/* The leaf cell path of a cell-kind node: the module its parameter tags share
 * (conv1.weight, conv1.bias -> conv1); for a layer with none, a name made from
 * the node's. NULL with *why when the tags disagree or cannot be held. */
static const char *cell_path(ms_ctx *c, const mg_node *n, const char **why) {
  const char *path = NULL;
  size_t plen = 0;
  for (int i = 0; i < n->n_in; i++) {
    const mg_value *v = n->in[i];
    if (!v || v->kind != MG_V_INIT) continue;
    const char *w = NULL;
    ms_param_view view;
    const char *t = c->tag(c->tag_ctx, v, &view, &w);
    if (w) { *why = w; return NULL; }
    if (!t) continue;
    if (view.kind == MS_VIEW_TRANSPOSE) {
      *why = dupf(c, "parameter '%s' is stored transposed by the export, and this layer takes torch's layout", t);
      return NULL;
    }
    if (view.kind != MS_VIEW_SAME && !view.layer_layout) {
      *why = dupf(c, "the export computed this initializer from parameter '%s', and this layer takes the parameter", t);
      return NULL;
    }
    const char *dot = strrchr(t, '.');
    if (!dot) {
      *why = dupf(c, "parameter '%s' has no torch module path (an export's anonymous name): give --weights "
                     "MODEL.pth", t);
      return NULL;
    }
    size_t len = (size_t)(dot - t);
    if (path && (len != plen || strncmp(path, t, len))) {
      *why = "parameters of more than one module";
      return NULL;
    }
    path = t, plen = len;
    c->r->n_params++;
  }
  if (!path) { /* a layer without parameters: any name keeps the checkpoint's */
    char id[256];
    cg_ident(n->name, id, sizeof id);
    return dupf(c, "op%s", id);
  }
  return dupf(c, "%.*s", (int)plen, path);
}

/* Whether node n reads a parameter of the checkpoint (or an initializer the script
 * cannot hold): such a node is never folded, so that it trains. */
static int reads_param(ms_ctx *c, const mg_node *n) {
  for (int i = 0; i < n->n_in; i++) {
    const mg_value *v = n->in[i];
    if (!v || v->kind != MG_V_INIT) continue;
    const char *why = NULL;
    ms_param_view view;
    if (c->tag(c->tag_ctx, v, &view, &why) || why) return 1;
  }
  return 0;
}

/* Whether every output of n is known at conversion time: it needs no statement. */
static int is_folded(const mg_node *n) {
  int any = 0;
  for (int k = 0; k < n->n_out; k++) {
    if (!n->out[k]) continue;
    if (!n->out[k]->data) return 0;
    any = 1;
  }
  return any;
}

/* ---- torch LSTM layers as one nn.LSTM ----
 * torch.onnx writes an nn.LSTM of L layers as L ONNX LSTM nodes, each followed by a
 * Squeeze of its num_directions axis, whose W/R/B are the torch parameters with
 * their gates reordered (i, f, g, o) -> (i, o, f, c) by Slice + Concat (+ Unsqueeze)
 * nodes: kept as nodes, since the MindSpore copy is prepared with keep_param_paths.
 * nn.LSTM keeps torch's gate order and names (weight_ih_l<k>...), so the chain is one
 * nn.LSTM(num_layers=L) cell at the torch module path, the checkpoint holding torch's
 * tensors as they are; the nodes that reorder and the later layers are absorbed. */
enum { MS_LSTM_MAX_LAYERS = 16, MS_LSTM_MAX_NODES = 64 };
typedef struct ms_lstm {
  const mg_node *layer[MS_LSTM_MAX_LAYERS];
  int n_layers;
  const mg_value *y;        /* the last layer's squeezed output: what nn.LSTM returns */
  const char *path;         /* the torch module */
} ms_lstm;

/* The int64 constant v's single element into *x; 0, or -1 when it is not one. */
static int const_i64(const mg_value *v, int64_t *x) {
  if (!v || !v->data || v->dtype != MG_I64 || mg_shape_numel(&v->shape) != 1) return -1;
  memcpy(x, v->data, sizeof *x);
  return 0;
}

/* Whether node sl takes rows [*st, *en) of an initializer along axis 0: a Slice of
 * constant bounds and step 1, or the Gather of a constant contiguous index range the
 * rules lower such a Slice into. */
static int row_range(const mg_node *sl, int64_t *st, int64_t *en) {
  if (!sl || !sl->in[0] || sl->in[0]->kind != MG_V_INIT) return 0;
  if (sl->op == MG_OP_Slice) {
    int64_t ax = 0, step = 1;
    return !const_i64(sl->in[1], st) && !const_i64(sl->in[2], en) && !(sl->n_in > 3 && sl->in[3] && const_i64(sl->in[3], &ax)) &&
           !(sl->n_in > 4 && sl->in[4] && const_i64(sl->in[4], &step)) && ax == 0 && step == 1;
  }
  const mg_value *ix = sl->n_in > 1 ? sl->in[1] : NULL;
  if (sl->op != MG_OP_Gather || mg_attr_int(sl, "axis", 0) != 0 || !ix || !ix->data || ix->dtype != MG_I64 ||
      ix->shape.rank != 1 || mg_shape_numel(&ix->shape) < 1)
    return 0;
  int64_t n = mg_shape_numel(&ix->shape), a, b;
  memcpy(&a, ix->data, sizeof a);
  for (int64_t i = 1; i < n; i++) {
    memcpy(&b, (const char *)ix->data + (size_t)i * sizeof b, sizeof b);
    if (b != a + i) return 0;
  }
  *st = a, *en = a + n;
  return 1;
}

/* Whether v is Concat(axis 0) of the rows [0, H), [3H, 4H), [H, 3H) of one
 * initializer: torch's gates in ONNX's order. The initializer into *p, the nodes
 * into nodes[*n]. */
static int gate_reorder(const mg_value *v, int64_t H, const mg_value **p, const mg_node **nodes, int *n) {
  const mg_node *cat = v ? v->producer : NULL;
  static const int64_t want[3][2] = {{0, 1}, {3, 4}, {1, 3}};
  if (!cat || cat->op != MG_OP_Concat || cat->n_in != 3 || mg_attr_int(cat, "axis", -1) != 0 || v->n_uses != 1)
    return 0;
  *p = NULL;
  for (int k = 0; k < 3; k++) {
    const mg_value *sv = cat->in[k];
    const mg_node *sl = sv ? sv->producer : NULL;
    int64_t st, en;
    if (!sl || sv->n_uses != 1 || !row_range(sl, &st, &en) || st != want[k][0] * H || en != want[k][1] * H ||
        (*p && *p != sl->in[0]) || *n + 2 > MS_LSTM_MAX_NODES)
      return 0;
    *p = sl->in[0];
    nodes[(*n)++] = sl;
  }
  nodes[(*n)++] = cat;
  return 1;
}

/* The torch parameters behind LSTM input k (1 W, 2 R, 3 B) of a layer: the initializer
 * itself in a default export (its gates reordered when it was folded), else an Unsqueeze
 * (or Reshape) of one gate reordering (two, concatenated, for B). ps[0..1]. */
static int lstm_params(ms_ctx *c, const mg_node *l, int k, int64_t H, const mg_value **ps, const mg_node **nodes,
                       int *n) {
  const mg_value *v = k < l->n_in ? l->in[k] : NULL;
  const mg_node *u = v ? v->producer : NULL;
  if (v && v->kind == MG_V_INIT) { /* a default export: the reordering folded into the initializer */
    const char *why = NULL;
    ms_param_view view;
    if (!c->tag(c->tag_ctx, v, &view, &why) || view.kind != MS_VIEW_RNN_GATES || view.gru || (k == 3 && !view.tag2))
      return 0;
    ps[0] = v;
    if (k == 3) ps[1] = v;
    return 1;
  }
  if (!u || (u->op != MG_OP_Unsqueeze && u->op != MG_OP_Reshape) || v->n_uses != 1 || !u->in[0]) return 0;
  if (*n + 1 > MS_LSTM_MAX_NODES) return 0;
  nodes[(*n)++] = u;
  if (k < 3) return gate_reorder(u->in[0], H, &ps[0], nodes, n);
  const mg_node *cat = u->in[0]->producer;
  if (!cat || cat->op != MG_OP_Concat || cat->n_in != 2 || mg_attr_int(cat, "axis", -1) != 0 || u->in[0]->n_uses != 1 ||
      !gate_reorder(cat->in[0], H, &ps[0], nodes, n) || !gate_reorder(cat->in[1], H, &ps[1], nodes, n) ||
      *n + 1 > MS_LSTM_MAX_NODES)
    return 0;
  nodes[(*n)++] = cat;
  return 1;
}

/* Whether v is absent or a constant of zeros (the export's zero initial states). */
static int zeros_or_absent(const mg_value *v) {
  if (!v) return 1;
  if (!v->data) return 0;
  int64_t n = mg_shape_numel(&v->shape);
  size_t es = mg_dtype_size(v->dtype);
  for (int64_t i = 0; i < n; i++)
    if (mg_load_f64(v->dtype, (const char *)v->data + (size_t)i * es) != 0) return 0;
  return 1;
}

/* The only reader of v that is not folded, or NULL (none, or more than one). */
static const mg_node *sole_reader(const mg_graph *g, const mg_value *v) {
  const mg_node *r = NULL;
  for (int i = 0; i < g->n_nodes; i++) {
    const mg_node *x = g->nodes[i];
    int reads = 0;
    for (int k = 0; k < x->n_in; k++) reads |= x->in[k] == v;
    if (!reads || is_folded(x)) continue;
    if (r) return NULL;
    r = x;
  }
  for (int i = 0; i < g->n_outputs; i++)
    if (g->outputs[i] == v) return NULL;
  return r;
}

/* Layer k's checkpoint tags must be <path>.weight_ih_l<k> and so on; *path is set
 * from the first layer's. */
static int lstm_tags_match(ms_ctx *c, const mg_value *const ps[4], int k, const char **path) {
  static const char *leaf[4] = {"weight_ih", "weight_hh", "bias_ih", "bias_hh"};
  for (int j = 0; j < 4; j++) {
    const char *why = NULL;
    ms_param_view view;
    const char *t = ps[j] ? c->tag(c->tag_ctx, ps[j], &view, &why) : NULL;
    if (t && j == 3 && view.kind == MS_VIEW_RNN_GATES) t = view.tag2; /* B is both biases */
    const char *dot = t ? strrchr(t, '.') : NULL;
    char want[64];
    snprintf(want, sizeof want, "%s_l%d", leaf[j], k);
    if (!t || (view.kind != MS_VIEW_SAME && view.kind != MS_VIEW_RNN_GATES) || !dot || strcmp(dot + 1, want)) return 0;
    if (!*path) *path = dupf(c, "%.*s", (int)(dot - t), t);
    else if (strlen(*path) != (size_t)(dot - t) || strncmp(*path, t, (size_t)(dot - t))) return 0;
  }
  return 1;
}

/* Whether LSTM node x is layer k of the chain: one forward layer of hidden size H
 * without sequence lengths, peepholes, initial states other than zeros or used Y_h
 * and Y_c, whose W/R/B reorder the torch parameters <path>.*_l<k>. Its reordering
 * nodes into nodes[*n]. */
static int lstm_layer(ms_ctx *c, const mg_node *x, int k, int64_t H, const char **path, const mg_node **nodes, int *n) {
  const mg_value *ps[4] = {0};
  int ok = x->op == MG_OP_LSTM && k < MS_LSTM_MAX_LAYERS && H > 0 && mg_attr_int(x, "hidden_size", -1) == H &&
           !strcmp(mg_attr_str(x, "direction", "forward"), "forward") && mg_attr_int(x, "layout", 0) == 0 &&
           (x->n_in <= 4 || !x->in[4]) && (x->n_in <= 7 || !x->in[7]) && (x->n_in <= 5 || zeros_or_absent(x->in[5])) &&
           (x->n_in <= 6 || zeros_or_absent(x->in[6])) && x->n_out >= 1 && x->out[0] &&
           (x->n_out < 2 || !x->out[1] || !x->out[1]->n_uses) && (x->n_out < 3 || !x->out[2] || !x->out[2]->n_uses);
  return ok && lstm_params(c, x, 1, H, &ps[0], nodes, n) && lstm_params(c, x, 2, H, &ps[1], nodes, n) &&
         lstm_params(c, x, 3, H, &ps[2], nodes, n) && lstm_tags_match(c, ps, k, path);
}

/* The Squeeze of axis 1 (or the Reshape that drops it) that is the only reader of
 * LSTM x's Y, or NULL. */
static const mg_node *lstm_squeeze(const mg_graph *g, const mg_node *x) {
  const mg_node *sq = sole_reader(g, x->out[0]);
  int64_t axis;
  if (!sq || !sq->out[0]) return NULL;
  if (sq->op == MG_OP_Squeeze)
    return sq->n_in == 2 && !const_i64(sq->in[1], &axis) && axis == 1 ? sq : NULL;
  /* preparation may have made the Squeeze a Reshape: [T, 1, N, H] to [T, N, H] */
  const mg_shape *a = &x->out[0]->shape, *b = &sq->out[0]->shape;
  if (sq->op != MG_OP_Reshape || a->rank != 4 || b->rank != 3 || a->d[1].v != 1) return NULL;
  for (int i = 0; i < 3; i++)
    if (b->d[i].v < 0 || b->d[i].v != a->d[i ? i + 1 : 0].v) return NULL;
  return sq;
}

/* Finds the LSTM chains of the graph (see above) and marks what they absorb. */
static void find_lstms(ms_ctx *c) {
  mg_graph *g = c->m->graph;
  c->absorbed = mg_arena_alloc(&c->a, (size_t)g->n_nodes + 1);
  c->lstm_at = mg_arena_alloc(&c->a, sizeof *c->lstm_at * ((size_t)g->n_nodes + 1));
  if (!c->absorbed || !c->lstm_at) { c->failed = 1; return; }
  memset(c->absorbed, 0, (size_t)g->n_nodes + 1);
  memset(c->lstm_at, 0, sizeof *c->lstm_at * ((size_t)g->n_nodes + 1));
  for (int i = 0; i < g->n_nodes; i++) {
    const mg_node *l = g->nodes[i];
    if (l->op != MG_OP_LSTM || c->absorbed[l->id]) continue;
    ms_lstm ch = {0};
    const mg_node *own[MS_LSTM_MAX_LAYERS][MS_LSTM_MAX_NODES], *sqs[MS_LSTM_MAX_LAYERS];
    int n_own[MS_LSTM_MAX_LAYERS] = {0};
    int64_t H = mg_attr_int(l, "hidden_size", -1);
    for (const mg_node *x = l; x && ch.n_layers < MS_LSTM_MAX_LAYERS;) {
      int k = ch.n_layers;
      const char *path = ch.path;
      const mg_node *sq = NULL;
      if (!lstm_layer(c, x, k, H, &path, own[k], &n_own[k]) || !(sq = lstm_squeeze(g, x))) break;
      ch.path = path;
      ch.layer[ch.n_layers++] = x;
      sqs[k] = sq;
      ch.y = sq->out[0];
      const mg_node *next = sole_reader(g, sq->out[0]);
      x = next && next->op == MG_OP_LSTM && next->in[0] == sq->out[0] ? next : NULL;
    }
    if (!ch.n_layers) continue;
    ms_lstm *keep = mg_arena_alloc(&c->a, sizeof *keep);
    if (!keep) { c->failed = 1; return; }
    *keep = ch;
    for (int k = 0; k < ch.n_layers; k++) {
      for (int j = 0; j < n_own[k]; j++) c->absorbed[own[k][j]->id] = 1;
      c->absorbed[sqs[k]->id] = 1;
      if (k) c->absorbed[ch.layer[k]->id] = 1;
    }
    c->lstm_at[l->id] = keep;
  }
}

/* The nn.LSTM of chain ch, emitted at its first layer: the cell at the torch module
 * path with the rule's constructor arguments (the weight arguments are the cell's
 * parameters, the checkpoint's tensors) and num_layers, one call in construct. */
static void emit_lstm(ms_ctx *c, const mg_node *n, const ms_lstm *ch) {
  map_plan *p = map_node_plan(n, c->rs, &c->a);
  const char *why = NULL;
  if (!p) { c->failed = 1; return; }
  cg_buf_printf(&c->body, "        # %s (%s)", n->name, n->op_type);
  for (int k = 1; k < ch->n_layers; k++) cg_buf_printf(&c->body, ", %s", ch->layer[k]->name);
  cg_buf_printf(&c->body, ": torch's %d-layer LSTM '%s' as one nn.LSTM\n", ch->n_layers, ch->path);
  if (p->status != MAP_SUPPORTED || !p->rule || !rule_call(p->rule)) {
    unsupported(c, n, p->detail ? p->detail : "no MindSpore rule");
    return;
  }
  cg_buf args = {0};
  for (int i = 0; i < p->n_args && !why; i++) {
    const map_arg *a = &p->args[i];
    if (a->value.kind == MV_TRANSFORM) continue; /* a parameter of the cell, not an argument */
    const char *e = !strcmp(a->name, "num_layers") ? dupf(c, "%d", ch->n_layers) : value_expr(c, n, &a->value, &why);
    if (!e) why = dupf(c, "argument '%s' (%s): %s", a->name, a->expr, why ? why : "out of memory");
    else cg_buf_printf(&args, "%s%s=%s", args.len ? ", " : "", a->name, e);
  }
  const char *x = why ? NULL : tensor_expr(c, n->in[0], &why);
  ms_cell *at = &c->root;
  for (const char *q = ch->path; !why && *q && at;) {
    size_t len = strcspn(q, ".");
    at = child(c, at, q, len);
    q += len + (q[len] == '.');
  }
  if (!why && at && (at->decl || at->kids)) why = "two layers at one module path";
  if (why) {
    cg_buf_free(&args);
    unsupported(c, n, why);
    return;
  }
  if (at) at->decl = dupf(c, "%s(%s)", rule_call(p->rule), args.s ? args.s : "");
  cg_buf_free(&args);
  cg_buf_printf(&c->body, "        %s, _ = %s(%s)\n", c->pyname[ch->y->id] ? c->pyname[ch->y->id] : "_",
                access_path(c, ch->path), x);
  c->r->n_cells++;
  c->r->n_params += 4 * ch->n_layers;
  c->r->n_nodes++;
}

/* One node: its statement in construct, and for a cell its leaf in the tree. */
static void emit_node(ms_ctx *c, const mg_node *n) {
  if (c->lstm_at && c->lstm_at[n->id]) {
    emit_lstm(c, n, c->lstm_at[n->id]);
    return;
  }
  if (c->absorbed && c->absorbed[n->id]) {
    cg_buf_printf(&c->body, "        # %s (%s): part of an nn.LSTM above\n", n->name, n->op_type);
    c->r->n_nodes++;
    return;
  }
  if (is_folded(n)) {
    c->r->n_folded++;
    return;
  }
  map_plan *p = map_node_plan(n, c->rs, &c->a);
  const char *why = NULL;
  if (!p) { c->failed = 1; return; }
  cg_buf_printf(&c->body, "        # %s (%s)\n", n->name, n->op_type);
  if (p->status != MAP_SUPPORTED || !p->rule || !rule_call(p->rule)) {
    unsupported(c, n, p->detail ? p->detail : "no MindSpore rule");
    return;
  }
  int is_cell = rule_kind(p->rule) && !strcmp(rule_kind(p->rule), "cell");
  cg_buf args = {0};
  int first = 1, star = -1;
  /* Python binds *args before keywords: the arguments before a *args one are
   * passed by position (ops.einsum(equation, *operands)) */
  for (int i = 0; i < p->n_args && star < 0; i++)
    if (p->args[i].name[0] == '*') star = i;
  for (int i = 0; i < p->n_args; i++) {
    const map_arg *a = &p->args[i];
    const char *e = value_expr(c, n, &a->value, &why);
    if (!e) {
      why = dupf(c, "argument '%s' (%s): %s", a->name, a->expr, why);
      break;
    }
    if (a->name[0] == '*') cg_buf_printf(&args, "%s*%s", first ? "" : ", ", e);
    else if (i < star) cg_buf_printf(&args, "%s%s", first ? "" : ", ", e);
    else cg_buf_printf(&args, "%s%s=%s", first ? "" : ", ", a->name, e);
    first = 0;
  }
  const char *path = !why && is_cell ? cell_path(c, n, &why) : NULL;
  if (why) {
    cg_buf_free(&args);
    unsupported(c, n, why);
    return;
  }
  cg_buf lhs = {0};
  /* outputs no one reads after the last one read are not bound: Dropout's mask,
   * which nn.Dropout does not return */
  int n_bound = n->n_out;
  while (n_bound > 1 && (!n->out[n_bound - 1] || !n->out[n_bound - 1]->n_uses)) n_bound--;
  for (int k = 0; k < n_bound; k++)
    cg_buf_printf(&lhs, "%s%s", k ? ", " : "", n->out[k] && c->pyname[n->out[k]->id] ? c->pyname[n->out[k]->id] : "_");
  /* memory ran out (a cell path with no reason is one too): c->failed makes it the
   * script's OOM error */
  if (lhs.failed || args.failed || (is_cell && !path)) {
    c->failed = 1;
    cg_buf_free(&lhs);
    cg_buf_free(&args);
    return;
  }
  if (is_cell) {
    ms_cell *at = &c->root;
    for (const char *q = path; *q && at;) {
      size_t len = strcspn(q, ".");
      at = child(c, at, q, len);
      q += len + (q[len] == '.');
    }
    if (at && (at->decl || at->kids)) why = "two layers at one module path";
    else if (at) at->decl = dupf(c, "%s(%s)", rule_call(p->rule), args.s ? args.s : "");
    const char *x = n->in[0] ? tensor_expr(c, n->in[0], &why) : NULL;
    if (!why && x)
      cg_buf_printf(&c->body, "        %s = %s(%s)\n", lhs.s, access_path(c, path), x);
    c->r->n_cells++;
  } else {
    cg_buf_printf(&c->body, "        %s = %s(%s)\n", lhs.s, rule_call(p->rule), args.s ? args.s : "");
  }
  cg_buf_free(&args);
  cg_buf_free(&lhs);
  if (why) unsupported(c, n, why);
  else c->r->n_nodes++;
}

/* Builds cell k (path prefix) bottom-up into c->init as local _name and returns
 * the expression that stands for it. */
/* e, the expression build_cell gave cell k at path, as a name: a layer's
 * constructor call is assigned to a local first, since insert_child_to_cell and
 * update_parameters_name must see the same instance. */
static const char *held_cell(ms_ctx *c, const ms_cell *k, const char *path, const char *e) {
  if (!k->decl || !e) return e;
  const char *me = local_name(c, path);
  cg_buf_printf(&c->init, "        %s = %s\n", me, e);
  return me;
}

static const char *build_cell(ms_ctx *c, const ms_cell *k, const char *path) {
  if (k->decl) return k->decl;
  int numeric = all_numeric(k);
  const char *me = local_name(c, path);
  if (numeric) {
    /* an nn.CellList: children 0..max, gaps filled by cells with no parameter */
    int max = -1;
    for (const ms_cell *x = k->kids; x; x = x->next) max = atoi(x->name) > max ? atoi(x->name) : max;
    const char **items = mg_arena_alloc(&c->a, sizeof(char *) * (size_t)(max + 1));
    if (!items) { c->failed = 1; return "None"; }
    for (int i = 0; i <= max; i++) items[i] = "nn.Cell(auto_prefix=True, flags=None)";
    for (const ms_cell *x = k->kids; x; x = x->next)
      items[atoi(x->name)] = build_cell(c, x, dupf(c, "%s.%s", path, x->name));
    cg_buf_printf(&c->init, "        %s = nn.CellList([", me);
    for (int i = 0; i <= max; i++) cg_buf_printf(&c->init, "%s%s", i ? ", " : "", items[i]);
    cg_buf_printf(&c->init, "], auto_prefix=True)\n");
  } else {
    cg_buf_printf(&c->init, "        %s = nn.Cell(auto_prefix=True, flags=None)\n", me);
    for (const ms_cell *x = k->kids; x; x = x->next) {
      const char *e = build_cell(c, x, dupf(c, "%s.%s", path, x->name));
      if (is_number(x->name) && !x->param) /* a numbered child among named ones */
        e = held_cell(c, x, dupf(c, "%s.%s", path, x->name), e), cg_buf_printf(&c->init,
                      "        %s.insert_child_to_cell(\"%s\", %s)\n        %s.update_parameters_name(prefix=\"%s.\", "
                      "recurse=True)\n", me, x->name, e, e, x->name);
      else cg_buf_printf(&c->init, "        %s.%s = %s\n", me, x->name, e);
    }
  }
  return me;
}

static void python_names(ms_ctx *c) {
  mg_graph *g = c->m->graph;
  c->pyname = mg_arena_alloc(&c->a, sizeof(char *) * (size_t)(g->n_values + 1));
  if (!c->pyname) { c->failed = 1; return; }
  memset(c->pyname, 0, sizeof(char *) * (size_t)(g->n_values + 1));
  for (int i = 0; i < g->n_values; i++) {
    const mg_value *v = g->values[i];
    if (v->data && v->kind != MG_V_INPUT) continue; /* constants: inline or parameters */
    char id[256];
    cg_ident(v->name, id, sizeof id);
    c->pyname[i] = dupf(c, "v%d_%s", i, id);
  }
}

/* run.py, in two parts around its PRECISION line (run_py_text). */
static const char RUN_PY_HEAD[] =
    "\"\"\"Runs net.py on .npy inputs: python run.py --ckpt ../model.ckpt --input NAME=x.npy ...\n"
    "--output-dir D [--device CPU|GPU|Ascend] [--mode graph|pynative] [--amp O0|O1|O2|O3].\n"
    "Written by migc.\"\"\"\n"
    "import argparse\nimport os\nimport sys\n\nimport numpy as np\nimport mindspore\n\n"
    "sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))\n"
    "from net import Net, INPUTS, OUTPUT_FILES  # noqa: E402\n\n"
    "# The float parameters' dtype in the checkpoint (migc convert --precision); BatchNorm and\n"
    "# LayerNorm parameters are float32 in any case, as AMP O2 keeps those cells.\n";
static const char RUN_PY_BODY[] =
    "\n# mindspore.amp.auto_mixed_precision(network, amp_level, dtype) (mindspore-api.json;\n"
    "# ../shared/targets/facts.md section 6): O0 the net unchanged; O1 only white-list cells\n"
    "# (nn.Conv*, nn.Dense, ...) in low precision, their outputs cast back to float32; O2 the\n"
    "# whole net in low precision except nn.BatchNorm1d/2d/3d and nn.LayerNorm, kept float32\n"
    "# with their outputs cast back; O3 everything in low precision. O2 and O3 cast the output\n"
    "# to float32. A 16-bit checkpoint runs at O2 unless --amp says otherwise.\n"
    "AMP_DEFAULT = 'O0' if PRECISION == 'fp32' else 'O2'\n"
    "AMP_DTYPE = mindspore.bfloat16 if PRECISION == 'bf16' else mindspore.float16\n\n\n"
    "def load(net, path):\n"
    "    \"\"\"The checkpoint into net: every parameter and every tensor used, or exit naming them.\"\"\"\n"
    "    params = mindspore.load_checkpoint(path)\n"
    "    if PRECISION == 'fp32':\n"
    "        not_loaded, unused = mindspore.load_param_into_net(net, params, strict_load=True)\n"
    "    else:\n"
    "        # strict_load=True refuses a dtype other than the parameter's; strict_load=False\n"
    "        # 'casts precision' but also matches names by suffix, so the names are checked\n"
    "        # here first, exactly (load_param_into_net notes).\n"
    "        names = set(net.parameters_dict())\n"
    "        not_loaded, unused = sorted(names - set(params)), sorted(set(params) - names)\n"
    "        if not not_loaded and not unused:\n"
    "            not_loaded, unused = mindspore.load_param_into_net(net, params, strict_load=False)\n"
    "    if not_loaded or unused:\n"
    "        sys.exit('run.py: parameters not in the checkpoint: %s; checkpoint tensors unused: %s' % (not_loaded, unused))\n\n\n"
    "def build(ckpt, amp):\n"
    "    \"\"\"Net() with the checkpoint loaded, in eval mode, at AMP level amp.\"\"\"\n"
    "    net = Net()\n"
    "    load(net, ckpt)\n"
    "    net.set_train(False)\n"
    "    return net if amp == 'O0' else mindspore.amp.auto_mixed_precision(net, amp, AMP_DTYPE)\n\n\n"
    "def main():\n"
    "    ap = argparse.ArgumentParser()\n"
    "    ap.add_argument('--ckpt', required=True)\n"
    "    ap.add_argument('--input', action='append', default=[], metavar='NAME=X.npy')\n"
    "    ap.add_argument('--output-dir', required=True)\n"
    "    ap.add_argument('--device', default='CPU', choices=['CPU', 'GPU', 'Ascend'])\n"
    "    ap.add_argument('--mode', default='graph', choices=['graph', 'pynative'])\n"
    "    ap.add_argument('--amp', default=AMP_DEFAULT, choices=['O0', 'O1', 'O2', 'O3'],\n"
    "                    help='mindspore.amp.auto_mixed_precision level (default %(default)s)')\n"
    "    a = ap.parse_args()\n"
    "    mindspore.set_context(mode=mindspore.GRAPH_MODE if a.mode == 'graph' else mindspore.PYNATIVE_MODE)\n"
    "    mindspore.set_device(a.device)\n"
    "    given = dict(kv.split('=', 1) for kv in a.input)\n"
    "    missing = [n for n in INPUTS if n not in given]\n"
    "    if missing or set(given) - set(INPUTS):\n"
    "        sys.exit('run.py: inputs are %s; missing %s, unknown %s' % (INPUTS, missing, sorted(set(given) - set(INPUTS))))\n"
    "    net = build(a.ckpt, a.amp)\n"
    "    outs = net(*[mindspore.Tensor(np.load(given[n])) for n in INPUTS])\n"
    "    if not isinstance(outs, tuple):\n"
    "        outs = (outs,)\n"
    "    os.makedirs(a.output_dir, exist_ok=True)\n"
    "    for file, y in zip(OUTPUT_FILES, outs):\n"
    "        np.save(os.path.join(a.output_dir, file), y.asnumpy())\n\n\n"
    "if __name__ == '__main__':\n"
    "    main()\n";

/* The text of run.py for a checkpoint whose float parameters are ckpt_float
 * (MG_F16, MG_BF16; anything else float32) into b. */
static void run_py_text(cg_buf *b, mg_dtype ckpt_float) {
  const char *p = ckpt_float == MG_F16 ? "fp16" : ckpt_float == MG_BF16 ? "bf16" : "fp32";
  cg_buf_printf(b, "%sPRECISION = '%s'\n%s", RUN_PY_HEAD, p, RUN_PY_BODY);
}

/* dir/constants/K.npy for every constant net.py reads from a file; 0 or -1. */
static int write_constants(ms_ctx *c, const char *dir) {
  if (!c->n_consts) return 0;
  char sub[4096], path[4200];
  snprintf(sub, sizeof sub, "%s/constants", dir);
  if (cg_mkdirs(sub)) {
    mg_error(c->d, IO, sub, NULL, "cannot create %s", sub);
    return -1;
  }
  for (int k = 0; k < c->n_consts; k++) {
    const mg_value *v = c->consts[k];
    mg_array a = {.dtype = v->dtype, .rank = v->shape.rank, .data = (void *)v->data, .nbytes = v->nbytes};
    for (int r = 0; r < v->shape.rank; r++) a.dims[r] = v->shape.d[r].v;
    snprintf(path, sizeof path, "%s/%d.npy", sub, k);
    if (npy_write_file(path, &a, c->d)) return -1;
  }
  return 0;
}

/* The buffers the graph does not read, as Parameters at their paths: not under a
 * layer (whose parameters are its own), nor where a parameter already is. */
static void hold_buffers(ms_ctx *c, const ms_buffer *buffers, int n_buffers) {
  for (int i = 0; i < n_buffers && !c->failed; i++) {
    const ms_buffer *bf = &buffers[i];
    const ms_cell *at = &c->root;
    for (const char *q = bf->tag; *q && at;) {
      size_t len = strcspn(q, ".");
      const ms_cell *next = NULL;
      for (const ms_cell *x = at->kids; x && !next; x = x->next)
        if (strlen(x->name) == len && !strncmp(x->name, q, len)) next = x;
      at = next;
      if (at && at->decl) break; /* a layer, or the parameter itself */
      q += len + (q[len] == '.');
    }
    if (at && at->decl) continue;
    if (bf->rank < 0 || bf->rank > MG_MAX_RANK) continue;
    mg_value v = {.name = bf->tag, .kind = MG_V_INIT, .dtype = bf->dtype, .id = -1};
    ms_param_view view = {.kind = MS_VIEW_SAME, .rank = bf->rank};
    v.shape.rank = bf->rank;
    for (int k = 0; k < bf->rank; k++) v.shape.d[k].v = bf->dims[k], view.dims[k] = bf->dims[k];
    const char *why = NULL;
    int before = c->r->n_params;
    if (param_expr(c, &v, bf->tag, &view, &why) && c->r->n_params > before) c->r->n_held_buffers++;
  }
}

int emit_mindspore(mg_model *m, const rule_set *rs, ms_param_tag_fn *tag, void *tag_ctx, const ms_buffer *buffers,
                   int n_buffers, const char *dir, mg_dtype ckpt_float, ms_report *r, mg_diags *d) {
  memset(r, 0, sizeof *r);
  if (map_lower(m, rs, d) < 0) return -1;
  ms_ctx c = {.m = m, .rs = rs, .tag = tag, .tag_ctx = tag_ctx, .d = d, .r = r};
  mg_arena_init(&c.a, 1 << 16);
  c.root.name = "";
  if (!(c.custom = ms_custom_new(dir, d))) c.failed = 1;
  mg_graph *g = m->graph;
  /* what depends only on the export's constants is computed now, as the C target
   * does, so that net.py never needs an API for a constant's arithmetic */
  for (int i = 0; i < g->n_nodes && !c.failed; i++)
    if (!reads_param(&c, g->nodes[i]) && cg_fold_node(m, g->nodes[i]) < 0) c.failed = 1;
  python_names(&c);
  find_lstms(&c);
  for (int i = 0; i < g->n_nodes && !c.failed; i++) emit_node(&c, g->nodes[i]);
  hold_buffers(&c, buffers, n_buffers);
  /* the return first: a constant output is written inline and needs numpy */
  cg_buf ret = {0};
  for (int i = 0; i < g->n_outputs; i++) {
    const char *why = NULL, *e = tensor_expr(&c, g->outputs[i], &why);
    if (!e) { /* never a None in its place */
      mg_diag_add(d, MG_SEV_ERROR, MG_D_UNSUPPORTED, g->outputs[i]->name, NULL, "mindspore: graph output: %s", why);
      r->n_unsupported++;
      cg_buf_printf(&c.body, "        raise NotImplementedError(");
      py_string(&c.body, why);
      cg_buf_printf(&c.body, ")\n");
      e = "None";
    }
    cg_buf_printf(&ret, "%s%s", i ? ", " : "", e);
  }
  cg_buf net = {0};
  cg_buf_printf(&net, "\"\"\"The network of %s, for MindSpore: its parameters are the tags of model.ckpt.\n"
                      "Written by migc; every API argument is given explicitly.\"\"\"\n"
                      "%s%simport mindspore\nfrom mindspore import nn\n\n%s"
                      "INPUTS = [", m->path ? m->path : "the model",
                  c.n_consts || ms_custom_count(c.custom) ? "import os\n" : "",
                  c.uses_numpy || c.n_consts ? "import numpy as np\n" : "",
                  c.n_consts ? "_HERE = os.path.dirname(os.path.abspath(__file__))\n" : "");
  for (int i = 0; i < g->n_inputs; i++) cg_buf_printf(&net, "%s", i ? ", " : ""), py_string(&net, g->inputs[i]->name);
  cg_buf_printf(&net, "]\nOUTPUTS = [");
  for (int i = 0; i < g->n_outputs; i++) cg_buf_printf(&net, "%s", i ? ", " : ""), py_string(&net, g->outputs[i]->name);
  cg_buf_printf(&net, "]\nOUTPUT_FILES = [");
  for (int i = 0; i < g->n_outputs; i++) {
    char id[256];
    cg_ident(g->outputs[i]->name, id, sizeof id);
    cg_buf_printf(&net, "%s'%d_%s.npy'", i ? ", " : "", i, id);
  }
  cg_buf_printf(&net, "]\n");
  ms_custom_module_text(c.custom, &net);
  cg_buf_printf(&net, "\n\nclass Net(nn.Cell):\n    def __init__(self):\n        super().__init__()\n");
  for (const ms_cell *k = c.root.kids; k && !c.failed; k = k->next) {
    const char *e = build_cell(&c, k, k->name);
    if (is_number(k->name) && !k->param) /* the root of a torch Sequential */
      e = held_cell(&c, k, k->name, e), cg_buf_printf(&c.init,
                    "        self.insert_child_to_cell(\"%s\", %s)\n        %s.update_parameters_name(prefix=\"%s.\", "
                    "recurse=True)\n", k->name, e, e, k->name);
    else cg_buf_printf(&c.init, "        self.%s = %s\n", k->name, e);
  }
  for (int k = 0; k < c.n_consts; k++)
    cg_buf_printf(&c.init, "        self.const%d = mindspore.Tensor(input_data=np.load(os.path.join(_HERE, \"constants\", "
                           "\"%d.npy\")), dtype=%s, shape=None, init=None, const_arg=False, device=None)  # %s\n",
                  k, k, map_ms_dtype_name(c.consts[k]->dtype), c.consts[k]->name);
  cg_buf_printf(&net, "%s", c.init.s ? c.init.s : "");
  cg_buf_printf(&net, "\n    def construct(self");
  for (int i = 0; i < g->n_inputs && c.pyname; i++) cg_buf_printf(&net, ", %s", c.pyname[g->inputs[i]->id]);
  cg_buf_printf(&net, "):\n%s        return %s\n", c.body.s ? c.body.s : "", ret.s ? ret.s : "None");
  int rc = 0;
  cg_buf run = {0};
  run_py_text(&run, ckpt_float);
  if (c.failed || net.failed || c.init.failed || c.body.failed || ret.failed || run.failed) {
    mg_error(d, OOM, NULL, NULL, "out of memory writing the MindSpore script");
    rc = -1;
  } else if (!dir) {
    rc = 0; /* a check: the diagnostics are the verdict */
  } else if (cg_mkdirs(dir)) {
    mg_error(d, IO, dir, NULL, "cannot create %s", dir);
    rc = -1;
  } else {
    rc = write_constants(&c, dir) || cg_write_text(d, dir, "net.py", net.s) || cg_write_text(d, dir, "run.py", run.s)
             ? -1 : 0;
  }
  if (!rc && ms_custom_finish(c.custom)) rc = -1; /* custom/Makefile, or a kernel that failed */
  ms_custom_free(c.custom);
  cg_buf_free(&net);
  cg_buf_free(&run);
  cg_buf_free(&ret);
  cg_buf_free(&c.init);
  cg_buf_free(&c.body);
  mg_arena_destroy(&c.a);
  return rc;
}
