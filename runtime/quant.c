/* The misc family's quantisation kernels: QuantizeLinear, DequantizeLinear,
 * DynamicQuantizeLinear and the 8-bit integer products MatMulInteger,
 * QLinearMatMul, ConvInteger, QLinearConv (see mg_rt_misc.h). Integer sums are
 * exact (64-bit accumulators); every rounding step matches the reference
 * interpreter's. */
#include "mg_runtime.h"

#include <math.h>
#include <string.h>

/* The saturation range of a quantised dtype. */
static void qrange(mg_rt_dtype t, double *lo, double *hi) {
  switch (t) {
  case MG_RT_I8: *lo = -128, *hi = 127; return;
  case MG_RT_U16: *lo = 0, *hi = 65535; return;
  case MG_RT_I16: *lo = -32768, *hi = 32767; return;
  case MG_RT_I32: *lo = -2147483648.0, *hi = 2147483647.0; return;
  default: *lo = 0, *hi = 255; return;
  }
}

/* Element i of an 8-bit array (signed when t is MG_RT_I8). */
static int32_t ld8(mg_rt_dtype t, const void *p, int64_t i) {
  return t == MG_RT_I8 ? (int32_t)((const int8_t *)p)[i] : (int32_t)((const uint8_t *)p)[i];
}

/* A zero point's element i, 0 when absent. */
static int64_t zp_at(mg_rt_dtype t, const void *zp, int64_t i) {
  return zp ? mg_tensor_load_i64(t, zp, i) : 0;
}

/* v rounded to the float dtype t and read back (t other than a float: float32). */
static double round_to(mg_rt_dtype t, double v) {
  unsigned char buf[8];
  if (t == MG_RT_F64) return v;
  if (t != MG_RT_F16 && t != MG_RT_BF16) return (float)v;
  mg_misc_store_f64(t, buf, 0, v);
  return mg_tensor_load_f64(t, buf, 0);
}

/* ---------------------------------------------------------- quantisation */

void mg_quantize_linear(const mg_quant_params *p, const void *x, const void *scale,
                        const void *zero_point, void *y) {
  double lo, hi;
  qrange(p->q_t, &lo, &hi);
  if (p->x_t == MG_RT_F32 && p->s_t == MG_RT_F32 && (p->q_t == MG_RT_U8 || p->q_t == MG_RT_I8)) {
    /* float32 x / float32 scale is the float quotient the reference rounds */
    const float *xf = (const float *)x, *sf = (const float *)scale;
    const float flo = (float)lo, fhi = (float)hi;
    for (int64_t o = 0; o < p->outer; o++)
      for (int64_t c = 0; c < p->len; c++) {
        const float s = sf[c], z = (float)zp_at(p->q_t, zero_point, c);
        const int64_t base = (o * p->len + c) * p->inner;
        for (int64_t i = 0; i < p->inner; i++) {
          float q = nearbyintf(xf[base + i] / s) + z;
          q = q != q ? 0 : q < flo ? flo : q > fhi ? fhi : q;
          if (p->q_t == MG_RT_U8) ((uint8_t *)y)[base + i] = (uint8_t)q;
          else ((int8_t *)y)[base + i] = (int8_t)q;
        }
      }
    return;
  }
  for (int64_t o = 0; o < p->outer; o++)
    for (int64_t c = 0; c < p->len; c++) {
      const double s = mg_tensor_load_f64(p->s_t, scale, c), z = (double)zp_at(p->q_t, zero_point, c);
      const int64_t base = (o * p->len + c) * p->inner;
      for (int64_t i = 0; i < p->inner; i++) {
        double q = nearbyint(round_to(p->x_t, mg_tensor_load_f64(p->x_t, x, base + i) / s)) + z;
        q = q != q ? 0 : q < lo ? lo : q > hi ? hi : q;
        mg_tensor_store_i64(p->q_t, y, base + i, (int64_t)q);
      }
    }
}

void mg_dequantize_linear(const mg_quant_params *p, const void *x, const void *scale,
                          const void *zero_point, void *y) {
  for (int64_t o = 0; o < p->outer; o++)
    for (int64_t c = 0; c < p->len; c++) {
      const double s = mg_tensor_load_f64(p->s_t, scale, c), z = (double)zp_at(p->x_t, zero_point, c);
      const int64_t base = (o * p->len + c) * p->inner;
      if (p->s_t == MG_RT_F32 && (p->x_t == MG_RT_U8 || p->x_t == MG_RT_I8)) {
        float *yf = (float *)y + base;
        for (int64_t i = 0; i < p->inner; i++) yf[i] = (float)(((double)ld8(p->x_t, x, base + i) - z) * s);
        continue;
      }
      for (int64_t i = 0; i < p->inner; i++)
        mg_tensor_store_f64(p->s_t, y, base + i, ((double)mg_tensor_load_i64(p->x_t, x, base + i) - z) * s);
    }
}

