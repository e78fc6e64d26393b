/* C emitters of the elementwise family (runtime/elementwise.c; contract in
 * codegen/cg.h): unary maths and activations, broadcasting binary ops and
 * comparisons, variadic Max/Min/Sum/Mean, Where, Clip, Cast/CastLike, IsNaN/IsInf.
 *
 * Broadcasting is resolved here: every input gets element strides along the output
 * shape (0 on broadcast dims), size-1 dims are dropped, and adjacent dims that are
 * contiguous-or-broadcast alike for every input are merged, so the runtime usually
 * sees rank 1-3 with long inner rows. float32 calls the float32 kernels (with the
 * fused activation, for the ops flagged CG_EPILOGUE); other dtypes call the generic
 * ones, which cannot apply an activation (the driver only fuses into float32). */
#include "cg.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char RT_FILE[] = "elementwise.c";

/* ------------------------------------------------------------- helpers */

static int is_float(mg_dtype t) { return t == MG_F32 || t == MG_F64 || t == MG_F16 || t == MG_BF16; }
static int is_int(mg_dtype t) { return mg_dtype_is_int(t); }
static int is_numeric(mg_dtype t) { return is_float(t) || is_int(t); }

/* A finite float as an exact C constant (hex float literal); buf holds 40 chars. */
static const char *flit(char *buf, float f) {
  snprintf(buf, 40, "%af", (double)f);
  return buf;
}

/* The runtime needs these files: the kernels, and conv.c for mg_bias_act (used by
 * the float32 epilogue). */
static void need_runtime(cg_ctx *c) {
  cg_need(c, RT_FILE);
  cg_need(c, "conv.c");
  cg_need(c, "sgemm.c"); /* conv.c calls mg_sgemm */
}

/* ... and the generic paths of every other dtype (mg_*_any, mg_cast, mg_isnan,
 * mg_isinf), which a float32 model does not compile. */
static void need_any(cg_ctx *c) {
  need_runtime(c);
  cg_need(c, "elementwise_any.c");
}

/* A broadcast walk: the coalesced output shape and each input's element strides. */
typedef struct {
  int rank;
  int64_t shape[MG_MAX_RANK];
  int64_t strides[3][MG_MAX_RANK];
  int64_t numel;
} ew_walk;

/* Builds the walk of output `out` over inputs ins[n_in] (numpy broadcasting, each
 * input's dims right-aligned to the output's). Returns -1 after cg_unsupported when
 * an input does not broadcast to the output. */
static int make_walk(cg_ctx *c, const mg_node *n, const mg_value *out, const mg_value *const *ins,
                     int n_in, ew_walk *w) {
  int64_t od[MG_MAX_RANK], st[3][MG_MAX_RANK];
  const int orank = cg_dims(out, od);
  w->numel = 1;
  for (int d = 0; d < orank; d++) w->numel *= od[d];
  for (int k = 0; k < n_in; k++) {
    int64_t id[MG_MAX_RANK], s = 1;
    const int irank = cg_dims(ins[k], id);
    if (irank > orank) return cg_unsupported(c, n, "input %d has a higher rank than the output", k);
    for (int d = orank - 1; d >= 0; d--) {
      const int di = d - (orank - irank);
      const int64_t dim = di >= 0 ? id[di] : 1;
      if (dim != 1 && dim != od[d])
        return cg_unsupported(c, n, "input %d does not broadcast to the output shape", k);
      st[k][d] = dim == 1 ? 0 : s;
      s *= dim;
    }
  }
  /* drop size-1 output dims; merge a dim into the previous one when, for every
   * input, stepping the previous dim once equals walking the whole current one */
  w->rank = 0;
  for (int d = 0; d < orank; d++) {
    if (od[d] == 1) continue;
    int merge = w->rank > 0;
    for (int k = 0; k < n_in && merge; k++)
      merge = w->strides[k][w->rank - 1] == st[k][d] * od[d];
    if (merge) {
      w->shape[w->rank - 1] *= od[d];
      for (int k = 0; k < n_in; k++) w->strides[k][w->rank - 1] = st[k][d];
      continue;
    }
    w->shape[w->rank] = od[d];
    for (int k = 0; k < n_in; k++) w->strides[k][w->rank] = st[k][d];
    w->rank++;
  }
  if (w->rank == 0) { /* a single element */
    w->rank = 1;
    w->shape[0] = 1;
    for (int k = 0; k < n_in; k++) w->strides[k][0] = 0;
  }
  return 0;
}

