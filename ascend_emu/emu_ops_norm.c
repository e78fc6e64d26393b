/* aclnn normalisation (BatchNorm, LayerNorm, GroupNorm), Softmax, Matmul, Gemm and Dropout of
 * the strict emulator. Facts: ../shared/aclnn-api.json, Atlas A2/A3 column. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "emu_internal.h"

static const aclDataType F_F16_D_BF16[4] = {ACL_FLOAT, ACL_FLOAT16, ACL_DOUBLE, ACL_BF16};

/* a 1-D per-channel tensor of length n whose dtype is the input's or FLOAT */
static int need_vec(const char *fn, const char *p, int pos, const aclTensor *t, int64_t n,
                    const aclTensor *ref) {
  if (t->ndim != 1 || t->dims[0] != n)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, p, pos,
                         "must be 1-D of length %lld (the channel count)", (long long)n);
  if (t->dtype != ref->dtype && t->dtype != ACL_FLOAT)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, p, pos,
                         "dtype is %s; the emulator takes the input's dtype (%s) or FLOAT",
                         emu_dtype_name(t->dtype), emu_dtype_name(ref->dtype));
  return 0;
}

/* ===== aclnnBatchNorm (inference) =============================================== */
static aclnnStatus run_bn(aclOpExecutor *e) {
  aclTensor *x = e->t[0], *y = e->t[5];
  int64_t N = x->dims[0], C = x->dims[1], sp = N * C > 0 ? emu_numel(x) / (N * C) : 0, n, c, i;
  double *X = emu_load(x), *W = e->t[1] ? emu_load(e->t[1]) : NULL;
  double *B = e->t[2] ? emu_load(e->t[2]) : NULL, *M = emu_load(e->t[3]), *V = emu_load(e->t[4]);
  for (n = 0; n < N; n++)
    for (c = 0; c < C; c++) {
      double sc = (W ? W[c] : 1.0) / sqrt(V[c] + e->dv[0]), sh = (B ? B[c] : 0.0) - M[c] * sc;
      for (i = 0; i < sp; i++) X[(n * C + c) * sp + i] = X[(n * C + c) * sp + i] * sc + sh;
    }
  emu_store(y, X);
  free(X); free(W); free(B); free(M); free(V);
  return ACLNN_SUCCESS;
}

