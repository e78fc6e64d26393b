/* The decompositions of the rules files as IR rewrites (map_lower, contract in
 * mapping.h). Each <decompose into="..."> of the rules files has a recipe here, keyed
 * by the op and the exact list of ops (docs/rules-notes.md section 4 says what
 * each computes and why it is exact). A recipe builds the new nodes with the
 * shared rewriter (core/rewrite.h) and writes the original node's outputs, so
 * readers and graph outputs keep their values; new values get their dtype and
 * an unknown shape, which shape inference fills after each round. */
#include "mapping_internal.h"
#include "infer.h"
#include "passes.h"
#include "rewrite.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_ROUNDS = 8, MAX_GROUPS = 1024 };

typedef struct {
  mg_rw w;
  char why[256]; /* why a recipe left its node alone */
} lower_ctx;

/* A recipe: 1 when it replaced n, 0 when it cannot (c->why says why). */
typedef int (*recipe_fn)(lower_ctx *c, mg_node *n);

static const mg_shape UNKNOWN = {.rank = -1};
static const mg_shape SCALAR = {.rank = 0};

static int refuse(lower_ctx *c, const char *why) {
  snprintf(c->why, sizeof c->why, "%s", why);
  return 0;
}

/* A fresh value of dtype t named after n's first output. */
static mg_value *temp(lower_ctx *c, const mg_node *n, mg_dtype t) {
  return mg_rw_value(&c->w, n->out[0] ? n->out[0]->name : n->name, t, &UNKNOWN);
}

/* Appends a copy of attribute a (its arrays stay shared: they live in the model's
 * arena) to node n, which the rewriter made. */
static void append_attr(lower_ctx *c, mg_node *n, const mg_attr *a) {
  if (c->w.failed || !n) return;
  mg_attr *list = mg_arena_alloc(&c->w.m->arena, sizeof *list * (size_t)(n->n_attr + 1));
  if (!list) {
    c->w.failed = 1;
    return;
  }
  if (n->n_attr) memcpy(list, n->attr, sizeof *list * (size_t)n->n_attr);
  list[n->n_attr++] = *a;
  n->attr = list;
}

/* Gives new node n the ops.def defaults of its int, float and string attributes
 * it lacks, as import does, so that rules' requires see them. */
static void fill_defaults(lower_ctx *c, mg_node *n) {
  if (!n) return;
  for (const char *p = mg_op_get(n->op)->attrs; *p;) {
    p += strspn(p, " ");
    size_t len = strcspn(p, " ");
    char spec[128], *colon, *eq;
    snprintf(spec, sizeof spec, "%.*s", (int)(len < sizeof spec ? len : sizeof spec - 1), p);
    p += len;
    if (!(colon = strchr(spec, ':')) || !(eq = strchr(colon, '='))) continue;
    *colon = *eq = 0;
    if (mg_node_attr(n, spec)) continue;
    mg_attr a = {.name = mg_arena_strdup(&c->w.m->arena, spec)};
    const char *type = colon + 1, *text = eq + 1;
    if (!strcmp(type, "i")) a.kind = MG_ATTR_INT, a.i = strtoll(text, NULL, 10);
    else if (!strcmp(type, "f")) a.kind = MG_ATTR_FLOAT, a.f = strtof(text, NULL);
    else if (!strcmp(type, "s")) a.kind = MG_ATTR_STRING, a.s = mg_arena_strdup(&c->w.m->arena, text);
    else continue;
    if (!a.name || (a.kind == MG_ATTR_STRING && !a.s)) c->w.failed = 1;
    append_attr(c, n, &a);
  }
}

/* A new node with the defaults filled (mg_rw_node's contract otherwise); a node
 * that needs other attribute values sets them before fill_defaults. */
static mg_node *node(lower_ctx *c, mg_op op, const mg_node *orig, int n_in, mg_value *const *in, int n_out,
                     mg_value *const *out) {
  mg_node *n = mg_rw_node(&c->w, op, orig->name, n_in, in, n_out, out);
  fill_defaults(c, n);
  return n;
}

/* out := Cast(x, to). */
static mg_node *cast(lower_ctx *c, const mg_node *orig, mg_value *x, mg_dtype to, mg_value *out) {
  mg_node *k = mg_rw_node(&c->w, MG_OP_Cast, orig->name, 1, &x, 1, &out);
  mg_rw_attr_int(&c->w, k, "to", to);
  fill_defaults(c, k);
  return k;
}

/* ---------- Einsum (aclnn) -> Transpose MatMul ---------- */

/* out := x with its last two axes swapped (x has rank `rank`). */
static void swap_last(lower_ctx *c, const mg_node *orig, mg_value *x, int rank, mg_value *out) {
  int64_t perm[MG_MAX_RANK];
  for (int r = 0; r < rank; r++) perm[r] = r;
  perm[rank - 2] = rank - 1, perm[rank - 1] = rank - 2;
  mg_node *t = mg_rw_node(&c->w, MG_OP_Transpose, orig->name, 1, &x, 1, &out);
  mg_rw_attr_ints(&c->w, t, "perm", perm, rank);
}

/* A batched-matmul equation (rules' batched_matmul predicate): a = <b>ik or <b>ki,
 * b = <b>kj or <b>jk, result <b>ij or <b>ji. */
