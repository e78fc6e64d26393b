/* Sampling kernels of the nn family: Resize (separable N-D nearest, linear and
 * cubic interpolation, every coordinate transformation of the ONNX reference),
 * GridSample (PyTorch's grid_sample), RoiAlign and MaxRoiPool (onnxruntime's
 * algorithms, which the ONNX test data follows), and NonMaxSuppression. */
#include "interp_nn.h"
#include "resize_geom.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Records an out-of-memory diagnostic for n; returns -1. */
static int oom(interp_ctx *c, const mg_node *n) {
  mg_error(c->d, OOM, n->name, n->op_type, "out of memory");
  return -1;
}

/* Records that attribute `attr` has an unsupported value; returns -1. */
static int unsupported(interp_ctx *c, const mg_node *n, const char *attr, const char *value) {
  mg_error(c->d, UNSUPPORTED_ATTR, n->name, n->op_type, "%s '%s' is not supported", attr, value);
  return -1;
}

/* ---- Resize ---- */

/* Reads Resize's mode attributes into o; -1 (diagnosed) for unsupported values. */
static int resize_opts(interp_ctx *c, const mg_node *n, mg_resize_opts *o) {
  const char *attr, *value;
  return mg_resize_read_opts(n, o, &attr, &value) ? unsupported(c, n, attr, value) : 0;
}

int resize_plan(const mg_node *n, const mg_resize_opts *o, const mg_array *x, const mg_array *roi,
                const mg_array *sc, const mg_array *sz, mg_rz_axis *geo, const char **err) {
  int n_sc = 0, n_sz = 0, n_roi = 0;
  float scales[MG_ARRAY_MAX_RANK];
  int64_t sizes[MG_ARRAY_MAX_RANK];
  double rv[2 * MG_ARRAY_MAX_RANK];
  if (x->rank > MG_MAX_RANK) return *err = "rank too large", -1;
  if (sz && it_numel(sz)) {
    n_sz = it_ints(sz, sizes, MG_ARRAY_MAX_RANK);
    if (n_sz < 0) return *err = "too many sizes", -1;
  } else if (sc && it_numel(sc)) {
    if (sc->rank != 1 || it_numel(sc) > MG_ARRAY_MAX_RANK) return *err = "scales must be a vector", -1;
    n_sc = (int)it_numel(sc);
    for (int i = 0; i < n_sc; i++) scales[i] = (float)it_get_f64(sc, i);
  }
  if (roi && o->ctm == MG_RZ_TF_CROP_AND_RESIZE) {
    if (it_numel(roi) > 2 * MG_ARRAY_MAX_RANK) return *err = "roi too long", -1;
    n_roi = (int)it_numel(roi);
    for (int i = 0; i < n_roi; i++) rv[i] = it_get_f64(roi, i);
  }
  return mg_resize_geometry(n, o, x->rank, x->dims, scales, n_sc, sizes, n_sz, rv, n_roi, geo, err);
}

int resize_pass_order(int r, const mg_rz_axis *geo, int *order) {
  int no = 0;
  for (int pass = 0; pass < 2; pass++)
    for (int a = 0; a < r; a++)
      if ((geo[a].out_len < geo[a].in_len) == (pass == 0)) order[no++] = a;
  return no;
}

/* Resize: the geometry of core/resize_geom.c, then one separable pass per axis
 * that changes, shrinking axes first. */
