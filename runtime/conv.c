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
#include "mg_rt_select.h"

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
/* Fewest output positions for which im2col feeds SGEMM's packing directly. */
#ifndef ROWS_MIN_POSITIONS
#define ROWS_MIN_POSITIONS 128
#endif

/* Which strategies this unit compiles (mg_rt_select.h): Winograd's transforms and
 * the depthwise row kernels are most of the file's -O3 compile time, so a project
 * whose layers never take them leaves them out. A strategy left out is never
 * taken: the layer goes through the general path, which computes the same
 * convolution. The planner selects each strategy mg_conv2d_kernel names for one of
 * the model's layers, so in a generated project that fallback does not happen. */
#if !defined(MG_RT_SELECT) || defined(MG_RT_USE_CONV_WINOGRAD)
#define HAVE_WINOGRAD 1
#else
#define HAVE_WINOGRAD 0
#endif
#if !defined(MG_RT_SELECT) || defined(MG_RT_USE_CONV_DEPTHWISE)
#define HAVE_DEPTHWISE 1
#else
#define HAVE_DEPTHWISE 0
#endif

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

#if defined(MG_CONV_AVX2)
/* exp(x) for 8 lanes, x finite: Cephes' expf (range reduction by ln 2 in two parts,
 * degree-6 polynomial, 2^n from the exponent bits), within about 2 ulp of expf.
 * x is clamped to [-87.3, 88.3] so 2^n stays a normal float; callers that can see
 * NaN restore it themselves. */
static __m256 exp8(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  __m256 fx, r, p;
  __m256i e;
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.3f));
  fx = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                       _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), r);
  p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, one));
  e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

/* Whether act has a vector form (act8); tanh and the gelus go through act1. */
static int act_vector(mg_act act) {
  return act != MG_ACT_TANH && act != MG_ACT_GELU && act != MG_ACT_GELU_TANH;
}

/* act(v) for the activations act_vector accepts (any other comes back as v), with
 * va, vb its parameters a, b broadcast. max/min take the threshold first so a NaN
 * input comes out of them unchanged (they return their second operand when either
 * is NaN); the sigmoids put NaN back after exp8's clamp. */
static inline __m256 act8(__m256 v, mg_act act, __m256 va, __m256 vb) {
  const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.0f);
  switch (act) {
  case MG_ACT_RELU: return _mm256_max_ps(zero, v);
  case MG_ACT_CLIP: return _mm256_min_ps(vb, _mm256_max_ps(va, v));
  case MG_ACT_LEAKY_RELU:
    return _mm256_blendv_ps(v, _mm256_mul_ps(va, v), _mm256_cmp_ps(v, zero, _CMP_LT_OQ));
  case MG_ACT_HARDSIGMOID:
    return _mm256_min_ps(one, _mm256_max_ps(zero, _mm256_add_ps(_mm256_mul_ps(va, v), vb)));
  case MG_ACT_HARDSWISH: {
    const __m256 t = _mm256_add_ps(_mm256_mul_ps(v, _mm256_set1_ps(1.0f / 6.0f)), _mm256_set1_ps(0.5f));
    return _mm256_mul_ps(v, _mm256_min_ps(one, _mm256_max_ps(zero, t)));
  }
  case MG_ACT_SIGMOID:
  case MG_ACT_SILU: {
    __m256 r = _mm256_div_ps(one, _mm256_add_ps(one, exp8(_mm256_sub_ps(zero, v))));
    if (act == MG_ACT_SILU) r = _mm256_mul_ps(v, r);
    return _mm256_blendv_ps(r, v, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  }
  default:
    return v;
  }
}

/* The vector part of bias_act_row for the activations that have one: returns how
 * many leading values (a multiple of 8) it did. */
static int bias_act_avx2(float *y, int n, float bias, mg_act act, float a, float b) {
  const __m256 vbias = _mm256_set1_ps(bias), va = _mm256_set1_ps(a), vb = _mm256_set1_ps(b);
  int i = 0;
  if (!act_vector(act)) return 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, act8(_mm256_add_ps(_mm256_loadu_ps(y + i), vbias), act, va, vb));
  return i;
}
#endif

/* Bias and activation over one row of n values. The common cheap cases get loops
 * of their own so they vectorise (AVX2: explicitly, with a vector exp for the
 * sigmoids); the rest call act1 per element. */
