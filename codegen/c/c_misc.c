/* C emitters of the misc family's float ops (runtime/misc.c; contract in
 * codegen/cg.h): NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss, Range,
 * ConstantOfShape, Einsum and Det. The quantisation ops are in c_quant.c.
 *
 * Geometry is decided here from the static shapes: the losses' [N, C, D] view,
 * Einsum's loop nest from core/einsum_geom.h. Semantics follow the
 * reference interpreter (interp/interp_misc.c, interp_linalg.c, interp_tensor.c);
 * whatever it would reject, or this backend cannot reproduce exactly, is reported
 * with cg_unsupported. */
#include "cg.h"
#include "einsum_geom.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Whether t is a float dtype the runtime computes (float32/64, float16, bfloat16). */
static int is_float(mg_dtype t) { return t == MG_F32 || t == MG_F64 || t == MG_F16 || t == MG_BF16; }

/* Registers the runtime files of this family (misc.c reads through tensor.c). */
static void need_misc(cg_ctx *c) {
  cg_need(c, "misc.c");
  cg_need(c, "tensor.c");
}

/* ---------------------------------------------------------------- losses */

/* Both losses: input [N, C, d...], target [N, d...] (int32/int64), optional weight
 * [C]; output 0 the loss, SoftmaxCrossEntropyLoss's optional output 1 log_prob. */
static int emit_loss(cg_ctx *c, const mg_node *n, int softmax) {
  const mg_value *x = n->in[0], *t = n->in[1], *w = n->n_in > 2 ? n->in[2] : NULL;
  const mg_value *y = n->out[0], *lp = softmax && n->n_out > 1 ? n->out[1] : NULL;
  int64_t xd[MG_MAX_RANK], td[MG_MAX_RANK], D = 1;
  const mg_attr *ii = mg_node_attr(n, "ignore_index");
  const char *red = mg_attr_str(n, "reduction", "mean");
  const char *mode;
  int xr, tr;
  if (!x || !t || !y) return cg_unsupported(c, n, "missing input or output");
  if (!is_float(x->dtype)) return cg_unsupported(c, n, "input dtype %s", mg_dtype_name(x->dtype));
  if (t->dtype != MG_I32 && t->dtype != MG_I64)
    return cg_unsupported(c, n, "target dtype %s", mg_dtype_name(t->dtype));
  if (y->dtype != x->dtype || (w && w->dtype != x->dtype) || (lp && lp->dtype != x->dtype))
    return cg_unsupported(c, n, "weight and outputs must have the input's dtype");
  xr = cg_dims(x, xd);
  tr = cg_dims(t, td);
  if (xr < 2 || tr != xr - 1 || td[0] != xd[0])
    return cg_unsupported(c, n, "target must be [N, d...] for input [N, C, d...]");
  for (int d = 2; d < xr; d++) {
    if (td[d - 1] != xd[d]) return cg_unsupported(c, n, "target and input disagree on the spatial dims");
    D *= xd[d];
  }
  if (w && (cg_dims(w, td) != 1 || td[0] != xd[1])) return cg_unsupported(c, n, "weight must be [C]");
  if (ii && ii->kind != MG_ATTR_INT) return cg_unsupported(c, n, "ignore_index is not an int");
  if (!strcmp(red, "none")) mode = "MG_LOSS_NONE";
  else if (!strcmp(red, "sum")) mode = "MG_LOSS_SUM";
  else if (!strcmp(red, "mean")) mode = "MG_LOSS_MEAN";
  else return cg_unsupported(c, n, "reduction '%s'", red);
  if (cg_numel(y) != (!strcmp(red, "none") ? xd[0] * D : 1))
    return cg_unsupported(c, n, "output shape disagrees with reduction '%s'", red);
  if (lp && cg_numel(lp) != cg_numel(x)) return cg_unsupported(c, n, "log_prob must have the input's shape");
  if (ii && ii->i == INT64_MIN) return cg_unsupported(c, n, "ignore_index out of range");
  const char *prm = cg_static(c, "mg_loss_params", "{%lld, %lld, %lld, %s, %d, %d, %lldLL, %s}",
                              (long long)xd[0], (long long)xd[1], (long long)D, cg_rt_dtype(x->dtype),
                              t->dtype == MG_I64, ii != NULL, ii ? (long long)ii->i : 0LL, mode);
  need_misc(c);
  if (softmax)
    cg_line(c, "mg_softmax_cross_entropy(&%s, %s, %s, %s, %s, %s);", prm, cg_vin(c, x), cg_vin(c, t),
            w ? cg_vin(c, w) : "NULL", cg_vout(c, y), lp ? cg_vout(c, lp) : "NULL");
  else
    cg_line(c, "mg_nll_loss(&%s, %s, %s, %s, %s);", prm, cg_vin(c, x), cg_vin(c, t),
            w ? cg_vin(c, w) : "NULL", cg_vout(c, y));
  return 0;
}