static int resize(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *xt = it_in(in, n, 0), *roi = it_in(in, n, 1), *sc = it_in(in, n, 2), *sz = it_in(in, n, 3);
  if (!xt) return it_fail(c, n, "missing input");
  mg_resize_opts o;
  if (resize_opts(c, n, &o)) return -1;
  int r = xt->rank;
  mg_rz_axis geo[MG_ARRAY_MAX_RANK];
  const char *err;
  if (resize_plan(n, &o, xt, roi, sc, sz, geo, &err)) return it_fail(c, n, "%s", err);
  int64_t od[MG_ARRAY_MAX_RANK];
  for (int d = 0; d < r; d++) od[d] = geo[d].out_len;
  mg_array *yt = it_out(c, n, out, 0, xt->dtype, r, od);
  if (!yt) return -1;
  double ext = mg_attr_float(n, "extrapolation_value", 0);
  double *cur = it_f64(c, n, xt);
  if (!cur) return -1;
  int64_t cd[MG_ARRAY_MAX_RANK];
  memcpy(cd, xt->dims, sizeof(int64_t) * (size_t)r);
  int order[MG_ARRAY_MAX_RANK], rc = 0;
  resize_pass_order(r, geo, order);
  for (int q = 0; q < r && !rc; q++) {
    int a = order[q];
    int64_t L = cd[a], O = od[a];
    int64_t *ti = mg_malloc(sizeof(int64_t) * (size_t)(O * MG_RZ_MAX_TAPS + 1));
    double *tw = mg_malloc(sizeof(double) * (size_t)(O * MG_RZ_MAX_TAPS + 1));
    int *nt = mg_malloc(sizeof(int) * (size_t)(O + 1));
    if (!ti || !tw || !nt) rc = oom(c, n);
    int identity = L == O;
    for (int64_t j = 0; !rc && j < O; j++) {
      nt[j] = mg_resize_taps(&o, &geo[a], j, ti + j * MG_RZ_MAX_TAPS, tw + j * MG_RZ_MAX_TAPS);
      identity &= nt[j] == 1 && ti[j * MG_RZ_MAX_TAPS] == j && tw[j * MG_RZ_MAX_TAPS] == 1;
    }
    if (!rc && !identity) {
      int64_t outer = 1, inner = 1;
      for (int d = 0; d < a; d++) outer *= cd[d];
      for (int d = a + 1; d < r; d++) inner *= cd[d];
      double *nx = mg_calloc((size_t)(outer * O * inner + 1), sizeof(double));
      if (!nx) rc = oom(c, n);
      for (int64_t p = 0; !rc && p < outer; p++)
        for (int64_t j = 0; j < O; j++) {
          double *dst = nx + (p * O + j) * inner;
          if (!nt[j]) {
            for (int64_t i = 0; i < inner; i++) dst[i] = ext;
            continue;
          }
          for (int k = 0; k < nt[j]; k++) {
            double wv = tw[j * MG_RZ_MAX_TAPS + k];
            const double *src = cur + (p * L + ti[j * MG_RZ_MAX_TAPS + k]) * inner;
            for (int64_t i = 0; i < inner; i++) dst[i] += wv * src[i];
          }
        }
      if (!rc) {
        mg_free(cur);
        cur = nx;
        cd[a] = O;
      }
    }
    mg_free(ti), mg_free(tw), mg_free(nt);
  }
  if (!rc) it_store_f64(yt, cur);
  mg_free(cur);
  return rc;
}

/* ---- GridSample ---- */

/* PyTorch's reflect_coordinates over [twice_low / 2, twice_high / 2]. */
static double gs_reflect(double x, double twice_low, double twice_high) {
  if (twice_low == twice_high) return 0;
  double mn = twice_low / 2, span = (twice_high - twice_low) / 2;
  x = fabs(x - mn);
  double extra = fmod(x, span), flips = floor(x / span);
  return fmod(flips, 2) == 0 ? extra + mn : span - extra + mn;
}

enum { GP_ZEROS, GP_BORDER, GP_REFLECTION };

/* Applies the padding mode to a coordinate along an axis of length len. */
static double gs_pad(double x, int64_t len, int pad, int align) {
  if (pad == GP_BORDER) return fmin(fmax(x, 0), (double)(len - 1));
  if (pad == GP_REFLECTION) {
    x = align ? gs_reflect(x, 0, 2.0 * (double)(len - 1)) : gs_reflect(x, -1, 2.0 * (double)len - 1);
    return fmin(fmax(x, 0), (double)(len - 1));
  }
  return x;
}

/* Pixel (y, x) of plane p (integral coordinates held as doubles), 0 outside. */
static double gs_at(const double *p, int64_t H, int64_t W, double y, double x) {
  if (!(y >= 0 && y < (double)H && x >= 0 && x < (double)W)) return 0;
  return p[(int64_t)y * W + (int64_t)x];
}

/* PyTorch's cubic convolution weights for |x| <= 1 and 1 < |x| < 2. */
static double gs_cubic1(double x, double A) { return ((A + 2) * x - (A + 3)) * x * x + 1; }
static double gs_cubic2(double x, double A) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; }

/* GridSample on 4-D input as torch.nn.functional.grid_sample computes it: the
 * padding mode applies to the sampling coordinate (bilinear, nearest: round half
 * to even) or, for bicubic, to each of the 16 taps. */
