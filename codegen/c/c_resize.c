/* C emitter of Resize (runtime/resize.c; contract in codegen/cg.h).
 *
 * Resize is separable: each axis that changes is one pass that maps every output
 * coordinate to at most four input taps with weights. Those taps depend only on
 * static shapes and attributes, so they are computed here by the geometry the
 * reference interpreter uses too (core/resize_geom.c), and emitted as static
 * tables; the runtime only gathers and blends. Axes are processed in the
 * interpreter's order (shrinking axes first). A 4-D bilinear resize of H and W
 * (deeplabv3's upsampling) takes a fused 2-D kernel instead. */
#include "c_nn_util.h"
#include "resize_geom.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The taps of one axis, padded to `taps` per output (extra taps repeat the first
 * index with weight 0; extrapolated outputs get index -1). */
typedef struct {
  int taps, identity;
  int64_t *idx;
  float *w;
} rz_axis;

/* Fills ax for one axis of the geometry; -1 on allocation failure. */
static int rz_axis_taps(const mg_resize_opts *o, const mg_rz_axis *g, rz_axis *ax) {
  int64_t j, ti[MG_RZ_MAX_TAPS], O = g->out_len;
  double tw[MG_RZ_MAX_TAPS];
  int k, nt;
  ax->taps = o->mode == MG_RZ_NEAREST ? 1 : o->mode == MG_RZ_LINEAR ? 2 : 4;
  ax->idx = malloc(sizeof(int64_t) * (size_t)(O * ax->taps + 1));
  ax->w = malloc(sizeof(float) * (size_t)(O * ax->taps + 1));
  if (!ax->idx || !ax->w) return -1;
  ax->identity = g->in_len == O;
  for (j = 0; j < O; j++) {
    int64_t *ij = ax->idx + j * ax->taps;
    float *wj = ax->w + j * ax->taps;
    nt = mg_resize_taps(o, g, j, ti, tw);
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
  int64_t xd[MG_MAX_RANK], yd[MG_MAX_RANK], od[MG_MAX_RANK], cd[MG_MAX_RANK], sizes[MG_MAX_RANK];
  float scales[MG_MAX_RANK], rv[2 * MG_MAX_RANK];
  double roiv[2 * MG_MAX_RANK];
  int order[MG_MAX_RANK], r, i, a, no = 0, pass, npass = 0, rc = 0, n_sc = 0, n_sz = 0, n_roi = 0;
  rz_axis ax[MG_MAX_RANK];
  mg_rz_axis geo[MG_MAX_RANK];
  mg_resize_opts o;
  const char *attr, *value, *err;
  char fe[40];
  if (!nn_is_f32(x) || !nn_is_f32(y))
    return cg_unsupported(c, n, "dtype %s (float32 only)", mg_dtype_name(x->dtype));
  if (mg_resize_read_opts(n, &o, &attr, &value)) return cg_unsupported(c, n, "%s '%s'", attr, value);
  r = cg_dims(x, xd);
  if (r < 1 || cg_dims(y, yd) != r) return cg_unsupported(c, n, "rank mismatch");
  if (sz && cg_numel(sz) > 0) {
    n_sz = (int)cg_const_ints(sz, sizes, MG_MAX_RANK);
    if (n_sz < 0) return cg_unsupported(c, n, "sizes must be a constant");
  } else if (sc && cg_numel(sc) > 0) {
    n_sc = (int)cg_const_floats(sc, scales, MG_MAX_RANK);
    if (n_sc < 0) return cg_unsupported(c, n, "scales must be a constant");
  }
  if (o.ctm == MG_RZ_TF_CROP_AND_RESIZE) {
    n_roi = roi ? (int)cg_const_floats(roi, rv, 2 * MG_MAX_RANK) : -1;
    if (n_roi < 0) return cg_unsupported(c, n, "tf_crop_and_resize needs a constant roi");
    for (i = 0; i < n_roi; i++) roiv[i] = rv[i];
  }
  if (mg_resize_geometry(n, &o, r, xd, scales, n_sc, sizes, n_sz, roiv, n_roi, geo, &err))
    return cg_unsupported(c, n, "%s", err);
  for (a = 0; a < r; a++) od[a] = geo[a].out_len;
  for (a = 0; a < r; a++)
    if (od[a] != yd[a]) return cg_unsupported(c, n, "output shape differs from the computed one");
  if (!nn_fits_int(cg_numel(x)) || !nn_fits_int(cg_numel(y))) return cg_unsupported(c, n, "tensor too large");
  for (a = 0; a < r; a++)
    if (xd[a] < 1 || od[a] < 1) return cg_unsupported(c, n, "empty input or output");
  memset(ax, 0, sizeof ax);
  for (a = 0; a < r && !rc; a++)
    if (rz_axis_taps(&o, &geo[a], &ax[a]))
      rc = cg_unsupported(c, n, "out of memory");
  /* shrinking axes first, as the interpreter: no intermediate exceeds the larger
   * of input and output */
  for (pass = 0; pass < 2 && !rc; pass++)
    for (a = 0; a < r; a++)
      if (!ax[a].identity && (od[a] < xd[a]) == (pass == 0)) order[no++] = a;
  nn_need(c, "resize.c");
  if (rc) {
    /* reported above */
  } else if (r == 4 && no == 2 && order[0] == 2 && order[1] == 3 && o.mode == MG_RZ_LINEAR &&
             o.ctm != MG_RZ_TF_CROP_AND_RESIZE) {
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
