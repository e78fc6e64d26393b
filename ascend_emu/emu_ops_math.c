/* aclnn elementwise ops of the strict emulator: binary arithmetic with broadcasting
 * (Add, Sub, Mul, Div, DivMod, PowTensorTensor), SWhere, Clamp, the unary
 * activations and Cast. Facts: ../shared/aclnn-api.json, Atlas A2/A3 column.
 * Where a note lists no dtypes, the arithmetic ops take FLOAT, FLOAT16 and BFLOAT16
 * with one dtype for every tensor: the notes cite a promotion table they do not list. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "emu_internal.h"

static const char *NOLIST = "the note lists no dtypes; the emulator takes FLOAT, FLOAT16, BFLOAT16";

/* ===== binary arithmetic ========================================================= */
enum { B_ADD, B_SUB, B_MUL, B_DIV, B_TRUNC, B_FLOOR, B_POW };

static aclnnStatus run_binary(aclOpExecutor *e) {
  aclTensor *a = e->t[0], *b = e->t[1], *y = e->t[2];
  emu_view va, vb;
  int64_t n = emu_numel(y), i;
  double *A, *B, al = e->dv[0];
  emu_view_bcast(a, y->dims, y->ndim, &va);
  emu_view_bcast(b, y->dims, y->ndim, &vb);
  A = emu_load_view(a, &va);
  B = emu_load_view(b, &vb);
  for (i = 0; i < n; i++) {
    double x = A[i], z = B[i];
    switch (e->iv[0]) {
    case B_ADD: A[i] = x + al * z; break;
    case B_SUB: A[i] = x - al * z; break;
    case B_MUL: A[i] = x * z; break;
    case B_DIV: A[i] = x / z; break;
    case B_TRUNC: A[i] = trunc(x / z); break;
    case B_FLOOR: A[i] = floor(x / z); break;
    default: A[i] = pow(x, z); break;
    }
  }
  emu_store(y, A);
  free(A); free(B);
  return ACLNN_SUCCESS;
}

/* self, other (names/positions given), out: dtypes, broadcasting, out shape */
static int binary_check(const char *fn, const aclTensor *self, const aclTensor *other,
                        const char *oname, aclTensor *out, int opos, const char *fact) {
  int64_t od[EMU_MAXDIM];
  int nd;
  char a[160], b[160];
  EMU_CHK(emu_need_tensor(fn, "self", 0, self, 1));
  EMU_CHK(emu_need_tensor(fn, oname, 1, other, 1));
  EMU_CHK(emu_need_tensor(fn, "out", opos, out, 1));
  EMU_CHK(emu_need_dtype(fn, "self", 0, self, EMU_FLOATS, 3, NOLIST));
  EMU_CHK(emu_need_same_dtype(fn, oname, 1, other, self, "self"));
  EMU_CHK(emu_need_same_dtype(fn, "out", opos, out, self, "self"));
  /* notes: "broadcasting, <=8 dims" */
  if (self->ndim > EMU_MAXDIM || other->ndim > EMU_MAXDIM ||
      emu_broadcast(self->dims, self->ndim, other->dims, other->ndim, od, &nd))
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, oname, 1,
                         "shape %s does not broadcast with self's %s (%s)",
                         emu_shape_str(other->dims, other->ndim, a, sizeof a),
                         emu_shape_str(self->dims, self->ndim, b, sizeof b), fact);
  return emu_need_shape(fn, "out", opos, out, od, nd, "the broadcast of self and the other operand");
}

static aclnnStatus binary_done(const char *p2, const aclTensor *self, const aclTensor *other,
                               aclTensor *out, int op, double alpha, uint64_t *ws,
                               aclOpExecutor **ex) {
  aclOpExecutor *e = emu_exec_new(p2, 0, run_binary);
  e->t[0] = (aclTensor *)self; e->t[1] = (aclTensor *)other; e->t[2] = out; e->nt = 3;
  e->iv[0] = op;
  e->dv[0] = alpha;
  return emu_phase1_done(e, ws, ex);
}

/* aclnnAdd note: "out = self + alpha*other, broadcasting, <=8 dims ...; alpha is
 * aclScalar (required, non-null: NULLPTR error if null)"; aclnnSub: "out = self -
 * alpha*other, broadcasting, 0-8 dims; alpha aclScalar required" */
