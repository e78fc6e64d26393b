/* migc CPU runtime: kernels of run-time length (runtime/dynamic.c). See
 * mg_runtime.h for the rules every kernel keeps: C99, no allocation, no mutable
 * globals.
 *
 * A generated model plans a value whose length is known only at run time at its
 * largest shape and keeps its elements where the largest shape puts them (the
 * "max layout" of codegen/c/cg_dynamic.c): these kernels write such outputs and
 * return the actual length. */
#ifndef MG_RT_DYNAMIC_H
#define MG_RT_DYNAMIC_H
#include "mg_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* NonZero of the elements of x (dtype t, C order over shape, rank >= 1): the
 * coordinate along axis d of the i-th nonzero element (NaN counts, -0.0 does not)
 * goes to out[d * row_stride + i]. Returns the count; row_stride must be at least
 * the element count. */
int64_t mg_nonzero(mg_rt_dtype t, int rank, const int64_t *shape, const void *x, int64_t *out,
                   int64_t row_stride);

/* ONNX Slice along one axis of run-time length n: start, end (negative ones count
 * from n, then clamped) and step (nonzero). Writes the first index to *first and
 * returns the count. */
int64_t mg_slice_range(int64_t n, int64_t start, int64_t end, int64_t step, int64_t *first);

/* count rows of row_bytes each: dst row i = src row first + i * step. */
void mg_copy_rows(size_t row_bytes, int64_t count, const void *src, int64_t first, int64_t step, void *dst);

/* NonMaxSuppression (ONNX): per batch b and class k, boxes by descending score
 * (ties: lower index first), above score_thr when has_thr, each dropped when its
 * IoU with an already kept box of the same batch and class exceeds iou (computed
 * in double, as the reference interpreter does), at most max_per_class kept.
 * Box i of batch b is at boxes + (b * box_stride + i * 4), its score for class k
 * at scores + ((b * classes + k) * score_stride + i); corners (y1 x1 y2 x2, any
 * order) or, with center, (x y w h). Writes [count, 3] rows (b, k, i) to out, at
 * most cap of them, and returns the count (-1 when cap was too small). scratch:
 * mg_nms_scratch(n) floats. */
size_t mg_nms_scratch(int64_t n);
int64_t mg_nms(int64_t batches, int64_t classes, int64_t n, const float *boxes, int64_t box_stride,
               const float *scores, int64_t score_stride, int64_t max_per_class, float iou, int has_thr,
               float score_thr, int center, int64_t *out, int64_t cap, float *scratch);

#ifdef __cplusplus
}
#endif
#endif
