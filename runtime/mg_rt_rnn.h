/* migc CPU runtime: the rnn kernel family (see mg_runtime.h for the rules every
 * kernel keeps: C99, no allocation, no mutable globals).
 *
 *   - RNN, GRU, LSTM (runtime/rnn.c): float32, input projections for all steps
 *     in one SGEMM, one SGEMM per step for the recurrence;
 *   - N-d (any number of spatial dims) Conv, ConvTranspose and the windowed pools,
 *     MaxPool of any dtype with its Indices output, MaxUnpool (runtime/conv_nd.c);
 *   - GridSample and RoiAlign (runtime/sample.c).
 * Every geometric parameter is computed by the code generator; kernels trust it. */
#ifndef MG_RT_RNN_H
#define MG_RT_RNN_H
#include "mg_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------ RNN, GRU, LSTM */

/* The activation functions of the ONNX recurrent ops' `activations` attribute. */
typedef enum {
  MG_RNN_RELU, MG_RNN_TANH, MG_RNN_SIGMOID, MG_RNN_AFFINE, MG_RNN_LEAKYRELU,
  MG_RNN_THRESHOLDEDRELU, MG_RNN_SCALEDTANH, MG_RNN_HARDSIGMOID, MG_RNN_ELU,
  MG_RNN_SOFTSIGN, MG_RNN_SOFTPLUS
} mg_rnn_fn;

typedef struct {
  mg_rnn_fn fn;
  float alpha, beta; /* resolved by the code generator (defaults included) */
} mg_rnn_act;

/* One RNN (gates = 1), GRU (3: z, r, h) or LSTM (4: i, o, f, c) node.
 * Shapes (layout 0 / layout 1):
 *   x  [S, B, I] / [B, S, I];      w [D, gates*H, I];  r [D, gates*H, H];
 *   b  [D, 2*gates*H] or NULL;     h0, c0, y_h, y_c [D, B, H] / [B, D, H] or NULL;
 *   peep [D, 3*H] (LSTM i, o, f) or NULL;  lens [B] int32 or NULL;
 *   y  [S, D, B, H] / [B, S, D, H] or NULL.
 * D = dirs (2 for bidirectional: direction 1 runs backwards). acts holds the
 * per-direction functions (1 RNN, 2 GRU, 3 LSTM) for each direction in turn.
 * clip > 0 clamps every gate pre-activation to [-clip, clip]. Steps at or after a
 * row's length leave zeros in y; a zero-length row has zero y_h/y_c. Lengths are
 * clamped to [0, S]. */
typedef struct {
  int gates;
  int S, B, I, H;
  int dirs, reverse, layout;
  float clip;
  int linear_before_reset, input_forget;
  mg_rnn_act acts[6];
} mg_rnn_params;

/* Floats of scratch mg_rnn needs. */
size_t mg_rnn_scratch(const mg_rnn_params *p);
/* Runs the recurrence; outputs must not overlap inputs or scratch. */
void mg_rnn(const mg_rnn_params *p, const float *x, const float *w, const float *r,
            const float *b, const int32_t *lens, const float *h0, const float *c0,
            const float *peep, float *y, float *y_h, float *y_c, float *scratch);

/* ------------------------------------------------- N-d convolution/pools */

/* Most spatial dims the N-d kernels take. */
#define MG_ND_MAX 6

/* Conv over nd spatial dims, ONNX semantics, float32: x [N, C, in...],
 * w [M, C/group, k...], bias [M] or NULL, y [N, M, out...]; pb are the begin pads
 * (end pads are implied by out). */
typedef struct {
  int nd, N, C, M, group;
  int in[MG_ND_MAX], k[MG_ND_MAX], s[MG_ND_MAX], d[MG_ND_MAX], pb[MG_ND_MAX],
      out[MG_ND_MAX];
  mg_act act;
  float act_a, act_b;
} mg_convnd_params;

/* Floats of scratch mg_convnd needs (a bounded im2col chunk plus SGEMM packing). */
size_t mg_convnd_scratch(const mg_convnd_params *p);
/* y = act(conv(x, w) + bias); y must not overlap x, w, bias or scratch. */
void mg_convnd(const mg_convnd_params *p, const float *x, const float *w, const float *bias,
               float *y, float *scratch);

