/* aclnnGatherV2, aclnnUpsampleBilinear2d and aclnnPrelu, from their aclnn-api.json entries. */
#include "emu_internal.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ===== aclnnGatherV2 ==============================================================
 * note: "ONNX Gather semantics: out rank = self.rank + index.rank - 1; self 1-8 D,
 * index INT32/INT64 1-8 D with values in [0, self.shape[dim]) (negative indices not
 * documented as supported: normalise in compiler)." Elements are moved, not
 * computed, so every dtype the emulator holds is taken. */
static aclnnStatus run_gather(aclOpExecutor *e) {
  aclTensor *x = e->t[0], *ix = e->t[1], *y = e->t[2];
  int dim = (int)e->iv[0], d;
  int64_t outer = 1, inner = 1, N = x->dims[dim], n_idx = emu_numel(ix), o, j, i;
  for (d = 0; d < dim; d++) outer *= x->dims[d];
  for (d = dim + 1; d < x->ndim; d++) inner *= x->dims[d];
  size_t es = emu_dtype_size(x->dtype);
  emu_view xv = emu_view_of(x), iv = emu_view_of(ix);
  char *X = emu_xmalloc((size_t)emu_numel(x) * es), *Y = emu_xmalloc((size_t)emu_numel(y) * es);
  double *I = emu_load_view(ix, &iv);
  emu_gather(x, &xv, X);
  for (j = 0; j < n_idx; j++)
    if (I[j] < 0 || I[j] >= (double)N) {
      aclnnStatus st = emu_fn_error(ACLNN_ERR_PARAM_INVALID, "aclnnGatherV2",
                                    "index[%lld] = %lld is outside [0, %lld) (negative indices are not documented)",
                                    (long long)j, (long long)I[j], (long long)N);
      free(X), free(Y), free(I);
      return st;
    }
  for (o = 0; o < outer; o++)
    for (j = 0; j < n_idx; j++)
      for (i = 0; i < inner; i++)
        memcpy(Y + (size_t)((o * n_idx + j) * inner + i) * es, X + (size_t)((o * N + (int64_t)I[j]) * inner + i) * es, es);
  emu_scatter(y, Y);
  free(X), free(Y), free(I);
  return ACLNN_SUCCESS;
}

aclnnStatus aclnnGatherV2GetWorkspaceSize(const aclTensor *self, int64_t dim, const aclTensor *index, aclTensor *out,
                                          uint64_t *workspaceSize, aclOpExecutor **executor) {
  static const char *fn = "aclnnGatherV2GetWorkspaceSize";
  static const aclDataType IDX[2] = {ACL_INT32, ACL_INT64};
  aclOpExecutor *e;
  int64_t od[EMU_MAXDIM];
  int i, nd = 0;
  EMU_CHK(emu_phase1_outs(fn, workspaceSize, 4, executor));
  EMU_CHK(emu_need_tensor(fn, "self", 0, self, 1));
  EMU_CHK(emu_need_tensor(fn, "index", 2, index, 1));
  EMU_CHK(emu_need_tensor(fn, "out", 3, out, 1));
  EMU_CHK(emu_need_rank(fn, "self", 0, self, 1, 8, "aclnnGatherV2 note: self 1-8 D"));
  EMU_CHK(emu_need_rank(fn, "index", 2, index, 1, 8, "aclnnGatherV2 note: index 1-8 D"));
  EMU_CHK(emu_need_dtype(fn, "index", 2, index, IDX, 2, "aclnnGatherV2 note: index INT32/INT64"));
  EMU_CHK(emu_need_same_dtype(fn, "out", 3, out, self, "self"));
  if (!emu_dtype_size(self->dtype))
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "self", 0, "has dtype %s, which the emulator cannot hold",
                         emu_dtype_name(self->dtype));
  if (dim < 0 || dim >= self->ndim)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "dim", 1, "is %lld; the emulator takes 0..%d", (long long)dim,
                         self->ndim - 1);
  if (self->ndim + index->ndim - 1 > EMU_MAXDIM)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "index", 2, "makes out rank %d, more than 8",
                         self->ndim + index->ndim - 1);
  for (i = 0; i < dim; i++) od[nd++] = self->dims[i];
  for (i = 0; i < index->ndim; i++) od[nd++] = index->dims[i];
  for (i = (int)dim + 1; i < self->ndim; i++) od[nd++] = self->dims[i];
  EMU_CHK(emu_need_shape(fn, "out", 3, out, od, nd, "note: out rank = self.rank + index.rank - 1 (ONNX Gather)"));
  e = emu_exec_new("aclnnGatherV2", 0, run_gather);
  e->t[0] = (aclTensor *)self, e->t[1] = (aclTensor *)index, e->t[2] = out, e->nt = 3;
  e->iv[0] = dim;
  return emu_phase1_done(e, workspaceSize, executor);
}
EMU_PHASE2(aclnnGatherV2)