int cg_emit_NegativeLogLikelihoodLoss(cg_ctx *c, const mg_node *n) { return emit_loss(c, n, 0); }
int cg_emit_SoftmaxCrossEntropyLoss(cg_ctx *c, const mg_node *n) { return emit_loss(c, n, 1); }

/* ---------------------------------------------------------------- Range */

/* The element count of Range(a, b, d) as the interpreter computes it; -1 when it
 * would reject the values. */
static int64_t range_count(mg_dtype t, const mg_value *s, const mg_value *l, const mg_value *d) {
  if (is_float(t)) {
    float a, b, st;
    if (cg_const_floats(s, &a, 1) != 1 || cg_const_floats(l, &b, 1) != 1 || cg_const_floats(d, &st, 1) != 1)
      return -1;
    if (st == 0 || isnan(st) || isnan(a) || isnan(b)) return -1;
    double q = ceil(((double)b - (double)a) / (double)st);
    if (!(q < 1e15)) return -1;
    return q > 0 ? (int64_t)q : 0;
  }
  int64_t a, b, st, diff;
  if (cg_const_ints(s, &a, 1) != 1 || cg_const_ints(l, &b, 1) != 1 || cg_const_ints(d, &st, 1) != 1)
    return -1;
  if (st == 0 || __builtin_sub_overflow(b, a, &diff)) return -1;
  if ((diff > 0) != (st > 0) || diff == 0) return 0;
  if (st > 0) return (diff - 1) / st + 1;
  return (int64_t)(((uint64_t)0 - (uint64_t)diff - 1) / ((uint64_t)0 - (uint64_t)st)) + 1;
}

/* Range: start and delta read at run time; the length is the static output's (and
 * checked against the values when all three are constants). */
int cg_emit_Range(cg_ctx *c, const mg_node *n) {
  const mg_value *s = n->in[0], *l = n->in[1], *d = n->in[2], *y = n->out[0];
  const mg_dtype t = s ? s->dtype : MG_UNDEFINED;
  if (!s || !l || !d || !y) return cg_unsupported(c, n, "missing input or output");
  if (t != MG_F32 && t != MG_F64 && t != MG_I16 && t != MG_I32 && t != MG_I64)
    return cg_unsupported(c, n, "dtype %s", mg_dtype_name(t));
  if (l->dtype != t || d->dtype != t || y->dtype != t) return cg_unsupported(c, n, "inputs differ in dtype");
  if (cg_numel(s) != 1 || cg_numel(l) != 1 || cg_numel(d) != 1)
    return cg_unsupported(c, n, "start, limit and delta must be scalars");
  if (cg_is_const(s) && cg_is_const(l) && cg_is_const(d) && range_count(t, s, l, d) != cg_numel(y))
    return cg_unsupported(c, n, "output length disagrees with the constant start/limit/delta");
  if (cg_numel(y) == 0) return 0;
  need_misc(c);
  cg_line(c, "mg_range(%s, %s, %s, %lld, %s);", cg_rt_dtype(t), cg_vin(c, s), cg_vin(c, d),
          (long long)cg_numel(y), cg_vout(c, y));
  return 0;
}

/* ---------------------------------------------------------- ConstantOfShape */

/* A C constant expression of v's first element, exact, into buf (64 chars); NULL
 * for a dtype without one. */
