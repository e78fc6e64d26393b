/* Shared by the interpreter's nn and linalg families (interp_nn.c, interp_resize.c,
 * interp_linalg.c): the double-precision matrix product and convolution cores that
 * the float and the quantised kernels both use, and the sampling kernels that live
 * in interp_resize.c. */
#ifndef MG_INTERP_NN_H
#define MG_INTERP_NN_H
#include "interp_internal.h"

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
#endif