/* ===== aclnnUpsampleBilinear2d ====================================================
 * note: "self 4-D NCHW/NHWC (DOUBLE only NHWC); outputSize len 2 (>0); alignCorners
 * bool; scalesH/scalesW double >= 0 (used as 1/scale when >0 and alignCorners=false).
 * src: scale<=0 => ratio input/output is used ... alignCorners=false uses
 * src=max(0,(dst+0.5)*scale-0.5) (= ONNX pytorch_half_pixel/half_pixel), true =
 * align_corners." The emulator computes NCHW. */
static double src_coord(int64_t dst, int64_t in, int64_t out, int align, double scale) {
  if (align) return out > 1 ? (double)dst * (double)(in - 1) / (double)(out - 1) : 0.0;
  double r = scale > 0 ? 1.0 / scale : (double)in / (double)out;
  double s = ((double)dst + 0.5) * r - 0.5;
  return s < 0 ? 0 : s;
}

static aclnnStatus run_bilinear(aclOpExecutor *e) {
  aclTensor *x = e->t[0], *y = e->t[1];
  int64_t NC = x->dims[0] * x->dims[1], H = x->dims[2], W = x->dims[3], Ho = y->dims[2], Wo = y->dims[3], c, i, j;
  int align = (int)e->iv[0];
  double *X = emu_load(x), *Y = emu_xmalloc((size_t)emu_numel(y) * sizeof *Y);
  for (c = 0; c < NC; c++)
    for (i = 0; i < Ho; i++) {
      double sy = src_coord(i, H, Ho, align, e->dv[0]);
      int64_t y0 = (int64_t)sy, y1 = y0 + 1 < H ? y0 + 1 : H - 1;
      if (y0 > H - 1) y0 = H - 1;
      double ly = sy - (double)y0;
      for (j = 0; j < Wo; j++) {
        double sx = src_coord(j, W, Wo, align, e->dv[1]);
        int64_t x0 = (int64_t)sx, x1 = x0 + 1 < W ? x0 + 1 : W - 1;
        if (x0 > W - 1) x0 = W - 1;
        double lx = sx - (double)x0;
        const double *p = X + c * H * W;
        Y[(c * Ho + i) * Wo + j] = (1 - ly) * ((1 - lx) * p[y0 * W + x0] + lx * p[y0 * W + x1]) +
                                   ly * ((1 - lx) * p[y1 * W + x0] + lx * p[y1 * W + x1]);
      }
    }
  emu_store(y, Y);
  free(X), free(Y);
  return ACLNN_SUCCESS;
}

aclnnStatus aclnnUpsampleBilinear2dGetWorkspaceSize(const aclTensor *self, const aclIntArray *outputSize,
                                                    const bool alignCorners, const double scalesH,
                                                    const double scalesW, aclTensor *out, uint64_t *workspaceSize,
                                                    aclOpExecutor **executor) {
  static const char *fn = "aclnnUpsampleBilinear2dGetWorkspaceSize";
  aclOpExecutor *e;
  EMU_CHK(emu_phase1_outs(fn, workspaceSize, 6, executor));
  EMU_CHK(emu_need_tensor(fn, "self", 0, self, 1));
  EMU_CHK(emu_need_array(fn, "outputSize", 1, outputSize, 1));
  EMU_CHK(emu_need_tensor(fn, "out", 5, out, 1));
  EMU_CHK(emu_need_dtype(fn, "self", 0, self, EMU_FLOATS, 3,
                         "aclnnUpsampleBilinear2d note: DOUBLE only NHWC; the emulator takes FLOAT, FLOAT16, BFLOAT16"));
  EMU_CHK(emu_need_same_dtype(fn, "out", 5, out, self, "self"));
  EMU_CHK(emu_need_rank(fn, "self", 0, self, 4, 4, "aclnnUpsampleBilinear2d note: self 4-D NCHW/NHWC"));
  EMU_CHK(emu_need_format(fn, "self", 0, self, ACL_FORMAT_NCHW,
                          "aclnnUpsampleBilinear2d note: self 4-D NCHW/NHWC (the emulator computes NCHW)"));
  if (outputSize->n != 2 || outputSize->v[0] <= 0 || outputSize->v[1] <= 0)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "outputSize", 1,
                         "must hold 2 positive sizes (note: outputSize len 2 (>0))");
  if (scalesH < 0 || scalesW < 0)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, scalesH < 0 ? "scalesH" : "scalesW", scalesH < 0 ? 3 : 4,
                         "is negative; the note says scalesH/scalesW double >= 0");
  int64_t od[4] = {self->dims[0], self->dims[1], outputSize->v[0], outputSize->v[1]};
  EMU_CHK(emu_need_shape(fn, "out", 5, out, od, 4, "note: out (N, C, outputSize[0], outputSize[1])"));
  e = emu_exec_new("aclnnUpsampleBilinear2d", 0, run_bilinear);
  e->t[0] = (aclTensor *)self, e->t[1] = out, e->nt = 2;
  e->iv[0] = alignCorners;
  e->dv[0] = alignCorners ? 0 : scalesH, e->dv[1] = alignCorners ? 0 : scalesW;
  return emu_phase1_done(e, workspaceSize, executor);
}
EMU_PHASE2(aclnnUpsampleBilinear2d)