static int lower_einsum(lower_ctx *c, mg_node *n) {
  char a[32], b[32], o[32], eq[128];
  size_t k = 0;
  const char *text = mg_attr_str(n, "equation", "");
  for (const char *p = text; *p && k + 1 < sizeof eq; p++)
    if (*p != ' ') eq[k++] = *p;
  eq[k] = 0;
  if (n->n_in != 2 || sscanf(eq, "%31[a-zA-Z],%31[a-zA-Z]->%31[a-zA-Z]", a, b, o) != 3)
    return refuse(c, "the equation is not a product of two operands");
  int rank = (int)strlen(a), nb = rank - 2;
  char contracted = strchr(b + nb, a[nb]) && !strchr(o + nb, a[nb]) ? a[nb] : a[nb + 1];
  int ta = a[nb] == contracted, tb = b[nb + 1] == contracted;
  char j = b[nb] == contracted ? b[nb + 1] : b[nb];
  int to = o[nb] == j;
  mg_value *x = n->in[0], *y = n->in[1], *out = n->out[0];
  if (ta) {
    mg_value *t = temp(c, n, x->dtype);
    swap_last(c, n, x, rank, t);
    x = t;
  }
  if (tb) {
    mg_value *t = temp(c, n, y->dtype);
    swap_last(c, n, y, rank, t);
    y = t;
  }
  mg_value *in[2] = {x, y}, *prod = to ? temp(c, n, out->dtype) : out;
  node(c, MG_OP_MatMul, n, 2, in, 1, &prod);
  if (to) swap_last(c, n, prod, rank, out);
  return 1;
}

/* ---------- HardSigmoid (aclnn) -> Mul Add Clip ---------- */

/* max(0, min(1, alpha*x + beta)) = Clip(Add(Mul(x, alpha), beta), 0, 1). */
static int lower_hardsigmoid(lower_ctx *c, mg_node *n) {
  mg_value *x = n->in[0];
  mg_dtype t = x->dtype;
  if (!mg_dtype_is_float(t)) return refuse(c, "HardSigmoid of a non-float dtype");
  mg_value *alpha = mg_rw_const_fill(&c->w, "hardsigmoid_alpha", t, &SCALAR, mg_attr_float(n, "alpha", 0.2f));
  mg_value *beta = mg_rw_const_fill(&c->w, "hardsigmoid_beta", t, &SCALAR, mg_attr_float(n, "beta", 0.5f));
  mg_value *lo = mg_rw_const_fill(&c->w, "hardsigmoid_lo", t, &SCALAR, 0);
  mg_value *hi = mg_rw_const_fill(&c->w, "hardsigmoid_hi", t, &SCALAR, 1);
  if (!alpha || !beta || !lo || !hi) return refuse(c, "HardSigmoid of a dtype without float constants");
  mg_value *scaled = temp(c, n, t), *shifted = temp(c, n, t);
  mg_value *mul_in[2] = {x, alpha}, *add_in[2] = {scaled, beta}, *clip_in[3] = {shifted, lo, hi};
  node(c, MG_OP_Mul, n, 2, mul_in, 1, &scaled);
  node(c, MG_OP_Add, n, 2, add_in, 1, &shifted);
  node(c, MG_OP_Clip, n, 3, clip_in, 1, &n->out[0]);
  return 1;
}

/* ---------- Equal (aclnn, integers) -> Sub Cast Not ---------- */

/* a == b exactly when a - b is 0, also when the subtraction wraps. */
static int lower_equal(lower_ctx *c, mg_node *n) {
  mg_value *a = n->in[0];
  if (!mg_dtype_is_int(a->dtype)) return refuse(c, "Equal of a non-integer dtype");
  mg_value *diff = temp(c, n, a->dtype), *nonzero = temp(c, n, MG_BOOL);
  node(c, MG_OP_Sub, n, 2, n->in, 1, &diff);
  cast(c, n, diff, MG_BOOL, nonzero);
  node(c, MG_OP_Not, n, 1, &nonzero, 1, &n->out[0]);
  return 1;
}

/* ---------- Not (aclnn) -> Cast Sub ---------- */

/* not x = Cast(1 - Cast(x, int32), bool). */
static int lower_not(lower_ctx *c, mg_node *n) {
  int32_t one = 1;
  mg_value *wide = temp(c, n, MG_I32), *flipped = temp(c, n, MG_I32);
  mg_value *k = mg_rw_const(&c->w, "not_one", MG_I32, &SCALAR, &one, sizeof one);
  cast(c, n, n->in[0], MG_I32, wide);
  mg_value *sub_in[2] = {k, wide};
  node(c, MG_OP_Sub, n, 2, sub_in, 1, &flipped);
  cast(c, n, flipped, MG_BOOL, n->out[0]);
  return 1;
}

/* ---------- Flatten, Unsqueeze, Squeeze -> Reshape ---------- */

/* A Reshape to the output's shape; one unknown dim becomes -1. */
static int lower_to_reshape(lower_ctx *c, mg_node *n) {
  const mg_shape *s = &n->out[0]->shape;
  int64_t target[MG_MAX_RANK];
  int unknown = 0;
  if (s->rank < 0) return refuse(c, "the output rank is unknown");
  for (int r = 0; r < s->rank; r++) {
    target[r] = s->d[r].v < 0 ? -1 : s->d[r].v;
    unknown += s->d[r].v < 0;
  }
  if (unknown > 1) return refuse(c, "more than one output dim is not static");
  mg_value *in[2] = {n->in[0], mg_rw_const_i64(&c->w, "reshape_shape", target, s->rank, 1)};
  node(c, MG_OP_Reshape, n, 2, in, 1, &n->out[0]);
  return 1;
}

/* ---------- ConstantOfShape -> Expand ---------- */

/* Expand(value as a 0-D tensor, shape): a 0-D value broadcasts to any shape,
 * the empty one included. */
static int lower_constant_of_shape(lower_ctx *c, mg_node *n) {
  const mg_attr *a = mg_node_attr(n, "value");
  float zero = 0;
  mg_dtype t = MG_F32;
  const void *data = &zero;
  if (a && a->kind == MG_ATTR_TENSOR && a->t && a->t->data) {
    t = a->t->dtype, data = a->t->data;
    if (a->t->nbytes != mg_dtype_size(t)) return refuse(c, "value is not one element");
  }
  mg_value *in[2] = {mg_rw_const(&c->w, "constant_of_shape_value", t, &SCALAR, data, mg_dtype_size(t)), n->in[0]};
  node(c, MG_OP_Expand, n, 2, in, 1, &n->out[0]);
  return 1;
}

/* ---------- grouped Conv (mindspore) -> Split Conv Concat ---------- */

/* The g parts of v along axis (dim d): constants sliced from its data when it is
 * a constant (not an initializer) and axis is 0, else a Split node's outputs. */
