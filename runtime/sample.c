/* GridSample and RoiAlign for the migc CPU runtime (contracts in mg_rt_rnn.h).
 * Both read data-dependent positions (the grid, the boxes), so coordinates are
 * computed per sample, in double, as PyTorch and onnxruntime define them; the
 * values are float32. */
#include "mg_runtime.h"

#include <math.h>
#include <string.h>

/* ------------------------------------------------------------ GridSample */

/* PyTorch's reflect_coordinates over [twice_low / 2, twice_high / 2]. */
static double gs_reflect(double x, double twice_low, double twice_high) {
  double mn, span, extra, flips;
  if (twice_low == twice_high) return 0.0;
  mn = twice_low / 2, span = (twice_high - twice_low) / 2;
  x = fabs(x - mn);
  extra = fmod(x, span), flips = floor(x / span);
  return fmod(flips, 2.0) == 0.0 ? extra + mn : span - extra + mn;
}

/* The padding mode applied to a coordinate along an axis of length len. */
static double gs_pad(double x, int len, int pad, int align) {
  if (pad == MG_GS_BORDER) return fmin(fmax(x, 0.0), (double)(len - 1));
  if (pad == MG_GS_REFLECTION) {
    x = align ? gs_reflect(x, 0.0, 2.0 * (double)(len - 1))
              : gs_reflect(x, -1.0, 2.0 * (double)len - 1.0);
    return fmin(fmax(x, 0.0), (double)(len - 1));
  }
  return x;
}

/* Pixel (y, x) of plane p, integral coordinates held as doubles; 0 outside (and
 * for NaN coordinates). */
static double gs_at(const float *p, int H, int W, double y, double x) {
  if (!(y >= 0.0 && y < (double)H && x >= 0.0 && x < (double)W)) return 0.0;
  return p[(size_t)y * (size_t)W + (size_t)x];
}

/* PyTorch's cubic convolution weights (A = -0.75) for |x| <= 1 and 1 < |x| < 2. */
static double cubic1(double x, double A) { return ((A + 2) * x - (A + 3)) * x * x + 1; }
static double cubic2(double x, double A) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; }

void mg_grid_sample2d(int N, int C, int H, int W, int OH, int OW, int mode, int padding,
                      int align_corners, const float *x, const float *grid, float *y) {
  const size_t opl = (size_t)OH * OW, ipl = (size_t)H * W;
  int b, ch;
  size_t i;
  for (b = 0; b < N; b++)
    for (i = 0; i < opl; i++) {
      const float *g = grid + ((size_t)b * opl + i) * 2;
      const double gx = g[0], gy = g[1];
      double fx = align_corners ? (gx + 1) / 2 * (double)(W - 1) : ((gx + 1) * (double)W - 1) / 2;
      double fy = align_corners ? (gy + 1) / 2 * (double)(H - 1) : ((gy + 1) * (double)H - 1) / 2;
      double x0, y0, tx, ty, cx[4], cy[4];
      if (mode != MG_GS_BICUBIC)
        fx = gs_pad(fx, W, padding, align_corners), fy = gs_pad(fy, H, padding, align_corners);
      x0 = floor(fx), y0 = floor(fy), tx = fx - x0, ty = fy - y0;
      if (mode == MG_GS_BICUBIC) {
        const double A = -0.75;
        cx[0] = cubic2(tx + 1, A), cx[1] = cubic1(tx, A), cx[2] = cubic1(1 - tx, A),
        cx[3] = cubic2(2 - tx, A);
        cy[0] = cubic2(ty + 1, A), cy[1] = cubic1(ty, A), cy[2] = cubic1(1 - ty, A),
        cy[3] = cubic2(2 - ty, A);
      }
      for (ch = 0; ch < C; ch++) {
        const float *p = x + ((size_t)b * C + ch) * ipl;
        double v = 0.0;
        if (mode == MG_GS_NEAREST) {
          v = gs_at(p, H, W, nearbyint(fy), nearbyint(fx));
        } else if (mode == MG_GS_BILINEAR) {
          v = gs_at(p, H, W, y0, x0) * (1 - tx) * (1 - ty) + gs_at(p, H, W, y0, x0 + 1) * tx * (1 - ty) +
              gs_at(p, H, W, y0 + 1, x0) * (1 - tx) * ty + gs_at(p, H, W, y0 + 1, x0 + 1) * tx * ty;
        } else {
          int ky, kx;
          for (ky = 0; ky < 4; ky++) {
            const double yy = gs_pad(y0 - 1 + ky, H, padding, align_corners);
            double row = 0.0;
            for (kx = 0; kx < 4; kx++)
              row += cx[kx] * gs_at(p, H, W, trunc(yy),
                                    trunc(gs_pad(x0 - 1 + kx, W, padding, align_corners)));
            v += cy[ky] * row;
          }
        }
        y[((size_t)b * C + ch) * opl + i] = (float)v;
      }
    }
}

