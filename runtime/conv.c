/* 2-D convolution and fused bias + activation for the migc CPU runtime (contract in
 * mg_runtime.h). Plain C99 plus an optional AVX2 path for depthwise rows.
 *
 * Three strategies, by shape:
 *   - depthwise (one input channel per group): a direct kernel. Its arithmetic is
 *     kh*kw multiply-adds per output, too little to amortise im2col or packing;
 *   - pointwise (1x1, stride 1, no padding): x is already the K x N matrix SGEMM
 *     wants (channels x pixels), so SGEMM reads it in place;
 *   - general: im2col of a chunk of output positions into scratch, then SGEMM.
 *     Chunking bounds the scratch (and keeps the column buffer in cache) without
 *     changing the result: every output element is still one full dot product. */
#include "mg_runtime.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__AVX2__) && defined(__FMA__) && !defined(MG_RUNTIME_PORTABLE)
#define MG_CONV_AVX2 1
#include <immintrin.h>
#endif

/* Largest im2col chunk, in floats (2 MiB): about the size of a core's L2 on current
 * x86 and ARM parts, big enough that SGEMM sees hundreds of columns. */
#define COL_BUDGET (1 << 19)
/* Fewest columns a chunk may have, so deep kernels (K of several thousand) still
 * give SGEMM a block worth packing A for. */
#define COL_MIN 64
#define ALIGN_SLACK 16

static int min_int(int a, int b) { return a < b ? a : b; }
static int max_int(int a, int b) { return a > b ? a : b; }

static float *align64(float *p) {
  uintptr_t u = (uintptr_t)p;
  return (float *)(void *)(p + ((64 - (u & 63)) & 63) / sizeof(float));
}

int mg_conv_out_dim(int in, int k, int stride, int dil, int pad_begin, int pad_end) {
  int span = dil * (k - 1) + 1;
  int room = in + pad_begin + pad_end - span;
  return room < 0 ? 0 : room / stride + 1;
}

/* ----------------------------------------------------------- activations */

/* act(v) for one value; see mg_act in mg_runtime.h. Written so NaN propagates
 * (comparisons with NaN are false, so the NaN itself is returned). */
static float act1(float v, mg_act act, float a, float b) {
  switch (act) {
  case MG_ACT_NONE: return v;
  case MG_ACT_RELU: return v < 0.0f ? 0.0f : v;
  case MG_ACT_CLIP: return v < a ? a : (v > b ? b : v);
  case MG_ACT_LEAKY_RELU: return v < 0.0f ? a * v : v;
  case MG_ACT_HARDSIGMOID: {
    float t = a * v + b;
    return t < 0.0f ? 0.0f : (t > 1.0f ? 1.0f : t);
  }
  case MG_ACT_HARDSWISH: {
    float t = v * (1.0f / 6.0f) + 0.5f;
    return v * (t < 0.0f ? 0.0f : (t > 1.0f ? 1.0f : t));
  }
  case MG_ACT_SIGMOID: return 1.0f / (1.0f + expf(-v));
  case MG_ACT_SILU: return v / (1.0f + expf(-v));
  case MG_ACT_TANH: return tanhf(v);
  case MG_ACT_GELU: return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
  case MG_ACT_GELU_TANH:
    return 0.5f * v * (1.0f + tanhf(0.79788456080286536f * (v + 0.044715f * v * v * v)));
  }
  return v;
}

/* Bias and activation over one row of n values. The common cheap cases get loops
 * of their own so they vectorise; the rest call act1 per element. */
static void bias_act_row(float *y, int n, float bias, mg_act act, float a, float b) {
  int i;
  switch (act) {
  case MG_ACT_NONE:
    if (bias != 0.0f)
      for (i = 0; i < n; i++) y[i] += bias;
    return;
  case MG_ACT_RELU:
    for (i = 0; i < n; i++) {
      float v = y[i] + bias;
      y[i] = v < 0.0f ? 0.0f : v;
    }
    return;
  case MG_ACT_CLIP:
    for (i = 0; i < n; i++) {
      float v = y[i] + bias;
      y[i] = v < a ? a : (v > b ? b : v);
    }
    return;
  default:
    for (i = 0; i < n; i++) y[i] = act1(y[i] + bias, act, a, b);
    return;
  }
}

void mg_bias_act(float *y, int channels, int n, int plane, const float *bias,
                 mg_act act, float a, float b) {
  int c;
  if (act == MG_ACT_NONE && !bias) return;
  for (c = 0; c < channels; c++)
    bias_act_row(y + (size_t)c * plane, n, bias ? bias[c] : 0.0f, act, a, b);
}

