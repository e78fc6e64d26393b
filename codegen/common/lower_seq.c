/* Lowering of static sequences and optionals into plain tensor ops.
 *
 * Generated C has no sequence type, but a sequence whose length and positions are
 * all known at conversion is only a list of tensors: the pass walks the graph in
 * order, tracking for each sequence value the tensor values it holds (and for each
 * optional whether it holds one), and rewrites the nodes that turn sequences back
 * into tensors (SequenceAt, SequenceLength, ConcatFromSequence, OptionalGetElement,
 * OptionalHasElement) into Identity/Concat/Unsqueeze/constants over those tensors.
 * SplitToSequence gets a Split (and Squeezes) producing its elements. Nodes that
 * build sequences are kept: once nothing reads them, dead-code elimination drops
 * them. Anything not static (a position computed at run time, a sequence graph
 * input) is left alone, and the driver reports it. */
#include "lower.h"
#include "rewrite.h"
#include "infer.h"
#include "passes.h"
#include <string.h>

typedef enum { ST_UNKNOWN, ST_SEQ, ST_OPT } st_kind;

/* What a sequence or optional value is known to hold: for ST_OPT, n is 0 (empty)
 * or 1. An element may be NULL when only the length is known. */
typedef struct {
  st_kind kind;
  mg_value **el;
  int n;
} seq_state;

typedef struct {
  mg_rw w;
  seq_state *st; /* by value id, for the ids that existed when the pass began */
  int n_st;
} seq_ctx;

static seq_state *state_of(seq_ctx *s, const mg_value *v) {
  return v && v->id >= 0 && v->id < s->n_st && s->st[v->id].kind != ST_UNKNOWN ? &s->st[v->id] : NULL;
}

/* Records that v holds el[0..n) (copied into the arena). */
static void set_state(seq_ctx *s, const mg_value *v, st_kind kind, mg_value *const *el, int n) {
  if (!v || v->id < 0 || v->id >= s->n_st || s->w.failed) return;
  mg_value **copy = mg_arena_alloc(&s->w.m->arena, sizeof *copy * (size_t)(n + 1));
  if (!copy) {
    s->w.failed = 1;
    return;
  }
  if (n) memcpy(copy, el, sizeof *copy * (size_t)n);
  s->st[v->id] = (seq_state){kind, copy, n};
}

/* A constant scalar position in [lo, hi] after adding len to a negative one;
 * dflt when the input is omitted. 0 ok, -1 not static or out of range. */
static int position(const mg_value *v, int64_t dflt, int64_t len, int64_t lo, int64_t hi, int64_t *out) {
  int64_t p = dflt;
  if (v) {
    if (!v->data || v->vtype != MG_VT_TENSOR || mg_value_ints(v, &p, 1) != 1) return -1;
    if (p < 0) p += len;
  }
  if (p < lo || p > hi) return -1;
  *out = p;
  return 0;
}

/* Writes out := src as an Identity node. */
static void alias(seq_ctx *s, mg_node *n, mg_value *src, mg_value *out) {
  mg_rw_node(&s->w, MG_OP_Identity, n->name, 1, &src, 1, &out);
}

/* out := a constant scalar (int64 or bool), through an Identity so that out keeps
 * its name and can stay a graph output. */
static void const_scalar(seq_ctx *s, mg_node *n, mg_dtype dtype, int64_t x, mg_value *out) {
  mg_shape scalar = {.rank = 0};
  unsigned char b = x != 0;
  mg_value *c = dtype == MG_BOOL ? mg_rw_const(&s->w, "seq_const", MG_BOOL, &scalar, &b, 1)
                                 : mg_rw_const_i64(&s->w, "seq_const", &x, 1, 0);
  if (c) alias(s, n, c, out);
}

/* SplitToSequence whose axis length is unknown: a 1-D split still fixes the
 * length, so the sequence is recorded with unknown (NULL) elements. Returns 0. */
