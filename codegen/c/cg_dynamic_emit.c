/* The emitters of cg_dynamic.c's DYN_OWN nodes: ops whose result depends on the
 * actual dims of a value of run-time length (Shape, NonZero, TopK, Gather /
 * Concat / Slice along the varying axis, reductions over it, NonMaxSuppression,
 * MigcSelect, ConstantOfShape / Expand of computed shapes, checked reshapes,
 * Range), reading those dims from model_run's rd[]. The rules that decide which
 * nodes these are, and their largest shapes, are in cg_dynamic.c. */
#include "cg_internal.h"
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------ emission */

static const char *rd_at(cg_ctx *c, const mg_value *v, int k) { return str(c, "rd[%d]", c->rd_off[v->id] + k); }

/* The C expression of v's dim k at run time. */
static const char *dim_expr(cg_ctx *c, const mg_value *v, int k) {
  if (is_dyn(c, v) && (c->rd_mask[v->id] >> k & 1)) return rd_at(c, v, k);
  return str(c, "%lld", (long long)v->shape.d[k].v);
}

const char *cg_dim(cg_ctx *c, const mg_value *v, int k) { return dim_expr(c, v, k); }

const char *cg_dims_expr(cg_ctx *c, const mg_value *v) {
  if (is_dyn(c, v)) return str(c, "(rd + %d)", c->rd_off[v->id]);
  int64_t d[MG_MAX_RANK];
  int r = cg_dims(v, d);
  return cg_i64s(c, d, r);
}

static int varying_axis_of(cg_ctx *c, const mg_value *v) {
  dshape s;
  din(c, v, &s);
  int k = varying_axis(&s);
  return k < 0 ? 0 : k;
}

/* Actual element count of a dense value, as a C expression. */
static const char *numel_expr(cg_ctx *c, const mg_value *v) {
  dshape s;
  din(c, v, &s);
  return prod_expr(c, &s, 0, s.rank);
}

static int emit_shape(cg_ctx *c, const mg_node *n) {
  const mg_value *x = n->in[0], *y = n->out[0];
  if (y->dtype != MG_I64) return cg_unsupported(c, n, "output dtype %s", mg_dtype_name(y->dtype));
  if (n->op == MG_OP_Size) {
    cg_line(c, "%s[0] = %s;", cg_out(c, y), numel_expr(c, x));
    return 0;
  }
  int rk = x->shape.rank, s = (int)mg_attr_int(n, "start", 0);
  if (s < 0) s += rk;
  s = s < 0 ? 0 : s > rk ? rk : s;
  for (int k = 0; k < y->shape.d[0].v; k++) cg_line(c, "%s[%d] = %s;", cg_out(c, y), k, dim_expr(c, x, s + k));
  return 0;
}

static int emit_nonzero(cg_ctx *c, const mg_node *n) {
  const mg_value *x = n->in[0], *y = n->out[0];
  if (!cg_rt_dtype(x->dtype) || y->dtype != MG_I64) return cg_unsupported(c, n, "dtype %s", mg_dtype_name(x->dtype));
  int64_t d[MG_MAX_RANK] = {1};
  int r = cg_dims(x, d);
  cg_need(c, "dynamic.c");
  cg_need(c, "tensor.c");
  cg_line(c, "%s = %d;", rd_at(c, y, 0), r ? r : 1);
  if (!is_dyn(c, x)) {
    cg_line(c, "%s = mg_nonzero(%s, %d, %s, %s, %s, %lld);", rd_at(c, y, 1), cg_rt_dtype(x->dtype), r ? r : 1,
            cg_i64s(c, d, r ? r : 1), cg_vin(c, x), cg_out(c, y), (long long)y->shape.d[1].v);
    return 0;
  }
  /* dense: the actual dims walk the elements in order */
  char dims[1024];
  size_t at = 0;
  dims[0] = 0;
  for (int k = 0; k < r && at < sizeof dims - 64; k++)
    at += (size_t)snprintf(dims + at, sizeof dims - at, "%s%s", k ? ", " : "", dim_expr(c, x, k));
  cg_line(c, "{");
  cg_line(c, "  const int64_t s_[%d] = {%s};", r, dims);
  cg_line(c, "  %s = mg_nonzero(%s, %d, s_, %s, %s, %lld);", rd_at(c, y, 1), cg_rt_dtype(x->dtype), r, cg_vin(c, x),
          cg_out(c, y), (long long)y->shape.d[1].v);
  cg_line(c, "}");
  return 0;
  return 0;
}

