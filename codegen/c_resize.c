/* C emitter of Resize (runtime/resize.c; contract in codegen/cg.h).
 *
 * Resize is separable: each axis that changes is one pass that maps every output
 * coordinate to at most four input taps with weights. Those taps depend only on
 * static shapes and attributes, so they are computed here, in double, with the
 * same rules as the reference interpreter (verify/interp_resize.c), and emitted as
 * static tables; the runtime only gathers and blends. Axes are processed in the
 * interpreter's order (shrinking axes first). A 4-D bilinear resize of H and W
 * (deeplabv3's upsampling) takes a fused 2-D kernel instead. */
#include "c_nn_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_TAPS = 4 };
enum { CT_HALF_PIXEL, CT_PYTORCH_HALF_PIXEL, CT_ALIGN_CORNERS, CT_ASYMMETRIC,
       CT_TF_HALF_PIXEL_FOR_NN, CT_TF_CROP_AND_RESIZE };
enum { NM_ROUND_PREFER_FLOOR, NM_ROUND_PREFER_CEIL, NM_FLOOR, NM_CEIL };
enum { RM_NEAREST, RM_LINEAR, RM_CUBIC };

typedef struct {
  int mode, ctm, nearest, exclude_outside;
  double cubic_a;
} rz_opts;

/* The input coordinate of output coordinate x on an axis of input length len
 * (out_f: the output length as the ONNX reference uses it, scale * len for
 * scales; start/end: the roi of tf_crop_and_resize). */
static double rz_coord(const rz_opts *o, double x, int64_t len, double out_f, double scale,
                       double start, double end) {
  switch (o->ctm) {
  case CT_PYTORCH_HALF_PIXEL: return out_f > 1 ? (x + 0.5) / scale - 0.5 : 0;
  case CT_ALIGN_CORNERS: return out_f == 1 ? 0 : x * (double)(len - 1) / (out_f - 1);
  case CT_ASYMMETRIC: return x / scale;
  case CT_TF_HALF_PIXEL_FOR_NN: return (x + 0.5) / scale;
  case CT_TF_CROP_AND_RESIZE:
    if (out_f == 1) return (end - start) * (double)(len - 1) / 2 + start * (double)(len - 1);
    return x * (end - start) * (double)(len - 1) / (out_f - 1) + start * (double)(len - 1);
  default: return (x + 0.5) / scale - 0.5;
  }
}

/* The taps of input coordinate xo (indices clamped to [0, len), zero weights
 * dropped): their count, or 0 when the output is extrapolated. */
static int rz_taps(const rz_opts *o, double xo, int64_t len, int64_t *idx, double *w) {
  double fl, r;
  int64_t base;
  int cnt = 0, m = 0, k;
  if (!(xo > -1e15 && xo < 1e15)) return 0;
  if (o->ctm == CT_TF_CROP_AND_RESIZE && (xo < 0 || xo > (double)(len - 1))) return 0;
  fl = floor(xo);
  r = xo - fl;
  base = (int64_t)fl;
  if (r == 0) r = 1, base -= 1; /* the reference's pair (base, base+1), ratio in (0, 1] */
  if (o->mode == RM_NEAREST) {
    int up;
    switch (o->nearest) {
    case NM_ROUND_PREFER_CEIL: up = r >= 0.5; break;
    case NM_FLOOR: up = r == 1; break;
    case NM_CEIL: up = 1; break;
    default: up = r > 0.5; break;
    }
    idx[0] = base + up, w[0] = 1, cnt = 1;
  } else if (o->mode == RM_LINEAR) {
    idx[0] = base, w[0] = 1 - r, idx[1] = base + 1, w[1] = r, cnt = 2;
  } else {
    const double A = o->cubic_a;
    double s = 0;
    w[0] = ((A * (r + 1) - 5 * A) * (r + 1) + 8 * A) * (r + 1) - 4 * A;
    w[1] = ((A + 2) * r - (A + 3)) * r * r + 1;
    w[2] = ((A + 2) * (1 - r) - (A + 3)) * (1 - r) * (1 - r) + 1;
    w[3] = ((A * ((1 - r) + 1) - 5 * A) * ((1 - r) + 1) + 8 * A) * ((1 - r) + 1) - 4 * A;
    for (k = 0; k < 4; k++) {
      idx[k] = base - 1 + k;
      if (o->exclude_outside && (idx[k] < 0 || idx[k] >= len)) w[k] = 0;
      s += w[k];
    }
    if (o->exclude_outside && s != 0)
      for (k = 0; k < 4; k++) w[k] /= s;
    cnt = 4;
  }
  for (k = 0; k < cnt; k++) {
    if (w[k] == 0 && cnt > 1) continue;
    idx[m] = idx[k] < 0 ? 0 : idx[k] >= len ? len - 1 : idx[k];
    w[m++] = w[k];
  }
  if (m == 0) idx[0] = base < 0 ? 0 : base >= len ? len - 1 : base, w[0] = 0, m = 1;
  return m;
}

