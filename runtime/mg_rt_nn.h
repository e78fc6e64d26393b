/* migc CPU runtime: the nn kernel family (see mg_runtime.h for the rules every
 * kernel keeps: C99, no allocation, no mutable globals).
 *
 * Pools, normalisations, LRN (runtime/nn.c), Resize (runtime/resize.c),
 * ConvTranspose (runtime/conv.c) and the Gemm/MatMul helpers around mg_sgemm
 * (runtime/matmul.c). All float32, NCHW, dense C order. Every geometric
 * parameter (output sizes, pads resolved from auto_pad, interpolation taps) is
 * computed by the code generator; the kernels trust them. */
#ifndef MG_RT_NN_H
#define MG_RT_NN_H
#include "mg_runtime.h"
#include <math.h> /* INFINITY and NAN, which generated parameter structs may use */

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- pools */

/* One 2-D pooling window geometry over `planes` (N*C) planes of H x W. Pads are
 * ONNX's [t, l, b, r], already resolved from auto_pad; OH/OW are the output sizes
 * (ceil_mode already applied). A 1-D pool is H = OH = kh = 1. */
typedef struct {
  int planes;
  int H, W;
  int kh, kw;
  int stride_h, stride_w;
  int dil_h, dil_w;
  int pad_t, pad_l, pad_b, pad_r;
  int OH, OW;
  int count_include_pad; /* AveragePool: divide by the taps inside the padded
                            input [-pad, in + pad_end) rather than the input */
  float p;               /* LpPool: the exponent */
} mg_pool2d_params;

/* MaxPool: the largest input under each window (padding never wins); a window with
 * no input under it gives -INFINITY. */
void mg_maxpool2d(const mg_pool2d_params *p, const float *x, float *y);
/* AveragePool: the sum under each window divided by its tap count (see
 * count_include_pad); 0 taps gives NaN, as 0/0. */
void mg_avgpool2d(const mg_pool2d_params *p, const float *x, float *y);
/* LpPool: (sum |x|^p)^(1/p) under each window. */
void mg_lppool2d(const mg_pool2d_params *p, const float *x, float *y);

/* Global pools over `planes` contiguous runs of `size` values, one output each:
 * mean; max (NaN propagates); (sum |x|^p)^(1/p). */
void mg_global_avgpool(int planes, int size, const float *x, float *y);
void mg_global_maxpool(int planes, int size, const float *x, float *y);
void mg_global_lppool(int planes, int size, float p, const float *x, float *y);

/* ------------------------------------------------------- normalisations */

/* y[n, c, i] = act(x[n, c, i] * scale[c] + shift[c]) for n < N, c < C, i < size
 * (inference BatchNormalization with scale/shift folded at conversion). y may equal
 * x. */
void mg_channel_affine(int N, int C, int size, const float *scale, const float *shift,
                       const float *x, float *y, mg_act act, float a, float b);

/* Inference BatchNormalization with run-time statistics: per channel,
 * s = scale[c] / sqrt(var[c] + eps), y = act((x - mean[c]) * s + bias[c]). y may
 * equal x. */
void mg_batchnorm(int N, int C, int size, const float *x, const float *scale,
                  const float *bias, const float *mean, const float *var, float eps,
                  float *y, mg_act act, float a, float b);

/* LayerNormalization over `rows` contiguous runs of `len` values:
 * y = (x - mean) / sqrt(var + eps) * scale[i] + bias[i] (population variance);
 * bias may be NULL; mean and inv_std (one float per row) may be NULL. y may equal
 * x. */
void mg_layernorm(int rows, int len, const float *x, const float *scale,
                  const float *bias, float eps, float *y, float *mean, float *inv_std);

/* GroupNormalization (InstanceNormalization is groups == C): each group of C/groups
 * channels of size values, per sample, normalised to zero mean and unit variance,
 * then y = v * scale[c] + bias[c] per channel. y may equal x. */