static int grid_sample(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *xt = it_in(in, n, 0), *gt = it_in(in, n, 1);
  if (!xt || !gt) return it_fail(c, n, "missing input");
  if (xt->rank != 4) {
    mg_error(c->d, LIMIT, n->name, n->op_type, "only 4-D GridSample input is supported");
    return -1;
  }
  if (gt->rank != 4 || gt->dims[0] != xt->dims[0] || gt->dims[3] != 2)
    return it_fail(c, n, "grid must be [N, H_out, W_out, 2]");
  const char *ms = mg_attr_str(n, "mode", "bilinear"), *ps = mg_attr_str(n, "padding_mode", "zeros");
  int mode = !strcmp(ms, "bilinear") || !strcmp(ms, "linear") ? 0 : !strcmp(ms, "nearest") ? 1
             : !strcmp(ms, "bicubic") || !strcmp(ms, "cubic") ? 2 : -1;
  int pad = !strcmp(ps, "zeros") ? GP_ZEROS : !strcmp(ps, "border") ? GP_BORDER : !strcmp(ps, "reflection") ? GP_REFLECTION : -1;
  if (mode < 0) return unsupported(c, n, "mode", ms);
  if (pad < 0) return unsupported(c, n, "padding_mode", ps);
  int align = (int)mg_attr_int(n, "align_corners", 0);
  int64_t N = xt->dims[0], C = xt->dims[1], H = xt->dims[2], W = xt->dims[3];
  int64_t Ho = gt->dims[1], Wo = gt->dims[2], yd[4] = {N, C, Ho, Wo};
  mg_array *yt = it_out(c, n, out, 0, xt->dtype, 4, yd);
  if (!yt) return -1;
  double *x = it_f64(c, n, xt), *g = x ? it_f64(c, n, gt) : NULL;
  double *y = g ? mg_malloc(sizeof(double) * (size_t)(it_numel(yt) + 1)) : NULL;
  if (!y) {
    if (g) oom(c, n);
    mg_free(x), mg_free(g);
    return -1;
  }
  for (int64_t b = 0; b < N; b++)
    for (int64_t i = 0; i < Ho * Wo; i++) {
      double gx = g[(b * Ho * Wo + i) * 2], gy = g[(b * Ho * Wo + i) * 2 + 1];
      double fx = align ? (gx + 1) / 2 * (double)(W - 1) : ((gx + 1) * (double)W - 1) / 2;
      double fy = align ? (gy + 1) / 2 * (double)(H - 1) : ((gy + 1) * (double)H - 1) / 2;
      if (mode != 2) fx = gs_pad(fx, W, pad, align), fy = gs_pad(fy, H, pad, align);
      for (int64_t ch = 0; ch < C; ch++) {
        const double *p = x + (b * C + ch) * H * W;
        double v = 0;
        if (mode == 1) {
          v = gs_at(p, H, W, nearbyint(fy), nearbyint(fx));
        } else if (mode == 0) {
          double x0 = floor(fx), y0 = floor(fy), tx = fx - x0, ty = fy - y0;
          v = gs_at(p, H, W, y0, x0) * (1 - tx) * (1 - ty) + gs_at(p, H, W, y0, x0 + 1) * tx * (1 - ty) +
              gs_at(p, H, W, y0 + 1, x0) * (1 - tx) * ty + gs_at(p, H, W, y0 + 1, x0 + 1) * tx * ty;
        } else {
          double x0 = floor(fx), y0 = floor(fy), tx = fx - x0, ty = fy - y0, A = -0.75;
          double cx[4] = {gs_cubic2(tx + 1, A), gs_cubic1(tx, A), gs_cubic1(1 - tx, A), gs_cubic2(2 - tx, A)};
          double cy[4] = {gs_cubic2(ty + 1, A), gs_cubic1(ty, A), gs_cubic1(1 - ty, A), gs_cubic2(2 - ty, A)};
          for (int ky = 0; ky < 4; ky++) {
            double row = 0, ty2 = gs_pad(y0 - 1 + ky, H, pad, align);
            for (int kx = 0; kx < 4; kx++) {
              double tx2 = gs_pad(x0 - 1 + kx, W, pad, align);
              row += cx[kx] * gs_at(p, H, W, trunc(ty2), trunc(tx2));
            }
            v += cy[ky] * row;
          }
        }
        y[(b * C + ch) * Ho * Wo + i] = v;
      }
    }
  it_store_f64(yt, y);
  mg_free(x), mg_free(g), mg_free(y);
  return 0;
}