static void bias_act_row(float *y, int n, float bias, mg_act act, float a, float b) {
  int i = 0;
  if (act == MG_ACT_NONE && bias == 0.0f) return;
#if defined(MG_CONV_AVX2)
  i = bias_act_avx2(y, n, bias, act, a, b);
  if (i < n && n - i < 8 && act != MG_ACT_NONE) {
    /* the last partial vector through a full one on the stack */
    float t[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    memcpy(t, y + i, sizeof(float) * (size_t)(n - i));
    if (bias_act_avx2(t, 8, bias, act, a, b) == 8) {
      memcpy(y + i, t, sizeof(float) * (size_t)(n - i));
      return;
    }
  }
#endif
  switch (act) {
  case MG_ACT_NONE:
    if (bias != 0.0f)
      for (; i < n; i++) y[i] += bias;
    return;
  case MG_ACT_RELU:
    for (; i < n; i++) {
      float v = y[i] + bias;
      y[i] = v < 0.0f ? 0.0f : v;
    }
    return;
  case MG_ACT_CLIP:
    for (; i < n; i++) {
      float v = y[i] + bias;
      v = v < a ? a : v;
      y[i] = v > b ? b : v;
    }
    return;
  default:
    for (; i < n; i++) y[i] = act1(y[i] + bias, act, a, b);
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

/* One group's input as seen by im2col. */
typedef struct {
  const mg_conv2d_params *p;
  const float *x; /* the group's first input channel */
  int q_off;      /* column 0 of the product is output position q_off */
} im2col_src;

/* Row k = (c*kh + ki)*kw + kj of one group's im2col matrix, columns (output
 * positions q = oh*OW + ow) q0 .. q0+nq-1, into d: for each position the input
 * x[c][oh*sh - pt + ki*dh][ow*sw - pl + kj*dw], or 0 in the padding. Padding is
 * handled by ranges per output row (valid_range), stride-1 runs by memcpy. */
static void im2col_row(const void *ctx, int k, int q0, int nq, float *d) {
  const im2col_src *src = (const im2col_src *)ctx;
  const mg_conv2d_params *p = src->p;
  const int OW = p->OW, W = p->W, H = p->H, sw = p->stride_w;
  const int kj = k % p->kw, ki = k / p->kw % p->kh, c = k / (p->kw * p->kh);
  const float *xc = src->x + (size_t)c * H * W;
  const int offw = kj * p->dil_w - p->pad_l;
  int lo, hi, q, oh, ow0;
  q0 += src->q_off;
  q = q0, oh = q0 / OW, ow0 = q0 % OW;
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
}

/* Writes the columns q0 .. q0+nq-1 of the whole im2col matrix of one group (K =
 * Cg*kh*kw rows, see im2col_row) into col, row-major (ld nq), as SGEMM's B. */
static void im2col(const im2col_src *src, int K, int q0, int nq, float *col) {
  int k;
  for (k = 0; k < K; k++) im2col_row(src, k, q0, nq, col + (size_t)k * nq);
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

static int depthwise_fits(const mg_conv2d_params *p) {
  return p->group == p->C && p->group > 1;
}



static int is_pointwise(const mg_conv2d_params *p) {
  return p->kh == 1 && p->kw == 1 && p->stride_h == 1 && p->stride_w == 1 &&
         p->pad_t == 0 && p->pad_l == 0 && p->pad_b == 0 && p->pad_r == 0;
}

/* Whether a general convolution packs its im2col straight into SGEMM's panels
 * (mg_sgemm_rows) rather than materialising column chunks for mg_sgemm: worth it
 * when there are enough output positions that mg_sgemm would not rather compute
 * the transposed product. */
static int use_rows(const mg_conv2d_params *p) {
  return p->OH * p->OW >= ROWS_MIN_POSITIONS;
}

/* ------------------------------------------------------ Winograd F(2x2, 3x3) */

/* 3x3, stride-1, undilated convolutions (most of a resnet's arithmetic) as
 * Winograd's F(2x2, 3x3): each 2x2 block of outputs ("tile") comes from a 4x4
 * input patch d and the 3x3 kernel g as A^T [(G g G^T) .* (B^T d B)] A, 16
 * multiplications instead of 36. Over channels the 16 element-wise products are 16
 * independent SGEMMs (Mg x Cg times Cg x tiles), so the multiplications drop by
 * 2.25x and the rest is the transforms, which are additions only (G's halves are
 * exact). With
 *   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1],  G = [1 0 0; .5 .5 .5; .5 -.5 .5;
 *   0 0 1],  A^T = [1 1 1 0; 0 1 -1 -1].
 * Layout in scratch: U[16][Mg][Cg] (transformed weights, recomputed on every call:
 * 1/tiles of the SGEMM work), V[16][Cg][tiles] (transformed input), P[16][Mg][tiles]
 * (products); tile t = th*TW + tw covers outputs (2th.., 2tw..). The rounding error
 * stays within a small multiple of the direct product's: the transforms add at most
 * four terms of the same magnitude per stage. */

/* Fewest tiles for which a layer goes through Winograd: below it the weight
 * transform (done on every call) is a noticeable share of the work. */
#ifndef WINO_MIN_TILES
#define WINO_MIN_TILES 32
#endif
/* Fewest input and output channels per group: thinner layers are bound by the
 * transforms, not by multiplications. */
#define WINO_MIN_CHANNELS 8
/* Widest padded input row, in floats, the transforms' stack rows hold (2*TW + 2). */
#define WINO_ROW_MAX 1024
/* Most floats of transformed weights (16 * Mg * Cg; 256 x 256 channels fit): the
 * scratch is counted in the runner's memory budget. */
#define WINO_U_MAX (1L << 20)
/* Floats of transformed input and products (16 * (Cg + Mg) per tile) one chunk of
 * tile rows may use: bounds the scratch and keeps a chunk near L2. */
#ifndef WINO_CHUNK_BUDGET
#define WINO_CHUNK_BUDGET (1L << 19)
#endif

/* Tiles along each axis. */
static int wino_th(const mg_conv2d_params *p) { return (p->OH + 1) / 2; }
static int wino_tw(const mg_conv2d_params *p) { return (p->OW + 1) / 2; }

/* Fewest tiles for a layer whose transformed weights are prepared at conversion:
 * with no transform per call, 16 tiles (resnet's 7x7 stage) already pay. */
#define WINO_MIN_TILES_PREPARED 16
/* Fewest output positions for which a layer's weights are prepared: below it the
 * products are matrix-vector-like and mg_sgemm streams the weights as they are. */
#define PREP_MIN_POSITIONS 8

/* Whether Winograd can compute p at all (shape, channels, stack rows). */
static int winograd_shape(const mg_conv2d_params *p) {
  const int Cg = p->C / p->group, Mg = p->M / p->group;
  return p->kh == 3 && p->kw == 3 && p->stride_h == 1 && p->stride_w == 1 &&
         p->dil_h == 1 && p->dil_w == 1 && Cg >= WINO_MIN_CHANNELS &&
         Mg >= WINO_MIN_CHANNELS && 2 * wino_tw(p) + 2 <= WINO_ROW_MAX;
}

/* Whether p goes through Winograd: fixed by its preparation when it has one,
 * else (weights transformed on every call) when it has enough tiles and its
 * transformed weights fit the scratch. */
static int winograd_fits(const mg_conv2d_params *p) {
  const long Cg = p->C / p->group, Mg = p->M / p->group;
  if (p->prepared) return p->prepared == MG_CONV_PREP_WINOGRAD;
  return winograd_shape(p) && wino_th(p) * wino_tw(p) >= WINO_MIN_TILES && 16L * Mg * Cg <= WINO_U_MAX;
}

mg_conv_kernel mg_conv2d_kernel(const mg_conv2d_params *p) {
  if (depthwise_fits(p)) return MG_CONV_DEPTHWISE;
  if (winograd_fits(p)) return MG_CONV_WINOGRAD;
  if (is_pointwise(p)) return MG_CONV_POINTWISE;
  return MG_CONV_IM2COL;
}

mg_conv_prep mg_conv2d_prep_kind(const mg_conv2d_params *p) {
  if (depthwise_fits(p) || p->OH * p->OW < PREP_MIN_POSITIONS) return MG_CONV_PREP_NONE;
  if (HAVE_WINOGRAD && winograd_shape(p) && wino_th(p) * wino_tw(p) >= WINO_MIN_TILES_PREPARED)
    return MG_CONV_PREP_WINOGRAD;
  return MG_CONV_PREP_GEMM;
}

/* Floats of one group's prepared weights. */
static size_t prep_group_floats(const mg_conv2d_params *p) {
  const int Cg = p->C / p->group, Mg = p->M / p->group;
  if (p->prepared == MG_CONV_PREP_WINOGRAD)
    return 16 * mg_sgemm_packed_floats(Mg, Cg, p->prepared_mr);
  if (p->prepared == MG_CONV_PREP_GEMM)
    return mg_sgemm_packed_floats(Mg, Cg * p->kh * p->kw, p->prepared_mr);
  return 0;
}

size_t mg_conv2d_prepared_floats(const mg_conv2d_params *p) {
  return (size_t)p->group * prep_group_floats(p);
}

/* u = G g G^T for one 3x3 kernel g (row-major), u row-major 4x4 (see below). */
static void wino_kernel(const float *g, float *u) {
  float t[4][3];
  int j, i;
  for (j = 0; j < 3; j++) { /* G g, column j */
    t[0][j] = g[j];
    t[1][j] = 0.5f * (g[j] + g[3 + j] + g[6 + j]);
    t[2][j] = 0.5f * (g[j] - g[3 + j] + g[6 + j]);
    t[3][j] = g[6 + j];
  }
  for (i = 0; i < 4; i++) { /* (G g) G^T, row i */
    u[4 * i + 0] = t[i][0];
    u[4 * i + 1] = 0.5f * (t[i][0] + t[i][1] + t[i][2]);
    u[4 * i + 2] = 0.5f * (t[i][0] - t[i][1] + t[i][2]);
    u[4 * i + 3] = t[i][2];
  }
}

void mg_conv2d_prepare(const mg_conv2d_params *p, const float *w, float *out) {
  const int G = p->group, Cg = p->C / G, Mg = p->M / G, K = Cg * p->kh * p->kw;
  const int mr = p->prepared_mr;
  const size_t gf = prep_group_floats(p);
  int g, m, c, xi;
  for (g = 0; g < G; g++) {
    const float *wg = w + (size_t)g * Mg * K;
    float *og = out + (size_t)g * gf;
    if (p->prepared == MG_CONV_PREP_GEMM) {
      mg_sgemm_pack(Mg, K, wg, K, mr, og);
    } else if (p->prepared == MG_CONV_PREP_WINOGRAD) {
      const size_t plane = mg_sgemm_packed_floats(Mg, Cg, mr);
      memset(og, 0, sizeof(float) * gf);
      for (m = 0; m < Mg; m++)
        for (c = 0; c < Cg; c++) {
          float u[16];
          const size_t at = mg_sgemm_packed_index(Mg, Cg, mr, m, c);
          wino_kernel(wg + ((size_t)m * Cg + c) * 9, u);
          for (xi = 0; xi < 16; xi++) og[(size_t)xi * plane + at] = u[xi];
        }
    }
  }
}

#if HAVE_WINOGRAD
/* Tile rows per chunk: as many as WINO_CHUNK_BUDGET allows, at least one. */
static int wino_chunk_rows(const mg_conv2d_params *p) {
  const long per_row = 16L * (p->C / p->group + p->M / p->group) * wino_tw(p);
  const long rows = WINO_CHUNK_BUDGET / per_row;
  return rows < 1 ? 1 : (int)(rows < wino_th(p) ? rows : wino_th(p));
}

/* Floats between consecutive xi planes of n floats in U, V and P: rounded up to
 * 4 KiB and then one cache line more, so the 16 planes a transform walks in step
 * fall on different cache sets (a power-of-two stride would put all 16 streams on
 * the same set of L1 and thrash it). */
static size_t wino_stride(size_t n) { return (n + 1023) / 1024 * 1024 + 16; }

static size_t wino_scratch(const mg_conv2d_params *p) {
  const size_t Cg = (size_t)(p->C / p->group), Mg = (size_t)(p->M / p->group);
  const size_t T = (size_t)wino_chunk_rows(p) * wino_tw(p);
  /* prepared weights are read in place: no U, and the packed product's scratch */
  if (p->prepared)
    return 3 * ALIGN_SLACK + 16 * (wino_stride(Cg * T) + wino_stride(Mg * T)) +
           mg_sgemm_packed_scratch((int)Mg, (int)T, (int)Cg);
  return 3 * ALIGN_SLACK + 16 * (wino_stride(Mg * Cg) + wino_stride(Cg * T) + wino_stride(Mg * T)) +
         mg_sgemm_scratch((int)Mg, (int)T, (int)Cg);
}

/* Kernels transformed per block by wino_weights before the block is stored. */
#define WINO_WBLOCK 64

/* U[xi][m][c] (planes ustride apart) = (G g G^T)[xi / 4][xi % 4] for the 3x3 kernel
 * g of (m, c), w being one group's [Mg][Cg][3][3] weights. A block of kernels is
 * transformed into a stack tile first, so U is written in runs of WINO_WBLOCK
 * floats per plane rather than one float per plane at a time. */
static void wino_weights(int Mg, int Cg, const float *w, float *U, size_t ustride) {
  float tile[16][WINO_WBLOCK], g[9][WINO_WBLOCK];
  int m, c0, c, i, j, xi;
  for (m = 0; m < Mg; m++)
    for (c0 = 0; c0 < Cg; c0 += WINO_WBLOCK) {
      const int nc = min_int(WINO_WBLOCK, Cg - c0);
      const float *wm = w + ((size_t)m * Cg + c0) * 9;
      /* the block's kernels tap by tap (g[j][c]), so the transform below runs along
       * c in whole vectors */
      for (c = 0; c < nc; c++)
        for (j = 0; j < 9; j++) g[j][c] = wm[c * 9 + j];
      for (i = 0; i < 4; i++)
        for (c = 0; c < nc; c++) {
          /* row i of G g, then that row times G^T */
          const float r0 = i == 0 ? g[0][c] : i == 3 ? g[6][c]
                           : 0.5f * (g[0][c] + (i == 1 ? g[3][c] : -g[3][c]) + g[6][c]);
          const float r1 = i == 0 ? g[1][c] : i == 3 ? g[7][c]
                           : 0.5f * (g[1][c] + (i == 1 ? g[4][c] : -g[4][c]) + g[7][c]);
          const float r2 = i == 0 ? g[2][c] : i == 3 ? g[8][c]
                           : 0.5f * (g[2][c] + (i == 1 ? g[5][c] : -g[5][c]) + g[8][c]);
          tile[4 * i + 0][c] = r0;
          tile[4 * i + 1][c] = 0.5f * (r0 + r1 + r2);
          tile[4 * i + 2][c] = 0.5f * (r0 - r1 + r2);
          tile[4 * i + 3][c] = r2;
        }
      for (xi = 0; xi < 16; xi++)
        memcpy(U + (size_t)xi * ustride + (size_t)m * Cg + c0, tile[xi],
               sizeof(float) * (size_t)nc);
    }
}

/* V[xi][c][t] (planes vs apart) = (B^T d B)[xi / 4][xi % 4] for the 4x4 input
 * patch d of tile (th, tw), t = (th - th0)*TW + tw, th0 <= th < th0 + nth, of
 * channel c (rows 2th - pad_t.., columns 2tw - pad_l..; zero outside the image), x
 * being one group's Cg input planes. Row by row: the four padded input rows of a
 * tile row are combined by B^T along whole rows, then B along each tile's columns. */
static void wino_input(const mg_conv2d_params *p, int Cg, const float *x, int th0, int nth,
                       float *V, size_t vs) {
  const int H = p->H, W = p->W, TW = wino_tw(p);
  const int width = 2 * TW + 2, pl = p->pad_l;
  const size_t T = (size_t)nth * TW, plane = vs;
  float r[4][WINO_ROW_MAX], t[4][WINO_ROW_MAX];
  int c, th, tw, k, j;
  for (c = 0; c < Cg; c++) {
    const float *xc = x + (size_t)c * H * W;
    for (th = th0; th < th0 + nth; th++) {
      for (k = 0; k < 4; k++) {
        /* padded row: input column iw at r[k][iw + pl]; width >= pl + W since
         * OW = W + pl + pr - 2 <= 2*TW */
        const int ih = 2 * th - p->pad_t + k;
        if (ih < 0 || ih >= H) {
          memset(r[k], 0, sizeof(float) * (size_t)width);
          continue;
        }
        memset(r[k], 0, sizeof(float) * (size_t)pl);
        memcpy(r[k] + pl, xc + (size_t)ih * W, sizeof(float) * (size_t)W);
        memset(r[k] + pl + W, 0, sizeof(float) * (size_t)(width - pl - W));
      }
      for (j = 0; j < width; j++) {
        t[0][j] = r[0][j] - r[2][j];
        t[1][j] = r[1][j] + r[2][j];
        t[2][j] = r[2][j] - r[1][j];
        t[3][j] = r[1][j] - r[3][j];
      }
      for (k = 0; k < 4; k++) {
        const float *tk = t[k];
        float *v = V + (size_t)(4 * k) * plane + (size_t)c * T + (size_t)(th - th0) * TW;
        float *v0 = v, *v1 = v + plane, *v2 = v + 2 * plane, *v3 = v + 3 * plane;
        for (tw = 0; tw < TW; tw++) {
          const float a = tk[2 * tw], b = tk[2 * tw + 1], e = tk[2 * tw + 2],
                      f = tk[2 * tw + 3];
          v0[tw] = a - e;
          v1[tw] = b + e;
          v2[tw] = e - b;
          v3[tw] = b - f;
        }
      }
    }
  }
}

/* y = act(A^T P A + bias) for the tile rows th0 .. th0+nth-1 of every output
 * channel: P holds their products ([16][Mg][nth*TW], planes ps apart), y is one
 * group's Mg output planes. A tile row makes two
 * output rows, assembled on the stack, activated there, and copied out (the last
 * row and column of an odd OH or OW are computed and dropped). */
static void wino_output(const mg_conv2d_params *p, int Mg, const float *P, size_t ps,
                        int th0, int nth, const float *bias, float *y) {
  const int OH = p->OH, OW = p->OW, TW = wino_tw(p);
  const size_t T = (size_t)nth * TW, plane = ps;
  float o0[WINO_ROW_MAX], o1[WINO_ROW_MAX];
  int m, th, tw, l;
  for (m = 0; m < Mg; m++) {
    const float b0 = bias ? bias[m] : 0.0f;
    float *ym = y + (size_t)m * OH * OW;
    for (th = th0; th < th0 + nth; th++) {
      const float *s = P + (size_t)m * T + (size_t)(th - th0) * TW;
      for (tw = 0; tw < TW; tw++) {
        float s0[4], s1[4]; /* A^T along the tile's rows, per column l */
        for (l = 0; l < 4; l++) {
          const float m0 = s[(size_t)l * plane + tw], m1 = s[(size_t)(4 + l) * plane + tw],
                      m2 = s[(size_t)(8 + l) * plane + tw],
                      m3 = s[(size_t)(12 + l) * plane + tw];
          s0[l] = m0 + m1 + m2;
          s1[l] = m1 - m2 - m3;
        }
        o0[2 * tw] = s0[0] + s0[1] + s0[2];
        o0[2 * tw + 1] = s0[1] - s0[2] - s0[3];
        o1[2 * tw] = s1[0] + s1[1] + s1[2];
        o1[2 * tw + 1] = s1[1] - s1[2] - s1[3];
      }
      bias_act_row(o0, OW, b0, p->act, p->act_a, p->act_b);
      memcpy(ym + (size_t)(2 * th) * OW, o0, sizeof(float) * (size_t)OW);
      if (2 * th + 1 < OH) {
        bias_act_row(o1, OW, b0, p->act, p->act_a, p->act_b);
        memcpy(ym + (size_t)(2 * th + 1) * OW, o1, sizeof(float) * (size_t)OW);
      }
    }
  }
}

/* Tile rows th_begin .. th_end-1 of one group of one image through Winograd (see
 * above); x, w, bias, y are the group's. The weights are transformed once (or were, at conversion: p->prepared),
 * then the tile rows go through input transform, 16 SGEMMs and output transform a
 * chunk at a time. */
static void conv_winograd(const mg_conv2d_params *p, const float *x, const float *w,
                          const float *bias, float *y, float *scratch, int th_begin, int th_end) {
  const int Cg = p->C / p->group, Mg = p->M / p->group;
  const int TH = wino_th(p), TW = wino_tw(p), chunk = wino_chunk_rows(p);
  const size_t us = p->prepared ? mg_sgemm_packed_floats(Mg, Cg, p->prepared_mr)
                                : wino_stride((size_t)Mg * Cg);
  const size_t vs = wino_stride((size_t)Cg * chunk * TW), ps = wino_stride((size_t)Mg * chunk * TW);
  float *U = p->prepared ? NULL : align64(scratch);
  float *V = p->prepared ? align64(scratch) : align64(U + 16 * us);
  float *P = align64(V + 16 * vs);
  float *gemm_scratch = P + 16 * ps;
  int th0, xi;
  if (!p->prepared) wino_weights(Mg, Cg, w, U, us);
  (void)TH;
  for (th0 = th_begin; th0 < th_end; th0 += chunk) {
    const int nth = min_int(chunk, th_end - th0), T = nth * TW;
    wino_input(p, Cg, x, th0, nth, V, vs);
    for (xi = 0; xi < 16; xi++)
      if (p->prepared)
        mg_sgemm_packed(Mg, T, Cg, w + xi * us, p->prepared_mr, V + xi * vs, T, NULL, NULL,
                        P + xi * ps, T, gemm_scratch, NULL, NULL);
      else
        mg_sgemm(Mg, T, Cg, 1.0f, U + xi * us, Cg, 0, V + xi * vs, T, 0, 0.0f, P + xi * ps, T,
                 gemm_scratch);
    wino_output(p, Mg, P, ps, th0, nth, bias, y);
  }
}
#endif /* HAVE_WINOGRAD */

size_t mg_conv2d_scratch(const mg_conv2d_params *p) {
  const int Cg = p->C / p->group, Mg = p->M / p->group;
  const int K = Cg * p->kh * p->kw;
  int cols;
  if (HAVE_DEPTHWISE && depthwise_fits(p)) return 0;
#if HAVE_WINOGRAD
  if (winograd_fits(p)) return wino_scratch(p);
#endif
  if (p->prepared == MG_CONV_PREP_WINOGRAD) return 0; /* no Winograd compiled: not run */
  if (is_pointwise(p))
    return p->prepared ? mg_sgemm_packed_scratch(Mg, p->OH * p->OW, Cg)
                       : mg_sgemm_scratch(Mg, p->OH * p->OW, Cg);
  if (use_rows(p))
    return p->prepared ? mg_sgemm_packed_scratch(Mg, p->OH * p->OW, K)
                       : mg_sgemm_rows_scratch(Mg, p->OH * p->OW, K);
  cols = chunk_cols(p, K);
  return ALIGN_SLACK + (size_t)K * cols +
         (p->prepared ? mg_sgemm_packed_scratch(Mg, cols, K) : mg_sgemm_scratch(Mg, cols, K));
}

/* -------------------------------------------------------------- depthwise */
#if HAVE_DEPTHWISE

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

/* Output columns [lo, hi) whose every kernel tap reads inside the input row: the
 * interior, where a row kernel needs no bounds logic. Empty (lo == hi) when no
 * column qualifies. */
static void interior_cols(const mg_conv2d_params *p, int *lo, int *hi) {
  const int span = (p->kw - 1) * p->dil_w;
  /* ow*s - pl >= 0 and ow*s - pl + span <= W - 1 */
  int l = (p->pad_l + p->stride_w - 1) / p->stride_w;
  int h = p->W - 1 - span + p->pad_l < 0 ? 0 : (p->W - 1 - span + p->pad_l) / p->stride_w + 1;
  *lo = min_int(l, p->OW);
  *hi = max_int(*lo, min_int(h, p->OW));
}

/* One output of a depthwise channel with bounds checks on every tap: the border
 * columns and rows, and any shape without a specialised row kernel. */
static float dw_point(const mg_conv2d_params *p, const float *xc, const float *wc,
                      float acc, int oh, int ow) {
  int ki, kj;
  for (ki = 0; ki < p->kh; ki++) {
    const int ih = oh * p->stride_h - p->pad_t + ki * p->dil_h;
    if (ih < 0 || ih >= p->H) continue;
    for (kj = 0; kj < p->kw; kj++) {
      const int iw = ow * p->stride_w - p->pad_l + kj * p->dil_w;
      if (iw >= 0 && iw < p->W) acc += wc[ki * p->kw + kj] * xc[(size_t)ih * p->W + iw];
    }
  }
  return acc;
}

/* Output rows the depthwise row kernel computes per call: DW_R independent
 * accumulator chains (one chain of K*K dependent FMAs per vector was latency
 * bound: about 4 cycles per FMA), and each input vector loaded serves every one
 * of the DW_R rows it is a tap of. */
#define DW_R 4
/* Padded input rows one call reads: K + S*(DW_R - 1), at most 11 (5x5, stride 2). */
#define DW_NI_MAX 11

/* The padded input row of a stride-2 layer is stored split: its even columns,
 * then from DW_ODD_AT(width) on its odd ones, so that tap j of output i reads
 * element i + j/2 of one half, a plain vector load (no shuffle per tap). */
#define DW_ODD_AT(width) (((width) / 2 + 8) / 8 * 8)

/* Column p of a padded input row as the kernel for stride S reads it. */
static int dw_col(int S, int width, int p) { return S == 1 ? p : (p & 1) * DW_ODD_AT(width) + p / 2; }

/* The vector part of storing input row xr (W floats) as padded row slot of a
 * stride-2 layer (column p = iw + pl at dw_col(2, ., p)): 16 inputs at a time,
 * their even and odd elements to the two halves. Returns how many leading inputs
 * it stored. */
static int dw_split_row(const float *xr, int W, int pl, float *slot, int odd) {
  int iw = 0;
#if defined(MG_CONV_AVX2)
  const __m256i perm = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
  float *ev = slot + (pl & 1) * odd + pl / 2, *od = slot + ((pl + 1) & 1) * odd + (pl + 1) / 2;
  for (; iw + 16 <= W; iw += 16) {
    const __m256 lo = _mm256_loadu_ps(xr + iw), hi = _mm256_loadu_ps(xr + iw + 8);
    _mm256_storeu_ps(ev + iw / 2, _mm256_permutevar8x32_ps(_mm256_shuffle_ps(lo, hi, 0x88), perm));
    _mm256_storeu_ps(od + iw / 2, _mm256_permutevar8x32_ps(_mm256_shuffle_ps(lo, hi, 0xDD), perm));
  }
#else
  (void)xr, (void)W, (void)pl, (void)slot, (void)odd;
#endif
  return iw;
}

/* y[t][i] = act(b + sum over taps (r, j) of w[r*K + j] * X(t*S + r, i*S + j)) for
 * t < DW_R, i < n: DW_R output rows of a KxK, stride-S, undilated depthwise kernel,
 * X(r, p) being padded column p of padded input row in[r] (K + S*(DW_R-1) rows,
 * stored as dw_col says, width floats each, width >= round_up(n, 8)*S + K + 8).
 * Exactly n values of each y[t] are written. K and S are constants after
 * inlining, so the tap loops unroll; AVX2 applies the activation in registers when
 * it has a vector form (act_vector), the other paths and activations leave it to
 * the caller (returns 0 then, 1 when it was applied). */
static inline int dw_rows(int K, int S, int n, int width, const float *const *in, const float *w,
                          float b, float *const *y, mg_act act, float a, float bb) {
  const int odd = S == 1 ? 0 : DW_ODD_AT(width);
  int i, t, ir, j;
#if defined(MG_CONV_AVX2)
  const __m256 vb = _mm256_set1_ps(b), va = _mm256_set1_ps(a), vbb = _mm256_set1_ps(bb);
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const mg_act vact = act_vector(act) ? act : MG_ACT_NONE;
  for (i = 0; i < n; i += 8) {
    __m256 acc[DW_R];
#pragma GCC unroll 8
    for (t = 0; t < DW_R; t++) acc[t] = vb;
#pragma GCC unroll 16
    for (ir = 0; ir < K + S * (DW_R - 1); ir++)
#pragma GCC unroll 8
      for (j = 0; j < K; j++) {
        const __m256 v = _mm256_loadu_ps(in[ir] + i + (j & (S - 1)) * odd + j / S);
#pragma GCC unroll 8
        for (t = 0; t < DW_R; t++) {
          const int r = ir - t * S;
          if (r >= 0 && r < K) acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(w[r * K + j]), v, acc[t]);
        }
      }
#pragma GCC unroll 8
    for (t = 0; t < DW_R; t++) {
      const __m256 v = act8(acc[t], vact, va, vbb);
      if (i + 8 <= n)
        _mm256_storeu_ps(y[t] + i, v);
      else
        _mm256_maskstore_ps(y[t] + i, _mm256_cmpgt_epi32(_mm256_set1_epi32(n - i), lanes), v);
    }
  }
  return vact == act;
#else
  int r;
  (void)act, (void)a, (void)bb, (void)ir;
  for (t = 0; t < DW_R; t++)
    for (i = 0; i < n; i++) {
      float acc = b;
      for (r = 0; r < K; r++)
        for (j = 0; j < K; j++) acc += w[r * K + j] * in[t * S + r][i + (j & (S - 1)) * odd + j / S];
      y[t][i] = acc;
    }
  return act == MG_ACT_NONE;
#endif
}

/* The specialised kernels: the 3x3 and 5x5 depthwise layers of the mobilenets,
 * efficientnets and deeplab, at strides 1 and 2, and convnext's 7x7. */
#define DW_FN(K_, S_)                                                                         \
  static int dw_rows_k##K_##s##S_(int n, int width, const float *const *in, const float *w, \
                                   float b, float *const *y, mg_act act, float a, float bb) {  \
    return dw_rows(K_, S_, n, width, in, w, b, y, act, a, bb);                                 \
  }
DW_FN(3, 1)
DW_FN(3, 2)
DW_FN(5, 1)
DW_FN(5, 2)
DW_FN(7, 1)
#undef DW_FN

typedef int (*dw_run_fn)(int, int, const float *const *, const float *, float, float *const *,
                         mg_act, float, float);

/* The specialised kernel for p's shape, or NULL. */
static dw_run_fn dw_pick(const mg_conv2d_params *p) {
  if (p->kh != p->kw || p->dil_h != 1 || p->dil_w != 1 || p->stride_h != p->stride_w)
    return NULL;
  if (p->kh == 3) return p->stride_w == 1 ? dw_rows_k3s1 : p->stride_w == 2 ? dw_rows_k3s2 : NULL;
  if (p->kh == 5) return p->stride_w == 1 ? dw_rows_k5s1 : p->stride_w == 2 ? dw_rows_k5s2 : NULL;
  if (p->kh == 7) return p->stride_w == 1 ? dw_rows_k7s1 : NULL;
  return NULL;
}

/* Padded-row depthwise: the longest padded input row (floats) the stack ring
 * holds. Wider layers take the direct path. */
#define DW_ROW_MAX 1280

/* Depthwise KxK (K = 3, 5 or 7), stride S = 1 or 2, undilated, through a ring of
 * NI = K + S*(DW_R-1) zero-padded input rows on the stack: input row ih lives in
 * slot ih % NI from column pad_l on, the columns around it stay zero, and rows
 * outside the image read a zero row. The row kernel then runs DW_R output rows at
 * a time over whole vectors with no border logic, straight into the output (rows
 * past OH go to a sink row). Output channels oc0 .. oc1-1 only. Returns 0, doing
 * nothing, when a padded row would not fit the ring. */
static int conv_depthwise_ring(const mg_conv2d_params *p, const float *x, const float *w,
                               const float *bias, float *y, dw_run_fn run, int oc0, int oc1) {
  const int K = p->kh, S = p->stride_w, mult = p->M / p->C, NI = K + S * (DW_R - 1);
  const int OH = p->OH, OW = p->OW, H = p->H, W = p->W;
  /* whole vectors of 8 outputs, and room past them (stride 2: two halves) */
  const int nv = (OW + 7) / 8 * 8, width = nv * S + K + 8 + (S == 1 ? 0 : 8);
  float ring[DW_NI_MAX * DW_ROW_MAX], zero[DW_ROW_MAX], sink[DW_ROW_MAX];
  const float *rows[DW_NI_MAX];
  float *yr[DW_R];
  int n, oc, oh, ir, t, have;
  if (width > DW_ROW_MAX || p->pad_l + W > width || NI > DW_NI_MAX) return 0;
  memset(ring, 0, sizeof(float) * (size_t)NI * width);
  memset(zero, 0, sizeof(float) * (size_t)width);
  for (n = 0; n < p->N; n++) {
    for (oc = oc0; oc < oc1; oc++) {
      const float *xc = x + ((size_t)n * p->C + oc / mult) * H * W;
      const float *wc = w + (size_t)oc * K * K;
      float *yc = y + ((size_t)n * p->M + oc) * OH * OW;
      const float b0 = bias ? bias[oc] : 0.0f;
      have = -1; /* input rows up to `have` are in the ring */
      for (oh = 0; oh < OH; oh += DW_R) {
        const int ih0 = oh * p->stride_h - p->pad_t;
        for (ir = 0; ir < NI; ir++) {
          const int ih = ih0 + ir;
          if (ih < 0 || ih >= H) {
            rows[ir] = zero;
            continue;
          }
          rows[ir] = ring + (size_t)(ih % NI) * width;
          if (ih > have) {
            float *slot = ring + (size_t)(ih % NI) * width;
            const float *xr = xc + (size_t)ih * W;
            int iw;
            if (S == 1)
              memcpy(slot + p->pad_l, xr, sizeof(float) * (size_t)W);
            else
              for (iw = dw_split_row(xr, W, p->pad_l, slot, DW_ODD_AT(width)); iw < W; iw++)
                slot[dw_col(S, width, iw + p->pad_l)] = xr[iw];
            have = ih;
          }
        }
        for (t = 0; t < DW_R; t++) yr[t] = oh + t < OH ? yc + (size_t)(oh + t) * OW : sink;
        if (!run(OW, width, rows, wc, b0, yr, p->act, p->act_a, p->act_b))
          for (t = 0; t < DW_R && oh + t < OH; t++) bias_act_row(yr[t], OW, 0.0f, p->act, p->act_a, p->act_b);
      }
    }
  }
  return 1;
}

/* Depthwise convolution: group == C, output channel oc reads input channel
 * oc / (M/C) only. Shapes with a specialised row kernel go through the padded ring
 * (conv_depthwise_ring); the rest split each output row into border columns
 * (dw_point, taps checked one by one) and the interior [lo, hi), computed one tap
 * at a time with no bounds logic. The activation runs on the row while it is in L1.
 * Output channels oc0 .. oc1-1 only. */
static void conv_depthwise(const mg_conv2d_params *p, const float *x, const float *w,
                           const float *bias, float *y, int oc0, int oc1) {
  const int mult = p->M / p->C, khw = p->kh * p->kw;
  const int OH = p->OH, OW = p->OW, H = p->H, W = p->W, sw = p->stride_w;
  const dw_run_fn run = dw_pick(p);
  int n, oc, oh, ki, kj, ow, lo, hi;
  if (run && conv_depthwise_ring(p, x, w, bias, y, run, oc0, oc1)) return;
  interior_cols(p, &lo, &hi);
  for (n = 0; n < p->N; n++) {
    for (oc = oc0; oc < oc1; oc++) {
      const float *xc = x + ((size_t)n * p->C + oc / mult) * H * W;
      const float *wc = w + (size_t)oc * khw;
      float *yc = y + ((size_t)n * p->M + oc) * OH * OW;
      const float b0 = bias ? bias[oc] : 0.0f;
      for (oh = 0; oh < OH; oh++) {
        float *yr = yc + (size_t)oh * OW;
        const int ih0 = oh * p->stride_h - p->pad_t;
        for (ow = 0; ow < lo; ow++) yr[ow] = dw_point(p, xc, wc, b0, oh, ow);
        for (ow = hi; ow < OW; ow++) yr[ow] = dw_point(p, xc, wc, b0, oh, ow);
        if (hi > lo) {
          for (ow = lo; ow < hi; ow++) yr[ow] = b0;
          for (ki = 0; ki < p->kh; ki++) {
            const int ih = ih0 + ki * p->dil_h;
            if (ih < 0 || ih >= H) continue;
            for (kj = 0; kj < p->kw; kj++)
              tap_row(hi - lo, wc[ki * p->kw + kj],
                      xc + (size_t)ih * W + (size_t)(lo * sw - p->pad_l + kj * p->dil_w),
                      sw, yr + lo);
          }
        }
        if (p->act != MG_ACT_NONE) bias_act_row(yr, OW, 0.0f, p->act, p->act_a, p->act_b);
      }
    }
  }
}

#endif /* HAVE_DEPTHWISE */

/* ------------------------------------------------------------------ entry */

/* The fused epilogue of a convolution's product: its bias and activation. */
typedef struct {
  const float *bias; /* the group's first, or NULL */
  mg_act act;
  float a, b;
} conv_epi;

/* mg_sgemm_done_fn of a convolution: bias and activation on a block of output
 * rows (channels i0 ..) just computed, while it is in L1 (a pass over the whole
 * output afterwards would read it back from L2 or L3). */
static void conv_done(const void *ctx, float *c, int i0, int j0, int m, int n, int ldc) {
  const conv_epi *e = (const conv_epi *)ctx;
  int i;
  (void)j0;
  for (i = 0; i < m; i++)
    bias_act_row(c + (size_t)i * ldc, n, e->bias ? e->bias[i0 + i] : 0.0f, e->act, e->a, e->b);
}

/* Output positions q0 .. q1-1 of every output plane of a layer on the SGEMM paths
 * (pointwise, im2col rows, im2col chunks), weights prepared or not. The product
 * of a column range is the same columns of the whole product, bit for bit: every
 * output is one dot product over K in the same blocks, whatever tile holds it. */
static void conv_gemm_cols(const mg_conv2d_params *p, const float *x, const float *w,
                           const float *bias, float *y, float *scratch, int q0, int q1) {
  const int G = p->group, Cg = p->C / G, Mg = p->M / G;
  const int K = Cg * p->kh * p->kw, npos = p->OH * p->OW, nq = q1 - q0;
  const size_t xplane = (size_t)p->H * p->W, yplane = (size_t)npos;
  const size_t wgroup = p->prepared ? prep_group_floats(p) : (size_t)Mg * K;
  const int mr = p->prepared_mr;
  int n, g;
  if (nq <= 0) return;
  for (n = 0; n < p->N; n++) {
    for (g = 0; g < G; g++) {
      const float *xg = x + ((size_t)n * p->C + (size_t)g * Cg) * xplane;
      const float *wg = w + (size_t)g * wgroup;
      const float *bg = bias ? bias + (size_t)g * Mg : NULL;
      float *yg = y + ((size_t)n * p->M + (size_t)g * Mg) * yplane + q0;
      /* prepared products apply bias and activation block by block (conv_done) */
      const conv_epi epi = {bg, p->act, p->act_a, p->act_b};
      const mg_sgemm_done_fn done = p->act == MG_ACT_NONE && !bg ? NULL : conv_done;
      if (is_pointwise(p)) {
        /* y[Mg x HW] = w[Mg x Cg] * x[Cg x HW], columns q0.. */
        if (p->prepared)
          mg_sgemm_packed(Mg, nq, Cg, wg, mr, xg + q0, npos, NULL, NULL, yg, npos, scratch, done, &epi);
        else
          mg_sgemm(Mg, nq, Cg, 1.0f, wg, Cg, 0, xg + q0, npos, 0, 0.0f, yg, npos, scratch);
        if (!p->prepared) mg_bias_act(yg, Mg, nq, npos, bg, p->act, p->act_a, p->act_b);
      } else if (use_rows(p)) {
        /* im2col produced row segment by row segment while SGEMM packs B */
        const im2col_src src = {p, xg, q0};
        if (p->prepared)
          mg_sgemm_packed(Mg, nq, K, wg, mr, NULL, 0, im2col_row, &src, yg, npos, scratch, done, &epi);
        else
          mg_sgemm_rows(Mg, nq, K, wg, K, im2col_row, &src, yg, npos, scratch);
        if (!p->prepared) mg_bias_act(yg, Mg, nq, npos, bg, p->act, p->act_a, p->act_b);
      } else {
        const im2col_src src = {p, xg, 0};
        const int cols = chunk_cols(p, K);
        float *col = align64(scratch);
        float *gemm_scratch = col + (size_t)K * cols;
        int c0;
        for (c0 = q0; c0 < q1; c0 += cols) {
          const int nc = min_int(cols, q1 - c0);
          float *yc = yg + (c0 - q0);
          im2col(&src, K, c0, nc, col);
          /* y[:, c0..c0+nc] = w[Mg x K] * col[K x nc]; the epilogue runs on the
           * chunk while it is still in cache */
          if (p->prepared)
            mg_sgemm_packed(Mg, nc, K, wg, mr, col, nc, NULL, NULL, yc, npos, gemm_scratch, done, &epi);
          else
            mg_sgemm(Mg, nc, K, 1.0f, wg, K, 0, col, nc, 0, 0.0f, yc, npos, gemm_scratch);
          if (!p->prepared) mg_bias_act(yc, Mg, nc, npos, bg, p->act, p->act_a, p->act_b);
        }
      }
    }
  }
}


void mg_conv2d_part(const mg_conv2d_params *p, const float *x, const float *w,
                    const float *bias, float *y, float *scratch, int t, int n) {
  const int G = p->group, Cg = p->C / G, Mg = p->M / G;
  int b, e, in, g;
#if HAVE_DEPTHWISE
  if (depthwise_fits(p)) {
    mg_split_range(p->M, n, t, 1, &b, &e);
    if (e > b) conv_depthwise(p, x, w, bias, y, b, e);
    return;
  }
#endif
#if HAVE_WINOGRAD
  if (winograd_fits(p)) {
    const size_t xplane = (size_t)p->H * p->W, yplane = (size_t)p->OH * p->OW;
    const size_t wgroup = p->prepared ? prep_group_floats(p) : (size_t)Mg * Cg * 9;
    /* a one-tile chunk would be a matrix-vector product: one-tile-wide layers
     * stay on one thread */
    if (wino_tw(p) == 1 && t > 0) return;
    mg_split_range(wino_th(p), wino_tw(p) == 1 ? 1 : n, wino_tw(p) == 1 ? 0 : t, 1, &b, &e);
    if (e <= b) return;
    for (in = 0; in < p->N; in++)
      for (g = 0; g < G; g++)
        conv_winograd(p, x + ((size_t)in * p->C + (size_t)g * Cg) * xplane, w + (size_t)g * wgroup,
                      bias ? bias + (size_t)g * Mg : NULL,
                      y + ((size_t)in * p->M + (size_t)g * Mg) * yplane, scratch, b, e);
    return;
  }
#else
  if (p->prepared == MG_CONV_PREP_WINOGRAD) {
    /* transformed weights and no Winograd compiled in (a hand-made MG_RT_SELECT):
     * NaN, loudly, rather than a direct convolution of transformed kernels */
    const size_t ny = (size_t)p->N * p->M * p->OH * p->OW;
    size_t i;
    if (t == 0)
      for (i = 0; i < ny; i++) y[i] = NAN;
    return;
  }
#endif
  (void)in, (void)g, (void)Cg, (void)Mg;
  mg_split_range(p->OH * p->OW, n, t, 32, &b, &e);
  conv_gemm_cols(p, x, w, bias, y, scratch, b, e);
}

void mg_conv2d(const mg_conv2d_params *p, const float *x, const float *w,
               const float *bias, float *y, float *scratch) {
  mg_conv2d_part(p, x, w, bias, y, scratch, 0, 1);
}

/* --------------------------------------------------------- conv transpose */
#if !defined(MG_RT_SELECT) || defined(MG_RT_USE_CONV_TRANSPOSE)

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
#endif /* MG_RT_USE_CONV_TRANSPOSE */
