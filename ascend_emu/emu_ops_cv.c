/* aclnnRoiAlign (ops-cv), from its aclnn-api.json entry: "Modelled on ONNX RoiAlign
 * opset 10 (no coordinate_transformation_mode argument => opset-16 default
 * 'half_pixel' is NOT expressible here ...). self (N,C,H,W) NCHW and out
 * (numRois,C,outputHeight,outputWidth) NCHW; rois (numRois,4) ND as (x1,y1,x2,y2);
 * batchIndices (numRois,) INT32 (ONNX gives INT64: cast). self/rois/out same dtype
 * FLOAT or FLOAT16. mode C string "avg" or "max"; outputHeight/outputWidth/
 * samplingRatio are C int (samplingRatio >= 0, 0 = adaptive), spatialScale float > 0." */
#include "emu_internal.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const aclDataType F32_F16[2] = {ACL_FLOAT, ACL_FLOAT16};

/* ONNX RoiAlign-10's bilinear sample of one channel plane at (y, x): zero outside
 * [-1, H] x [-1, W], coordinates clamped at 0, the last row/column repeated. */
static double sample(const double *plane, int64_t H, int64_t W, double y, double x) {
  if (y < -1.0 || y > (double)H || x < -1.0 || x > (double)W) return 0.0;
  if (y <= 0) y = 0;
  if (x <= 0) x = 0;
  int64_t y0 = (int64_t)y, x0 = (int64_t)x, y1, x1;
  if (y0 >= H - 1) y1 = y0 = H - 1, y = (double)y0;
  else y1 = y0 + 1;
  if (x0 >= W - 1) x1 = x0 = W - 1, x = (double)x0;
  else x1 = x0 + 1;
  double ly = y - (double)y0, lx = x - (double)x0, hy = 1 - ly, hx = 1 - lx;
  return hy * hx * plane[y0 * W + x0] + hy * lx * plane[y0 * W + x1] + ly * hx * plane[y1 * W + x0] +
         ly * lx * plane[y1 * W + x1];
}

static aclnnStatus run_roi_align(aclOpExecutor *e) {
  aclTensor *x = e->t[0], *rois = e->t[1], *bi = e->t[2], *y = e->t[3];
  int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3], K = rois->dims[0];
  int64_t oh = e->iv[1], ow = e->iv[2], ratio = e->iv[3], k, c, ph, pw;
  double scale = e->dv[0];
  double *X = emu_load(x), *R = emu_load(rois), *B = emu_load(bi);
  double *Y = emu_xmalloc((size_t)emu_numel(y) * sizeof *Y);
  aclnnStatus st = ACLNN_SUCCESS;
  for (k = 0; k < K && st == ACLNN_SUCCESS; k++) {
    int64_t b = (int64_t)B[k];
    if (b < 0 || b >= N) {
      st = emu_fn_error(ACLNN_ERR_PARAM_INVALID, "aclnnRoiAlign",
                        "batchIndices[%lld] = %lld is outside [0, %lld) (self's batch)", (long long)k,
                        (long long)b, (long long)N);
      break;
    }
    /* output_half_pixel (opset 10): no half-pixel shift; a roi is at least 1x1 */
    double x1 = R[k * 4] * scale, y1 = R[k * 4 + 1] * scale, x2 = R[k * 4 + 2] * scale, y2 = R[k * 4 + 3] * scale;
    double rw = fmax(x2 - x1, 1.0), rh = fmax(y2 - y1, 1.0);
    double bw = rw / (double)ow, bh = rh / (double)oh;
    int64_t gh = ratio > 0 ? ratio : (int64_t)ceil(rh / (double)oh), gw = ratio > 0 ? ratio : (int64_t)ceil(rw / (double)ow);
    if (gh < 1) gh = 1;
    if (gw < 1) gw = 1;
    for (c = 0; c < C; c++) {
      const double *plane = X + (b * C + c) * H * W;
      for (ph = 0; ph < oh; ph++)
        for (pw = 0; pw < ow; pw++) {
          double acc = 0;
          for (int64_t iy = 0; iy < gh; iy++)
            for (int64_t ix = 0; ix < gw; ix++)
              acc += sample(plane, H, W, y1 + (double)ph * bh + ((double)iy + 0.5) * bh / (double)gh,
                            x1 + (double)pw * bw + ((double)ix + 0.5) * bw / (double)gw);
          Y[((k * C + c) * oh + ph) * ow + pw] = acc / (double)(gh * gw);
        }
    }
  }
  if (st == ACLNN_SUCCESS) emu_store(y, Y);
  free(X), free(R), free(B), free(Y);
  return st;
}

