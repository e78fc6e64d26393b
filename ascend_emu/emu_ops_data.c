/* aclnn data-movement ops of the strict emulator (Cat, ConstantPadNd, Expand,
 * InplaceCopy, Permute, Slice) and the Mean reduction. Data movement copies the
 * elements' bytes, so where a note lists no dtypes every dtype the emulator holds is
 * accepted. Facts: ../shared/aclnn-api.json, Atlas A2/A3 column. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "emu_internal.h"

/* copy src (read through view vs) into dst (written through view vd) */
static void copy_views(const aclTensor *src, const emu_view *vs, aclTensor *dst,
                       const emu_view *vd) {
  int64_t n = 1;
  int i;
  char *raw;
  for (i = 0; i < vs->nd; i++) n *= vs->dims[i];
  raw = emu_xmalloc((size_t)n * emu_dtype_size(src->dtype));
  emu_gather(src, vs, raw);
  emu_scatter_view(dst, vd, raw);
  free(raw);
}

/* t[0] -> t[1] through the broadcast of t[0] to t[1]'s shape (Expand, InplaceCopy) */
static aclnnStatus run_bcast_copy(aclOpExecutor *e) {
  emu_view vs, vd = emu_view_of(e->t[1]);
  emu_view_bcast(e->t[0], e->t[1]->dims, e->t[1]->ndim, &vs);
  copy_views(e->t[0], &vs, e->t[1], &vd);
  return ACLNN_SUCCESS;
}

static aclOpExecutor *exec2(const char *p2, const aclTensor *a, aclTensor *b, emu_run_fn run) {
  aclOpExecutor *e = emu_exec_new(p2, 0, run);
  e->t[0] = (aclTensor *)a; e->t[1] = b; e->nt = 2;
  return e;
}

/* ===== aclnnCat ================================================================== */
static aclnnStatus run_cat(aclOpExecutor *e) {
  aclTensor *y = e->t[e->nt - 1];
  int d = (int)e->iv[0], i;
  int64_t start = 0;
  for (i = 0; i < e->nt - 1; i++) {
    aclTensor *x = e->t[i];
    emu_view vs = emu_view_of(x), vd = emu_view_of(y);
    vd.offset += start * vd.strides[d];
    vd.dims[d] = x->dims[d];
    copy_views(x, &vs, y, &vd);
    start += x->dims[d];
  }
  return ACLNN_SUCCESS;
}

aclnnStatus aclnnCatGetWorkspaceSize(const aclTensorList *tensors, int64_t dim, aclTensor *out,
                                     uint64_t *workspaceSize, aclOpExecutor **executor) {
  static const char *fn = "aclnnCatGetWorkspaceSize";
  aclOpExecutor *e;
  aclTensor *t0;
  int64_t od[EMU_MAXDIM];
  uint64_t i;
  int k, n;
  EMU_CHK(emu_phase1_outs(fn, workspaceSize, 3, executor));
  EMU_CHK(emu_check_obj(fn, "tensors", 0, tensors, EK_TENSORLIST, 1));
  EMU_CHK(emu_need_tensor(fn, "out", 2, out, 1));
  if (tensors->n > EMU_MAXT - 1)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "tensors", 0,
                         "has %llu tensors; the emulator takes at most %d",
                         (unsigned long long)tensors->n, EMU_MAXT - 1);
  t0 = tensors->v[0];
  n = t0->ndim;
  /* aclnnCat note: "tensors is aclTensorList (1-8 D each), dim int64 in [-n, n-1]; dtype
   * promotion across list" - the promotion table is not given: one dtype */
  for (i = 0; i < tensors->n; i++) {
    aclTensor *t = tensors->v[i];
    char nm[40];
    snprintf(nm, sizeof nm, "tensors[%llu]", (unsigned long long)i);
    EMU_CHK(emu_need_tensor(fn, nm, 0, t, 1));
    EMU_CHK(emu_need_rank(fn, nm, 0, t, 1, 8, "aclnnCat note: 1-8 D each"));
    if (t->ndim != n)
      return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, nm, 0, "has %d dims, tensors[0] has %d",
                           t->ndim, n);
    EMU_CHK(emu_need_same_dtype(fn, nm, 0, t, t0, "tensors[0]"));
  }
  if (dim < -n || dim >= n)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "dim", 1,
                         "is %lld, outside [-%d, %d] (note: dim in [-n, n-1])", (long long)dim, n,
                         n - 1);
  if (dim < 0) dim += n;
  for (k = 0; k < n; k++) od[k] = k == dim ? 0 : t0->dims[k];
  for (i = 0; i < tensors->n; i++) {
    aclTensor *t = tensors->v[i];
    for (k = 0; k < n; k++)
      if (k != dim && t->dims[k] != od[k])
        return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "tensors", 0,
                             "tensors[%llu] dim %d is %lld, tensors[0]'s is %lld (only dim %lld "
                             "may differ)", (unsigned long long)i, k, (long long)t->dims[k],
                             (long long)od[k], (long long)dim);
    od[dim] += t->dims[dim];
  }
  EMU_CHK(emu_need_same_dtype(fn, "out", 2, out, t0, "tensors[0]"));
  EMU_CHK(emu_need_shape(fn, "out", 2, out, od, n, "the tensors joined along dim"));
  e = emu_exec_new("aclnnCat", 0, run_cat);
  for (i = 0; i < tensors->n; i++) e->t[i] = tensors->v[i];
  e->t[tensors->n] = out;
  e->nt = (int)tensors->n + 1;
  e->iv[0] = dim;
  return emu_phase1_done(e, workspaceSize, executor);
}
EMU_PHASE2(aclnnCat)