static void split_parts(lower_ctx *c, const mg_node *n, mg_value *v, int axis, int64_t d, int g, mg_value **parts) {
  int64_t sizes[MAX_GROUPS];
  for (int i = 0; i < g; i++) sizes[i] = d / g;
  /* an initializer stays one parameter, split at run time, so that the checkpoint's
   * tensor is what the pieces read (a constant slice would leave it unused) */
  if (v->data && v->kind != MG_V_INIT && axis == 0 && v->shape.rank >= 1 && mg_shape_is_static(&v->shape)) {
    mg_shape s = v->shape;
    s.d[0].v = d / g;
    size_t bytes = v->nbytes / (size_t)g;
    for (int i = 0; i < g; i++) parts[i] = mg_rw_const(&c->w, v->name, v->dtype, &s, (const char *)v->data + bytes * i, bytes);
    return;
  }
  for (int i = 0; i < g; i++) parts[i] = temp(c, n, v->dtype);
  mg_value *in[2] = {v, mg_rw_const_i64(&c->w, "split_sizes", sizes, g, 1)};
  mg_node *s = mg_rw_node(&c->w, MG_OP_Split, n->name, 2, in, g, parts);
  mg_rw_attr_int(&c->w, s, "axis", axis);
  fill_defaults(c, s);
}

/* One Conv (group 1, the other attributes kept) per group on channel slices of
 * the input, weight and bias, joined on axis 1. */
static int lower_grouped_conv(lower_ctx *c, mg_node *n) {
  mg_value *x = n->in[0], *w = n->in[1], *b = n->n_in > 2 ? n->in[2] : NULL;
  int64_t g = mg_attr_int(n, "group", 1);
  if (x->shape.rank < 2 || w->shape.rank < 1) return refuse(c, "input or weight rank unknown");
  int64_t ci = x->shape.d[1].v, co = w->shape.d[0].v;
  if (g < 2 || g > MAX_GROUPS || ci < 0 || co < 0 || ci % g || co % g)
    return refuse(c, "the channels are not static multiples of group");
  mg_value *xs[MAX_GROUPS], *ws[MAX_GROUPS], *bs[MAX_GROUPS], *ys[MAX_GROUPS];
  split_parts(c, n, x, 1, ci, (int)g, xs);
  split_parts(c, n, w, 0, co, (int)g, ws);
  if (b) split_parts(c, n, b, 0, co, (int)g, bs);
  for (int i = 0; i < g && !c->w.failed; i++) {
    ys[i] = temp(c, n, n->out[0]->dtype);
    mg_value *in[3] = {xs[i], ws[i], b ? bs[i] : NULL};
    mg_node *conv = mg_rw_node(&c->w, MG_OP_Conv, n->name, b ? 3 : 2, in, 1, &ys[i]);
    for (int k = 0; k < n->n_attr; k++)
      if (strcmp(n->attr[k].name, "group")) append_attr(c, conv, &n->attr[k]);
    mg_rw_attr_int(&c->w, conv, "group", 1);
  }
  mg_node *cat = mg_rw_node(&c->w, MG_OP_Concat, n->name, (int)g, ys, 1, &n->out[0]);
  mg_rw_attr_int(&c->w, cat, "axis", 1);
  return 1;
}

/* ---------- RoiAlign (aclnn) -> Cast RoiAlign ---------- */

/* aclnnRoiAlign takes batchIndices as INT32 (ONNX gives INT64): the same RoiAlign
 * on the indices cast, every attribute kept (aclnn-api.json aclnnRoiAlign). */
static int lower_roi_align_indices(lower_ctx *c, mg_node *n) {
  if (n->n_in < 3 || !n->in[2] || !n->out[0]) return refuse(c, "RoiAlign without batch_indices");
  mg_value *b32 = temp(c, n, MG_I32);
  cast(c, n, n->in[2], MG_I32, b32);
  mg_value *in[3] = {n->in[0], n->in[1], b32};
  mg_node *k = mg_rw_node(&c->w, MG_OP_RoiAlign, n->name, 3, in, 1, &n->out[0]);
  for (int i = 0; i < n->n_attr; i++) append_attr(c, k, &n->attr[i]);
  if (k) k->opset = n->opset; /* RoiAlign-10..15 samples with output_half_pixel */
  return 1;
}

/* ---------- Slice (mindspore) -> Range Gather ---------- */

/* Per sliced axis Gather(x, Range(start, start + count*step, step), axis), the
 * start clamped as ONNX does, so that every index is in [0, dim). An axis taken
 * whole is skipped, unless every one is. */
static int lower_slice(lower_ctx *c, mg_node *n) {
  slice_range sr[MG_MAX_RANK];
  int count;
  map_status st;
  if (slice_ranges(n, sr, &count, &st, c->why, sizeof c->why)) return 0;
  int keep[MG_MAX_RANK], kept = 0;
  for (int i = 0; i < count; i++) {
    int64_t d = n->in[0]->shape.d[sr[i].axis].v;
    keep[i] = !(sr[i].start == 0 && sr[i].step == 1 && sr[i].count == d);
    kept += keep[i];
  }
  if (!kept) keep[count - 1] = 1, kept = 1;
  mg_value *cur = n->in[0];
  for (int i = 0; i < count; i++) {
    if (!keep[i]) continue;
    int64_t limit = sr[i].start + sr[i].count * sr[i].step;
    mg_value *range_in[3] = {mg_rw_const_i64(&c->w, "slice_start", &sr[i].start, 1, 0),
                             mg_rw_const_i64(&c->w, "slice_limit", &limit, 1, 0),
                             mg_rw_const_i64(&c->w, "slice_step", &sr[i].step, 1, 0)};
    mg_value *idx = temp(c, n, MG_I64), *next = --kept ? temp(c, n, cur->dtype) : n->out[0];
    node(c, MG_OP_Range, n, 3, range_in, 1, &idx);
    mg_value *gather_in[2] = {cur, idx};
    mg_node *gather = mg_rw_node(&c->w, MG_OP_Gather, n->name, 2, gather_in, 1, &next);
    mg_rw_attr_int(&c->w, gather, "axis", sr[i].axis);
    cur = next;
  }
  return 1;
}

