/* Values of run-time length in the C backend.
 *
 * A length that depends on the data (NonZero, TopK with a run-time k,
 * NonMaxSuppression, ConstantOfShape of a computed shape, a MigcSelect between
 * branches of different shapes) makes its output, and what is computed from it,
 * a dynamic value. It is planned at its largest shape, and its actual dims live
 * in model_run's local int64_t rd[] (rd_off gives its slots). Its elements sit
 * where the largest shape puts them ("max layout"): element (i, j) of a [n, m]
 * value whose largest shape is [N, M] is at i * M + j. So an op that computes
 * each output element from the input elements at matching coordinates
 * (elementwise ops, Transpose, Gather along a static axis, ...) runs its ordinary
 * kernel over the largest shape ("position-wise"): the elements past the actual
 * dims are don't-care, and the kernels clamp indices, so reading them is
 * harmless. Ops that depend on the actual length (TopK, Concat or Slice along
 * the varying axis, a reduction over it, Shape, NonMaxSuppression) have emitters
 * here that read rd[]; they need the max layout to be the dense one (see
 * cg_dyn_dense).
 *
 * cg_bound_dynamic runs before fusion and planning: for each node, in order, a
 * rule gives each output its largest shape, which dims vary, and the C
 * expression of each dim. A node that reads a dynamic value and has no rule is
 * marked failed and reported: its kernel never runs over the largest shape.
 * Where a position-wise kernel is right only if two run-time dims agree (a
 * broadcast), the rule adds a guard, and the generated code returns
 * MG_RT_EUNSUPPORTED when it fails rather than computing something else.
 *
 * Small int tensors computed at run time (the shape arithmetic that feeds a
 * ConstantOfShape) carry upper bounds of their elements (vbound), from Shape of
 * a dynamic value through Gather, Concat, the views, Cast, Min and ReduceMin
 * (cg_dynamic_bounds.c). The emitters of DYN_OWN nodes are in cg_dynamic_emit.c. */
#include "cg_internal.h"
#include <stdarg.h>
#include <stdio.h>
#include <string.h>


static int fail(rule_ctx *r, const char *why) {
  r->why = why;
  return DYN_FAILED;
}


int cg_dyn_dense(const cg_ctx *c, const mg_value *v) {
  if (!is_dyn(c, v)) return 1;
  unsigned m = c->rd_mask[v->id];
  if (m & (m - 1)) return 0;
  for (int k = 0; k < v->shape.rank && !(m >> k & 1); k++)
    if (v->shape.d[k].v != 1) return 0;
  return 1;
}

static int dense_shape(const dshape *s) {
  if (!s->mask) return 1;
  if (s->mask & (s->mask - 1)) return 0;
  for (int k = 0; k < s->rank && !(s->mask >> k & 1); k++)
    if (s->max[k] != 1) return 0;
  return 1;
}

static int64_t prod_max(const dshape *s, int from, int to) {
  int64_t p = 1;
  for (int k = from; k < to; k++) p *= s->max[k];
  return p;
}

static void add_guard(rule_ctx *r, const char *cond) {
  r->guard = r->guard ? str(r->c, "%s || %s", r->guard, cond) : cond;
}

static int norm(int64_t axis, int rank, int *out) {
  if (axis < -rank || axis >= rank) return -1;
  *out = (int)(axis < 0 ? axis + rank : axis);
  return 0;
}

/* ------------------------------------------------------------ rules */

int cg_elementwise_op(mg_op op) {
  switch (op) {
  case MG_OP_Abs: case MG_OP_Acos: case MG_OP_Acosh: case MG_OP_Asin: case MG_OP_Asinh: case MG_OP_Atan:
  case MG_OP_Atanh: case MG_OP_BitwiseNot: case MG_OP_Ceil: case MG_OP_Celu: case MG_OP_Cos: case MG_OP_Cosh:
  case MG_OP_Elu: case MG_OP_Erf: case MG_OP_Exp: case MG_OP_Floor: case MG_OP_Gelu: case MG_OP_HardSigmoid:
  case MG_OP_HardSwish: case MG_OP_LeakyRelu: case MG_OP_Log: case MG_OP_Mish: case MG_OP_Neg:
  case MG_OP_Reciprocal: case MG_OP_Relu: case MG_OP_Round: case MG_OP_Selu: case MG_OP_Shrink:
  case MG_OP_Sigmoid: case MG_OP_Sign: case MG_OP_Sin: case MG_OP_Sinh: case MG_OP_Softplus:
  case MG_OP_Softsign: case MG_OP_Sqrt: case MG_OP_Tan: case MG_OP_Tanh: case MG_OP_ThresholdedRelu:
  case MG_OP_Clip: case MG_OP_IsNaN: case MG_OP_IsInf: case MG_OP_Not: case MG_OP_Cast: case MG_OP_Where:
  case MG_OP_PRelu: case MG_OP_Add: case MG_OP_Sub: case MG_OP_Mul: case MG_OP_Div: case MG_OP_Pow:
  case MG_OP_Mod: case MG_OP_BitShift: case MG_OP_BitwiseAnd: case MG_OP_BitwiseOr: case MG_OP_BitwiseXor:
  case MG_OP_And: case MG_OP_Or: case MG_OP_Xor: case MG_OP_Max: case MG_OP_Min: case MG_OP_Sum:
  case MG_OP_Mean: case MG_OP_Equal: case MG_OP_Greater: case MG_OP_GreaterOrEqual: case MG_OP_Less:
  case MG_OP_LessOrEqual: case MG_OP_Identity: case MG_OP_Dropout:
    return 1;
  default:
    return 0;
  }
}

/* Numpy broadcast of the inputs: a varying axis may meet only static 1s and
 * other varying axes of the same largest length, which must agree at run time. */
