/* aclnn convolution, pooling, normalisation, softmax and matmul ops of the strict
 * emulator: phase 1 checks every argument against its fact entry
 * (../shared/aclnn-api.json, Atlas A2/A3 column); phase 2 computes with plain loops,
 * accumulating in double, reading and writing through each tensor's view. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "emu_internal.h"

static const aclDataType F_F16[2] = {ACL_FLOAT, ACL_FLOAT16};
static const aclDataType F_F16_D_BF16[4] = {ACL_FLOAT, ACL_FLOAT16, ACL_DOUBLE, ACL_BF16};

/* every value of an IntArray within [lo, hi]; 0 or the status */
static int need_vals(const char *fn, const char *p, int pos, const aclIntArray *a, int64_t lo,
                     int64_t hi, const char *fact) {
  uint64_t i;
  for (i = 0; i < a->n; i++)
    if (a->v[i] < lo || a->v[i] > hi)
      return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, p, pos,
                           "element %llu is %lld; allowed %lld to %lld (%s)", (unsigned long long)i,
                           (long long)a->v[i], (long long)lo, (long long)hi, fact);
  return 0;
}

static int need_len(const char *fn, const char *p, int pos, const aclIntArray *a,
                    const int *ok, int nok, const char *fact) {
  int i;
  char list[64];
  size_t k = 0;
  for (i = 0; i < nok; i++)
    if ((int64_t)a->n == ok[i]) return 0;
  list[0] = 0;
  for (i = 0; i < nok; i++) k += (size_t)snprintf(list + k, sizeof list - k, "%s%d", i ? " or " : "", ok[i]);
  return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, p, pos, "has %llu elements; allowed %s (%s)",
                       (unsigned long long)a->n, list, fact);
}

static aclFormat conv_format(int rank) {
  return rank == 3 ? ACL_FORMAT_NCL : rank == 4 ? ACL_FORMAT_NCHW : ACL_FORMAT_NCDHW;
}

/* ===== aclnnConvolution ========================================================= */
/* iv: 0 nsp, 1..3 stride, 4..6 pad begin, 7..9 pad end, 10..12 dilation, 13 groups
 * (spatial dims padded to 3 with stride 1, pad 0, dilation 1, extent 1) */
static void conv_spatial(const aclTensor *t, int nsp, int64_t *s3) {
  int i;
  for (i = 0; i < 3; i++) s3[i] = i < 3 - nsp ? 1 : t->dims[2 + i - (3 - nsp)];
}

static aclnnStatus run_conv(aclOpExecutor *e) {
  aclTensor *x = e->t[0], *w = e->t[1], *b = e->t[2], *y = e->t[3];
  int nsp = (int)e->iv[0];
  int64_t in[3], k[3], o[3], N = x->dims[0], C = x->dims[1], O = w->dims[0], G = e->iv[13];
  int64_t cg = C / G, og = O / G, n, oc, c, od, oh, ow, kd, kh, kw;
  double *X = emu_load(x), *W = emu_load(w), *B = b ? emu_load(b) : NULL, *Y;
  conv_spatial(x, nsp, in);
  conv_spatial(w, nsp, k);
  conv_spatial(y, nsp, o);
  Y = emu_xmalloc((size_t)emu_numel(y) * sizeof *Y);
  for (n = 0; n < N; n++)
    for (oc = 0; oc < O; oc++) {
      int64_t g = oc / og;
      for (od = 0; od < o[0]; od++)
        for (oh = 0; oh < o[1]; oh++)
          for (ow = 0; ow < o[2]; ow++) {
            double acc = B ? B[oc] : 0.0;
            for (c = 0; c < cg; c++)
              for (kd = 0; kd < k[0]; kd++) {
                int64_t id = od * e->iv[1] - e->iv[4] + kd * e->iv[10];
                if (id < 0 || id >= in[0]) continue;
                for (kh = 0; kh < k[1]; kh++) {
                  int64_t ih = oh * e->iv[2] - e->iv[5] + kh * e->iv[11];
                  if (ih < 0 || ih >= in[1]) continue;
                  for (kw = 0; kw < k[2]; kw++) {
                    int64_t iw = ow * e->iv[3] - e->iv[6] + kw * e->iv[12];
                    if (iw < 0 || iw >= in[2]) continue;
                    acc += X[(((n * C + g * cg + c) * in[0] + id) * in[1] + ih) * in[2] + iw] *
                           W[(((oc * cg + c) * k[0] + kd) * k[1] + kh) * k[2] + kw];
                  }
                }
              }
            Y[(((n * O + oc) * o[0] + od) * o[1] + oh) * o[2] + ow] = acc;
          }
    }
  emu_store(y, Y);
  free(X); free(W); free(B); free(Y);
  return ACLNN_SUCCESS;
}

/* output spatial extent of a conv/pool window; < 1 when nothing fits */
static int64_t win_out(int64_t in, int64_t pb, int64_t pe, int64_t k, int64_t dil, int64_t s) {
  int64_t span = in + pb + pe - dil * (k - 1) - 1;
  return span < 0 ? 0 : span / s + 1;
}