/* ---- RoiAlign and MaxRoiPool ---- */

int roi_read_opts(const mg_node *n, roi_opts *o, const char **attr, const char **value) {
  const char *ms = mg_attr_str(n, "mode", "avg");
  const char *cts = n->opset < 16 ? "output_half_pixel" : mg_attr_str(n, "coordinate_transformation_mode", "half_pixel");
  o->is_max = !strcmp(ms, "max"), o->half = !strcmp(cts, "half_pixel");
  *attr = *value = NULL;
  if (!o->is_max && strcmp(ms, "avg")) *attr = "mode", *value = ms;
  else if (!o->half && strcmp(cts, "output_half_pixel")) *attr = "coordinate_transformation_mode", *value = cts;
  o->oh = mg_attr_int(n, "output_height", 1), o->ow = mg_attr_int(n, "output_width", 1);
  o->sr = mg_attr_int(n, "sampling_ratio", 0);
  o->ss = mg_attr_float(n, "spatial_scale", 1);
  return *attr ? -1 : 0;
}

int roi_grid_init(const roi_opts *o, const double box[4], roi_grid *g, const char **err) {
  double off = o->half ? 0.5 : 0;
  g->x0 = box[0] * o->ss - off, g->y0 = box[1] * o->ss - off;
  double rw = box[2] * o->ss - off - g->x0, rh = box[3] * o->ss - off - g->y0;
  if (!o->half) rw = fmax(rw, 1), rh = fmax(rh, 1);
  g->bh = rh / (double)o->oh, g->bw = rw / (double)o->ow;
  if (!(fabs(g->bh) < 1e6 && fabs(g->bw) < 1e6 && fabs(g->x0) < 1e15 && fabs(g->y0) < 1e15))
    return *err = "roi is not finite or too large", -1;
  g->gh = o->sr > 0 ? o->sr : (int64_t)ceil(rh / (double)o->oh);
  g->gw = o->sr > 0 ? o->sr : (int64_t)ceil(rw / (double)o->ow);
  if (g->gh > 0 && g->gw > 0 && (double)g->gh * (double)g->gw > (double)(1 << 24))
    return *err = "roi needs more than 2^24 samples per bin", -1;
  g->count = (double)(g->gh * g->gw > 1 ? g->gh * g->gw : 1);
  return 0;
}

int roi_corners(const roi_grid *g, int64_t H, int64_t W, int64_t ph, int64_t pw, int64_t iy, int64_t ix,
                int64_t idx[4], double w[4]) {
  double yy = g->y0 + (double)ph * g->bh + ((double)iy + 0.5) * g->bh / (double)g->gh;
  double xx = g->x0 + (double)pw * g->bw + ((double)ix + 0.5) * g->bw / (double)g->gw;
  for (int k = 0; k < 4; k++) idx[k] = 0, w[k] = 0;
  if (!(H > 0 && W > 0 && yy >= -1.0 && yy <= (double)H && xx >= -1.0 && xx <= (double)W)) return 0;
  double fy = yy <= 0 ? 0 : yy, fx = xx <= 0 ? 0 : xx;
  int64_t yl = (int64_t)fy, xl = (int64_t)fx, yh, xh;
  if (yl >= H - 1) yh = yl = H - 1, fy = (double)yl;
  else yh = yl + 1;
  if (xl >= W - 1) xh = xl = W - 1, fx = (double)xl;
  else xh = xl + 1;
  double ly = fy - (double)yl, lx = fx - (double)xl, hy = 1 - ly, hx = 1 - lx;
  idx[0] = yl * W + xl, idx[1] = yl * W + xh, idx[2] = yh * W + xl, idx[3] = yh * W + xh;
  w[0] = hy * hx, w[1] = hy * lx, w[2] = ly * hx, w[3] = ly * lx;
  return 1;
}

/* RoiAlign as onnxruntime computes it (the ONNX test data's source): bilinear
 * samples on a grid per bin (roi_corners), averaged, or in max mode the largest
 * weighted corner of any sample. */