static const char *value_literal(char *buf, const mg_value *v) {
  const unsigned char *p = v->data;
  switch (v->dtype) {
  case MG_F32: case MG_F64: {
    double x;
    if (v->dtype == MG_F32) {
      float f;
      memcpy(&f, p, 4);
      x = f;
    } else {
      memcpy(&x, p, 8);
    }
    if (isnan(x)) return v->dtype == MG_F32 ? "NAN" : "(double)NAN";
    if (isinf(x)) return x > 0 ? "INFINITY" : "-INFINITY";
    snprintf(buf, 64, v->dtype == MG_F32 ? "%af" : "%a", x);
    return buf;
  }
  case MG_F16: case MG_BF16: case MG_U16: { uint16_t h; memcpy(&h, p, 2); snprintf(buf, 64, "%u", (unsigned)h); return buf; }
  case MG_I16: { int16_t h; memcpy(&h, p, 2); snprintf(buf, 64, "%d", (int)h); return buf; }
  case MG_U8: case MG_BOOL: snprintf(buf, 64, "%u", (unsigned)p[0]); return buf;
  case MG_I8: snprintf(buf, 64, "%d", (int)(int8_t)p[0]); return buf;
  case MG_I32: { int32_t h; memcpy(&h, p, 4); snprintf(buf, 64, "(%lldLL)", (long long)h); return buf; }
  case MG_U32: { uint32_t h; memcpy(&h, p, 4); snprintf(buf, 64, "%luUL", (unsigned long)h); return buf; }
  case MG_I64: {
    int64_t h;
    memcpy(&h, p, 8);
    if (h == INT64_MIN) snprintf(buf, 64, "(-9223372036854775807LL - 1)");
    else snprintf(buf, 64, "(%lldLL)", (long long)h);
    return buf;
  }
  case MG_U64: { uint64_t h; memcpy(&h, p, 8); snprintf(buf, 64, "%lluULL", (unsigned long long)h); return buf; }
  default: return NULL;
  }
}

/* ConstantOfShape: the static output filled with the `value` attribute (float32 0
 * without one). The shape input only decided the static dims. */
int cg_emit_ConstantOfShape(cg_ctx *c, const mg_node *n) {
  const mg_attr *a = mg_node_attr(n, "value");
  const mg_value *y = n->out[0], *v = a && a->kind == MG_ATTR_TENSOR ? a->t : NULL;
  const mg_dtype t = v ? v->dtype : MG_F32;
  char buf[64];
  const char *lit = "0";
  if (!y) return cg_unsupported(c, n, "missing output");
  if (a && !v) return cg_unsupported(c, n, "value is not a tensor");
  if (y->dtype != t) return cg_unsupported(c, n, "output dtype differs from value's");
  if (v) {
    if (!v->data || v->nbytes < mg_dtype_size(t)) return cg_unsupported(c, n, "value must hold one element");
    if (!(lit = value_literal(buf, v))) return cg_unsupported(c, n, "value of dtype %s", mg_dtype_name(t));
  }
  if (!cg_ctype(t)) return cg_unsupported(c, n, "dtype %s", mg_dtype_name(t));
  if (cg_numel(y) == 0) return 0;
  cg_need(c, "tensor.c");
  cg_line(c, "mg_fill(%zu, %lld, %s, &%s);", mg_dtype_size(t), (long long)cg_numel(y), cg_vout(c, y),
          cg_static(c, cg_ctype(t), "%s", lit));
  return 0;
}

/* ---------------------------------------------------------------- Einsum */

enum { EIN_OPS = 8, EIN_NEST = 64 };

/* Einsum: the equation planned by core/einsum_geom.h into a loop nest (output
 * labels, then the summed labels in label order) with one stride per operand and
 * label; mg_einsum runs it. */