aclnnStatus aclnnConvolutionGetWorkspaceSize(const aclTensor *input, const aclTensor *weight,
                                             const aclTensor *bias, const aclIntArray *stride,
                                             const aclIntArray *padding,
                                             const aclIntArray *dilation, bool transposed,
                                             const aclIntArray *outputPadding,
                                             const int64_t groups, aclTensor *output,
                                             int8_t cubeMathType, uint64_t *workspaceSize,
                                             aclOpExecutor **executor) {
  static const char *fn = "aclnnConvolutionGetWorkspaceSize";
  static const int len1[] = {1, 2}, len2[] = {2, 4}, len3[] = {3};
  static const char *FMT = "aclnnConvolution note: formats input/weight/output NCL(3D)/NCHW(4D)/"
                           "NCDHW(5D)";
  aclOpExecutor *e;
  int nsp, i, r;
  int64_t od[EMU_MAXDIM], pb[3], pe[3];
  EMU_CHK(emu_phase1_outs(fn, workspaceSize, 11, executor));
  EMU_CHK(emu_need_tensor(fn, "input", 0, input, 1));
  EMU_CHK(emu_need_tensor(fn, "weight", 1, weight, 1));
  /* aclnnConvolution note: "bias 1-D, ND format, may be nullptr" */
  EMU_CHK(emu_need_tensor(fn, "bias", 2, bias, 0));
  EMU_CHK(emu_need_tensor(fn, "output", 9, output, 1));
  /* note: "input/weight dtype FLOAT,FLOAT16,BFLOAT16 on A2/A3" */
  EMU_CHK(emu_need_dtype(fn, "input", 0, input, EMU_FLOATS, 3,
                         "aclnnConvolution note: input/weight dtype FLOAT,FLOAT16,BFLOAT16 on A2/A3"));
  EMU_CHK(emu_need_same_dtype(fn, "weight", 1, weight, input, "input"));
  EMU_CHK(emu_need_same_dtype(fn, "output", 9, output, input, "input"));
  if (bias) EMU_CHK(emu_need_same_dtype(fn, "bias", 2, bias, input, "input"));
  /* note: formats NCL(3D)/NCHW(4D)/NCDHW(5D) */
  EMU_CHK(emu_need_rank(fn, "input", 0, input, 3, 5, FMT));
  r = input->ndim;
  nsp = r - 2;
  EMU_CHK(emu_need_format(fn, "input", 0, input, conv_format(r), FMT));
  if (weight->ndim != r)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "weight", 1,
                         "has %d dims but input has %d (weight is [out, in/groups, k...])",
                         weight->ndim, r);
  EMU_CHK(emu_need_format(fn, "weight", 1, weight, conv_format(r), FMT));
  if (output->ndim != r)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "output", 9, "has %d dims but input has %d",
                         output->ndim, r);
  EMU_CHK(emu_need_format(fn, "output", 9, output, conv_format(r), FMT));
  /* note: "Limits on A2/A3: each dim <= 1000000" */
  for (i = 0; i < r; i++)
    if (input->dims[i] > 1000000 || weight->dims[i] > 1000000 || input->dims[i] < 1 ||
        weight->dims[i] < 1)
      return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, input->dims[i] > 1000000 ||
                           input->dims[i] < 1 ? "input" : "weight", input->dims[i] > 1000000 ||
                           input->dims[i] < 1 ? 0 : 1,
                           "dim %d is outside 1..1000000 (note: Limits on A2/A3: each dim <= "
                           "1000000)", i);
  if (bias) {
    EMU_CHK(emu_need_format(fn, "bias", 2, bias, ACL_FORMAT_ND, "note: bias 1-D, ND format"));
    if (bias->ndim != 1 || bias->dims[0] != weight->dims[0])
      return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "bias", 2,
                           "must be 1-D of length %lld (weight's out channels; note: bias 1-D)",
                           (long long)weight->dims[0]);
  }
  /* ConvTranspose layout and output size are not in the fact table: refused */
  if (transposed)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "transposed", 6,
                         "is true; the fact table gives no weight layout or output size for a "
                         "transposed convolution, so the emulator refuses it");
  /* note: "stride/dilation length = input.dim-2, values >0" */
  EMU_CHK(emu_need_array(fn, "stride", 3, stride, 1));
  if ((int)stride->n != nsp)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "stride", 3,
                         "has %llu elements; the note says length = input.dim-2 = %d",
                         (unsigned long long)stride->n, nsp);
  EMU_CHK(need_vals(fn, "stride", 3, stride, 1, nsp == 3 ? 63 : INT64_MAX,
                    "note: values >0; stride H/W [1,63] for conv3d"));
  EMU_CHK(emu_need_array(fn, "dilation", 5, dilation, 1));
  if ((int)dilation->n != nsp)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "dilation", 5,
                         "has %llu elements; the note says length = input.dim-2 = %d",
                         (unsigned long long)dilation->n, nsp);
  EMU_CHK(need_vals(fn, "dilation", 5, dilation, 1, 255, "note: dilation [1,255]"));
  /* note: "padding length: conv1d 1 or 2, conv2d 2 or 4, conv3d 3; ... 4-element conv2d
   * padding = [top, bottom, left, right] (NOT ONNX order [top,left,bottom,right])";
   * "padding [0,255]" */
  EMU_CHK(emu_need_array(fn, "padding", 4, padding, 1));
  EMU_CHK(need_len(fn, "padding", 4, padding, nsp == 1 ? len1 : nsp == 2 ? len2 : len3,
                   nsp == 3 ? 1 : 2, "note: padding length conv1d 1 or 2, conv2d 2 or 4, conv3d 3"));
  EMU_CHK(need_vals(fn, "padding", 4, padding, 0, 255, "note: padding [0,255]"));
  for (i = 0; i < nsp; i++) {
    int two = (int)padding->n == 2 * nsp;
    pb[i] = padding->v[two ? 2 * i : i];
    pe[i] = padding->v[two ? 2 * i + 1 : i];
  }
  /* note: "outputPadding ignored when transposed=false; ... some internal paths still
   * view it, and the doc example passes a zero IntArray => always pass zeros of length
   * input.dim-2" */
  EMU_CHK(emu_need_array(fn, "outputPadding", 7, outputPadding, 1));
  if ((int)outputPadding->n != nsp)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "outputPadding", 7,
                         "has %llu elements; the note says always pass zeros of length "
                         "input.dim-2 = %d", (unsigned long long)outputPadding->n, nsp);
  EMU_CHK(need_vals(fn, "outputPadding", 7, outputPadding, 0, 0,
                    "note: always pass zeros of length input.dim-2"));
  /* note: "groups in [1,65535], groups*weight.C == input.C" */
  if (groups < 1 || groups > 65535)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "groups", 8,
                         "is %lld; the note allows [1,65535]", (long long)groups);
  if (groups * weight->dims[1] != input->dims[1])
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "groups", 8,
                         "groups %lld * weight.C %lld != input.C %lld (note: groups*weight.C == "
                         "input.C)", (long long)groups, (long long)weight->dims[1],
                         (long long)input->dims[1]);
  if (weight->dims[0] % groups)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "weight", 1,
                         "out channels %lld are not a multiple of groups %lld",
                         (long long)weight->dims[0], (long long)groups);
  /* note: "cubeMathType (int8): 0 KEEP_DTYPE, 1 ALLOW_FP32_DOWN_PRECISION, 2 USE_FP16,
   * 3 USE_HF32. Doc constraint table: on A2/A3 ... 'KEEP_DTYPE with FLOAT input not
   * supported'; ... 2 not allowed for BFLOAT16." (The note records a conflicting src
   * check; the emulator follows the doc table, as the doc example does with 1.) */
  if (cubeMathType < 0 || cubeMathType > 3)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "cubeMathType", 10,
                         "is %d; the note allows 0 KEEP_DTYPE, 1 ALLOW_FP32_DOWN_PRECISION, "
                         "2 USE_FP16, 3 USE_HF32", (int)cubeMathType);
  if (cubeMathType == 0 && input->dtype == ACL_FLOAT)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "cubeMathType", 10,
                         "is 0 (KEEP_DTYPE) with FLOAT input; the doc constraint table says "
                         "'KEEP_DTYPE with FLOAT input not supported' on A2/A3 (use 1, as the "
                         "doc example does)");
  if (cubeMathType == 2 && input->dtype == ACL_BF16)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "cubeMathType", 10,
                         "is 2 (USE_FP16) with BFLOAT16 input; the note says 2 is not allowed "
                         "for BFLOAT16");
  /* the output tensor's shape must be exactly what the convolution produces */
  od[0] = input->dims[0];
  od[1] = weight->dims[0];
  for (i = 0; i < nsp; i++) {
    od[2 + i] = win_out(input->dims[2 + i], pb[i], pe[i], weight->dims[2 + i], dilation->v[i],
                        stride->v[i]);
    if (od[2 + i] < 1)
      return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "input", 0,
                           "spatial dim %d of size %lld with padding %lld+%lld is smaller than "
                           "the dilated kernel", i, (long long)input->dims[2 + i],
                           (long long)pb[i], (long long)pe[i]);
  }
  if (nsp == 2 && padding->n == 4) {
    int64_t alt[EMU_MAXDIM];
    int same = 1, alt_ok = 1;
    memcpy(alt, od, sizeof alt);
    /* read as ONNX [top, left, bottom, right]: H gets v[0]+v[2], W gets v[1]+v[3] */
    alt[2] = win_out(input->dims[2], padding->v[0], padding->v[2], weight->dims[2],
                     dilation->v[0], stride->v[0]);
    alt[3] = win_out(input->dims[3], padding->v[1], padding->v[3], weight->dims[3],
                     dilation->v[1], stride->v[1]);
    for (i = 0; i < 4; i++) { same &= output->dims[i] == od[i]; alt_ok &= output->dims[i] == alt[i]; }
    if (!same && alt_ok)
      return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "padding", 4,
                           "[%lld, %lld, %lld, %lld] fits the output shape only when read in "
                           "ONNX order [top, left, bottom, right]; aclnnConvolution's 4-element "
                           "padding is [top, bottom, left, right] (note, src comment "
                           "aclnn_convolution.cpp)", (long long)padding->v[0],
                           (long long)padding->v[1], (long long)padding->v[2],
                           (long long)padding->v[3]);
  }
  EMU_CHK(emu_need_shape(fn, "output", 9, output, od, r,
                         "[N, weight.out, (in + pad_begin + pad_end - dilation*(k-1) - 1)/stride "
                         "+ 1 per spatial dim], padding [top, bottom, left, right]"));
  e = emu_exec_new("aclnnConvolution", 1024, run_conv);
  e->t[0] = (aclTensor *)input; e->t[1] = (aclTensor *)weight; e->t[2] = (aclTensor *)bias;
  e->t[3] = output; e->nt = 4;
  e->iv[0] = nsp;
  for (i = 0; i < 3; i++) {
    int j = i - (3 - nsp);
    e->iv[1 + i] = j >= 0 ? stride->v[j] : 1;
    e->iv[4 + i] = j >= 0 ? pb[j] : 0;
    e->iv[7 + i] = j >= 0 ? pe[j] : 0;
    e->iv[10 + i] = j >= 0 ? dilation->v[j] : 1;
  }
  e->iv[13] = groups;
  return emu_phase1_done(e, workspaceSize, executor);
}
EMU_PHASE2(aclnnConvolution)