aclnnStatus aclnnBatchNormGetWorkspaceSize(const aclTensor *input, const aclTensor *weight,
                                           const aclTensor *bias, aclTensor *runningMean,
                                           aclTensor *runningVar, bool training, double momentum,
                                           double eps, aclTensor *output, aclTensor *saveMean,
                                           aclTensor *saveInvstd, uint64_t *workspaceSize,
                                           aclOpExecutor **executor) {
  static const char *fn = "aclnnBatchNormGetWorkspaceSize";
  static const char *F = "aclnnBatchNorm note: input formats NC, NCL, NCHW, NCDHW, ND(6-8D, "
                         "dim1=C); NHWC/NDHWC not on A2/A3";
  aclOpExecutor *e;
  aclFormat want;
  int64_t C;
  (void)momentum; /* note: "momentum unused in inference" */
  EMU_CHK(emu_phase1_outs(fn, workspaceSize, 11, executor));
  EMU_CHK(emu_need_tensor(fn, "input", 0, input, 1));
  /* note: "weight/bias/runningMean/runningVar optional" */
  EMU_CHK(emu_need_tensor(fn, "weight", 1, weight, 0));
  EMU_CHK(emu_need_tensor(fn, "bias", 2, bias, 0));
  EMU_CHK(emu_need_tensor(fn, "runningMean", 3, runningMean, 0));
  EMU_CHK(emu_need_tensor(fn, "runningVar", 4, runningVar, 0));
  EMU_CHK(emu_need_tensor(fn, "output", 8, output, 1));
  EMU_CHK(emu_need_tensor(fn, "saveMean", 9, saveMean, 0));
  EMU_CHK(emu_need_tensor(fn, "saveInvstd", 10, saveInvstd, 0));
  /* the note lists no dtypes: the emulator takes the float dtypes */
  EMU_CHK(emu_need_dtype(fn, "input", 0, input, EMU_FLOATS, 3,
                         "the note lists no dtypes; the emulator takes FLOAT, FLOAT16, BFLOAT16"));
  EMU_CHK(emu_need_same_dtype(fn, "output", 8, output, input, "input"));
  EMU_CHK(emu_need_rank(fn, "input", 0, input, 2, 8, F));
  want = input->ndim == 2 ? ACL_FORMAT_NC : input->ndim == 3 ? ACL_FORMAT_NCL
         : input->ndim == 4 ? ACL_FORMAT_NCHW : input->ndim == 5 ? ACL_FORMAT_NCDHW : ACL_FORMAT_ND;
  EMU_CHK(emu_need_format(fn, "input", 0, input, want, F));
  EMU_CHK(emu_need_shape(fn, "output", 8, output, input->dims, input->ndim, "same as input"));
  EMU_CHK(emu_need_format(fn, "output", 8, output, want, F));
  /* training statistics and the running-stat update rule are not in the fact table */
  if (training)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "training", 5,
                         "is true; the emulator covers inference only (note: training=false => "
                         "inference using runningMean/runningVar)");
  C = input->dims[1];
  /* note: "training=false => inference using runningMean/runningVar (1-D, length C)" */
  if (!runningMean || !runningVar)
    return emu_arg_error(ACLNN_ERR_PARAM_NULLPTR, fn, runningMean ? "runningVar" : "runningMean",
                         runningMean ? 4 : 3, "is NULL; inference uses runningMean/runningVar "
                         "(note: training=false => inference using runningMean/runningVar)");
  EMU_CHK(need_vec(fn, "runningMean", 3, runningMean, C, input));
  EMU_CHK(need_vec(fn, "runningVar", 4, runningVar, C, input));
  if (weight) EMU_CHK(need_vec(fn, "weight", 1, weight, C, input));
  if (bias) EMU_CHK(need_vec(fn, "bias", 2, bias, C, input));
  /* note: "saveMean/saveInvstd: src (aclnn_batch_norm.cpp CheckNotNull) only requires
   * them when training=true, so nullptr is accepted in inference" - what inference
   * writes to them is not said, so the emulator requires nullptr */
  if (saveMean || saveInvstd)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, saveMean ? "saveMean" : "saveInvstd",
                         saveMean ? 9 : 10, "is given in inference; the fact table does not say "
                         "what inference writes there (note: nullptr is accepted in inference)");
  if (!(eps >= 0) || !isfinite(eps))
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "eps", 7, "is %g; a finite eps >= 0 is "
                         "required", eps);
  e = emu_exec_new("aclnnBatchNorm", 256, run_bn);
  e->t[0] = (aclTensor *)input; e->t[1] = (aclTensor *)weight; e->t[2] = (aclTensor *)bias;
  e->t[3] = runningMean; e->t[4] = runningVar; e->t[5] = output; e->nt = 6;
  e->dv[0] = eps;
  return emu_phase1_done(e, workspaceSize, executor);
}
EMU_PHASE2(aclnnBatchNorm)

/* ===== aclnnLayerNorm =========================================================== */
static aclnnStatus run_ln(aclOpExecutor *e) {
  aclTensor *x = e->t[0];
  int64_t inner = e->iv[0], outer = emu_numel(x) / (inner ? inner : 1), i, j;
  double *X = emu_load(x), *W = e->t[1] ? emu_load(e->t[1]) : NULL;
  double *B = e->t[2] ? emu_load(e->t[2]) : NULL, *M = emu_xmalloc((size_t)outer * sizeof *M);
  double *R = emu_xmalloc((size_t)outer * sizeof *R);
  for (i = 0; i < outer; i++) {
    double mean = 0, var = 0, *row = X + i * inner;
    for (j = 0; j < inner; j++) mean += row[j];
    mean /= (double)inner;
    for (j = 0; j < inner; j++) var += (row[j] - mean) * (row[j] - mean);
    var /= (double)inner;
    M[i] = mean;
    R[i] = 1.0 / sqrt(var + e->dv[0]);
    for (j = 0; j < inner; j++)
      row[j] = (row[j] - mean) * R[i] * (W ? W[j] : 1.0) + (B ? B[j] : 0.0);
  }
  emu_store(e->t[3], X);
  if (e->t[4]) emu_store(e->t[4], M);
  if (e->t[5]) emu_store(e->t[5], R);
  free(X); free(W); free(B); free(M); free(R);
  return ACLNN_SUCCESS;
}