/* ===== aclnnConstantPadNd ======================================================== */
static aclnnStatus run_pad(aclOpExecutor *e) {
  aclTensor *x = e->t[0], *y = e->t[1];
  int64_t n = emu_numel(y), k;
  size_t es = emu_dtype_size(y->dtype);
  char *fill = emu_xmalloc((size_t)n * es);
  emu_view vs = emu_view_of(x), vd = emu_view_of(y);
  int d;
  for (k = 0; k < n; k++) emu_put(fill + (size_t)k * es, y->dtype, e->dv[0]);
  emu_scatter(y, fill);
  free(fill);
  for (d = 0; d < x->ndim; d++) { vd.offset += e->iv[d] * vd.strides[d]; vd.dims[d] = x->dims[d]; }
  copy_views(x, &vs, y, &vd);
  return ACLNN_SUCCESS;
}

aclnnStatus aclnnConstantPadNdGetWorkspaceSize(const aclTensor *self, const aclIntArray *pad,
                                               const aclScalar *value, aclTensor *out,
                                               uint64_t *workspaceSize, aclOpExecutor **executor) {
  static const char *fn = "aclnnConstantPadNdGetWorkspaceSize";
  aclOpExecutor *e;
  int64_t od[EMU_MAXDIM], before[EMU_MAXDIM];
  int d, r;
  EMU_CHK(emu_phase1_outs(fn, workspaceSize, 4, executor));
  EMU_CHK(emu_need_tensor(fn, "self", 0, self, 1));
  EMU_CHK(emu_need_array(fn, "pad", 1, pad, 1));
  EMU_CHK(emu_need_scalar(fn, "value", 2, value, 1));
  EMU_CHK(emu_need_tensor(fn, "out", 3, out, 1));
  EMU_CHK(emu_need_same_dtype(fn, "out", 3, out, self, "self"));
  r = self->ndim;
  /* aclnnConstantPadNd note: "pad IntArray, even length <= 2*rank, ordered from LAST dim
   * backwards: [lastBegin, lastEnd, prevBegin, prevEnd, ...] (torch F.pad order)" */
  if (pad->n % 2 || (int)pad->n > 2 * r)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "pad", 1,
                         "has %llu elements; the note wants an even length <= 2*rank = %d",
                         (unsigned long long)pad->n, 2 * r);
  for (d = 0; d < r; d++) {
    int j = r - 1 - d; /* pairs from the last dim backwards */
    int64_t b = 2 * j < (int)pad->n ? pad->v[2 * j] : 0, a = 2 * j < (int)pad->n ? pad->v[2 * j + 1] : 0;
    /* negative pads (cropping) are not described by the note */
    if (b < 0 || a < 0)
      return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "pad", 1,
                           "pads dim %d by %lld, %lld; the note does not describe negative pads",
                           d, (long long)b, (long long)a);
    before[d] = b;
    od[d] = self->dims[d] + b + a;
  }
  EMU_CHK(emu_need_shape(fn, "out", 3, out, od, r, "self padded, pad ordered from the last dim "
                         "backwards [lastBegin, lastEnd, prevBegin, prevEnd, ...]"));
  e = exec2("aclnnConstantPadNd", self, out, run_pad);
  for (d = 0; d < r; d++) e->iv[d] = before[d];
  e->dv[0] = value->v;
  return emu_phase1_done(e, workspaceSize, executor);
}
EMU_PHASE2(aclnnConstantPadNd)

