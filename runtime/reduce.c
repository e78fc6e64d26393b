/* Reductions and one-axis normalisations: Reduce*, ArgMax/ArgMin, CumSum,
 * Softmax/LogSoftmax/Hardmax, LpNormalization, MeanVarianceNormalization.
 * float32 has fast paths over [outer, n, inner]; every dtype has a generic path
 * computing like the reference interpreter (see mg_rt_tensor.h). */
#include "mg_runtime.h"

#include <math.h>
#include <string.h>

/* ------------------------------------------------------ float32 reductions */

enum { COLS = 64, BLOCK = 256 };

/* Sum of n floats with 8 independent float lanes (vectorisable), flushed into a
 * double every BLOCK elements so the error stays that of a short float sum. */
static double sum_row(const float *x, int64_t n, int sq, int ab) {
  double total = 0;
  int64_t b, j;
  for (b = 0; b < n; b += BLOCK) {
    int64_t e = b + BLOCK < n ? b + BLOCK : n;
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int l;
    for (j = b; j + 8 <= e; j += 8)
      for (l = 0; l < 8; l++) {
        float v = x[j + l];
        acc[l] += sq ? v * v : ab ? fabsf(v) : v;
      }
    for (; j < e; j++) {
      float v = x[j];
      acc[0] += sq ? v * v : ab ? fabsf(v) : v;
    }
    for (l = 0; l < 8; l++) total += acc[l];
  }
  return total;
}

/* Finishes a sum-like reduction of n elements. */
static float finish(mg_reduce_op op, double s, int64_t n) {
  switch (op) {
  case MG_REDUCE_MEAN: return (float)(s / (double)n);
  case MG_REDUCE_L2: return (float)sqrt(s);
  case MG_REDUCE_LOG_SUM: return (float)log(s);
  default: return (float)s;
  }
}

/* One row (inner == 1) of a non-sum reduction. */
static float other_row(mg_reduce_op op, const float *x, int64_t n) {
  int64_t j;
  if (op == MG_REDUCE_MAX || op == MG_REDUCE_MIN) {
    float m = op == MG_REDUCE_MAX ? -INFINITY : INFINITY;
    int nan = 0;
    if (op == MG_REDUCE_MAX)
      for (j = 0; j < n; j++) m = x[j] > m ? x[j] : m;
    else
      for (j = 0; j < n; j++) m = x[j] < m ? x[j] : m;
    for (j = 0; j < n; j++) nan |= x[j] != x[j];
    return nan ? NAN : m;
  }
  if (op == MG_REDUCE_PROD) {
    double p = 1;
    for (j = 0; j < n; j++) p *= x[j];
    return (float)p;
  }
  { /* LogSumExp */
    float m = -INFINITY;
    double s = 0;
    int nan = 0;
    for (j = 0; j < n; j++) m = x[j] > m ? x[j] : m, nan |= x[j] != x[j];
    if (nan) return NAN;
    if (!isfinite(m)) {
      for (j = 0; j < n; j++) s += exp((double)x[j]);
      return m > 0 ? m : (float)log(s);
    }
    for (j = 0; j < n; j++) s += exp((double)x[j] - m);
    return (float)(m + log(s));
  }
}