/* ===== aclnnPrelu ================================================================
 * note: "ONNX PRelu: out = max(0,x) + weight*min(0,x). weight element count must be
 * 1 or equal to channels (channels = self.shape[1] for rank>1, else 1) - i.e.
 * per-channel on dim 1 only ... self/weight/out FLOAT,FLOAT16,BFLOAT16 ...; out same
 * shape as self; 0-8 D ND." The weight's own dtype is not stated: the emulator takes
 * self's. */
static aclnnStatus run_prelu(aclOpExecutor *e) {
  aclTensor *x = e->t[0];
  int64_t C = e->iv[0], inner = 1, n = emu_numel(x), i;
  int d;
  for (d = 2; d < x->ndim; d++) inner *= x->dims[d];
  double *X = emu_load(x), *W = emu_load(e->t[1]);
  for (i = 0; i < n; i++) {
    double w = C == 1 ? W[0] : W[(i / (inner ? inner : 1)) % C];
    X[i] = fmax(0.0, X[i]) + w * fmin(0.0, X[i]);
  }
  emu_store(e->t[2], X);
  free(X), free(W);
  return ACLNN_SUCCESS;
}

aclnnStatus aclnnPreluGetWorkspaceSize(const aclTensor *self, const aclTensor *weight, aclTensor *out,
                                       uint64_t *workspaceSize, aclOpExecutor **executor) {
  static const char *fn = "aclnnPreluGetWorkspaceSize";
  aclOpExecutor *e;
  int64_t channels, count;
  EMU_CHK(emu_phase1_outs(fn, workspaceSize, 3, executor));
  EMU_CHK(emu_need_tensor(fn, "self", 0, self, 1));
  EMU_CHK(emu_need_tensor(fn, "weight", 1, weight, 1));
  EMU_CHK(emu_need_tensor(fn, "out", 2, out, 1));
  EMU_CHK(emu_need_dtype(fn, "self", 0, self, EMU_FLOATS, 3, "aclnnPrelu note: FLOAT,FLOAT16,BFLOAT16"));
  EMU_CHK(emu_need_rank(fn, "self", 0, self, 0, 8, "aclnnPrelu note: 0-8 D"));
  EMU_CHK(emu_need_same_dtype(fn, "weight", 1, weight, self, "self"));
  EMU_CHK(emu_need_same_dtype(fn, "out", 2, out, self, "self"));
  EMU_CHK(emu_need_shape(fn, "out", 2, out, self->dims, self->ndim, "note: out same shape as self"));
  channels = self->ndim > 1 ? self->dims[1] : 1;
  count = emu_numel(weight);
  if (count != 1 && count != channels)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "weight", 1,
                         "has %lld elements; the note requires 1 or the channel count %lld (self.shape[1])",
                         (long long)count, (long long)channels);
  e = emu_exec_new("aclnnPrelu", 0, run_prelu);
  e->t[0] = (aclTensor *)self, e->t[1] = (aclTensor *)weight, e->t[2] = out, e->nt = 3;
  e->iv[0] = count;
  return emu_phase1_done(e, workspaceSize, executor);
}
EMU_PHASE2(aclnnPrelu)