/* ===== pooling ================================================================== */
/* iv: 0 kh, 1 kw, 2 sh, 3 sw, 4 pt, 5 pl, 6 pb, 7 pr, 8 mode (0 max, 1 avg),
 * 9 countIncludePad, 10 divisorOverride */
static aclnnStatus run_pool(aclOpExecutor *e) {
  aclTensor *x = e->t[0], *y = e->t[1];
  int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
  int64_t Ho = y->dims[2], Wo = y->dims[3], nc, oh, ow, i, j, *v = e->iv;
  double *X = emu_load(x), *Y = emu_xmalloc((size_t)emu_numel(y) * sizeof *Y);
  for (nc = 0; nc < N * C; nc++)
    for (oh = 0; oh < Ho; oh++)
      for (ow = 0; ow < Wo; ow++) {
        int64_t h0 = oh * v[2] - v[4], w0 = ow * v[3] - v[5], cnt = 0, padcnt = 0;
        double acc = v[8] ? 0.0 : -INFINITY;
        for (i = h0; i < h0 + v[0]; i++)
          for (j = w0; j < w0 + v[1]; j++) {
            if (i >= -v[4] && i < H + v[6] && j >= -v[5] && j < W + v[7]) padcnt++;
            if (i < 0 || i >= H || j < 0 || j >= W) continue;
            cnt++;
            if (v[8]) acc += X[(nc * H + i) * W + j];
            else if (X[(nc * H + i) * W + j] > acc || isnan(X[(nc * H + i) * W + j]))
              acc = X[(nc * H + i) * W + j];
          }
        if (v[8]) acc /= (double)(v[10] ? v[10] : v[9] ? padcnt : cnt);
        Y[(nc * Ho + oh) * Wo + ow] = acc;
      }
  emu_store(y, Y);
  free(X); free(Y);
  return ACLNN_SUCCESS;
}