aclnnStatus aclnnLayerNormGetWorkspaceSize(const aclTensor *input,
                                           const aclIntArray *normalizedShape,
                                           const aclTensor *weightOptional,
                                           const aclTensor *biasOptional, double eps,
                                           aclTensor *out, aclTensor *meanOutOptional,
                                           aclTensor *rstdOutOptional, uint64_t *workspaceSize,
                                           aclOpExecutor **executor) {
  static const char *fn = "aclnnLayerNormGetWorkspaceSize";
  aclOpExecutor *e;
  int64_t inner = 1, sd[EMU_MAXDIM];
  int i, axis;
  const char *pn[2] = {"weightOptional", "biasOptional"};
  const aclTensor *pt[2];
  pt[0] = weightOptional;
  pt[1] = biasOptional;
  EMU_CHK(emu_phase1_outs(fn, workspaceSize, 8, executor));
  EMU_CHK(emu_need_tensor(fn, "input", 0, input, 1));
  EMU_CHK(emu_need_array(fn, "normalizedShape", 1, normalizedShape, 1));
  /* note: "weightOptional/biasOptional may be nullptr (then 1s/0s)";
   * "meanOutOptional/rstdOutOptional may be nullptr" */
  EMU_CHK(emu_need_tensor(fn, "weightOptional", 2, weightOptional, 0));
  EMU_CHK(emu_need_tensor(fn, "biasOptional", 3, biasOptional, 0));
  EMU_CHK(emu_need_tensor(fn, "out", 5, out, 1));
  EMU_CHK(emu_need_tensor(fn, "meanOutOptional", 6, meanOutOptional, 0));
  EMU_CHK(emu_need_tensor(fn, "rstdOutOptional", 7, rstdOutOptional, 0));
  /* note: "FLOAT32,FLOAT16,BFLOAT16, 1-8 dims" */
  EMU_CHK(emu_need_dtype(fn, "input", 0, input, EMU_FLOATS, 3, "aclnnLayerNorm note: FLOAT32,FLOAT16,BFLOAT16"));
  EMU_CHK(emu_need_rank(fn, "input", 0, input, 1, 8, "aclnnLayerNorm note: 1-8 dims"));
  EMU_CHK(emu_need_same_dtype(fn, "out", 5, out, input, "input"));
  EMU_CHK(emu_need_shape(fn, "out", 5, out, input->dims, input->ndim, "same as input"));
  /* note: "normalizedShape = trailing dims [R1..Rj] (non-empty)" */
  if (normalizedShape->n < 1 || (int)normalizedShape->n > input->ndim)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "normalizedShape", 1,
                         "has %llu elements; it must name 1 to %d trailing dims of input (note: "
                         "normalizedShape = trailing dims, non-empty)",
                         (unsigned long long)normalizedShape->n, input->ndim);
  axis = input->ndim - (int)normalizedShape->n;
  for (i = 0; i < (int)normalizedShape->n; i++) {
    if (normalizedShape->v[i] != input->dims[axis + i])
      return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "normalizedShape", 1,
                           "element %d is %lld but input's dim %d is %lld (note: normalizedShape "
                           "= trailing dims of input)", i, (long long)normalizedShape->v[i],
                           axis + i, (long long)input->dims[axis + i]);
    inner *= normalizedShape->v[i];
  }
  /* note: weight/bias "dtype == input or FLOAT" (shape = normalizedShape) */
  for (i = 0; i < 2; i++)
    if (pt[i]) {
      EMU_CHK(emu_need_shape(fn, pn[i], 2 + i, pt[i], normalizedShape->v, (int)normalizedShape->n,
                             "normalizedShape"));
      if (pt[i]->dtype != input->dtype && pt[i]->dtype != ACL_FLOAT)
        return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, pn[i], 2 + i,
                             "dtype is %s; the note allows the input's (%s) or FLOAT",
                             emu_dtype_name(pt[i]->dtype), emu_dtype_name(input->dtype));
    }
  /* note: mean/rstd "shape [A..,1,..1]" */
  for (i = 0; i < input->ndim; i++) sd[i] = i < axis ? input->dims[i] : 1;
  if (meanOutOptional) {
    EMU_CHK(emu_need_shape(fn, "meanOutOptional", 6, meanOutOptional, sd, input->ndim,
                           "note: shape [A..,1,..1]"));
    if (meanOutOptional->dtype != input->dtype && meanOutOptional->dtype != ACL_FLOAT)
      return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "meanOutOptional", 6,
                           "dtype %s is neither the input's nor FLOAT",
                           emu_dtype_name(meanOutOptional->dtype));
  }
  if (rstdOutOptional) {
    EMU_CHK(emu_need_shape(fn, "rstdOutOptional", 7, rstdOutOptional, sd, input->ndim,
                           "note: shape [A..,1,..1]"));
    if (rstdOutOptional->dtype != input->dtype && rstdOutOptional->dtype != ACL_FLOAT)
      return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "rstdOutOptional", 7,
                           "dtype %s is neither the input's nor FLOAT",
                           emu_dtype_name(rstdOutOptional->dtype));
  }
  if (!(eps >= 0) || !isfinite(eps))
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "eps", 4, "is %g; a finite eps >= 0 is "
                         "required", eps);
  e = emu_exec_new("aclnnLayerNorm", 256, run_ln);
  e->t[0] = (aclTensor *)input; e->t[1] = (aclTensor *)weightOptional;
  e->t[2] = (aclTensor *)biasOptional; e->t[3] = out; e->t[4] = meanOutOptional;
  e->t[5] = rstdOutOptional; e->nt = 6;
  e->iv[0] = inner;
  e->dv[0] = eps;
  return emu_phase1_done(e, workspaceSize, executor);
}
EMU_PHASE2(aclnnLayerNorm)