static int roi_align(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *xt = it_in(in, n, 0), *rt = it_in(in, n, 1), *bt = it_in(in, n, 2);
  if (!xt || !rt || !bt) return it_fail(c, n, "missing input");
  if (xt->rank != 4 || rt->rank != 2 || rt->dims[1] != 4 || it_numel(bt) != rt->dims[0])
    return it_fail(c, n, "expected X [N,C,H,W], rois [R,4], batch_indices [R]");
  roi_opts o;
  const char *attr, *value, *err;
  if (roi_read_opts(n, &o, &attr, &value)) return unsupported(c, n, attr, value);
  if (o.oh < 1 || o.ow < 1 || o.sr < 0) return it_fail(c, n, "bad output size or sampling_ratio");
  int64_t N = xt->dims[0], C = xt->dims[1], H = xt->dims[2], W = xt->dims[3], R = rt->dims[0];
  int64_t yd[4] = {R, C, o.oh, o.ow};
  mg_array *yt = it_out(c, n, out, 0, xt->dtype, 4, yd);
  if (!yt) return -1;
  double *x = it_f64(c, n, xt), *y = x ? mg_calloc((size_t)(it_numel(yt) + 1), sizeof(double)) : NULL;
  if (!y) {
    if (x) oom(c, n);
    mg_free(x);
    return -1;
  }
  int rc = 0;
  for (int64_t r = 0; r < R && !rc; r++) {
    int64_t b = it_get_i64(bt, r);
    if (b < 0 || b >= N) {
      rc = it_fail(c, n, "batch index %lld out of range", (long long)b);
      break;
    }
    double box[4] = {it_get_f64(rt, r * 4), it_get_f64(rt, r * 4 + 1), it_get_f64(rt, r * 4 + 2),
                     it_get_f64(rt, r * 4 + 3)};
    roi_grid g;
    if (roi_grid_init(&o, box, &g, &err)) {
      mg_error(c->d, LIMIT, n->name, n->op_type, "roi %lld: %s", (long long)r, err);
      rc = -1;
      break;
    }
    for (int64_t ch = 0; ch < C; ch++) {
      const double *p = x + (b * C + ch) * H * W;
      for (int64_t ph = 0; ph < o.oh; ph++)
        for (int64_t pw = 0; pw < o.ow; pw++) {
          double acc = 0;
          int first = 1;
          for (int64_t iy = 0; iy < g.gh; iy++)
            for (int64_t ix = 0; ix < g.gw; ix++) {
              int64_t idx[4];
              double w[4], v[4];
              roi_corners(&g, H, W, ph, pw, iy, ix, idx, w);
              for (int k = 0; k < 4; k++) v[k] = w[k] * p[idx[k]];
              if (o.is_max) {
                double m = fmax(fmax(v[0], v[1]), fmax(v[2], v[3]));
                acc = first ? m : fmax(acc, m);
                first = 0;
              } else {
                acc += v[0] + v[1] + v[2] + v[3];
              }
            }
          y[((r * C + ch) * o.oh + ph) * o.ow + pw] = o.is_max ? acc : acc / g.count;
        }
    }
  }
  if (!rc) it_store_f64(yt, y);
  mg_free(x), mg_free(y);
  return rc;
}