/* output size of one pooled axis; ceil mode is accepted only where the fact table's
 * single formula is unambiguous (the last window starts inside input or left pad) */
static int pool_axis(const char *fn, const char *p, int pos, int64_t in, int64_t k, int64_t s,
                     int64_t pb, int64_t pe, int ceil_mode, int64_t *out) {
  int64_t span = in + pb + pe - k;
  if (span < 0)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, p, pos,
                         "the window %lld is larger than the padded input %lld", (long long)k,
                         (long long)(in + pb + pe));
  *out = span / s + 1;
  if (ceil_mode && span % s) {
    if ((span / s + 1) * s >= in + pb)
      return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, p, pos,
                           "ceil mode would start the last window in the end padding; the fact "
                           "table does not say whether that window is kept, so the emulator "
                           "refuses it");
    *out = span / s + 2;
  }
  return 0;
}

aclnnStatus aclnnMaxPoolGetWorkspaceSize(const aclTensor *self, const aclIntArray *kernelShape,
                                         const aclIntArray *strides, const int64_t autoPad,
                                         const aclIntArray *pads, const aclIntArray *dilations,
                                         const int64_t ceilMode, aclTensor *out,
                                         uint64_t *workspaceSize, aclOpExecutor **executor) {
  static const char *fn = "aclnnMaxPoolGetWorkspaceSize";
  static const int lk[] = {1, 2}, ls[] = {0, 1, 2}, lp[] = {0, 1, 4}, ld[] = {0, 1, 2, 4};
  aclOpExecutor *e;
  int64_t k[2], s[2], p[4], od[4];
  int i;
  EMU_CHK(emu_phase1_outs(fn, workspaceSize, 8, executor));
  EMU_CHK(emu_need_tensor(fn, "self", 0, self, 1));
  EMU_CHK(emu_need_tensor(fn, "out", 7, out, 1));
  /* aclnnMaxPool note: "A2/A3 dtypes FLOAT16 and FLOAT only" */
  EMU_CHK(emu_need_dtype(fn, "self", 0, self, F_F16, 2,
                         "aclnnMaxPool note: A2/A3 dtypes FLOAT16 and FLOAT only"));
  EMU_CHK(emu_need_same_dtype(fn, "out", 7, out, self, "self"));
  /* note: "self ND 3-4 D"; the 3-D layout (C,H,W or N,C,L) is not given: 4-D only */
  if (self->ndim != 4)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "self", 0,
                         "has %d dims; the note allows 3-4 D but does not say how a 3-D self is "
                         "laid out, so the emulator takes 4-D (N, C, H, W) only", self->ndim);
  /* note: "self ND"; facts.formats: NCHW for pooling inputs - both accepted */
  if (self->format != ACL_FORMAT_ND && self->format != ACL_FORMAT_NCHW)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "self", 0,
                         "format is %s; the note says ND (conventions.formats: NCHW for pooling)",
                         emu_format_name(self->format));
  if (out->format != self->format)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "out", 7, "format %s differs from self's %s",
                         emu_format_name(out->format), emu_format_name(self->format));
  /* note: "kernelShape len 1|2; strides len 0|1|2 (0 => 1); autoPad int64 only 0
   * (NOTSET); pads len 0|1|2|4 where len4 = {top, left, bottom, right} (ONNX order) and
   * per-axis pad sum <= kernel; dilations only 1 (len 0|1|2|4); ceilMode int64" */
  EMU_CHK(emu_need_array(fn, "kernelShape", 1, kernelShape, 1));
  EMU_CHK(need_len(fn, "kernelShape", 1, kernelShape, lk, 2, "note: kernelShape len 1|2"));
  EMU_CHK(need_vals(fn, "kernelShape", 1, kernelShape, 1, INT64_MAX, "a window of at least 1"));
  EMU_CHK(emu_need_array(fn, "strides", 2, strides, 1));
  EMU_CHK(need_len(fn, "strides", 2, strides, ls, 3, "note: strides len 0|1|2 (0 => 1)"));
  EMU_CHK(need_vals(fn, "strides", 2, strides, 1, INT64_MAX, "a stride of at least 1"));
  if (autoPad != 0)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "autoPad", 3,
                         "is %lld; the note allows only 0 (NOTSET)", (long long)autoPad);
  EMU_CHK(emu_need_array(fn, "pads", 4, pads, 1));
  if (pads->n == 2)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "pads", 4,
                         "has 2 elements; the note lists len 2 but does not say whether it is "
                         "{h, w} or {begin, end}, so the emulator takes len 0, 1 or 4 "
                         "{top, left, bottom, right}");
  EMU_CHK(need_len(fn, "pads", 4, pads, lp, 3, "note: pads len 0|1|2|4, len4 = {top, left, "
                   "bottom, right} (ONNX order)"));
  EMU_CHK(need_vals(fn, "pads", 4, pads, 0, INT64_MAX, "pads are not negative"));
  EMU_CHK(emu_need_array(fn, "dilations", 5, dilations, 1));
  EMU_CHK(need_len(fn, "dilations", 5, dilations, ld, 4, "note: dilations len 0|1|2|4"));
  EMU_CHK(need_vals(fn, "dilations", 5, dilations, 1, 1, "note: dilations only 1"));
  for (i = 0; i < 2; i++) {
    k[i] = kernelShape->v[kernelShape->n == 2 ? i : 0];
    s[i] = strides->n == 0 ? 1 : strides->v[strides->n == 2 ? i : 0];
  }
  for (i = 0; i < 4; i++) p[i] = pads->n == 0 ? 0 : pads->v[pads->n == 4 ? i : 0];
  /* p = {top, left, bottom, right} */
  for (i = 0; i < 2; i++)
    if (p[i] + p[i + 2] > k[i])
      return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "pads", 4,
                           "%s pads %lld + %lld exceed the kernel %lld (note: per-axis pad sum <= "
                           "kernel; len4 = {top, left, bottom, right})", i ? "left/right" : "top/bottom",
                           (long long)p[i], (long long)p[i + 2], (long long)k[i]);
  od[0] = self->dims[0];
  od[1] = self->dims[1];
  EMU_CHK(pool_axis(fn, "kernelShape", 1, self->dims[2], k[0], s[0], p[0], p[2], ceilMode != 0, &od[2]));
  EMU_CHK(pool_axis(fn, "kernelShape", 1, self->dims[3], k[1], s[1], p[1], p[3], ceilMode != 0, &od[3]));
  EMU_CHK(emu_need_shape(fn, "out", 7, out, od, 4,
                         "[N, C, (H + top + bottom - k)/s + 1, (W + left + right - k)/s + 1], pads "
                         "{top, left, bottom, right}"));
  e = emu_exec_new("aclnnMaxPool", 0, run_pool);
  e->t[0] = (aclTensor *)self; e->t[1] = out; e->nt = 2;
  e->iv[0] = k[0]; e->iv[1] = k[1]; e->iv[2] = s[0]; e->iv[3] = s[1];
  e->iv[4] = p[0]; e->iv[5] = p[1]; e->iv[6] = p[2]; e->iv[7] = p[3]; e->iv[8] = 0;
  return emu_phase1_done(e, workspaceSize, executor);
}
EMU_PHASE2(aclnnMaxPool)

