/* Pools, normalisations and LRN for the migc CPU runtime (contracts in mg_rt_nn.h).
 *
 * The windowed pools work one output row at a time and one kernel tap at a time:
 * for each tap, the output columns whose input column lies inside the image form
 * one contiguous range (computed once per tap), so the inner loop is a plain
 * strided max/add with no bounds checks, which compilers vectorise. */
#include "mg_runtime.h"
#include "mg_rt_select.h"

#include <math.h>
#include <stddef.h>

/* Lanes of the partial sums in reductions: fixed-size inner loops that the
 * compiler turns into vector adds without reassociating the whole sum. */
#define LANES 8

#if !defined(MG_RT_SELECT) || defined(MG_RT_USE_POOL2D) || defined(MG_RT_USE_NORM)
static int max_int(int a, int b) { return a > b ? a : b; }
#endif

/* The windowed pools are compiled when the model has one (mg_rt_select.h): they
 * are most of this file's -O3 compile time. */
#if !defined(MG_RT_SELECT) || defined(MG_RT_USE_POOL2D)
static int min_int(int a, int b) { return a < b ? a : b; }

/* Floor of a / b for b > 0. */
static int floor_div(int a, int b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

/* The output range [lo, hi) of positions o whose input o*s + off lies in [0, len). */
static void valid_range(int out, int len, int s, int off, int *lo, int *hi) {
  int l = off >= 0 ? 0 : (-off + s - 1) / s;
  int h = len - 1 - off < 0 ? 0 : (len - 1 - off) / s + 1;
  *lo = min_int(l, out);
  *hi = max_int(*lo, min_int(h, out));
}

/* How many taps k < kernel of a window starting at `start` (step dil) land in
 * [lo_bound, hi_bound). */
static int taps_inside(int start, int kernel, int dil, int lo_bound, int hi_bound) {
  int k0 = lo_bound - start <= 0 ? 0 : (lo_bound - start + dil - 1) / dil;
  int k1 = floor_div(hi_bound - 1 - start, dil); /* last tap inside */
  if (k1 > kernel - 1) k1 = kernel - 1;
  return k1 < k0 ? 0 : k1 - k0 + 1;
}

/* ------------------------------------------------------------- pools */

enum { POOL_MAX, POOL_SUM, POOL_LP };

/* y[ow] = max(y[ow], x[ow*s]) / y[ow] += x[ow*s] / y[ow] += |x[ow*s]|^p over one
 * tap's valid range of an output row. */
static void tap_row(int kind, int n, const float *x, int s, float p, float *y) {
  int i;
  if (kind == POOL_MAX) {
    if (s == 1)
      for (i = 0; i < n; i++) y[i] = x[i] > y[i] ? x[i] : y[i];
    else
      for (i = 0; i < n; i++) {
        const float v = x[(size_t)i * s];
        y[i] = v > y[i] ? v : y[i];
      }
  } else if (kind == POOL_SUM) {
    if (s == 1)
      for (i = 0; i < n; i++) y[i] += x[i];
    else
      for (i = 0; i < n; i++) y[i] += x[(size_t)i * s];
  } else if (p == 2.0f) {
    for (i = 0; i < n; i++) {
      const float v = x[(size_t)i * s];
      y[i] += v * v;
    }
  } else if (p == 1.0f) {
    for (i = 0; i < n; i++) y[i] += fabsf(x[(size_t)i * s]);
  } else {
    for (i = 0; i < n; i++) y[i] += powf(fabsf(x[(size_t)i * s]), p);
  }
}

/* The common body of the windowed pools: accumulate every tap into each output
 * row, then finish the row (divide for the average, root for Lp). */
static void pool2d(const mg_pool2d_params *p, int kind, int average, const float *x,
                   float *y) {
  const int H = p->H, W = p->W, OH = p->OH, OW = p->OW;
  int pl, oh, ow, ki, kj;
  for (pl = 0; pl < p->planes; pl++) {
    const float *xp = x + (size_t)pl * H * W;
    float *yp = y + (size_t)pl * OH * OW;
    for (oh = 0; oh < OH; oh++) {
      float *yr = yp + (size_t)oh * OW;
      const int hstart = oh * p->stride_h - p->pad_t;
      const float init = kind == POOL_MAX ? -INFINITY : 0.0f;
      for (ow = 0; ow < OW; ow++) yr[ow] = init;
      for (ki = 0; ki < p->kh; ki++) {
        const int ih = hstart + ki * p->dil_h;
        if (ih < 0 || ih >= H) continue;
        for (kj = 0; kj < p->kw; kj++) {
          const int off = kj * p->dil_w - p->pad_l;
          int lo, hi;
          valid_range(OW, W, p->stride_w, off, &lo, &hi);
          if (hi > lo)
            tap_row(kind, hi - lo, xp + (size_t)ih * W + (ptrdiff_t)lo * p->stride_w + off,
                    p->stride_w, p->p, yr + lo);
        }
      }
      if (average) {
        /* the window is a rectangle, so its tap count is rows times columns */
        const int lo_h = p->count_include_pad ? -p->pad_t : 0;
        const int hi_h = p->count_include_pad ? H + p->pad_b : H;
        const int lo_w = p->count_include_pad ? -p->pad_l : 0;
        const int hi_w = p->count_include_pad ? W + p->pad_r : W;
        const int rows = taps_inside(hstart, p->kh, p->dil_h, lo_h, hi_h);
        for (ow = 0; ow < OW; ow++) {
          const int cols = taps_inside(ow * p->stride_w - p->pad_l, p->kw, p->dil_w, lo_w, hi_w);
          yr[ow] = yr[ow] / (float)(rows * cols);
        }
      } else if (kind == POOL_LP) {
        if (p->p == 2.0f)
          for (ow = 0; ow < OW; ow++) yr[ow] = sqrtf(yr[ow]);
        else if (p->p != 1.0f)
          for (ow = 0; ow < OW; ow++) yr[ow] = powf(yr[ow], 1.0f / p->p);
      }
    }
  }
}

void mg_maxpool2d(const mg_pool2d_params *p, const float *x, float *y) {
  pool2d(p, POOL_MAX, 0, x, y);
}

void mg_avgpool2d(const mg_pool2d_params *p, const float *x, float *y) {
  pool2d(p, POOL_SUM, 1, x, y);
}

void mg_lppool2d(const mg_pool2d_params *p, const float *x, float *y) {
  pool2d(p, POOL_LP, 0, x, y);
}
#endif /* MG_RT_USE_POOL2D */

/* Sum of n floats in LANES partial sums (vectorisable, and more accurate than one
 * running sum). */
static float sum_f32(const float *x, int n) {
  float acc[LANES] = {0}, s = 0.0f;
  int i = 0, l;
  for (; i + LANES <= n; i += LANES)
    for (l = 0; l < LANES; l++) acc[l] += x[i + l];
  for (; i < n; i++) s += x[i];
  for (l = 0; l < LANES; l++) s += acc[l];
  return s;
}

void mg_global_avgpool(int planes, int size, const float *x, float *y) {
  int pl;
  for (pl = 0; pl < planes; pl++) y[pl] = sum_f32(x + (size_t)pl * size, size) / (float)size;
}

void mg_global_maxpool(int planes, int size, const float *x, float *y) {
  int pl, i;
  for (pl = 0; pl < planes; pl++) {
    const float *xp = x + (size_t)pl * size;
    float m = -INFINITY;
    for (i = 0; i < size; i++) m = (xp[i] > m || xp[i] != xp[i]) ? xp[i] : m;
    y[pl] = m;
  }
}

void mg_global_lppool(int planes, int size, float p, const float *x, float *y) {
  int pl, i;
  for (pl = 0; pl < planes; pl++) {
    const float *xp = x + (size_t)pl * size;
    double s = 0.0;
    for (i = 0; i < size; i++) s += pow(fabs((double)xp[i]), (double)p);
    y[pl] = (float)pow(s, 1.0 / (double)p);
  }
}

/* ---------------------------------------------------- normalisations */
/* Compiled when the model normalises (mg_rt_select.h). */
#if !defined(MG_RT_SELECT) || defined(MG_RT_USE_NORM)

void mg_channel_affine(int N, int C, int size, const float *scale, const float *shift,
                       const float *x, float *y, mg_act act, float a, float b) {
  int n, c, i;
  for (n = 0; n < N; n++)
    for (c = 0; c < C; c++) {
      const size_t base = ((size_t)n * C + c) * size;
      const float s = scale[c], t = shift[c];
      const float *xr = x + base;
      float *yr = y + base;
      for (i = 0; i < size; i++) yr[i] = xr[i] * s + t;
      if (act != MG_ACT_NONE) mg_bias_act(yr, 1, size, size, NULL, act, a, b);
    }
}

void mg_batchnorm(int N, int C, int size, const float *x, const float *scale,
                  const float *bias, const float *mean, const float *var, float eps,
                  float *y, mg_act act, float a, float b) {
  int n, c, i;
  for (n = 0; n < N; n++)
    for (c = 0; c < C; c++) {
      const size_t base = ((size_t)n * C + c) * size;
      const float s = scale[c] / sqrtf(var[c] + eps), t = bias[c] - mean[c] * s;
      const float *xr = x + base;
      float *yr = y + base;
      for (i = 0; i < size; i++) yr[i] = xr[i] * s + t;
      if (act != MG_ACT_NONE) mg_bias_act(yr, 1, size, size, NULL, act, a, b);
    }
}

/* Mean and 1/sqrt(var + eps) of n values, two passes (no cancellation). */
static void moments(const float *x, int n, float eps, float *mean, float *inv_std) {
  float acc[LANES] = {0}, sq = 0.0f, mu;
  int i = 0, l;
  mu = sum_f32(x, n) / (float)n;
  for (; i + LANES <= n; i += LANES)
    for (l = 0; l < LANES; l++) {
      const float d = x[i + l] - mu;
      acc[l] += d * d;
    }
  for (; i < n; i++) sq += (x[i] - mu) * (x[i] - mu);
  for (l = 0; l < LANES; l++) sq += acc[l];
  *mean = mu;
  *inv_std = 1.0f / sqrtf(sq / (float)n + eps);
}

void mg_layernorm(int rows, int len, const float *x, const float *scale,
                  const float *bias, float eps, float *y, float *mean, float *inv_std) {
  int r, i;
  for (r = 0; r < rows; r++) {
    const float *xr = x + (size_t)r * len;
    float *yr = y + (size_t)r * len;
    float mu, inv;
    moments(xr, len, eps, &mu, &inv);
    if (bias)
      for (i = 0; i < len; i++) yr[i] = (xr[i] - mu) * inv * scale[i] + bias[i];
    else
      for (i = 0; i < len; i++) yr[i] = (xr[i] - mu) * inv * scale[i];
    if (mean) mean[r] = mu;
    if (inv_std) inv_std[r] = inv;
  }
}

void mg_groupnorm(int N, int C, int groups, int size, const float *x, const float *scale,
                  const float *bias, float eps, float *y) {
  const int cg = C / groups;
  int n, g, c, i;
  for (n = 0; n < N; n++)
    for (g = 0; g < groups; g++) {
      const size_t base = ((size_t)n * C + (size_t)g * cg) * size;
      float mu, inv;
      moments(x + base, cg * size, eps, &mu, &inv);
      for (c = 0; c < cg; c++) {
        const int ch = g * cg + c;
        const float s = inv * scale[ch], t = bias[ch] - mu * inv * scale[ch];
        const float *xr = x + base + (size_t)c * size;
        float *yr = y + base + (size_t)c * size;
        for (i = 0; i < size; i++) yr[i] = xr[i] * s + t;
      }
    }
}

void mg_lrn(int outer, int C, int inner, int size, float alpha, float beta, float bias,
            const float *x, float *y) {
  const int lo = (size - 1) / 2, hi = size / 2;
  const float scale = alpha / (float)size;
  int o, c, k, i;
  for (o = 0; o < outer; o++) {
    const float *xo = x + (size_t)o * C * inner;
    float *yo = y + (size_t)o * C * inner;
    for (c = 0; c < C; c++) {
      float *yr = yo + (size_t)c * inner;
      const float *xr = xo + (size_t)c * inner;
      for (i = 0; i < inner; i++) yr[i] = 0.0f;
      for (k = max_int(0, c - lo); k <= c + hi && k < C; k++) {
        const float *xk = xo + (size_t)k * inner;
        for (i = 0; i < inner; i++) yr[i] += xk[i] * xk[i];
      }
      if (beta == 0.75f)
        for (i = 0; i < inner; i++) {
          /* t^-0.75 as 1/(sqrt(t) * sqrt(sqrt(t))): much cheaper than powf */
          const float t = bias + scale * yr[i], r = sqrtf(t);
          yr[i] = xr[i] / (r * sqrtf(r));
        }
      else
        for (i = 0; i < inner; i++) yr[i] = xr[i] / powf(bias + scale * yr[i], beta);
    }
  }
}
#endif /* MG_RT_USE_NORM */