/* The fused activation; -1 after cg_unsupported if one is fused into a node whose
 * output is not float32 (the generic kernels cannot apply it). */
static int get_act(cg_ctx *c, const mg_node *n, cg_act *act) {
  cg_fused_act(c, n, act);
  if (strcmp(act->act, "MG_ACT_NONE") && n->out[0]->dtype != MG_F32)
    return cg_unsupported(c, n, "fused activation on dtype %s", mg_dtype_name(n->out[0]->dtype));
  /* mg_bias_act, which applies most activations to each row, counts in int */
  if (strcmp(act->act, "MG_ACT_NONE") && cg_numel(n->out[0]) > INT32_MAX)
    return cg_unsupported(c, n, "fused activation over more than 2^31 elements");
  return 0;
}

/* Every dtype the generic kernels handle: numeric or bool (not string/complex). */
static int rt_dtype_ok(mg_dtype t) { return cg_rt_dtype(t) != NULL && (is_numeric(t) || t == MG_BOOL); }

/* ---------------------------------------------------------------- unary */

enum { T_FLOAT = 1, T_INT = 2, T_BOOL = 4 };
enum { T_F = T_FLOAT, T_I = T_INT, T_B = T_BOOL, T_FI = T_FLOAT | T_INT };

typedef struct {
  const char *rt; /* mg_unop enumerator's name; NULL: the op has no unary kernel */
  int types;      /* dtype classes the runtime computes exactly */
  int id;         /* the enumerator itself, so that a row naming none fails to compile */
} unary_info;

/* From the unary column of ops.def. */
static const unary_info UNARY[MG_OP_COUNT] = {
#define UN(id, classes) "MG_UN_" #id, T_##classes, MG_UN_##id
#define OP(name, mi, ma, mo, mao, rule, flags, unary, attrs) [MG_OP_##name] = {unary},
#include "ops.def"
#undef OP
#undef UN
};

int cg_has_unary_kernel(mg_op op) { return (unsigned)op < MG_OP_COUNT && UNARY[op].rt; }

/* The k-th float attribute of op's spec (the kernel's a for k = 0, b for 1),
 * copied into name[64], and its default; NULL when the op has fewer. */
static const char *float_attr(mg_op op, int k, char name[64], float *def) {
  const char *p = mg_op_get(op)->attrs;
  while (*p) {
    while (*p == ' ') p++;
    size_t len = strcspn(p, ":"), tok = strcspn(p, " ");
    if (len < tok && !strncmp(p + len, ":f", 2) && (p[len + 2] == '=' || p[len + 2] == ' ' || !p[len + 2])) {
      if (k-- == 0) {
        if (len >= 64) return NULL;
        memcpy(name, p, len), name[len] = 0;
        *def = p[len + 2] == '=' ? strtof(p + len + 3, NULL) : 0.0f;
        return name;
      }
    }
    p += tok;
  }
  return NULL;
}

static int dtype_class(mg_dtype t) {
  return is_float(t) ? T_FLOAT : is_int(t) ? T_INT : t == MG_BOOL ? T_BOOL : 0;
}

/* Emits y = op(x) over `count` elements of dtype t (generic or float32 path). */
static void emit_unary_call(cg_ctx *c, const char *rt_op, const mg_value *x, const mg_value *y,
                            int64_t count, float a, float b) {
  char fa[40], fb[40];
  if (x->dtype == MG_F32)
    cg_kernel(c, 0, "mg_unary_f32", "%s, %lld, %s, %s, %s, %s", rt_op, (long long)count, cg_in(c, x),
            cg_out(c, y), flit(fa, a), flit(fb, b));
  else
    need_any(c), cg_line(c, "mg_unary_any(%s, %s, %lld, %s, %s, %s, %s);", rt_op, cg_rt_dtype(x->dtype),
            (long long)count, cg_vin(c, x), cg_vout(c, y), flit(fa, a), flit(fb, b));
}