/* ConvTranspose over nd spatial dims, float32: x [N, C, in...], w [C, M/group, k...],
 * bias [M] or NULL, y [N, M, out...]; input position i feeds output
 * i*s - pb + kk*d (pb may be negative), taps outside out are dropped (act unused). */
typedef mg_convnd_params mg_convtnd_params;
size_t mg_conv_transpose_nd_scratch(const mg_convtnd_params *p);
void mg_conv_transpose_nd(const mg_convtnd_params *p, const float *x, const float *w,
                          const float *bias, float *y, float *scratch);

/* A pooling window over nd spatial dims of `planes` (N*C) planes. pb/pe are the
 * begin/end pads (auto_pad resolved), out the output sizes (ceil_mode applied). */
typedef struct {
  int nd, planes;
  int in[MG_ND_MAX], k[MG_ND_MAX], s[MG_ND_MAX], d[MG_ND_MAX], pb[MG_ND_MAX],
      pe[MG_ND_MAX], out[MG_ND_MAX];
  int count_include_pad; /* AveragePool: count taps inside [-pb, in + pe) */
  float p;               /* LpPool exponent */
} mg_poolnd_params;

/* float32 pools, as mg_maxpool2d / mg_avgpool2d / mg_lppool2d in N-d. */
void mg_maxpool_nd(const mg_poolnd_params *p, const float *x, float *y);
void mg_avgpool_nd(const mg_poolnd_params *p, const float *x, float *y);
void mg_lppool_nd(const mg_poolnd_params *p, const float *x, float *y);

/* MaxPool of any real dtype t (float16/bfloat16 compared as float), with optional
 * Indices: the first largest input under each window is copied to y (a window with
 * no input gives -inf, or the type's minimum for integers); indices (NULL: none)
 * receive plane*prod(in) + its spatial offset, row-major, or column-major over the
 * spatial dims when col_major (storage_order 1); -1 for an empty window. */
void mg_maxpool_nd_any(const mg_poolnd_params *p, mg_rt_dtype t, const void *x, void *y,
                       int64_t *indices, int col_major);

/* MaxUnpool: y (ybytes bytes) = 0, then element i of x (count elements of esize
 * bytes) goes to flat position ind[i] of the unpooled shape idims[rank], mapped into
 * y by ystrides (y's own dims may be larger). Indices outside [0, prod idims) are
 * skipped. */
void mg_maxunpool(int rank, const int64_t *idims, const int64_t *ystrides, int64_t count,
                  size_t esize, const void *x, const int64_t *ind, void *y, size_t ybytes);

/* ------------------------------------------------- GridSample, RoiAlign */

enum { MG_GS_BILINEAR, MG_GS_NEAREST, MG_GS_BICUBIC };
enum { MG_GS_ZEROS, MG_GS_BORDER, MG_GS_REFLECTION };

/* GridSample, 2-D, float32, as torch.nn.functional.grid_sample: x [N, C, H, W],
 * grid [N, OH, OW, 2] (x then y in [-1, 1]), y [N, C, OH, OW]. */
void mg_grid_sample2d(int N, int C, int H, int W, int OH, int OW, int mode, int padding,
                      int align_corners, const float *x, const float *grid, float *y);

/* RoiAlign as onnxruntime computes it: x [N, C, H, W], rois [R, 4] (x1, y1, x2, y2),
 * batch [R] (int64), y [R, C, OH, OW]. mode_max: the max of the bilinear samples'
 * weighted corners (onnxruntime's definition); half_pixel: coordinate
 * transformation half_pixel (else output_half_pixel). sampling_ratio 0: adaptive.
 * Batch indices outside [0, N) give zero outputs. */
void mg_roi_align(int N, int C, int H, int W, int R, int OH, int OW, int sampling_ratio,
                  float spatial_scale, int mode_max, int half_pixel, const float *x,
                  const float *rois, const int64_t *batch, float *y);

#ifdef __cplusplus
}
#endif
#endif