/* ===== aclnnExpand / aclnnInplaceCopy ============================================ */
aclnnStatus aclnnExpandGetWorkspaceSize(const aclTensor *self, const aclIntArray *size,
                                        aclTensor *out, uint64_t *workspaceSize,
                                        aclOpExecutor **executor) {
  static const char *fn = "aclnnExpandGetWorkspaceSize";
  static const aclDataType ok[8] = {ACL_FLOAT16, ACL_FLOAT, ACL_UINT8, ACL_INT8, ACL_INT32,
                                    ACL_INT64, ACL_BOOL, ACL_BF16};
  uint64_t i;
  EMU_CHK(emu_phase1_outs(fn, workspaceSize, 3, executor));
  EMU_CHK(emu_need_tensor(fn, "self", 0, self, 1));
  EMU_CHK(emu_need_array(fn, "size", 1, size, 1));
  EMU_CHK(emu_need_tensor(fn, "out", 2, out, 1));
  EMU_CHK(emu_need_dtype(fn, "self", 0, self, ok, 8, "aclnnExpand note: FLOAT16,FLOAT,UINT8,INT8,"
                         "INT32,INT64,BOOL,BF16"));
  EMU_CHK(emu_need_same_dtype(fn, "out", 2, out, self, "self"));
  /* aclnnExpand note: "size IntArray with len >= self.dim; self dims must equal size or
   * be 1" */
  if ((int)size->n < self->ndim || size->n > EMU_MAXDIM)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "size", 1,
                         "has %llu elements; the note wants len >= self.dim = %d (at most 8)",
                         (unsigned long long)size->n, self->ndim);
  for (i = 0; i < size->n; i++) {
    int k = (int)i - ((int)size->n - self->ndim);
    if (size->v[i] < 0 || (k >= 0 && self->dims[k] != size->v[i] && self->dims[k] != 1))
      return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "size", 1,
                           "element %llu is %lld but self's dim is %lld (note: self dims must "
                           "equal size or be 1; -1 is not described)", (unsigned long long)i,
                           (long long)size->v[i], (long long)(k >= 0 ? self->dims[k] : 1));
  }
  EMU_CHK(emu_need_shape(fn, "out", 2, out, size->v, (int)size->n, "size"));
  return emu_phase1_done(exec2("aclnnExpand", self, out, run_bcast_copy), workspaceSize, executor);
}
EMU_PHASE2(aclnnExpand)

aclnnStatus aclnnInplaceCopyGetWorkspaceSize(aclTensor *selfRef, const aclTensor *src,
                                             uint64_t *workspaceSize, aclOpExecutor **executor) {
  static const char *fn = "aclnnInplaceCopyGetWorkspaceSize";
  emu_view v;
  char a[160], b[160];
  EMU_CHK(emu_phase1_outs(fn, workspaceSize, 2, executor));
  EMU_CHK(emu_need_tensor(fn, "selfRef", 0, selfRef, 1));
  EMU_CHK(emu_need_tensor(fn, "src", 1, src, 1));
  /* aclnnInplaceCopy note: "copies src into selfRef (broadcast allowed); both may be
   * non-contiguous" - a dtype conversion is not described: one dtype */
  EMU_CHK(emu_need_same_dtype(fn, "src", 1, src, selfRef, "selfRef"));
  if (emu_view_bcast(src, selfRef->dims, selfRef->ndim, &v))
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "src", 1,
                         "shape %s does not broadcast to selfRef's %s (note: broadcast allowed)",
                         emu_shape_str(src->dims, src->ndim, a, sizeof a),
                         emu_shape_str(selfRef->dims, selfRef->ndim, b, sizeof b));
  return emu_phase1_done(exec2("aclnnInplaceCopy", src, selfRef, run_bcast_copy), workspaceSize,
                         executor);
}
EMU_PHASE2(aclnnInplaceCopy)

