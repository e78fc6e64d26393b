/* int8 convolution (mg_rt_int8.h): u8 activations x s8 weights, int32
 * accumulation, dequantisation, bias and activation fused into the epilogue.
 *
 * The GEMM path packs a chunk of output positions as im2col columns in groups of
 * four consecutive K values per position ([K/4][positions][4] bytes): that is the
 * operand order of vpdpbusd, which multiplies four u8 by four s8 and adds the
 * four products to one int32 lane, so one broadcast weight word meets sixteen
 * positions. The portable tile computes the same integers in plain C. */
#include "mg_rt_int8.h"

#include <math.h>
#include <string.h>

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__) && !defined(MG_RUNTIME_PORTABLE)
#include <immintrin.h>
#define Q8_VNNI 1
#endif

#define Q8_MR 4               /* output channels per tile */
#define Q8_NB 64              /* output positions per tile (four 16-lane vectors) */
#define Q8_CHUNK_BYTES (1u << 20) /* packed columns of one chunk: about half an L2 */
#define Q8_ALIGN 64

/* The reduction length of one output value. */
static int kdim(const mg_conv2d_params *c) { return c->C / c->group * c->kh * c->kw; }
static int kpad(int k) { return (k + 3) & ~3; }
static size_t align_up(size_t n) { return (n + Q8_ALIGN - 1) / Q8_ALIGN * Q8_ALIGN; }
static int round64(int n) { return (n + Q8_NB - 1) / Q8_NB * Q8_NB; }

/* One input channel per group and an integral multiplier: the direct kernel. */
static int is_depthwise(const mg_conv2d_params *c) { return c->group == c->C && c->M % c->C == 0; }

/* Output positions per packed chunk: a multiple of the tile width whose columns
 * fit Q8_CHUNK_BYTES, never more than the layer has (rounded up). */
static int chunk_positions(const mg_conv2d_params *c) {
  int per = (int)(Q8_CHUNK_BYTES / (unsigned)kpad(kdim(c))) / Q8_NB * Q8_NB;
  int all = round64(c->OH * c->OW);
  if (per < Q8_NB) per = Q8_NB;
  return per < all ? per : all;
}

size_t mg_q8_conv_prepared_bytes(const mg_q8_conv_params *p) {
  return (size_t)p->conv.M * (2 * sizeof(float) + (size_t)kpad(kdim(&p->conv)));
}

void mg_q8_weight_scales(const float *w, int rows, int cols, float *scale) {
  for (int r = 0; r < rows; r++) {
    float m = 0.0f;
    for (int k = 0; k < cols; k++) {
      const float a = fabsf(w[(size_t)r * (size_t)cols + (size_t)k]);
      if (a > m) m = a;
    }
    scale[r] = m > 0.0f ? m / 127.0f : 1.0f;
  }
}

void mg_q8_conv_prepare(const mg_q8_conv_params *p, const float *w, const float *w_scale, void *out) {
  const int M = p->conv.M, K = kdim(&p->conv), Kp = kpad(K);
  char *o = out;
  int8_t *q = (int8_t *)(o + (size_t)M * 8);
  for (int m = 0; m < M; m++) {
    const float inv = 1.0f / w_scale[m], s = p->in_scale * w_scale[m];
    int32_t sum = 0;
    for (int k = 0; k < Kp; k++) {
      long r = k < K ? lrintf(w[(size_t)m * (size_t)K + (size_t)k] * inv) : 0;
      r = r < -127 ? -127 : r > 127 ? 127 : r;
      q[(size_t)m * (size_t)Kp + (size_t)k] = (int8_t)r;
      sum += (int32_t)r;
    }
    const int32_t corr = p->in_zp * sum;
    memcpy(o + (size_t)m * 4, &s, 4);
    memcpy(o + (size_t)M * 4 + (size_t)m * 4, &corr, 4);
  }
}

/* Bytes of the quantised input plane of one group. */
static size_t plane_bytes(const mg_conv2d_params *c) {
  return align_up((size_t)(c->C / c->group) * (size_t)c->H * (size_t)c->W);
}

size_t mg_q8_conv2d_scratch(const mg_q8_conv_params *p) {
  const mg_conv2d_params *c = &p->conv;
  size_t bytes;
  if (is_depthwise(c)) {
    const size_t ph = (size_t)(c->H + c->pad_t + c->pad_b), pw = (size_t)(c->W + c->pad_l + c->pad_r);
    bytes = align_up(ph * pw * sizeof(int16_t)) + align_up((size_t)c->OW * sizeof(int32_t));
  } else {
    const size_t npr = (size_t)chunk_positions(c);
    bytes = plane_bytes(c) + align_up(4 * npr) + align_up((size_t)kpad(kdim(c)) * npr);
  }
  return (bytes + Q8_ALIGN) / sizeof(float);
}