static int emit_topk(cg_ctx *c, const mg_node *n) {
  const mg_value *x = n->in[0], *y = n->out[0], *ix = n->n_out > 1 ? n->out[1] : NULL;
  if (!cg_rt_dtype(x->dtype) || x->dtype == MG_BOOL) return cg_unsupported(c, n, "dtype %s", mg_dtype_name(x->dtype));
  if (ix && ix->dtype != MG_I64) return cg_unsupported(c, n, "indices of dtype %s", mg_dtype_name(ix->dtype));
  if (n->in[1]->dtype != MG_I64) return cg_unsupported(c, n, "K of dtype %s", mg_dtype_name(n->in[1]->dtype));
  int a = (int)mg_attr_int(n, "axis", -1);
  if (a < 0) a += x->shape.rank;
  int64_t inner = 1, len = x->shape.d[a].v;
  for (int d = a + 1; d < x->shape.rank; d++) inner *= x->shape.d[d].v;
  const char *scratch = cg_scratch(c, "%lld", (long long)(len * 4 + 4));
  cg_need(c, "tensor.c");
  cg_line(c, "{");
  cg_line(c, "  int64_t n_ = %s, k_ = %s[0];", dim_expr(c, x, a), cg_in(c, n->in[1]));
  cg_line(c, "  if (k_ < 0 || k_ > n_) return MG_RT_EARG; /* ONNX: K must not exceed the axis */");
  cg_line(c, "  if (k_ > 0) mg_topk(%s, 1, n_, %lld, k_, %d, %s, %s, %s, %s);", cg_rt_dtype(x->dtype), (long long)inner,
          mg_attr_int(n, "largest", 1) != 0, cg_vin(c, x), y ? cg_vout(c, y) : "(void *)0",
          ix ? cg_out(c, ix) : "(int64_t *)0", scratch);
  if (y) cg_line(c, "  %s = k_;", rd_at(c, y, a));
  if (ix) cg_line(c, "  %s = k_;", rd_at(c, ix, a));
  cg_line(c, "}");
  return 0;
}

static int emit_gather_axis(cg_ctx *c, const mg_node *n) {
  const mg_value *x = n->in[0], *ix = n->in[1], *y = n->out[0];
  if (ix->dtype != MG_I64 && ix->dtype != MG_I32) return cg_unsupported(c, n, "indices of dtype %s", mg_dtype_name(ix->dtype));
  int a = (int)mg_attr_int(n, "axis", 0);
  if (a < 0) a += x->shape.rank;
  int64_t inner = 1;
  for (int d = a + 1; d < x->shape.rank; d++) inner *= x->shape.d[d].v;
  size_t es = cg_elem_bytes(x->dtype);
  cg_need(c, "tensor.c");
  /* an empty axis has nothing to clamp the don't-care indices to */
  cg_line(c, "if (%s > 0) mg_gather(%zu, 1, %s, %lld, %s, %s, %d, %lld, %s);", dim_expr(c, x, a), es,
          dim_expr(c, x, a), (long long)inner, cg_vin(c, x), cg_vin(c, ix), ix->dtype == MG_I64,
          (long long)cg_numel(ix), cg_vout(c, y));
  return 0;
}

static int emit_concat_along(cg_ctx *c, const mg_node *n) {
  const mg_value *y = n->out[0];
  int a = (int)mg_attr_int(n, "axis", 0);
  if (a < 0) a += y->shape.rank;
  int64_t inner = 1;
  for (int d = a + 1; d < y->shape.rank; d++) inner *= y->shape.d[d].v;
  size_t row = (size_t)inner * cg_elem_bytes(y->dtype);
  cg_need(c, "tensor.c");
  cg_line(c, "{");
  cg_line(c, "  int64_t at_ = 0;");
  for (int i = 0; i < n->n_in; i++) {
    const mg_value *v = n->in[i];
    const char *len = dim_expr(c, v, a);
    cg_line(c, "  mg_copy_bytes((unsigned char *)%s + (size_t)at_ * %zu, %s, (size_t)%s * %zu);", cg_vout(c, y), row,
            cg_vin(c, v), len, row);
    cg_line(c, "  at_ += %s;", len);
  }
  cg_line(c, "  %s = at_;", rd_at(c, y, a));
  cg_line(c, "}");
  return 0;
}