/* ===== aclnnSoftmax ============================================================= */
static aclnnStatus run_softmax(aclOpExecutor *e) {
  aclTensor *x = e->t[0];
  int d = (int)e->iv[0], i;
  int64_t n = 1, inner = 1, outer = 1, a, b, k;
  double *X = emu_load(x);
  if (x->ndim) n = x->dims[d];
  for (i = 0; i < x->ndim; i++) {
    if (i < d) outer *= x->dims[i];
    if (i > d) inner *= x->dims[i];
  }
  for (a = 0; a < outer; a++)
    for (b = 0; b < inner; b++) {
      double mx = -INFINITY, sum = 0;
      for (k = 0; k < n; k++) mx = fmax(mx, X[(a * n + k) * inner + b]);
      for (k = 0; k < n; k++) sum += exp(X[(a * n + k) * inner + b] - mx);
      for (k = 0; k < n; k++) X[(a * n + k) * inner + b] = exp(X[(a * n + k) * inner + b] - mx) / sum;
    }
  emu_store(e->t[1], X);
  free(X);
  return ACLNN_SUCCESS;
}

aclnnStatus aclnnSoftmaxGetWorkspaceSize(const aclTensor *self, int64_t dim, aclTensor *out,
                                         uint64_t *workspaceSize, aclOpExecutor **executor) {
  static const char *fn = "aclnnSoftmaxGetWorkspaceSize";
  aclOpExecutor *e;
  int n;
  EMU_CHK(emu_phase1_outs(fn, workspaceSize, 3, executor));
  EMU_CHK(emu_need_tensor(fn, "self", 0, self, 1));
  EMU_CHK(emu_need_tensor(fn, "out", 2, out, 1));
  /* aclnnSoftmax note: "FLOAT16,FLOAT32,DOUBLE,BFLOAT16; 0-8 dims; out shape == self" */
  EMU_CHK(emu_need_dtype(fn, "self", 0, self, F_F16_D_BF16, 4,
                         "aclnnSoftmax note: FLOAT16,FLOAT32,DOUBLE,BFLOAT16"));
  EMU_CHK(emu_need_same_dtype(fn, "out", 2, out, self, "self"));
  EMU_CHK(emu_need_shape(fn, "out", 2, out, self->dims, self->ndim, "note: out shape == self"));
  /* note: "dim int64 (error if outside self dims)" */
  n = self->ndim ? self->ndim : 1;
  if (dim < -n || dim >= n)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "dim", 1,
                         "is %lld, outside [-%d, %d] for a %d-D self (note: error if outside self "
                         "dims)", (long long)dim, n, n - 1, self->ndim);
  e = emu_exec_new("aclnnSoftmax", 256, run_softmax);
  e->t[0] = (aclTensor *)self; e->t[1] = out; e->nt = 2;
  e->iv[0] = self->ndim ? (dim < 0 ? dim + n : dim) : 0;
  return emu_phase1_done(e, workspaceSize, executor);
}
EMU_PHASE2(aclnnSoftmax)

/* ===== aclnnMatmul / aclnnGemm ================================================== */
/* out[b, m, n] = alpha * sum_k A[b, m, k] B[b, k, n] + beta * C, batch dims broadcast;
 * iv: 0 transA, 1 transB (Gemm), dv: 0 alpha, 1 beta */