/* ===== aclnnPermute ============================================================== */
static aclnnStatus run_permute(aclOpExecutor *e) {
  aclTensor *x = e->t[0], *y = e->t[1];
  emu_view vs = emu_view_of(x), vd = emu_view_of(y);
  int i;
  for (i = 0; i < x->ndim; i++) {
    vs.dims[i] = x->dims[e->iv[i]];
    vs.strides[i] = x->strides[e->iv[i]];
  }
  copy_views(x, &vs, y, &vd);
  return ACLNN_SUCCESS;
}

aclnnStatus aclnnPermuteGetWorkspaceSize(const aclTensor *self, const aclIntArray *dims,
                                         aclTensor *out, uint64_t *workspaceSize,
                                         aclOpExecutor **executor) {
  static const char *fn = "aclnnPermuteGetWorkspaceSize";
  aclOpExecutor *e;
  int64_t od[EMU_MAXDIM];
  int seen[EMU_MAXDIM] = {0}, i;
  EMU_CHK(emu_phase1_outs(fn, workspaceSize, 3, executor));
  EMU_CHK(emu_need_tensor(fn, "self", 0, self, 1));
  EMU_CHK(emu_need_array(fn, "dims", 1, dims, 1));
  EMU_CHK(emu_need_tensor(fn, "out", 2, out, 1));
  /* aclnnPermute note: "dims IntArray; out dtype == self; <=8 dims" */
  EMU_CHK(emu_need_same_dtype(fn, "out", 2, out, self, "self"));
  if ((int)dims->n != self->ndim)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "dims", 1,
                         "has %llu elements for a %d-D self; a permutation names every dim once",
                         (unsigned long long)dims->n, self->ndim);
  for (i = 0; i < self->ndim; i++) {
    /* negative dims are not described by the note */
    if (dims->v[i] < 0 || dims->v[i] >= self->ndim || seen[dims->v[i]]++)
      return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "dims", 1,
                           "element %d is %lld; dims must be a permutation of 0..%d", i,
                           (long long)dims->v[i], self->ndim - 1);
    od[i] = self->dims[dims->v[i]];
  }
  EMU_CHK(emu_need_shape(fn, "out", 2, out, od, self->ndim, "self's dims permuted"));
  e = exec2("aclnnPermute", self, out, run_permute);
  for (i = 0; i < self->ndim; i++) e->iv[i] = dims->v[i];
  return emu_phase1_done(e, workspaceSize, executor);
}
EMU_PHASE2(aclnnPermute)

/* ===== aclnnSlice ================================================================ */
static aclnnStatus run_slice(aclOpExecutor *e) {
  aclTensor *x = e->t[0], *y = e->t[1];
  emu_view vs = emu_view_of(x), vd = emu_view_of(y);
  int d = (int)e->iv[0];
  vs.offset += e->iv[1] * vs.strides[d];
  vs.strides[d] *= e->iv[2];
  vs.dims[d] = y->dims[d];
  copy_views(x, &vs, y, &vd);
  return ACLNN_SUCCESS;
}