static int length_only(seq_ctx *s, mg_node *n, const mg_value *sp) {
  if (!sp || !sp->data || sp->shape.rank != 1 || sp->shape.d[0].v < 0 || sp->shape.d[0].v > 4096) return 0;
  int count = (int)sp->shape.d[0].v;
  mg_value **el = mg_arena_alloc(&s->w.m->arena, sizeof *el * (size_t)(count + 1));
  if (!el) {
    s->w.failed = 1;
    return 0;
  }
  memset(el, 0, sizeof *el * (size_t)(count + 1));
  set_state(s, n->out[0], ST_SEQ, el, count);
  return 0;
}

/* SplitToSequence: 1 lowered, 0 left alone. */
static int lower_split(seq_ctx *s, mg_node *n) {
  mg_value *x = n->in[0], *sp = n->n_in > 1 ? n->in[1] : NULL;
  if (!x || x->vtype != MG_VT_TENSOR || x->shape.rank < 1) return 0;
  int64_t axis = mg_attr_int(n, "axis", 0);
  if (axis < 0) axis += x->shape.rank;
  if (axis < 0 || axis >= x->shape.rank) return 0;
  if (x->shape.d[axis].v < 0) return length_only(s, n, sp);
  int64_t D = x->shape.d[axis].v, count, piece = 1, sp_one;
  int keep = 1;
  int64_t *sizes = NULL;
  if (!sp) {
    count = D;
    keep = mg_attr_int(n, "keepdims", 1) != 0;
  } else if (sp->data && sp->shape.rank == 0 && mg_value_ints(sp, &sp_one, 1) == 1) {
    piece = sp_one;
    if (piece <= 0) return 0;
    count = (D + piece - 1) / piece;
  } else if (sp->data && sp->shape.rank == 1 && sp->shape.d[0].v >= 0) {
    count = sp->shape.d[0].v;
  } else {
    return 0;
  }
  if (count < 1 || count > 4096) return 0;
  sizes = mg_arena_alloc(&s->w.m->arena, sizeof *sizes * (size_t)count);
  mg_value **pieces = mg_arena_alloc(&s->w.m->arena, sizeof *pieces * (size_t)count);
  if (!sizes || !pieces) {
    s->w.failed = 1;
    return 0;
  }
  if (sp && sp->shape.rank == 1 && mg_value_ints(sp, sizes, count) != count) return 0;
  int64_t total = 0;
  for (int64_t i = 0; i < count; i++) {
    if (!sp) sizes[i] = 1;
    else if (sp->shape.rank == 0) sizes[i] = D - i * piece < piece ? D - i * piece : piece;
    if (sizes[i] < 0) return 0;
    total += sizes[i];
  }
  if (total != D) return 0;
  for (int64_t i = 0; i < count; i++) {
    mg_shape sh = x->shape;
    sh.d[axis].v = sizes[i];
    sh.d[axis].sym = NULL;
    pieces[i] = mg_rw_value(&s->w, n->out[0]->name, x->dtype, &sh);
  }
  mg_value *split_sizes = mg_rw_const_i64(&s->w, "split_sizes", sizes, (int)count, 1);
  mg_value *split_in[2] = {x, split_sizes};
  mg_node *split = mg_rw_node(&s->w, MG_OP_Split, n->name, 2, split_in, (int)count, pieces);
  mg_rw_attr_int(&s->w, split, "axis", axis);
  if (!keep) {
    mg_value *ax = mg_rw_const_i64(&s->w, "squeeze_axes", &axis, 1, 1);
    for (int64_t i = 0; i < count; i++) {
      mg_shape sh = x->shape;
      for (int r = (int)axis; r + 1 < sh.rank; r++) sh.d[r] = sh.d[r + 1];
      sh.rank--;
      mg_value *sq = mg_rw_value(&s->w, n->out[0]->name, x->dtype, &sh);
      mg_value *sq_in[2] = {pieces[i], ax};
      mg_rw_node(&s->w, MG_OP_Squeeze, n->name, 2, sq_in, 1, &sq);
      pieces[i] = sq;
    }
  }
  set_state(s, n->out[0], ST_SEQ, pieces, (int)count);
  return 1;
}