aclnnStatus aclnnRoiAlignGetWorkspaceSize(const aclTensor *self, const aclTensor *rois, const aclTensor *batchIndices,
                                          const char *mode, int outputHeight, int outputWidth, int samplingRatio,
                                          float spatialScale, aclTensor *out, uint64_t *workspaceSize,
                                          aclOpExecutor **executor) {
  static const char *fn = "aclnnRoiAlignGetWorkspaceSize";
  static const char *F = "aclnnRoiAlign note: self/rois/out same dtype FLOAT or FLOAT16";
  static const aclDataType I32[1] = {ACL_INT32};
  aclOpExecutor *e;
  EMU_CHK(emu_phase1_outs(fn, workspaceSize, 9, executor));
  EMU_CHK(emu_need_tensor(fn, "self", 0, self, 1));
  EMU_CHK(emu_need_tensor(fn, "rois", 1, rois, 1));
  EMU_CHK(emu_need_tensor(fn, "batchIndices", 2, batchIndices, 1));
  EMU_CHK(emu_need_tensor(fn, "out", 8, out, 1));
  EMU_CHK(emu_need_dtype(fn, "self", 0, self, F32_F16, 2, F));
  EMU_CHK(emu_need_same_dtype(fn, "rois", 1, rois, self, "self"));
  EMU_CHK(emu_need_same_dtype(fn, "out", 8, out, self, "self"));
  EMU_CHK(emu_need_dtype(fn, "batchIndices", 2, batchIndices, I32, 1,
                         "aclnnRoiAlign note: batchIndices (numRois,) INT32 (ONNX gives INT64: cast)"));
  EMU_CHK(emu_need_rank(fn, "self", 0, self, 4, 4, "aclnnRoiAlign note: self (N,C,H,W) NCHW"));
  EMU_CHK(emu_need_format(fn, "self", 0, self, ACL_FORMAT_NCHW, "aclnnRoiAlign note: self (N,C,H,W) NCHW"));
  EMU_CHK(emu_need_format(fn, "out", 8, out, ACL_FORMAT_NCHW, "aclnnRoiAlign note: out (numRois,C,oh,ow) NCHW"));
  if (rois->ndim != 2 || rois->dims[1] != 4)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "rois", 1,
                         "has %d dims; the note says rois (numRois,4) ND as (x1,y1,x2,y2)", rois->ndim);
  if (batchIndices->ndim != 1 || batchIndices->dims[0] != rois->dims[0])
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "batchIndices", 2,
                         "is not (numRois,) = (%lld,) (note: batchIndices (numRois,))", (long long)rois->dims[0]);
  if (!mode || (strcmp(mode, "avg") && strcmp(mode, "max")))
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "mode", 3, "is %s%s%s; the note allows \"avg\" or \"max\"",
                         mode ? "\"" : "", mode ? mode : "NULL", mode ? "\"" : "");
  if (!strcmp(mode, "max"))
    /* the entry names "max" but not how samples combine (ONNX-10's reference takes the
     * largest weighted corner): not emulated rather than guessed */
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "mode", 3,
                         "\"max\": the fact table does not settle how max mode combines the samples, so the "
                         "emulator does not compute it");
  if (outputHeight <= 0 || outputWidth <= 0)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, outputHeight <= 0 ? "outputHeight" : "outputWidth",
                         outputHeight <= 0 ? 4 : 5, "is %d; it must be positive",
                         outputHeight <= 0 ? outputHeight : outputWidth);
  if (samplingRatio < 0)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "samplingRatio", 6,
                         "is %d; the note says samplingRatio >= 0 (0 = adaptive)", samplingRatio);
  if (!(spatialScale > 0))
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "spatialScale", 7, "is %g; the note says spatialScale > 0",
                         (double)spatialScale);
  int64_t od[4] = {rois->dims[0], self->dims[1], outputHeight, outputWidth};
  EMU_CHK(emu_need_shape(fn, "out", 8, out, od, 4, "note: out (numRois,C,outputHeight,outputWidth)"));
  e = emu_exec_new("aclnnRoiAlign", 0, run_roi_align);
  e->t[0] = (aclTensor *)self, e->t[1] = (aclTensor *)rois, e->t[2] = (aclTensor *)batchIndices, e->t[3] = out;
  e->nt = 4;
  e->iv[0] = 0, e->iv[1] = outputHeight, e->iv[2] = outputWidth, e->iv[3] = samplingRatio;
  e->dv[0] = spatialScale;
  return emu_phase1_done(e, workspaceSize, executor);
}
EMU_PHASE2(aclnnRoiAlign)