void mg_dynamic_quantize_linear(int64_t n, const float *x, uint8_t *y, float *y_scale,
                                uint8_t *y_zero_point) {
  double mn = 0, mx = 0, zp;
  float scale;
  for (int64_t i = 0; i < n; i++) {
    const double v = x[i];
    mn = v < mn ? v : mn;
    mx = v > mx ? v : mx;
  }
  scale = (float)((double)(float)(mx - mn) / 255.0);
  zp = scale > 0 ? nearbyint(0 - (double)(float)(mn / scale)) : 0;
  zp = zp < 0 ? 0 : zp > 255 ? 255 : zp;
  if (y_scale) *y_scale = scale;
  if (y_zero_point) *y_zero_point = (uint8_t)zp;
  if (!y) return;
  for (int64_t i = 0; i < n; i++) {
    double q = scale > 0 ? nearbyint((double)(float)(x[i] / (double)scale)) + zp : zp;
    y[i] = (uint8_t)(q < 0 ? 0 : q > 255 ? 255 : q);
  }
}

/* ------------------------------------------------- integer matrix products */

enum { QCHUNK = 256 }; /* output columns accumulated at once on the stack */

/* acc[j] = sum_k (A[i, k] - azp) (B[k, j0 + j] - bzp[j0 + j]) for j < nc. */
static void qrow(const mg_qmatmul_params *p, const void *a, int64_t a_row, int32_t azp,
                 const void *b, int64_t b_base, const void *b_zp, int64_t j0, int64_t nc,
                 int64_t *acc) {
  int32_t bz[QCHUNK];
  for (int64_t j = 0; j < nc; j++)
    bz[j] = (int32_t)zp_at(p->b_t, b_zp, p->b_zp_per_col ? j0 + j : 0), acc[j] = 0;
  for (int64_t k = 0; k < p->K; k++) {
    const int64_t av = (int64_t)ld8(p->a_t, a, a_row + k) - azp;
    const int64_t rb = b_base + k * p->N + j0;
    if (av == 0) continue;
    if (p->b_t == MG_RT_I8) {
      const int8_t *br = (const int8_t *)b + rb;
      for (int64_t j = 0; j < nc; j++) acc[j] += av * (int64_t)(br[j] - bz[j]);
    } else {
      const uint8_t *br = (const uint8_t *)b + rb;
      for (int64_t j = 0; j < nc; j++) acc[j] += av * (int64_t)(br[j] - bz[j]);
    }
  }
}

void mg_matmul_integer(const mg_qmatmul_params *p, int64_t batch, const void *a,
                       const int64_t *a_off, const void *a_zp, const void *b,
                       const int64_t *b_off, const void *b_zp, int32_t *y) {
  int64_t acc[QCHUNK];
  for (int64_t t = 0; t < batch; t++)
    for (int64_t i = 0; i < p->M; i++) {
      const int32_t azp = (int32_t)zp_at(p->a_t, a_zp, p->a_zp_per_row ? i : 0);
      int32_t *yr = y + (t * p->M + i) * p->N;
      for (int64_t j0 = 0; j0 < p->N; j0 += QCHUNK) {
        const int64_t nc = p->N - j0 < QCHUNK ? p->N - j0 : QCHUNK;
        qrow(p, a, a_off[t] + i * p->K, azp, b, b_off[t], b_zp, j0, nc, acc);
        for (int64_t j = 0; j < nc; j++) yr[j0 + j] = (int32_t)(uint32_t)(uint64_t)acc[j];
      }
    }
}