/* ConcatFromSequence over a known sequence: 1 lowered, 0 left alone. */
static int lower_concat(seq_ctx *s, mg_node *n, const seq_state *q) {
  if (q->n < 1 || !q->el[0]) return 0;
  int rank = q->el[0]->shape.rank;
  if (rank < 0) return 0;
  int new_axis = mg_attr_int(n, "new_axis", 0) != 0;
  int64_t axis = mg_attr_int(n, "axis", 0), out_rank = rank + new_axis;
  if (axis < 0) axis += out_rank;
  if (axis < 0 || axis >= out_rank) return 0;
  mg_value **parts = mg_arena_alloc(&s->w.m->arena, sizeof *parts * (size_t)q->n);
  if (!parts) {
    s->w.failed = 1;
    return 0;
  }
  for (int i = 0; i < q->n; i++) {
    parts[i] = q->el[i];
    if (!parts[i] || parts[i]->shape.rank != rank) return 0;
  }
  if (new_axis) {
    mg_value *ax = mg_rw_const_i64(&s->w, "unsqueeze_axes", &axis, 1, 1);
    for (int i = 0; i < q->n; i++) {
      mg_shape sh = parts[i]->shape;
      for (int r = rank; r > axis; r--) sh.d[r] = sh.d[r - 1];
      sh.d[axis].v = 1;
      sh.d[axis].sym = NULL;
      sh.rank = rank + 1;
      mg_value *u = mg_rw_value(&s->w, n->out[0]->name, parts[i]->dtype, &sh);
      mg_value *u_in[2] = {parts[i], ax};
      mg_rw_node(&s->w, MG_OP_Unsqueeze, n->name, 2, u_in, 1, &u);
      parts[i] = u;
    }
  }
  mg_node *cat = mg_rw_node(&s->w, MG_OP_Concat, n->name, q->n, parts, 1, &n->out[0]);
  mg_rw_attr_int(&s->w, cat, "axis", axis);
  return 1;
}