aclnnStatus aclnnSliceGetWorkspaceSize(const aclTensor *self, int64_t dim, int64_t start,
                                       int64_t end, int64_t step, aclTensor *out,
                                       uint64_t *workspaceSize, aclOpExecutor **executor) {
  static const char *fn = "aclnnSliceGetWorkspaceSize";
  static const aclDataType ok[8] = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_INT32, ACL_INT64,
                                    ACL_INT8, ACL_UINT8, ACL_BOOL};
  aclOpExecutor *e;
  int64_t od[EMU_MAXDIM], N;
  int i;
  EMU_CHK(emu_phase1_outs(fn, workspaceSize, 6, executor));
  EMU_CHK(emu_need_tensor(fn, "self", 0, self, 1));
  EMU_CHK(emu_need_tensor(fn, "out", 5, out, 1));
  /* aclnnSlice note: "1-8 D; dtypes FLOAT,FLOAT16,BF16,INT32,INT64,INT8,UINT8,BOOL" */
  EMU_CHK(emu_need_dtype(fn, "self", 0, self, ok, 8, "aclnnSlice note: FLOAT,FLOAT16,BF16,INT32,"
                         "INT64,INT8,UINT8,BOOL"));
  EMU_CHK(emu_need_rank(fn, "self", 0, self, 1, 8, "aclnnSlice note: 1-8 D"));
  EMU_CHK(emu_need_same_dtype(fn, "out", 5, out, self, "self"));
  /* a negative dim is not described by the note */
  if (dim < 0 || dim >= self->ndim)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "dim", 1,
                         "is %lld; the emulator takes 0..%d (negative dims are not described)",
                         (long long)dim, self->ndim - 1);
  /* note: "step (>0 only, no negative step)" */
  if (step <= 0)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "step", 4,
                         "is %lld; the note allows step > 0 only", (long long)step);
  /* note: "start<-N =>0, start>=N =>N, else (start+N)%N; end<-N => start, end>=N => N,
   * else max(start,(end+N)%N); out.shape[dim] = floor((end-start+step-1)/step)" */
  N = self->dims[dim];
  start = start < -N ? 0 : start >= N ? N : (start + N) % (N ? N : 1);
  end = end < -N ? start : end >= N ? N : (end + N) % (N ? N : 1) > start ? (end + N) % N : start;
  for (i = 0; i < self->ndim; i++) od[i] = self->dims[i];
  od[dim] = (end - start + step - 1) / step;
  EMU_CHK(emu_need_shape(fn, "out", 5, out, od, self->ndim,
                         "note: out.shape[dim] = floor((end-start+step-1)/step) after clamping"));
  e = exec2("aclnnSlice", self, out, run_slice);
  e->iv[0] = dim; e->iv[1] = start; e->iv[2] = step;
  return emu_phase1_done(e, workspaceSize, executor);
}
EMU_PHASE2(aclnnSlice)

/* ===== aclnnMean ================================================================= */
static aclnnStatus run_mean(aclOpExecutor *e) {
  aclTensor *x = e->t[0], *y = e->t[1];
  int64_t n = emu_numel(x), cnt = 1, k, idx[EMU_MAXDIM] = {0}, o;
  int d;
  double *X = emu_load(x), *Y = emu_xmalloc((size_t)emu_numel(y) * sizeof *Y);
  for (d = 0; d < x->ndim; d++) if (e->iv[d]) cnt *= x->dims[d];
  for (k = 0; k < n; k++) {
    for (o = 0, d = 0; d < x->ndim; d++) o = o * (e->iv[d] ? 1 : x->dims[d]) + (e->iv[d] ? 0 : idx[d]);
    Y[o] += X[k];
    for (d = x->ndim - 1; d >= 0; d--) { if (++idx[d] < x->dims[d]) break; idx[d] = 0; }
  }
  for (k = 0; k < emu_numel(y); k++) Y[k] /= (double)cnt;
  emu_store(y, Y);
  free(X); free(Y);
  return ACLNN_SUCCESS;
}

/* red[d] = 1 for each axis of dim (note: "no duplicates"; negative dims are not
 * described); 0 or the status (reported). */
static int reduced_dims(const char *fn, const aclTensor *self, const aclIntArray *dim, int *red) {
  for (uint64_t k = 0; k < dim->n; k++)
    if (dim->v[k] < 0 || dim->v[k] >= self->ndim || red[dim->v[k]]++)
      return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "dim", 1,
                           "element %llu is %lld; dims are 0..%d without duplicates (note: no "
                           "duplicates; negative dims are not described)", (unsigned long long)k,
                           (long long)dim->v[k], self->ndim - 1);
  return 0;
}

/* out must be self with the red axes dropped, or kept as 1 (keepDim). */
static int reduced_out(const char *fn, const aclTensor *self, const aclTensor *out, const int *red, bool keepDim) {
  int64_t od[EMU_MAXDIM];
  int nd = 0;
  for (int i = 0; i < self->ndim; i++)
    if (!red[i]) od[nd++] = self->dims[i];
    else if (keepDim) od[nd++] = 1;
  return emu_need_shape(fn, "out", 4, out, od, nd, keepDim ? "self with dim reduced to 1 (keepDim)"
                        : "self without the reduced dims");
}