static int rule_broadcast(rule_ctx *r, int n_in) {
  cg_ctx *c = r->c;
  dshape s[8];
  int rank = 0;
  if (n_in > 8) return fail(r, "more than 8 inputs");
  for (int i = 0; i < n_in; i++) {
    if (!r->n->in[i]) { /* an omitted optional input (Clip's min or max) */
      s[i] = (dshape){0};
      continue;
    }
    din(c, r->n->in[i], &s[i]);
    if (s[i].rank > rank) rank = s[i].rank;
  }
  dshape *o = &r->out[0];
  o->rank = rank;
  for (int k = 0; k < rank; k++) {
    int64_t mx = 1, big_static = 1;
    const char *first = NULL;
    int64_t first_max = -1;
    for (int i = 0; i < n_in; i++) {
      int j = k - (rank - s[i].rank);
      if (j < 0) continue;
      int64_t m = s[i].max[j];
      if (m != 1 && mx != 1 && m != mx) return fail(r, "the largest shapes do not broadcast");
      if (m != 1) mx = m;
      if (s[i].mask >> j & 1) {
        if (!first) first = s[i].expr[j], first_max = m;
        else if (m != first_max) return fail(r, "two run-time lengths of different largest lengths meet");
        else if (strcmp(first, s[i].expr[j])) add_guard(r, str(c, "%s != %s", first, s[i].expr[j]));
      } else if (m != 1) {
        big_static = m;
      }
    }
    if (first && big_static != 1)
      return fail(r, "a run-time length meets a static one in a broadcast");
    o->max[k] = first ? first_max : mx;
    o->expr[k] = first ? first : str(c, "%lld", (long long)o->max[k]);
    if (first) o->mask |= 1u << k;
  }
  return DYN_POSITIONWISE;
}

static int rule_transpose(rule_ctx *r) {
  dshape x;
  din(r->c, r->n->in[0], &x);
  const int64_t *p = NULL;
  size_t np = mg_attr_ints(r->n, "perm", &p);
  int has = mg_node_attr(r->n, "perm") != NULL;
  if (has && (int)np != x.rank) return fail(r, "bad perm");
  dshape *o = &r->out[0];
  o->rank = x.rank;
  for (int d = 0; d < x.rank; d++) {
    int64_t a = has ? p[d] : x.rank - 1 - d;
    if (a < 0 || a >= x.rank) return fail(r, "bad perm");
    o->max[d] = x.max[a], o->expr[d] = x.expr[a];
    if (x.mask >> a & 1) o->mask |= 1u << d;
  }
  return DYN_POSITIONWISE;
}

static int rule_unsqueeze(rule_ctx *r) {
  dshape x;
  din(r->c, r->n->in[0], &x);
  int64_t ax[MG_MAX_RANK];
  int64_t na = cg_const_ints(r->n->n_in > 1 ? r->n->in[1] : NULL, ax, MG_MAX_RANK);
  if (na < 0 || x.rank + na > MG_MAX_RANK) return fail(r, "axes must be a constant");
  int rank = x.rank + (int)na, ins[MG_MAX_RANK] = {0};
  for (int i = 0; i < na; i++) {
    int a;
    if (norm(ax[i], rank, &a) || ins[a]++) return fail(r, "bad axes");
  }
  dshape *o = &r->out[0];
  o->rank = rank;
  for (int d = 0, j = 0; d < rank; d++) {
    if (ins[d]) {
      o->max[d] = 1, o->expr[d] = "1";
      continue;
    }
    o->max[d] = x.max[j], o->expr[d] = x.expr[j];
    if (x.mask >> j & 1) o->mask |= 1u << d;
    j++;
  }
  return DYN_POSITIONWISE;
}

static int rule_squeeze(rule_ctx *r) {
  dshape x;
  din(r->c, r->n->in[0], &x);
  int64_t ax[MG_MAX_RANK];
  int drop[MG_MAX_RANK] = {0};
  const mg_value *axes = r->n->n_in > 1 ? r->n->in[1] : NULL;
  if (axes) {
    int64_t na = cg_const_ints(axes, ax, MG_MAX_RANK);
    if (na < 0) return fail(r, "axes must be a constant");
    for (int i = 0; i < na; i++) {
      int a;
      if (norm(ax[i], x.rank, &a)) return fail(r, "bad axes");
      if (x.mask >> a & 1) return fail(r, "squeezing an axis of run-time length");
      if (x.max[a] != 1) return fail(r, "squeezing an axis longer than 1");
      drop[a] = 1;
    }
  } else {
    for (int a = 0; a < x.rank; a++) {
      if (x.max[a] == 1 && (x.mask >> a & 1)) return fail(r, "an axis of run-time length at most 1");
      drop[a] = x.max[a] == 1;
    }
  }
  dshape *o = &r->out[0];
  for (int a = 0; a < x.rank; a++) {
    if (drop[a]) continue;
    o->max[o->rank] = x.max[a], o->expr[o->rank] = x.expr[a];
    if (x.mask >> a & 1) o->mask |= 1u << o->rank;
    o->rank++;
  }
  return DYN_POSITIONWISE;
}

/* Reshape and Flatten of a dense input whose varying axis p lands in output
 * axis j: every output axis before j is 1, the static tail after p (S elements)
 * holds the output's tail after j (T elements) a whole number of times, and
 * output axis j is p's run-time length times S / T. */
static int reshape_dims(rule_ctx *r, const dshape *x, const int64_t *om, int orank, int j) {
  int p = varying_axis(x);
  dshape *o = &r->out[0];
  o->rank = orank;
  for (int d = 0; d < orank; d++) o->max[d] = om[d], o->expr[d] = str(r->c, "%lld", (long long)om[d]);
  if (p < 0) return DYN_POSITIONWISE;
  if (!dense_shape(x)) return fail(r, "a reshape of a value whose layout is not dense");
  int64_t S = prod_max(x, p + 1, x->rank), T = 1;
  for (int d = j + 1; d < orank; d++) T *= om[d];
  for (int d = 0; d < j; d++)
    if (om[d] != 1) return fail(r, "the run-time axis does not stay the leading one");
  if (T == 0 || S % T || om[j] != x->max[p] * (S / T)) return fail(r, "the run-time axis is split or merged with a longer one");
  o->mask = 1u << j;
  o->expr[j] = S / T == 1 ? x->expr[p] : str(r->c, "(%s * %lld)", x->expr[p], (long long)(S / T));
  return DYN_POSITIONWISE;
}