/* Resize's mode attributes; -1 after reporting an unsupported value. */
static int rz_read_opts(cg_ctx *c, const mg_node *n, rz_opts *o) {
  static const char *const modes[] = {"nearest", "linear", "cubic"};
  static const char *const ctms[] = {"half_pixel", "pytorch_half_pixel", "align_corners",
                                     "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize"};
  static const char *const nms[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  const char *m = mg_attr_str(n, "mode", "nearest");
  const char *t = mg_attr_str(n, "coordinate_transformation_mode", "half_pixel");
  const char *nm = mg_attr_str(n, "nearest_mode", "round_prefer_floor");
  int i;
  o->mode = o->ctm = o->nearest = -1;
  for (i = 0; i < 3; i++)
    if (!strcmp(m, modes[i])) o->mode = i;
  for (i = 0; i < 6; i++)
    if (!strcmp(t, ctms[i])) o->ctm = i;
  for (i = 0; i < 4; i++)
    if (!strcmp(nm, nms[i])) o->nearest = i;
  if (o->mode < 0) return cg_unsupported(c, n, "mode '%s'", m);
  if (o->ctm < 0) return cg_unsupported(c, n, "coordinate_transformation_mode '%s'", t);
  if (o->nearest < 0) return cg_unsupported(c, n, "nearest_mode '%s'", nm);
  /* antialias only changes linear and cubic (a wider filter when downsampling) */
  if (mg_attr_int(n, "antialias", 0) && o->mode != RM_NEAREST)
    return cg_unsupported(c, n, "antialias=1");
  o->exclude_outside = (int)mg_attr_int(n, "exclude_outside", 0);
  o->cubic_a = mg_attr_float(n, "cubic_coeff_a", -0.75f);
  return 0;
}

/* The taps of one axis, padded to `taps` per output (extra taps repeat the first
 * index with weight 0; extrapolated outputs get index -1). */
typedef struct {
  int taps, identity;
  int64_t *idx;
  float *w;
} rz_axis;

/* Fills ax for an axis of length L resized to O; -1 on allocation failure. */
static int rz_axis_taps(const rz_opts *o, int64_t L, int64_t O, double out_f, double scale,
                        double rs, double re, rz_axis *ax) {
  int64_t j, ti[MAX_TAPS];
  double tw[MAX_TAPS];
  int k, nt;
  ax->taps = o->mode == RM_NEAREST ? 1 : o->mode == RM_LINEAR ? 2 : 4;
  ax->idx = malloc(sizeof(int64_t) * (size_t)(O * ax->taps + 1));
  ax->w = malloc(sizeof(float) * (size_t)(O * ax->taps + 1));
  if (!ax->idx || !ax->w) return -1;
  ax->identity = L == O;
  for (j = 0; j < O; j++) {
    int64_t *ij = ax->idx + j * ax->taps;
    float *wj = ax->w + j * ax->taps;
    nt = rz_taps(o, rz_coord(o, (double)j, L, out_f, scale, rs, re), L, ti, tw);
    ax->identity &= nt == 1 && ti[0] == j && tw[0] == 1;
    for (k = 0; k < ax->taps; k++) {
      ij[k] = nt == 0 ? -1 : k < nt ? ti[k] : ti[0];
      wj[k] = nt == 0 || k >= nt ? 0.0f : (float)tw[k];
    }
  }
  return 0;
}

int cg_emit_Resize(cg_ctx *c, const mg_node *n) {
  const mg_value *x = n->in[0], *y = n->out[0];
  const mg_value *roi = n->n_in > 1 ? n->in[1] : NULL, *sc = n->n_in > 2 ? n->in[2] : NULL;
  const mg_value *sz = n->n_in > 3 ? n->in[3] : NULL;
  int64_t xd[MG_MAX_RANK], yd[MG_MAX_RANK], od[MG_MAX_RANK], cd[MG_MAX_RANK];
  double scale[MG_MAX_RANK], outf[MG_MAX_RANK], rs[MG_MAX_RANK], re[MG_MAX_RANK];
  int axes[MG_MAX_RANK], order[MG_MAX_RANK], r, na, i, a, no = 0, pass, npass = 0, rc = 0;
  rz_axis ax[MG_MAX_RANK];
  rz_opts o = {0, 0, 0, 0, 0.0};
  const int64_t *axv;
  size_t nax;
  char fe[40];
  if (!nn_is_f32(x) || !nn_is_f32(y))
    return cg_unsupported(c, n, "dtype %s (float32 only)", mg_dtype_name(x->dtype));
  if (rz_read_opts(c, n, &o)) return -1;
  r = cg_dims(x, xd);
  if (r < 1 || cg_dims(y, yd) != r) return cg_unsupported(c, n, "rank mismatch");
  if (roi && cg_numel(roi) == 0) roi = NULL;
  if (sc && cg_numel(sc) == 0) sc = NULL;
  if (sz && cg_numel(sz) == 0) sz = NULL;
  nax = mg_attr_ints(n, "axes", &axv);
  na = nax ? (int)nax : r;
  if (nax > (size_t)r) return cg_unsupported(c, n, "too many axes");
  for (i = 0; i < na; i++) {
    int64_t v = nax ? (axv[i] < 0 ? axv[i] + r : axv[i]) : i;
    if (v < 0 || v >= r) return cg_unsupported(c, n, "axis out of range");
    axes[i] = (int)v;
  }
  for (a = 0; a < r; a++) scale[a] = 1, od[a] = xd[a], outf[a] = (double)xd[a], rs[a] = 0, re[a] = 1;
  if (sz) {
    int64_t v[MG_MAX_RANK];
    const char *pol = mg_attr_str(n, "keep_aspect_ratio_policy", "stretch");
    const int larger = !strcmp(pol, "not_smaller"), stretch = !strcmp(pol, "stretch");
    double s = larger ? 0 : INFINITY;
    if (!stretch && !larger && strcmp(pol, "not_larger"))
      return cg_unsupported(c, n, "keep_aspect_ratio_policy '%s'", pol);
    if (cg_const_ints(sz, v, MG_MAX_RANK) != na) return cg_unsupported(c, n, "sizes must be a constant of %d values", na);
    for (i = 0; i < na; i++) {
      double q;
      if (v[i] < 1 || xd[axes[i]] < 1) return cg_unsupported(c, n, "empty sizes or input");
      q = (double)v[i] / (double)xd[axes[i]];
      s = larger ? fmax(s, q) : fmin(s, q);
    }
    for (i = 0; i < na; i++) {
      a = axes[i];
      if (stretch) {
        od[a] = v[i];
        scale[a] = (double)v[i] / (double)xd[a];
      } else {
        scale[a] = s;
        od[a] = (int64_t)(s * (double)xd[a] + 0.5);
      }
      outf[a] = (double)od[a];
    }
  } else if (sc) {
    float v[MG_MAX_RANK];
    if (cg_const_floats(sc, v, MG_MAX_RANK) != na) return cg_unsupported(c, n, "scales must be a constant of %d values", na);
    for (i = 0; i < na; i++) {
      a = axes[i];
      scale[a] = v[i];
      if (!(scale[a] > 0)) return cg_unsupported(c, n, "scales must be positive");
      outf[a] = scale[a] * (double)xd[a];
      if (!(outf[a] < 1e12)) return cg_unsupported(c, n, "output too large");
      od[a] = (int64_t)floor(outf[a]);
    }
  } else {
    return cg_unsupported(c, n, "Resize needs constant scales or sizes");
  }
  if (o.ctm == CT_TF_CROP_AND_RESIZE) {
    float rv[2 * MG_MAX_RANK];
    int64_t nr = roi ? cg_const_floats(roi, rv, 2 * MG_MAX_RANK) : -1;
    int full;
    if (nr != 2 * na && nr != 2 * r) return cg_unsupported(c, n, "tf_crop_and_resize needs a constant roi");
    full = nr == 2 * r && na != r;
    for (i = 0; i < na; i++) {
      const int k = full ? axes[i] : i, m = full ? r : na;
      a = axes[i];
      rs[a] = rv[k], re[a] = rv[m + k];
    }
  }
  for (a = 0; a < r; a++)
    if (od[a] != yd[a]) return cg_unsupported(c, n, "output shape differs from the computed one");
  if (!nn_fits_int(cg_numel(x)) || !nn_fits_int(cg_numel(y))) return cg_unsupported(c, n, "tensor too large");
  for (a = 0; a < r; a++)
    if (xd[a] < 1 || od[a] < 1) return cg_unsupported(c, n, "empty input or output");
  memset(ax, 0, sizeof ax);
  for (a = 0; a < r && !rc; a++)
    if (rz_axis_taps(&o, xd[a], od[a], outf[a], scale[a], rs[a], re[a], &ax[a]))
      rc = cg_unsupported(c, n, "out of memory");
  /* shrinking axes first, as the interpreter: no intermediate exceeds the larger
   * of input and output */
  for (pass = 0; pass < 2 && !rc; pass++)
    for (a = 0; a < r; a++)
      if (!ax[a].identity && (od[a] < xd[a]) == (pass == 0)) order[no++] = a;
  nn_need(c, "resize.c");
  if (rc) {
    /* reported above */
  } else if (r == 4 && no == 2 && order[0] == 2 && order[1] == 3 && o.mode == RM_LINEAR &&
             o.ctm != CT_TF_CROP_AND_RESIZE) {
    /* both spatial axes upsampled (or both shrunk) bilinearly: the fused kernel */
    cg_line(c, "mg_resize_bilinear2d(%lld, %lld, %lld, %lld, %lld, %s, %s, %s, %s, %s, %s, %s);",
            (long long)(xd[0] * xd[1]), (long long)xd[2], (long long)xd[3], (long long)od[2],
            (long long)od[3], cg_i64s(c, ax[2].idx, (int)(2 * od[2])),
            cg_f32s(c, ax[2].w, (int)(2 * od[2])), cg_i64s(c, ax[3].idx, (int)(2 * od[3])),
            cg_f32s(c, ax[3].w, (int)(2 * od[3])), cg_in(c, x), cg_out(c, y),
            cg_scratch(c, "mg_resize_bilinear_scratch(%lld)", (long long)od[3]));
  } else {
    /* one pass per changing axis, ping-ponging between two halves of scratch;
     * an identity resize is one pass of identity taps (a copy) */
    int64_t maxmid = 0, cur[MG_MAX_RANK];
    const char *buf = NULL;
    if (no == 0) order[no++] = 0;
    memcpy(cd, xd, sizeof(int64_t) * (size_t)r);
    for (i = 0; i + 1 < no; i++) { /* intermediate sizes */
      int64_t t = 1;
      cd[order[i]] = od[order[i]];
      for (a = 0; a < r; a++) t *= cd[a];
      if (t > maxmid) maxmid = t;
    }
    if (no > 1) buf = cg_scratch(c, "%lld", (long long)(2 * maxmid));
    memcpy(cur, xd, sizeof(int64_t) * (size_t)r);
    for (i = 0; i < no; i++, npass++) {
      int64_t outer = 1, inner = 1;
      char src[64], dst[64];
      a = order[i];
      for (int d = 0; d < a; d++) outer *= cur[d];
      for (int d = a + 1; d < r; d++) inner *= cur[d];
      snprintf(src, sizeof src, "%s + %lld", buf ? buf : "", (long long)((i - 1) % 2 * maxmid));
      snprintf(dst, sizeof dst, "%s + %lld", buf ? buf : "", (long long)(i % 2 * maxmid));
      cg_line(c, "mg_resize_axis(%lld, %lld, %lld, %lld, %d, %s, %s, %s, %s, %s);",
              (long long)outer, (long long)cur[a], (long long)od[a], (long long)inner, ax[a].taps,
              cg_i64s(c, ax[a].idx, (int)(od[a] * ax[a].taps)),
              cg_f32s(c, ax[a].w, (int)(od[a] * ax[a].taps)),
              nn_flit(fe, mg_attr_float(n, "extrapolation_value", 0.0f)),
              i == 0 ? cg_in(c, x) : src, i == no - 1 ? cg_out(c, y) : dst);
      cur[a] = od[a];
    }
  }
  for (a = 0; a < r; a++) free(ax[a].idx), free(ax[a].w);
  return rc;
}