/* Checks that x and y are present and of one dtype and element count. */
static int check_same(cg_ctx *c, const mg_node *n, const mg_value *x, const mg_value *y) {
  if (!x || !y) return cg_unsupported(c, n, "missing input or output");
  if (x->dtype != y->dtype) return cg_unsupported(c, n, "output dtype differs from the input's");
  if (cg_numel(x) != cg_numel(y)) return cg_unsupported(c, n, "output shape differs from the input's");
  return 0;
}

/* All the one-input ops of UNARY. */
static int emit_unary(cg_ctx *c, const mg_node *n) {
  const unary_info *u = cg_has_unary_kernel(n->op) ? &UNARY[n->op] : NULL;
  const mg_value *x = n->in[0], *y = n->out[0];
  const char *rt;
  char an[64], bn[64];
  float a = 0.0f, b = 0.0f, da = 0.0f, db = 0.0f;
  if (!u) return cg_unsupported(c, n, "not an elementwise unary op");
  if (check_same(c, n, x, y)) return -1;
  if (!(dtype_class(x->dtype) & u->types) || !rt_dtype_ok(x->dtype))
    return cg_unsupported(c, n, "dtype %s", mg_dtype_name(x->dtype));
  rt = u->rt;
  if (n->op == MG_OP_Gelu) {
    const char *ap = mg_attr_str(n, "approximate", "none");
    if (!strcmp(ap, "tanh")) rt = "MG_UN_GELU_TANH";
    else if (strcmp(ap, "none")) return cg_unsupported(c, n, "attribute approximate='%s'", ap);
  }
  if (float_attr(n->op, 0, an, &da)) a = mg_attr_float(n, an, da);
  if (float_attr(n->op, 1, bn, &db)) b = mg_attr_float(n, bn, db);
  if (!isfinite(a) || !isfinite(b)) return cg_unsupported(c, n, "non-finite attribute");
  if (n->op == MG_OP_Celu && a == 0.0f) return cg_unsupported(c, n, "attribute alpha=0");
  if (cg_numel(y) == 0) return 0;
  need_runtime(c);
  emit_unary_call(c, rt, x, y, cg_numel(y), a, b);
  return 0;
}

/* Every op with a unary kernel in ops.def (emit_c.c's emitter_of asks). */
int cg_emit_unary(cg_ctx *c, const mg_node *n) { return emit_unary(c, n); }
#undef UNARY_EMITTER

/* IsNaN / IsInf: float input, bool output. */
static int emit_predicate(cg_ctx *c, const mg_node *n) {
  const mg_value *x = n->in[0], *y = n->out[0];
  if (!x || !y || y->dtype != MG_BOOL || cg_numel(x) != cg_numel(y))
    return cg_unsupported(c, n, "output must be bool of the input's shape");
  if (!is_float(x->dtype)) return cg_unsupported(c, n, "dtype %s", mg_dtype_name(x->dtype));
  if (cg_numel(y) == 0) return 0;
  need_any(c);
  if (n->op == MG_OP_IsNaN)
    cg_line(c, "mg_isnan(%s, %lld, %s, %s);", cg_rt_dtype(x->dtype), (long long)cg_numel(y),
            cg_vin(c, x), cg_out(c, y));
  else
    cg_line(c, "mg_isinf(%s, %lld, %s, %s, %d, %d);", cg_rt_dtype(x->dtype), (long long)cg_numel(y),
            cg_vin(c, x), cg_out(c, y), mg_attr_int(n, "detect_negative", 1) != 0,
            mg_attr_int(n, "detect_positive", 1) != 0);
  return 0;
}
int cg_emit_IsNaN(cg_ctx *c, const mg_node *n) { return emit_predicate(c, n); }
int cg_emit_IsInf(cg_ctx *c, const mg_node *n) { return emit_predicate(c, n); }

