/* N-d convolution, transposed convolution, pools and MaxUnpool for the migc CPU
 * runtime (contracts in mg_rt_rnn.h). The 1-D/2-D float32 cases have faster
 * kernels in conv.c and nn.c; these serve 3-D and up, and the dtypes and Indices
 * output those do not.
 *
 * The spatial grid is walked as "rows": every dim but the last is flattened into a
 * row index, and the last dim is the contiguous inner loop. For each kernel tap the
 * output columns whose input lies inside the image form one range, so inner loops
 * carry no bounds checks. */
#include "mg_runtime.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#define COL_BUDGET (1 << 19) /* floats of im2col per chunk (2 MiB) */
#define ALIGN_SLACK 16

static float *align64(float *p) {
  uintptr_t u = (uintptr_t)p;
  return p + ((64 - (u & 63)) & 63) / sizeof(float);
}

static int min_int(int a, int b) { return a < b ? a : b; }
static int max_int(int a, int b) { return a > b ? a : b; }
static int floor_div(int a, int b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

/* The positions [lo, hi) of o < out whose o*s + off lies in [0, len). */
static void valid_range(int out, int len, int s, int off, int *lo, int *hi) {
  int l = off >= 0 ? 0 : (-off + s - 1) / s;
  int h = len - 1 - off < 0 ? 0 : (len - 1 - off) / s + 1;
  *lo = min_int(l, out);
  *hi = max_int(*lo, min_int(h, out));
}

/* Product of v[0..n). */
static size_t prod(const int *v, int n) {
  size_t r = 1;
  int i;
  for (i = 0; i < n; i++) r *= (size_t)v[i];
  return r;
}

/* Splits flat index f over dims[0..n) (row-major) into idx. */
static void unflatten(size_t f, const int *dims, int n, int *idx) {
  int i;
  for (i = n - 1; i >= 0; i--) {
    idx[i] = (int)(f % (size_t)dims[i]);
    f /= (size_t)dims[i];
  }
}

/* The input row offset (in rows of the last dim) that output row oidx and kernel
 * tap kidx read over the leading nd-1 dims; -1 when it falls in the padding. */
static long long in_row(const mg_convnd_params *p, const int *oidx, const int *kidx) {
  long long off = 0;
  int j;
  for (j = 0; j < p->nd - 1; j++) {
    const int i = oidx[j] * p->s[j] - p->pb[j] + kidx[j] * p->d[j];
    if (i < 0 || i >= p->in[j]) return -1;
    off = off * p->in[j] + i;
  }
  return off;
}

/* ------------------------------------------------------------- Conv */

/* Output rows per im2col chunk for a K-row column matrix. */
static int chunk_rows(const mg_convnd_params *p, size_t K) {
  const int nd = p->nd, OW = p->out[nd - 1];
  const size_t rows = prod(p->out, nd - 1), per = K * (size_t)OW;
  size_t r = per ? COL_BUDGET / per : rows;
  if (r < 1) r = 1;
  if (r > rows) r = rows;
  return (int)r;
}

size_t mg_convnd_scratch(const mg_convnd_params *p) {
  const size_t K = (size_t)(p->C / p->group) * prod(p->k, p->nd);
  const int cols = chunk_rows(p, K) * p->out[p->nd - 1];
  return K * (size_t)cols + mg_sgemm_scratch(p->M / p->group, cols, (int)K) + 2 * ALIGN_SLACK;
}

/* im2col of output rows [r0, r0 + nr) for the Cg channels at x into col, one row
 * per (channel, tap), nr * OW columns. */
static void im2col_nd(const mg_convnd_params *p, const float *x, int Cg, int r0, int nr,
                      float *col) {
  const int nd = p->nd, OW = p->out[nd - 1], W = p->in[nd - 1], L = nd - 1;
  const int sw = p->s[L];
  const size_t taps = prod(p->k, nd), plane = prod(p->in, nd), ncols = (size_t)nr * OW;
  int ci, rr, kidx[MG_ND_MAX], oidx[MG_ND_MAX], i;
  size_t t;
  for (ci = 0; ci < Cg; ci++)
    for (t = 0; t < taps; t++) {
      float *row = col + ((size_t)ci * taps + t) * ncols;
      int off, lo, hi;
      unflatten(t, p->k, nd, kidx);
      off = kidx[L] * p->d[L] - p->pb[L];
      valid_range(OW, W, sw, off, &lo, &hi);
      for (rr = 0; rr < nr; rr++) {
        float *dst = row + (size_t)rr * OW;
        long long ir;
        unflatten((size_t)(r0 + rr), p->out, L, oidx);
        ir = in_row(p, oidx, kidx);
        if (ir < 0 || hi <= lo) {
          memset(dst, 0, sizeof(float) * (size_t)OW);
          continue;
        }
        {
          /* first input read: (lo*sw + off) >= 0 by valid_range */
          const float *src = x + (size_t)ci * plane + (size_t)ir * W + ((ptrdiff_t)lo * sw + off);
          for (i = 0; i < lo; i++) dst[i] = 0.0f;
          if (sw == 1)
            memcpy(dst + lo, src, sizeof(float) * (size_t)(hi - lo));
          else
            for (i = lo; i < hi; i++) dst[i] = src[(size_t)(i - lo) * sw];
          for (i = hi; i < OW; i++) dst[i] = 0.0f;
        }
      }
    }
}

void mg_convnd(const mg_convnd_params *p, const float *x, const float *w, const float *bias,
               float *y, float *scratch) {
  const int nd = p->nd, G = p->group, Cg = p->C / G, Mg = p->M / G, OW = p->out[nd - 1];
  const size_t K = (size_t)Cg * prod(p->k, nd), P = prod(p->out, nd), inplane = prod(p->in, nd);
  const int rows = (int)prod(p->out, nd - 1), cr = chunk_rows(p, K);
  float *col = align64(scratch);
  float *sg = align64(col + K * (size_t)cr * OW);
  int n, g, r0;
  for (n = 0; n < p->N; n++) {
    for (g = 0; g < G; g++) {
      const float *xg = x + ((size_t)n * p->C + (size_t)g * Cg) * inplane;
      for (r0 = 0; r0 < rows; r0 += cr) {
        const int nr = min_int(cr, rows - r0), ncols = nr * OW;
        im2col_nd(p, xg, Cg, r0, nr, col);
        mg_sgemm(Mg, ncols, (int)K, 1.0f, w + (size_t)g * Mg * K, (int)K, 0, col, ncols, 0, 0.0f,
                 y + ((size_t)n * p->M + (size_t)g * Mg) * P + (size_t)r0 * OW, (int)P, sg);
      }
    }
    if (bias || p->act != MG_ACT_NONE)
      mg_bias_act(y + (size_t)n * p->M * P, p->M, (int)P, (int)P, bias, p->act, p->act_a,
                  p->act_b);
  }
}

/* ---------------------------------------------------- ConvTranspose */

size_t mg_conv_transpose_nd_scratch(const mg_convtnd_params *p) {
  const int Mg = p->M / p->group, Cg = p->C / p->group;
  const size_t rows = (size_t)Mg * prod(p->k, p->nd), Pin = prod(p->in, p->nd);
  return rows * Pin + mg_sgemm_scratch((int)rows, (int)Pin, Cg) + 2 * ALIGN_SLACK;
}

/* y += the column matrix (one row of Pin input positions per (channel, tap)) of
 * Mg output channels, scattered to their output positions (col2im). */
static void col2im_nd(const mg_convtnd_params *p, const float *col, int Mg, float *y) {
  const int nd = p->nd, L = nd - 1, Win = p->in[L], OW = p->out[L];
  const size_t taps = prod(p->k, nd), Pin = prod(p->in, nd), P = prod(p->out, nd);
  const int rows_in = (int)prod(p->in, L);
  int m, r, i, kidx[MG_ND_MAX], iidx[MG_ND_MAX];
  size_t t;
  for (m = 0; m < Mg; m++)
    for (t = 0; t < taps; t++) {
      const float *src = col + ((size_t)m * taps + t) * Pin;
      float *yp = y + (size_t)m * P;
      int off, lo, hi;
      unflatten(t, p->k, nd, kidx);
      off = kidx[L] * p->d[L] - p->pb[L];
      valid_range(Win, OW, p->s[L], off, &lo, &hi);
      if (hi <= lo) continue;
      for (r = 0; r < rows_in; r++) {
        long long orow = 0;
        int j, inside = 1;
        unflatten((size_t)r, p->in, L, iidx);
        for (j = 0; j < L && inside; j++) {
          const int o = iidx[j] * p->s[j] - p->pb[j] + kidx[j] * p->d[j];
          if (o < 0 || o >= p->out[j]) inside = 0;
          orow = orow * p->out[j] + o;
        }
        if (!inside) continue;
        {
          const float *sr = src + (size_t)r * Win;
          float *dr = yp + (size_t)orow * OW + ((ptrdiff_t)lo * p->s[L] + off);
          for (i = lo; i < hi; i++) dr[(size_t)(i - lo) * p->s[L]] += sr[i];
        }
      }
    }
}

void mg_conv_transpose_nd(const mg_convtnd_params *p, const float *x, const float *w,
                          const float *bias, float *y, float *scratch) {
  const int nd = p->nd, G = p->group, Cg = p->C / G, Mg = p->M / G;
  const size_t taps = prod(p->k, nd), Pin = prod(p->in, nd), P = prod(p->out, nd);
  const int rows = (int)((size_t)Mg * taps);
  float *col = align64(scratch), *sg = align64(col + (size_t)rows * Pin);
  int n, g, m;
  size_t i;
  for (n = 0; n < p->N; n++) {
    for (m = 0; m < p->M; m++) {
      float *yp = y + ((size_t)n * p->M + m) * P;
      const float v = bias ? bias[m] : 0.0f;
      for (i = 0; i < P; i++) yp[i] = v;
    }
    for (g = 0; g < G; g++) {
      mg_sgemm(rows, (int)Pin, Cg, 1.0f, w + (size_t)g * Cg * rows, rows, 1,
               x + ((size_t)n * p->C + (size_t)g * Cg) * Pin, (int)Pin, 0, 0.0f, col, (int)Pin, sg);
      col2im_nd(p, col, Mg, y + ((size_t)n * p->M + (size_t)g * Mg) * P);
    }
  }
}

/* ------------------------------------------------------------ pools */

enum { POOL_MAX, POOL_SUM, POOL_LP };

/* How many taps k < kernel of a window starting at `start` (step dil) land in
 * [lo_bound, hi_bound). */
static int taps_inside(int start, int kernel, int dil, int lo_bound, int hi_bound) {
  int k0 = lo_bound - start <= 0 ? 0 : (lo_bound - start + dil - 1) / dil;
  int k1 = floor_div(hi_bound - 1 - start, dil);
  if (k1 > kernel - 1) k1 = kernel - 1;
  return k1 < k0 ? 0 : k1 - k0 + 1;
}

/* The pool's window as a convolution geometry (for in_row). */
static void as_conv(const mg_poolnd_params *p, mg_convnd_params *g) {
  memset(g, 0, sizeof *g);
  g->nd = p->nd;
  memcpy(g->in, p->in, sizeof g->in);
  memcpy(g->k, p->k, sizeof g->k);
  memcpy(g->s, p->s, sizeof g->s);
  memcpy(g->d, p->d, sizeof g->d);
  memcpy(g->pb, p->pb, sizeof g->pb);
  memcpy(g->out, p->out, sizeof g->out);
}

/* The float32 windowed pools: every tap accumulated into each output row, then
 * the row finished (average divides, Lp takes the root). */
static void pool_nd(const mg_poolnd_params *p, int kind, int average, const float *x, float *y) {
  const int nd = p->nd, L = nd - 1, W = p->in[L], OW = p->out[L], sw = p->s[L];
  const size_t plane = prod(p->in, nd), oplane = prod(p->out, nd), otaps = prod(p->k, L);
  const int orows = (int)prod(p->out, L);
  mg_convnd_params g;
  int pl, r, i, kj, oidx[MG_ND_MAX], kidx[MG_ND_MAX];
  size_t t;
  as_conv(p, &g);
  for (pl = 0; pl < p->planes; pl++) {
    const float *xp = x + (size_t)pl * plane;
    for (r = 0; r < orows; r++) {
      float *yr = y + (size_t)pl * oplane + (size_t)r * OW;
      const float init = kind == POOL_MAX ? -INFINITY : 0.0f;
      unflatten((size_t)r, p->out, L, oidx);
      for (i = 0; i < OW; i++) yr[i] = init;
      for (t = 0; t < otaps; t++) {
        long long ir;
        unflatten(t, p->k, L, kidx);
        kidx[L] = 0;
        ir = in_row(&g, oidx, kidx);
        if (ir < 0) continue;
        for (kj = 0; kj < p->k[L]; kj++) {
          const int off = kj * p->d[L] - p->pb[L];
          const float *src;
          int lo, hi;
          valid_range(OW, W, sw, off, &lo, &hi);
          if (hi <= lo) continue;
          src = xp + (size_t)ir * W + ((ptrdiff_t)lo * sw + off);
          if (kind == POOL_MAX)
            for (i = lo; i < hi; i++) {
              const float v = src[(size_t)(i - lo) * sw];
              yr[i] = v > yr[i] ? v : yr[i];
            }
          else if (kind == POOL_SUM)
            for (i = lo; i < hi; i++) yr[i] += src[(size_t)(i - lo) * sw];
          else if (p->p == 2.0f)
            for (i = lo; i < hi; i++) {
              const float v = src[(size_t)(i - lo) * sw];
              yr[i] += v * v;
            }
          else
            for (i = lo; i < hi; i++) yr[i] += powf(fabsf(src[(size_t)(i - lo) * sw]), p->p);
        }
      }
      if (average) {
        int cnt = 1, j;
        for (j = 0; j < L; j++) {
          const int lo_b = p->count_include_pad ? -p->pb[j] : 0;
          const int hi_b = p->count_include_pad ? p->in[j] + p->pe[j] : p->in[j];
          cnt *= taps_inside(oidx[j] * p->s[j] - p->pb[j], p->k[j], p->d[j], lo_b, hi_b);
        }
        for (i = 0; i < OW; i++) {
          const int lo_b = p->count_include_pad ? -p->pb[L] : 0;
          const int hi_b = p->count_include_pad ? W + p->pe[L] : W;
          const int c = cnt * taps_inside(i * sw - p->pb[L], p->k[L], p->d[L], lo_b, hi_b);
          yr[i] = yr[i] / (float)c;
        }
      } else if (kind == POOL_LP) {
        if (p->p == 2.0f)
          for (i = 0; i < OW; i++) yr[i] = sqrtf(yr[i]);
        else
          for (i = 0; i < OW; i++) yr[i] = powf(yr[i], 1.0f / p->p);
      }
    }
  }
}

void mg_maxpool_nd(const mg_poolnd_params *p, const float *x, float *y) {
  pool_nd(p, POOL_MAX, 0, x, y);
}
void mg_avgpool_nd(const mg_poolnd_params *p, const float *x, float *y) {
  pool_nd(p, POOL_SUM, 1, x, y);
}
void mg_lppool_nd(const mg_poolnd_params *p, const float *x, float *y) {
  pool_nd(p, POOL_LP, 0, x, y);
}

/* Element i of a t array as double (exact for every MaxPool dtype). */
static double load_any(mg_rt_dtype t, const void *x, size_t i) {
  switch (t) {
  case MG_RT_F32: return ((const float *)x)[i];
  case MG_RT_F64: return ((const double *)x)[i];
  case MG_RT_F16: return mg_rt_f16_to_f32(((const uint16_t *)x)[i]);
  case MG_RT_BF16: return mg_rt_bf16_to_f32(((const uint16_t *)x)[i]);
  case MG_RT_U8: return ((const uint8_t *)x)[i];
  case MG_RT_I8: return ((const int8_t *)x)[i];
  case MG_RT_U16: return ((const uint16_t *)x)[i];
  case MG_RT_I16: return ((const int16_t *)x)[i];
  case MG_RT_I32: return ((const int32_t *)x)[i];
  case MG_RT_U32: return ((const uint32_t *)x)[i];
  case MG_RT_I64: return (double)((const int64_t *)x)[i];
  case MG_RT_U64: return (double)((const uint64_t *)x)[i];
  default: return 0.0;
  }
}

/* Writes the "empty window" value of t (-inf, or the integer minimum) to y[i]. */
static void store_lowest(mg_rt_dtype t, void *y, size_t i) {
  switch (t) {
  case MG_RT_F32: ((float *)y)[i] = -INFINITY; break;
  case MG_RT_F64: ((double *)y)[i] = -INFINITY; break;
  case MG_RT_F16: ((uint16_t *)y)[i] = 0xFC00u; break;
  case MG_RT_BF16: ((uint16_t *)y)[i] = 0xFF80u; break;
  case MG_RT_I8: ((int8_t *)y)[i] = INT8_MIN; break;
  case MG_RT_I16: ((int16_t *)y)[i] = INT16_MIN; break;
  case MG_RT_I32: ((int32_t *)y)[i] = INT32_MIN; break;
  case MG_RT_I64: ((int64_t *)y)[i] = INT64_MIN; break;
  default: memset((unsigned char *)y + i * mg_rt_dtype_size(t), 0, mg_rt_dtype_size(t)); break;
  }
}

void mg_maxpool_nd_any(const mg_poolnd_params *p, mg_rt_dtype t, const void *x, void *y,
                       int64_t *indices, int col_major) {
  const int nd = p->nd;
  const size_t plane = prod(p->in, nd), oplane = prod(p->out, nd), taps = prod(p->k, nd);
  const size_t es = mg_rt_dtype_size(t);
  int pl, j, oidx[MG_ND_MAX], kidx[MG_ND_MAX];
  size_t o, tp;
  for (pl = 0; pl < p->planes; pl++)
    for (o = 0; o < oplane; o++) {
      const size_t yo = (size_t)pl * oplane + o;
      long long best = -1, best_sp = 0;
      double bv = 0.0;
      unflatten(o, p->out, nd, oidx);
      for (tp = 0; tp < taps; tp++) {
        long long off = 0, cm = 0, mul = 1;
        int inside = 1;
        unflatten(tp, p->k, nd, kidx);
        for (j = 0; j < nd && inside; j++) {
          const int i = oidx[j] * p->s[j] - p->pb[j] + kidx[j] * p->d[j];
          if (i < 0 || i >= p->in[j]) inside = 0;
          off = off * p->in[j] + i;
          cm += (long long)i * mul;
          mul *= p->in[j];
        }
        if (!inside) continue;
        {
          const size_t xi = (size_t)pl * plane + (size_t)off;
          const double v = load_any(t, x, xi);
          if (best < 0 || v > bv) best = (long long)xi, bv = v, best_sp = col_major ? cm : off;
        }
      }
      if (best < 0) store_lowest(t, y, yo);
      else memcpy((unsigned char *)y + yo * es, (const unsigned char *)x + (size_t)best * es, es);
      if (indices) indices[yo] = best < 0 ? -1 : (int64_t)((long long)pl * (long long)plane + best_sp);
    }
}

void mg_maxunpool(int rank, const int64_t *idims, const int64_t *ystrides, int64_t count,
                  size_t esize, const void *x, const int64_t *ind, void *y, size_t ybytes) {
  int64_t total = 1, i;
  int d;
  for (d = 0; d < rank; d++) total *= idims[d];
  memset(y, 0, ybytes);
  for (i = 0; i < count; i++) {
    int64_t pos = ind[i], q = 0, rest = pos;
    if (pos < 0 || pos >= total) continue;
    for (d = rank - 1; d >= 0; d--) {
      q += rest % idims[d] * ystrides[d];
      rest /= idims[d];
    }
    memcpy((unsigned char *)y + (size_t)q * esize, (const unsigned char *)x + (size_t)i * esize,
           esize);
  }
}