static aclnnStatus addsub(const char *fn, const char *p2, const aclTensor *self,
                          const aclTensor *other, const aclScalar *alpha, aclTensor *out,
                          int op, uint64_t *ws, aclOpExecutor **ex) {
  EMU_CHK(emu_phase1_outs(fn, ws, 4, ex));
  EMU_CHK(binary_check(fn, self, other, "other", out, 3,
                       op == B_ADD ? "aclnnAdd note: broadcasting, <=8 dims"
                                   : "aclnnSub note: broadcasting, 0-8 dims"));
  EMU_CHK(emu_need_scalar(fn, "alpha", 2, alpha, 1));
  return binary_done(p2, self, other, out, op, alpha->v, ws, ex);
}

aclnnStatus aclnnAddGetWorkspaceSize(const aclTensor *self, const aclTensor *other,
                                     const aclScalar *alpha, aclTensor *out,
                                     uint64_t *workspaceSize, aclOpExecutor **executor) {
  return addsub("aclnnAddGetWorkspaceSize", "aclnnAdd", self, other, alpha, out, B_ADD,
                workspaceSize, executor);
}
EMU_PHASE2(aclnnAdd)

aclnnStatus aclnnSubGetWorkspaceSize(const aclTensor *self, const aclTensor *other,
                                     const aclScalar *alpha, aclTensor *out,
                                     uint64_t *workspaceSize, aclOpExecutor **executor) {
  return addsub("aclnnSubGetWorkspaceSize", "aclnnSub", self, other, alpha, out, B_SUB,
                workspaceSize, executor);
}
EMU_PHASE2(aclnnSub)

/* aclnnMul note: "out = self*other, broadcasting; no alpha"; aclnnDiv note: "out =
 * self/other (true division), broadcasting; no rounding mode"; aclnnPowTensorTensor
 * note: "broadcasting; self and exponent must not both be BOOL" */
static aclnnStatus plain_binary(const char *fn, const char *p2, const aclTensor *self,
                                const aclTensor *other, const char *oname, aclTensor *out,
                                int op, const char *fact, uint64_t *ws, aclOpExecutor **ex) {
  EMU_CHK(emu_phase1_outs(fn, ws, 3, ex));
  EMU_CHK(binary_check(fn, self, other, oname, out, 2, fact));
  return binary_done(p2, self, other, out, op, 1.0, ws, ex);
}

aclnnStatus aclnnMulGetWorkspaceSize(const aclTensor *self, const aclTensor *other,
                                     aclTensor *out, uint64_t *workspaceSize,
                                     aclOpExecutor **executor) {
  return plain_binary("aclnnMulGetWorkspaceSize", "aclnnMul", self, other, "other", out, B_MUL,
                      "aclnnMul note: broadcasting", workspaceSize, executor);
}
EMU_PHASE2(aclnnMul)

aclnnStatus aclnnDivGetWorkspaceSize(const aclTensor *self, const aclTensor *other,
                                     aclTensor *out, uint64_t *workspaceSize,
                                     aclOpExecutor **executor) {
  return plain_binary("aclnnDivGetWorkspaceSize", "aclnnDiv", self, other, "other", out, B_DIV,
                      "aclnnDiv note: broadcasting", workspaceSize, executor);
}
EMU_PHASE2(aclnnDiv)

aclnnStatus aclnnPowTensorTensorGetWorkspaceSize(const aclTensor *self, const aclTensor *exponent,
                                                 aclTensor *out, uint64_t *workspaceSize,
                                                 aclOpExecutor **executor) {
  return plain_binary("aclnnPowTensorTensorGetWorkspaceSize", "aclnnPowTensorTensor", self,
                      exponent, "exponent", out, B_POW, "aclnnPowTensorTensor note: broadcasting",
                      workspaceSize, executor);
}
EMU_PHASE2(aclnnPowTensorTensor)

/* aclnnDivMod note: "mode (C int): 0 none (true div), 1 trunc, 2 floor" */
aclnnStatus aclnnDivModGetWorkspaceSize(const aclTensor *self, const aclTensor *other, int mode,
                                        aclTensor *out, uint64_t *workspaceSize,
                                        aclOpExecutor **executor) {
  static const char *fn = "aclnnDivModGetWorkspaceSize";
  EMU_CHK(emu_phase1_outs(fn, workspaceSize, 4, executor));
  EMU_CHK(binary_check(fn, self, other, "other", out, 3, "aclnnDivMod: broadcasting as aclnnDiv"));
  if (mode < 0 || mode > 2)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "mode", 2,
                         "is %d; the note allows 0 none (true div), 1 trunc, 2 floor", mode);
  return binary_done("aclnnDivMod", self, other, out, mode == 0 ? B_DIV : mode == 1 ? B_TRUNC
                     : B_FLOOR, 1.0, workspaceSize, executor);
}
EMU_PHASE2(aclnnDivMod)