/* Clip: min and max are optional one-element inputs, read at run time. */
int cg_emit_Clip(cg_ctx *c, const mg_node *n) {
  const mg_value *x = n->in[0], *y = n->out[0];
  const mg_value *lo = n->n_in > 1 ? n->in[1] : NULL, *hi = n->n_in > 2 ? n->in[2] : NULL;
  if (check_same(c, n, x, y)) return -1;
  if (!is_numeric(x->dtype) || !rt_dtype_ok(x->dtype))
    return cg_unsupported(c, n, "dtype %s", mg_dtype_name(x->dtype));
  if ((lo && (lo->dtype != x->dtype || cg_numel(lo) != 1)) ||
      (hi && (hi->dtype != x->dtype || cg_numel(hi) != 1)))
    return cg_unsupported(c, n, "min and max must be one element of the input's dtype");
  if (cg_numel(y) == 0) return 0;
  need_runtime(c);
  if (x->dtype == MG_F32)
    cg_line(c, "mg_clip_f32(%lld, %s, %s, %s, %s);", (long long)cg_numel(y), cg_in(c, x),
            cg_out(c, y), lo ? cg_in(c, lo) : "NULL", hi ? cg_in(c, hi) : "NULL");
  else
    need_any(c), cg_line(c, "mg_clip_any(%s, %lld, %s, %s, %s, %s);", cg_rt_dtype(x->dtype),
            (long long)cg_numel(y), cg_vin(c, x), cg_vout(c, y), lo ? cg_vin(c, lo) : "NULL",
            hi ? cg_vin(c, hi) : "NULL");
  return 0;
}

/* Cast and CastLike. saturate only concerns float8 targets, which the runtime has
 * no dtype for (cg_rt_dtype is NULL for them), so it never changes a result here. */
static int emit_cast(cg_ctx *c, const mg_node *n, mg_dtype to) {
  const mg_value *x = n->in[0], *y = n->out[0];
  if (!x || !y) return cg_unsupported(c, n, "missing input or output");
  if (!rt_dtype_ok(x->dtype) || !rt_dtype_ok(to))
    return cg_unsupported(c, n, "cast from %s to %s", mg_dtype_name(x->dtype), mg_dtype_name(to));
  if (y->dtype != to || cg_numel(x) != cg_numel(y))
    return cg_unsupported(c, n, "output type differs from the target type");
  if (cg_numel(y) == 0) return 0;
  need_any(c);
  cg_line(c, "mg_cast(%s, %s, %lld, %s, %s);", cg_rt_dtype(x->dtype), cg_rt_dtype(to),
          (long long)cg_numel(y), cg_vin(c, x), cg_vout(c, y));
  return 0;
}
int cg_emit_Cast(cg_ctx *c, const mg_node *n) {
  return emit_cast(c, n, (mg_dtype)mg_attr_int(n, "to", 0));
}
int cg_emit_CastLike(cg_ctx *c, const mg_node *n) {
  if (n->n_in < 2 || !n->in[1]) return cg_unsupported(c, n, "missing target_type input");
  return emit_cast(c, n, n->in[1]->dtype);
}

/* ---------------------------------------------------------------- binary */

/* Whether mg_binary_f32 computes rt_op (see mg_rt_elementwise.h). */


/* The ops mg_binary_f32 computes (mg_rt_elementwise.h), each with the macro that
 * selects its row (mg_rt_select.h). */
static const char *const f32_binary_ops[][2] = {
    {"MG_BIN_ADD", "MG_RT_USE_BIN_ADD"}, {"MG_BIN_SUB", "MG_RT_USE_BIN_SUB"},
    {"MG_BIN_MUL", "MG_RT_USE_BIN_MUL"}, {"MG_BIN_DIV", "MG_RT_USE_BIN_DIV"},
    {"MG_BIN_POW", "MG_RT_USE_BIN_POW"}, {"MG_BIN_FMOD", "MG_RT_USE_BIN_FMOD"},
    {"MG_BIN_MAX", "MG_RT_USE_BIN_MAX"}, {"MG_BIN_MIN", "MG_RT_USE_BIN_MIN"},
    {"MG_BIN_PRELU", "MG_RT_USE_BIN_PRELU"}};

