#include "resize_geom.h"
#include <math.h>
#include <string.h>

int mg_resize_read_opts(const mg_node *n, mg_resize_opts *o, const char **attr, const char **value) {
  static const char *const modes[] = {"nearest", "linear", "cubic"};
  static const char *const ctms[] = {"half_pixel", "pytorch_half_pixel", "align_corners",
                                     "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize"};
  static const char *const nms[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  const char *m = mg_attr_str(n, "mode", "nearest");
  const char *t = mg_attr_str(n, "coordinate_transformation_mode", "half_pixel");
  const char *nm = mg_attr_str(n, "nearest_mode", "round_prefer_floor");
  o->mode = o->ctm = o->nearest = -1;
  for (int i = 0; i < 3; i++)
    if (!strcmp(m, modes[i])) o->mode = i;
  for (int i = 0; i < 6; i++)
    if (!strcmp(t, ctms[i])) o->ctm = i;
  for (int i = 0; i < 4; i++)
    if (!strcmp(nm, nms[i])) o->nearest = i;
  *attr = *value = NULL;
  if (o->mode < 0) *attr = "mode", *value = m;
  else if (o->ctm < 0) *attr = "coordinate_transformation_mode", *value = t;
  else if (o->nearest < 0) *attr = "nearest_mode", *value = nm;
  /* antialias changes linear and cubic only (a wider filter when downsampling) */
  else if (mg_attr_int(n, "antialias", 0) && o->mode != MG_RZ_NEAREST) *attr = "antialias", *value = "1";
  if (*attr) return -1;
  o->exclude_outside = (int)mg_attr_int(n, "exclude_outside", 0);
  o->cubic_a = mg_attr_float(n, "cubic_coeff_a", -0.75f);
  return 0;
}

int64_t mg_resize_scaled_len(int64_t len, float scale) {
  if (!(scale > 0) || len < 0) return -1;
  volatile float p = (float)len * scale; /* float32 product, not contracted into a wider one */
  if (!(p < 1e15f)) return -1;
  return (int64_t)floorf(p);
}

int64_t mg_resize_policy_len(int64_t len, double s) {
  double v = s * (double)len;
  if (!(v >= 0 && v < 1e15)) return -1;
  return (int64_t)(v + 0.5);
}

/* Nearest: the input index of output j, with torch's float32 arithmetic. */
static int64_t nearest_index(const mg_resize_opts *o, const mg_rz_axis *a, int64_t j) {
  const int64_t L = a->in_len, O = a->out_len;
  volatile float inv = a->scale_given ? (float)(1.0 / a->scale) : (float)L / (float)O;
  volatile float x = (float)j, xo;
  switch (o->ctm) {
  case MG_RZ_ASYMMETRIC: xo = x * inv; break;
  case MG_RZ_PYTORCH_HALF_PIXEL: xo = O > 1 ? (x + 0.5f) * inv - 0.5f : 0.0f; break;
  case MG_RZ_TF_HALF_PIXEL_FOR_NN: xo = (x + 0.5f) * inv; break;
  case MG_RZ_ALIGN_CORNERS: xo = O == 1 ? 0.0f : x * ((float)(L - 1) / (float)(O - 1)); break;
  default: xo = (x + 0.5f) * inv - 0.5f; break;
  }
  float fl = floorf(xo), i;
  switch (o->nearest) {
  case MG_RZ_FLOOR: i = fl; break;
  case MG_RZ_CEIL: i = ceilf(xo); break;
  case MG_RZ_ROUND_PREFER_CEIL: i = floorf(xo + 0.5f); break;
  default: i = xo == fl + 0.5f ? fl : floorf(xo + 0.5f); break;
  }
  return i < 0 ? 0 : i >= (float)L ? L - 1 : (int64_t)i;
}

/* Linear and cubic: the input coordinate of output j, in float64. */
static double coord(const mg_resize_opts *o, const mg_rz_axis *a, int64_t j) {
  const double x = (double)j, L = (double)a->in_len, O = (double)a->out_len, s = a->scale;
  switch (o->ctm) {
  case MG_RZ_PYTORCH_HALF_PIXEL: return O > 1 ? (x + 0.5) / s - 0.5 : 0;
  case MG_RZ_ALIGN_CORNERS: return O == 1 ? 0 : x * (L - 1) / (O - 1);
  case MG_RZ_ASYMMETRIC: return x / s;
  case MG_RZ_TF_HALF_PIXEL_FOR_NN: return (x + 0.5) / s;
  case MG_RZ_TF_CROP_AND_RESIZE:
    if (O == 1) return (a->roi_end - a->roi_start) * (L - 1) / 2 + a->roi_start * (L - 1);
    return x * (a->roi_end - a->roi_start) * (L - 1) / (O - 1) + a->roi_start * (L - 1);
  default: return (x + 0.5) / s - 0.5;
  }
}

/* Linear half-pixel resizes, which torch's linear kernels (1-D to 3-D) copy along
 * an axis whose output length equals its input length, whatever the scale (a
 * length-2 axis under scale 1.3). Its nearest and cubic kernels do not. */
static int torch_identity(const mg_resize_opts *o) {
  return o->mode == MG_RZ_LINEAR && (o->ctm == MG_RZ_HALF_PIXEL || o->ctm == MG_RZ_PYTORCH_HALF_PIXEL);
}

int mg_resize_taps(const mg_resize_opts *o, const mg_rz_axis *a, int64_t j, int64_t *idx, double *w) {
  const int64_t L = a->in_len;
  if (o->ctm == MG_RZ_TF_CROP_AND_RESIZE) {
    double xo = coord(o, a, j);
    if (!(xo >= 0 && xo <= (double)(L - 1))) return 0;
  }
  if (L == a->out_len && torch_identity(o)) {
    idx[0] = j, w[0] = 1;
    return 1;
  }
  if (o->mode == MG_RZ_NEAREST && o->ctm != MG_RZ_TF_CROP_AND_RESIZE) {
    idx[0] = nearest_index(o, a, j), w[0] = 1;
    return 1;
  }
  double xo = coord(o, a, j);
  if (!(xo > -1e15 && xo < 1e15)) return 0;
  double fl = floor(xo), r = xo - fl;
  int64_t base = (int64_t)fl;
  int cnt;
  if (o->mode == MG_RZ_NEAREST) { /* tf_crop_and_resize: the ONNX rounding of a float64 coordinate */
    double i;
    switch (o->nearest) {
    case MG_RZ_FLOOR: i = fl; break;
    case MG_RZ_CEIL: i = ceil(xo); break;
    case MG_RZ_ROUND_PREFER_CEIL: i = floor(xo + 0.5); break;
    default: i = r == 0.5 ? fl : floor(xo + 0.5); break;
    }
    idx[0] = (int64_t)i, w[0] = 1, cnt = 1;
  } else if (o->mode == MG_RZ_LINEAR) {
    idx[0] = base, w[0] = 1 - r, idx[1] = base + 1, w[1] = r, cnt = 2;
  } else {
    const double A = o->cubic_a, p = r + 1, q = 1 - r, t = 2 - r;
    double s = 0;
    w[0] = ((A * p - 5 * A) * p + 8 * A) * p - 4 * A;
    w[1] = ((A + 2) * r - (A + 3)) * r * r + 1;
    w[2] = ((A + 2) * q - (A + 3)) * q * q + 1;
    w[3] = ((A * t - 5 * A) * t + 8 * A) * t - 4 * A;
    for (int k = 0; k < 4; k++) {
      idx[k] = base - 1 + k;
      if (o->exclude_outside && (idx[k] < 0 || idx[k] >= L)) w[k] = 0;
      s += w[k];
    }
    if (o->exclude_outside && s != 0)
      for (int k = 0; k < 4; k++) w[k] /= s;
    cnt = 4;
  }
  int m = 0; /* clamp (edge padding), drop zero weights */
  for (int k = 0; k < cnt; k++) {
    if (w[k] == 0 && cnt > 1) continue;
    idx[m] = idx[k] < 0 ? 0 : idx[k] >= L ? L - 1 : idx[k];
    w[m++] = w[k];
  }
  if (m == 0) idx[0] = base < 0 ? 0 : base >= L ? L - 1 : base, w[0] = 0, m = 1;
  return m;
}

int mg_resize_geometry(const mg_node *n, const mg_resize_opts *o, int rank, const int64_t *xd,
                       const float *scales, int n_scales, const int64_t *sizes, int n_sizes,
                       const double *roi, int n_roi, mg_rz_axis *ax, const char **err) {
  int axes[MG_MAX_RANK], na = rank;
  const int64_t *av;
  size_t nax = mg_attr_ints(n, "axes", &av);
  *err = NULL;
  if (rank < 1 || rank > MG_MAX_RANK) return *err = "unsupported rank", -1;
  if (nax > (size_t)rank) return *err = "more axes than the input has", -1;
  if (nax) na = (int)nax;
  for (int i = 0; i < na; i++) {
    int64_t v = nax ? (av[i] < 0 ? av[i] + rank : av[i]) : i;
    if (v < 0 || v >= rank) return *err = "axis out of range", -1;
    axes[i] = (int)v;
  }
  for (int a = 0; a < rank; a++)
    ax[a] = (mg_rz_axis){xd[a], xd[a], 1.0, 1, 0.0, 1.0};
  if (n_sizes) {
    const char *pol = mg_attr_str(n, "keep_aspect_ratio_policy", "stretch");
    const int stretch = !strcmp(pol, "stretch"), larger = !strcmp(pol, "not_smaller");
    double s = larger ? 0 : INFINITY;
    if (!stretch && !larger && strcmp(pol, "not_larger")) return *err = "unsupported keep_aspect_ratio_policy", -1;
    if (n_sizes != na) return *err = "sizes has the wrong number of values", -1;
    for (int i = 0; i < na; i++) {
      if (sizes[i] < 0) return *err = "negative size", -1;
      if (xd[axes[i]] < 1) return *err = "cannot resize an empty axis", -1;
      double q = (double)sizes[i] / (double)xd[axes[i]];
      s = larger ? fmax(s, q) : fmin(s, q);
    }
    for (int i = 0; i < na; i++) {
      mg_rz_axis *x = &ax[axes[i]];
      x->scale_given = !stretch;
      x->out_len = stretch ? sizes[i] : mg_resize_policy_len(x->in_len, s);
      x->scale = stretch ? (double)sizes[i] / (double)x->in_len : s;
      if (x->out_len < 0) return *err = "output too large", -1;
    }
  } else if (n_scales) {
    if (n_scales != na) return *err = "scales has the wrong number of values", -1;
    for (int i = 0; i < na; i++) {
      mg_rz_axis *x = &ax[axes[i]];
      if (!(scales[i] > 0)) return *err = "scales must be positive", -1;
      x->scale = scales[i];
      x->out_len = mg_resize_scaled_len(x->in_len, scales[i]);
      if (x->out_len < 0) return *err = "output too large", -1;
    }
  } else {
    return *err = "Resize needs scales or sizes", -1;
  }
  if (o->ctm == MG_RZ_TF_CROP_AND_RESIZE) {
    if (n_roi != 2 * na && n_roi != 2 * rank) return *err = "tf_crop_and_resize needs 2 roi values per axis", -1;
    const int full = n_roi == 2 * rank && na != rank, m = full ? rank : na;
    for (int i = 0; i < na; i++) {
      const int k = full ? axes[i] : i;
      ax[axes[i]].roi_start = roi[k], ax[axes[i]].roi_end = roi[m + k];
    }
  }
  for (int a = 0; a < rank; a++)
    if (ax[a].in_len == 0 && ax[a].out_len > 0) return *err = "cannot resize an empty axis", -1;
  return 0;
}