/* ===== aclnnSWhere ================================================================ */
static aclnnStatus run_where(aclOpExecutor *e) {
  aclTensor *c = e->t[0], *a = e->t[1], *b = e->t[2], *y = e->t[3];
  emu_view vc, va, vb;
  int64_t n = emu_numel(y), i;
  size_t es = emu_dtype_size(y->dtype);
  double *Cd;
  char *A = emu_xmalloc((size_t)n * es), *B = emu_xmalloc((size_t)n * es);
  emu_view_bcast(c, y->dims, y->ndim, &vc);
  emu_view_bcast(a, y->dims, y->ndim, &va);
  emu_view_bcast(b, y->dims, y->ndim, &vb);
  Cd = emu_load_view(c, &vc);
  emu_gather(a, &va, A);
  emu_gather(b, &vb, B);
  for (i = 0; i < n; i++)
    if (Cd[i] == 0) memcpy(A + (size_t)i * es, B + (size_t)i * es, es);
  emu_scatter(y, A);
  free(Cd); free(A); free(B);
  return ACLNN_SUCCESS;
}

aclnnStatus aclnnSWhereGetWorkspaceSize(const aclTensor *condition, const aclTensor *self,
                                        const aclTensor *other, aclTensor *out,
                                        uint64_t *workspaceSize, aclOpExecutor **executor) {
  static const char *fn = "aclnnSWhereGetWorkspaceSize";
  static const aclDataType cond_ok[2] = {ACL_BOOL, ACL_UINT8};
  int64_t d1[EMU_MAXDIM], d2[EMU_MAXDIM];
  int n1, n2;
  aclOpExecutor *e;
  EMU_CHK(emu_phase1_outs(fn, workspaceSize, 4, executor));
  EMU_CHK(emu_need_tensor(fn, "condition", 0, condition, 1));
  EMU_CHK(emu_need_tensor(fn, "self", 1, self, 1));
  EMU_CHK(emu_need_tensor(fn, "other", 2, other, 1));
  EMU_CHK(emu_need_tensor(fn, "out", 3, out, 1));
  /* aclnnSWhere note: "out = condition ? self : other; condition BOOL or UINT8;
   * broadcasting of all three; <=8 D" */
  EMU_CHK(emu_need_dtype(fn, "condition", 0, condition, cond_ok, 2,
                         "aclnnSWhere note: condition BOOL or UINT8"));
  EMU_CHK(emu_need_same_dtype(fn, "other", 2, other, self, "self"));
  EMU_CHK(emu_need_same_dtype(fn, "out", 3, out, self, "self"));
  if (emu_broadcast(condition->dims, condition->ndim, self->dims, self->ndim, d1, &n1) ||
      emu_broadcast(d1, n1, other->dims, other->ndim, d2, &n2))
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "other", 2,
                         "condition, self and other do not broadcast together (note: "
                         "broadcasting of all three)");
  EMU_CHK(emu_need_shape(fn, "out", 3, out, d2, n2, "the broadcast of condition, self, other"));
  e = emu_exec_new("aclnnSWhere", 0, run_where);
  e->t[0] = (aclTensor *)condition; e->t[1] = (aclTensor *)self; e->t[2] = (aclTensor *)other;
  e->t[3] = out; e->nt = 4;
  return emu_phase1_done(e, workspaceSize, executor);
}
EMU_PHASE2(aclnnSWhere)

/* ===== unary ops ================================================================= */
enum { U_RELU, U_SIGMOID, U_TANH, U_ERF, U_HSIGMOID, U_HSWISH, U_GELU_TANH, U_GELU_ERF, U_CLAMP };