static aclnnStatus run_mm(aclOpExecutor *e) {
  aclTensor *a = e->t[0], *b = e->t[1], *c = e->t[2], *y = e->t[3];
  int nd = y->ndim, i;
  int64_t M = y->dims[nd - 2], N = y->dims[nd - 1], K, nb = 1, bi, m, n, k;
  int64_t am[EMU_MAXDIM], bm[EMU_MAXDIM];
  emu_view va, vb;
  double *A, *B, *Cv = NULL, *Y = emu_xmalloc((size_t)emu_numel(y) * sizeof *Y);
  /* the operands as [batch..., rows, cols] over y's batch dims (broadcast views) */
  for (i = 0; i < nd - 2; i++) { am[i] = bm[i] = y->dims[i]; nb *= y->dims[i]; }
  am[nd - 2] = a->dims[a->ndim - 2]; am[nd - 1] = a->dims[a->ndim - 1];
  bm[nd - 2] = b->dims[b->ndim - 2]; bm[nd - 1] = b->dims[b->ndim - 1];
  emu_view_bcast(a, am, nd, &va);
  emu_view_bcast(b, bm, nd, &vb);
  if (e->iv[0]) { int64_t t = va.strides[nd - 1]; va.strides[nd - 1] = va.strides[nd - 2]; va.strides[nd - 2] = t;
                  t = va.dims[nd - 1]; va.dims[nd - 1] = va.dims[nd - 2]; va.dims[nd - 2] = t; }
  if (e->iv[1]) { int64_t t = vb.strides[nd - 1]; vb.strides[nd - 1] = vb.strides[nd - 2]; vb.strides[nd - 2] = t;
                  t = vb.dims[nd - 1]; vb.dims[nd - 1] = vb.dims[nd - 2]; vb.dims[nd - 2] = t; }
  K = va.dims[nd - 1];
  A = emu_load_view(a, &va);
  B = emu_load_view(b, &vb);
  if (c) {
    emu_view vc;
    emu_view_bcast(c, y->dims, nd, &vc);
    Cv = emu_load_view(c, &vc);
  }
  for (bi = 0; bi < nb; bi++)
    for (m = 0; m < M; m++)
      for (n = 0; n < N; n++) {
        double acc = 0;
        for (k = 0; k < K; k++) acc += A[(bi * M + m) * K + k] * B[(bi * K + k) * N + n];
        Y[(bi * M + m) * N + n] = e->dv[0] * acc + (Cv ? e->dv[1] * Cv[(bi * M + m) * N + n] : 0.0);
      }
  emu_store(y, Y);
  free(A); free(B); free(Cv); free(Y);
  return ACLNN_SUCCESS;
}

aclnnStatus aclnnMatmulGetWorkspaceSize(const aclTensor *self, const aclTensor *mat2,
                                        aclTensor *out, int8_t cubeMathType,
                                        uint64_t *workspaceSize, aclOpExecutor **executor) {
  static const char *fn = "aclnnMatmulGetWorkspaceSize";
  static const char *F = "aclnnMatmul note: self/mat2/out BFLOAT16,FLOAT16,FLOAT32, ND, 1-6 dims";
  aclOpExecutor *e;
  int64_t od[EMU_MAXDIM];
  int nd, i;
  EMU_CHK(emu_phase1_outs(fn, workspaceSize, 4, executor));
  EMU_CHK(emu_need_tensor(fn, "self", 0, self, 1));
  EMU_CHK(emu_need_tensor(fn, "mat2", 1, mat2, 1));
  EMU_CHK(emu_need_tensor(fn, "out", 2, out, 1));
  EMU_CHK(emu_need_dtype(fn, "self", 0, self, EMU_FLOATS, 3, F));
  EMU_CHK(emu_need_same_dtype(fn, "mat2", 1, mat2, self, "self"));
  EMU_CHK(emu_need_same_dtype(fn, "out", 2, out, self, "self"));
  EMU_CHK(emu_need_format(fn, "self", 0, self, ACL_FORMAT_ND, F));
  EMU_CHK(emu_need_format(fn, "mat2", 1, mat2, ACL_FORMAT_ND, F));
  EMU_CHK(emu_need_format(fn, "out", 2, out, ACL_FORMAT_ND, F));
  /* 1-D operands: the note does not say how they are treated, so 2-6 dims only */
  EMU_CHK(emu_need_rank(fn, "self", 0, self, 2, 6, "note: 1-6 dims; the emulator refuses 1-D "
                        "operands, whose treatment the note does not give"));
  EMU_CHK(emu_need_rank(fn, "mat2", 1, mat2, 2, 6, "note: 1-6 dims; the emulator refuses 1-D "
                        "operands, whose treatment the note does not give"));
  if (self->dims[self->ndim - 1] != mat2->dims[mat2->ndim - 2])
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "mat2", 1,
                         "has %lld rows but self has %lld columns", (long long)mat2->dims[mat2->ndim - 2],
                         (long long)self->dims[self->ndim - 1]);
  /* note: "broadcasting batch dims" */
  if (emu_broadcast(self->dims, self->ndim - 2, mat2->dims, mat2->ndim - 2, od, &nd))
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "mat2", 1,
                         "batch dims do not broadcast with self's (note: broadcasting batch dims)");
  od[nd] = self->dims[self->ndim - 2];
  od[nd + 1] = mat2->dims[mat2->ndim - 1];
  EMU_CHK(emu_need_shape(fn, "out", 2, out, od, nd + 2, "broadcast batch dims + [M, N]"));
  /* note: "cubeMathType: 0 KEEP_DTYPE, 1 ALLOW_FP32_DOWN_PRECISION, 2 USE_FP16, 3
   * USE_HF32, 4 USE_FP32_ADD. A2/A3: 1 => FP32 computed as HF32; 2 not for BF16; 3
   * FP32->HF32 (error for other dtypes); 4 FP32 with K>2048 uses grouped accumulation" */
  i = cubeMathType;
  if (i < 0 || i > 4 || (i == 2 && self->dtype == ACL_BF16) || (i == 3 && self->dtype != ACL_FLOAT) ||
      (i == 4 && self->dtype != ACL_FLOAT))
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "cubeMathType", 3,
                         "is %d with %s; the note allows 0..4 with 2 not for BF16, 3 only for "
                         "FP32 (error for other dtypes), 4 described for FP32 only", i,
                         emu_dtype_name(self->dtype));
  e = emu_exec_new("aclnnMatmul", 512, run_mm);
  e->t[0] = (aclTensor *)self; e->t[1] = (aclTensor *)mat2; e->t[3] = out; e->nt = 4;
  e->dv[0] = 1.0;
  return emu_phase1_done(e, workspaceSize, executor);
}
EMU_PHASE2(aclnnMatmul)