static int emit_slice_rows(cg_ctx *c, const mg_node *n) {
  const mg_value *x = n->in[0], *y = n->out[0];
  rule_ctx r = {.c = c, .n = n};
  dshape xs;
  slice_spec sp[MG_MAX_RANK];
  int n_sp = 0;
  din(c, x, &xs);
  if (cg_dyn_slice_params(&r, &xs, sp, &n_sp) || n_sp != 1) return cg_unsupported(c, n, "slice parameters");
  int a = sp[0].axis;
  int64_t inner = 1;
  for (int d = a + 1; d < x->shape.rank; d++) inner *= x->shape.d[d].v;
  cg_need(c, "dynamic.c");
  cg_line(c, "{");
  cg_line(c, "  int64_t first_, cnt_ = mg_slice_range(%s, %s, %s, %lldLL, &first_);", dim_expr(c, x, a),
          sp[0].start_rt ? str(c, "%s[0]", cg_in(c, n->in[1])) : str(c, "%lldLL", (long long)sp[0].start),
          sp[0].end_rt ? str(c, "%s[0]", cg_in(c, n->in[2])) : str(c, "%lldLL", (long long)sp[0].end),
          (long long)sp[0].step);
  cg_line(c, "  mg_copy_rows(%zu, cnt_, %s, first_, %lldLL, %s);", (size_t)inner * cg_elem_bytes(x->dtype),
          cg_vin(c, x), (long long)sp[0].step, cg_vout(c, y));
  cg_line(c, "  %s = cnt_;", rd_at(c, y, a));
  cg_line(c, "}");
  return 0;
}

static const char *reduce_enum(mg_op op) {
  switch (op) {
  case MG_OP_ReduceSum: return "MG_REDUCE_SUM";
  case MG_OP_ReduceMean: return "MG_REDUCE_MEAN";
  case MG_OP_ReduceSumSquare: return "MG_REDUCE_SUM_SQUARE";
  case MG_OP_ReduceL1: return "MG_REDUCE_L1";
  case MG_OP_ReduceL2: return "MG_REDUCE_L2";
  case MG_OP_ReduceLogSum: return "MG_REDUCE_LOG_SUM";
  case MG_OP_ReduceLogSumExp: return "MG_REDUCE_LOG_SUM_EXP";
  case MG_OP_ReduceMax: return "MG_REDUCE_MAX";
  case MG_OP_ReduceMin: return "MG_REDUCE_MIN";
  default: return "MG_REDUCE_PROD";
  }
}

static int emit_reduce_all(cg_ctx *c, const mg_node *n) {
  const mg_value *x = n->in[0], *y = n->out[0];
  if (!cg_rt_dtype(x->dtype) || x->dtype != y->dtype) return cg_unsupported(c, n, "dtype %s", mg_dtype_name(x->dtype));
  cg_need(c, "reduce.c");
  cg_need(c, "tensor.c");
  if (x->dtype == MG_F32) {
    cg_line(c, "mg_reduce_f32(%s, 1, %s, 1, %s, %s);", reduce_enum(n->op), numel_expr(c, x), cg_in(c, x), cg_out(c, y));
    return 0;
  }
  cg_line(c, "{");
  cg_line(c, "  const int64_t rs_[1] = {%s}, rst_[1] = {1}, ks_[1] = {1};", numel_expr(c, x));
  cg_line(c, "  mg_reduce(%s, %s, 0, ks_, ks_, 1, rs_, rst_, %s, %s);", cg_rt_dtype(x->dtype), reduce_enum(n->op),
          cg_vin(c, x), cg_vout(c, y));
  cg_line(c, "}");
  return 0;
}

static int emit_nms(cg_ctx *c, const mg_node *n) {
  const mg_value *b = n->in[0], *s = n->in[1], *y = n->out[0];
  const mg_value *mo = n->n_in > 2 ? n->in[2] : NULL, *iou = n->n_in > 3 ? n->in[3] : NULL;
  const mg_value *thr = n->n_in > 4 ? n->in[4] : NULL;
  if (y->dtype != MG_I64) return cg_unsupported(c, n, "output dtype %s", mg_dtype_name(y->dtype));
  if ((mo && mo->dtype != MG_I64) || (iou && iou->dtype != MG_F32) || (thr && thr->dtype != MG_F32))
    return cg_unsupported(c, n, "max_output_boxes_per_class must be int64, the thresholds float32");
  int64_t B = b->shape.d[0].v, C = s->shape.d[1].v, NB = b->shape.d[1].v;
  const char *scratch = cg_scratch(c, "%zu", mg_nms_scratch(NB));
  cg_need(c, "dynamic.c");
  cg_line(c, "{");
  cg_line(c, "  int64_t cnt_ = mg_nms(%lld, %lld, %s, %s, %lld, %s, %lld, %s, %s, %d, %s, %d, %s, %lld, %s);",
          (long long)B, (long long)C, dim_expr(c, b, 1), cg_in(c, b), (long long)(NB * 4), cg_in(c, s), (long long)NB,
          mo ? str(c, "%s[0]", cg_in(c, mo)) : "0", iou ? str(c, "%s[0]", cg_in(c, iou)) : "0.0f", thr != NULL,
          thr ? str(c, "%s[0]", cg_in(c, thr)) : "0.0f", (int)mg_attr_int(n, "center_point_box", 0), cg_out(c, y),
          (long long)y->shape.d[0].v, scratch);
  cg_line(c, "  if (cnt_ < 0) return MG_RT_EUNSUPPORTED; /* more boxes than planned: cannot happen */");
  cg_line(c, "  %s = cnt_;", rd_at(c, y, 0));
  cg_line(c, "}");
  return 0;
}