/* q[i] = clamp(round-to-nearest-even(x[i] / scale) + zp, lo, 255), lo = 1 for
 * the symmetric zero point 128 (so that the range is -127..127 about it). The
 * rounding adds and subtracts 1.5 * 2^23, exact for the clamped range and
 * vectorisable; NaN quantises to lo. */
static void quantise(const float *x, size_t n, float inv, int zp, uint8_t *q) {
  const float lo = zp ? 1.0f : 0.0f, z = (float)zp, magic = 12582912.0f;
  for (size_t i = 0; i < n; i++) {
    float t = x[i] * inv + z;
    t = t >= lo ? t : lo;
    t = t <= 255.0f ? t : 255.0f;
    q[i] = (uint8_t)((t + magic) - magic);
  }
}

/* Row k of the im2col matrix for output positions [p0, p0 + np) of one group's
 * quantised plane qg, padded with zp (the code of 0.0) up to npr positions. */
static void gather_row(const mg_conv2d_params *c, const uint8_t *qg, int k, int p0, int np, int npr, uint8_t zp,
                       uint8_t *row) {
  const int kk = c->kh * c->kw, ch = k / kk, ki = k % kk / c->kw, kj = k % c->kw;
  const uint8_t *plane = qg + (size_t)ch * (size_t)c->H * (size_t)c->W;
  int pp = 0;
  while (pp < np) {
    const int p = p0 + pp, oh = p / c->OW, ow0 = p % c->OW;
    const int len = c->OW - ow0 < np - pp ? c->OW - ow0 : np - pp;
    const int ih = oh * c->stride_h - c->pad_t + ki * c->dil_h;
    uint8_t *r = row + pp;
    if (ih < 0 || ih >= c->H) {
      memset(r, zp, (size_t)len);
    } else {
      const uint8_t *src = plane + (size_t)ih * (size_t)c->W;
      const int sw = c->stride_w, first = ow0 * sw + kj * c->dil_w - c->pad_l; /* iw of j = 0 */
      /* j in [lo, hi) reads inside the row; the rest is padding */
      int lo = first >= 0 ? 0 : (-first + sw - 1) / sw, hi = first >= c->W ? 0 : (c->W - first + sw - 1) / sw;
      if (lo > len) lo = len;
      if (hi > len) hi = len;
      if (hi < lo) hi = lo;
      memset(r, zp, (size_t)lo);
      if (sw == 1) memcpy(r + lo, src + (first + lo), (size_t)(hi - lo));
      else
        for (int j = lo; j < hi; j++) r[j] = src[first + j * sw];
      memset(r + hi, zp, (size_t)(len - hi));
    }
    pp += len;
  }
  if (npr > np) memset(row + np, zp, (size_t)(npr - np));
}

/* The packed columns of positions [p0, p0 + np): xp[kg][pp][s] = row 4 kg + s at
 * position pp (0 beyond K, where the weights are 0 too). */
static void pack_chunk(const mg_conv2d_params *c, const uint8_t *qg, int p0, int np, int npr, uint8_t zp,
                       uint8_t *rows, uint8_t *xp) {
  const int K = kdim(c), Kp = kpad(K);
  for (int kg = 0; kg < Kp / 4; kg++) {
    uint8_t *out = xp + (size_t)kg * (size_t)npr * 4;
    for (int s = 0; s < 4; s++) {
      uint8_t *r = rows + (size_t)s * (size_t)npr;
      if (4 * kg + s < K) gather_row(c, qg, 4 * kg + s, p0, np, npr, zp, r);
      else memset(r, 0, (size_t)npr);
    }
    const uint8_t *r0 = rows, *r1 = rows + npr, *r2 = rows + 2 * (size_t)npr, *r3 = rows + 3 * (size_t)npr;
    for (int j = 0; j < npr; j++) {
      out[4 * j] = r0[j];
      out[4 * j + 1] = r1[j];
      out[4 * j + 2] = r2[j];
      out[4 * j + 3] = r3[j];
    }
  }
}

/* acc[r][j] = sum over k of x(k, position j) * w(row r, k), for `rows` <= Q8_MR
 * weight rows (Kp bytes apart) and Q8_NB positions of packed columns xp (groups
 * xs bytes apart). */