static int need_nchw4(const char *fn, const char *p, int pos, const aclTensor *t, const char *fact) {
  if (t->ndim != 4)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, p, pos,
                         "has %d dims; the note allows 3-4 D but the emulator takes 4-D NCHW only "
                         "(the fact table does not say how a 3-D tensor is laid out)", t->ndim);
  return emu_need_format(fn, p, pos, t, ACL_FORMAT_NCHW, fact);
}

aclnnStatus aclnnAvgPool2dGetWorkspaceSize(const aclTensor *self, const aclIntArray *kernelSize,
                                           const aclIntArray *strides,
                                           const aclIntArray *paddings, const bool ceilMode,
                                           const bool countIncludePad,
                                           const int64_t divisorOverride,
                                           const int8_t cubeMathType, aclTensor *out,
                                           uint64_t *workspaceSize, aclOpExecutor **executor) {
  static const char *fn = "aclnnAvgPool2dGetWorkspaceSize";
  static const int lk[] = {1, 2}, ls[] = {0, 1, 2};
  aclOpExecutor *e;
  int64_t k[2], s[2], p[2], od[4];
  int i;
  EMU_CHK(emu_phase1_outs(fn, workspaceSize, 9, executor));
  EMU_CHK(emu_need_tensor(fn, "self", 0, self, 1));
  EMU_CHK(emu_need_tensor(fn, "out", 8, out, 1));
  /* aclnnAvgPool2d note: "self NCHW/NCL 3-4 D FP32/FP16/BF16, empty tensor not allowed" */
  EMU_CHK(emu_need_dtype(fn, "self", 0, self, EMU_FLOATS, 3, "aclnnAvgPool2d note: FP32/FP16/BF16"));
  EMU_CHK(emu_need_same_dtype(fn, "out", 8, out, self, "self"));
  EMU_CHK(need_nchw4(fn, "self", 0, self, "aclnnAvgPool2d note: self NCHW/NCL"));
  EMU_CHK(need_nchw4(fn, "out", 8, out, "aclnnAvgPool2d note: self NCHW/NCL"));
  if (emu_numel(self) == 0)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "self", 0, "is empty (note: empty tensor not allowed)");
  /* note: "kernelSize len 1|2; strides len 0|1|2 (0 => =kernel); paddings len 1|2
   * symmetric, pad <= kernel/2" */
  EMU_CHK(emu_need_array(fn, "kernelSize", 1, kernelSize, 1));
  EMU_CHK(need_len(fn, "kernelSize", 1, kernelSize, lk, 2, "note: kernelSize len 1|2"));
  EMU_CHK(need_vals(fn, "kernelSize", 1, kernelSize, 1, INT64_MAX, "a window of at least 1"));
  EMU_CHK(emu_need_array(fn, "strides", 2, strides, 1));
  EMU_CHK(need_len(fn, "strides", 2, strides, ls, 3, "note: strides len 0|1|2 (0 => =kernel)"));
  EMU_CHK(need_vals(fn, "strides", 2, strides, 1, INT64_MAX, "a stride of at least 1"));
  EMU_CHK(emu_need_array(fn, "paddings", 3, paddings, 1));
  EMU_CHK(need_len(fn, "paddings", 3, paddings, lk, 2, "note: paddings len 1|2 symmetric"));
  for (i = 0; i < 2; i++) {
    k[i] = kernelSize->v[kernelSize->n == 2 ? i : 0];
    s[i] = strides->n == 0 ? k[i] : strides->v[strides->n == 2 ? i : 0];
    p[i] = paddings->v[paddings->n == 2 ? i : 0];
    if (p[i] < 0 || p[i] > k[i] / 2)
      return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "paddings", 3,
                           "%s padding %lld is outside 0..kernel/2 = %lld (note: pad <= kernel/2)",
                           i ? "W" : "H", (long long)p[i], (long long)(k[i] / 2));
  }
  /* note: "divisorOverride int64 (0 = off)" */
  if (divisorOverride < 0)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "divisorOverride", 6,
                         "is %lld; 0 means off, a negative divisor is not described",
                         (long long)divisorOverride);
  /* note: "cubeMathType: 0 KEEP_DTYPE; 1 ALLOW_FP32_DOWN_PRECISION NOT supported for FP32
   * input on A2/A3 (=> use 0 for FP32 on A2/A3); 2 USE_FP16 (not BF16); 3 not
   * supported" */
  if (cubeMathType < 0 || cubeMathType > 2 || (cubeMathType == 1 && self->dtype == ACL_FLOAT) ||
      (cubeMathType == 2 && self->dtype == ACL_BF16))
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "cubeMathType", 7,
                         "is %d with %s input; the note allows 0 KEEP_DTYPE, 1 only for non-FP32 "
                         "on A2/A3, 2 USE_FP16 not for BF16, 3 not supported", (int)cubeMathType,
                         emu_dtype_name(self->dtype));
  od[0] = self->dims[0];
  od[1] = self->dims[1];
  EMU_CHK(pool_axis(fn, "kernelSize", 1, self->dims[2], k[0], s[0], p[0], p[0], ceilMode, &od[2]));
  EMU_CHK(pool_axis(fn, "kernelSize", 1, self->dims[3], k[1], s[1], p[1], p[1], ceilMode, &od[3]));
  EMU_CHK(emu_need_shape(fn, "out", 8, out, od, 4,
                         "[N, C, (H + 2*padH - kH)/sH + 1, (W + 2*padW - kW)/sW + 1]"));
  e = emu_exec_new("aclnnAvgPool2d", 0, run_pool);
  e->t[0] = (aclTensor *)self; e->t[1] = out; e->nt = 2;
  e->iv[0] = k[0]; e->iv[1] = k[1]; e->iv[2] = s[0]; e->iv[3] = s[1];
  e->iv[4] = p[0]; e->iv[5] = p[1]; e->iv[6] = p[0]; e->iv[7] = p[1]; e->iv[8] = 1;
  e->iv[9] = countIncludePad; e->iv[10] = divisorOverride;
  return emu_phase1_done(e, workspaceSize, executor);
}
EMU_PHASE2(aclnnAvgPool2d)

