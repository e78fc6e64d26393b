/* migc CPU runtime: int8 convolution (static post-training quantisation,
 * docs/precision.md). Weights are per-output-channel symmetric int8, prepared at
 * conversion; activations stay float32 between layers and each int8 layer
 * quantises its input per tensor to u8 with a zero point (0 for a non-negative
 * tensor, 128 for a symmetric one), accumulates u8 x s8 products in int32 and
 * dequantises in its epilogue, bias and activation fused. */
#ifndef MG_RT_INT8_H
#define MG_RT_INT8_H
#include "mg_runtime.h"
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One int8 convolution: the float32 geometry (prepared, prepared_mr unused) and
 * the input's quantisation: x is represented by q = clamp(round(x / in_scale) +
 * in_zp, lo, 255), lo = 1 when in_zp is 128 (symmetric) and 0 otherwise. */
typedef struct {
  mg_conv2d_params conv;
  float in_scale;
  int in_zp;
} mg_q8_conv_params;

/* Layout of the prepared weights (mg_q8_conv_prepare), K = C/group*kh*kw and
 * Kp = K rounded up to 4: float scale[M] (in_scale * weight scale of channel m),
 * int32 zero-point correction[M] (in_zp * the sum of channel m's int8 weights),
 * int8 w[M][Kp] (zero beyond K). Its size in bytes: */
size_t mg_q8_conv_prepared_bytes(const mg_q8_conv_params *p);

/* Writes the prepared weights of p into out from the ONNX float32 weights w
 * [M, C/group, kh, kw]. w_scale[m] is channel m's symmetric scale (w ~ w_scale *
 * q, q in [-127, 127]); mg_q8_weight_scales gives the usual one, max|w| / 127. */
void mg_q8_conv_prepare(const mg_q8_conv_params *p, const float *w, const float *w_scale, void *out);

/* Per-channel symmetric scales of a weight tensor of `rows` rows of `cols`:
 * max |w| / 127, or 1 for an all-zero row (whose weights quantise to 0). */
void mg_q8_weight_scales(const float *w, int rows, int cols, float *scale);

/* Floats of scratch mg_q8_conv2d needs (the quantised input and a column chunk). */
size_t mg_q8_conv2d_scratch(const mg_q8_conv_params *p);

/* y = act(dequantised int8 conv(quantised x, wq) + bias); wq as prepared above,
 * bias [M] or NULL, shapes as mg_conv2d. Every group size, stride, dilation and
 * pad; a depthwise layer (group == C == M) runs a direct kernel. AVX-512 VNNI
 * (vpdpbusd) where the compiler targets it, portable C otherwise, same integers.
 * y must not overlap x, wq or scratch. */
void mg_q8_conv2d(const mg_q8_conv_params *p, const float *x, const void *wq, const float *bias, float *y,
                  float *scratch);

#ifdef __cplusplus
}
#endif
#endif