static double gelu_tanh(double x) {
  return 0.5 * x * (1.0 + tanh(sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
}

static aclnnStatus run_unary(aclOpExecutor *e) {
  int64_t n = emu_numel(e->t[1]), i;
  double *X = emu_load(e->t[0]);
  for (i = 0; i < n; i++) {
    double x = X[i];
    switch (e->iv[0]) {
    case U_RELU: X[i] = x > 0 ? x : (x == x ? 0.0 : x); break;
    case U_SIGMOID: X[i] = 1.0 / (1.0 + exp(-x)); break;
    case U_TANH: X[i] = tanh(x); break;
    case U_ERF: X[i] = erf(x); break;
    case U_HSIGMOID: X[i] = fmin(1.0, fmax(0.0, x / 6.0 + 0.5)); break;
    case U_HSWISH: X[i] = x <= -3 ? 0.0 : x >= 3 ? x : x * (x + 3) / 6.0; break;
    case U_GELU_TANH: X[i] = gelu_tanh(x); break;
    case U_GELU_ERF: X[i] = 0.5 * x * (1.0 + erf(x / sqrt(2.0))); break;
    default: /* clamp: iv[1]/iv[2] say whether min/max are given */
      if (e->iv[1] && x < e->dv[0]) x = e->dv[0];
      if (e->iv[2] && x > e->dv[1]) x = e->dv[1];
      X[i] = x;
      break;
    }
  }
  emu_store(e->t[1], X);
  free(X);
  return ACLNN_SUCCESS;
}

/* self/out of one dtype from ok[], the same shape, rank lo..hi */
static aclnnStatus unary(const char *fn, const char *p2, const aclTensor *self, const char *sname,
                         const aclTensor *out, const char *oname, int opos, const aclDataType *ok,
                         int nok, const char *fact, int lo, int hi, int op, uint64_t *ws,
                         aclOpExecutor **ex) {
  aclOpExecutor *e;
  EMU_CHK(emu_phase1_outs(fn, ws, opos + 1, ex));
  EMU_CHK(emu_need_tensor(fn, sname, 0, self, 1));
  EMU_CHK(emu_need_tensor(fn, oname, opos, out, 1));
  EMU_CHK(emu_need_dtype(fn, sname, 0, self, ok, nok, fact));
  EMU_CHK(emu_need_same_dtype(fn, oname, opos, out, self, sname));
  EMU_CHK(emu_need_rank(fn, sname, 0, self, lo, hi, fact));
  EMU_CHK(emu_need_shape(fn, oname, opos, out, self->dims, self->ndim, "same shape as the input"));
  e = emu_exec_new(p2, 0, run_unary);
  e->t[0] = (aclTensor *)self; e->t[1] = (aclTensor *)out; e->nt = 2;
  e->iv[0] = op;
  return emu_phase1_done(e, ws, ex);
}

#define UNARY(NAME, OP, OKS, FACT, LO, HI)                                                    \
  aclnnStatus NAME##GetWorkspaceSize(const aclTensor *self, aclTensor *out,                  \
                                     uint64_t *workspaceSize, aclOpExecutor **executor) {    \
    return unary(#NAME "GetWorkspaceSize", #NAME, self, "self", out, "out", 1, OKS,          \
                 (int)(sizeof OKS / sizeof OKS[0]), FACT, LO, HI, OP, workspaceSize,         \
                 executor);                                                                   \
  }                                                                                           \
  EMU_PHASE2(NAME)

static const aclDataType RELU_OK[6] = {ACL_FLOAT, ACL_FLOAT16, ACL_INT8, ACL_INT32, ACL_INT64,
                                       ACL_BF16};
static const aclDataType FLT3[3] = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16};
static const aclDataType ERF_OK[3] = {ACL_DOUBLE, ACL_FLOAT, ACL_FLOAT16};

/* aclnnRelu note: "FLOAT,FLOAT16,INT8,INT32,INT64,BFLOAT16; out same dtype & shape; 0-8
 * dims. NB header declares out as 'const aclTensor*'." */
aclnnStatus aclnnReluGetWorkspaceSize(const aclTensor *self, const aclTensor *out,
                                      uint64_t *workspaceSize, aclOpExecutor **executor) {
  return unary("aclnnReluGetWorkspaceSize", "aclnnRelu", self, "self", out, "out", 1, RELU_OK, 6,
               "aclnnRelu note: FLOAT,FLOAT16,INT8,INT32,INT64,BFLOAT16; 0-8 dims", 0, 8, U_RELU,
               workspaceSize, executor);
}
EMU_PHASE2(aclnnRelu)
/* aclnnSigmoid note: "FLOAT,FLOAT16,BFLOAT16; 0-8 dims" */
UNARY(aclnnSigmoid, U_SIGMOID, FLT3, "aclnnSigmoid note: FLOAT,FLOAT16,BFLOAT16; 0-8 dims", 0, 8)
/* aclnnTanh note: "out FLOAT,FLOAT16,BFLOAT16; ints/bool inputs promoted" - the
 * promotion is not given, so self must have out's dtype */