void mg_reduce_f32(mg_reduce_op op, int64_t outer, int64_t n, int64_t inner, const float *src,
                   float *dst) {
  int sumlike = op == MG_REDUCE_SUM || op == MG_REDUCE_MEAN || op == MG_REDUCE_SUM_SQUARE ||
                op == MG_REDUCE_L1 || op == MG_REDUCE_L2 || op == MG_REDUCE_LOG_SUM;
  int sq = op == MG_REDUCE_SUM_SQUARE || op == MG_REDUCE_L2, ab = op == MG_REDUCE_L1;
  int64_t o, i0, i, j;
  for (o = 0; o < outer; o++) {
    const float *x = src + o * n * inner;
    float *y = dst + o * inner;
    if (inner == 1) {
      y[0] = sumlike ? finish(op, sum_row(x, n, sq, ab), n) : other_row(op, x, n);
      continue;
    }
    /* Columns in tiles of COLS, rows streamed: contiguous, vectorisable loops. */
    for (i0 = 0; i0 < inner; i0 += COLS) {
      int64_t w = inner - i0 < COLS ? inner - i0 : COLS;
      double tot[COLS];
      float acc[COLS], mx[COLS];
      int nan[COLS];
      for (i = 0; i < w; i++) tot[i] = op == MG_REDUCE_PROD ? 1 : 0, nan[i] = 0;
      if (sumlike) {
        int64_t b;
        for (b = 0; b < n; b += BLOCK) {
          int64_t e = b + BLOCK < n ? b + BLOCK : n;
          for (i = 0; i < w; i++) acc[i] = 0;
          for (j = b; j < e; j++) {
            const float *r = x + j * inner + i0;
            if (sq) for (i = 0; i < w; i++) acc[i] += r[i] * r[i];
            else if (ab) for (i = 0; i < w; i++) acc[i] += fabsf(r[i]);
            else for (i = 0; i < w; i++) acc[i] += r[i];
          }
          for (i = 0; i < w; i++) tot[i] += acc[i];
        }
        for (i = 0; i < w; i++) y[i0 + i] = finish(op, tot[i], n);
      } else if (op == MG_REDUCE_PROD) {
        for (j = 0; j < n; j++)
          for (i = 0; i < w; i++) tot[i] *= x[j * inner + i0 + i];
        for (i = 0; i < w; i++) y[i0 + i] = (float)tot[i];
      } else {
        int is_max = op != MG_REDUCE_MIN;
        for (i = 0; i < w; i++) mx[i] = is_max ? -INFINITY : INFINITY;
        for (j = 0; j < n; j++) {
          const float *r = x + j * inner + i0;
          if (is_max) for (i = 0; i < w; i++) mx[i] = r[i] > mx[i] ? r[i] : mx[i];
          else for (i = 0; i < w; i++) mx[i] = r[i] < mx[i] ? r[i] : mx[i];
          for (i = 0; i < w; i++) nan[i] |= r[i] != r[i];
        }
        if (op == MG_REDUCE_LOG_SUM_EXP) {
          for (j = 0; j < n; j++)
            for (i = 0; i < w; i++) {
              float m = mx[i];
              tot[i] += exp((double)x[j * inner + i0 + i] - (isfinite(m) ? m : 0));
            }
          for (i = 0; i < w; i++) {
            float m = mx[i];
            y[i0 + i] = nan[i] ? NAN : isfinite(m) ? (float)(m + log(tot[i])) : m > 0 ? m : (float)log(tot[i]);
          }
        } else {
          for (i = 0; i < w; i++) y[i0 + i] = nan[i] ? NAN : mx[i];
        }
      }
    }
  }
}

/* ------------------------------------------------------ generic reductions */

/* Odometer over n dims of shape with element strides; returns the next offset
 * delta application: advances coord and *off, 0 when the walk is over. */
static int step(int n, const int64_t *shape, const int64_t *strides, int64_t *coord, int64_t *off) {
  int d;
  for (d = n - 1; d >= 0; d--) {
    *off += strides[d];
    if (++coord[d] < shape[d]) return 1;
    *off -= strides[d] * shape[d];
    coord[d] = 0;
  }
  return 0;
}

static int64_t count(int n, const int64_t *shape) {
  int64_t c = 1;
  int d;
  for (d = 0; d < n; d++) c *= shape[d];
  return c;
}

/* Integer extremes of dtype t for empty Max/Min (uint64's largest is -1 as int64). */
static int64_t int_lowest(mg_rt_dtype t) {
  switch (t) {
  case MG_RT_I8: return INT8_MIN;
  case MG_RT_I16: return INT16_MIN;
  case MG_RT_I32: return INT32_MIN;
  case MG_RT_I64: return INT64_MIN;
  default: return 0;
  }
}
static int64_t int_highest(mg_rt_dtype t) {
  switch (t) {
  case MG_RT_I8: return INT8_MAX;
  case MG_RT_U8: return UINT8_MAX;
  case MG_RT_I16: return INT16_MAX;
  case MG_RT_U16: return UINT16_MAX;
  case MG_RT_I32: return INT32_MAX;
  case MG_RT_U32: return UINT32_MAX;
  case MG_RT_I64: return INT64_MAX;
  case MG_RT_BOOL: return 1;
  default: return -1;
  }
}
static int int_gt(mg_rt_dtype t, int64_t a, int64_t b) {
  return t == MG_RT_U64 ? (uint64_t)a > (uint64_t)b : a > b;
}