/* ---------- Trilu (mindspore) -> Where ---------- */

/* Where(mask, x, 0): the mask of the kept triangle (j - i >= k upper, <= k lower)
 * over the last two dims, a constant computed here; exact, inf and NaN included. */
static int lower_trilu(lower_ctx *c, mg_node *n) {
  mg_value *x = n->in[0];
  const mg_shape *s = &x->shape;
  if (s->rank < 2 || s->d[s->rank - 2].v < 0 || s->d[s->rank - 1].v < 0) return refuse(c, "the last two dims are not static");
  int64_t rows = s->d[s->rank - 2].v, cols = s->d[s->rank - 1].v, k = 0;
  if (n->n_in > 1 && n->in[1]) {
    if (!n->in[1]->data || mg_value_ints(n->in[1], &k, 1) != 1) return refuse(c, "k is not a constant");
  }
  if (rows * cols > (int64_t)1 << 24) return refuse(c, "the mask would be too large");
  int upper = mg_attr_int(n, "upper", 1) != 0;
  unsigned char *mask = mg_arena_alloc(&c->w.m->arena, (size_t)(rows * cols) + 1);
  if (!mask) return refuse(c, "out of memory");
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) mask[i * cols + j] = upper ? j - i >= k : j - i <= k;
  mg_shape ms = {.rank = 2};
  ms.d[0].v = rows, ms.d[1].v = cols;
  static const unsigned char zero[16];
  if (mg_dtype_size(x->dtype) > sizeof zero || x->dtype == MG_STRING) return refuse(c, "a dtype without a zero constant");
  mg_value *in[3] = {mg_rw_const(&c->w, "trilu_mask", MG_BOOL, &ms, mask, (size_t)(rows * cols)), x,
                     mg_rw_const(&c->w, "trilu_zero", x->dtype, &SCALAR, zero, mg_dtype_size(x->dtype))};
  node(c, MG_OP_Where, n, 3, in, 1, &n->out[0]);
  return 1;
}

/* ---------- ReduceSumSquare, ReduceL1, ReduceL2, ReduceLogSum (mindspore) ---------- */

/* out := op(x) reducing as n does (n's axes input and attributes). */
static void reduce_as(lower_ctx *c, mg_node *n, mg_op op, mg_value *x, mg_value *out) {
  mg_value *in[2] = {x, n->n_in > 1 ? n->in[1] : NULL};
  mg_node *r = mg_rw_node(&c->w, op, n->name, n->n_in > 1 && n->in[1] ? 2 : 1, in, 1, &out);
  for (int k = 0; k < n->n_attr; k++) append_attr(c, r, &n->attr[k]);
}

/* ReduceSum(Mul(x, x)). */
static int lower_reduce_sum_square(lower_ctx *c, mg_node *n) {
  mg_value *sq = temp(c, n, n->in[0]->dtype), *in[2] = {n->in[0], n->in[0]};
  node(c, MG_OP_Mul, n, 2, in, 1, &sq);
  reduce_as(c, n, MG_OP_ReduceSum, sq, n->out[0]);
  return 1;
}

/* ReduceSum(Abs(x)). */
static int lower_reduce_l1(lower_ctx *c, mg_node *n) {
  mg_value *a = temp(c, n, n->in[0]->dtype);
  node(c, MG_OP_Abs, n, 1, &n->in[0], 1, &a);
  reduce_as(c, n, MG_OP_ReduceSum, a, n->out[0]);
  return 1;
}

/* Sqrt(ReduceSum(Mul(x, x))), floats only. */
static int lower_reduce_l2(lower_ctx *c, mg_node *n) {
  if (!mg_dtype_is_float(n->in[0]->dtype)) return refuse(c, "ReduceL2 of a non-float dtype");
  mg_value *sq = temp(c, n, n->in[0]->dtype), *sum = temp(c, n, n->in[0]->dtype), *in[2] = {n->in[0], n->in[0]};
  node(c, MG_OP_Mul, n, 2, in, 1, &sq);
  reduce_as(c, n, MG_OP_ReduceSum, sq, sum);
  node(c, MG_OP_Sqrt, n, 1, &sum, 1, &n->out[0]);
  return 1;
}

/* Log(ReduceSum(x)), floats only. */
static int lower_reduce_log_sum(lower_ctx *c, mg_node *n) {
  if (!mg_dtype_is_float(n->in[0]->dtype)) return refuse(c, "ReduceLogSum of a non-float dtype");
  mg_value *sum = temp(c, n, n->in[0]->dtype);
  reduce_as(c, n, MG_OP_ReduceSum, n->in[0], sum);
  node(c, MG_OP_Log, n, 1, &sum, 1, &n->out[0]);
  return 1;
}

/* ---------- Max, Min, Sum of three or more inputs -> pairs ---------- */

/* ((in0 op in1) op in2) ...: Max, Min and Sum broadcast every input together, so
 * pairs broadcast to the same shape and compute the same elements. */
static int lower_variadic(lower_ctx *c, mg_node *n) {
  mg_op op = n->op == MG_OP_Sum ? MG_OP_Add : n->op;
  if (n->n_in < 3) return refuse(c, "fewer than three inputs");
  mg_value *acc = n->in[0];
  for (int i = 1; i < n->n_in && !c->w.failed; i++) {
    if (!n->in[i]) return refuse(c, "an omitted input");
    mg_value *next = i + 1 < n->n_in ? temp(c, n, n->out[0]->dtype) : n->out[0];
    mg_value *in[2] = {acc, n->in[i]};
    node(c, op, n, 2, in, 1, &next);
    acc = next;
  }
  return 1;
}

/* ---------- Gemm (mindspore) -> Transpose MatMul Mul Add ---------- */

/* alpha * A' B' + beta * C, A' and B' transposed as transA and transB say; a Mul
 * only where alpha or beta is not 1. */