UNARY(aclnnTanh, U_TANH, FLT3, "aclnnTanh note: out FLOAT,FLOAT16,BFLOAT16 (int/bool promotion "
      "not given: self = out dtype)", 0, 8)
/* aclnnErf note: "self DOUBLE,FLOAT32,FLOAT16,BOOL,INT64; out DOUBLE/FLOAT32/FLOAT16" -
 * BOOL/INT64 inputs would need an output dtype rule the note does not give */
UNARY(aclnnErf, U_ERF, ERF_OK, "aclnnErf note: out DOUBLE/FLOAT32/FLOAT16 (BOOL/INT64 self "
      "refused: no output dtype rule)", 0, 8)
/* aclnnHardsigmoid note: "FIXED alpha=1/6, beta=1/2 (no parameters) ...
 * FLOAT,FLOAT16,INT32,BFLOAT16" - INT32 refused: rounding of x/6+1/2 is not given */
UNARY(aclnnHardsigmoid, U_HSIGMOID, FLT3, "aclnnHardsigmoid note: FLOAT,FLOAT16,INT32,BFLOAT16 "
      "(INT32 refused: the rounding of x/6+1/2 is not given)", 0, 8)
/* aclnnGelu note: "formula is the TANH approximation ... FLOAT,FLOAT16,BFLOAT16 (BF16 only
 * A2/A3/950)" */
UNARY(aclnnGelu, U_GELU_TANH, FLT3, "aclnnGelu note: FLOAT,FLOAT16,BFLOAT16", 0, 8)

/* aclnnHardswish note: "x*(x+3)/6 clipped (0 for x<=-3, x for x>=3); BF16/FP16/FP32. NB
 * header declares out as 'const aclTensor*'." */
aclnnStatus aclnnHardswishGetWorkspaceSize(const aclTensor *self, const aclTensor *out,
                                           uint64_t *workspaceSize, aclOpExecutor **executor) {
  return unary("aclnnHardswishGetWorkspaceSize", "aclnnHardswish", self, "self", out, "out", 1,
               FLT3, 3, "aclnnHardswish note: BF16/FP16/FP32", 0, 8, U_HSWISH, workspaceSize,
               executor);
}
EMU_PHASE2(aclnnHardswish)

/* aclnnGeluV2 note: "approximate int64: 0 = 'none' (erf), 1 = 'tanh' ... x/y same dtype &
 * shape, FLOAT32,FLOAT16,BFLOAT16, 0-8 dims" */
aclnnStatus aclnnGeluV2GetWorkspaceSize(const aclTensor *x, int64_t approximate, aclTensor *y,
                                        uint64_t *workspaceSize, aclOpExecutor **executor) {
  static const char *fn = "aclnnGeluV2GetWorkspaceSize";
  if (approximate != 0 && approximate != 1) {
    if (emu_phase1_outs(fn, workspaceSize, 3, executor)) return ACLNN_ERR_RUNTIME_ERROR;
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "approximate", 1,
                         "is %lld; the note allows 0 'none' (erf) or 1 'tanh'",
                         (long long)approximate);
  }
  return unary(fn, "aclnnGeluV2", x, "x", y, "y", 2, FLT3, 3,
               "aclnnGeluV2 note: FLOAT32,FLOAT16,BFLOAT16, 0-8 dims", 0, 8,
               approximate ? U_GELU_TANH : U_GELU_ERF, workspaceSize, executor);
}
EMU_PHASE2(aclnnGeluV2)

/* aclnnClamp note: "clipValueMin/clipValueMax aclScalar (doc: None means no bound); self
 * 1-8 D" */