/* mg_binary_f32's selecting macro for rt_op, or NULL when it does not compute it. */
static const char *f32_binary_macro(const char *rt_op) {
  for (size_t i = 0; i < sizeof f32_binary_ops / sizeof f32_binary_ops[0]; i++)
    if (!strcmp(f32_binary_ops[i][0], rt_op)) return f32_binary_ops[i][1];
  return NULL;
}

static int f32_kernel_op(const char *rt_op) { return f32_binary_macro(rt_op) != NULL; }

/* Selects mg_binary_f32's row for rt_op. */
static void select_binary(cg_ctx *c, const char *rt_op) {
  const char *m = f32_binary_macro(rt_op);
  if (m) cg_select(c, m);
}

/* Emits out = a op b over the walk (strides of a, b in w->strides[ia], [ib]); a_expr
 * and b_expr replace cg_in() when given (the running result of a variadic op).
 * Returns -1 after cg_unsupported if an activation would need the generic kernel. */
static int emit_binary_call(cg_ctx *c, const mg_node *n, const char *rt_op, const ew_walk *w,
                            const mg_value *a, const char *a_expr, int ia, const mg_value *b,
                            const char *b_expr, int ib, const mg_value *y, const cg_act *act) {
  const char *shape = cg_i64s(c, w->shape, w->rank);
  const char *sa = cg_i64s(c, w->strides[ia], w->rank), *sb = cg_i64s(c, w->strides[ib], w->rank);
  char fa[40], fb[40];
  if (a->dtype == MG_F32 && b->dtype == MG_F32 && y->dtype == MG_F32 && f32_kernel_op(rt_op)) {
    select_binary(c, rt_op);
    cg_kernel(c, 0, "mg_binary_f32", "%s, %d, %s, %s, %s, %s, %s, %s, %s, %s, %s", rt_op, w->rank, shape,
            a_expr ? a_expr : cg_in(c, a), sa, b_expr ? b_expr : cg_in(c, b), sb, cg_out(c, y),
            act->act, flit(fa, act->a), flit(fb, act->b));
  } else {
    if (strcmp(act->act, "MG_ACT_NONE"))
      return cg_unsupported(c, n, "fused activation on a non-float32 kernel");
    need_any(c);
    cg_line(c, "mg_binary_any(%s, %s, %s, %s, %d, %s, %s, %s, %s, %s, %s);", rt_op,
            cg_rt_dtype(a->dtype), cg_rt_dtype(b->dtype), cg_rt_dtype(y->dtype), w->rank, shape,
            a_expr ? a_expr : cg_vin(c, a), sa, b_expr ? b_expr : cg_vin(c, b), sb, cg_vout(c, y));
  }
  return 0;
}