/* Lowers or records node n; 1 when it was replaced, 0 when it is to be kept. */
static int lower_node(seq_ctx *s, mg_node *n) {
  mg_value *in0 = n->n_in > 0 ? n->in[0] : NULL, *out = n->n_out > 0 ? n->out[0] : NULL;
  seq_state *q = state_of(s, in0);
  int64_t p;
  switch (n->op) {
  case MG_OP_SequenceEmpty:
    set_state(s, out, ST_SEQ, NULL, 0);
    return 0;
  case MG_OP_SequenceConstruct:
    for (int i = 0; i < n->n_in; i++)
      if (!n->in[i] || n->in[i]->vtype != MG_VT_TENSOR) return 0;
    set_state(s, out, ST_SEQ, n->in, n->n_in);
    return 0;
  case MG_OP_SequenceInsert: {
    mg_value *t = n->in[1];
    if (!q || q->kind != ST_SEQ || !t || t->vtype != MG_VT_TENSOR ||
        position(n->n_in > 2 ? n->in[2] : NULL, q->n, q->n, 0, q->n, &p))
      return 0;
    mg_value **el = mg_arena_alloc(&s->w.m->arena, sizeof *el * (size_t)(q->n + 1));
    if (!el) {
      s->w.failed = 1;
      return 0;
    }
    for (int i = 0, k = 0; i <= q->n; i++) el[i] = i == p ? t : q->el[k++];
    set_state(s, out, ST_SEQ, el, q->n + 1);
    return 0;
  }
  case MG_OP_SequenceErase: {
    if (!q || q->kind != ST_SEQ || q->n < 1 || position(n->n_in > 1 ? n->in[1] : NULL, q->n - 1, q->n, 0, q->n - 1, &p))
      return 0;
    mg_value **el = mg_arena_alloc(&s->w.m->arena, sizeof *el * (size_t)q->n);
    if (!el) {
      s->w.failed = 1;
      return 0;
    }
    for (int i = 0, k = 0; i < q->n; i++)
      if (i != p) el[k++] = q->el[i];
    set_state(s, out, ST_SEQ, el, q->n - 1);
    return 0;
  }
  case MG_OP_Identity:
    if (q) set_state(s, out, q->kind, q->el, q->n);
    return 0;
  case MG_OP_SequenceAt:
    if (!q || q->kind != ST_SEQ || q->n < 1 || position(n->in[1], 0, q->n, 0, q->n - 1, &p) || !q->el[p]) return 0;
    alias(s, n, q->el[p], out);
    return 1;
  case MG_OP_SequenceLength:
    if (!q || q->kind != ST_SEQ) return 0;
    const_scalar(s, n, MG_I64, q->n, out);
    return 1;
  case MG_OP_SplitToSequence:
    lower_split(s, n);
    return 0;
  case MG_OP_ConcatFromSequence:
    return q && q->kind == ST_SEQ ? lower_concat(s, n, q) : 0;
  case MG_OP_Optional:
    if (in0 && in0->vtype != MG_VT_TENSOR) return 0;
    set_state(s, out, ST_OPT, &in0, in0 ? 1 : 0);
    return 0;
  case MG_OP_OptionalHasElement:
    if (!in0 || in0->vtype == MG_VT_TENSOR) {
      const_scalar(s, n, MG_BOOL, in0 != NULL, out);
      return 1;
    }
    if (!q || q->kind != ST_OPT) return 0;
    const_scalar(s, n, MG_BOOL, q->n, out);
    return 1;
  case MG_OP_OptionalGetElement:
    if (in0 && in0->vtype == MG_VT_TENSOR) {
      alias(s, n, in0, out);
      return 1;
    }
    if (!q || q->kind != ST_OPT || q->n != 1) return 0;
    alias(s, n, q->el[0], out);
    return 1;
  default:
    return 0;
  }
}

static int is_seq_op(mg_op op) {
  return op == MG_OP_SequenceEmpty || op == MG_OP_SequenceConstruct || op == MG_OP_SequenceInsert ||
         op == MG_OP_SequenceErase || op == MG_OP_SequenceAt || op == MG_OP_SequenceLength ||
         op == MG_OP_SplitToSequence || op == MG_OP_ConcatFromSequence || op == MG_OP_Optional ||
         op == MG_OP_OptionalHasElement || op == MG_OP_OptionalGetElement;
}

int cg_lower_sequences(mg_model *m, mg_diags *d, int *changed) {
  mg_graph *g = m->graph;
  int any = 0;
  for (int i = 0; i < g->n_nodes; i++) any |= is_seq_op(g->nodes[i]->op);
  if (!any) return 0;
  seq_ctx s;
  mg_rw_begin(&s.w, m, g);
  s.n_st = g->n_values;
  s.st = mg_calloc((size_t)s.n_st + 1, sizeof *s.st);
  if (!s.st) goto oom;
  int n_nodes = g->n_nodes;
  mg_node **orig = mg_malloc(sizeof *orig * (size_t)(n_nodes + 1));
  if (!orig) goto oom;
  memcpy(orig, g->nodes, sizeof *orig * (size_t)n_nodes);
  for (int i = 0; i < n_nodes && !s.w.failed; i++)
    if (!lower_node(&s, orig[i])) mg_rw_keep(&s.w, orig[i]);
  mg_free(orig);
  if (mg_rw_end(&s.w)) goto oom;
  mg_free(s.st);
  s.st = NULL;
  *changed += s.w.changed;
  if (!s.w.changed) return 0;
  if (pass_dce(m) < 0) goto oom;
  if (ir_infer_shapes(m, NULL, 0, d)) return -1;
  if (pass_fold_constants(m) < 0 || pass_dce(m) < 0) goto oom;
  return 0;
oom:
  mg_free(s.st);
  mg_error(d, OOM, NULL, NULL, "out of memory lowering sequences");
  return -1;
}