static int lower_gemm(lower_ctx *c, mg_node *n) {
  mg_value *a = n->in[0], *b = n->in[1], *cc = n->n_in > 2 ? n->in[2] : NULL;
  mg_dtype t = n->out[0]->dtype;
  float alpha = mg_attr_float(n, "alpha", 1), beta = mg_attr_float(n, "beta", 1);
  if ((alpha != 1 || (cc && beta != 1)) && !mg_dtype_is_float(t)) return refuse(c, "alpha or beta on integers");
  if (mg_attr_int(n, "transA", 0)) {
    mg_value *at = temp(c, n, a->dtype);
    swap_last(c, n, a, 2, at);
    a = at;
  }
  if (mg_attr_int(n, "transB", 0)) {
    mg_value *bt = temp(c, n, b->dtype);
    swap_last(c, n, b, 2, bt);
    b = bt;
  }
  int more = alpha != 1 || cc;
  mg_value *prod = more ? temp(c, n, t) : n->out[0], *mm_in[2] = {a, b};
  node(c, MG_OP_MatMul, n, 2, mm_in, 1, &prod);
  if (alpha != 1) {
    mg_value *scaled = cc ? temp(c, n, t) : n->out[0];
    mg_value *in[2] = {prod, mg_rw_const_fill(&c->w, "gemm_alpha", t, &SCALAR, alpha)};
    node(c, MG_OP_Mul, n, 2, in, 1, &scaled);
    prod = scaled;
  }
  if (cc) {
    if (beta != 1) {
      mg_value *cb = temp(c, n, t), *in[2] = {cc, mg_rw_const_fill(&c->w, "gemm_beta", t, &SCALAR, beta)};
      node(c, MG_OP_Mul, n, 2, in, 1, &cb);
      cc = cb;
    }
    mg_value *in[2] = {prod, cc};
    node(c, MG_OP_Add, n, 2, in, 1, &n->out[0]);
  }
  return 1;
}

/* ---------- NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss (mindspore) ---------- */

/* An integer scalar constant of dtype t (int32 or int64). */
static mg_value *int_scalar(lower_ctx *c, const char *base, mg_dtype t, int64_t v) {
  int32_t v32 = (int32_t)v;
  return t == MG_I32 ? mg_rw_const(&c->w, base, t, &SCALAR, &v32, 4) : mg_rw_const(&c->w, base, MG_I64, &SCALAR, &v, 8);
}

/* out := a reduction of x over every axis to a scalar (keepdims 0). */
static void reduce_all(lower_ctx *c, const mg_node *n, mg_op op, mg_value *x, mg_value *out) {
  mg_node *r = mg_rw_node(&c->w, op, n->name, 1, &x, 1, &out);
  mg_rw_attr_int(&c->w, r, "keepdims", 0);
  fill_defaults(c, r);
}

/* loss[n, d...] = -input[n, target[n, d...], d...] * weight[target] (0 where target
 * is ignore_index), then none / sum / mean (the sum over the weights taken):
 * ONNX's definition, with every index made valid before a gather reads it. */
static int lower_nll(lower_ctx *c, mg_node *n) {
  mg_value *x = n->in[0], *t = n->in[1], *w = n->n_in > 2 ? n->in[2] : NULL;
  const char *red = mg_attr_str(n, "reduction", "mean");
  const mg_attr *ii = mg_node_attr(n, "ignore_index");
  mg_dtype ft = x->dtype, it = t->dtype;
  if (!mg_dtype_is_float(ft) || (it != MG_I64 && it != MG_I32)) return refuse(c, "a non-float input or non-int target");
  if (strcmp(red, "none") && strcmp(red, "sum") && strcmp(red, "mean")) return refuse(c, "an unknown reduction");
  if (!mg_shape_is_static(&t->shape) || x->shape.rank != t->shape.rank + 1 || t->shape.rank > MG_MAX_RANK - 1)
    return refuse(c, "the target's shape is not static");
  int64_t tdims[MG_MAX_RANK], udims[MG_MAX_RANK];
  int r = t->shape.rank;
  for (int k = 0; k < r; k++) tdims[k] = t->shape.d[k].v;
  udims[0] = tdims[0], udims[1] = 1;
  for (int k = 1; k < r; k++) udims[k + 1] = tdims[k];
  mg_value *mask = NULL, *safe = t;
  if (ii) {
    mg_value *eq_in[2] = {t, int_scalar(c, "nll_ignore_index", it, ii->i)};
    mask = temp(c, n, MG_BOOL);
    node(c, MG_OP_Equal, n, 2, eq_in, 1, &mask);
    mg_value *wh_in[3] = {mask, int_scalar(c, "nll_zero_index", it, 0), t};
    safe = temp(c, n, it);
    node(c, MG_OP_Where, n, 3, wh_in, 1, &safe);
  }
  mg_value *tu = temp(c, n, it), *ru_in[2] = {safe, mg_rw_const_i64(&c->w, "nll_index_shape", udims, r + 1, 1)};
  node(c, MG_OP_Reshape, n, 2, ru_in, 1, &tu);
  mg_value *picked = temp(c, n, ft), *ge_in[2] = {x, tu};
  mg_node *ge = mg_rw_node(&c->w, MG_OP_GatherElements, n->name, 2, ge_in, 1, &picked);
  mg_rw_attr_int(&c->w, ge, "axis", 1);
  fill_defaults(c, ge);
  mg_value *flat = temp(c, n, ft), *rf_in[2] = {picked, mg_rw_const_i64(&c->w, "nll_loss_shape", tdims, r, 1)};
  node(c, MG_OP_Reshape, n, 2, rf_in, 1, &flat);
  mg_value *neg = temp(c, n, ft);
  node(c, MG_OP_Neg, n, 1, &flat, 1, &neg);
  mg_value *wt = NULL;
  if (w) {
    mg_value *g_in[2] = {w, safe};
    wt = temp(c, n, ft);
    node(c, MG_OP_Gather, n, 2, g_in, 1, &wt);
  }
  if (mask) {
    mg_value *zero = mg_rw_const_fill(&c->w, "nll_zero", ft, &SCALAR, 0);
    mg_value *keep = wt ? wt : mg_rw_const_fill(&c->w, "nll_one", ft, &SCALAR, 1);
    mg_value *wh_in[3] = {mask, zero, keep}, *masked = temp(c, n, ft);
    node(c, MG_OP_Where, n, 3, wh_in, 1, &masked);
    wt = masked;
  }
  int none = !strcmp(red, "none");
  mg_value *loss = neg;
  if (wt) {
    mg_value *m_in[2] = {neg, wt};
    loss = none ? n->out[0] : temp(c, n, ft);
    node(c, MG_OP_Mul, n, 2, m_in, 1, &loss);
  } else if (none) {
    mg_value *id_in[2] = {neg, mg_rw_const_i64(&c->w, "nll_loss_shape", tdims, r, 1)};
    node(c, MG_OP_Reshape, n, 2, id_in, 1, &n->out[0]);
  }
  if (none) return 1;
  if (!strcmp(red, "sum")) {
    reduce_all(c, n, MG_OP_ReduceSum, loss, n->out[0]);
  } else if (!wt) {
    reduce_all(c, n, MG_OP_ReduceMean, loss, n->out[0]);
  } else {
    mg_value *num = temp(c, n, ft), *den = temp(c, n, ft);
    reduce_all(c, n, MG_OP_ReduceSum, loss, num);
    reduce_all(c, n, MG_OP_ReduceSum, wt, den);
    mg_value *d_in[2] = {num, den};
    node(c, MG_OP_Div, n, 2, d_in, 1, &n->out[0]);
  }
  return 1;
}