void mg_reduce(mg_rt_dtype t, mg_reduce_op op, int n_keep, const int64_t *keep_shape,
               const int64_t *keep_strides, int n_red, const int64_t *red_shape,
               const int64_t *red_strides, const void *src, void *dst) {
  int64_t kc[16] = {0}, koff = 0, g = 0, nred = count(n_red, red_shape);
  int flt = mg_tensor_is_float(t) || op == MG_REDUCE_MEAN || op == MG_REDUCE_L2 ||
            op == MG_REDUCE_LOG_SUM || op == MG_REDUCE_LOG_SUM_EXP;
  if (count(n_keep, keep_shape) == 0) return;
  do {
    int64_t rc[16] = {0}, roff = 0;
    if (!flt) {
      uint64_t acc = op == MG_REDUCE_PROD ? 1
                     : op == MG_REDUCE_MAX ? (uint64_t)int_lowest(t)
                     : op == MG_REDUCE_MIN ? (uint64_t)int_highest(t) : 0;
      if (nred > 0) do {
        int64_t v = mg_tensor_load_i64(t, src, koff + roff);
        uint64_t u = (uint64_t)v;
        switch (op) {
        case MG_REDUCE_SUM: acc += u; break;
        case MG_REDUCE_L1: acc += v < 0 && t != MG_RT_U64 ? 0 - u : u; break;
        case MG_REDUCE_SUM_SQUARE: acc += u * u; break;
        case MG_REDUCE_PROD: acc *= u; break;
        case MG_REDUCE_MAX: if (int_gt(t, v, (int64_t)acc)) acc = u; break;
        case MG_REDUCE_MIN: if (int_gt(t, (int64_t)acc, v)) acc = u; break;
        default: break;
        }
      } while (step(n_red, red_shape, red_strides, rc, &roff));
      mg_tensor_store_i64(t, dst, g, (int64_t)acc);
    } else {
      double acc = op == MG_REDUCE_PROD ? 1 : op == MG_REDUCE_MAX ? -INFINITY
                                       : op == MG_REDUCE_MIN ? INFINITY : 0;
      double m = -INFINITY;
      if (op == MG_REDUCE_LOG_SUM_EXP && nred > 0) {
        do {
          double v = mg_tensor_load_f64(t, src, koff + roff);
          if (v > m || v != v) m = v;
        } while (step(n_red, red_shape, red_strides, rc, &roff));
      }
      if (nred > 0) do {
        double v = mg_tensor_load_f64(t, src, koff + roff);
        switch (op) {
        case MG_REDUCE_SUM: case MG_REDUCE_MEAN: case MG_REDUCE_LOG_SUM: acc += v; break;
        case MG_REDUCE_L1: acc += fabs(v); break;
        case MG_REDUCE_L2: case MG_REDUCE_SUM_SQUARE: acc += v * v; break;
        case MG_REDUCE_PROD: acc *= v; break;
        case MG_REDUCE_MAX: if (v > acc || v != v) acc = v; break;
        case MG_REDUCE_MIN: if (v < acc || v != v) acc = v; break;
        case MG_REDUCE_LOG_SUM_EXP: acc += exp(v - (isfinite(m) ? m : 0)); break;
        }
      } while (step(n_red, red_shape, red_strides, rc, &roff));
      switch (op) {
      case MG_REDUCE_MEAN: acc /= (double)nred; break;
      case MG_REDUCE_L2: acc = sqrt(acc); break;
      case MG_REDUCE_LOG_SUM: acc = log(acc); break;
      case MG_REDUCE_LOG_SUM_EXP:
        acc = isfinite(m) ? m + log(acc) : (m != m || m > 0) ? m : log(acc);
        break;
      default: break;
      }
      mg_tensor_store_f64(t, dst, g, acc);
    }
    g++;
  } while (step(n_keep, keep_shape, keep_strides, kc, &koff));
}

/* ------------------------------------------------------ ArgMax / ArgMin */