aclnnStatus aclnnAdaptiveAvgPool2dGetWorkspaceSize(const aclTensor *self,
                                                   const aclIntArray *outputSize, aclTensor *out,
                                                   uint64_t *workspaceSize,
                                                   aclOpExecutor **executor) {
  static const char *fn = "aclnnAdaptiveAvgPool2dGetWorkspaceSize";
  static const int l2[] = {2};
  aclOpExecutor *e;
  int64_t od[4];
  EMU_CHK(emu_phase1_outs(fn, workspaceSize, 3, executor));
  EMU_CHK(emu_need_tensor(fn, "self", 0, self, 1));
  EMU_CHK(emu_need_tensor(fn, "out", 2, out, 1));
  /* aclnnAdaptiveAvgPool2d note: "self NCL/NCHW 3-4 D FP32/FP16/BF16; outputSize
   * IntArray length exactly 2 [Hout, Wout]" */
  EMU_CHK(emu_need_dtype(fn, "self", 0, self, EMU_FLOATS, 3, "aclnnAdaptiveAvgPool2d note: FP32/FP16/BF16"));
  EMU_CHK(emu_need_same_dtype(fn, "out", 2, out, self, "self"));
  EMU_CHK(need_nchw4(fn, "self", 0, self, "aclnnAdaptiveAvgPool2d note: self NCL/NCHW"));
  EMU_CHK(need_nchw4(fn, "out", 2, out, "aclnnAdaptiveAvgPool2d note: self NCL/NCHW"));
  EMU_CHK(emu_need_array(fn, "outputSize", 1, outputSize, 1));
  EMU_CHK(need_len(fn, "outputSize", 1, outputSize, l2, 1, "note: length exactly 2 [Hout, Wout]"));
  EMU_CHK(need_vals(fn, "outputSize", 1, outputSize, 1, INT64_MAX, "at least one output cell"));
  /* the bin boundaries of an uneven split are not in the fact table: only exact
   * divisions, where every reading agrees, are accepted */
  if (self->dims[2] % outputSize->v[0] || self->dims[3] % outputSize->v[1])
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "outputSize", 1,
                         "[%lld, %lld] does not divide the input [%lld, %lld]; the fact table "
                         "does not give the bin boundaries of an uneven split",
                         (long long)outputSize->v[0], (long long)outputSize->v[1],
                         (long long)self->dims[2], (long long)self->dims[3]);
  od[0] = self->dims[0]; od[1] = self->dims[1]; od[2] = outputSize->v[0]; od[3] = outputSize->v[1];
  EMU_CHK(emu_need_shape(fn, "out", 2, out, od, 4, "[N, C, Hout, Wout]"));
  e = emu_exec_new("aclnnAdaptiveAvgPool2d", 0, run_pool);
  e->t[0] = (aclTensor *)self; e->t[1] = out; e->nt = 2;
  e->iv[0] = e->iv[2] = self->dims[2] / od[2];
  e->iv[1] = e->iv[3] = self->dims[3] / od[3];
  e->iv[8] = 1;
  return emu_phase1_done(e, workspaceSize, executor);
}
EMU_PHASE2(aclnnAdaptiveAvgPool2d)