/* NegativeLogLikelihoodLoss(LogSoftmax(scores, axis 1), labels, weights), the
 * log-probabilities being the second output when the node has one. */
static int lower_sce(lower_ctx *c, mg_node *n) {
  mg_value *scores = n->in[0];
  if (!mg_dtype_is_float(scores->dtype)) return refuse(c, "non-float scores");
  mg_value *lp = n->n_out > 1 && n->out[1] ? n->out[1] : temp(c, n, scores->dtype);
  mg_node *ls = mg_rw_node(&c->w, MG_OP_LogSoftmax, n->name, 1, &scores, 1, &lp);
  mg_rw_attr_int(&c->w, ls, "axis", 1);
  fill_defaults(c, ls);
  mg_value *in[3] = {lp, n->in[1], n->n_in > 2 ? n->in[2] : NULL};
  mg_node *nll = mg_rw_node(&c->w, MG_OP_NegativeLogLikelihoodLoss, n->name, in[2] ? 3 : 2, in, 1, &n->out[0]);
  for (int k = 0; k < n->n_attr; k++) append_attr(c, nll, &n->attr[k]);
  return 1;
}

/* ---------- ArgMax, ArgMin with select_last_index (mindspore) -> Slice ArgMax Sub ---------- */

/* The last extreme index is (d - 1) - the first one in the reversed axis. */
static int lower_arg_last(lower_ctx *c, mg_node *n) {
  mg_value *x = n->in[0];
  int64_t axis = mg_attr_int(n, "axis", 0), rank = x->shape.rank;
  if (rank < 1) return refuse(c, "the input rank is unknown or 0");
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank || x->shape.d[axis].v < 1) return refuse(c, "the axis length is not static");
  int64_t start = -1, end = INT64_MIN, step = -1, last = x->shape.d[axis].v - 1;
  mg_value *rev = temp(c, n, x->dtype);
  mg_value *sl_in[5] = {x, mg_rw_const_i64(&c->w, "arg_start", &start, 1, 1), mg_rw_const_i64(&c->w, "arg_end", &end, 1, 1),
                        mg_rw_const_i64(&c->w, "arg_axis", &axis, 1, 1), mg_rw_const_i64(&c->w, "arg_step", &step, 1, 1)};
  node(c, MG_OP_Slice, n, 5, sl_in, 1, &rev);
  mg_value *idx = temp(c, n, MG_I64);
  mg_node *a = mg_rw_node(&c->w, n->op, n->name, 1, &rev, 1, &idx);
  for (int k = 0; k < n->n_attr; k++)
    if (strcmp(n->attr[k].name, "select_last_index")) append_attr(c, a, &n->attr[k]);
  mg_rw_attr_int(&c->w, a, "select_last_index", 0);
  mg_value *sub_in[2] = {mg_rw_const_i64(&c->w, "arg_last", &last, 1, 0), idx};
  node(c, MG_OP_Sub, n, 2, sub_in, 1, &n->out[0]);
  return 1;
}

/* ---------- activations without a matching API (mindspore) -> Where ---------- */

/* A scalar constant of float dtype t; a refusal (NULL) for other dtypes. */
static mg_value *fconst(lower_ctx *c, const char *base, mg_dtype t, double v) {
  return mg_rw_const_fill(&c->w, base, t, &SCALAR, v);
}

/* out := op(a, b) for a binary op. */
static mg_value *bin(lower_ctx *c, const mg_node *n, mg_op op, mg_value *a, mg_value *b, mg_dtype t, mg_value *out) {
  mg_value *in[2] = {a, b}, *y = out ? out : temp(c, n, t);
  node(c, op, n, 2, in, 1, &y);
  return y;
}

/* out := Where(cond, a, b). */
static void where(lower_ctx *c, const mg_node *n, mg_value *cond, mg_value *a, mg_value *b, mg_value *out) {
  mg_value *in[3] = {cond, a, b};
  node(c, MG_OP_Where, n, 3, in, 1, &out);
}

/* ThresholdedRelu: Where(x > alpha, x, 0). */
static int lower_thresholded_relu(lower_ctx *c, mg_node *n) {
  mg_value *x = n->in[0];
  mg_value *alpha = fconst(c, "thresholded_relu_alpha", x->dtype, mg_attr_float(n, "alpha", 1)),
           *zero = fconst(c, "thresholded_relu_zero", x->dtype, 0);
  if (!alpha || !zero) return refuse(c, "a non-float dtype");
  where(c, n, bin(c, n, MG_OP_Greater, x, alpha, MG_BOOL, NULL), x, zero, n->out[0]);
  return 1;
}