static int rule_flatten(rule_ctx *r) {
  dshape x;
  din(r->c, r->n->in[0], &x);
  int a;
  if (norm(mg_attr_int(r->n, "axis", 1), x.rank + 1, &a)) return fail(r, "bad axis");
  int64_t om[2] = {prod_max(&x, 0, a), prod_max(&x, a, x.rank)};
  int p = varying_axis(&x);
  return reshape_dims(r, &x, om, 2, p >= 0 && p >= a ? 1 : 0);
}

static int rule_reshape(rule_ctx *r) {
  dshape x;
  din(r->c, r->n->in[0], &x);
  int64_t t[MG_MAX_RANK], om[MG_MAX_RANK];
  int64_t q = cg_dyn_known_ints(r->c, r->n->in[1], t, MG_MAX_RANK);
  int p = varying_axis(&x), j = -1, runtime_entry = -1;
  if (q < 0) {
    /* torch's reshape(n, -1, 4): every entry known but the one that is the
     * run-time axis' length; it stands for that axis (checked at run time) */
    int64_t hi[8];
    unsigned exact;
    q = cg_dyn_vbound(r->c, r->n->in[1], hi, &exact);
    if (q <= 0 || p < 0 || r->n->in[1]->shape.rank != 1 || q != r->n->in[1]->shape.d[0].v)
      return fail(r, "the target shape is not a constant");
    for (int d = 0; d < q; d++) {
      t[d] = hi[d];
      if (exact >> d & 1) continue;
      if (runtime_entry >= 0) return fail(r, "the target shape has two entries known only at run time");
      runtime_entry = d;
    }
    t[runtime_entry] = x.max[p];
    j = runtime_entry;
  }
  int allowzero = (int)mg_attr_int(r->n, "allowzero", 0), neg = -1;
  int64_t known = 1;
  for (int d = 0; d < q; d++) {
    om[d] = t[d];
    if (t[d] == 0 && !allowzero) {
      if (d >= x.rank) return fail(r, "bad target shape");
      om[d] = x.max[d];
      if (d == p) j = d;
    }
    if (t[d] == -1) {
      if (neg >= 0) return fail(r, "two -1 entries");
      neg = d;
      continue;
    }
    if (om[d] < 0) return fail(r, "bad target shape");
    known *= om[d];
  }
  if (neg >= 0) {
    int64_t total = prod_max(&x, 0, x.rank);
    if (!known || total % known) return fail(r, "bad target shape");
    om[neg] = total / known;
    if (j < 0) j = neg;
  }
  if (p >= 0 && j < 0) return fail(r, "the target shape fixes the length of the run-time axis");
  int kind = reshape_dims(r, &x, om, (int)q, j);
  if (kind != DYN_POSITIONWISE || runtime_entry < 0) return kind;
  if (r->out[0].max[j] != x.max[p]) return fail(r, "the run-time entry of the target shape is not the run-time axis");
  return DYN_OWN; /* the view, and a check that the entry is the axis' length */
}

static int rule_gather(rule_ctx *r) {
  dshape x, ix;
  din(r->c, r->n->in[0], &x);
  din(r->c, r->n->in[1], &ix);
  int a;
  if (norm(mg_attr_int(r->n, "axis", 0), x.rank, &a)) return fail(r, "bad axis");
  if (x.rank + ix.rank - 1 > MG_MAX_RANK) return fail(r, "rank too large");
  dshape *o = &r->out[0];
  for (int d = 0; d < a; d++) o->max[o->rank] = x.max[d], o->expr[o->rank] = x.expr[d], o->mask |= (x.mask >> d & 1u) << o->rank, o->rank++;
  for (int d = 0; d < ix.rank; d++) o->max[o->rank] = ix.max[d], o->expr[o->rank] = ix.expr[d], o->mask |= (ix.mask >> d & 1u) << o->rank, o->rank++;
  for (int d = a + 1; d < x.rank; d++) o->max[o->rank] = x.max[d], o->expr[o->rank] = x.expr[d], o->mask |= (x.mask >> d & 1u) << o->rank, o->rank++;
  if (!(x.mask >> a & 1)) return DYN_POSITIONWISE;
  if (!dense_shape(&x)) return fail(r, "gathering along a run-time axis of a value whose layout is not dense");
  return DYN_OWN;
}

static int rule_gather_nd(rule_ctx *r) {
  dshape x, ix;
  din(r->c, r->n->in[0], &x);
  din(r->c, r->n->in[1], &ix);
  if (mg_attr_int(r->n, "batch_dims", 0) != 0) return fail(r, "batch_dims other than 0");
  if (ix.rank < 1 || (ix.mask >> (ix.rank - 1) & 1)) return fail(r, "index tuples of run-time length");
  int64_t k = ix.max[ix.rank - 1];
  if (k > x.rank) return fail(r, "index tuples longer than the data's rank");
  for (int d = 0; d < k; d++)
    if (x.mask >> d & 1) return fail(r, "indexing an axis of run-time length");
  dshape *o = &r->out[0];
  for (int d = 0; d + 1 < ix.rank; d++) o->max[o->rank] = ix.max[d], o->expr[o->rank] = ix.expr[d], o->mask |= (ix.mask >> d & 1u) << o->rank, o->rank++;
  for (int d = (int)k; d < x.rank; d++) o->max[o->rank] = x.max[d], o->expr[o->rank] = x.expr[d], o->mask |= (x.mask >> d & 1u) << o->rank, o->rank++;
  return DYN_POSITIONWISE;
}

