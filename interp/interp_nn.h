/* Shared by the interpreter's nn and linalg families (interp_nn.c, interp_resize.c,
 * interp_linalg.c): the double-precision matrix product and convolution cores that
 * the float and the quantised kernels both use, and the sampling kernels that live
 * in interp_resize.c. */
#ifndef MG_INTERP_NN_H
#define MG_INTERP_NN_H
#include "interp_internal.h"
#include "resize_geom.h"

/* C[M x N] += A[M x K] * B[K x N] on row-major doubles with leading dimensions
 * lda, ldb, ldc (interp_linalg.c). Cache-blocked and packed; every C element sums
 * its K products in the same order whatever the blocking. Returns 0, or -1 when
 * the packing buffers cannot be allocated (nothing recorded: the caller reports). */
int nn_gemm(int64_t M, int64_t N, int64_t K, const double *A, int64_t lda, const double *B,
            int64_t ldb, double *C, int64_t ldc);

/* The convolution of node n (attributes auto_pad, dilations, group, kernel_shape,
 * pads, strides as Conv, ConvInteger and QLinearConv share them) on doubles:
 * x is [N, C, D1..Dk] (xrank = k + 2, 1 <= k <= 3), w is [M, C/group, K1..Kk],
 * bias is [M] or NULL. On success *y is a new mg_malloc'd array of shape ydims
 * (rank xrank) and 0 is returned; otherwise -1 after a diagnostic (interp_nn.c). */
int nn_conv(interp_ctx *c, const mg_node *n, const double *x, const int64_t *xdims, int xrank,
            const double *w, const int64_t *wdims, const double *bias, double **y,
            int64_t *ydims);

/* Resize, GridSample, RoiAlign, MaxRoiPool and NonMaxSuppression (interp_resize.c),
 * with the kernel contract of interp_internal.h. */
int interp_nn_sampling(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out);

/* Resize's geometry from its input arrays (roi, scales, sizes may be NULL or
 * empty), shared by the interpreter and its VJP: 0, or -1 with *err. */
int resize_plan(const mg_node *n, const mg_resize_opts *o, const mg_array *x, const mg_array *roi,
                const mg_array *sc, const mg_array *sz, mg_rz_axis *geo, const char **err);
/* The order of the separable passes: shrinking axes first, so no intermediate
 * exceeds the larger of input and output. Writes all r axes; returns r. */
int resize_pass_order(int r, const mg_rz_axis *geo, int *order);

/* RoiAlign's geometry, shared by the interpreter and its VJP (vjp_sample.c). */
typedef struct {
  int is_max, half;   /* mode max; coordinate_transformation_mode half_pixel */
  int64_t oh, ow, sr; /* output_height, output_width, sampling_ratio */
  double ss;          /* spatial_scale */
} roi_opts;
typedef struct {
  double x0, y0, bh, bw; /* the roi's origin and bin size in input pixels */
  int64_t gh, gw;        /* samples per bin */
  double count;          /* what avg divides by */
} roi_grid;
/* -1 with *attr and *value naming an attribute value migc does not implement. */
int roi_read_opts(const mg_node *n, roi_opts *o, const char **attr, const char **value);
/* The grid of roi box[4] = (x1, y1, x2, y2); -1 with *err for a roi that is not
 * finite or needs too many samples. */
int roi_grid_init(const roi_opts *o, const double box[4], roi_grid *g, const char **err);
/* The bilinear corners of sample (iy, ix) of bin (ph, pw): offsets into an H x W
 * plane and weights; 0 (all weights 0) when the sample lies outside the plane. */
int roi_corners(const roi_grid *g, int64_t H, int64_t W, int64_t ph, int64_t pw, int64_t iy, int64_t ix,
                int64_t idx[4], double w[4]);
#endif