/* GlobalAveragePool: mean over every dim after the first two */
static aclnnStatus run_gap(aclOpExecutor *e) {
  aclTensor *x = e->t[0], *y = e->t[1];
  int64_t nc = x->dims[0] * x->dims[1], sp = emu_numel(x) / (nc ? nc : 1), i, j;
  double *X = emu_load(x), *Y = emu_xmalloc((size_t)nc * sizeof *Y);
  for (i = 0; i < nc; i++) {
    double acc = 0;
    for (j = 0; j < sp; j++) acc += X[i * sp + j];
    Y[i] = acc / (double)sp;
  }
  emu_store(y, Y);
  free(X); free(Y);
  return ACLNN_SUCCESS;
}

aclnnStatus aclnnGlobalAveragePoolGetWorkspaceSize(const aclTensor *self, aclTensor *out,
                                                   uint64_t *workspaceSize,
                                                   aclOpExecutor **executor) {
  static const char *fn = "aclnnGlobalAveragePoolGetWorkspaceSize";
  static const char *F = "aclnnGlobalAveragePool note: self 4-8 D ND/NCHW/NCDHW";
  aclOpExecutor *e;
  int64_t od[EMU_MAXDIM];
  int i;
  EMU_CHK(emu_phase1_outs(fn, workspaceSize, 2, executor));
  EMU_CHK(emu_need_tensor(fn, "self", 0, self, 1));
  EMU_CHK(emu_need_tensor(fn, "out", 1, out, 1));
  /* note: "self 4-8 D ND/NCHW/NCDHW FLOAT,FLOAT16,DOUBLE,BF16; out keeps dims with
   * spatial dims = 1; same format as self" */
  EMU_CHK(emu_need_dtype(fn, "self", 0, self, F_F16_D_BF16, 4,
                         "aclnnGlobalAveragePool note: FLOAT,FLOAT16,DOUBLE,BF16"));
  EMU_CHK(emu_need_same_dtype(fn, "out", 1, out, self, "self"));
  EMU_CHK(emu_need_rank(fn, "self", 0, self, 4, 8, F));
  if (!(self->format == ACL_FORMAT_ND || (self->ndim == 4 && self->format == ACL_FORMAT_NCHW) ||
        (self->ndim == 5 && self->format == ACL_FORMAT_NCDHW)))
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "self", 0,
                         "format is %s for a %d-D tensor (%s)", emu_format_name(self->format),
                         self->ndim, F);
  if (out->format != self->format)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "out", 1,
                         "format %s differs from self's %s (note: same format as self)",
                         emu_format_name(out->format), emu_format_name(self->format));
  for (i = 0; i < self->ndim; i++) od[i] = i < 2 ? self->dims[i] : 1;
  EMU_CHK(emu_need_shape(fn, "out", 1, out, od, self->ndim, "note: out keeps dims with spatial dims = 1"));
  e = emu_exec_new("aclnnGlobalAveragePool", 0, run_gap);
  e->t[0] = (aclTensor *)self; e->t[1] = out; e->nt = 2;
  return emu_phase1_done(e, workspaceSize, executor);
}
EMU_PHASE2(aclnnGlobalAveragePool)