static int rule_split(rule_ctx *r) {
  dshape x;
  const mg_node *n = r->n;
  din(r->c, n->in[0], &x);
  int a;
  if (norm(mg_attr_int(n, "axis", 0), x.rank, &a)) return fail(r, "bad axis");
  if (x.mask >> a & 1) return fail(r, "splitting an axis of run-time length");
  if (n->n_out > MAX_OUTS) return fail(r, "too many outputs");
  int64_t sz[MAX_OUTS];
  int64_t ns = cg_const_ints(n->n_in > 1 ? n->in[1] : NULL, sz, MAX_OUTS);
  if (ns < 0) {
    if (n->n_in > 1 && n->in[1]) return fail(r, "split is not a constant");
    int64_t each = (x.max[a] + n->n_out - 1) / n->n_out;
    for (int i = 0; i < n->n_out; i++) {
      int64_t left = x.max[a] - each * i;
      sz[i] = left < each ? (left > 0 ? left : 0) : each;
    }
  } else if (ns != n->n_out) {
    return fail(r, "split has another count than the outputs");
  }
  for (int i = 0; i < n->n_out; i++) {
    r->out[i] = x;
    r->out[i].max[a] = sz[i];
    r->out[i].expr[a] = str(r->c, "%lld", (long long)sz[i]);
  }
  return DYN_POSITIONWISE;
}

/* Slice: constant starts/ends/axes/steps. Along static axes it is position-wise;
 * along the varying axis of a dense input it is a run-time range of rows. */
/* See cg_internal.h. */
int cg_dyn_slice_params(rule_ctx *r, const dshape *x, slice_spec *sp, int *n_sp) {
  const mg_node *n = r->n;
  int64_t st[MG_MAX_RANK], en[MG_MAX_RANK], ax[MG_MAX_RANK], stp[MG_MAX_RANK];
  int64_t ns = cg_dyn_known_ints(r->c, n->in[1], st, MG_MAX_RANK), ne = cg_dyn_known_ints(r->c, n->in[2], en, MG_MAX_RANK);
  int srt = 0, ert = 0;
  /* one axis sliced from a computed start or end: read at run time */
  if (ns < 0 && cg_numel(n->in[1]) == 1 && n->in[1]->dtype == MG_I64) ns = 1, srt = 1, st[0] = 0;
  if (ne < 0 && cg_numel(n->in[2]) == 1 && n->in[2]->dtype == MG_I64) ne = 1, ert = 1, en[0] = INT64_MAX;
  if (ns < 0 || ne != ns) return fail(r, "starts and ends must be constants of one length");
  const mg_value *av = n->n_in > 3 ? n->in[3] : NULL, *sv = n->n_in > 4 ? n->in[4] : NULL;
  if (av && cg_const_ints(av, ax, MG_MAX_RANK) != ns) return fail(r, "axes must be a constant");
  if (sv && cg_const_ints(sv, stp, MG_MAX_RANK) != ns) return fail(r, "steps must be a constant");
  for (int i = 0; i < ns; i++) {
    int a;
    if (norm(av ? ax[i] : i, x->rank, &a)) return fail(r, "bad axes");
    sp[i] = (slice_spec){a, st[i], en[i], sv ? stp[i] : 1, srt, ert};
    if (!sp[i].step) return fail(r, "a zero step");
  }
  *n_sp = (int)ns;
  return 0;
}

static int64_t slice_count(int64_t n, const slice_spec *s) {
  int64_t first;
  return mg_slice_range(n, s->start, s->end, s->step, &first);
}

static int rule_slice(rule_ctx *r) {
  dshape x;
  din(r->c, r->n->in[0], &x);
  slice_spec sp[MG_MAX_RANK];
  int n_sp = 0, on_varying = -1;
  if (cg_dyn_slice_params(r, &x, sp, &n_sp)) return DYN_FAILED;
  dshape *o = &r->out[0];
  *o = x;
  for (int i = 0; i < n_sp; i++) {
    int a = sp[i].axis;
    o->max[a] = sp[i].start_rt || sp[i].end_rt ? x.max[a] : slice_count(x.max[a], &sp[i]);
    o->expr[a] = str(r->c, "%lld", (long long)o->max[a]);
    /* along the run-time axis, from computed bounds, or from bounds known here
     * but not constants (which the ordinary emitter needs) */
    if ((x.mask >> a & 1) || sp[i].start_rt || sp[i].end_rt || !cg_is_const(r->n->in[1]) || !cg_is_const(r->n->in[2])) {
      on_varying = i;
      o->expr[a] = NULL;
      o->mask |= 1u << a;
    }
  }
  if (on_varying < 0) return DYN_POSITIONWISE;
  if (prod_max(&x, 0, sp[on_varying].axis) != 1) return fail(r, "slicing at run time an axis that is not the leading one");
  if (n_sp != 1 || !dense_shape(&x)) return fail(r, "slicing a run-time axis together with others, or of a value whose layout is not dense");
  return DYN_OWN;
}