aclnnStatus aclnnGemmGetWorkspaceSize(const aclTensor *A, const aclTensor *B, const aclTensor *C,
                                      float alpha, float beta, int64_t transA, int64_t transB,
                                      aclTensor *out, int8_t cubeMathType,
                                      uint64_t *workspaceSize, aclOpExecutor **executor) {
  static const char *fn = "aclnnGemmGetWorkspaceSize";
  static const char *F = "aclnnGemm note: A,B,C 2-D ND BF16/FP16/FP32";
  aclOpExecutor *e;
  int64_t M, K, K2, N, od[2];
  int i;
  const aclTensor *ts[3];
  const char *nm[3] = {"A", "B", "C"};
  ts[0] = A; ts[1] = B; ts[2] = C;
  EMU_CHK(emu_phase1_outs(fn, workspaceSize, 9, executor));
  for (i = 0; i < 3; i++) EMU_CHK(emu_need_tensor(fn, nm[i], i, ts[i], 1));
  EMU_CHK(emu_need_tensor(fn, "out", 7, out, 1));
  EMU_CHK(emu_need_dtype(fn, "A", 0, A, EMU_FLOATS, 3, F));
  for (i = 0; i < 3; i++) {
    if (i) EMU_CHK(emu_need_same_dtype(fn, nm[i], i, ts[i], A, "A"));
    EMU_CHK(emu_need_rank(fn, nm[i], i, ts[i], 2, 2, F));
    EMU_CHK(emu_need_format(fn, nm[i], i, ts[i], ACL_FORMAT_ND, F));
  }
  EMU_CHK(emu_need_same_dtype(fn, "out", 7, out, A, "A"));
  EMU_CHK(emu_need_format(fn, "out", 7, out, ACL_FORMAT_ND, F));
  /* note: "transA/transB int64 (non-zero = transpose; A is [K,M] when transA)" */
  M = A->dims[transA ? 1 : 0]; K = A->dims[transA ? 0 : 1];
  K2 = B->dims[transB ? 1 : 0]; N = B->dims[transB ? 0 : 1];
  if (K != K2)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "B", 1,
                         "op(B) has %lld rows but op(A) has %lld columns (transA %lld, transB %lld; "
                         "note: A is [K,M] when transA)", (long long)K2, (long long)K,
                         (long long)transA, (long long)transB);
  od[0] = M; od[1] = N;
  /* note: "C must broadcast to A@B" */
  for (i = 0; i < 2; i++)
    if (C->dims[i] != od[i] && C->dims[i] != 1)
      return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "C", 2,
                           "dim %d is %lld, which does not broadcast to A@B [%lld, %lld] (note: C "
                           "must broadcast to A@B)", i, (long long)C->dims[i], (long long)M,
                           (long long)N);
  EMU_CHK(emu_need_shape(fn, "out", 7, out, od, 2, "[M, N] of op(A)@op(B)"));
  /* note: "cubeMathType 0..4 (A2/A3: 1,3 => HF32 for FP32)" */
  if (cubeMathType < 0 || cubeMathType > 4)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "cubeMathType", 8,
                         "is %d; the note allows 0..4", (int)cubeMathType);
  e = emu_exec_new("aclnnGemm", 512, run_mm);
  e->t[0] = (aclTensor *)A; e->t[1] = (aclTensor *)B; e->t[2] = (aclTensor *)C; e->t[3] = out;
  e->nt = 4;
  e->iv[0] = transA != 0; e->iv[1] = transB != 0;
  e->dv[0] = alpha; e->dv[1] = beta;
  return emu_phase1_done(e, workspaceSize, executor);
}
EMU_PHASE2(aclnnGemm)