/* saturate(v) after rounding half to even, into element i of the 8-bit y. */
static void store_q8(mg_rt_dtype t, void *y, int64_t i, double v) {
  v = nearbyint(v);
  if (t == MG_RT_I8) ((int8_t *)y)[i] = (int8_t)(v < -128 ? -128 : v > 127 ? 127 : v);
  else ((uint8_t *)y)[i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

void mg_qlinear_matmul(const mg_qmatmul_params *p, int64_t batch, const void *a,
                       const int64_t *a_off, const float *a_scale, const void *a_zp,
                       const void *b, const int64_t *b_off, const float *b_scale,
                       const void *b_zp, const float *y_scale, const void *y_zp, void *y) {
  int64_t acc[QCHUNK];
  const double yz = (double)zp_at(p->y_t, y_zp, 0);
  for (int64_t t = 0; t < batch; t++)
    for (int64_t i = 0; i < p->M; i++) {
      const int32_t azp = (int32_t)zp_at(p->a_t, a_zp, p->a_zp_per_row ? i : 0);
      const float as = a_scale[p->a_scale_per_row ? i : 0];
      const int64_t yrow = (t * p->M + i) * p->N;
      for (int64_t j0 = 0; j0 < p->N; j0 += QCHUNK) {
        const int64_t nc = p->N - j0 < QCHUNK ? p->N - j0 : QCHUNK;
        qrow(p, a, a_off[t] + i * p->K, azp, b, b_off[t], b_zp, j0, nc, acc);
        for (int64_t j = 0; j < nc; j++) {
          float m = as * b_scale[p->b_scale_per_col ? j0 + j : 0];
          m = m / y_scale[0];
          store_q8(p->y_t, y, yrow + j0 + j, nearbyint((double)acc[j] * (double)m) + yz);
        }
      }
    }
}

/* ------------------------------------------------ integer convolutions */

/* The exact sum for output (n, m, oh, ow): over the group's input channels and the
 * kernel taps inside the input (padding contributes 0). */
static int64_t qconv_at(const mg_qconv2d_params *p, const void *x, int32_t xzp, const void *w,
                        int32_t wzp, int n, int m, int oh, int ow) {
  const int cg = p->C / p->group, g = m / (p->M / p->group);
  const int ih0 = oh * p->stride_h - p->pad_t, iw0 = ow * p->stride_w - p->pad_l;
  int64_t acc = 0;
  for (int ci = 0; ci < cg; ci++) {
    const int64_t xc = ((int64_t)n * p->C + (int64_t)g * cg + ci) * p->H * p->W;
    const int64_t wc = ((int64_t)m * cg + ci) * p->kh * p->kw;
    for (int u = 0; u < p->kh; u++) {
      const int ih = ih0 + u * p->dil_h;
      if (ih < 0 || ih >= p->H) continue;
      for (int v = 0; v < p->kw; v++) {
        const int iw = iw0 + v * p->dil_w;
        if (iw < 0 || iw >= p->W) continue;
        acc += (int64_t)(ld8(p->x_t, x, xc + (int64_t)ih * p->W + iw) - xzp) *
               (int64_t)(ld8(p->w_t, w, wc + (int64_t)u * p->kw + v) - wzp);
      }
    }
  }
  return acc;
}

void mg_conv_integer(const mg_qconv2d_params *p, const void *x, const void *x_zp,
                     const void *w, const void *w_zp, int32_t *y) {
  const int32_t xzp = (int32_t)zp_at(p->x_t, x_zp, 0);
  int64_t k = 0;
  for (int n = 0; n < p->N; n++)
    for (int m = 0; m < p->M; m++) {
      const int32_t wzp = (int32_t)zp_at(p->w_t, w_zp, p->w_zp_per_channel ? m : 0);
      for (int oh = 0; oh < p->OH; oh++)
        for (int ow = 0; ow < p->OW; ow++)
          y[k++] = (int32_t)(uint32_t)(uint64_t)qconv_at(p, x, xzp, w, wzp, n, m, oh, ow);
    }
}

void mg_qlinear_conv(const mg_qconv2d_params *p, const void *x, const float *x_scale,
                     const void *x_zp, const void *w, const float *w_scale, const void *w_zp,
                     const float *y_scale, const void *y_zp, const int32_t *bias, void *y) {
  const int32_t xzp = (int32_t)zp_at(p->x_t, x_zp, 0);
  const double yz = (double)zp_at(p->y_t, y_zp, 0);
  int64_t k = 0;
  for (int n = 0; n < p->N; n++)
    for (int m = 0; m < p->M; m++) {
      const int32_t wzp = (int32_t)zp_at(p->w_t, w_zp, p->w_zp_per_channel ? m : 0);
      float mul = x_scale[0] * w_scale[p->w_scale_per_channel ? m : 0];
      mul = mul / y_scale[0];
      for (int oh = 0; oh < p->OH; oh++)
        for (int ow = 0; ow < p->OW; ow++) {
          const int64_t s = qconv_at(p, x, xzp, w, wzp, n, m, oh, ow) + (bias ? bias[m] : 0);
          store_q8(p->y_t, y, k++, (double)s * (double)mul + yz);
        }
    }
}