/* Shrink: x + bias where x < -lambd, x - bias where x > lambd, else 0. */
static int lower_shrink(lower_ctx *c, mg_node *n) {
  mg_value *x = n->in[0];
  mg_dtype t = x->dtype;
  double l = mg_attr_float(n, "lambd", 0.5f), b = mg_attr_float(n, "bias", 0);
  mg_value *neg_l = fconst(c, "shrink_neg_lambd", t, -l), *pos_l = fconst(c, "shrink_lambd", t, l),
           *bias = fconst(c, "shrink_bias", t, b), *zero = fconst(c, "shrink_zero", t, 0);
  if (!neg_l || !pos_l || !bias || !zero) return refuse(c, "a non-float dtype");
  mg_value *hi = temp(c, n, t);
  where(c, n, bin(c, n, MG_OP_Greater, x, pos_l, MG_BOOL, NULL), bin(c, n, MG_OP_Sub, x, bias, t, NULL), zero, hi);
  where(c, n, bin(c, n, MG_OP_Less, x, neg_l, MG_BOOL, NULL), bin(c, n, MG_OP_Add, x, bias, t, NULL), hi, n->out[0]);
  return 1;
}

/* Elu with any alpha: Where(x < 0, alpha * (exp(x) - 1), x). Selu: gamma times
 * Where(x > 0, x, alpha * (exp(x) - 1)). */
static int lower_elu_selu(lower_ctx *c, mg_node *n) {
  mg_value *x = n->in[0];
  mg_dtype t = x->dtype;
  int selu = n->op == MG_OP_Selu;
  double alpha = mg_attr_float(n, "alpha", selu ? 1.67326319217681884765625f : 1.0f);
  mg_value *a = fconst(c, "elu_alpha", t, alpha), *one = fconst(c, "elu_one", t, 1), *zero = fconst(c, "elu_zero", t, 0);
  mg_value *g = selu ? fconst(c, "selu_gamma", t, mg_attr_float(n, "gamma", 1.05070102214813232421875f)) : one;
  if (!a || !one || !zero || !g) return refuse(c, "a non-float dtype");
  mg_value *e = temp(c, n, t);
  node(c, MG_OP_Exp, n, 1, &x, 1, &e);
  mg_value *neg = bin(c, n, MG_OP_Mul, a, bin(c, n, MG_OP_Sub, e, one, t, NULL), t, NULL);
  if (!selu) {
    where(c, n, bin(c, n, MG_OP_Less, x, zero, MG_BOOL, NULL), neg, x, n->out[0]);
    return 1;
  }
  mg_value *pos = temp(c, n, t);
  where(c, n, bin(c, n, MG_OP_Greater, x, zero, MG_BOOL, NULL), x, neg, pos);
  bin(c, n, MG_OP_Mul, g, pos, t, n->out[0]);
  return 1;
}

/* PRelu with any broadcastable slope: Where(x < 0, x * slope, x). */
static int lower_prelu(lower_ctx *c, mg_node *n) {
  mg_value *x = n->in[0];
  mg_value *zero = fconst(c, "prelu_zero", x->dtype, 0);
  if (!zero) return refuse(c, "a non-float dtype");
  where(c, n, bin(c, n, MG_OP_Less, x, zero, MG_BOOL, NULL), bin(c, n, MG_OP_Mul, x, n->in[1], x->dtype, NULL), x,
        n->out[0]);
  return 1;
}

/* IsInf: Equal(Abs(x), inf) for both signs, Equal(x, +inf) or Equal(x, -inf) for
 * one, Equal(x, NaN) (false everywhere) for neither. */
static int lower_isinf(lower_ctx *c, mg_node *n) {
  mg_value *x = n->in[0];
  int pos = mg_attr_int(n, "detect_positive", 1) != 0, neg = mg_attr_int(n, "detect_negative", 1) != 0;
  double inf = (double)INFINITY, v = pos && neg ? inf : pos ? inf : neg ? -inf : (double)NAN;
  mg_value *k = fconst(c, "isinf_limit", x->dtype, v);
  if (!k) return refuse(c, "a non-float dtype");
  mg_value *a = x;
  if (pos && neg) {
    a = temp(c, n, x->dtype);
    node(c, MG_OP_Abs, n, 1, &x, 1, &a);
  }
  bin(c, n, MG_OP_Equal, a, k, MG_BOOL, n->out[0]);
  return 1;
}

/* Mean of two or more inputs: their pairwise Sum divided by the count. */
static int lower_mean(lower_ctx *c, mg_node *n) {
  mg_dtype t = n->out[0]->dtype;
  mg_value *k = fconst(c, "mean_count", t, n->n_in);
  if (!k || n->n_in < 2) return refuse(c, "a non-float dtype or one input");
  mg_value *acc = n->in[0];
  for (int i = 1; i < n->n_in; i++) {
    if (!n->in[i]) return refuse(c, "an omitted input");
    acc = bin(c, n, MG_OP_Add, acc, n->in[i], t, NULL);
  }
  bin(c, n, MG_OP_Div, acc, k, t, n->out[0]);
  return 1;
}

/* ---------- the driver ---------- */