#ifdef Q8_VNNI
static void tile(int rows, int kgs, const int8_t *w, int Kp, const uint8_t *xp, size_t xs,
                 int32_t acc[Q8_MR][Q8_NB]) {
  if (rows == Q8_MR) {
    __m512i a00 = _mm512_setzero_si512(), a01 = a00, a02 = a00, a03 = a00, a10 = a00, a11 = a00, a12 = a00,
            a13 = a00, a20 = a00, a21 = a00, a22 = a00, a23 = a00, a30 = a00, a31 = a00, a32 = a00, a33 = a00;
    for (int kg = 0; kg < kgs; kg++) {
      const uint8_t *x = xp + (size_t)kg * xs;
      const __m512i x0 = _mm512_loadu_si512(x), x1 = _mm512_loadu_si512(x + 64), x2 = _mm512_loadu_si512(x + 128),
                    x3 = _mm512_loadu_si512(x + 192);
      int32_t b;
      memcpy(&b, w + 4 * (size_t)kg, 4);
      __m512i wb = _mm512_set1_epi32(b);
      a00 = _mm512_dpbusd_epi32(a00, x0, wb), a01 = _mm512_dpbusd_epi32(a01, x1, wb);
      a02 = _mm512_dpbusd_epi32(a02, x2, wb), a03 = _mm512_dpbusd_epi32(a03, x3, wb);
      memcpy(&b, w + (size_t)Kp + 4 * (size_t)kg, 4);
      wb = _mm512_set1_epi32(b);
      a10 = _mm512_dpbusd_epi32(a10, x0, wb), a11 = _mm512_dpbusd_epi32(a11, x1, wb);
      a12 = _mm512_dpbusd_epi32(a12, x2, wb), a13 = _mm512_dpbusd_epi32(a13, x3, wb);
      memcpy(&b, w + 2 * (size_t)Kp + 4 * (size_t)kg, 4);
      wb = _mm512_set1_epi32(b);
      a20 = _mm512_dpbusd_epi32(a20, x0, wb), a21 = _mm512_dpbusd_epi32(a21, x1, wb);
      a22 = _mm512_dpbusd_epi32(a22, x2, wb), a23 = _mm512_dpbusd_epi32(a23, x3, wb);
      memcpy(&b, w + 3 * (size_t)Kp + 4 * (size_t)kg, 4);
      wb = _mm512_set1_epi32(b);
      a30 = _mm512_dpbusd_epi32(a30, x0, wb), a31 = _mm512_dpbusd_epi32(a31, x1, wb);
      a32 = _mm512_dpbusd_epi32(a32, x2, wb), a33 = _mm512_dpbusd_epi32(a33, x3, wb);
    }
    _mm512_storeu_si512(acc[0], a00), _mm512_storeu_si512(acc[0] + 16, a01);
    _mm512_storeu_si512(acc[0] + 32, a02), _mm512_storeu_si512(acc[0] + 48, a03);
    _mm512_storeu_si512(acc[1], a10), _mm512_storeu_si512(acc[1] + 16, a11);
    _mm512_storeu_si512(acc[1] + 32, a12), _mm512_storeu_si512(acc[1] + 48, a13);
    _mm512_storeu_si512(acc[2], a20), _mm512_storeu_si512(acc[2] + 16, a21);
    _mm512_storeu_si512(acc[2] + 32, a22), _mm512_storeu_si512(acc[2] + 48, a23);
    _mm512_storeu_si512(acc[3], a30), _mm512_storeu_si512(acc[3] + 16, a31);
    _mm512_storeu_si512(acc[3] + 32, a32), _mm512_storeu_si512(acc[3] + 48, a33);
    return;
  }
  for (int r = 0; r < rows; r++) {
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
    for (int kg = 0; kg < kgs; kg++) {
      const uint8_t *x = xp + (size_t)kg * xs;
      int32_t b;
      memcpy(&b, w + (size_t)r * (size_t)Kp + 4 * (size_t)kg, 4);
      const __m512i wb = _mm512_set1_epi32(b);
      a0 = _mm512_dpbusd_epi32(a0, _mm512_loadu_si512(x), wb);
      a1 = _mm512_dpbusd_epi32(a1, _mm512_loadu_si512(x + 64), wb);
      a2 = _mm512_dpbusd_epi32(a2, _mm512_loadu_si512(x + 128), wb);
      a3 = _mm512_dpbusd_epi32(a3, _mm512_loadu_si512(x + 192), wb);
    }
    _mm512_storeu_si512(acc[r], a0), _mm512_storeu_si512(acc[r] + 16, a1);
    _mm512_storeu_si512(acc[r] + 32, a2), _mm512_storeu_si512(acc[r] + 48, a3);
  }
}
#else
static void tile(int rows, int kgs, const int8_t *w, int Kp, const uint8_t *xp, size_t xs,
                 int32_t acc[Q8_MR][Q8_NB]) {
  for (int r = 0; r < rows; r++) {
    int32_t *a = acc[r];
    for (int j = 0; j < Q8_NB; j++) a[j] = 0;
    for (int kg = 0; kg < kgs; kg++) {
      const uint8_t *x = xp + (size_t)kg * xs;
      const int8_t *wr = w + (size_t)r * (size_t)Kp + 4 * (size_t)kg;
      const int32_t w0 = wr[0], w1 = wr[1], w2 = wr[2], w3 = wr[3];
      for (int j = 0; j < Q8_NB; j++)
        a[j] += x[4 * j] * w0 + x[4 * j + 1] * w1 + x[4 * j + 2] * w2 + x[4 * j + 3] * w3;
    }
  }
}
#endif