static int emit_select(cg_ctx *c, const mg_node *n) {
  int k = n->n_out;
  const mg_value *cond = n->in[0];
  int64_t cv;
  unsigned ce;
  cg_need(c, "tensor.c");
  if (cg_dyn_vbound(c, cond, &cv, &ce) == 1 && ce) {
    for (int i = 0; i < k; i++) {
      const mg_value *v = n->in[(cv ? 1 : 1 + k) + i], *y = n->out[i];
      cg_line(c, "mg_copy_bytes(%s, %s, %zu);", cg_vout(c, y), cg_vin(c, v),
              (size_t)cg_numel(y) * cg_elem_bytes(y->dtype));
    }
    return 0;
  }
  cg_line(c, "if (%s[0]) {", cg_in(c, cond));
  for (int side = 0; side < 2; side++) {
    if (side) cg_line(c, "} else {");
    for (int i = 0; i < k; i++) {
      const mg_value *v = n->in[1 + side * k + i], *y = n->out[i];
      size_t es = cg_elem_bytes(y->dtype);
      cg_line(c, "  mg_copy_bytes(%s, %s, (size_t)%s * %zu);", cg_vout(c, y), cg_vin(c, v), numel_expr(c, v), es);
      cg_line(c, "  %s = %s;", rd_at(c, y, 0), dim_expr(c, v, 0));
    }
  }
  cg_line(c, "}");
  return 0;
}

static int emit_constant_of_shape(cg_ctx *c, const mg_node *n, int (*emit)(cg_ctx *, const mg_node *)) {
  const mg_value *x = n->in[0], *y = n->out[0];
  if (emit(c, n)) return -1; /* fills the largest shape */
  for (int k = 0; k < y->shape.rank; k++) {
    cg_line(c, "%s = %s[%d];", rd_at(c, y, k), cg_in(c, x), k);
    cg_line(c, "if (%s < 0 || %s > %lld) return MG_RT_EUNSUPPORTED; /* past its planned bound */", rd_at(c, y, k),
            rd_at(c, y, k), (long long)y->shape.d[k].v);
  }
  return 0;
}

/* Expand: the kernel broadcasts to the largest shape; each run-time dim is the
 * shape's value, checked against its bound. */
static int emit_expand(cg_ctx *c, const mg_node *n, int (*emit)(cg_ctx *, const mg_node *)) {
  const mg_value *y = n->out[0], *sv = n->in[1], *x = n->in[0];
  if (emit(c, n)) return -1;
  int rank = y->shape.rank, ns = (int)sv->shape.d[0].v;
  int64_t hi[8];
  unsigned exact;
  cg_dyn_vbound(c, sv, hi, &exact);
  for (int k = 0; k < rank; k++) {
    int i = k - (rank - ns), j = k - (rank - x->shape.rank);
    if (i >= 0 && !(exact >> i & 1) && c->rd_expr[y->id] && c->rd_expr[y->id][k] && j >= 0)
      cg_line(c, "if (%s[%d] != 1 && %s[%d] != %s) return MG_RT_EUNSUPPORTED; /* does not broadcast */",
              cg_in(c, sv), i, cg_in(c, sv), i, dim_expr(c, x, j));
    if (!c->rd_expr[y->id] || c->rd_expr[y->id][k]) continue;
    cg_line(c, "%s = %s[%d];", rd_at(c, y, k), cg_in(c, sv), k - (rank - ns));
    cg_line(c, "if (%s < 0 || %s > %lld) return MG_RT_EUNSUPPORTED; /* past its planned bound */", rd_at(c, y, k),
            rd_at(c, y, k), (long long)y->shape.d[k].v);
  }
  return 0;
}