/* ----------------------------------------------------------------- im2col */

/* First and one-past-last output column ow whose input column ow*s + off lies in
 * [0, W): the valid range of one kernel tap, outside which the tap reads padding. */
static void valid_range(int OW, int W, int s, int off, int *lo, int *hi) {
  /* ow*s + off >= 0  <=>  ow >= ceil(-off / s);  ow*s + off <= W-1 */
  int l = off >= 0 ? 0 : (-off + s - 1) / s;
  int h = W - 1 - off < 0 ? 0 : (W - 1 - off) / s + 1;
  *lo = min_int(l, OW);
  *hi = max_int(*lo, min_int(h, OW));
}

/* Writes the columns q0 .. q0+nq-1 (output positions q = oh*OW + ow) of the im2col
 * matrix of one group: row r = (c*kh + ki)*kw + kj holds, for each position, the
 * input x[c][oh*sh - pt + ki*dh][ow*sw - pl + kj*dw], or 0 in the padding. col is
 * (Cg*kh*kw) x nq, row-major (ld nq), as SGEMM's B. x points at the group's first
 * channel. */
static void im2col(const mg_conv2d_params *p, const float *x, int Cg, int q0, int nq,
                   float *col) {
  const int OW = p->OW, W = p->W, H = p->H, sw = p->stride_w;
  int c, ki, kj;
  for (c = 0; c < Cg; c++) {
    const float *xc = x + (size_t)c * H * W;
    for (ki = 0; ki < p->kh; ki++) {
      for (kj = 0; kj < p->kw; kj++) {
        const int offw = kj * p->dil_w - p->pad_l;
        int lo, hi, q = q0, oh = q0 / OW, ow0 = q0 % OW;
        float *d = col;
        valid_range(OW, W, sw, offw, &lo, &hi);
        /* one output row (or the part of it inside the chunk) at a time */
        while (q < q0 + nq) {
          const int ow1 = min_int(OW, ow0 + (q0 + nq - q));
          const int ih = oh * p->stride_h - p->pad_t + ki * p->dil_h;
          int ow;
          if (ih < 0 || ih >= H) {
            for (ow = ow0; ow < ow1; ow++) *d++ = 0.0f;
          } else {
            /* input column of ow is ow*sw + offw, inside the row for lo <= ow < hi */
            const float *xr = xc + (size_t)ih * W;
            const int l = max_int(ow0, lo), h = min_int(ow1, hi);
            for (ow = ow0; ow < l && ow < ow1; ow++) *d++ = 0.0f;
            if (sw == 1 && h > l) {
              memcpy(d, xr + l + offw, (size_t)(h - l) * sizeof(float));
              d += h - l;
              ow = h;
            } else {
              for (; ow < h; ow++) *d++ = xr[ow * sw + offw];
            }
            for (; ow < ow1; ow++) *d++ = 0.0f;
          }
          q += ow1 - ow0;
          oh++;
          ow0 = 0;
        }
        col += nq;
      }
    }
  }
}

/* Columns per im2col chunk for a kernel of K = Cg*kh*kw rows: all of OH*OW when it
 * fits COL_BUDGET, else as many as fit (a multiple of 16, at least COL_MIN). */
static int chunk_cols(const mg_conv2d_params *p, int K) {
  const int npos = p->OH * p->OW;
  int cols;
  if ((size_t)K * npos <= COL_BUDGET) return npos;
  cols = max_int(COL_MIN, (COL_BUDGET / K) / 16 * 16);
  return min_int(cols, npos);
}

static int is_depthwise(const mg_conv2d_params *p) {
  return p->group == p->C && p->group > 1;
}

static int is_pointwise(const mg_conv2d_params *p) {
  return p->kh == 1 && p->kw == 1 && p->stride_h == 1 && p->stride_w == 1 &&
         p->pad_t == 0 && p->pad_l == 0 && p->pad_b == 0 && p->pad_r == 0;
}

size_t mg_conv2d_scratch(const mg_conv2d_params *p) {
  const int Cg = p->C / p->group, Mg = p->M / p->group;
  const int K = Cg * p->kh * p->kw;
  int cols;
  if (is_depthwise(p)) return 0;
  if (is_pointwise(p)) return mg_sgemm_scratch(Mg, p->OH * p->OW, Cg);
  cols = chunk_cols(p, K);
  return ALIGN_SLACK + (size_t)K * cols + mg_sgemm_scratch(Mg, cols, K);
}