/* The runtime op and dtype rules of a two-input op; NULL after cg_unsupported. */
static const char *binary_op(cg_ctx *c, const mg_node *n, mg_dtype ta, mg_dtype tb) {
  const int cls = dtype_class(ta);
  const char *rt = NULL;
  int types = T_FLOAT | T_INT, same = 1;
  switch (n->op) {
  case MG_OP_Add: case MG_OP_Sum: case MG_OP_Mean: rt = "MG_BIN_ADD"; break;
  case MG_OP_Sub: rt = "MG_BIN_SUB"; break;
  case MG_OP_Mul: rt = "MG_BIN_MUL"; break;
  case MG_OP_Div: rt = "MG_BIN_DIV"; break;
  case MG_OP_Pow: rt = "MG_BIN_POW"; same = 0; break;
  case MG_OP_Max: rt = "MG_BIN_MAX"; break;
  case MG_OP_Min: rt = "MG_BIN_MIN"; break;
  case MG_OP_PRelu: rt = "MG_BIN_PRELU"; break;
  case MG_OP_Mod:
    if (mg_attr_int(n, "fmod", 0)) {
      rt = "MG_BIN_FMOD";
    } else {
      /* ONNX requires fmod=1 for floats */
      if (cls == T_FLOAT) { cg_unsupported(c, n, "Mod of %s with fmod=0", mg_dtype_name(ta)); return NULL; }
      rt = "MG_BIN_MOD";
    }
    break;
  case MG_OP_BitShift: {
    const char *dir = mg_attr_str(n, "direction", "");
    if (!strcmp(dir, "LEFT")) rt = "MG_BIN_SHIFT_LEFT";
    else if (!strcmp(dir, "RIGHT")) rt = "MG_BIN_SHIFT_RIGHT";
    else { cg_unsupported(c, n, "attribute direction='%s'", dir); return NULL; }
    types = T_INT;
    break;
  }
  case MG_OP_BitwiseAnd: rt = "MG_BIN_BITWISE_AND"; types = T_INT; break;
  case MG_OP_BitwiseOr: rt = "MG_BIN_BITWISE_OR"; types = T_INT; break;
  case MG_OP_BitwiseXor: rt = "MG_BIN_BITWISE_XOR"; types = T_INT; break;
  case MG_OP_And: rt = "MG_BIN_AND"; types = T_BOOL; break;
  case MG_OP_Or: rt = "MG_BIN_OR"; types = T_BOOL; break;
  case MG_OP_Xor: rt = "MG_BIN_XOR"; types = T_BOOL; break;
  case MG_OP_Equal: rt = "MG_BIN_EQUAL"; types = T_FLOAT | T_INT | T_BOOL; break;
  case MG_OP_Greater: rt = "MG_BIN_GREATER"; break;
  case MG_OP_GreaterOrEqual: rt = "MG_BIN_GREATER_EQUAL"; break;
  case MG_OP_Less: rt = "MG_BIN_LESS"; break;
  case MG_OP_LessOrEqual: rt = "MG_BIN_LESS_EQUAL"; break;
  default: cg_unsupported(c, n, "not an elementwise binary op"); return NULL;
  }
  if ((n->op == MG_OP_Sum || n->op == MG_OP_Mean) && cls != T_FLOAT) types = T_FLOAT;
  if (!(cls & types) || !rt_dtype_ok(ta) || !rt_dtype_ok(tb) || (same && ta != tb) ||
      (!same && !is_numeric(tb))) {
    cg_unsupported(c, n, "dtypes %s, %s", mg_dtype_name(ta), mg_dtype_name(tb));
    return NULL;
  }
  return rt;
}

/* The expected output dtype of a binary op: bool for comparisons, else input 0's. */
static mg_dtype binary_out_dtype(const mg_node *n, mg_dtype ta) {
  switch (n->op) {
  case MG_OP_Equal: case MG_OP_Greater: case MG_OP_GreaterOrEqual: case MG_OP_Less:
  case MG_OP_LessOrEqual:
    return MG_BOOL;
  default: return ta;
  }
}

/* Two-input ops (also PRelu, whose slope broadcasts to X like any numpy input). */
static int emit_binary(cg_ctx *c, const mg_node *n) {
  const mg_value *a = n->in[0], *b = n->n_in > 1 ? n->in[1] : NULL, *y = n->out[0];
  const mg_value *ins[2];
  const char *rt;
  ew_walk w;
  cg_act act;
  if (!a || !b || !y) return cg_unsupported(c, n, "missing input or output");
  if (!(rt = binary_op(c, n, a->dtype, b->dtype))) return -1;
  if (y->dtype != binary_out_dtype(n, a->dtype)) return cg_unsupported(c, n, "unexpected output dtype");
  ins[0] = a;
  ins[1] = b;
  if (make_walk(c, n, y, ins, 2, &w) || get_act(c, n, &act)) return -1;
  if (w.numel == 0) return 0;
  need_runtime(c);
  return emit_binary_call(c, n, rt, &w, a, NULL, 0, b, NULL, 1, y, &act);
}

#define BINARY_EMITTER(Op) \
  int cg_emit_##Op(cg_ctx *c, const mg_node *n) { return emit_binary(c, n); }