static const struct {
  mg_op op;
  const char *into; /* the <decompose into> list, exactly */
  recipe_fn fn;
} RECIPES[] = {
    {MG_OP_Einsum, "Transpose MatMul", lower_einsum},
    {MG_OP_HardSigmoid, "Mul Add Clip", lower_hardsigmoid},
    {MG_OP_Equal, "Sub Cast Not", lower_equal},
    {MG_OP_Not, "Cast Sub", lower_not},
    {MG_OP_Flatten, "Reshape", lower_to_reshape},
    {MG_OP_Unsqueeze, "Reshape", lower_to_reshape},
    {MG_OP_ConstantOfShape, "Expand", lower_constant_of_shape},
    {MG_OP_Conv, "Split Conv Concat", lower_grouped_conv},
    {MG_OP_Slice, "Range Gather", lower_slice},
    {MG_OP_Squeeze, "Reshape", lower_to_reshape},
    {MG_OP_Trilu, "Where", lower_trilu},
    {MG_OP_ReduceSumSquare, "Mul ReduceSum", lower_reduce_sum_square},
    {MG_OP_ReduceL1, "Abs ReduceSum", lower_reduce_l1},
    {MG_OP_ReduceL2, "Mul ReduceSum Sqrt", lower_reduce_l2},
    {MG_OP_ReduceLogSum, "ReduceSum Log", lower_reduce_log_sum},
    {MG_OP_Max, "Max", lower_variadic},
    {MG_OP_Min, "Min", lower_variadic},
    {MG_OP_Sum, "Add", lower_variadic},
    {MG_OP_Gemm, "Transpose MatMul Mul Add", lower_gemm},
    {MG_OP_NegativeLogLikelihoodLoss, "Equal Where Reshape GatherElements Neg Gather Mul ReduceSum ReduceMean Div",
     lower_nll},
    {MG_OP_SoftmaxCrossEntropyLoss, "LogSoftmax NegativeLogLikelihoodLoss", lower_sce},
    {MG_OP_ArgMax, "Slice ArgMax Sub", lower_arg_last},
    {MG_OP_ArgMin, "Slice ArgMin Sub", lower_arg_last},
    {MG_OP_ThresholdedRelu, "Greater Where", lower_thresholded_relu},
    {MG_OP_Shrink, "Greater Less Sub Add Where", lower_shrink},
    {MG_OP_Elu, "Exp Sub Mul Less Where", lower_elu_selu},
    {MG_OP_Selu, "Exp Sub Mul Greater Where", lower_elu_selu},
    {MG_OP_PRelu, "Less Mul Where", lower_prelu},
    {MG_OP_Mean, "Add Div", lower_mean},
    {MG_OP_IsInf, "Abs Equal", lower_isinf},
    {MG_OP_RoiAlign, "Cast RoiAlign", lower_roi_align_indices},
};

/* The recipe for op decomposed into `into`, or NULL. */
static recipe_fn find_recipe(mg_op op, const char *into) {
  for (size_t i = 0; i < sizeof RECIPES / sizeof RECIPES[0]; i++)
    if (RECIPES[i].op == op && !strcmp(RECIPES[i].into, into)) return RECIPES[i].fn;
  return NULL;
}

int map_lower_has_recipe(mg_op op, const char *into) { return find_recipe(op, into) != NULL; }

/* The recipe for rule r (a decomposition), or NULL. */
static recipe_fn recipe_for(const rule *r) {
  char into[256] = "";
  for (int i = 0; i < r->n_decompose; i++)
    snprintf(into + strlen(into), sizeof into - strlen(into), "%s%s", i ? " " : "", r->decompose[i]);
  return find_recipe(r->op, into);
}

typedef struct {
  mg_model *m;
  const rule_set *rs;
  mg_diags *d;
  int lowered, failed;
  const mg_node **refused; /* nodes already reported, so that a later round does not repeat */
  int n_refused, cap_refused;
} lower_run;

static int was_refused(const lower_run *run, const mg_node *n) {
  for (int i = 0; i < run->n_refused; i++)
    if (run->refused[i] == n) return 1;
  return 0;
}

/* Reports (once) that n stays as it is. */
static void report(lower_run *run, const mg_node *n, const char *why) {
  if (was_refused(run, n)) return;
  if (run->n_refused == run->cap_refused) {
    int cap = run->cap_refused ? 2 * run->cap_refused : 16;
    const mg_node **list = mg_realloc(run->refused, sizeof *list * (size_t)cap);
    if (!list) {
      run->failed = 1;
      return;
    }
    run->refused = list, run->cap_refused = cap;
  }
  run->refused[run->n_refused++] = n;
  mg_error(run->d, UNSUPPORTED, n->name, n->op_type, "%s: %s does not decompose: %s", run->rs->target, n->op_type, why);
}

/* One round over graph g: every node whose rule decomposes it is rewritten. */
static int lower_graph(mg_graph *g, void *ctx) {
  lower_run *run = ctx;
  lower_ctx c = {0};
  mg_rw_begin(&c.w, run->m, g);
  int n_nodes = g->n_nodes;
  mg_node **nodes = g->nodes;
  for (int i = 0; i < n_nodes; i++) {
    mg_node *n = nodes[i];
    map_status st;
    char detail[1024];
    const rule *r = map_match(n, run->rs, &st, detail, sizeof detail);
    recipe_fn fn = r && r->n_decompose ? recipe_for(r) : NULL;
    if (!r || !r->n_decompose || was_refused(run, n)) {
      mg_rw_keep(&c.w, n);
      continue;
    }
    c.why[0] = 0;
    if (fn && fn(&c, n)) {
      run->lowered++;
      continue;
    }
    report(run, n, fn ? c.why : "no recipe for this decomposition (mapping/lower.c)");
    mg_rw_keep(&c.w, n);
  }
  if (mg_rw_end(&c.w)) run->failed = 1;
  return run->failed;
}

int map_lower(mg_model *m, const rule_set *rs, mg_diags *d) {
  lower_run run = {.m = m, .rs = rs, .d = d};
  int rc = 0;
  for (int round = 0; round < MAX_ROUNDS; round++) {
    int before = run.lowered;
    mg_graph_walk(m->graph, lower_graph, &run);
    if (run.failed) break;
    if (run.lowered == before) break;
    ir_count_uses(m);
    if (pass_dce(m) < 0) {
      run.failed = 1;
      break;
    }
    if (ir_infer_shapes(m, NULL, 0, d)) {
      rc = -1;
      break;
    }
  }
  mg_free(run.refused);
  if (run.failed) {
    mg_error(d, OOM, NULL, NULL, "out of memory");
    return -1;
  }
  return rc ? rc : run.lowered;
}
