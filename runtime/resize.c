/* Resize for the migc CPU runtime (contracts in mg_rt_nn.h). The code generator
 * computes every output coordinate's input taps and weights at conversion time
 * (all coordinate transformation, nearest and cubic rules live there), so these
 * kernels only gather and blend. */
#include "mg_runtime.h"

#include <stddef.h>
#include <string.h>

/* dst[i] = sum_t w[t] * src_t[i] for contiguous rows: the inner > 1 case, where
 * every tap is a whole row and the blend vectorises. */
static void blend_rows(int inner, int taps, const int64_t *idx, const float *w,
                       const float *x, float *dst) {
  int i, t;
  const float *r0 = x + (size_t)idx[0] * inner;
  if (taps == 1) {
    if (w[0] == 1.0f) {
      memcpy(dst, r0, (size_t)inner * sizeof(float));
    } else {
      for (i = 0; i < inner; i++) dst[i] = w[0] * r0[i];
    }
    return;
  }
  if (taps == 2) {
    const float *r1 = x + (size_t)idx[1] * inner;
    const float w0 = w[0], w1 = w[1];
    for (i = 0; i < inner; i++) dst[i] = w0 * r0[i] + w1 * r1[i];
    return;
  }
  for (i = 0; i < inner; i++) dst[i] = w[0] * r0[i];
  for (t = 1; t < taps; t++) {
    const float *rt = x + (size_t)idx[t] * inner;
    const float wt = w[t];
    for (i = 0; i < inner; i++) dst[i] += wt * rt[i];
  }
}

void mg_resize_axis(int outer, int L, int O, int inner, int taps, const int64_t *idx,
                    const float *w, float extrapolation, const float *x, float *y) {
  int o, j, t, i;
  for (o = 0; o < outer; o++) {
    const float *xo = x + (size_t)o * L * inner;
    float *yo = y + (size_t)o * O * inner;
    if (inner == 1) { /* the last axis: a gather per output */
      for (j = 0; j < O; j++) {
        const int64_t *ij = idx + (size_t)j * taps;
        const float *wj = w + (size_t)j * taps;
        float s;
        if (ij[0] < 0) {
          yo[j] = extrapolation;
          continue;
        }
        s = wj[0] * xo[ij[0]];
        for (t = 1; t < taps; t++) s += wj[t] * xo[ij[t]];
        yo[j] = s;
      }
      continue;
    }
    for (j = 0; j < O; j++) {
      float *dst = yo + (size_t)j * inner;
      if (idx[(size_t)j * taps] < 0) {
        for (i = 0; i < inner; i++) dst[i] = extrapolation;
        continue;
      }
      blend_rows(inner, taps, idx + (size_t)j * taps, w + (size_t)j * taps, xo, dst);
    }
  }
}

size_t mg_resize_bilinear_scratch(int OW) { return 2 * (size_t)OW; }

/* One input row interpolated along W into OW columns. */
static void hrow(int OW, const int64_t *xidx, const float *xw, const float *src, float *dst) {
  int j;
  for (j = 0; j < OW; j++)
    dst[j] = xw[2 * j] * src[xidx[2 * j]] + xw[2 * j + 1] * src[xidx[2 * j + 1]];
}

/* Each output row needs two horizontally interpolated input rows; consecutive
 * output rows mostly share them (upsampling), so the two most recent ones are kept
 * in scratch and reused, and each output row is then one vectorised blend. */
void mg_resize_bilinear2d(int planes, int H, int W, int OH, int OW, const int64_t *yidx,
                          const float *yw, const int64_t *xidx, const float *xw,
                          const float *x, float *y, float *scratch) {
  int pl, j, i;
  for (pl = 0; pl < planes; pl++) {
    const float *xp = x + (size_t)pl * H * W;
    float *yp = y + (size_t)pl * OH * OW;
    float *buf[2];
    int64_t have[2] = {-1, -1};
    buf[0] = scratch;
    buf[1] = scratch + OW;
    for (j = 0; j < OH; j++) {
      const int64_t r0 = yidx[2 * j], r1 = yidx[2 * j + 1];
      const float w0 = yw[2 * j], w1 = yw[2 * j + 1];
      float *a, *b, *dst = yp + (size_t)j * OW;
      int k0, k1;
      /* slot of r0: reuse if cached, else fill the slot not holding r1 */
      k0 = have[0] == r0 ? 0 : have[1] == r0 ? 1 : -1;
      if (k0 < 0) {
        k0 = have[0] == r1 ? 1 : 0;
        hrow(OW, xidx, xw, xp + (size_t)r0 * W, buf[k0]);
        have[k0] = r0;
      }
      k1 = have[1 - k0] == r1 ? 1 - k0 : (r1 == r0 ? k0 : -1);
      if (k1 < 0) {
        k1 = 1 - k0;
        hrow(OW, xidx, xw, xp + (size_t)r1 * W, buf[k1]);
        have[k1] = r1;
      }
      a = buf[k0];
      b = buf[k1];
      for (i = 0; i < OW; i++) dst[i] = w0 * a[i] + w1 * b[i];
    }
  }
}
