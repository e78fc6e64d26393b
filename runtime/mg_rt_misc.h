/* migc CPU runtime: the misc kernel family (see mg_runtime.h for the rules every
 * kernel keeps: C99, no allocation, no mutable globals).
 *
 * runtime/misc.c: the losses NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss,
 * Range, Einsum (a loop nest planned by the code generator) and Det.
 * runtime/quant.c: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear and the
 * integer products MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv.
 * Both also need runtime/tensor.c (element access helpers).
 *
 * Results equal the reference interpreter's (verify/): float results are computed
 * in double in the same order and rounded once on store (float16/bfloat16 with a
 * sticky bit, so there is no double rounding); integer results wrap as ONNX says;
 * quantisation rounds half to even and saturates. */
#ifndef MG_RT_MISC_H
#define MG_RT_MISC_H
#include "mg_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Stores v into element i of dtype t rounding once: floats to nearest even
 * (float16/bfloat16 through a sticky float, so without double rounding), other
 * dtypes as mg_tensor_store_f64. */
void mg_misc_store_f64(mg_rt_dtype t, void *base, int64_t i, double v);

/* ---------------------------------------------------------------- losses */

typedef enum { MG_LOSS_NONE = 0, MG_LOSS_SUM, MG_LOSS_MEAN } mg_loss_reduction;

/* The geometry of a loss: input [N, C, D] (D the product of the spatial dims, 1
 * without), target [N, D] of int32 or int64, optional weight [C]; input, weight and
 * loss share the float dtype t. The loss is [N, D] (MG_LOSS_NONE) or one value. */
typedef struct {
  int64_t N, C, D;
  mg_rt_dtype t;
  int target_i64;            /* target is int64 (1) or int32 (0) */
  int has_ignore;            /* whether ignore_index is set */
  int64_t ignore_index;      /* targets equal to it contribute 0 and no weight */
  mg_loss_reduction reduction;
} mg_loss_params;

/* NegativeLogLikelihoodLoss over log-probabilities: loss = -w[t] * logp[n, t, d]
 * (w = 1 without weight); mean divides the sum by the sum of the weights used.
 * A target outside [0, C) that is not ignored gives NaN. weight may be NULL. */
void mg_nll_loss(const mg_loss_params *p, const void *logp, const void *target,
                 const void *weight, void *loss);

/* SoftmaxCrossEntropyLoss: the NLL of log_softmax(scores) over C. log_prob (the
 * optional second output, scores' shape) may be NULL. */
void mg_softmax_cross_entropy(const mg_loss_params *p, const void *scores, const void *target,
                              const void *weight, void *loss, void *log_prob);

/* ---------------------------------------------------------------- Range */

/* dst[i] = start + i * delta for i < n (n computed at conversion): floats in double
 * then rounded, integers in wrapping int64. start and delta are one element each. */
void mg_range(mg_rt_dtype t, const void *start, const void *delta, int64_t n, void *dst);

/* ---------------------------------------------------------------- Einsum */

/* Einsum as a loop nest over n_all labels of sizes dims[]: the first n_out are the
 * output's dims (C order), the rest are summed (the last fastest). Operand k (of
 * n_ops, all of dtype t) reads element sum_l idx[l] * strides[k * n_all + l]
 * (0 strides broadcast; repeated labels add their strides: diagonals). Floats
 * multiply and sum in double, integers in wrapping int64. dst must not overlap the
 * operands. */
void mg_einsum(mg_rt_dtype t, int n_ops, const void *const *ops, int n_out, int n_all,
               const int64_t *dims, const int64_t *strides, void *dst);

/* ---------------------------------------------------------------- Det */

/* Floats of scratch mg_det needs for m x m matrices. */
size_t mg_det_scratch(int64_t m);
/* Determinants of `batch` row-major m x m matrices of float dtype t, by LU with
 * partial pivoting in double. */
void mg_det(mg_rt_dtype t, int64_t batch, int64_t m, const void *x, void *y, float *scratch);

/* ---------------------------------------------------------- quantisation */

/* x viewed as [outer, len, inner]; the scale and zero point hold len values (per
 * axis) or one (len 1: per tensor). */
typedef struct {
  int64_t outer, len, inner;
  mg_rt_dtype x_t;           /* Quantize: float or int32 input; Dequantize: the integer input */
  mg_rt_dtype s_t;           /* the scale's float dtype (Dequantize: also y's) */
  mg_rt_dtype q_t;           /* Quantize: y's integer dtype (U8, I8, U16, I16) */
} mg_quant_params;