void mg_argextreme(mg_rt_dtype t, int is_min, int select_last, int64_t outer, int64_t n,
                   int64_t inner, const void *src, int64_t *dst) {
  int flt = mg_tensor_is_float(t);
  int64_t o, i, s;
  for (o = 0; o < outer; o++)
    for (i = 0; i < inner; i++) {
      int64_t best = -1, bi = 0, base = o * n * inner + i;
      double bf = 0;
      if (n <= 0) {
        dst[o * inner + i] = 0;
        continue;
      }
      if (t == MG_RT_F32 && !select_last) {
        const float *x = (const float *)src + base;
        float m = x[0];
        best = 0;
        if (m == m)
          for (s = 1; s < n; s++) {
            float v = x[s * inner];
            if (v != v) { best = s; break; }
            if (is_min ? v < m : v > m) m = v, best = s;
          }
        dst[o * inner + i] = best;
        continue;
      }
      for (s = 0; s < n; s++) {
        int64_t j = select_last ? n - 1 - s : s, at = base + j * inner;
        if (flt) {
          double v = mg_tensor_load_f64(t, src, at);
          if (v != v) { best = j; break; }
          if (best < 0 || (is_min ? v < bf : v > bf)) best = j, bf = v;
        } else {
          int64_t v = mg_tensor_load_i64(t, src, at);
          if (best < 0 || (is_min ? int_gt(t, bi, v) : int_gt(t, v, bi))) best = j, bi = v;
        }
      }
      dst[o * inner + i] = best < 0 ? 0 : best;
    }
}

/* ------------------------------------------------------ CumSum */

void mg_cumsum(mg_rt_dtype t, int exclusive, int reverse, int64_t outer, int64_t n,
               int64_t inner, const void *src, void *dst) {
  int flt = mg_tensor_is_float(t);
  int64_t o, i, s;
  for (o = 0; o < outer; o++)
    for (i = 0; i < inner; i++) {
      double af = 0;
      uint64_t ai = 0;
      for (s = 0; s < n; s++) {
        int64_t j = reverse ? n - 1 - s : s, at = (o * n + j) * inner + i;
        if (flt) {
          double v = mg_tensor_load_f64(t, src, at);
          if (!exclusive) af += v;
          mg_tensor_store_f64(t, dst, at, af);
          if (exclusive) af += v;
        } else {
          uint64_t v = (uint64_t)mg_tensor_load_i64(t, src, at);
          if (!exclusive) ai += v;
          mg_tensor_store_i64(t, dst, at, (int64_t)ai);
          if (exclusive) ai += v;
        }
      }
    }
}

void mg_cumsum_axis(mg_rt_dtype t, int exclusive, int reverse, int rank, const int64_t *dims,
                    int64_t axis, const void *src, void *dst) {
  int64_t outer = 1, inner = 1;
  int d, a;
  if (axis < 0) axis += rank;
  a = axis < 0 ? 0 : axis >= rank ? rank - 1 : (int)axis;
  for (d = 0; d < a; d++) outer *= dims[d];
  for (d = a + 1; d < rank; d++) inner *= dims[d];
  mg_cumsum(t, exclusive, reverse, outer, dims[a], inner, src, dst);
}

/* ------------------------------------------------------ softmax family */

/* exp(x) for x <= 0 (x - max), about 1 ulp: x = k ln2 + r, |r| <= ln2/2, exp(r)
 * by a degree-6 polynomial, 2^k by exponent bits. Below -87.3 (where exp leaves
 * float's normal range) it gives 0. The clamp and that select are done on the bit
 * patterns (for x <= 0 a larger pattern is a more negative number) because float
 * compares would keep GCC from vectorising under -ftrapping-math. */
static float exp_nonpos(float x) {
  uint32_t ub, under, cb, rb;
  const uint32_t lim = 0xC2AE999Au; /* -87.3f */
  float xc, k, r, p, scale, res;
  int32_t ki;
  memcpy(&ub, &x, 4);
  under = ub > lim;
  cb = under ? lim : ub;
  memcpy(&xc, &cb, 4);
  /* round to nearest by the 1.5 * 2^23 trick (vectorises without SSE4.1) */
  k = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  r = xc - k * 0.693359375f;
  r = r + k * 2.12194440e-4f;
  p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  ki = (int32_t)k;
  rb = (uint32_t)(ki + 127) << 23;
  memcpy(&scale, &rb, 4);
  res = p * scale;
  memcpy(&rb, &res, 4);
  rb &= under - 1u;
  memcpy(&res, &rb, 4);
  return res;
}