/* MaxRoiPool (Caffe's ROI pooling): rois [R, 5] = (batch, x1, y1, x2, y2). */
static int max_roi_pool(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *xt = it_in(in, n, 0), *rt = it_in(in, n, 1);
  if (!xt || !rt) return it_fail(c, n, "missing input");
  if (xt->rank != 4 || rt->rank != 2 || rt->dims[1] != 5)
    return it_fail(c, n, "expected X [N,C,H,W] and rois [R,5]");
  const int64_t *ps;
  if (mg_attr_ints(n, "pooled_shape", &ps) != 2 || ps[0] < 1 || ps[1] < 1)
    return it_fail(c, n, "pooled_shape must have 2 positive values");
  double ss = mg_attr_float(n, "spatial_scale", 1);
  int64_t N = xt->dims[0], C = xt->dims[1], H = xt->dims[2], W = xt->dims[3], R = rt->dims[0];
  int64_t yd[4] = {R, C, ps[0], ps[1]};
  mg_array *yt = it_out(c, n, out, 0, xt->dtype, 4, yd);
  if (!yt) return -1;
  double *x = it_f64(c, n, xt), *y = x ? mg_calloc((size_t)(it_numel(yt) + 1), sizeof(double)) : NULL;
  if (!y) {
    if (x) oom(c, n);
    mg_free(x);
    return -1;
  }
  int rc = 0;
  for (int64_t r = 0; r < R && !rc; r++) {
    double bf = it_get_f64(rt, r * 5);
    int64_t b = bf >= 0 && bf < (double)N ? (int64_t)bf : -1;
    if (b < 0 || b >= N) {
      rc = it_fail(c, n, "batch index %lld out of range", (long long)b);
      break;
    }
    for (int k = 1; k < 5; k++)
      if (!(fabs(it_get_f64(rt, r * 5 + k) * ss) < 1e15)) rc = it_fail(c, n, "roi %lld is not finite or too large", (long long)r);
    if (rc) break;
    int64_t xs = (int64_t)round(it_get_f64(rt, r * 5 + 1) * ss), ys = (int64_t)round(it_get_f64(rt, r * 5 + 2) * ss);
    int64_t xe = (int64_t)round(it_get_f64(rt, r * 5 + 3) * ss), ye = (int64_t)round(it_get_f64(rt, r * 5 + 4) * ss);
    int64_t rh = ye - ys + 1 > 1 ? ye - ys + 1 : 1, rw = xe - xs + 1 > 1 ? xe - xs + 1 : 1;
    double bh = (double)rh / (double)ps[0], bw = (double)rw / (double)ps[1];
    for (int64_t ch = 0; ch < C; ch++)
      for (int64_t ph = 0; ph < ps[0]; ph++)
        for (int64_t pw = 0; pw < ps[1]; pw++) {
          int64_t h0 = (int64_t)floor((double)ph * bh) + ys, h1 = (int64_t)ceil((double)(ph + 1) * bh) + ys;
          int64_t w0 = (int64_t)floor((double)pw * bw) + xs, w1 = (int64_t)ceil((double)(pw + 1) * bw) + xs;
          h0 = h0 < 0 ? 0 : h0 > H ? H : h0, h1 = h1 < 0 ? 0 : h1 > H ? H : h1;
          w0 = w0 < 0 ? 0 : w0 > W ? W : w0, w1 = w1 < 0 ? 0 : w1 > W ? W : w1;
          double m = h1 <= h0 || w1 <= w0 ? 0 : -INFINITY;
          for (int64_t hh = h0; hh < h1; hh++)
            for (int64_t ww = w0; ww < w1; ww++) m = fmax(m, x[((b * C + ch) * H + hh) * W + ww]);
          y[((r * C + ch) * ps[0] + ph) * ps[1] + pw] = m;
        }
  }
  if (!rc) it_store_f64(yt, y);
  mg_free(x), mg_free(y);
  return rc;
}

/* ---- NonMaxSuppression ---- */

typedef struct {
  double score;
  int64_t index;
} nms_cand;

/* Higher score first; equal scores by lower box index. */
static int nms_order(const void *a, const void *b) {
  const nms_cand *x = a, *y = b;
  if (x->score != y->score) return x->score > y->score ? -1 : 1;
  return x->index < y->index ? -1 : x->index > y->index;
}

/* Whether boxes a and b (corners y1 x1 y2 x2 in any order, or centre format)
 * overlap with IoU above the threshold. */
static int nms_suppress(const double *a, const double *b, int center, double thr) {
  double ay0, ax0, ay1, ax1, by0, bx0, by1, bx1;
  if (center) {
    ax0 = a[0] - a[2] / 2, ax1 = a[0] + a[2] / 2, ay0 = a[1] - a[3] / 2, ay1 = a[1] + a[3] / 2;
    bx0 = b[0] - b[2] / 2, bx1 = b[0] + b[2] / 2, by0 = b[1] - b[3] / 2, by1 = b[1] + b[3] / 2;
  } else {
    ay0 = fmin(a[0], a[2]), ay1 = fmax(a[0], a[2]), ax0 = fmin(a[1], a[3]), ax1 = fmax(a[1], a[3]);
    by0 = fmin(b[0], b[2]), by1 = fmax(b[0], b[2]), bx0 = fmin(b[1], b[3]), bx1 = fmax(b[1], b[3]);
  }
  double ix0 = fmax(ax0, bx0), ix1 = fmin(ax1, bx1), iy0 = fmax(ay0, by0), iy1 = fmin(ay1, by1);
  if (ix1 <= ix0 || iy1 <= iy0) return 0;
  double inter = (ix1 - ix0) * (iy1 - iy0);
  double aa = (ax1 - ax0) * (ay1 - ay0), ab = (bx1 - bx0) * (by1 - by0), uni = aa + ab - inter;
  if (aa <= 0 || ab <= 0 || uni <= 0) return 0;
  return inter / uni > thr;
}