/* -------------------------------------------------------------- RoiAlign */

/* Bilinear sample (yy, xx) of plane p as onnxruntime splits it: the four weighted
 * corner values (all 0 outside [-1, H] x [-1, W]). */
static void roi_corners(const float *p, int H, int W, double yy, double xx, double v[4]) {
  double fy, fx, ly, lx;
  int yl, xl, yh, xh;
  v[0] = v[1] = v[2] = v[3] = 0.0;
  if (!(yy >= -1.0 && yy <= (double)H && xx >= -1.0 && xx <= (double)W)) return;
  fy = yy <= 0 ? 0 : yy, fx = xx <= 0 ? 0 : xx;
  yl = (int)fy, xl = (int)fx;
  if (yl >= H - 1) yh = yl = H - 1, fy = (double)yl;
  else yh = yl + 1;
  if (xl >= W - 1) xh = xl = W - 1, fx = (double)xl;
  else xh = xl + 1;
  ly = fy - yl, lx = fx - xl;
  v[0] = (1 - ly) * (1 - lx) * p[(size_t)yl * W + xl], v[1] = (1 - ly) * lx * p[(size_t)yl * W + xh];
  v[2] = ly * (1 - lx) * p[(size_t)yh * W + xl], v[3] = ly * lx * p[(size_t)yh * W + xh];
}

void mg_roi_align(int N, int C, int H, int W, int R, int OH, int OW, int sampling_ratio,
                  float spatial_scale, int mode_max, int half_pixel, const float *x,
                  const float *rois, const int64_t *batch, float *y) {
  const double off = half_pixel ? 0.5 : 0.0, ss = spatial_scale;
  const size_t opl = (size_t)OH * OW;
  int r, ch, ph, pw;
  for (r = 0; r < R; r++) {
    const int64_t b = batch[r];
    const float *box = rois + (size_t)r * 4;
    const double x0 = box[0] * ss - off, y0 = box[1] * ss - off;
    double rw = box[2] * ss - off - x0, rh = box[3] * ss - off - y0, bh, bw, count;
    long long gh, gw, iy, ix;
    float *yr = y + (size_t)r * C * opl;
    if (!half_pixel) rw = fmax(rw, 1.0), rh = fmax(rh, 1.0);
    bh = rh / OH, bw = rw / OW;
    /* a batch index outside the input or a box too large to sample: zeros */
    if (b < 0 || b >= N || H < 1 || W < 1 ||
        !(fabs(bh) < 1e6 && fabs(bw) < 1e6 && fabs(x0) < 1e15 && fabs(y0) < 1e15)) {
      memset(yr, 0, sizeof(float) * (size_t)C * opl);
      continue;
    }
    gh = sampling_ratio > 0 ? sampling_ratio : (long long)ceil(rh / OH);
    gw = sampling_ratio > 0 ? sampling_ratio : (long long)ceil(rw / OW);
    count = (double)(gh * gw > 1 ? gh * gw : 1);
    for (ch = 0; ch < C; ch++) {
      const float *p = x + ((size_t)b * C + ch) * H * W;
      for (ph = 0; ph < OH; ph++)
        for (pw = 0; pw < OW; pw++) {
          double acc = 0.0, v[4];
          int first = 1;
          for (iy = 0; iy < gh; iy++) {
            const double yy = y0 + ph * bh + ((double)iy + 0.5) * bh / (double)gh;
            for (ix = 0; ix < gw; ix++) {
              const double xx = x0 + pw * bw + ((double)ix + 0.5) * bw / (double)gw;
              roi_corners(p, H, W, yy, xx, v);
              if (mode_max) {
                const double m = fmax(fmax(v[0], v[1]), fmax(v[2], v[3]));
                acc = first ? m : fmax(acc, m);
                first = 0;
              } else {
                acc += v[0] + v[1] + v[2] + v[3];
              }
            }
          }
          yr[(size_t)ch * opl + (size_t)ph * OW + pw] = (float)(mode_max ? acc : acc / count);
        }
    }
  }
}