int cg_emit_Einsum(cg_ctx *c, const mg_node *n) {
  const char *eq = mg_attr_str(n, "equation", NULL);
  const mg_value *y = n->out[0];
  const int ni = n->n_in;
  int rank[EIN_OPS];
  int64_t dims[EIN_OPS][MG_MAX_RANK];
  const int64_t *dp[EIN_OPS];
  if (!eq) return cg_unsupported(c, n, "missing equation");
  if (ni < 1 || ni > EIN_OPS) return cg_unsupported(c, n, "%d operands (1 to %d supported)", ni, EIN_OPS);
  const mg_dtype t = n->in[0] ? n->in[0]->dtype : MG_UNDEFINED;
  if (!is_float(t) && !mg_dtype_is_int(t)) return cg_unsupported(c, n, "dtype %s", mg_dtype_name(t));
  if (!y || y->dtype != t) return cg_unsupported(c, n, "output dtype differs");
  for (int k = 0; k < ni; k++) {
    if (!n->in[k] || n->in[k]->dtype != t) return cg_unsupported(c, n, "operand %d missing or of another dtype", k);
    rank[k] = cg_dims(n->in[k], dims[k]);
    dp[k] = dims[k];
  }
  mg_einsum_geom p;
  mg_ein_error e;
  switch (mg_einsum_plan(eq, ni, rank, dp, &p, &e)) {
  case MG_EIN_OK: break;
  case MG_EIN_TOO_LONG: return cg_unsupported(c, n, "equation is too long");
  case MG_EIN_OPERANDS:
  case MG_EIN_FEWER_TERMS: return cg_unsupported(c, n, "equation has fewer terms than inputs");
  case MG_EIN_MORE_TERMS: return cg_unsupported(c, n, "equation has more terms than inputs");
  case MG_EIN_TERM_RANK: return cg_unsupported(c, n, "term %d does not match input rank %d", e.term, rank[e.term]);
  case MG_EIN_BAD_OUTPUT: return cg_unsupported(c, n, "bad output term");
  case MG_EIN_OUTPUT_RANK: return cg_unsupported(c, n, "output rank too large");
  case MG_EIN_OUTPUT_UNKNOWN: return cg_unsupported(c, n, "output label not in the inputs");
  case MG_EIN_OUTPUT_REPEATED: return cg_unsupported(c, n, "output label repeated");
  case MG_EIN_LABEL_SIZES:
    return cg_unsupported(c, n, "a label has sizes %lld and %lld", (long long)e.a, (long long)e.b);
  }
  const int no = p.no, na = p.na;
  int64_t st[EIN_OPS * EIN_NEST], yd[MG_MAX_RANK];
  if (na > EIN_NEST) return cg_unsupported(c, n, "too many labels");
  if (cg_dims(y, yd) != no) return cg_unsupported(c, n, "output rank differs from the equation's");
  for (int i = 0; i < no; i++)
    if (yd[i] != p.out_dims[i]) return cg_unsupported(c, n, "output shape differs from the equation's");
  for (int k = 0; k < ni; k++)
    for (int i = 0; i < na; i++) st[k * na + i] = p.stride[k][i];
  if (cg_numel(y) == 0) return 0;
  char ops[EIN_OPS * 96];
  size_t used = 0;
  for (int k = 0; k < ni; k++) {
    int w = snprintf(ops + used, sizeof ops - used, "%s%s", k ? ", " : "", cg_vin(c, n->in[k]));
    if (w < 0 || (size_t)w >= sizeof ops - used) return cg_unsupported(c, n, "operand expressions too long");
    used += (size_t)w;
  }
  need_misc(c);
  cg_line(c, "{ const void *const einsum_ops[%d] = {%s};", ni, ops);
  cg_line(c, "  mg_einsum(%s, %d, einsum_ops, %d, %d, %s, %s, %s); }", cg_rt_dtype(t), ni, no, na,
          cg_i64s(c, p.size, na), cg_i64s(c, st, ni * na), cg_vout(c, y));
  return 0;
}

/* ---------------------------------------------------------------- Det */

/* Det: [..., M, M] floats, one LU per matrix. */
int cg_emit_Det(cg_ctx *c, const mg_node *n) {
  const mg_value *x = n->in[0], *y = n->out[0];
  int64_t xd[MG_MAX_RANK];
  int r;
  if (!x || !y) return cg_unsupported(c, n, "missing input or output");
  if (!is_float(x->dtype) || y->dtype != x->dtype) return cg_unsupported(c, n, "dtype %s", mg_dtype_name(x->dtype));
  r = cg_dims(x, xd);
  if (r < 2 || xd[r - 1] != xd[r - 2]) return cg_unsupported(c, n, "input must be [..., M, M]");
  const int64_t m = xd[r - 1], batch = cg_numel(y);
  if (batch * m * m != cg_numel(x)) return cg_unsupported(c, n, "output shape disagrees with the input's");
  if (m > 4096) return cg_unsupported(c, n, "matrices too large");
  if (batch == 0) return 0;
  need_misc(c);
  cg_line(c, "mg_det(%s, %lld, %lld, %s, %s, %s);", cg_rt_dtype(x->dtype), (long long)batch, (long long)m,
          cg_vin(c, x), cg_vout(c, y), cg_scratch(c, "mg_det_scratch(%lld)", (long long)m));
  return 0;
}
