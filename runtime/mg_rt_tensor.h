/* migc CPU runtime: the tensor kernel family (see mg_runtime.h for the rules every
 * kernel keeps: C99, no allocation, no mutable globals).
 *
 * Data movement (tensor.c) works on element bytes, so every fixed-size dtype moves
 * bit-exact; the code generator computes shapes, strides, offsets and index maps at
 * conversion time and passes them as constant arrays. Reductions and normalisations
 * (reduce.c) have a fast float32 path over [outer, n, inner] views and a generic
 * path for every dtype (floats computed in double and rounded once on store,
 * integers per the reference interpreter: sums/products/extrema wrap in int64,
 * Mean/L2/LogSum/LogSumExp go through double and truncate).
 *
 * Strides and offsets are in elements, not bytes. Indices read at run time
 * (Gather, scatter, OneHot, ...) that fall outside their axis after negative
 * wrapping are undefined in ONNX; these kernels clamp them into range (and OneHot
 * writes an all-off row), so no kernel ever reads or writes out of bounds. */
#ifndef MG_RT_TENSOR_H
#define MG_RT_TENSOR_H
#include "mg_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------ element access */

/* Element i of an array of dtype t as double (bool 0/1, halves widened). */
double mg_tensor_load_f64(mg_rt_dtype t, const void *base, int64_t i);
/* Element i as int64: integers exactly (uint64 as its bit pattern), floats
 * truncated toward zero, saturating, NaN as 0. */
int64_t mg_tensor_load_i64(mg_rt_dtype t, const void *base, int64_t i);
/* Stores v into element i: floats round to nearest even; integers take the
 * int64 truncation of v (saturating, NaN as 0) wrapped to their width; bool v != 0. */
void mg_tensor_store_f64(mg_rt_dtype t, void *base, int64_t i, double v);
/* Stores v wrapped to t's width (bool: v != 0; floats: the nearest value). */
void mg_tensor_store_i64(mg_rt_dtype t, void *base, int64_t i, int64_t v);
/* Whether t is computed as floating point (f16, bf16, f32, f64). */
int mg_tensor_is_float(mg_rt_dtype t);

/* ------------------------------------------------------ data movement */

/* dst[coord . dst_strides] = src[coord . src_strides] for every coord in shape
 * (rank dims; rank 0 copies one element). Strides may be 0 (broadcast) or negative
 * (reversal); src and dst must not overlap unless they are equal with equal
 * strides. Fast cases: a contiguous innermost run on both sides is one memcpy; an
 * innermost output run read with stride != 1 while another axis reads with stride
 * 1 (a transpose that moves the last axis) goes through cache-blocked 2-D tiles. */
void mg_copy_nd(size_t elem_size, int rank, const int64_t *shape, const void *src,
                const int64_t *src_strides, void *dst, const int64_t *dst_strides);

/* bytes bytes from src to dst; nothing when dst == src (in-place ops). */
void mg_copy_bytes(void *dst, const void *src, size_t bytes);

/* Sets the n elements of dst to *value (elem_size bytes). */
void mg_fill(size_t elem_size, int64_t n, void *dst, const void *value);

/* dst (C order over shape) from src through per-axis offset maps: element coord
 * reads src[sum_d maps_d[coord[d]]], where maps_d starts at maps + shape[0] + ...
 * + shape[d-1] and holds element offsets (index times stride). Pad's reflect, edge
 * and wrap modes. src and dst must not overlap. */
void mg_gather_maps(size_t elem_size, int rank, const int64_t *shape, const void *src,
                    const int64_t *maps, void *dst);

/* Gather along an axis: src is [outer, axis_n, inner], indices holds n_idx int32
 * (indices_i64 == 0) or int64 values, dst is [outer, n_idx, inner]. */
void mg_gather(size_t elem_size, int64_t outer, int64_t axis_n, int64_t inner, const void *src,
               const void *indices, int indices_i64, int64_t n_idx, void *dst);

/* GatherElements: for each coord of the indices tensor (C order over idx_shape,
 * rank dims), dst[k] = data[coord . data_strides with coord[axis] replaced by the
 * index]; axis_n is data's length along axis. */
void mg_gather_elements(size_t elem_size, int rank, const int64_t *idx_shape,
                        const int64_t *data_strides, int axis, int64_t axis_n, const void *data,
                        const void *indices, int indices_i64, void *dst);

/* Scatter reductions (ONNX `reduction`). */
typedef enum {
  MG_SCATTER_NONE = 0, MG_SCATTER_ADD, MG_SCATTER_MUL, MG_SCATTER_MAX, MG_SCATTER_MIN
} mg_scatter_reduction;

/* ScatterElements into dst, which already holds a copy of data: for each coord of
 * indices (C order), element coord . data_strides with coord[axis] replaced by the
 * index is combined with updates[k] (same shape as indices), in order. */
void mg_scatter_elements(mg_rt_dtype t, mg_scatter_reduction red, int rank,
                         const int64_t *idx_shape, const int64_t *data_strides, int axis,
                         int64_t axis_n, const void *indices, int indices_i64,
                         const void *updates, void *dst);

/* GatherND: `batches` batches of data, each batch_stride elements apart; per batch
 * n_tuples index tuples of k values (axis j of length axis_dims[j], element stride
 * axis_strides[j] within the batch), each copying `inner` contiguous elements. */
void mg_gather_nd(size_t elem_size, int64_t batches, int64_t batch_stride, int64_t n_tuples,
                  int k, const int64_t *axis_dims, const int64_t *axis_strides, int64_t inner,
                  const void *data, const void *indices, int indices_i64, void *dst);

/* ScatterND into dst (already a copy of data): n_tuples tuples of k indices, each
 * combining `inner` contiguous elements of updates into dst, in order. */