/* ===== aclnnUpsampleNearest2d =================================================== */
static aclnnStatus run_nearest(aclOpExecutor *e) {
  aclTensor *x = e->t[0], *y = e->t[1];
  int64_t NC = x->dims[0] * x->dims[1], H = x->dims[2], W = x->dims[3], Ho = y->dims[2];
  int64_t Wo = y->dims[3], c, i, j;
  double *X = emu_load(x), *Y = emu_xmalloc((size_t)emu_numel(y) * sizeof *Y);
  for (c = 0; c < NC; c++)
    for (i = 0; i < Ho; i++)
      for (j = 0; j < Wo; j++) {
        /* note: "h_src = min(floor(h_dst * H_in/H_out), H_in-1)" (exact integer floor) */
        int64_t si = i * H / Ho, sj = j * W / Wo;
        if (si > H - 1) si = H - 1;
        if (sj > W - 1) sj = W - 1;
        Y[(c * Ho + i) * Wo + j] = X[(c * H + si) * W + sj];
      }
  emu_store(y, Y);
  free(X); free(Y);
  return ACLNN_SUCCESS;
}

aclnnStatus aclnnUpsampleNearest2dGetWorkspaceSize(const aclTensor *self,
                                                   const aclIntArray *outputSize, aclTensor *out,
                                                   uint64_t *workspaceSize,
                                                   aclOpExecutor **executor) {
  static const char *fn = "aclnnUpsampleNearest2dGetWorkspaceSize";
  static const int l2[] = {2};
  aclOpExecutor *e;
  int64_t od[4];
  EMU_CHK(emu_phase1_outs(fn, workspaceSize, 3, executor));
  EMU_CHK(emu_need_tensor(fn, "self", 0, self, 1));
  EMU_CHK(emu_need_array(fn, "outputSize", 1, outputSize, 1));
  EMU_CHK(emu_need_tensor(fn, "out", 2, out, 1));
  /* note: "910/310P: no FLOAT32/BF16" - on A2/A3 the float dtypes */
  EMU_CHK(emu_need_dtype(fn, "self", 0, self, EMU_FLOATS, 3,
                         "aclnnUpsampleNearest2d note: 910/310P lack FLOAT32/BF16; A2/A3 FLOAT, "
                         "FLOAT16, BFLOAT16"));
  EMU_CHK(emu_need_same_dtype(fn, "out", 2, out, self, "self"));
  /* note: "self 4-D NCHW/NHWC" - the emulator computes NCHW only */
  if (self->ndim != 4 || self->format != ACL_FORMAT_NCHW)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "self", 0,
                         "is %d-D %s; the note allows 4-D NCHW/NHWC and the emulator implements "
                         "NCHW only", self->ndim, emu_format_name(self->format));
  EMU_CHK(emu_need_format(fn, "out", 2, out, ACL_FORMAT_NCHW, "same format as self"));
  /* note: "outputSize IntArray len 2 (non-zero)" */
  EMU_CHK(need_len(fn, "outputSize", 1, outputSize, l2, 1, "note: outputSize len 2"));
  EMU_CHK(need_vals(fn, "outputSize", 1, outputSize, 1, INT64_MAX, "note: non-zero"));
  od[0] = self->dims[0]; od[1] = self->dims[1]; od[2] = outputSize->v[0]; od[3] = outputSize->v[1];
  EMU_CHK(emu_need_shape(fn, "out", 2, out, od, 4, "[N, C, outputSize[0], outputSize[1]]"));
  e = emu_exec_new("aclnnUpsampleNearest2d", 0, run_nearest);
  e->t[0] = (aclTensor *)self; e->t[1] = out; e->nt = 2;
  return emu_phase1_done(e, workspaceSize, executor);
}
EMU_PHASE2(aclnnUpsampleNearest2d)