/* Reshape whose target has the run-time axis' length as a computed entry. */
static int emit_reshape_checked(cg_ctx *c, const mg_node *n, int (*emit)(cg_ctx *, const mg_node *)) {
  const mg_value *x = n->in[0], *t = n->in[1], *y = n->out[0];
  int64_t hi[8];
  unsigned exact;
  int q = cg_dyn_vbound(c, t, hi, &exact);
  if (emit(c, n)) return -1;
  for (int d = 0; d < q; d++)
    if (!(exact >> d & 1))
      cg_line(c, "if (%s[%d] != %s) return MG_RT_EUNSUPPORTED; /* the target is not the run-time length */",
              cg_in(c, t), d, c->rd_expr[y->id][d] ? c->rd_expr[y->id][d] : dim_expr(c, x, varying_axis_of(c, x)));
  return 0;
}

static int emit_range(cg_ctx *c, const mg_node *n, int (*emit)(cg_ctx *, const mg_node *)) {
  const mg_value *y = n->out[0];
  int64_t st, dl;
  cg_const_ints(n->in[0], &st, 1);
  cg_const_ints(n->in[2], &dl, 1);
  if (emit(c, n)) return -1; /* the largest count of values */
  cg_line(c, "{");
  cg_line(c, "  int64_t lim_ = %s[0];", cg_in(c, n->in[1]));
  cg_line(c, "  %s = lim_ > %lldLL ? (lim_ - %lldLL + %lldLL - 1) / %lldLL : 0;", rd_at(c, y, 0), (long long)st,
          (long long)st, (long long)dl, (long long)dl);
  cg_line(c, "  if (%s > %lld) return MG_RT_EUNSUPPORTED; /* past its planned bound */", rd_at(c, y, 0),
          (long long)y->shape.d[0].v);
  cg_line(c, "}");
  return 0;
}

int cg_emit_dynamic(cg_ctx *c, const mg_node *n, int (*emit)(cg_ctx *, const mg_node *)) {
  int kind = c->dyn_node[n->id];
  if (kind == DYN_FAILED)
    return cg_unsupported(c, n, "run-time length: %s", c->dyn_guard[n->id] ? c->dyn_guard[n->id] : "no rule");
  for (int k = 0; k < n->n_in; k++)
    if (is_dyn(c, n->in[k]) && (n->in[k]->dtype == MG_STRING))
      return cg_unsupported(c, n, "string values of run-time length");
  if (c->dyn_guard[n->id])
    cg_line(c, "if (%s) return MG_RT_EUNSUPPORTED; /* run-time lengths that the plan cannot broadcast */",
            c->dyn_guard[n->id]);
  int rc = 0;
  if (kind == DYN_POSITIONWISE) {
    rc = emit(c, n);
  } else {
    switch (n->op) {
    case MG_OP_Shape: case MG_OP_Size: rc = emit_shape(c, n); break;
    case MG_OP_NonZero: rc = emit_nonzero(c, n); break;
    case MG_OP_TopK: rc = emit_topk(c, n); break;
    case MG_OP_Gather: rc = emit_gather_axis(c, n); break;
    case MG_OP_Concat: rc = emit_concat_along(c, n); break;
    case MG_OP_Slice: rc = emit_slice_rows(c, n); break;
    case MG_OP_NonMaxSuppression: rc = emit_nms(c, n); break;
    case MG_OP_MigcSelect: rc = emit_select(c, n); break;
    case MG_OP_ConstantOfShape: rc = emit_constant_of_shape(c, n, emit); break;
    case MG_OP_Expand: rc = emit_expand(c, n, emit); break;
    case MG_OP_Range: rc = emit_range(c, n, emit); break;
    case MG_OP_RoiAlign: case MG_OP_ScatterElements: rc = emit(c, n); break; /* they read cg_dim */
    case MG_OP_Reshape: rc = emit_reshape_checked(c, n, emit); break;
    default: rc = emit_reduce_all(c, n); break;
    }
  }
  if (rc || c->cur_failed) return -1;
  for (int k = 0; k < n->n_out; k++) {
    const mg_value *v = n->out[k];
    if (!is_dyn(c, v)) continue;
    for (int d = 0; d < v->shape.rank; d++)
      if (c->rd_expr[v->id][d] && strcmp(c->rd_expr[v->id][d], rd_at(c, v, d)))
        cg_line(c, "%s = %s;", rd_at(c, v, d), c->rd_expr[v->id][d]);
  }
  return 0;
}

const char *cg_dyn_numel(cg_ctx *c, const mg_value *v) { return numel_expr(c, v); }