/* The activation applied in the epilogue itself; the others run after the
 * layer (mg_bias_act). */
static int act_inline(mg_act a) { return a == MG_ACT_NONE || a == MG_ACT_RELU || a == MG_ACT_CLIP; }

/* y[r * ys + j] = act((acc[r][j] - corr[r]) * scale[r] + bias[r]) for j < n. */
static void epilogue(const mg_conv2d_params *c, int32_t acc[Q8_MR][Q8_NB], int rows, int n, const float *scale,
                     const int32_t *corr, const float *bias, float *y, size_t ys) {
  const float lo = c->act == MG_ACT_CLIP ? c->act_a : 0.0f, hi = c->act_b;
  for (int r = 0; r < rows; r++) {
    const float s = scale[r], b = bias ? bias[r] : 0.0f;
    const int32_t z = corr[r];
    float *yr = y + (size_t)r * ys;
    for (int j = 0; j < n; j++) {
      float v = (float)(acc[r][j] - z) * s + b;
      if (c->act == MG_ACT_RELU) v = v < 0.0f ? 0.0f : v;
      else if (c->act == MG_ACT_CLIP) v = v < lo ? lo : v > hi ? hi : v;
      yr[j] = v;
    }
  }
}

/* Group g of batch element n through the packed GEMM path. */
static void conv_gemm(const mg_q8_conv_params *p, const float *x, const char *wq, const float *bias, float *y,
                      uint8_t *sp, int n, int g) {
  const mg_conv2d_params *c = &p->conv;
  const int Cg = c->C / c->group, Mg = c->M / c->group, K = kdim(c), Kp = kpad(K), P = c->OH * c->OW;
  const int PC = chunk_positions(c);
  const float *scale = (const float *)wq + (size_t)g * (size_t)Mg;
  const int32_t *corr = (const int32_t *)(wq + (size_t)c->M * 4) + (size_t)g * (size_t)Mg;
  const int8_t *w = (const int8_t *)(wq + (size_t)c->M * 8) + (size_t)g * (size_t)Mg * (size_t)Kp;
  uint8_t *qg = sp, *rows = sp + plane_bytes(c), *xp = rows + align_up(4 * (size_t)PC);
  const size_t HW = (size_t)c->H * (size_t)c->W;
  int32_t acc[Q8_MR][Q8_NB];
  quantise(x + ((size_t)n * (size_t)c->C + (size_t)g * (size_t)Cg) * HW, (size_t)Cg * HW, 1.0f / p->in_scale,
           p->in_zp, qg);
  for (int p0 = 0; p0 < P; p0 += PC) {
    const int np = P - p0 < PC ? P - p0 : PC, npr = round64(np);
    pack_chunk(c, qg, p0, np, npr, (uint8_t)p->in_zp, rows, xp);
    for (int m0 = 0; m0 < Mg; m0 += Q8_MR) {
      const int nr = Mg - m0 < Q8_MR ? Mg - m0 : Q8_MR;
      float *ym = y + ((size_t)n * (size_t)c->M + (size_t)g * (size_t)Mg + (size_t)m0) * (size_t)P + (size_t)p0;
      for (int j0 = 0; j0 < npr; j0 += Q8_NB) {
        tile(nr, Kp / 4, w + (size_t)m0 * (size_t)Kp, Kp, xp + (size_t)j0 * 4, (size_t)npr * 4, acc);
        epilogue(c, acc, nr, np - j0 < Q8_NB ? np - j0 : Q8_NB, scale + m0, corr + m0, bias ? bias + g * Mg + m0 : NULL,
                 ym + j0, (size_t)P);
      }
    }
  }
}