/* -------------------------------------------------------------- depthwise */

/* y[ow] += wv * x[ow*s] for ow < n: one kernel tap applied along an output row. */
static void tap_row(int n, float wv, const float *x, int s, float *y) {
  int ow = 0;
#if defined(MG_CONV_AVX2)
  const __m256 vw = _mm256_set1_ps(wv);
  if (s == 1) {
    for (; ow + 8 <= n; ow += 8)
      _mm256_storeu_ps(y + ow, _mm256_fmadd_ps(vw, _mm256_loadu_ps(x + ow),
                                               _mm256_loadu_ps(y + ow)));
  } else if (s == 2) {
    /* even elements of 16 consecutive inputs. The last vector would read x[2n-1],
     * one past the last input used, so it stops one vector early. */
    const __m256i perm = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
    for (; ow + 8 < n; ow += 8) {
      __m256 lo = _mm256_loadu_ps(x + 2 * ow), hi = _mm256_loadu_ps(x + 2 * ow + 8);
      __m256 ev = _mm256_permutevar8x32_ps(_mm256_shuffle_ps(lo, hi, 0x88), perm);
      _mm256_storeu_ps(y + ow, _mm256_fmadd_ps(vw, ev, _mm256_loadu_ps(y + ow)));
    }
  }
#endif
  for (; ow < n; ow++) y[ow] += wv * x[(size_t)ow * s];
}

/* Depthwise convolution: group == C, output channel oc reads input channel
 * oc / (M/C) only. Each output row starts at the bias and accumulates one kernel
 * tap at a time over its valid column range (taps reading padding are skipped), so
 * the inner loop is a plain strided multiply-add with no bounds checks. */
static void conv_depthwise(const mg_conv2d_params *p, const float *x, const float *w,
                           const float *bias, float *y) {
  const int mult = p->M / p->C, khw = p->kh * p->kw;
  const int OH = p->OH, OW = p->OW, H = p->H, W = p->W;
  int n, oc, oh, ki, kj, ow;
  for (n = 0; n < p->N; n++) {
    for (oc = 0; oc < p->M; oc++) {
      const float *xc = x + ((size_t)n * p->C + oc / mult) * H * W;
      const float *wc = w + (size_t)oc * khw;
      float *yc = y + ((size_t)n * p->M + oc) * OH * OW;
      const float b0 = bias ? bias[oc] : 0.0f;
      for (oh = 0; oh < OH; oh++) {
        float *yr = yc + (size_t)oh * OW;
        for (ow = 0; ow < OW; ow++) yr[ow] = b0;
        for (ki = 0; ki < p->kh; ki++) {
          const int ih = oh * p->stride_h - p->pad_t + ki * p->dil_h;
          if (ih < 0 || ih >= H) continue;
          for (kj = 0; kj < p->kw; kj++) {
            const int off = kj * p->dil_w - p->pad_l;
            int lo, hi;
            valid_range(OW, W, p->stride_w, off, &lo, &hi);
            if (hi > lo)
              tap_row(hi - lo, wc[ki * p->kw + kj],
                      xc + (size_t)ih * W + (ptrdiff_t)lo * p->stride_w + off,
                      p->stride_w, yr + lo);
          }
        }
        if (p->act != MG_ACT_NONE) bias_act_row(yr, OW, 0.0f, p->act, p->act_a, p->act_b);
      }
    }
  }
}

/* ------------------------------------------------------------------ entry */