void mg_scatter_nd(mg_rt_dtype t, mg_scatter_reduction red, int64_t n_tuples, int k,
                   const int64_t *axis_dims, const int64_t *axis_strides, int64_t inner,
                   const void *indices, int indices_i64, const void *updates, void *dst);

/* Trilu over `mats` row-major rows x cols matrices: keeps j - i >= k (upper) or
 * j - i <= k (lower), zero elsewhere. dst may equal src. */
void mg_trilu(size_t elem_size, int64_t mats, int64_t rows, int64_t cols, int64_t k, int upper,
              const void *src, void *dst);

/* ReverseSequence on [time, batch, inner] (time_major) or [batch, time, inner]:
 * the first lens[b] steps of batch entry b reversed (lens int32 or int64, clamped
 * to [0, time]). src and dst must not overlap. */
void mg_reverse_sequence(size_t elem_size, int64_t batch, int64_t time, int64_t inner,
                         int time_major, const void *lens, int lens_i64, const void *src,
                         void *dst);

/* OneHot: dst [outer, depth, inner] of values[0], with values[1] at each index
 * (dtype idx_t, any numeric; negative ones count from depth; out of range: none). */
void mg_onehot(size_t elem_size, mg_rt_dtype idx_t, int64_t outer, int64_t depth, int64_t inner,
               const void *indices, const void *values, void *dst);

/* TopK along [outer, n, inner]: the k largest (or smallest) of each column, sorted,
 * ties to the lower index, NaN above every number (ONNX / the reference). values
 * (dtype t) or indices may be NULL. scratch: mg_topk_scratch(n) floats. */
size_t mg_topk_scratch(int64_t n);
void mg_topk(mg_rt_dtype t, int64_t outer, int64_t n, int64_t inner, int64_t k, int largest,
             const void *src, void *values, int64_t *indices, float *scratch);

/* ------------------------------------------------------ reductions */

typedef enum {
  MG_REDUCE_SUM = 0, MG_REDUCE_MEAN, MG_REDUCE_SUM_SQUARE, MG_REDUCE_L1, MG_REDUCE_L2,
  MG_REDUCE_LOG_SUM, MG_REDUCE_LOG_SUM_EXP, MG_REDUCE_MAX, MG_REDUCE_MIN, MG_REDUCE_PROD
} mg_reduce_op;

/* float32 reduction of [outer, n, inner] over n into dst [outer, inner]. Sums are
 * blocked (float partials flushed into double), Max/Min propagate NaN; an empty n
 * gives the identity (0, NaN for Mean, -inf for Max/LogSum/LogSumExp, +inf Min,
 * 1 Prod). dst must not overlap src. */
void mg_reduce_f32(mg_reduce_op op, int64_t outer, int64_t n, int64_t inner, const float *src,
                   float *dst);

/* Any dtype: dst (C order over keep_shape, n_keep dims) reduces, for each kept
 * coord, the elements at kept . keep_strides + red . red_strides over red_shape
 * (n_red dims; 0 dims reduce each element on its own). */
void mg_reduce(mg_rt_dtype t, mg_reduce_op op, int n_keep, const int64_t *keep_shape,
               const int64_t *keep_strides, int n_red, const int64_t *red_shape,
               const int64_t *red_strides, const void *src, void *dst);

/* ArgMax (is_min == 0) / ArgMin of [outer, n, inner] over n into int64 dst
 * [outer, inner]: first extreme (last with select_last), NaN wins (first met). */
void mg_argextreme(mg_rt_dtype t, int is_min, int select_last, int64_t outer, int64_t n,
                   int64_t inner, const void *src, int64_t *dst);

/* CumSum over n of [outer, n, inner]; dst may equal src. Floats accumulate in
 * double, integers in wrapping int64. */
void mg_cumsum(mg_rt_dtype t, int exclusive, int reverse, int64_t outer, int64_t n,
               int64_t inner, const void *src, void *dst);

/* mg_cumsum along an axis known only at run time: dims (rank >= 1) split there;
 * a negative axis counts from the end, an out-of-range one is clamped. */
void mg_cumsum_axis(mg_rt_dtype t, int exclusive, int reverse, int rank, const int64_t *dims,
                    int64_t axis, const void *src, void *dst);

typedef enum { MG_SOFTMAX = 0, MG_LOG_SOFTMAX, MG_HARDMAX } mg_softmax_kind;

/* Softmax / LogSoftmax / Hardmax over n of [outer, n, inner], max subtracted;
 * dst may equal src. The float32 version uses a vectorisable exp (about 1 ulp) on
 * rows with a finite maximum. */
void mg_softmax_f32(mg_softmax_kind kind, int64_t outer, int64_t n, int64_t inner,
                    const float *src, float *dst);
void mg_softmax(mg_rt_dtype t, mg_softmax_kind kind, int64_t outer, int64_t n, int64_t inner,
                const void *src, void *dst);

/* LpNormalization (p 1 or 2) over n of [outer, n, inner]; dst may equal src. */
void mg_lp_normalize(mg_rt_dtype t, int p, int64_t outer, int64_t n, int64_t inner,
                     const void *src, void *dst);

/* MeanVarianceNormalization: (x - mean) / (sqrt(var) + 1e-9) over the reduced
 * dims of each kept coord (layout as mg_reduce; dst has src's layout, contiguous).
 * dst may equal src. */
void mg_mvn(mg_rt_dtype t, int n_keep, const int64_t *keep_shape, const int64_t *keep_strides,
            int n_red, const int64_t *red_shape, const int64_t *red_strides, const void *src,
            void *dst);

#ifdef __cplusplus
}
#endif
#endif