/* Output channel m of batch element n, depthwise: (q - zp) in a zero-padded
 * int16 plane, then one int32 row of products per kernel tap. */
static void conv_depthwise(const mg_q8_conv_params *p, const float *x, const char *wq, const float *bias, float *y,
                           uint8_t *sp, int n, int m) {
  const mg_conv2d_params *c = &p->conv;
  const int ch = m / (c->M / c->C), Kp = kpad(c->kh * c->kw);
  const int PH = c->H + c->pad_t + c->pad_b, PW = c->W + c->pad_l + c->pad_r;
  int16_t *pl = (int16_t *)(void *)sp;
  int32_t *row = (int32_t *)(void *)(sp + align_up((size_t)PH * (size_t)PW * sizeof(int16_t)));
  const float *xc = x + ((size_t)n * (size_t)c->C + (size_t)ch) * (size_t)c->H * (size_t)c->W;
  const float inv = 1.0f / p->in_scale, lo = p->in_zp ? 1.0f : 0.0f, z = (float)p->in_zp, magic = 12582912.0f;
  const int8_t *w = (const int8_t *)(wq + (size_t)c->M * 8) + (size_t)m * (size_t)Kp;
  float s;
  memcpy(&s, wq + (size_t)m * 4, 4);
  memset(pl, 0, (size_t)PH * (size_t)PW * sizeof(int16_t));
  for (int i = 0; i < c->H; i++)
    for (int j = 0; j < c->W; j++) {
      float t = xc[(size_t)i * (size_t)c->W + (size_t)j] * inv + z;
      t = t >= lo ? t : lo;
      t = t <= 255.0f ? t : 255.0f;
      pl[(size_t)(i + c->pad_t) * (size_t)PW + (size_t)(j + c->pad_l)] = (int16_t)((int)((t + magic) - magic) - p->in_zp);
    }
  float *ym = y + ((size_t)n * (size_t)c->M + (size_t)m) * (size_t)c->OH * (size_t)c->OW;
  const float b = bias ? bias[m] : 0.0f, alo = c->act == MG_ACT_CLIP ? c->act_a : 0.0f, ahi = c->act_b;
  for (int oh = 0; oh < c->OH; oh++) {
    for (int ow = 0; ow < c->OW; ow++) row[ow] = 0;
    for (int ki = 0; ki < c->kh; ki++) {
      const int16_t *src = pl + (size_t)(oh * c->stride_h + ki * c->dil_h) * (size_t)PW;
      for (int kj = 0; kj < c->kw; kj++) {
        const int32_t wv = w[ki * c->kw + kj];
        const int16_t *sr = src + kj * c->dil_w;
        if (c->stride_w == 1)
          for (int ow = 0; ow < c->OW; ow++) row[ow] += wv * sr[ow];
        else
          for (int ow = 0; ow < c->OW; ow++) row[ow] += wv * sr[(size_t)ow * (size_t)c->stride_w];
      }
    }
    for (int ow = 0; ow < c->OW; ow++) {
      float v = (float)row[ow] * s + b;
      if (c->act == MG_ACT_RELU) v = v < 0.0f ? 0.0f : v;
      else if (c->act == MG_ACT_CLIP) v = v < alo ? alo : v > ahi ? ahi : v;
      ym[(size_t)oh * (size_t)c->OW + (size_t)ow] = v;
    }
  }
}

void mg_q8_conv2d(const mg_q8_conv_params *p, const float *x, const void *wq, const float *bias, float *y,
                  float *scratch) {
  const mg_conv2d_params *c = &p->conv;
  uint8_t *sp = (uint8_t *)scratch;
  sp += (Q8_ALIGN - (size_t)((uintptr_t)sp % Q8_ALIGN)) % Q8_ALIGN;
  for (int n = 0; n < c->N; n++) {
    if (is_depthwise(c))
      for (int m = 0; m < c->M; m++) conv_depthwise(p, x, wq, bias, y, sp, n, m);
    else
      for (int g = 0; g < c->group; g++) conv_gemm(p, x, wq, bias, y, sp, n, g);
  }
  if (!act_inline(c->act))
    mg_bias_act(y, c->N * c->M, c->OH * c->OW, c->OH * c->OW, NULL, c->act, c->act_a, c->act_b);
}