/* Sum of n floats in 8 lanes (vectorisable without reassociation flags), in double
 * at the end. */
static double lanes_sum(const float *v, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  double s = 0;
  int64_t j;
  int l;
  for (j = 0; j + 8 <= n; j += 8)
    for (l = 0; l < 8; l++) acc[l] += v[j + l];
  for (; j < n; j++) s += v[j];
  for (l = 0; l < 8; l++) s += acc[l];
  return s;
}

/* One contiguous row: softmax / log-softmax / hardmax of x into y (may alias). */
static void softmax_row(mg_softmax_kind kind, const float *x, float *y, int64_t n) {
  float m, mx[8];
  int64_t j, arg = 0;
  double s = 0;
  int nan = 0, l;
  if (n <= 0) return;
  for (l = 0; l < 8; l++) mx[l] = -INFINITY;
  for (j = 0; j + 8 <= n; j += 8)
    for (l = 0; l < 8; l++) mx[l] = x[j + l] > mx[l] ? x[j + l] : mx[l];
  m = mx[0];
  for (l = 1; l < 8; l++) m = mx[l] > m ? mx[l] : m;
  for (; j < n; j++) m = x[j] > m ? x[j] : m;
  for (j = 0; j < n; j++) nan |= x[j] != x[j];
  if (kind == MG_HARDMAX) {
    float mm = x[0];
    for (j = 1; j < n; j++) /* first maximum; first NaN wins */
      if ((x[j] > mm && mm == mm) || (x[j] != x[j] && mm == mm)) mm = x[j], arg = j;
    for (j = 0; j < n; j++) y[j] = j == arg ? 1.0f : 0.0f;
    return;
  }
  if (nan || !isfinite(m)) { /* exact scalar path for the degenerate rows */
    double md = nan ? NAN : m;
    for (j = 0; j < n; j++) s += exp((double)x[j] - md);
    for (j = 0; j < n; j++) {
      double v = (double)x[j] - md;
      y[j] = kind == MG_SOFTMAX ? (float)(exp(v) / s) : (float)(v - log(s));
    }
    return;
  }
  if (kind == MG_SOFTMAX) {
    float inv;
    for (j = 0; j < n; j++) y[j] = exp_nonpos(x[j] - m);
    inv = (float)(1.0 / lanes_sum(y, n));
    for (j = 0; j < n; j++) y[j] *= inv;
  } else {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0}, lse;
    for (j = 0; j + 8 <= n; j += 8)
      for (l = 0; l < 8; l++) acc[l] += exp_nonpos(x[j + l] - m);
    for (; j < n; j++) s += exp_nonpos(x[j] - m);
    for (l = 0; l < 8; l++) s += acc[l];
    lse = (float)log(s);
    for (j = 0; j < n; j++) y[j] = (x[j] - m) - lse;
  }
}

void mg_softmax_f32(mg_softmax_kind kind, int64_t outer, int64_t n, int64_t inner,
                    const float *src, float *dst) {
  int64_t o, i0, i, j;
  if (inner == 1) {
    for (o = 0; o < outer; o++) softmax_row(kind, src + o * n, dst + o * n, n);
    return;
  }
  for (o = 0; o < outer; o++) {
    const float *x = src + o * n * inner;
    float *y = dst + o * n * inner;
    for (i0 = 0; i0 < inner; i0 += COLS) {
      int64_t w = inner - i0 < COLS ? inner - i0 : COLS;
      float m[COLS];
      double s[COLS]; /* double: log(s) near 0 must not lose the small terms */
      int64_t arg[COLS];
      int bad = 0;
      for (i = 0; i < w; i++) m[i] = x[i0 + i], arg[i] = 0, s[i] = 0;
      for (j = 1; j < n; j++)
        for (i = 0; i < w; i++) {
          float v = x[j * inner + i0 + i];
          if ((v > m[i] && m[i] == m[i]) || (v != v && m[i] == m[i])) m[i] = v, arg[i] = j;
        }
      if (kind == MG_HARDMAX) {
        for (j = 0; j < n; j++)
          for (i = 0; i < w; i++) y[j * inner + i0 + i] = arg[i] == j ? 1.0f : 0.0f;
        continue;
      }
      for (i = 0; i < w; i++) bad |= !isfinite(m[i]);
      if (bad) { /* rare: NaN or infinite maxima; the generic path is exact */
        for (i = 0; i < w; i++)
          mg_softmax(MG_RT_F32, kind, 1, n, inner, x + i0 + i, y + i0 + i);
        continue;
      }
      for (j = 0; j < n; j++)
        for (i = 0; i < w; i++) {
          float e = exp_nonpos(x[j * inner + i0 + i] - m[i]);
          if (kind == MG_SOFTMAX) y[j * inner + i0 + i] = e;
          s[i] += e;
        }
      if (kind == MG_SOFTMAX) {
        float inv[COLS];
        for (i = 0; i < w; i++) inv[i] = (float)(1.0 / s[i]);
        for (j = 0; j < n; j++)
          for (i = 0; i < w; i++) y[j * inner + i0 + i] *= inv[i];
      } else {
        float lse[COLS];
        for (i = 0; i < w; i++) lse[i] = (float)log(s[i]);
        for (j = 0; j < n; j++)
          for (i = 0; i < w; i++) y[j * inner + i0 + i] = (x[j * inner + i0 + i] - m[i]) - lse[i];
      }
    }
  }
}