static int rule_concat(rule_ctx *r) {
  cg_ctx *c = r->c;
  const mg_node *n = r->n;
  dshape s0, s;
  if (!n->in[0]) return fail(r, "an omitted input");
  din(c, n->in[0], &s0);
  int a;
  if (!mg_node_attr(n, "axis") || norm(mg_attr_int(n, "axis", 0), s0.rank, &a)) return fail(r, "bad axis");
  int along = 0;
  for (int i = 0; i < n->n_in; i++) {
    if (!n->in[i]) return fail(r, "an omitted input");
    din(c, n->in[i], &s);
    if (s.rank != s0.rank) return fail(r, "inputs of different ranks");
    along |= (int)(s.mask >> a & 1);
  }
  dshape *o = &r->out[0];
  *o = s0;
  o->max[a] = 0;
  for (int i = 0; i < n->n_in; i++) {
    din(c, n->in[i], &s);
    o->max[a] += s.max[a];
    for (int k = 0; k < s.rank; k++) {
      if (k == a) continue;
      if (s.max[k] != s0.max[k] || (s.mask >> k & 1) != (s0.mask >> k & 1))
        return fail(r, "inputs differ off the concatenation axis");
      if ((s.mask >> k & 1) && strcmp(s.expr[k], s0.expr[k])) add_guard(r, str(c, "%s != %s", s.expr[k], s0.expr[k]));
    }
    if (along && (s.mask & ~(1u << a))) return fail(r, "concatenating along a run-time axis values that vary elsewhere too");
    if (along && prod_max(&s, 0, a) != 1) return fail(r, "concatenating along a run-time axis that is not the leading one");
  }
  if (!along) {
    o->expr[a] = str(c, "%lld", (long long)o->max[a]);
    return DYN_POSITIONWISE;
  }
  o->mask |= 1u << a;
  o->expr[a] = NULL;
  return DYN_OWN;
}

static int rule_topk(rule_ctx *r) {
  cg_ctx *c = r->c;
  const mg_node *n = r->n;
  dshape x;
  din(c, n->in[0], &x);
  int a;
  if (x.rank < 1 || norm(mg_attr_int(n, "axis", -1), x.rank, &a)) return fail(r, "bad axis");
  int64_t k = -1;
  if (cg_is_const(n->in[1]) && cg_const_ints(n->in[1], &k, 1) != 1) return fail(r, "K must hold one value");
  int own = (x.mask >> a & 1) || k < 0;
  dshape o = x;
  o.max[a] = k >= 0 && k < x.max[a] ? k : x.max[a];
  if (!own) {
    o.expr[a] = str(c, "%lld", (long long)k);
  } else {
    if ((x.mask & ~(1u << a)) || prod_max(&x, 0, a) != 1)
      return fail(r, "TopK of run-time length along an axis that is not the only varying, leading one");
    o.mask |= 1u << a;
    o.expr[a] = NULL;
  }
  for (int i = 0; i < n->n_out && i < 2; i++) r->out[i] = o;
  return own ? DYN_OWN : DYN_POSITIONWISE;
}

static int rule_nonzero(rule_ctx *r) {
  const mg_value *x = r->n->in[0];
  if (!cg_dyn_dense(r->c, x)) return fail(r, "NonZero of a value whose layout is not dense");
  dshape *o = &r->out[0];
  int64_t numel = cg_numel(x);
  o->rank = 2;
  o->max[0] = x->shape.rank ? x->shape.rank : 1, o->max[1] = numel;
  o->expr[0] = str(r->c, "%lld", (long long)o->max[0]), o->expr[1] = NULL;
  o->mask = 2;
  return DYN_OWN;
}

static int rule_shape(rule_ctx *r) {
  const mg_value *x = r->n->in[0];
  int rk = x->shape.rank, s = (int)mg_attr_int(r->n, "start", 0), e = (int)mg_attr_int(r->n, "end", rk);
  if (s < 0) s += rk;
  if (e < 0) e += rk;
  s = s < 0 ? 0 : s > rk ? rk : s, e = e < 0 ? 0 : e > rk ? rk : e;
  dshape *o = &r->out[0];
  o->rank = 1, o->max[0] = e > s ? e - s : 0, o->expr[0] = str(r->c, "%lld", (long long)o->max[0]);
  if (r->n->op == MG_OP_Size) o->rank = 0;
  return DYN_OWN;
}

static int rule_constant_of_shape(rule_ctx *r) {
  const mg_value *x = r->n->in[0];
  int64_t hi[8];
  unsigned exact;
  int nb = cg_dyn_vbound(r->c, x, hi, &exact);
  if (x->dtype != MG_I64 || x->shape.rank != 1 || nb <= 0 || nb != x->shape.d[0].v)
    return fail(r, "the shape input has no known upper bound");
  for (int k = 0; k < nb; k++)
    if (hi[k] > MG_DIM_MAX) return fail(r, "the shape input has no known upper bound");
  dshape *o = &r->out[0];
  o->rank = nb;
  for (int k = 0; k < nb; k++) {
    o->max[k] = hi[k] > 0 ? hi[k] : 0;
    o->expr[k] = exact >> k & 1 ? str(r->c, "%lld", (long long)o->max[k]) : NULL;
    if (!(exact >> k & 1)) o->mask |= 1u << k;
  }
  return DYN_OWN;
}

static int rule_nms(rule_ctx *r) {
  cg_ctx *c = r->c;
  const mg_node *n = r->n;
  dshape b, s;
  din(c, n->in[0], &b);
  din(c, n->in[1], &s);
  if (b.rank != 3 || s.rank != 3 || b.max[2] != 4 || s.max[0] != b.max[0] || s.max[2] != b.max[1])
    return fail(r, "expected boxes [B, n, 4] and scores [B, C, n]");
  if ((b.mask & ~2u) || (s.mask & ~4u)) return fail(r, "batches or classes of run-time length");
  if (n->in[0]->dtype != MG_F32 || n->in[1]->dtype != MG_F32) return fail(r, "boxes and scores must be float32");
  if ((b.mask & 2) && (s.mask & 4) && strcmp(b.expr[1], s.expr[2])) add_guard(r, str(c, "%s != %s", b.expr[1], s.expr[2]));
  if ((b.mask & 2) != (s.mask & 4 ? 2u : 0u)) return fail(r, "boxes and scores vary differently");
  int64_t per = b.max[1], mo;
  const mg_value *mv = n->n_in > 2 ? n->in[2] : NULL;
  if (!mv) per = 0;
  else if (cg_is_const(mv) && cg_const_ints(mv, &mo, 1) == 1) per = mo < 0 ? 0 : mo < per ? mo : per;
  dshape *o = &r->out[0];
  o->rank = 2, o->max[0] = b.max[0] * s.max[1] * per, o->max[1] = 3, o->expr[0] = NULL, o->expr[1] = "3";
  o->mask = 1;
  return DYN_OWN;
}