BINARY_EMITTER(Add)
BINARY_EMITTER(Sub)
BINARY_EMITTER(Mul)
BINARY_EMITTER(Div)
BINARY_EMITTER(Pow)
BINARY_EMITTER(Mod)
BINARY_EMITTER(BitShift)
BINARY_EMITTER(BitwiseAnd)
BINARY_EMITTER(BitwiseOr)
BINARY_EMITTER(BitwiseXor)
BINARY_EMITTER(And)
BINARY_EMITTER(Or)
BINARY_EMITTER(Xor)
BINARY_EMITTER(Equal)
BINARY_EMITTER(Greater)
BINARY_EMITTER(GreaterOrEqual)
BINARY_EMITTER(Less)
BINARY_EMITTER(LessOrEqual)
BINARY_EMITTER(PRelu)
#undef BINARY_EMITTER

/* The divisor of Mean, one element of dtype t, as a file-scope constant's name. */
static const char *mean_divisor(cg_ctx *c, mg_dtype t, int count) {
  switch (t) {
  case MG_F32: { const float f = (float)count; return cg_f32s(c, &f, 1); }
  case MG_F64: return cg_static(c, "double", "%d.0", count);
  case MG_F16: return cg_static(c, "uint16_t", "%u", (unsigned)mg_f32_to_f16((float)count));
  default: return cg_static(c, "uint16_t", "%u", (unsigned)mg_f32_to_bf16((float)count));
  }
}

/* The value whose buffer v shares: v itself, or the source of the views (Reshape
 * and friends, which the driver aliases) it was made from. */
static const mg_value *buffer_root(const mg_value *v) {
  while (v->producer && v->producer->n_in > 0 && v->producer->in[0] &&
         (mg_op_get(v->producer->op)->flags & (MG_OPF_VIEW | MG_OPF_INFER_VIEW)))
    v = v->producer->in[0];
  return v;
}

/* Max, Min, Sum, Mean: a left fold of two-input steps into the output. The output
 * may share input 0's buffer (CG_INPLACE), so input 0's repeats are folded in the
 * first step, before the output is written; three or more copies of input 0 are
 * unsupported. Mean divides by the count in a last step. The fused activation
 * runs in the last step. */