void mg_conv2d(const mg_conv2d_params *p, const float *x, const float *w,
               const float *bias, float *y, float *scratch) {
  const int G = p->group, Cg = p->C / G, Mg = p->M / G;
  const int K = Cg * p->kh * p->kw, npos = p->OH * p->OW;
  const size_t xplane = (size_t)p->H * p->W, yplane = (size_t)npos;
  int n, g;
  if (is_depthwise(p)) {
    conv_depthwise(p, x, w, bias, y);
    return;
  }
  for (n = 0; n < p->N; n++) {
    for (g = 0; g < G; g++) {
      const float *xg = x + ((size_t)n * p->C + (size_t)g * Cg) * xplane;
      const float *wg = w + (size_t)g * Mg * K;
      const float *bg = bias ? bias + (size_t)g * Mg : NULL;
      float *yg = y + ((size_t)n * p->M + (size_t)g * Mg) * yplane;
      if (is_pointwise(p)) {
        /* y[Mg x HW] = w[Mg x Cg] * x[Cg x HW] */
        mg_sgemm(Mg, npos, Cg, 1.0f, wg, Cg, 0, xg, npos, 0, 0.0f, yg, npos, scratch);
        mg_bias_act(yg, Mg, npos, npos, bg, p->act, p->act_a, p->act_b);
      } else {
        const int cols = chunk_cols(p, K);
        float *col = align64(scratch);
        float *gemm_scratch = col + (size_t)K * cols;
        int q0;
        for (q0 = 0; q0 < npos; q0 += cols) {
          const int nq = min_int(cols, npos - q0);
          im2col(p, xg, Cg, q0, nq, col);
          /* y[:, q0..q0+nq] = w[Mg x K] * col[K x nq]; the epilogue runs on the
           * chunk while it is still in cache */
          mg_sgemm(Mg, nq, K, 1.0f, wg, K, 0, col, nq, 0, 0.0f, yg + q0, npos,
                   gemm_scratch);
          mg_bias_act(yg + q0, Mg, nq, npos, bg, p->act, p->act_a, p->act_b);
        }
      }
    }
  }
}

/* --------------------------------------------------------- conv transpose */

size_t mg_conv_transpose2d_scratch(const mg_convt2d_params *p) {
  const int Cg = p->C / p->group, rows = p->M / p->group * p->kh * p->kw;
  const int npos = p->H * p->W;
  return ALIGN_SLACK + (size_t)rows * npos + mg_sgemm_scratch(rows, npos, Cg);
}

/* Scatters the column matrix of one group (rows (m*kh + ki)*kw + kj, one column per
 * input position) into its Mg output planes: the adjoint of im2col. Each row adds
 * into output row oh at columns iw*sw + off over the iw whose target is inside. */
static void col2im_add(const mg_convt2d_params *p, int Mg, const float *cols, float *y) {
  const int H = p->H, W = p->W, OH = p->OH, OW = p->OW, sw = p->stride_w;
  int m, ki, kj, ih, iw;
  for (m = 0; m < Mg; m++) {
    float *ym = y + (size_t)m * OH * OW;
    for (ki = 0; ki < p->kh; ki++)
      for (kj = 0; kj < p->kw; kj++) {
        const float *row = cols + ((size_t)(m * p->kh + ki) * p->kw + kj) * H * W;
        const int off = kj * p->dil_w - p->pad_l;
        int lo, hi;
        valid_range(W, OW, sw, off, &lo, &hi);
        if (hi <= lo) continue;
        for (ih = 0; ih < H; ih++) {
          const int oh = ih * p->stride_h - p->pad_t + ki * p->dil_h;
          const float *r = row + (size_t)ih * W;
          float *yr;
          if (oh < 0 || oh >= OH) continue;
          yr = ym + (size_t)oh * OW + off;
          if (sw == 1)
            for (iw = lo; iw < hi; iw++) yr[iw] += r[iw];
          else
            for (iw = lo; iw < hi; iw++) yr[(size_t)iw * sw] += r[iw];
        }
      }
  }
}

void mg_conv_transpose2d(const mg_convt2d_params *p, const float *x, const float *w,
                         const float *bias, float *y, float *scratch) {
  const int G = p->group, Cg = p->C / G, Mg = p->M / G;
  const int rows = Mg * p->kh * p->kw, npos = p->H * p->W;
  const size_t oplane = (size_t)p->OH * p->OW;
  float *cols = align64(scratch);
  float *gemm_scratch = cols + (size_t)rows * npos;
  int n, g, m;
  size_t i;
  for (n = 0; n < p->N; n++)
    for (g = 0; g < G; g++) {
      const float *xg = x + ((size_t)n * p->C + (size_t)g * Cg) * npos;
      const float *wg = w + (size_t)g * Cg * rows;
      float *yg = y + ((size_t)n * p->M + (size_t)g * Mg) * oplane;
      /* cols[rows x npos] = wg^T (wg is Cg x rows) * xg[Cg x npos] */
      mg_sgemm(rows, npos, Cg, 1.0f, wg, rows, 1, xg, npos, 0, 0.0f, cols, npos,
               gemm_scratch);
      for (m = 0; m < Mg; m++) {
        const float b0 = bias ? bias[g * Mg + m] : 0.0f;
        float *ym = yg + (size_t)m * oplane;
        for (i = 0; i < oplane; i++) ym[i] = b0;
      }
      col2im_add(p, Mg, cols, yg);
    }
}