void mg_softmax(mg_rt_dtype t, mg_softmax_kind kind, int64_t outer, int64_t n, int64_t inner,
                const void *src, void *dst) {
  int64_t o, i, j;
  for (o = 0; o < outer; o++)
    for (i = 0; i < inner; i++) {
      int64_t base = o * n * inner + i, arg = -1;
      double m = -INFINITY, s = 0;
      for (j = 0; j < n; j++) {
        double v = mg_tensor_load_f64(t, src, base + j * inner);
        if (arg < 0 || v > m || (v != v && m == m)) m = v, arg = j;
      }
      if (kind == MG_HARDMAX) {
        for (j = 0; j < n; j++) mg_tensor_store_f64(t, dst, base + j * inner, j == arg);
        continue;
      }
      for (j = 0; j < n; j++) s += exp(mg_tensor_load_f64(t, src, base + j * inner) - m);
      for (j = 0; j < n; j++) {
        double v = mg_tensor_load_f64(t, src, base + j * inner) - m;
        mg_tensor_store_f64(t, dst, base + j * inner, kind == MG_SOFTMAX ? exp(v) / s : v - log(s));
      }
    }
}

/* ------------------------------------------------------ Lp and MVN */

void mg_lp_normalize(mg_rt_dtype t, int p, int64_t outer, int64_t n, int64_t inner,
                     const void *src, void *dst) {
  int64_t o, i, j;
  for (o = 0; o < outer; o++)
    for (i = 0; i < inner; i++) {
      int64_t base = o * n * inner + i;
      double s = 0;
      for (j = 0; j < n; j++) {
        double v = mg_tensor_load_f64(t, src, base + j * inner);
        s += p == 1 ? fabs(v) : v * v;
      }
      if (p == 2) s = sqrt(s);
      for (j = 0; j < n; j++)
        mg_tensor_store_f64(t, dst, base + j * inner, mg_tensor_load_f64(t, src, base + j * inner) / s);
    }
}

void mg_mvn(mg_rt_dtype t, int n_keep, const int64_t *keep_shape, const int64_t *keep_strides,
            int n_red, const int64_t *red_shape, const int64_t *red_strides, const void *src,
            void *dst) {
  int64_t kc[16] = {0}, koff = 0, cnt = count(n_red, red_shape);
  if (count(n_keep, keep_shape) == 0 || cnt == 0) return;
  do {
    int64_t rc[16] = {0}, roff = 0;
    double mean = 0, var = 0;
    do mean += mg_tensor_load_f64(t, src, koff + roff);
    while (step(n_red, red_shape, red_strides, rc, &roff));
    mean /= (double)cnt;
    do {
      double d = mg_tensor_load_f64(t, src, koff + roff) - mean;
      var += d * d;
    } while (step(n_red, red_shape, red_strides, rc, &roff));
    var = sqrt(var / (double)cnt) + 1e-9;
    do mg_tensor_store_f64(t, dst, koff + roff, (mg_tensor_load_f64(t, src, koff + roff) - mean) / var);
    while (step(n_red, red_shape, red_strides, rc, &roff));
  } while (step(n_keep, keep_shape, keep_strides, kc, &koff));
}