static int rule_reduce(rule_ctx *r) {
  const mg_node *n = r->n;
  dshape x;
  din(r->c, n->in[0], &x);
  int64_t ax[MG_MAX_RANK];
  int red[MG_MAX_RANK] = {0}, na = 0;
  const mg_value *av = n->n_in > 1 ? n->in[1] : NULL;
  if (av) {
    int64_t k = cg_const_ints(av, ax, MG_MAX_RANK);
    if (k < 0) return fail(r, "axes must be a constant");
    na = (int)k;
  }
  if (!na && !mg_attr_int(n, "noop_with_empty_axes", 0))
    for (int d = 0; d < x.rank; d++) red[d] = 1;
  for (int i = 0; i < na; i++) {
    int a;
    if (norm(ax[i], x.rank, &a)) return fail(r, "bad axes");
    red[a] = 1;
  }
  int keep = mg_attr_int(n, "keepdims", 1) != 0, over_varying = 0, all = 1;
  dshape *o = &r->out[0];
  for (int d = 0; d < x.rank; d++) {
    over_varying |= red[d] && (x.mask >> d & 1);
    all &= red[d];
    if (red[d] && !keep) continue;
    o->max[o->rank] = red[d] ? 1 : x.max[d];
    o->expr[o->rank] = red[d] ? "1" : x.expr[d];
    if (!red[d] && (x.mask >> d & 1)) o->mask |= 1u << o->rank;
    o->rank++;
  }
  if (!over_varying) return DYN_POSITIONWISE;
  if (!all || !dense_shape(&x)) return fail(r, "reducing a run-time axis but not every axis, or a value whose layout is not dense");
  return DYN_OWN;
}

static int rule_select(rule_ctx *r) {
  cg_ctx *c = r->c;
  const mg_node *n = r->n;
  int k = n->n_out;
  if (n->n_in != 1 + 2 * k || k > MAX_OUTS) return fail(r, "bad MigcSelect");
  int64_t cv;
  unsigned ce;
  if (cg_dyn_vbound(c, n->in[0], &cv, &ce) == 1 && ce) {
    /* the condition is known here (torch's squeeze-if-the-dim-is-1 on a static
     * dim of a run-time value): the taken branch, copied */
    for (int i = 0; i < k; i++) {
      if (!n->in[(cv ? 1 : 1 + k) + i]) return fail(r, "an omitted branch value");
      din(c, n->in[(cv ? 1 : 1 + k) + i], &r->out[i]);
    }
    return DYN_OWN;
  }
  for (int i = 0; i < k; i++) {
    dshape t, e;
    if (!n->in[1 + i] || !n->in[1 + k + i] || !n->out[i]) return fail(r, "an omitted branch value");
    din(c, n->in[1 + i], &t);
    din(c, n->in[1 + k + i], &e);
    if (t.rank != e.rank || t.rank < 1) return fail(r, "branches of different ranks");
    if (!dense_shape(&t) || !dense_shape(&e)) return fail(r, "a branch value whose layout is not dense");
    dshape *o = &r->out[i];
    *o = t;
    for (int d = 0; d < t.rank; d++) {
      if (d > 0 && (t.max[d] != e.max[d] || ((t.mask | e.mask) >> d & 1)))
        return fail(r, "branches that differ past their leading axis");
      o->max[d] = t.max[d] > e.max[d] ? t.max[d] : e.max[d];
    }
    o->mask = 1;
    o->expr[0] = NULL;
  }
  return DYN_OWN;
}

/* Expand to a shape known at run time (its bounds from vbound): the kernel over
 * the largest shapes, then each dim from the shape's values. */
static int rule_expand(rule_ctx *r) {
  cg_ctx *c = r->c;
  dshape x;
  din(c, r->n->in[0], &x);
  const mg_value *sv = r->n->in[1];
  int64_t hi[8];
  unsigned exact;
  int ns = cg_dyn_vbound(c, sv, hi, &exact);
  if (sv->dtype != MG_I64 || ns <= 0 || sv->shape.rank != 1 || ns != sv->shape.d[0].v)
    return fail(r, "the shape input has no known upper bound");
  for (int k = 0; k < ns; k++)
    if (hi[k] > MG_DIM_MAX) return fail(r, "the shape input has no known upper bound");
  int rank = ns > x.rank ? ns : x.rank;
  dshape *o = &r->out[0];
  o->rank = rank;
  for (int k = 0; k < rank; k++) {
    int j = k - (rank - x.rank), i = k - (rank - ns);
    int64_t xm = j >= 0 ? x.max[j] : 1, sm = i >= 0 ? hi[i] : 1;
    int xdyn = j >= 0 && (x.mask >> j & 1), sexact = i < 0 || (exact >> i & 1);
    if (sexact && sm == 1) { /* the input's dim as it is */
      o->max[k] = xm, o->expr[k] = j >= 0 ? x.expr[j] : "1";
      if (xdyn) o->mask |= 1u << k;
    } else if (sexact) {
      if (xdyn || (xm != 1 && xm != sm)) return fail(r, "a static target dim meets a run-time or other one");
      o->max[k] = sm, o->expr[k] = str(c, "%lld", (long long)sm);
    } else if (xdyn || xm != 1) { /* the target must be 1 or the input's dim: checked at run time */
      o->max[k] = xm, o->expr[k] = x.expr[j];
      if (xdyn) o->mask |= 1u << k;
    } else {
      o->max[k] = sm > 0 ? sm : 0, o->expr[k] = NULL, o->mask |= 1u << k;
    }
  }
  return DYN_OWN;
}