/* ===== aclnnDropout (inference only) ============================================= */
static aclnnStatus run_copy_same(aclOpExecutor *e) {
  aclTensor *x = e->t[0], *y = e->t[1];
  emu_view v = emu_view_of(x);
  char *raw = emu_xmalloc((size_t)emu_numel(x) * emu_dtype_size(x->dtype));
  emu_gather(x, &v, raw);
  emu_scatter(y, raw);
  free(raw);
  return ACLNN_SUCCESS;
}

aclnnStatus aclnnDropoutGetWorkspaceSize(const aclTensor *input, double p, bool train,
                                         int64_t seed, int64_t offset, aclTensor *out,
                                         aclTensor *maskOut, uint64_t *workspaceSize,
                                         aclOpExecutor **executor) {
  static const char *fn = "aclnnDropoutGetWorkspaceSize";
  aclOpExecutor *e;
  int64_t md;
  (void)seed; (void)offset;
  EMU_CHK(emu_phase1_outs(fn, workspaceSize, 7, executor));
  EMU_CHK(emu_need_tensor(fn, "input", 0, input, 1));
  EMU_CHK(emu_need_tensor(fn, "out", 5, out, 1));
  EMU_CHK(emu_need_tensor(fn, "maskOut", 6, maskOut, 0));
  EMU_CHK(emu_need_dtype(fn, "input", 0, input, EMU_FLOATS, 3,
                         "the note lists no dtypes; the emulator takes FLOAT, FLOAT16, BFLOAT16"));
  EMU_CHK(emu_need_same_dtype(fn, "out", 5, out, input, "input"));
  EMU_CHK(emu_need_shape(fn, "out", 5, out, input->dims, input->ndim, "same as input"));
  /* the random mask of training is not reproducible from the facts */
  if (train)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "train", 2,
                         "is true; the emulator covers inference only (note: train=false => no "
                         "mask generated)");
  if (!(p >= 0 && p <= 1))
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "p", 1, "is %g, not a probability", p);
  /* note: "maskOut UINT8 shape (align(numel,128)/8)" */
  if (maskOut) {
    md = (emu_numel(input) + 127) / 128 * 128 / 8;
    if (maskOut->dtype != ACL_UINT8)
      return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "maskOut", 6,
                           "dtype is %s; the note says UINT8", emu_dtype_name(maskOut->dtype));
    EMU_CHK(emu_need_shape(fn, "maskOut", 6, maskOut, &md, 1, "note: maskOut UINT8 shape "
                           "(align(numel,128)/8)"));
  }
  e = emu_exec_new("aclnnDropout", 0, run_copy_same);
  e->t[0] = (aclTensor *)input; e->t[1] = out; e->t[2] = maskOut; e->nt = 3;
  return emu_phase1_done(e, workspaceSize, executor);
}
EMU_PHASE2(aclnnDropout)

/* ===== aclnnGroupNorm ============================================================
 * note: "caller passes N, C, HxW (product of dims after C, 1 if none), group (>0,
 * C % group == 0), eps (>0). gamma/beta 1-D length C, same dtype as self. meanOut
 * and rstdOut are REQUIRED (src CheckNotNull4Tensor) with shape (N, group) and
 * self's dtype. FLOAT32,FLOAT16,BFLOAT16; 2-8 dims." Each group's C/group x HxW
 * elements are normalised with their mean and biased variance, then scaled and
 * shifted per channel (GroupNorm's definition). */
static aclnnStatus run_gn(aclOpExecutor *e) {
  aclTensor *x = e->t[0];
  int64_t N = e->iv[0], C = e->iv[1], HW = e->iv[2], G = e->iv[3], per = C / G * HW, n, g, i;
  double *X = emu_load(x), *W = emu_load(e->t[1]), *B = emu_load(e->t[2]);
  double *M = emu_xmalloc(sizeof *M * (size_t)(N * G)), *R = emu_xmalloc(sizeof *R * (size_t)(N * G));
  for (n = 0; n < N; n++)
    for (g = 0; g < G; g++) {
      double *p = X + (n * G + g) * per, mean = 0, var = 0;
      for (i = 0; i < per; i++) mean += p[i];
      mean /= (double)(per ? per : 1);
      for (i = 0; i < per; i++) var += (p[i] - mean) * (p[i] - mean);
      var /= (double)(per ? per : 1);
      double rstd = 1.0 / sqrt(var + e->dv[0]);
      M[n * G + g] = mean, R[n * G + g] = rstd;
      for (i = 0; i < per; i++) {
        int64_t c = g * (C / G) + i / (HW ? HW : 1);
        p[i] = (p[i] - mean) * rstd * W[c] + B[c];
      }
    }
  emu_store(e->t[3], X);
  emu_store(e->t[4], M);
  emu_store(e->t[5], R);
  free(X), free(W), free(B), free(M), free(R);
  return ACLNN_SUCCESS;
}