/* QuantizeLinear: y = saturate(round_half_even(x / scale) + zero_point), the
 * quotient rounded to x's float dtype (float32 for integer x) first; NaN gives 0.
 * zero_point may be NULL (0); it has dtype q_t. */
void mg_quantize_linear(const mg_quant_params *p, const void *x, const void *scale,
                        const void *zero_point, void *y);

/* DequantizeLinear: y = (x - zero_point) * scale in double, stored as s_t.
 * zero_point (x's dtype) may be NULL. */
void mg_dequantize_linear(const mg_quant_params *p, const void *x, const void *scale,
                          const void *zero_point, void *y);

/* DynamicQuantizeLinear of n floats: scale = (max(0, max x) - min(0, min x)) / 255,
 * zero point = saturate(round(-min / scale)), y = saturate(round(x / scale) + zp),
 * each step rounded to float32 as the ONNX definition computes it. Any of y,
 * y_scale, y_zero_point may be NULL (an omitted output). */
void mg_dynamic_quantize_linear(int64_t n, const float *x, uint8_t *y, float *y_scale,
                                uint8_t *y_zero_point);

/* ------------------------------------------------- integer matrix products */

/* `batch` products of M x K by K x N 8-bit matrices; matrix b of A starts at
 * element a_off[b], of B at b_off[b], Y's are consecutive. Zero points have the
 * operand's dtype: NULL (0), one value, or one per row of A (a_zp_per_row) / per
 * column of B (b_zp_per_col). QLinearMatMul's scales are float32, one value or one
 * per row / column likewise; its y zero point is one value of y_t. */
typedef struct {
  int64_t M, N, K;
  mg_rt_dtype a_t, b_t;      /* U8 or I8 */
  int a_zp_per_row, b_zp_per_col;
  int a_scale_per_row, b_scale_per_col;
  mg_rt_dtype y_t;           /* QLinearMatMul: U8 or I8 */
} mg_qmatmul_params;

/* MatMulInteger: y = (A - a_zp) (B - b_zp), int32. */
void mg_matmul_integer(const mg_qmatmul_params *p, int64_t batch, const void *a,
                       const int64_t *a_off, const void *a_zp, const void *b,
                       const int64_t *b_off, const void *b_zp, int32_t *y);

/* QLinearMatMul: the MatMulInteger sum s, then with m = float(a_scale * b_scale) /
 * y_scale (float32 arithmetic), y = saturate(round_half_even(s * m) + y_zp). */
void mg_qlinear_matmul(const mg_qmatmul_params *p, int64_t batch, const void *a,
                       const int64_t *a_off, const float *a_scale, const void *a_zp,
                       const void *b, const int64_t *b_off, const float *b_scale,
                       const void *b_zp, const float *y_scale, const void *y_zp, void *y);

/* ------------------------------------------------ integer convolutions */

/* One 2-D integer convolution (a 1-D one has H = OH = kh = 1), geometry as
 * mg_conv2d_params: x [N, C, H, W], w [M, C/group, kh, kw], y [N, M, OH, OW]. Padding
 * contributes 0 after the zero point is subtracted. x's zero point is one value (or
 * NULL); w's is one value, one per output channel (w_zp_per_channel), or NULL. */
typedef struct {
  int N, C, H, W, M, kh, kw, group;
  int stride_h, stride_w, dil_h, dil_w;
  int pad_t, pad_l, pad_b, pad_r;
  int OH, OW;
  mg_rt_dtype x_t, w_t;      /* U8 or I8 */
  int w_zp_per_channel;
  int w_scale_per_channel;   /* QLinearConv: one w scale per output channel */
  mg_rt_dtype y_t;           /* QLinearConv: U8 or I8 */
} mg_qconv2d_params;

/* ConvInteger: y = conv(x - x_zp, w - w_zp), int32. */
void mg_conv_integer(const mg_qconv2d_params *p, const void *x, const void *x_zp,
                     const void *w, const void *w_zp, int32_t *y);

/* QLinearConv: s = conv(x - x_zp, w - w_zp) + bias[m] (int32 bias, may be NULL),
 * then with m = float(x_scale * w_scale[m]) / y_scale (float32 arithmetic),
 * y = saturate(round_half_even(s * m + y_zp)). */
void mg_qlinear_conv(const mg_qconv2d_params *p, const void *x, const float *x_scale,
                     const void *x_zp, const void *w, const float *w_scale, const void *w_zp,
                     const float *y_scale, const void *y_zp, const int32_t *bias, void *y);

#ifdef __cplusplus
}
#endif
#endif