/* RoiAlign over rois (and batch_indices) of run-time count: the kernel runs for
 * the actual rois only (a don't-care batch index would read outside X). */
static int rule_roi_align(rule_ctx *r) {
  cg_ctx *c = r->c;
  const mg_node *n = r->n;
  dshape x, ro, bi;
  din(c, n->in[0], &x);
  din(c, n->in[1], &ro);
  din(c, n->in[2], &bi);
  if (x.mask || x.rank != 4 || ro.rank != 2 || bi.rank != 1 || (ro.mask & ~1u) || (bi.mask & ~1u) ||
      ro.max[0] != bi.max[0])
    return fail(r, "expected static X, and rois [R, 4] and batch_indices [R] varying in R");
  if ((ro.mask & 1) && (bi.mask & 1) && strcmp(ro.expr[0], bi.expr[0])) add_guard(r, str(c, "%s != %s", ro.expr[0], bi.expr[0]));
  if ((ro.mask & 1) != (bi.mask & 1)) return fail(r, "rois and batch_indices vary differently");
  dshape *o = &r->out[0];
  o->rank = 4;
  o->max[0] = ro.max[0], o->expr[0] = ro.expr[0], o->mask = ro.mask & 1;
  o->max[1] = x.max[1], o->expr[1] = x.expr[1];
  o->max[2] = mg_attr_int(n, "output_height", 1), o->expr[2] = str(c, "%lld", (long long)o->max[2]);
  o->max[3] = mg_attr_int(n, "output_width", 1), o->expr[3] = str(c, "%lld", (long long)o->max[3]);
  return DYN_OWN;
}

/* ScatterElements: the data copied whole, then only the actual index elements
 * scattered (don't-care ones would write somewhere). */
static int rule_scatter_elements(rule_ctx *r) {
  cg_ctx *c = r->c;
  const mg_node *n = r->n;
  dshape x, ix, u;
  din(c, n->in[0], &x);
  din(c, n->in[1], &ix);
  din(c, n->in[2], &u);
  if (!dense_shape(&x) || !dense_shape(&ix) || ix.rank != u.rank || ix.mask != u.mask)
    return fail(r, "data, indices or updates whose layout is not dense");
  for (int k = 0; k < ix.rank; k++) {
    if (ix.max[k] != u.max[k]) return fail(r, "indices and updates differ");
    if ((ix.mask >> k & 1) && strcmp(ix.expr[k], u.expr[k])) add_guard(r, str(c, "%s != %s", ix.expr[k], u.expr[k]));
  }
  r->out[0] = x;
  return DYN_OWN;
}

/* Gemm and MatMul over rows of run-time count: B (and C) static, A varying only
 * in its row (batch) axes. */
static int rule_matmul(rule_ctx *r) {
  cg_ctx *c = r->c;
  const mg_node *n = r->n;
  dshape a;
  din(c, n->in[0], &a);
  for (int i = 1; i < n->n_in; i++)
    if (is_dyn(c, n->in[i])) return fail(r, "B or C of run-time length");
  if (a.rank < 2 || (a.mask >> (a.rank - 1) & 1)) return fail(r, "A varying in its inner axis");
  if (n->op == MG_OP_Gemm && mg_attr_int(n, "transA", 0)) return fail(r, "transA with rows of run-time count");
  const mg_value *b = n->in[1];
  int tb = n->op == MG_OP_Gemm && mg_attr_int(n, "transB", 0);
  if (b->shape.rank != 2) return fail(r, "B must be 2-D");
  dshape *o = &r->out[0];
  *o = a;
  o->max[a.rank - 1] = b->shape.d[tb ? 0 : 1].v;
  o->expr[a.rank - 1] = str(c, "%lld", (long long)o->max[a.rank - 1]);
  return DYN_POSITIONWISE;
}

/* Range with a run-time limit (start and delta constants, its bound known). */
static int rule_range(rule_ctx *r) {
  cg_ctx *c = r->c;
  const mg_node *n = r->n;
  int64_t st, dl, hi[8];
  unsigned exact;
  if (n->in[0]->dtype != MG_I64 || cg_const_ints(n->in[0], &st, 1) != 1 || cg_const_ints(n->in[2], &dl, 1) != 1 ||
      dl <= 0)
    return fail(r, "Range of run-time length needs int64, a constant start and a positive constant delta");
  if (cg_dyn_vbound(c, n->in[1], hi, &exact) != 1 || hi[0] > MG_DIM_MAX) return fail(r, "the limit has no known upper bound");
  dshape *o = &r->out[0];
  o->rank = 1, o->max[0] = hi[0] > st ? (hi[0] - st + dl - 1) / dl : 0, o->expr[0] = NULL, o->mask = 1;
  if (exact) { /* the limit is known here: a static length, the ordinary kernel */
    o->expr[0] = str(c, "%lld", (long long)o->max[0]), o->mask = 0;
    return DYN_POSITIONWISE;
  }
  return DYN_OWN;
}