aclnnStatus aclnnGroupNormGetWorkspaceSize(const aclTensor *self, const aclTensor *gamma, const aclTensor *beta,
                                           int64_t N, int64_t C, int64_t HxW, int64_t group, double eps,
                                           aclTensor *out, aclTensor *meanOut, aclTensor *rstdOut,
                                           uint64_t *workspaceSize, aclOpExecutor **executor) {
  static const char *fn = "aclnnGroupNormGetWorkspaceSize";
  aclOpExecutor *e;
  int64_t hw = 1, stats[2];
  int i;
  EMU_CHK(emu_phase1_outs(fn, workspaceSize, 11, executor));
  EMU_CHK(emu_need_tensor(fn, "self", 0, self, 1));
  /* the note names gamma/beta's shape and dtype and no default for them */
  EMU_CHK(emu_need_tensor(fn, "gamma", 1, gamma, 1));
  EMU_CHK(emu_need_tensor(fn, "beta", 2, beta, 1));
  EMU_CHK(emu_need_tensor(fn, "out", 8, out, 1));
  /* note: "meanOut and rstdOut are REQUIRED (src CheckNotNull4Tensor)" */
  EMU_CHK(emu_need_tensor(fn, "meanOut", 9, meanOut, 1));
  EMU_CHK(emu_need_tensor(fn, "rstdOut", 10, rstdOut, 1));
  EMU_CHK(emu_need_dtype(fn, "self", 0, self, EMU_FLOATS, 3, "aclnnGroupNorm note: FLOAT32,FLOAT16,BFLOAT16"));
  EMU_CHK(emu_need_rank(fn, "self", 0, self, 2, 8, "aclnnGroupNorm note: 2-8 dims"));
  if (N != self->dims[0])
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "N", 3, "is %lld but self's dim 0 is %lld", (long long)N,
                         (long long)self->dims[0]);
  if (C != self->dims[1])
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "C", 4, "is %lld but self's dim 1 is %lld", (long long)C,
                         (long long)self->dims[1]);
  for (i = 2; i < self->ndim; i++) hw *= self->dims[i];
  if (HxW != hw)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "HxW", 5,
                         "is %lld but the product of self's dims after C is %lld (note: HxW = product of "
                         "dims after C, 1 if none)", (long long)HxW, (long long)hw);
  if (group <= 0 || C % group)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "group", 6,
                         "is %lld; the note requires group > 0 and C %% group == 0 (C = %lld)", (long long)group,
                         (long long)C);
  if (!(eps > 0) || !isfinite(eps))
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "eps", 7, "is %g; the note requires eps > 0", eps);
  /* note: "gamma/beta 1-D length C, same dtype as self" */
  EMU_CHK(emu_need_shape(fn, "gamma", 1, gamma, &C, 1, "note: 1-D length C"));
  EMU_CHK(emu_need_same_dtype(fn, "gamma", 1, gamma, self, "self"));
  EMU_CHK(emu_need_shape(fn, "beta", 2, beta, &C, 1, "note: 1-D length C"));
  EMU_CHK(emu_need_same_dtype(fn, "beta", 2, beta, self, "self"));
  EMU_CHK(emu_need_same_dtype(fn, "out", 8, out, self, "self"));
  EMU_CHK(emu_need_shape(fn, "out", 8, out, self->dims, self->ndim, "self's shape"));
  /* note: "with shape (N, group) and self's dtype" */
  stats[0] = N, stats[1] = group;
  EMU_CHK(emu_need_shape(fn, "meanOut", 9, meanOut, stats, 2, "note: (N, group)"));
  EMU_CHK(emu_need_same_dtype(fn, "meanOut", 9, meanOut, self, "self"));
  EMU_CHK(emu_need_shape(fn, "rstdOut", 10, rstdOut, stats, 2, "note: (N, group)"));
  EMU_CHK(emu_need_same_dtype(fn, "rstdOut", 10, rstdOut, self, "self"));
  e = emu_exec_new("aclnnGroupNorm", 256, run_gn);
  e->t[0] = (aclTensor *)self, e->t[1] = (aclTensor *)gamma, e->t[2] = (aclTensor *)beta;
  e->t[3] = out, e->t[4] = meanOut, e->t[5] = rstdOut, e->nt = 6;
  e->iv[0] = N, e->iv[1] = C, e->iv[2] = HxW, e->iv[3] = group;
  e->dv[0] = eps;
  return emu_phase1_done(e, workspaceSize, executor);
}
EMU_PHASE2(aclnnGroupNorm)