aclnnStatus aclnnMeanGetWorkspaceSize(const aclTensor *self, const aclIntArray *dim, bool keepDim,
                                      aclDataType dtype, aclTensor *out, uint64_t *workspaceSize,
                                      aclOpExecutor **executor) {
  static const char *fn = "aclnnMeanGetWorkspaceSize";
  aclOpExecutor *e;
  int red[EMU_MAXDIM] = {0}, i;
  EMU_CHK(emu_phase1_outs(fn, workspaceSize, 5, executor));
  EMU_CHK(emu_need_tensor(fn, "self", 0, self, 1));
  EMU_CHK(emu_need_array(fn, "dim", 1, dim, 1));
  EMU_CHK(emu_need_tensor(fn, "out", 4, out, 1));
  EMU_CHK(emu_need_dtype(fn, "self", 0, self, EMU_FLOATS, 3,
                         "the note lists no dtypes; the emulator takes FLOAT, FLOAT16, BFLOAT16"));
  /* aclnnMean note: "dtype aclDataType of output (must be castable to out dtype)" - the
   * cast rule is not given, so dtype must be out's dtype; no promotion from self */
  if (dtype != out->dtype || out->dtype != self->dtype)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "dtype", 3,
                         "is %s with out %s and self %s; the emulator takes one dtype for all "
                         "three (the note's cast rule is not given)", emu_dtype_name(dtype),
                         emu_dtype_name(out->dtype), emu_dtype_name(self->dtype));
  /* note: "dim aclIntArray (no duplicates)"; an empty list or a negative dim is not
   * described */
  if (dim->n == 0)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "dim", 1,
                         "is empty; the note does not say what an empty dim list reduces");
  EMU_CHK(reduced_dims(fn, self, dim, red));
  EMU_CHK(reduced_out(fn, self, out, red, keepDim));
  e = exec2("aclnnMean", self, out, run_mean);
  for (i = 0; i < self->ndim; i++) e->iv[i] = red[i];
  return emu_phase1_done(e, workspaceSize, executor);
}
EMU_PHASE2(aclnnMean)

/* ===== aclnnMeanV2 ================================================================
 * note: "no dtype arg (out dtype == self); noopWithEmptyAxes: false => empty dim
 * reduces all axes, true => identity (matches ONNX noop_with_empty_axes)" */
aclnnStatus aclnnMeanV2GetWorkspaceSize(const aclTensor *self, const aclIntArray *dim, bool keepDim,
                                        bool noopWithEmptyAxes, aclTensor *out, uint64_t *workspaceSize,
                                        aclOpExecutor **executor) {
  static const char *fn = "aclnnMeanV2GetWorkspaceSize";
  aclOpExecutor *e;
  int red[EMU_MAXDIM] = {0}, i;
  EMU_CHK(emu_phase1_outs(fn, workspaceSize, 5, executor));
  EMU_CHK(emu_need_tensor(fn, "self", 0, self, 1));
  EMU_CHK(emu_need_array(fn, "dim", 1, dim, 1));
  EMU_CHK(emu_need_tensor(fn, "out", 4, out, 1));
  EMU_CHK(emu_need_dtype(fn, "self", 0, self, EMU_FLOATS, 3,
                         "the note lists no dtypes; the emulator takes FLOAT, FLOAT16, BFLOAT16"));
  EMU_CHK(emu_need_same_dtype(fn, "out", 4, out, self, "self (note: out dtype == self)"));
  EMU_CHK(reduced_dims(fn, self, dim, red));
  if (!dim->n) /* empty: every axis, or none (noopWithEmptyAxes) */
    for (i = 0; i < self->ndim; i++) red[i] = !noopWithEmptyAxes;
  EMU_CHK(reduced_out(fn, self, out, red, keepDim));
  e = exec2("aclnnMeanV2", self, out, run_mean);
  for (i = 0; i < self->ndim; i++) e->iv[i] = red[i];
  return emu_phase1_done(e, workspaceSize, executor);
}
EMU_PHASE2(aclnnMeanV2)