/* NonMaxSuppression: per batch and class, greedy selection by descending score
 * (above score_threshold when given), dropping boxes whose IoU with a kept one
 * exceeds iou_threshold, at most max_output_boxes_per_class; [num, 3] int64. */
static int nms(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *bt = it_in(in, n, 0), *st = it_in(in, n, 1), *mt = it_in(in, n, 2);
  const mg_array *it = it_in(in, n, 3), *tt = it_in(in, n, 4);
  if (!bt || !st) return it_fail(c, n, "missing input");
  if (bt->rank != 3 || bt->dims[2] != 4 || st->rank != 3 || st->dims[0] != bt->dims[0] ||
      st->dims[2] != bt->dims[1])
    return it_fail(c, n, "expected boxes [B, n, 4] and scores [B, C, n]");
  int64_t maxout = mt && it_numel(mt) ? it_get_i64(mt, 0) : 0;
  double iou = it && it_numel(it) ? it_get_f64(it, 0) : 0;
  int has_thr = tt && it_numel(tt);
  double thr = has_thr ? it_get_f64(tt, 0) : 0;
  int center = (int)mg_attr_int(n, "center_point_box", 0);
  int64_t B = bt->dims[0], NB = bt->dims[1], C = st->dims[1];
  double *boxes = it_f64(c, n, bt), *scores = boxes ? it_f64(c, n, st) : NULL;
  nms_cand *cand = scores ? mg_malloc(sizeof(nms_cand) * (size_t)(NB + 1)) : NULL;
  int64_t *sel = cand ? mg_malloc(sizeof(int64_t) * (size_t)(NB + 1)) : NULL;
  int64_t *res = NULL, nres = 0, cap = 0;
  int rc = sel ? 0 : -1;
  if (!rc && maxout < 0) maxout = 0;
  if (scores && !sel) oom(c, n);
  for (int64_t b = 0; b < B && !rc; b++)
    for (int64_t k = 0; k < C && !rc; k++) {
      const double *sc = scores + (b * C + k) * NB;
      int64_t nc = 0, ns = 0;
      for (int64_t i = 0; i < NB; i++)
        if (!has_thr || sc[i] > thr) cand[nc].score = sc[i], cand[nc].index = i, nc++;
      qsort(cand, (size_t)nc, sizeof *cand, nms_order);
      for (int64_t i = 0; i < nc && ns < maxout; i++) {
        const double *bx = boxes + (b * NB + cand[i].index) * 4;
        int keep = 1;
        for (int64_t j = 0; j < ns && keep; j++)
          if (nms_suppress(bx, boxes + (b * NB + sel[j]) * 4, center, iou)) keep = 0;
        if (!keep) continue;
        sel[ns++] = cand[i].index;
        if (nres == cap) {
          cap = cap ? cap * 2 : 64;
          int64_t *t = mg_realloc(res, sizeof(int64_t) * 3 * (size_t)cap);
          if (!t) {
            rc = oom(c, n);
            break;
          }
          res = t;
        }
        res[nres * 3] = b, res[nres * 3 + 1] = k, res[nres * 3 + 2] = cand[i].index;
        nres++;
      }
    }
  int64_t yd[2] = {nres, 3};
  mg_array *yt = rc ? NULL : it_out(c, n, out, 0, MG_I64, 2, yd);
  if (yt) it_store_i64(yt, res);
  else rc = -1;
  mg_free(boxes), mg_free(scores), mg_free(cand), mg_free(sel), mg_free(res);
  return rc;
}

/* See interp_nn.h: dispatches the sampling ops. */
int interp_nn_sampling(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  switch (n->op) {
  case MG_OP_Resize: return resize(c, n, in, out);
  case MG_OP_GridSample: return grid_sample(c, n, in, out);
  case MG_OP_RoiAlign: return roi_align(c, n, in, out);
  case MG_OP_MaxRoiPool: return max_roi_pool(c, n, in, out);
  case MG_OP_NonMaxSuppression: return nms(c, n, in, out);
  default:
    mg_error(c->d, UNKNOWN_OP, n->name, n->op_type, "%s is not a sampling op", n->op_type);
    return -1;
  }
}