static int emit_variadic(cg_ctx *c, const mg_node *n) {
  const mg_value *y = n->out[0], *order[64], *ins[2];
  const char *rt;
  int cnt = 0, repeats = 0;
  cg_act act, none = {"MG_ACT_NONE", 0, 0};
  ew_walk w;
  if (!y || n->n_in < 1 || n->n_in > 64) return cg_unsupported(c, n, "%d inputs", n->n_in);
  for (int i = 0; i < n->n_in; i++) {
    if (!n->in[i]) return cg_unsupported(c, n, "missing input %d", i);
    if (!(rt = binary_op(c, n, n->in[0]->dtype, n->in[i]->dtype))) return -1;
  }
  if (y->dtype != n->in[0]->dtype) return cg_unsupported(c, n, "unexpected output dtype");
  /* input 0's buffer may become the output's: whatever reads that buffer goes first */
  const mg_value *root0 = buffer_root(n->in[0]);
  order[cnt++] = n->in[0];
  for (int i = 1; i < n->n_in; i++)
    if (buffer_root(n->in[i]) == root0) order[cnt++] = n->in[i], repeats++;
  if (repeats > 1) return cg_unsupported(c, n, "input 0's buffer read by %d inputs", repeats + 1);
  for (int i = 1; i < n->n_in; i++)
    if (buffer_root(n->in[i]) != root0) order[cnt++] = n->in[i];
  if (get_act(c, n, &act)) return -1;
  if (cg_numel(y) == 0) return 0;
  need_runtime(c);
  if (cnt == 1) { /* one input: a copy (plus the activation: max(x, x) is x) */
    ins[0] = order[0];
    if (make_walk(c, n, y, ins, 1, &w)) return -1;
    for (int d = 0; d < w.rank; d++) w.strides[1][d] = w.strides[0][d];
    return emit_binary_call(c, n, "MG_BIN_MAX", &w, order[0], NULL, 0, order[0], NULL, 1, y, &act);
  }
  for (int i = 1; i < cnt; i++) {
    const int last = i == cnt - 1 && n->op != MG_OP_Mean;
    if (i == 1) {
      ins[0] = order[0];
      ins[1] = order[1];
      if (make_walk(c, n, y, ins, 2, &w)) return -1;
      if (emit_binary_call(c, n, rt, &w, order[0], NULL, 0, order[1], NULL, 1, y, last ? &act : &none))
        return -1;
    } else {
      /* the running result is dense over the output shape: input 0 of the walk is y */
      ins[0] = y;
      ins[1] = order[i];
      if (make_walk(c, n, y, ins, 2, &w)) return -1;
      if (emit_binary_call(c, n, rt, &w, y, cg_out(c, y), 0, order[i], NULL, 1, y, last ? &act : &none))
        return -1;
    }
  }
  if (n->op == MG_OP_Mean) {
    const int64_t total = cg_numel(y), one = 1, zero = 0;
    char fa[40], fb[40];
    const char *shape = cg_i64s(c, &total, 1), *dense = cg_i64s(c, &one, 1), *bcast = cg_i64s(c, &zero, 1);
    const char *div = mean_divisor(c, y->dtype, cnt);
    if (y->dtype == MG_F32)
      select_binary(c, "MG_BIN_DIV"), cg_line(c, "mg_binary_f32(MG_BIN_DIV, 1, %s, %s, %s, %s, %s, %s, %s, %s, %s);", shape,
              cg_out(c, y), dense, div, bcast, cg_out(c, y), act.act, flit(fa, act.a), flit(fb, act.b));
    else
      need_any(c), cg_line(c, "mg_binary_any(MG_BIN_DIV, %s, %s, %s, 1, %s, %s, %s, &%s, %s, %s);",
              cg_rt_dtype(y->dtype), cg_rt_dtype(y->dtype), cg_rt_dtype(y->dtype), shape,
              cg_vout(c, y), dense, div, bcast, cg_vout(c, y));
  }
  return 0;
}
int cg_emit_Max(cg_ctx *c, const mg_node *n) { return emit_variadic(c, n); }
int cg_emit_Min(cg_ctx *c, const mg_node *n) { return emit_variadic(c, n); }
int cg_emit_Sum(cg_ctx *c, const mg_node *n) { return emit_variadic(c, n); }
int cg_emit_Mean(cg_ctx *c, const mg_node *n) { return emit_variadic(c, n); }

/* Where: cond (bool), x, y broadcast three ways; any element type. */
int cg_emit_Where(cg_ctx *c, const mg_node *n) {
  const mg_value *cond = n->in[0], *x = n->in[1], *yv = n->in[2], *out = n->out[0];
  const mg_value *ins[3];
  ew_walk w;
  if (!cond || !x || !yv || !out) return cg_unsupported(c, n, "missing input or output");
  if (cond->dtype != MG_BOOL) return cg_unsupported(c, n, "condition of dtype %s", mg_dtype_name(cond->dtype));
  if (x->dtype != yv->dtype || out->dtype != x->dtype || !cg_ctype(x->dtype) || !mg_dtype_size(x->dtype))
    return cg_unsupported(c, n, "dtypes %s, %s", mg_dtype_name(x->dtype), mg_dtype_name(yv->dtype));
  ins[0] = cond;
  ins[1] = x;
  ins[2] = yv;
  if (make_walk(c, n, out, ins, 3, &w)) return -1;
  if (w.numel == 0) return 0;
  need_runtime(c);
  cg_line(c, "mg_where(%zu, %d, %s, %s, %s, %s, %s, %s, %s, %s);", mg_dtype_size(x->dtype), w.rank,
          cg_i64s(c, w.shape, w.rank), cg_in(c, cond), cg_i64s(c, w.strides[0], w.rank),
          cg_vin(c, x), cg_i64s(c, w.strides[1], w.rank), cg_vin(c, yv),
          cg_i64s(c, w.strides[2], w.rank), cg_vout(c, out));
  return 0;
}