/* The rule of n: DYN_POSITIONWISE or DYN_OWN with r->out filled, or DYN_FAILED. */
static int rule_of(rule_ctx *r) {
  const mg_node *n = r->n;
  switch (n->op) {
  case MG_OP_Softmax: case MG_OP_LogSoftmax: case MG_OP_Hardmax: {
    dshape x;
    int a;
    din(r->c, n->in[0], &x);
    if (norm(mg_attr_int(n, "axis", -1), x.rank, &a) || (x.mask >> a & 1)) return fail(r, "along an axis of run-time length");
    r->out[0] = x;
    return DYN_POSITIONWISE;
  }
  case MG_OP_Transpose: return rule_transpose(r);
  case MG_OP_Unsqueeze: return rule_unsqueeze(r);
  case MG_OP_Squeeze: return rule_squeeze(r);
  case MG_OP_Flatten: return rule_flatten(r);
  case MG_OP_Reshape: return rule_reshape(r);
  case MG_OP_Gather: return rule_gather(r);
  case MG_OP_GatherND: return rule_gather_nd(r);
  case MG_OP_Split: return rule_split(r);
  case MG_OP_Slice: return rule_slice(r);
  case MG_OP_Concat: return rule_concat(r);
  case MG_OP_TopK: return rule_topk(r);
  case MG_OP_NonZero: return rule_nonzero(r);
  case MG_OP_Shape: case MG_OP_Size: return rule_shape(r);
  case MG_OP_ConstantOfShape: return rule_constant_of_shape(r);
  case MG_OP_NonMaxSuppression: return rule_nms(r);
  case MG_OP_MigcSelect: return rule_select(r);
  case MG_OP_Expand: return rule_expand(r);
  case MG_OP_RoiAlign: return rule_roi_align(r);
  case MG_OP_ScatterElements: return rule_scatter_elements(r);
  case MG_OP_Gemm: case MG_OP_MatMul: return rule_matmul(r);
  case MG_OP_Range: return rule_range(r);
  case MG_OP_ReduceMax: case MG_OP_ReduceMin: case MG_OP_ReduceSum: case MG_OP_ReduceMean:
  case MG_OP_ReduceProd: case MG_OP_ReduceL1: case MG_OP_ReduceL2: case MG_OP_ReduceLogSum:
  case MG_OP_ReduceLogSumExp: case MG_OP_ReduceSumSquare:
    return rule_reduce(r);
  default:
    if (cg_elementwise_op(n->op)) {
      if (n->op == MG_OP_Dropout) {
        r->out[0] = (dshape){0};
        din(r->c, n->in[0], &r->out[0]);
        return DYN_POSITIONWISE;
      }
      return rule_broadcast(r, n->n_in);
    }
    return fail(r, str(r->c, "no rule for %s with a value of run-time length", n->op_type));
  }
}

/* Ops whose output length depends on data even when every input is static. */
static int is_source(const mg_node *n) {
  switch (n->op) {
  case MG_OP_NonZero: case MG_OP_NonMaxSuppression: case MG_OP_MigcSelect: return 1;
  case MG_OP_TopK: return !cg_is_const(n->in[1]);
  case MG_OP_ConstantOfShape: case MG_OP_Expand: return !cg_is_const(n->in[n->op == MG_OP_Expand]);
  case MG_OP_Range: return !cg_is_const(n->in[1]);
  default: return 0;
  }
}

static int apply(cg_ctx *c, mg_value *v, const dshape *s) {
  v->shape.rank = s->rank;
  for (int k = 0; k < s->rank; k++) v->shape.d[k] = (mg_dim){s->max[k], NULL};
  v->shape_declared = 0;
  if (!s->mask) return 0;
  const char **e = mg_arena_alloc(&c->strings, sizeof(char *) * (size_t)(s->rank ? s->rank : 1));
  if (!e) return -1;
  for (int k = 0; k < s->rank; k++) e[k] = s->expr[k];
  c->rd_off[v->id] = c->n_rd;
  c->rd_mask[v->id] = s->mask;
  c->rd_expr[v->id] = e;
  c->n_rd += s->rank;
  return 0;
}

int cg_bound_dynamic(cg_ctx *c) {
  mg_graph *g = c->g;
  int nv = g->n_values + 1, nn = g->n_nodes + 1;
  c->rd_off = mg_malloc(sizeof(int) * (size_t)nv);
  c->rd_mask = mg_calloc((size_t)nv, sizeof *c->rd_mask);
  c->rd_expr = mg_calloc((size_t)nv, sizeof *c->rd_expr);
  c->dyn_node = mg_calloc((size_t)nn, 1);
  c->dyn_guard = mg_calloc((size_t)nn, sizeof *c->dyn_guard);
  c->vbound = mg_calloc((size_t)nv, sizeof *c->vbound);
  c->n_vbound = mg_calloc((size_t)nv, 1);
  c->vexact = mg_calloc((size_t)nv, 1);
  if (!c->rd_off || !c->rd_mask || !c->rd_expr || !c->dyn_node || !c->dyn_guard || !c->vbound || !c->n_vbound ||
      !c->vexact)
    return -1;
  for (int i = 0; i < nv; i++) c->rd_off[i] = -1;
  for (int i = 0; i < g->n_nodes; i++) {
    mg_node *n = g->nodes[i];
    int dyn_in = 0, open_in = 0, open_out = 0;
    for (int k = 0; k < n->n_in; k++) {
      const mg_value *v = n->in[k];
      if (!v) continue;
      if (is_dyn(c, v)) dyn_in = 1;
      else if (!is_static(v)) open_in = 1;
    }
    for (int k = 0; k < n->n_out; k++)
      if (n->out[k] && !is_static(n->out[k])) open_out = 1;
    /* an open output of static inputs: a rule's shape (inference ran before the
     * largest shapes of its inputs were known) */
    if (!open_in && (dyn_in || (open_out && (is_source(n) || n->op != MG_OP_UNKNOWN)))) {
      rule_ctx r = {.c = c, .n = n};
      int kind = n->n_out > MAX_OUTS ? fail(&r, "too many outputs") : rule_of(&r);
      c->dyn_node[i] = (char)kind;
      if (kind == DYN_FAILED) {
        c->dyn_guard[i] = r.why;
      } else {
        c->dyn_guard[i] = r.guard;
        for (int k = 0; k < n->n_out; k++)
          if (n->out[k] && apply(c, n->out[k], &r.out[k])) return -1;
      }
    }
    cg_dyn_track_vbounds(c, n);
  }
  return c->body.failed ? -1 : 0;
}