void mg_groupnorm(int N, int C, int groups, int size, const float *x, const float *scale,
                  const float *bias, float eps, float *y);

/* LRN across the channel axis of [outer, C, inner]: y = x / (bias + alpha/size *
 * sum x^2)^beta, the sum over channels [c - (size-1)/2, c + size/2] clipped to the
 * valid range. y must not overlap x. */
void mg_lrn(int outer, int C, int inner, int size, float alpha, float beta, float bias,
            const float *x, float *y);

/* ------------------------------------------------------------- resize */

/* One separable Resize pass along an axis, over x viewed as [outer, L, inner] and
 * y as [outer, O, inner]: y[o, j, i] = sum_t w[j*taps + t] * x[o, idx[j*taps + t], i]
 * for t < taps; idx[j*taps] == -1 means output j lies outside the input
 * (tf_crop_and_resize) and gets `extrapolation`. Indices are in [0, L). y must not
 * overlap x. */
void mg_resize_axis(int outer, int L, int O, int inner, int taps, const int64_t *idx,
                    const float *w, float extrapolation, const float *x, float *y);

/* Bilinear 2-D Resize of `planes` planes H x W into OH x OW, both axes at once:
 * output row j blends input rows yidx[2j], yidx[2j+1] with weights yw[2j], yw[2j+1];
 * columns likewise with xidx/xw. Scratch: mg_resize_bilinear_scratch(OW) floats.
 * y must not overlap x. */
size_t mg_resize_bilinear_scratch(int OW);
void mg_resize_bilinear2d(int planes, int H, int W, int OH, int OW, const int64_t *yidx,
                          const float *yw, const int64_t *xidx, const float *xw,
                          const float *x, float *y, float *scratch);

/* ------------------------------------------------------ conv transpose */

/* A 2-D ConvTranspose, float32, NCHW: x [N, C, H, W], w [C, M/group, kh, kw],
 * bias [M] or NULL, y [N, M, OH, OW], where output position
 * (ih*stride - pad_t + ki*dil, iw*stride - pad_l + kj*dil) receives x*w and taps
 * outside [0, OH) x [0, OW) are dropped. pad_t/pad_l may be negative (an
 * output_shape larger than the natural one grows the output at the end); the code
 * generator resolves output_padding, output_shape and auto_pad into them and OH/OW. */
typedef struct {
  int N, C, H, W;
  int M;
  int kh, kw;
  int group;
  int stride_h, stride_w;
  int dil_h, dil_w;
  int pad_t, pad_l;
  int OH, OW;
} mg_convt2d_params;

/* Floats of scratch mg_conv_transpose2d needs: the column matrix
 * (M/group*kh*kw) x (H*W) plus SGEMM packing space. */
size_t mg_conv_transpose2d_scratch(const mg_convt2d_params *p);
/* y = conv_transpose(x, w) + bias; y must not overlap x, w, bias or scratch. */
void mg_conv_transpose2d(const mg_convt2d_params *p, const float *x, const float *w,
                         const float *bias, float *y, float *scratch);

/* ---------------------------------------------------------- Gemm/MatMul */

/* y[i*N + j] = beta * c[i*stride_m + j*stride_n] for i < M, j < N: Gemm's C
 * broadcast into the output before mg_sgemm accumulates with beta = 1 (a stride of
 * 0 broadcasts that axis). */
void mg_fill_broadcast2d(int M, int N, const float *c, int stride_m, int stride_n,
                         float beta, float *y);

/* batch products y[b] = A[a_off[b] ..] (M x K) times B[b_off[b] ..] (K x N), y dense
 * [batch, M, N]; offsets in floats, computed at conversion from numpy's
 * broadcasting. scratch: mg_sgemm_scratch(M, N, K) floats. */
void mg_matmul_batched(int batch, int M, int N, int K, const float *A,
                       const int64_t *a_off, const float *B, const int64_t *b_off,
                       float *y, float *scratch);

#ifdef __cplusplus
}
#endif
#endif