aclnnStatus aclnnClampGetWorkspaceSize(const aclTensor *self, const aclScalar *clipValueMin,
                                       const aclScalar *clipValueMax, aclTensor *out,
                                       uint64_t *workspaceSize, aclOpExecutor **executor) {
  static const char *fn = "aclnnClampGetWorkspaceSize";
  aclnnStatus s;
  if (emu_phase1_outs(fn, workspaceSize, 4, executor)) return ACLNN_ERR_RUNTIME_ERROR;
  EMU_CHK(emu_need_scalar(fn, "clipValueMin", 1, clipValueMin, 0));
  EMU_CHK(emu_need_scalar(fn, "clipValueMax", 2, clipValueMax, 0));
  s = unary(fn, "aclnnClamp", self, "self", out, "out", 3, FLT3, 3,
            "aclnnClamp note: self 1-8 D; no dtype list, the emulator takes FLOAT, FLOAT16, "
            "BFLOAT16", 1, 8, U_CLAMP, workspaceSize, executor);
  if (s) return s;
  (*executor)->iv[1] = clipValueMin != NULL;
  (*executor)->iv[2] = clipValueMax != NULL;
  (*executor)->dv[0] = clipValueMin ? clipValueMin->v : 0;
  (*executor)->dv[1] = clipValueMax ? clipValueMax->v : 0;
  return ACLNN_SUCCESS;
}
EMU_PHASE2(aclnnClamp)

/* ===== aclnnCast ================================================================= */
static int cast_int_range(aclDataType dt, double *lo, double *hi) {
  switch (dt) {
  case ACL_INT8: *lo = -128; *hi = 127; return 1;
  case ACL_UINT8: *lo = 0; *hi = 255; return 1;
  case ACL_INT16: *lo = -32768; *hi = 32767; return 1;
  case ACL_UINT16: *lo = 0; *hi = 65535; return 1;
  case ACL_INT32: *lo = -2147483648.0; *hi = 2147483647.0; return 1;
  case ACL_UINT32: *lo = 0; *hi = 4294967295.0; return 1;
  case ACL_INT64: *lo = -9223372036854775808.0; *hi = 9223372036854775807.0; return 1;
  case ACL_UINT64: *lo = 0; *hi = 18446744073709551615.0; return 1;
  case ACL_BOOL: *lo = 0; *hi = 1; return 1;
  default: return 0;
  }
}

static aclnnStatus run_cast(aclOpExecutor *e) {
  aclTensor *x = e->t[0], *y = e->t[1];
  int64_t n = emu_numel(x), i;
  double lo, hi, *X;
  if (x->dtype == y->dtype) {
    emu_view v = emu_view_of(x);
    char *raw = emu_xmalloc((size_t)n * emu_dtype_size(x->dtype));
    emu_gather(x, &v, raw);
    emu_scatter(y, raw);
    free(raw);
    return ACLNN_SUCCESS;
  }
  X = emu_load(x);
  if (cast_int_range(y->dtype, &lo, &hi))
    for (i = 0; i < n; i++) {
      /* aclnnCast note: "float->int maps NaN to 0" */
      if (isnan(X[i])) { X[i] = 0; continue; }
      /* the note does not give the rounding of a fractional value, nor the result out of
       * range ("int32->int8 exact only in (-2048,1920)"): refused */
      if (X[i] != floor(X[i]) || X[i] < lo || X[i] > hi) {
        double v = X[i];
        free(X);
        return emu_fn_error(ACLNN_ERR_PARAM_INVALID, "aclnnCast",
                            "element %lld is %.17g, not exactly representable in %s; the fact "
                            "table does not say how aclnnCast rounds or saturates it",
                            (long long)i, v, emu_dtype_name(y->dtype));
      }
    }
  emu_store(y, X);
  free(X);
  return ACLNN_SUCCESS;
}

aclnnStatus aclnnCastGetWorkspaceSize(const aclTensor *self, const aclDataType dtype,
                                      aclTensor *out, uint64_t *workspaceSize,
                                      aclOpExecutor **executor) {
  static const char *fn = "aclnnCastGetWorkspaceSize";
  aclOpExecutor *e;
  EMU_CHK(emu_phase1_outs(fn, workspaceSize, 3, executor));
  EMU_CHK(emu_need_tensor(fn, "self", 0, self, 1));
  EMU_CHK(emu_need_tensor(fn, "out", 2, out, 1));
  /* aclnnCast note: "dtype is target aclDataType passed by value ...; out shape == self" */
  if (out->dtype != dtype)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "dtype", 1,
                         "is %s but out is %s; dtype is the target aclDataType (note)",
                         emu_dtype_name(dtype), emu_dtype_name(out->dtype));
  EMU_CHK(emu_need_shape(fn, "out", 2, out, self->dims, self->ndim, "note: out shape == self"));
  e = emu_exec_new("aclnnCast", 0, run_cast);
  e->t[0] = (aclTensor *)self; e->t[1] = out; e->nt = 2;
  return emu_phase1_done(e, workspaceSize, executor);
}
EMU_PHASE2(aclnnCast)
